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
from engine.runtime.events import Event, LogEvent, PhaseChanged, RunFinished, RunStarted
from gitm_tui.exit_codes import ExitCode


def _narrate(ev: Event, err: TextIO) -> None:
    """Write the human line for an event (only the ones a person wants to read)."""
    if isinstance(ev, RunStarted):
        print(
            f"gitm-tui: run {ev.run_id}: {ev.workload} on {ev.device.upper()} (no GPU used), "
            f"budget {format_seconds(ev.budget_s)}, seed {ev.seed}",
            file=err,
        )
    elif isinstance(ev, PhaseChanged) and ev.phase != "done":
        print(f"gitm-tui: phase {ev.phase}" + (f" — {ev.detail}" if ev.detail else ""), file=err)
    elif isinstance(ev, LogEvent):
        print(f"gitm-tui: {ev.level}: {ev.message}", file=err)
    elif isinstance(ev, RunFinished):
        shares = ", ".join(f"{k} {v:.0%}" for k, v in ev.regime_shares.items())
        print(
            f"gitm-tui: {ev.status}: {ev.segments} segments decoded in "
            f"{format_seconds(ev.wall_s)} ({ev.iterations} iterations, "
            f"{ev.sim_time_ns / 1e9:.2f}s device time): {shares}",
            file=err,
        )
        v = ev.validation
        if v:
            print(
                f"gitm-tui: vs {v['against']}: macro-F1 {v['macro_f1']:.3f}, "
                f"accuracy {v['accuracy']:.3f}",
                file=err,
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
            if isinstance(ev, RunFinished):
                final = ev
        await task
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    if final is None or final.status == "failed":
        return ExitCode.INTERNAL
    return ExitCode.INTERRUPTED if interrupted else ExitCode.OK
