"""Headless runner (`gitm-tui --no-ui`): JSON lines on stdout, narration on stderr. Never imports textual."""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import signal
import sys
import threading
from collections.abc import Callable
from typing import Protocol, TextIO

from engine.runtime import Engine, RunConfig
from engine.runtime.events import Event, InterventionUpdate, RunFinished
from engine.runtime.narrate import event_lines, prediction
from engine.text import clean
from gitm_tui.exit_codes import ExitCode, write_refused


class Writes(Protocol):
    """What the runner writes lines to (a stream, or ``_Stream``)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


#: the most characters of one narration line (a note may quote a program's whole output)
_LINE_CHARS = 8192


def _say(text: str, err: Writes) -> None:
    """Write one narration line, cleaned (engine.text.clean): notes and log messages quote a
    program's output and trace names, which must not put an escape sequence on the terminal."""
    err.write(clean(text, _LINE_CHARS) + "\n")  # one write: a line is never split


def _narrate(ev: Event, err: Writes) -> None:
    """Write the human lines for an event (engine.runtime.narrate: the one wording of events
    as text, which the dashboard's log and engine.optimize share)."""
    for line in event_lines(ev):
        _say(f"gitm-tui: {line.full}", err)


#: seconds the end of a run waits for stdout's and stderr's readers to take the last lines
DRAIN_S = 60.0


class _Lines:
    """Every line the runner writes, written by one thread in order: a reader that stalls
    (``gitm-tui --no-ui | (sleep 40; cat)``: a full pipe blocks the write) never stalls the run,
    whose measurements would count the wait. The run's end waits for the readers (``drain``),
    so no line is lost unless they stall past ``DRAIN_S``."""

    def __init__(self, on_broken_out: Callable[[], None]) -> None:
        self.q: queue.SimpleQueue[tuple[TextIO, str] | None] = queue.SimpleQueue()
        self.broken: set[int] = set()
        self.on_broken_out = on_broken_out
        self.out: TextIO | None = None
        self.t = threading.Thread(target=self._run, name="gitm-lines", daemon=True)
        self.t.start()

    def stream(self, real: TextIO, is_out: bool = False) -> _Stream:
        if is_out:
            self.out = real
        return _Stream(self, real)

    def _run(self) -> None:
        while (item := self.q.get()) is not None:
            real, text = item
            if id(real) in self.broken:
                continue
            try:
                real.write(text)
                real.flush()
            except BrokenPipeError:  # the reader went away (| head): finish quietly
                self.broken.add(id(real))
                if real is self.out:
                    self.on_broken_out()
            except (OSError, ValueError):  # closed or failing: nothing more to write there
                self.broken.add(id(real))

    def drain(self) -> bool:
        """Wait for every line to be written (at most ``DRAIN_S``); False if a reader stalled."""
        self.q.put(None)
        self.t.join(DRAIN_S)
        return not self.t.is_alive()


class _Stream:
    """A text stream whose writes go to ``_Lines`` (never block the caller)."""

    def __init__(self, lines: _Lines, real: TextIO) -> None:
        self.lines, self.real = lines, real

    def write(self, text: str) -> int:
        self.lines.q.put((self.real, text))
        return len(text)

    def flush(self) -> None:
        pass


async def run_headless(
    config: RunConfig, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> ExitCode:
    """Run the engine to completion, streaming events; return the exit code."""
    engine = Engine(config)
    sub = engine.bus.subscribe()
    loop = asyncio.get_running_loop()
    interrupted = False

    def stop_soon() -> None:  # (from the writer thread: the loop runs engine.stop)
        loop.call_soon_threadsafe(engine.stop)

    lines = _Lines(stop_soon)
    real_err = err
    out_s, err_s = lines.stream(out, is_out=True), lines.stream(err)

    def on_signal() -> None:
        nonlocal interrupted
        interrupted = True
        engine.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        # not the main thread / not POSIX: Ctrl-C then ends the process the usual way
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
    task = asyncio.ensure_future(engine.run())
    # narration and the questions (manual, on a terminal) share the terminal's lines
    narration = _Narration(err_s)
    prompter = (
        _Prompter(engine, narration) if config.approve == "manual" and sys.stdin.isatty() else None
    )
    final: RunFinished | None = None
    try:
        async for ev in sub:
            out_s.write(json.dumps(ev.to_json(), separators=(",", ":")) + "\n")
            _narrate(ev, narration)
            if isinstance(ev, InterventionUpdate) and ev.state == "PROPOSED":
                if prompter is not None:
                    prompter.ask(ev)
                elif config.approve == "manual":
                    _say(
                        f"gitm-tui: to decide: gitm-tui approve {engine.run_id} {ev.id} "
                        f"(or reject) from another terminal",
                        narration,
                    )
            if isinstance(ev, RunFinished):
                final = ev
        try:
            await task
        except OSError as e:  # the run store refused a write: the engine's log line said so
            if not (engine.store_refused and write_refused(e)):
                raise
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        if not await asyncio.to_thread(lines.drain):  # (the run is over: its output goes out)
            with contextlib.suppress(OSError, ValueError):
                print(
                    f"gitm-tui: a reader of the output took no lines for {DRAIN_S:g} s after "
                    "the run ended; the rest is in the run store's journal",
                    file=real_err,
                )
    if prompter is not None:
        prompter.close()
    if engine.store_refused:  # disk full, read-only: the environment, not a bug
        return ExitCode.INPUT
    if final is None or final.status == "failed":
        return ExitCode.INTERNAL
    if final.status == "workload_failed":  # the error line was narrated
        return ExitCode.INPUT
    # a completed run is OK whether or not it met --target: the report and the run_finished
    # record (target_met) say which, and why not
    return ExitCode.INTERRUPTED if interrupted else ExitCode.OK


class _Narration:
    """The narration stream while a question may wait on the terminal: a line written then goes
    under the question, and the question is asked again below it (it used to land on the
    question's own line, after the cursor)."""

    def __init__(self, out: Writes) -> None:
        import threading

        self.out, self.question = out, ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            if self.question and text.endswith("\n"):
                text = "\n" + text + self.question
            return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()

    def ask(self, question: str) -> None:
        with self._lock:
            self.question = question
            self.out.write(question)
            self.out.flush()

    def answered(self) -> None:
        """The person pressed Enter: the terminal is on a fresh line."""
        with self._lock:
            self.question = ""


class _Prompter:
    """``manual`` on a terminal: ask y/n for each proposal, one at a time, in a thread (the
    engine keeps running while the question waits)."""

    def __init__(self, engine: Engine, err: _Narration) -> None:
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
                f"gitm-tui: approve {ev.id} {ev.lever} [{ev.safety}], "
                f"{prediction(ev.predicted_gain, None)}? [y/n/s(kip)/f(inish deciding)] ",
                _LINE_CHARS,
            )
            try:
                self.err.ask(prompt)
                answer = sys.stdin.readline().strip().lower()
            except (OSError, ValueError):
                return
            finally:
                self.err.answered()
            action = {"y": "approve", "yes": "approve", "n": "reject", "no": "reject"}.get(answer)
            if action:
                self.loop.call_soon_threadsafe(self.engine.decide, action, ev.id, "tty")
            elif answer in ("f", "finish"):  # done deciding: the apply phase ends, the report
                self.loop.call_soon_threadsafe(self.engine.finish_apply, "tty")
