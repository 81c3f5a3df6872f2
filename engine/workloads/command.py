"""``--workload command -- ARGV…``: any real process, optimized by the same loop.

The program is run directly (no shell) once per measurement; its metric is read from its
output with a regular expression (one capture group, a number); its levers are choices the
user declares — environment variables or command-line arguments::

    gitm-tui --no-ui --workload command --metric 'time_s=([0-9.]+)' \\
        --lever 'threads=env:OMP_NUM_THREADS=1,2' --lever 'block=arg:--block=16,64,256' \\
        --check 'checksum=42' -- python job.py --n 512

The first value of each lever is the baseline. A measurement fails — and the trial is rolled
back — when the program exits non-zero, times out, prints no metric or one that is not a finite
positive number (nan, inf, 0: no ratio can be taken, so never a gain), or (with ``--check``)
does not print the check pattern — or when a ``--metric`` or ``--check`` pattern runs longer
than ``LINE_S`` on one line of output (it backtracks: ``(a|aa)+b``), which is said, never a hang.
Output (stdout and stderr together) is read line by line as it streams: the metric is the last
match in any line, a pattern never spans lines, and only the last few hundred characters are
kept. Every run ends by the run's budget at the latest, and a
stop (SIGINT/SIGTERM, the dashboard quitting) ends the running program's process group.
On Linux the program runs under a child subreaper (engine/workloads/reaper.py): every
descendant it leaves — a daemon in another session and process group, with an empty
environment, a double fork — is reparented to the reaper and ended when the program ends, and
the output ends with them (a daemon holding the pipe open does not hold the measurement).
Whatever the program started outside its group also carries ``TAG_VAR`` in its environment, by
which a killed run's next start ends it (engine/store/runs.py ``end_tagged``).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import regex

from engine.store.runs import TAG_VAR, end_tagged, forget_program, new_tag, record_program


class CommandError(ValueError):
    """A bad command-workload definition (one line for the user)."""


#: seconds a --metric or --check pattern may take on one line of output. The ``regex`` engine
#: checks its own clock while it matches (Python's ``re`` cannot be stopped: a pattern like
#: ``(a|aa)+b`` on one line of output held the GIL for hours) and lets go of the GIL meanwhile
LINE_S = 0.5


def _compile(flag: str, pattern: str) -> Any:
    """``pattern`` compiled by ``regex``, or CommandError (one line) when it is not a regex."""
    try:
        return regex.compile(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError) as e:
        raise CommandError(f"bad {flag} {pattern!r}: {e}") from None


@dataclass(frozen=True)
class ChoiceLever:
    """One user-declared lever: an environment variable or an argument with candidate values."""

    name: str
    kind: Literal["env", "arg"]
    key: str  # VAR for env, --flag for arg
    values: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> ChoiceLever:
        """'NAME=env:VAR=v1,v2' or 'NAME=arg:--flag=v1,v2' (the first value is the baseline)."""
        m = re.fullmatch(r"([A-Za-z_][\w-]*)=(env|arg):([^=]+)=(.+)", text.strip())
        if not m:
            raise CommandError(
                f"bad --lever {text!r}: use NAME=env:VAR=v1,v2,… or NAME=arg:--flag=v1,v2,…"
            )
        values = tuple(v for v in m.group(4).split(",") if v != "")
        if len(values) < 2:
            raise CommandError(
                f"bad --lever {text!r}: give at least two values (the first is the baseline)"
            )
        return cls(m.group(1), m.group(2), m.group(3), values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class CommandSpec:
    """The program, how to read its metric, and its levers."""

    argv: tuple[str, ...]
    metric: str  # regex with one group
    goal: Literal["min", "max"] = "min"
    levers: tuple[ChoiceLever, ...] = ()
    check: str | None = None
    timeout_s: float = 300.0

    def __post_init__(self) -> None:
        if not self.argv:
            raise CommandError("--workload command needs the program after '--'")
        rx = _compile("--metric", self.metric)
        if rx.groups != 1:
            raise CommandError(
                f"bad --metric {self.metric!r}: it needs exactly one (group) around the number"
            )
        if self.check is not None:
            _compile("--check", self.check)
        names = [lv.name for lv in self.levers]
        if len(set(names)) != len(names):
            raise CommandError("lever names must be unique")


@dataclass(frozen=True)
class CommandState:
    """The chosen value of each lever (JSON-friendly)."""

    choice: tuple[tuple[str, str], ...]

    def get(self, name: str) -> str:
        return dict(self.choice)[name]

    def with_choice(self, name: str, value: str) -> CommandState:
        return CommandState(tuple((n, value if n == name else v) for n, v in self.choice))

    def model_dump_json(self, indent: int | None = None) -> str:
        import json

        return json.dumps(dict(self.choice), indent=indent)


@dataclass
class CommandRun:
    """One run of the program."""

    value: float | None
    wall_s: float
    ok: bool
    reason: str = ""
    output_tail: str = ""
    log: str = ""  # its whole output (up to LOG_CAP), relative to the run folder; '' if none


@dataclass
class CommandMeasurement:
    """Repeated runs of one state (the loop's Measurement for a command workload)."""

    runs: list[CommandRun] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)

    @property
    def mean_ns(self) -> float:
        """Mean metric over the runs that produced one (the slot the loop reads)."""
        vals = [r.value for r in self.runs if r.value is not None]
        return float(sum(vals) / len(vals)) if vals else float("nan")

    trace = None  # no device trace: the dashboard has nothing to stream


