"""The analysis of one trace as a pydantic model: ``analysis.json`` and its committed JSON Schema."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.analyze.breakdown.critical_model import CriticalPath
from engine.optimizer.fingerprint import Fingerprint
from engine.optimizer.monitor import InvariantResult, Violation

#: 2: hardware may be unknown (id None), evidence tiers and confidence per kernel, copies,
#: communication, profiler ranges, counting semantics, lever intervals, and the three
#: invariants of the optimize loop (``invariants``) instead of one kernel-time rule of its own.
#: 3: the no-lever replay's fidelity (``replay``), what the program already does (``in_use``),
#: each lever's ceiling from the observed trace, and levers the hardware cannot do
#: (status ``not_applicable``)
#: 4: the critical path of the no-lever replay (``critical_path``)
#: 5: the devices the rows ran on, each judged by its own peaks (``devices``), how the rows'
#: device was matched to the trace's device list (``hardware.device_basis``), and the device
#: of each copy group (``copies[].device``)
SCHEMA_VERSION = 5


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hardware(_M):
    id: str | None = Field(
        description="catalogue id ('estimate-…' for peaks estimated from the device's "
        "properties), None when the peaks are unknown"
    )
    name: str = Field(
        description="the device as the trace names it (sanitised), with the catalogue entry or "
        "'ESTIMATED peaks' its roofline uses"
    )
    detected_from: str = Field(
        description="'trace' (a catalogue entry matched from the device's properties), "
        "'estimate' (peaks estimated from them: peak_source says how), 'flag' (--hardware) or "
        "'none'"
    )
    reported_name: str | None = None
    peak_source: str | None = None
    host_link: str | None = Field(
        default=None, description="the PCIe link host copies cross, with its per-direction rate"
    )
    peer_link: str | None = Field(default=None, description="GPU-to-GPU link, None if none assumed")
    device_basis: str | None = Field(
        default=None,
        description="how the rows' device number was matched to the trace's device list where "
        "that is an inference (roctracer's HSA agent numbers, an id the list lacks); None: by id",
    )


class DeviceShare(_M):
    """One device the rows ran on: its peaks judge its own rows (roofline, copy links, the
    kernel-time invariant), never another device's."""

    id: int = Field(description="the device number its rows carry")
    name: str = Field(description="as the trace names it (sanitised), with its peaks' source")
    hardware_id: str | None = Field(description="catalogue or estimate id; None: peaks unknown")
    detected_from: str = Field(description="'trace', 'estimate', 'flag' (--hardware) or 'none'")
    peak_source: str | None = None
    host_link: str | None = None
    peer_link: str | None = None
    basis: str | None = Field(
        default=None,
        description="how its number was matched to the device list where that is an inference, "
        "or why it has no peaks; None: by id",
    )
    rows: int = Field(description="its timed rows: kernels, copies, memsets, collectives")
    gpu_time_ns: int
    share_of_gpu_time: float


class Idle(_M):
    """Idle time on one stream between its first and last kernel, split as HTA splits it."""

    total_ns: int
    host_wait_ns: int = Field(
        description="the next kernel's launch call began after the previous kernel ended"
    )
    kernel_wait_ns: int = Field(
        description="short gaps (≤ consecutive_kernel_delay) between back-to-back kernels"
    )
    other_ns: int
    overlapping_rows: int = Field(
        default=0,
        description="rows that began before an earlier row of the stream had ended (a copy "
        "engine's DMA rows beside kernels, say): the stream's busy time is the union of its "
        "rows, so idle counts only the gaps no row covers and is never negative",
    )
    overlapped_ns: int = Field(
        default=0, description="their time covered by an earlier row of the stream"
    )


class StreamStats(_M):
    device: int
    stream: int
    kernels: int
    kernel_time_ns: int
    span_ns: int
    idle: Idle
    regime_time_ns: dict[str, int]
    kappa_partition: dict[str, float]


class KernelRow(_M):
    name: str
    klass: str
    streams: list[int]
    calls: int
    total_ns: int
    mean_ns: float
    share_of_gpu_time: float
    regime: str = Field(
        description="majority label of its calls: a decoded regime, UNKNOWN (class unknown, "
        "nothing measured), COMM (collective) or COPY (memcpy/memset)"
    )
    regime_share: float
    tier: str = Field(
        description="evidence behind the label (most of its time): MEASURED (counters), DERIVED "
        "(FLOPs/bytes from the launching op's shapes), PRIOR (name class only), NONE; '-' for "
        "copies and collectives"
    )
    confidence: float | None = Field(
        description="mean posterior probability of its calls' labels (None: not decoded)"
    )
    flops: float | None = Field(default=None, description="FLOPs, measured or derived (see tier)")
    dtype: str | None = Field(default=None, description="arithmetic type, where known")
    roofline_bound_ns: float | None = Field(
        description="sum over calls of max(FLOPs/peak, bytes/HBM BW); None where neither was measured"
    )
    achieved_fraction: float | None = Field(description="roofline_bound_ns / total_ns")


