"""The analysis of one trace as a pydantic model: ``analysis.json`` and its committed JSON Schema."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hardware(_M):
    id: str | None = Field(description="catalogue id, None if the device is not in the catalogue")
    name: str
    detected_from: str = Field(
        description="'trace' (device properties), 'flag' (--hardware) or 'none'"
    )
    reported_name: str | None = None
    peak_source: str | None = None


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
    regime: str = Field(description="majority decoded regime of its calls")
    regime_share: float
    roofline_bound_ns: float | None = Field(
        description="sum over calls of max(FLOPs/peak, bytes/HBM BW); None where neither was measured"
    )
    achieved_fraction: float | None = Field(description="roofline_bound_ns / total_ns")


class Violation(_M):
    name: str
    stream: int
    start_ns: int
    observed_ns: int
    predicted_ns: float
    residual_ns: float
    ratio: float


class InvariantResult(_M):
    checkable: int = Field(description="segments with measured FLOPs or bytes")
    not_checkable: int
    violations: int
    worst: list[Violation]
    note: str


class LaunchStats(_M):
    kernels_linked: int = Field(
        description="kernels matched to their launch call by correlation id"
    )
    shorter_than_launch: int = Field(
        description="kernels that ran for less time than their launch call took"
    )
    median_launch_ns: float | None
    median_kernel_ns: float | None


class LeverEstimate(_M):
    """A lever's replayed effect on this trace (a counterfactual: nothing was applied)."""

    lever: str
    title: str
    safety: str = Field(description="SAFE | NUMERICS | PRIVILEGED")
    causes: list[str]
    predicted_gain: float = Field(
        description="1 - replayed span / observed span (per sample for batch size)"
    )
    rows: int = Field(description="rows of the trace the transform edits")
    what: str
    prior_based: bool = Field(description="the transform scales by a named prior, not by the trace")


class Analysis(_M):
    schema_version: int = SCHEMA_VERSION
    source: str
    format: str
    rank: int | None
    hardware: Hardware
    segments: int
    kernels: int
    gpu_time_ns: int = Field(description="sum of kernel + copy + memset durations")
    span_ns: int
    pressures: str = Field(description="how O_θ got its inputs: measured counters or class priors")
    time_by_class_ns: dict[str, int]
    time_by_regime_ns: dict[str, int]
    kappa_partition: dict[str, float]
    streams: list[StreamStats]
    top_kernels: list[KernelRow]
    kernel_time_invariant: InvariantResult
    launch: LaunchStats
    interventions: list[LeverEstimate] = Field(
        default_factory=list,
        description="levers replayed on this trace's dependency graph, best predicted gain first",
    )
    notes: list[str]
