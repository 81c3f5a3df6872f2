"""Headless runner (`gitm-tui --no-ui`): JSON lines on stdout, narration on stderr. Never imports textual."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from typing import TextIO

from engine.runtime import Engine, RunConfig
from engine.runtime.budget import format_seconds
from engine.runtime.events import (
    Event,
    InterventionUpdate,
    LogEvent,
    PhaseChanged,
    ReportWritten,
    RunFinished,
    RunStarted,
)
from engine.text import clean
from gitm_tui.exit_codes import ExitCode

#: the most characters of one narration line (a note may quote a program's whole output)
_LINE_CHARS = 8192


def _say(text: str, err: TextIO) -> None:
    """Write one narration line, cleaned (engine.text.clean): notes and log messages quote a
    program's output and trace names, which must not put an escape sequence on the terminal."""
    print(clean(text, _LINE_CHARS), file=err)


def _narrate(ev: Event, err: TextIO) -> None:
    """Write the human line for an event (only the ones a person wants to read)."""
    if isinstance(ev, RunStarted):
        where = f"{ev.device.upper()} (no GPU used)" if ev.simulated else ev.device
        _say(
            f"gitm-tui: run {ev.run_id}: {ev.workload} on {where}, "
            f"budget {format_seconds(ev.budget_s)}, seed {ev.seed}, target {ev.target:.0%}, "
            f"approvals {ev.approve}; run store {ev.run_dir}",
            err,
        )
    elif isinstance(ev, InterventionUpdate):
        meas = f", measured {ev.measured_gain:+.1%}" if ev.measured_gain is not None else ""
        note = f" — {ev.note}" if ev.note else ""
        pred = (
            f"predicted {ev.predicted_gain:+.1%} (confidence {ev.confidence:.2f})"
            if ev.predicted_gain == ev.predicted_gain
            else "no prediction (measured only)"
        )
        _say(f"gitm-tui: {ev.id} {ev.lever} [{ev.safety}] {ev.state}: {pred}{meas}{note}", err)
    elif isinstance(ev, ReportWritten):
        _say(f"gitm-tui: {ev.summary}; report {ev.path}", err)
    elif isinstance(ev, PhaseChanged) and ev.phase != "done":
        _say(f"gitm-tui: phase {ev.phase}" + (f" — {ev.detail}" if ev.detail else ""), err)
    elif isinstance(ev, LogEvent):
        _say(f"gitm-tui: {ev.level}: {ev.message}", err)
    elif isinstance(ev, RunFinished) and not ev.segments:
        _say(f"gitm-tui: {ev.status} in {format_seconds(ev.wall_s)}", err)
    elif isinstance(ev, RunFinished):
        shares = ", ".join(f"{k} {v:.0%}" for k, v in ev.regime_shares.items())
        _say(
            f"gitm-tui: {ev.status}: {ev.segments} segments decoded in "
            f"{format_seconds(ev.wall_s)} ({ev.iterations} iterations, "
            f"{ev.sim_time_ns / 1e9:.2f}s device time): {shares}",
            err,
        )
        v = ev.validation
        if v:
            _say(
                f"gitm-tui: vs {v['against']}: macro-F1 {v['macro_f1']:.3f}, "
                f"accuracy {v['accuracy']:.3f}",
                err,
            )


async def run_headless(
    config: RunConfig, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> ExitCode:
    """Run the engine to completion, streaming events; return the exit code."""
    engine = Engine(config)
    sub = engine.bus.subscribe()
    loop = asyncio.get_running_loop()
    interrupted = False

    def on_signal() -> None:
        nonlocal interrupted
        interrupted = True
        engine.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        # not the main thread / not POSIX: Ctrl-C then ends the process the usual way
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
    task = asyncio.ensure_future(engine.run())
    prompter = _Prompter(engine, err) if config.approve == "manual" and sys.stdin.isatty() else None
    final: RunFinished | None = None
    try:
        async for ev in sub:
            try:
                out.write(json.dumps(ev.to_json(), separators=(",", ":")) + "\n")
                out.flush()
            except BrokenPipeError:  # reader went away (| head): finish quietly
                engine.stop()
                out = open("/dev/null", "w")  # noqa: SIM115 - lives until the process exits
            _narrate(ev, err)
            if isinstance(ev, InterventionUpdate) and ev.state == "PROPOSED":
                if prompter is not None:
                    prompter.ask(ev)
                elif config.approve == "manual":
                    _say(
                        f"gitm-tui: to decide: gitm-tui approve {engine.run_id} {ev.id} "
                        f"(or reject) from another terminal",
                        err,
                    )
            if isinstance(ev, RunFinished):
                final = ev
        await task
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    if prompter is not None:
        prompter.close()
    if final is None or final.status == "failed":
        return ExitCode.INTERNAL
    if final.status == "workload_failed":  # the error line was narrated
        return ExitCode.INPUT
    # a completed run is OK whether or not it met --target: the report and the run_finished
    # record (target_met) say which, and why not
    return ExitCode.INTERRUPTED if interrupted else ExitCode.OK


class _Prompter:
    """``manual`` on a terminal: ask y/n for each proposal, one at a time, in a thread (the
    engine keeps running while the question waits)."""

    def __init__(self, engine: Engine, err: TextIO) -> None:
        import queue
        import threading

        self.engine, self.err = engine, err
        self.loop = asyncio.get_running_loop()
        self.q: queue.Queue[InterventionUpdate | None] = queue.Queue()
        self.asked: set[str] = set()
        threading.Thread(target=self._run, name="gitm-prompt", daemon=True).start()

    def ask(self, ev: InterventionUpdate) -> None:
        if ev.id not in self.asked:
            self.asked.add(ev.id)
            self.q.put(ev)

    def close(self) -> None:
        self.q.put(None)

    def _run(self) -> None:
        while (ev := self.q.get()) is not None:
            prompt = clean(
                f"gitm-tui: approve {ev.id} {ev.lever} [{ev.safety}], predicted "
                f"{ev.predicted_gain:+.1%}? [y/n/s(kip)] ",
                _LINE_CHARS,
            )
            try:
                self.err.write(prompt)
                self.err.flush()
                answer = sys.stdin.readline().strip().lower()
            except (OSError, ValueError):
                return
            action = {"y": "approve", "yes": "approve", "n": "reject", "no": "reject"}.get(answer)
            if action:
                self.loop.call_soon_threadsafe(self.engine.decide, action, ev.id, "tty")