#: output characters kept per run for messages; the rest is scanned as it streams and dropped,
#: so a program printing gigabytes costs no memory
TAIL_CHARS = 400
#: a line longer than this is scanned in pieces of this size (a metric never spans them)
MAX_LINE = 1 << 16
#: after SIGTERM, how long a stopped program's process group gets before SIGKILL
TERM_GRACE_S = 2.0
#: bytes of one run's output kept in the run folder (logs/run-NNNN.log); the rest is dropped
LOG_CAP = 256 * 1024


class _OutputScanner:
    """Scans a program's output line by line as it arrives: the last metric match, whether the
    check pattern was seen, and the last ``TAIL_CHARS`` characters — nothing else is kept."""

    def __init__(self, metric: Any, check: Any, sink: Any = None) -> None:
        self._metric, self._check = metric, check
        #: why a pattern was given up on (it ran over LINE_S on a line); '' while none was
        self.slow = ""
        self._sink = sink  # a binary file the output is copied to (up to LOG_CAP), or None
        self._logged = 0
        self._partial = b""
        self.last: str | None = None
        self.checked = False
        self.tail = ""

    def feed(self, chunk: bytes) -> None:
        if self._sink is not None and self._logged < LOG_CAP:
            try:
                self._sink.write(chunk[: LOG_CAP - self._logged])
                self._logged += min(len(chunk), LOG_CAP - self._logged)
            except OSError:  # a full disk stops the copy, never the run
                self._sink = None
        buf = self._partial + chunk
        *lines, self._partial = buf.split(b"\n")
        while len(self._partial) > MAX_LINE:
            lines.append(self._partial[:MAX_LINE])
            self._partial = self._partial[MAX_LINE:]
        for line in lines:
            self._line(line.decode("utf-8", "replace"))

    def close(self) -> None:
        if self._partial:
            self._line(self._partial.decode("utf-8", "replace"))
            self._partial = b""
        if self._sink is not None:
            with contextlib.suppress(OSError):
                self._sink.close()
            self._sink = None

    def _line(self, text: str) -> None:
        self.tail = (self.tail + text + "\n")[-TAIL_CHARS:]
        if self.slow:
            return
        which = "--metric"
        try:
            found = self._metric.findall(text, timeout=LINE_S, concurrent=True)
            if found:
                self.last = found[-1]
            which = "--check"
            if self._check is not None and not self.checked:
                self.checked = bool(self._check.search(text, timeout=LINE_S, concurrent=True))
        except TimeoutError:
            self.slow = (
                f"the {which} pattern ran over {LINE_S:g} s on one line of output "
                f"({len(text):,} characters): it backtracks; write it without a repeat around a "
                "repeat or an alternation"
            )