class Evidence(_M):
    """What the labels rest on, as shares of kernel time (collectives and copies excluded)."""

    share_of_kernel_time: dict[str, float] = Field(
        description="tier → share of decoded kernel time"
    )
    mean_confidence: float | None
    note: str


class CopyStats(_M):
    """Copies of one direction, against the link they cross."""

    device: int | None = Field(
        default=None,
        description="the device they ran on, where devices of different models are each "
        "judged by their own links; None: every device's copies together",
    )
    direction: str = Field(description="HtoD, DtoH, DtoD, PtoP, HtoH, memset, …")
    memory: str = Field(description="source -> destination memory kinds (Pageable, Pinned, Device)")
    count: int
    bytes: int
    time_ns: int
    achieved_Bps: float | None
    link: str | None = Field(description="the link it crosses; None when the hardware is unknown")
    link_Bps: float | None
    fraction_of_link: float | None
    note: str


class CommStats(_M):
    """Collectives (NCCL/RCCL kernels) on one device: communication, not a compute regime."""

    device: int
    kernels: int
    time_ns: int
    share_of_gpu_time: float
    overlapped_ns: int = Field(description="collective time during which a compute kernel ran")
    streams: list[int]


class ProfilerRanges(_M):
    """CUPTI-profiler mode: ranges with measured counters, each one kernel only when the
    profiler ran per kernel (Kineto's auto-range); never kernel time."""

    ranges: int
    measured_flops: float
    with_flops: int = Field(
        default=0, description="ranges whose FP-instruction counters gave FLOPs"
    )
    kernel_launches: int = Field(
        default=0, description="kernel launches on the host while the ranges were recorded"
    )
    one_kernel_each: bool | None = Field(
        default=None,
        description="True: as many ranges as kernel launches (per-kernel ranges, each named after "
        "its kernel); False: fewer ranges than launches, so some ranges hold several kernels and "
        "none is attributed; None: no launch recorded, unknown",
    )
    note: str


class MeasuredTier(_M):
    """Kernels whose regime rests on hardware counters, against the label the same analysis
    gives them with their counters removed (shape-derived or kernel-name prior): a confusion
    table (engine/analyze/breakdown/measured.py). Rows: the label from counters; columns: without."""

    labels: list[str] = Field(description="the regime labels, in the order of rows and columns")
    counts: list[list[int]] = Field(description="[measured][without counters] kernel count")
    time_ns: list[list[int]] = Field(description="[measured][without counters] kernel time, ns")
    measured_share: float = Field(description="share of decoded kernel time in the measured tier")
    agreement: float | None = Field(
        description="share of measured kernel time whose label is the same without counters"
    )


class Invariant(_M):
    """One of the three invariants (DESIGN §5), under the same rules as the optimize loop's
    monitor (engine/optimizer/monitor.py)."""

    # (the docstrings are the JSON Schema's descriptions: this is the monitor's verdict,
    # ``InvariantResult``, as analysis.json writes it — ``of``)

    invariant: Literal["kernel_time", "memory_traffic", "concurrency"]
    checkable: bool
    checked: int = Field(description="rows the invariant was checked on")
    not_checked: int = Field(description="timed rows it could not be checked on")
    violating_rows: int
    reason: str = Field(description="what the check rests on, or why it cannot be made")
    violations: list[Violation] = Field(description="the worst kernel names, most excess first")

    @classmethod
    def of(cls, r: InvariantResult, timed: int, most: int) -> Invariant:
        """The verdict ``r`` on a trace of ``timed`` rows, with its ``most`` worst violations."""
        return cls(
            invariant=r.invariant,  # type: ignore[arg-type]
            checkable=r.checkable,
            checked=r.checked,
            not_checked=timed - r.checked,
            violating_rows=r.violating_rows,
            reason=r.reason,
            violations=r.violations[:most],
        )


