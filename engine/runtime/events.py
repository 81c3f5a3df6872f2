"""Engine events: frozen dataclasses with a stable JSON form (the headless schema: docs/events.md).

High-rate kinds say how they coalesce on the bus (``coalesce_key``/``merge``): decoded rows of a
stream are concatenated, κ and telemetry keep the latest. Nothing that matters is dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from engine.regimes import label_name
from engine.telemetry.sample import TelemetrySample

if TYPE_CHECKING:  # (the views are built from them; the UI that reads them never loads them)
    from engine.optimizer.gate import GateDecision
    from engine.optimizer.monitor import InvariantResult, Violation

SCHEMA_VERSION = 1


def _jsonable(v: Any) -> Any:
    if is_dataclass(v) and not isinstance(v, type):
        return {f.name: _jsonable(getattr(v, f.name)) for f in fields(v)}
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()] if v.dtype.kind == "f" else v.tolist()
    if isinstance(v, float) and not math.isfinite(v):  # JSON has no NaN or Infinity
        return None
    if isinstance(v, np.generic):
        return _jsonable(v.item())
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    return v


@dataclass(frozen=True)
class Event:
    """Base of every engine event. ``t_wall`` is seconds since the run started."""

    kind: ClassVar[str] = "event"
    t_wall: float

    def coalesce_key(self) -> tuple[Any, ...] | None:
        """Return a key under which a newer event may replace or merge into a pending one."""
        return None

    def merge(self, newer: Event) -> Event:
        """Return the event that stands for ``self`` followed by ``newer`` (same key)."""
        return newer

    def to_json(self) -> dict[str, Any]:
        """Return the JSON-lines record: {"v", "type", ...fields}."""
        out: dict[str, Any] = {"v": SCHEMA_VERSION, "type": self.kind}
        for f in fields(self):
            out[f.name] = _jsonable(getattr(self, f.name))
        return out


@dataclass(frozen=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    run_id: str
    workload: str
    workload_title: str
    device: str
    simulated: bool
    budget_s: float
    seed: int
    streams: tuple[int, ...]
    regimes: tuple[str, ...]
    target: float = 0.0
    approve: str = "manual"  # approval policy: manual | auto | none
    run_dir: str = ""


@dataclass(frozen=True)
class PhaseChanged(Event):
    kind: ClassVar[str] = "phase"
    phase: str  # warmup | profile | paused | done
    detail: str = ""


@dataclass(frozen=True)
class KernelsReady(Event):
    kind: ClassVar[str] = "kernels_ready"
    backend: str  # "numba" or "numpy" (fallback when numba failed)
    seconds: float


@dataclass(frozen=True)
class LogEvent(Event):
    kind: ClassVar[str] = "log"
    level: str  # info | warning | error
    message: str


@dataclass(frozen=True)
class DecodedBatch(Event):
    """Rows of one stream whose regime labels became final."""

    kind: ClassVar[str] = "decoded"
    stream: int
    start_ns: np.ndarray
    end_ns: np.ndarray
    labels: np.ndarray  # uint8 Label ids (a regime, or COPY / COMM)
    degenerate: np.ndarray  # bool (κ > K_max)
    kappa: np.ndarray  # float32
    names: tuple[str, ...] = field(default=())
    #: the workload configuration the rows ran under ("baseline", "baseline + cuda_graphs", …;
    #: "" where there is none: a capture or a real device)
    config: str = ""

    def coalesce_key(self) -> tuple[Any, ...]:
        return ("decoded", self.stream, self.config)

    def merge(self, newer: Event) -> Event:
        assert isinstance(newer, DecodedBatch)
        return DecodedBatch(
            t_wall=newer.t_wall,
            stream=self.stream,
            start_ns=np.concatenate([self.start_ns, newer.start_ns]),
            end_ns=np.concatenate([self.end_ns, newer.end_ns]),
            labels=np.concatenate([self.labels, newer.labels]),
            degenerate=np.concatenate([self.degenerate, newer.degenerate]),
            kappa=np.concatenate([self.kappa, newer.kappa]),
            names=self.names + newer.names,
            config=self.config,
        )

    def __len__(self) -> int:
        return len(self.labels)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["labels"] = [label_name(int(x)) for x in self.labels]
        return out


@dataclass(frozen=True)
class KappaUpdate(Event):
    kind: ClassVar[str] = "kappa"
    stream: int
    kappa: float  # latest κ on this stream (NaN while the window fills)
    m_id: float  # shares of this stream's decoded rows so far
    m_deg: float
    undetermined: float
    k_max: float

    def coalesce_key(self) -> tuple[Any, ...]:
        return ("kappa", self.stream)


#: samples a coalesced TelemetryEvent keeps (a sparkline's worth; older ones are dropped)
_TELEMETRY_KEEP = 256


@dataclass(frozen=True)
class TelemetryEvent(Event):
    """One device's newest sample; ``earlier`` holds samples merged into it while queued."""

    kind: ClassVar[str] = "telemetry"
    sample: TelemetrySample
    earlier: tuple[TelemetrySample, ...] = ()

    def coalesce_key(self) -> tuple[Any, ...]:
        return ("telemetry", self.sample.device)

    def merge(self, newer: Event) -> Event:
        assert isinstance(newer, TelemetryEvent)
        kept = (*self.earlier, self.sample, *newer.earlier)[-_TELEMETRY_KEEP:]
        return TelemetryEvent(t_wall=newer.t_wall, sample=newer.sample, earlier=kept)

    def samples(self) -> tuple[TelemetrySample, ...]:
        """Return every sample this event carries, oldest first."""
        return (*self.earlier, self.sample)

    def to_json(self) -> dict[str, Any]:
        out = {
            "v": SCHEMA_VERSION,
            "type": self.kind,
            "t_wall": self.t_wall,
            **_jsonable(self.sample.to_dict()),
        }
        if self.earlier:
            out["earlier"] = [_jsonable(s.to_dict()) for s in self.earlier]
        return out