class CommandWorkload:
    """Runs the program for real; levers are its declared choices.

    Each run is bounded by the spec's timeout and by ``deadline`` (a ``time.monotonic()``
    instant the engine derives from the run's budget); ``cancel()`` (a signal, the operator
    quitting) ends the running program — its whole process group — and starts no other."""

    kind = "command"
    name = "command"

    def __init__(self, spec: CommandSpec) -> None:
        self.spec = spec
        self.base = CommandState(tuple((lv.name, lv.values[0]) for lv in spec.levers))
        self._metric = _compile("--metric", spec.metric)
        self._check = _compile("--check", spec.check) if spec.check else None
        self.deadline: float | None = None
        self._cancelled = threading.Event()
        #: the run folder: each run's output is copied to logs/run-NNNN.log there (None: not)
        self.log_dir: Path | None = None
        self._runs = 0
        #: each running program's tag (TAG_VAR), by pid
        self._tags: dict[int, str] = {}

    def output_log(self) -> tuple[Any, str]:
        """A binary file for the next run's output and its path relative to the run folder;
        (None, '') when there is no run folder or the file cannot be made."""
        if self.log_dir is None:
            return None, ""
        self._runs += 1
        rel = f"logs/run-{self._runs:04d}.log"
        try:
            (self.log_dir / "logs").mkdir(parents=True, exist_ok=True)
            return (self.log_dir / rel).open("wb"), rel
        except OSError:
            return None, ""

    @property
    def title(self) -> str:
        return " ".join(self.spec.argv)

    def cancel(self) -> None:
        """Stop the running program and refuse to start another (thread-safe)."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def argv_env(self, state: CommandState) -> tuple[list[str], dict[str, str]]:
        """The argv and environment for ``state`` (arguments replaced or appended)."""
        argv = list(self.spec.argv)
        env = dict(os.environ)
        for lv in self.spec.levers:
            v = state.get(lv.name)
            if lv.kind == "env":
                env[lv.key] = v
            else:
                flag = lv.key
                for i, a in enumerate(argv):
                    if a == flag and i + 1 < len(argv):
                        argv[i + 1] = v
                        break
                    if a.startswith(flag + "="):
                        argv[i] = f"{flag}={v}"
                        break
                else:
                    argv += [flag, v]
        return argv, env

    def _limit(self) -> tuple[float, str]:
        """Seconds this run may take, and what ends it when they run out."""
        limit, why = self.spec.timeout_s, f"timed out after {self.spec.timeout_s:g} s"
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left < limit:
                limit, why = left, "stopped: the run's budget ended"
        return limit, why

    def refusal(self) -> CommandRun | None:
        """Why no run may start now (the run was stopped, the budget ended), else None."""
        if self.cancelled:
            return CommandRun(None, 0.0, False, "stopped before it started (the run was stopped)")
        if self._limit()[0] <= 0:
            return CommandRun(None, 0.0, False, "not started: the run's budget had ended")
        return None

    def start(
        self, argv: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()
    ) -> subprocess.Popen[bytes]:
        """Start the program: no shell, its own process group (its children are stopped with
        it), stdout and stderr together on one pipe; CommandError (one line) if it cannot."""
        tag = new_tag()  # every descendant inherits it: found again if it leaves the group
        _runnable(argv[0], env)
        try:
            p = subprocess.Popen(
                reaped(argv),
                env={**env, TAG_VAR: tag},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=pass_fds,
            )
            self._tags[p.pid] = tag
            if self.log_dir is not None:  # a killed run's next start ends what it left
                record_program(self.log_dir, p.pid, tag)
            return p
        except FileNotFoundError:
            raise CommandError(f"cannot run {argv[0]!r}: no such program") from None
        except PermissionError:
            raise CommandError(f"cannot run {argv[0]!r}: permission denied") from None

    def watch(
        self, p: subprocess.Popen[bytes], t0: float, enough: Callable[[], bool] | None = None
    ) -> str:
        """Wait for the program; return '' when it exited by itself (what it left in its group
        is ended), "sampled" once ``enough()`` holds, or why it was stopped (its group ended)."""
        limit, why = self._limit()
        ended = ""
        while p.poll() is None:
            if enough is not None and enough():
                ended = "sampled"
            elif self.cancelled:
                ended = "stopped (the run was stopped)"
            elif time.monotonic() - t0 >= limit:
                ended = why
            if ended:
                _stop_group(p)
                self._forget(p)
                return ended
            self._cancelled.wait(0.02)
        _end_leftovers(p)
        self._forget(p)
        return ""

    def _forget(self, p: subprocess.Popen[bytes]) -> None:
        """The program has ended: end what it started outside its group, forget its note."""
        end_tagged(self._tags.pop(p.pid, ""))
        if self.log_dir is not None:
            forget_program(self.log_dir)

    def run_once(self, state: CommandState) -> CommandRun:
        """Run the program once (no shell, its own process group) and read its metric."""
        refused = self.refusal()
        if refused is not None:
            return refused
        argv, env = self.argv_env(state)
        t0 = time.monotonic()
        p = self.start(argv, env)
        sink, log = self.output_log()
        scan = _OutputScanner(self._metric, self._check, sink)
        reader = read_output(p, scan)
        ended = self.watch(p, t0)
        reader.join(timeout=TERM_GRACE_S)
        scan.close()
        wall = time.monotonic() - t0
        tail = scan.tail
        if ended:
            return CommandRun(None, wall, False, ended, tail, log)
        if scan.slow:
            return CommandRun(None, wall, False, scan.slow, tail, log)
        if p.returncode != 0:
            return CommandRun(None, wall, False, f"exit status {p.returncode}", tail, log)
        if scan.last is None:
            return CommandRun(
                None, wall, False, "the metric pattern was not in the output", tail, log
            )
        try:
            v = float(scan.last)
        except ValueError:
            return CommandRun(None, wall, False, f"metric {scan.last!r} is not a number", tail, log)
        if not (math.isfinite(v) and v > 0):  # nan, inf, 0, negative: no ratio, never a gain
            return CommandRun(
                None,
                wall,
                False,
                f"metric {scan.last!r} is not a finite positive number (a failed measurement)",
                tail,
                log,
            )
        if self._check is not None and not scan.checked:
            return CommandRun(
                v, wall, False, f"check pattern {self.spec.check!r} not in the output", tail, log
            )
        return CommandRun(v, wall, True, "", tail, log)

    def measure(self, state: CommandState, n: int) -> CommandMeasurement:
        runs = []
        for _ in range(n):
            runs.append(self.run_once(state))
            if self.cancelled:
                break
        return CommandMeasurement(runs)


#: the helper that runs the program as its child subreaper (engine/workloads/reaper.py)
REAPER = Path(__file__).with_name("reaper.py")


def reaped(argv: list[str]) -> list[str]:
    """``argv`` run under the reaper (engine.workloads.reaper): every descendant of the program
    — one that left its group and session, with an empty environment — ends with it, and its
    output ends when they have. Linux only (the subreaper is Linux's); elsewhere ``argv``."""
    if sys.platform != "linux" or not sys.executable or not REAPER.is_file():
        return argv
    return [sys.executable, "-I", "-S", str(REAPER), *argv]


def _runnable(program: str, env: dict[str, str]) -> None:
    """CommandError (one line) when ``program`` cannot be run: not found on the environment's
    PATH, or not executable — said before the reaper starts (its exec would only exit 127)."""
    import shutil

    path = env.get("PATH", os.defpath)
    if shutil.which(program, os.F_OK, path) is None:
        raise CommandError(f"cannot run {program!r}: no such program")
    found = shutil.which(program, os.X_OK, path)
    if found is None or os.path.isdir(found):
        raise CommandError(f"cannot run {program!r}: permission denied")


def read_output(p: subprocess.Popen[bytes], scan: _OutputScanner) -> threading.Thread:
    """Feed the program's output to ``scan`` as it streams, in a thread (returned, started)."""
    assert p.stdout is not None
    out = p.stdout

    def read() -> None:
        fd = out.fileno()
        for chunk in iter(lambda: os.read(fd, 1 << 16), b""):
            scan.feed(chunk)
        out.close()

    reader = threading.Thread(target=read, name="command output", daemon=True)
    reader.start()
    return reader


def _end_leftovers(p: subprocess.Popen[bytes]) -> None:
    """The program exited by itself: end what it left running in its process group (helpers,
    daemons), SIGTERM then SIGKILL — nothing it started outlives the measurement."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            return  # the group is empty: nothing was left
        time.sleep(0.2)


def _stop_group(p: subprocess.Popen[bytes]) -> None:
    """SIGTERM the program's process group, SIGKILL it after ``TERM_GRACE_S``."""
    for sig, wait in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, sig)
        try:
            p.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