class LaunchStats(_M):
    kernels_linked: int = Field(
        description="kernels matched by correlation id to a launch call of their own (graph "
        "launches apart: graph_kernels)"
    )
    shorter_than_launch: int = Field(
        description="of kernels_linked, those that ran for less time than their launch call took"
    )
    graph_kernels: int = Field(
        default=0,
        description="kernels whose launch call is a graph launch (cudaGraphLaunch / "
        "hipGraphLaunch, by correlation): one call launches many, so they are not compared "
        "with it",
    )
    graph_launches: int = Field(default=0, description="the graph launches they came from")
    median_launch_ns: float | None = Field(description="median of kernels_linked's launch calls")
    median_kernel_ns: float | None

    def line(self) -> str:
        """'424 of 425 kernels ran shorter than their launch call; 544 kernels from 1 graph
        launch, not counted (one call launches a whole graph)'."""
        out = (
            f"{self.shorter_than_launch} of {self.kernels_linked} kernels ran shorter than their "
            "launch call"
        )
        if self.graph_kernels:
            s = "" if self.graph_launches == 1 else "es"
            out += (
                f"; {self.graph_kernels} kernels from {self.graph_launches} graph launch{s}, "
                "not counted (one call launches a whole graph)"
            )
        return out


class ReplayFidelity(_M):
    """The replay with no lever against the trace it replays (before any prediction): how far
    the replayed schedule is from what was observed."""

    observed_span_ns: int = Field(description="the replayed window's observed span")
    replayed_span_ns: int
    span_error: float = Field(description="replayed / observed span - 1")
    device_idle_observed_ns: int = Field(
        description="time in the window when no stream of the device ran anything"
    )
    device_idle_replayed_ns: int
    stream_end_error: dict[str, float] = Field(
        description="per stream: (replayed - observed end of its last row) / observed span"
    )
    start_error_p95_ns: float = Field(
        description="95th percentile of |replayed - observed start| over the device rows"
    )
    tolerance: float = Field(description="the span error a faithful replay stays within")
    faithful: bool = Field(description="|span_error| and every stream's end error within it")
    waits: str = Field(description="how blocking calls and unrecorded waits were replayed")

    def line(self) -> str:
        """One line: 'replay of the trace with no lever: span 745.2 ms observed, 739.9 ms
        replayed (-0.7%) — faithful (within 3%)'."""
        verdict = (
            f"faithful (within {self.tolerance:.0%})"
            if self.faithful
            else f"NOT faithful (beyond {self.tolerance:.0%}): every prediction below rests on it"
        )
        return (
            f"replay of the trace with no lever: span {self.observed_span_ns / 1e6:,.1f} ms "
            f"observed, {self.replayed_span_ns / 1e6:,.1f} ms replayed ({self.span_error:+.1%}); "
            f"device idle {self.device_idle_observed_ns / 1e6:,.1f} ms observed, "
            f"{self.device_idle_replayed_ns / 1e6:,.1f} ms replayed — {verdict}"
        )


class InUse(_M):
    """Something the program already does that a lever would otherwise take credit for."""

    what: str = Field(description="cuda_graphs | fused_kernels | reduced_precision | …")
    share: float = Field(description="share of the kernels' time (or of the calls) that has it")
    rows: int = Field(default=0, description="kernels that have it")
    of_rows: int = Field(default=0, description="kernels it was looked for among")
    evidence: str = Field(description="what in the trace shows it")
    levers: list[str] = Field(description="levers that take no credit for that share")


class LeverEstimate(_M):
    """A lever's replayed effect on this trace (a counterfactual: nothing was applied)."""

    lever: str
    title: str
    safety: str = Field(description="SAFE | NUMERICS | PRIVILEGED")
    causes: list[str]
    status: Literal["predicted", "ceiling", "not_judged", "not_applicable"] = Field(
        description="predicted: the replay's estimate with an interval; ceiling: only an "
        "upper bound is known (gain_low 0, gain_high the bound); not_judged: whether the lever "
        "applies cannot be judged from this trace (basis says why); not_applicable: the device "
        "cannot do it (basis names the missing capability): no gain, no interval"
    )
    predicted_gain: float | None = Field(
        description="point estimate of 1 - replayed span / observed span (per sample for batch "
        "size); None for a ceiling or when not judged"
    )
    gain_low: float | None = Field(description="conservative end of the interval; ranks levers")
    gain_high: float | None = Field(description="optimistic end of the interval")
    basis: str = Field(
        description="the evidence in one line: which rows, how much time, which priors"
    )
    rows: int = Field(description="rows of the trace the transform edits")
    what: str
    prior_based: bool = Field(description="the transform scales by a named prior, not by the trace")
    ceiling: float | None = Field(
        default=None,
        description="the most the lever could gain, from the observed trace alone (not the "
        "replay): what it could remove at most, as a share of the observed span; None where "
        "not predicted",
    )
    ceiling_basis: str = Field(default="", description="what the ceiling counts")
    capped: bool = Field(
        default=False,
        description="the replay predicted more than the ceiling: the gain shown is the ceiling",
    )
    unfaithful_replay: bool = Field(
        default=False, description="the no-lever replay is not within tolerance of the trace"
    )
    peers: str | None = Field(
        default=None,
        description="what the rank's peers bound the prediction to, in one line: with their "
        "arrivals known, each collective was held until its last peer arrived (a rank never "
        "last gains nothing for the job beyond the time after its last collective); without "
        "them, which collectives were replayed as if every peer arrived with this rank; None "
        "where the replayed window has no collectives",
    )

    def gain_text(self) -> str:
        """The estimate as printed: '+5.7% (+5.3% … +5.9%)', a ceiling as '≤ +26.7%', else
        'not judged'."""
        if self.status == "ceiling":
            return f"≤ {self.gain_high or 0.0:+.1%}"
        if self.status == "not_applicable":
            return "not applicable"
        if self.status != "predicted" or self.predicted_gain is None:
            return "not judged"
        lo, hi = self.gain_low, self.gain_high
        if lo is None or hi is None or f"{lo:+.1%}" == f"{hi:+.1%}":
            return f"{self.predicted_gain:+.1%}"
        return f"{self.predicted_gain:+.1%} ({lo:+.1%} … {hi:+.1%})"


