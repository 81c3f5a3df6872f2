"""``--workload command -- ARGV…``: any real process, optimized by the same loop.

The program is run directly (no shell) once per measurement; its metric is read from its
output with a regular expression (one capture group, a number); its levers are choices the
user declares — environment variables or command-line arguments::

    gitm-tui --no-ui --workload command --metric 'time_s=([0-9.]+)' \\
        --lever 'threads=env:OMP_NUM_THREADS=1,2' --lever 'block=arg:--block=16,64,256' \\
        --check 'checksum=42' -- python job.py --n 512

The first value of each lever is the baseline. A measurement fails — and the trial is rolled
back — when the program exits non-zero, times out, prints no metric, or (with ``--check``)
does not print the check pattern.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import Literal


class CommandError(ValueError):
    """A bad command-workload definition (one line for the user)."""


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
        try:
            rx = re.compile(self.metric)
        except re.error as e:
            raise CommandError(f"bad --metric {self.metric!r}: {e}") from None
        if rx.groups != 1:
            raise CommandError(
                f"bad --metric {self.metric!r}: it needs exactly one (group) around the number"
            )
        if self.check is not None:
            try:
                re.compile(self.check)
            except re.error as e:
                raise CommandError(f"bad --check {self.check!r}: {e}") from None
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


class CommandWorkload:
    """Runs the program for real; levers are its declared choices."""

    kind = "command"
    name = "command"

    def __init__(self, spec: CommandSpec) -> None:
        self.spec = spec
        self.base = CommandState(tuple((lv.name, lv.values[0]) for lv in spec.levers))
        self._metric = re.compile(spec.metric)
        self._check = re.compile(spec.check) if spec.check else None

    @property
    def title(self) -> str:
        return " ".join(self.spec.argv)

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

    def run_once(self, state: CommandState) -> CommandRun:
        """Run the program once (no shell) and read its metric."""
        argv, env = self.argv_env(state)
        t0 = time.perf_counter()
        try:
            p = subprocess.run(
                argv,
                env=env,
                capture_output=True,
                text=True,
                timeout=self.spec.timeout_s,
                check=False,
            )
        except FileNotFoundError:
            raise CommandError(f"cannot run {argv[0]!r}: no such program") from None
        except PermissionError:
            raise CommandError(f"cannot run {argv[0]!r}: permission denied") from None
        except subprocess.TimeoutExpired:
            return CommandRun(
                None, time.perf_counter() - t0, False, f"timed out after {self.spec.timeout_s:g} s"
            )
        wall = time.perf_counter() - t0
        out = (p.stdout or "") + (p.stderr or "")
        tail = out[-400:]
        if p.returncode != 0:
            return CommandRun(None, wall, False, f"exit status {p.returncode}", tail)
        m = self._metric.findall(out)
        if not m:
            return CommandRun(None, wall, False, "the metric pattern was not in the output", tail)
        try:
            v = float(m[-1])
        except ValueError:
            return CommandRun(None, wall, False, f"metric {m[-1]!r} is not a number", tail)
        if self._check is not None and not self._check.search(out):
            return CommandRun(
                v, wall, False, f"check pattern {self.spec.check!r} not in the output", tail
            )
        return CommandRun(v, wall, True, "", tail)

    def measure(self, state: CommandState, n: int) -> CommandMeasurement:
        return CommandMeasurement([self.run_once(state) for _ in range(n)])
