"""What a run is given: its configuration, the approval policies and the phases' budget shares."""

from __future__ import annotations

from dataclasses import dataclass

#: the phases' shares of the budget (DESIGN §7: 2:4:6:8:4)
PHASES = (("profile", 2), ("attribute", 4), ("rank", 6), ("apply", 8), ("report", 4))
#: manual: a person decides; auto: SAFE levers approve themselves; none: propose only; all:
#: every lever approves itself (the embedded API's ``approve="all"``: its caller decided)
APPROVAL_POLICIES = ("manual", "auto", "none", "all")


def phase_deadline(budget_s: float, phase: str) -> float:
    """Budget seconds by which ``phase`` must end (cumulative shares); KeyError if unknown."""
    total = sum(w for _, w in PHASES)
    acc = 0
    for name, w in PHASES:
        acc += w
        if name == phase:
            return budget_s * acc / total
    raise KeyError(phase)


@dataclass(frozen=True)
class RunConfig:
    """What to run and for how long."""

    workload: str = "hft-lob"
    budget_s: float = 60.0
    seed: int = 0
    hardware: str = "h100_telemetry"
    #: wall seconds between device windows; the dashboard's refresh rhythm
    tick_s: float = 0.1
    #: simulated device time per window (20 ms ≈ 10-20 iterations of the built-in workloads)
    window_ns: float = 20e6
    #: sleep between windows to pace the run at ``tick_s`` (False: as fast as possible)
    realtime: bool = True
    #: stop streaming the profile after this many windows (tests); None = its budget share
    max_windows: int | None = None
    #: the gain (time per sample) the loop aims for
    target: float = 0.15
    #: go on past the qualification gate's diagnosis (``--force``): the report says so
    force: bool = False
    #: approval policy: manual (a person decides), auto (SAFE levers only), none (propose only)
    approve: str = "manual"
    #: measurements per arm (noise floor, each trial, the final check)
    repeats: int = 4
    #: manual approval only: time spent waiting for a person's decision is not charged to the
    #: budget, so proposals never expire undecided; the apply phase ends when they are all
    #: decided or the operator finishes it (``f`` in the dashboard or at the headless prompt).
    #: The dashboard's ``k`` turns it on mid-run (``Engine.keep_deciding_on``)
    keep_deciding: bool = False
    #: run the optimize phases after profiling (False: profile/watch only)
    optimize: bool = True
    # --workload command: the program (no shell), its metric, levers and check
    command: tuple[str, ...] = ()
    metric: str = ""
    goal: str = "min"
    levers: tuple[str, ...] = ()
    check: str | None = None
    #: telemetry source: sim (default), auto (a real GPU if one works, else sim), nvidia, amd
    device: str = "sim"
    #: real-device sampling interval (s)
    telemetry_interval_s: float = 1.0
    #: Prometheus exposition port (None: off) and bind address
    prometheus_port: int | None = None
    prometheus_addr: str = "127.0.0.1"
    #: OTLP/HTTP metrics endpoint (None: off; "": the OTEL_EXPORTER_OTLP_* environment's;
    #: a base URL such as http://collector:4318 gets /v1/metrics): engine/telemetry/otlp.py
    otlp_endpoint: str | None = None
    #: `gitm-tui capture --ui -- python PROGRAM`: run it here under CUPTI and stream its kernels
    capture_program: tuple[str, ...] = ()
    capture_flush_s: float = 0.5