class FingerprintSummary(_M):
    """The workload fingerprint in brief (engine.optimizer.fingerprint; the whole of it —
    kernel and shape rows — in fingerprint.json beside analysis.json; docs/fingerprint.md)."""

    digest: str = Field(description="hash of names, calls per step, shapes, dtypes, device")
    line: str = Field(description="the fingerprint in one line, as report.md shows it")
    kind: Literal["gpu", "cpu"]
    device: str = Field(description="catalogue name, else as the trace reports it; '' unknown")
    steps: int
    steps_found_by: str = Field(description="ProfilerStep, repeating sequence, or unknown")
    kernel_names: int
    shapes: int | None = Field(description="distinct recorded op shapes (None: not recorded)")
    launches_per_step: float | None
    copies_per_step: float | None
    collectives_per_step: float | None
    world_size: int | None
    notes: list[str]

    @classmethod
    def of(cls, fp: Fingerprint) -> FingerprintSummary:
        """The summary of a fingerprint."""
        a = fp.activity
        return cls(
            digest=fp.digest(),
            line=fp.summary_line(),
            kind="cpu" if fp.kind == "cpu" else "gpu",
            device=fp.device,
            steps=fp.steps.count,
            steps_found_by=fp.steps.how,
            kernel_names=len(fp.kernels),
            shapes=len(fp.shapes) if fp.shapes_recorded else None,
            launches_per_step=a.launches,
            copies_per_step=a.copies,
            collectives_per_step=a.collectives,
            world_size=fp.process.world_size,
            notes=list(fp.notes),
        )


class Analysis(_M):
    schema_version: int = SCHEMA_VERSION
    source: str
    format: str
    rank: int | None
    hardware: Hardware
    devices: list[DeviceShare] = Field(
        default_factory=list,
        description="the devices the rows ran on, most GPU time first, each with its own peaks",
    )
    segments: int
    kernels: int
    gpu_time_ns: int = Field(description="sum of kernel + copy + memset durations")
    span_ns: int
    pressures: str = Field(description="how O_θ got its inputs: measured counters or class priors")
    counting: str = Field(default="", description="what is counted: rows, filters, time units")
    evidence: Evidence | None = None
    copies: list[CopyStats] = Field(default_factory=list)
    communication: list[CommStats] = Field(default_factory=list)
    profiler_ranges: ProfilerRanges | None = None
    measured_tier: MeasuredTier | None = Field(
        default=None,
        description="counters' labels against the labels without them (None: no kernel measured)",
    )
    time_by_class_ns: dict[str, int]
    time_by_regime_ns: dict[str, int]
    kappa_partition: dict[str, float]
    streams: list[StreamStats]
    top_kernels: list[KernelRow]
    invariants: list[Invariant] = Field(
        description="kernel_time, memory_traffic, concurrency: each checked or why not"
    )
    launch: LaunchStats
    replay: ReplayFidelity | None = Field(
        default=None,
        description="the no-lever replay against the observed trace (None: nothing replayed)",
    )
    in_use: list[InUse] = Field(
        default_factory=list, description="what the program already does (graphs, fusion, …)"
    )
    interventions: list[LeverEstimate] = Field(
        default_factory=list,
        description="levers replayed on this trace's dependency graph: predicted ones by the "
        "conservative end of their interval (best first), then ceilings, then those not judged",
    )
    notes: list[str]
    fingerprint: FingerprintSummary | None = Field(
        default=None, description="the workload's fingerprint in brief (None: not computed)"
    )
    critical_path: CriticalPath | None = Field(
        default=None,
        description="what sets the end of the replayed window, every ns given to one part "
        "(None: nothing was replayed)",
    )