@dataclass(frozen=True)
class Progress(Event):
    kind: ClassVar[str] = "progress"
    elapsed_s: float
    budget_s: float
    segments: int
    iterations: int
    sim_time_ns: int
    regime_shares: dict[str, float]
    #: of elapsed_s, the time the run has waited for a person's decision (manual approvals)
    waiting_s: float = 0.0

    def coalesce_key(self) -> tuple[Any, ...]:
        return ("progress",)


@dataclass(frozen=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    #: completed | diagnosed (the qualification gate ended it in its profile phase) | stopped |
    #: failed (a bug) | workload_failed (the program)
    status: str
    segments: int
    iterations: int
    sim_time_ns: int
    wall_s: float
    regime_shares: dict[str, float]
    kappa_partition: dict[str, float]
    fixed_lag_exact: float
    validation: dict[str, Any]  # vs simulator ground truth; empty for real devices
    dropped_events: int
    kernels: str  # numba | numpy
    gain: float | None = None  # measured time-per-sample gain vs baseline (optimize loop)
    target_met: bool | None = None
    report: str = ""  # path of report.md
    #: the optimize loop's verdict (met | not met | not confirmed | nothing kept | not
    #: measurable | out of reach), the gain's interval and the one-line headline report.md and the summary carry
    verdict: str = ""
    gain_low: float | None = None
    gain_high: float | None = None
    headline: str = ""


@dataclass(frozen=True)
class ViolationView:
    """One invariant broken by the rows of one name (engine.optimizer.monitor.Violation)."""

    name: str
    message: str
    count: int
    observed: float
    predicted: float
    residual: float
    unit: str  # ns | bytes | overlap share
    rows: tuple[int, ...] = ()  # the first trace rows involved

    @classmethod
    def of(cls, v: Violation) -> ViolationView:
        """The view of one of the monitor's violations."""
        return cls(
            name=v.name,
            message=v.message,
            count=v.count,
            observed=v.observed,
            predicted=v.predicted,
            residual=v.residual,
            unit=v.unit,
            rows=tuple(v.rows),
        )


@dataclass(frozen=True)
class InvariantView:
    """One invariant's verdict: checked (and its violations) or why it cannot be checked."""

    invariant: str  # kernel_time | memory_traffic | concurrency
    checkable: bool
    checked: int
    reason: str
    violations: tuple[ViolationView, ...] = ()

    @classmethod
    def of(cls, r: InvariantResult, most: int = 8) -> InvariantView:
        """The view of one of the monitor's verdicts, with its ``most`` worst violations."""
        return cls(
            invariant=r.invariant,
            checkable=r.checkable,
            checked=r.checked,
            reason=r.reason,
            violations=tuple(ViolationView.of(v) for v in r.violations[:most]),
        )


@dataclass(frozen=True)
class EvidenceView:
    """One piece of evidence for a cause: structural, Granger or AIPW."""

    kind: str
    what: str
    value: float
    p: float | None = None
    p_adjusted: float | None = None


@dataclass(frozen=True)
class HypothesisView:
    """One cause attribution ranked: its impact, confidence, whether it is claimed, why."""

    cause: str
    description: str
    impact: float
    confidence: float
    claimed: bool
    evidence: tuple[EvidenceView, ...] = ()


@dataclass(frozen=True)
class InvariantsReport(Event):
    """The monitor's verdict on the current state (DESIGN §5)."""

    kind: ClassVar[str] = "invariants"
    results: tuple[InvariantView, ...]


@dataclass(frozen=True)
class HypothesesReport(Event):
    """Attribution's ranked causes (claimed ones first)."""

    kind: ClassVar[str] = "hypotheses"
    hypotheses: tuple[HypothesisView, ...]


@dataclass(frozen=True)
class InterventionUpdate(Event):
    """An intervention was proposed, re-ranked, or changed state (journaled first)."""

    kind: ClassVar[str] = "intervention"
    id: str
    lever: str
    title: str
    safety: str  # SAFE | NUMERICS | PRIVILEGED
    state: str  # PROPOSED | APPROVED | REJECTED | APPLYING | APPLIED | VERIFIED | ROLLED_BACK
    predicted_gain: float
    confidence: float
    measured_gain: float | None = None
    approved_by: str = ""
    note: str = ""
    replay: str = ""
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class OptimizeStatus(Event):
    """Where the loop stands against its target and budget."""

    kind: ClassVar[str] = "optimize"
    baseline_ns: float  # time per sample, unchanged workload
    current_ns: float
    gain: float
    target: float
    noise_floor: float
    phase: str
    phase_deadline_s: float  # budget seconds at which this phase must end
    #: how a measurement reads: value / scale in unit (a command's metric has no time unit)
    unit: str = "µs/sample"
    scale: float = 1e3
    #: the A/A's pair-to-pair spread (standard deviation of its log-ratios; NaN under 2
    #: pairs): known even where no noise floor is (a target the time left cannot resolve)
    aa_spread: float = math.nan

    def coalesce_key(self) -> tuple[Any, ...]:
        return ("optimize",)


@dataclass(frozen=True)
class GateCeilingView:
    """One applicable lever's ceiling as the gate read it (engine.optimizer.gate)."""

    lever: str
    high: float | None  # the most it could gain (share of the baseline step); None: unknown
    low: float | None  # at the other end of its priors' ranges; None: no prior
    per_sample: bool
    prior: str  # the priors it rests on ('' none)


@dataclass(frozen=True)
class GateDecided(Event):
    """The qualification gate's decision in the profile phase: commit to the target, or
    diagnose why not (the run then ends with its diagnosis unless ``forced``). ``line`` is the
    one line the optimize bar and headless narration print."""

    kind: ClassVar[str] = "gate"
    decision: str  # commit | diagnose
    forced: bool  # a diagnosis overridden by --force: the loop goes on
    target: float
    measurable: bool | None  # None: the noise is unknown
    reachable: bool | None  # None: the levers' ceilings cannot judge it
    combined_ceiling: float | None
    noise_floor: float | None
    line: str
    helps: tuple[str, ...] = ()
    ceilings: tuple[GateCeilingView, ...] = ()

    @classmethod
    def of(cls, t_wall: float, g: GateDecision) -> GateDecided:
        """The event of an ``engine.optimizer.gate.GateDecision``."""
        return cls(
            t_wall=t_wall,
            decision=g.decision,
            forced=g.forced,
            target=g.target,
            measurable=g.measurable,
            reachable=g.reachable,
            combined_ceiling=g.combined,
            noise_floor=g.noise_floor,
            line=g.forced_line() if g.forced else g.line,
            helps=tuple(g.helps),
            ceilings=tuple(
                GateCeilingView(c.lever, c.high, c.low, c.per_sample, c.prior) for c in g.ceilings
            ),
        )


@dataclass(frozen=True)
class ReportWritten(Event):
    kind: ClassVar[str] = "report"
    path: str
    json_path: str
    target_met: bool
    gain: float
    summary: str
    #: met | not met | not confirmed | nothing kept | not measurable | out of reach (the
    #: summary's verdict)
    verdict: str = ""
    gain_low: float | None = None
    gain_high: float | None = None


#: every event type by its JSON ``type`` — the headless schema's vocabulary
EVENT_TYPES: dict[str, type[Event]] = {
    c.kind: c
    for c in (
        RunStarted,
        PhaseChanged,
        KernelsReady,
        LogEvent,
        DecodedBatch,
        KappaUpdate,
        TelemetryEvent,
        Progress,
        RunFinished,
        InvariantsReport,
        HypothesesReport,
        InterventionUpdate,
        OptimizeStatus,
        GateDecided,
        ReportWritten,
    )
}
