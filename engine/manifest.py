"""Load and validate the JSON manifests (hardware, EESM hyperparameters, workloads) with pydantic."""

from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from importlib import resources
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.trace.segments import DTYPES, Klass, dtype_peaks


class ManifestError(ValueError):
    """A manifest is missing or does not validate."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- hardware
class ClassEfficiency(_Strict):
    peak: Literal["fp32", "tf32", "bf16", "fp16", "fp64"]
    compute: tuple[float, float]
    memory: tuple[float, float]

    @field_validator("compute", "memory")
    @classmethod
    def _range(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if not 0 < lo <= hi <= 1:
            raise ValueError(f"efficiency range must satisfy 0 < lo <= hi <= 1, got {v}")
        return v


class Thermal(_Strict):
    ambient_c: float
    r_th_c_per_w: float = Field(gt=0)
    tau_s: float = Field(gt=0)
    slowdown_c: float
    clock_step_mhz: int = Field(gt=0)


class Noise(_Strict):
    duration_sigma: float = Field(ge=0, le=1)
    launch_sigma: float = Field(ge=0, le=1)
    counter_sigma: float = Field(ge=0, le=1)


class HardwareSpec(_Strict):
    """Public peaks of one GPU model, each with a citation (see ``citations``)."""

    id: str
    name: str
    citations: dict[str, str]
    sm_count: int = Field(gt=0)
    sm_clock_max_mhz: int = Field(gt=0)
    sm_clock_min_mhz: int = Field(gt=0)
    peak_flops: dict[str, float]
    hbm_bandwidth_Bps: float = Field(gt=0)
    memory_bytes: int = Field(gt=0)
    max_threads_per_sm: int = Field(gt=0)
    regs_per_sm: int = Field(gt=0)
    smem_per_sm: int = Field(gt=0)
    max_blocks_per_sm: int = Field(gt=0)
    tdp_w: float = Field(gt=0)
    idle_power_w: float = Field(gt=0)
    launch_api_ns: int = Field(gt=0)
    launch_latency_ns: int = Field(gt=0)
    kernel_floor_ns: int = Field(gt=0)
    #: host cost of one cudaGraphLaunch and the device's per-node dispatch inside a graph
    graph_launch_api_ns: int = Field(gt=0)
    graph_node_ns: int = Field(gt=0)
    h2d_pinned_Bps: float = Field(gt=0)
    h2d_pageable_Bps: float = Field(gt=0)
    thermal: Thermal
    class_efficiency: dict[str, ClassEfficiency]
    noise: Noise

    @model_validator(mode="after")
    def _complete(self) -> HardwareSpec:
        missing = [k.name for k in Klass if k.name not in self.class_efficiency]
        if missing:
            raise ValueError(f"class_efficiency lacks kernel classes {missing}")
        for eff in self.class_efficiency.values():
            if eff.peak not in self.peak_flops:
                raise ValueError(f"class_efficiency names peak '{eff.peak}' not in peak_flops")
        return self

    def class_peak_flops(self) -> np.ndarray:
        """Return the peak FLOP/s used for each kernel class, indexed by ``Klass``."""
        return np.array(
            [self.peak_flops[self.class_efficiency[k.name].peak] for k in Klass], dtype=np.float64
        )

    @property
    def label(self) -> str:
        """Return the short name used in headers ('H100 SXM5 80GB')."""
        return self.name


# --------------------------------------------------------------------------- hardware catalogue
#: peak used per kernel class when the trace does not say the dtype: tensor-core classes are
#: bounded by the dense BF16 rate (the fastest common training dtype: a lower bound on time),
#: everything else by the FP32 vector rate.
CLASS_PEAK = {Klass.GEMM: "bf16", Klass.CONV: "bf16", Klass.ATTENTION: "bf16"}
#: the classes whose kernels run on the matrix (MFMA / tensor) units where their dtype has them:
#: an FP32 or FP64 GEMM on CDNA is bounded by the matrix rate (MI250X: 2x the vector rate),
#: an FP32 elementwise kernel by the vector rate (``GpuPeaks.matrix_peak_flops``)
MATRIX_CLASSES = frozenset(CLASS_PEAK)


class Link(BaseModel):
    """A link a copy crosses: the host's PCIe link or the GPU-to-GPU fabric, with its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["pcie", "nvlink", "nvlink_c2c", "infinity_fabric"]
    Bps_per_direction: float = Field(gt=0)
    source: str
    gen: int | None = None
    lanes: int | None = None

    @property
    def label(self) -> str:
        """Return e.g. 'PCIe 4.0 x16' or 'NVLink'."""
        if self.kind == "pcie":
            return f"PCIe {self.gen}.0 x{self.lanes}"
        return {
            "nvlink": "NVLink",
            "nvlink_c2c": "NVLink-C2C",
            "infinity_fabric": "Infinity Fabric",
        }[self.kind]


class GpuPeaks(BaseModel):
    """Public peak rates of one GPU model, with the datasheet they come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    name: str
    vendor: Literal["nvidia", "amd"]
    match: str
    sm_count: int = Field(gt=0)
    #: nominal memory size (GB as marketed); a trace's totalGlobalMem must agree (see detect)
    memory_gb: float = Field(gt=0)
    peak_flops: dict[str, float]
    #: matrix-unit (MFMA) rates of the dtypes whose datasheet gives one apart from the vector
    #: rate in ``peak_flops`` (CDNA's FP32/FP64: MI250X FP32 matrix 2x vector): they bound the
    #: kernels of ``MATRIX_CLASSES``; a dtype not listed here bounds every class by peak_flops
    matrix_peak_flops: dict[str, float] = {}
    hbm_bandwidth_Bps: float = Field(gt=0)
    launch_latency_ns: int = Field(gt=0)
    source: str
    #: the PCIe link host<->device copies cross, and the GPU-to-GPU link (None: no fabric
    #: assumed, e.g. PCIe cards whose NVLink bridge is optional)
    host_link: Link
    peer_link: Link | None = None
    # engineering priors shared by every entry unless it says otherwise (see the manifest's _doc)
    launch_api_ns: int = Field(default=2500, gt=0)
    graph_launch_api_ns: int = Field(default=8000, gt=0)
    graph_node_ns: int = Field(default=1000, gt=0)
    kernel_floor_ns: int = Field(default=1500, gt=0)
    h2d_pinned_Bps: float = Field(default=50e9, gt=0)
    h2d_pageable_Bps: float = Field(default=18e9, gt=0)
    regs_per_sm: int = Field(default=65536, gt=0)
    smem_per_sm: int = Field(default=233472, gt=0)
    max_blocks_per_sm: int = Field(default=32, gt=0)
    max_threads_per_sm: int = Field(default=2048, gt=0)
    #: maximum SM clock (MHz) where the datasheet gives it: telemetry clocks are read against it
    sm_clock_max_mhz: int | None = None
    #: compute capability (sm_XY) or AMD gfx target; None where not given
    arch: str | None = None
    #: arithmetic types the tensor / matrix cores take (a lever that moves math to a type the
    #: device has no units for cannot act: engine/levers/applicable.py)
    matrix_dtypes: tuple[str, ...] = ()
    #: capabilities levers check: "flash_attention" (PyTorch's flash SDPA backend runs here)
    features: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _matrix_peaks(self) -> GpuPeaks:
        bad = [
            d for d, v in self.matrix_peak_flops.items() if not d or d not in DTYPES or not v > 0
        ]
        if bad:
            raise ValueError(f"matrix_peak_flops: unknown dtype or non-positive rate {bad}")
        return self

    def class_peak_flops(self) -> np.ndarray:
        """Return the FLOP/s bound per kernel class, indexed by ``Klass``."""
        return np.array([self.peak_flops[CLASS_PEAK.get(k, "fp32")] for k in Klass])

    @property
    def label(self) -> str:
        """Return the display name."""
        return self.name


def dtype_peak_table(hw: GpuPeaks | HardwareSpec) -> np.ndarray:
    """Return the FLOP/s bound per (kernel class, DTYPES code), NaN where the device lists no
    peak for the dtype: the matrix rate (``matrix_peak_flops``) for ``MATRIX_CLASSES`` where
    the datasheet gives one, the rate in ``peak_flops`` otherwise. Index it
    ``[klass, dtype]``."""
    vector = dtype_peaks(hw.peak_flops)
    mat = hw.matrix_peak_flops if isinstance(hw, GpuPeaks) else {}
    matrix = dtype_peaks({**hw.peak_flops, **mat})
    return np.array([matrix if k in MATRIX_CLASSES else vector for k in Klass])


# --------------------------------------------------------------------------- EESM
class KappaParams(_Strict):
    window: int = Field(ge=4)
    stride: int = Field(ge=1)
    min_count: int = Field(ge=4)
    ridge: float = Field(gt=0)
    k_max: float = Field(gt=1)

    @model_validator(mode="after")
    def _whole_blocks(self) -> KappaParams:
        # κ windows are made of whole blocks of `stride` rows (engine/eesm/kappa.py)
        if self.window % self.stride:
            raise ValueError(f"kappa.window ({self.window}) must be a multiple of kappa.stride")
        return self


class Priors(_Strict):
    model_config = ConfigDict(extra="ignore", frozen=True)
    short_kernel_ns: int = Field(gt=0)
    by_class: dict[str, tuple[float, float, float]]


class EesmParams(_Strict):
    """Hyperparameters of the EESM pipeline (DESIGN §4)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    regimes: tuple[str, ...]
    centroids: dict[str, Any]
    bregman_beta: float
    pressure_floor: float = Field(gt=0, lt=0.5)
    emission_scale: float = Field(gt=0)
    p_stay: float = Field(gt=0, lt=1)
    fixed_lag: int = Field(ge=1, le=4096)
    kappa: KappaParams
    priors: Priors
    #: emission weight per evidence tier (engine/trace/evidence.py), NONE..MEASURED: how much a
    #: row's pressures may move its label and its confidence (calibrated: see the manifest)
    evidence_weight: dict[str, float] = Field(
        default_factory=lambda: {"NONE": 0.0, "PRIOR": 1.0, "DERIVED": 1.0, "MEASURED": 1.0}
    )
    #: softmax temperature of a prior-tier row's own emission, its confidence (pipeline.py)
    prior_confidence_scale: float = Field(default=0.05, gt=0)
    #: the most confidence a shape-derived (DERIVED) label may carry: the measured agreement of
    #: such labels with counter-based ones (pipeline.py; only counters earn 1.0)
    derived_confidence_cap: float = Field(default=0.96, gt=0, le=1)
    #: the most confidence a label the κ gate flags (M_deg: not identifiable) may carry
    degenerate_confidence_cap: float = Field(default=0.5, gt=0, le=1)

    @model_validator(mode="after")
    def _centroids(self) -> EesmParams:
        for r in self.regimes:
            c = self.centroids.get(r)
            if not isinstance(c, list | tuple) or len(c) != 3:
                raise ValueError(f"centroid for {r} must be 3 numbers")
            if not all(self.pressure_floor <= float(x) <= 1 for x in c):
                raise ValueError(f"centroid for {r} must lie in [pressure_floor, 1]")
        missing = [k.name for k in Klass if k.name not in self.priors.by_class]
        if missing:
            raise ValueError(f"priors.by_class lacks kernel classes {missing}")
        return self

    def centroid_matrix(self) -> np.ndarray:
        """Return the (n_regimes, 3) centroid matrix in ``regimes`` order."""
        return np.array([self.centroids[r] for r in self.regimes], dtype=np.float64)

    def prior_matrix(self) -> np.ndarray:
        """Return the (n_classes, 3) fallback pressures indexed by ``Klass``."""
        return np.array([self.priors.by_class[k.name] for k in Klass], dtype=np.float64)

    def evidence_weights(self) -> np.ndarray:
        """Return the emission weight per Tier value (NONE, PRIOR, DERIVED, MEASURED)."""
        w = self.evidence_weight
        return np.array([float(w[k]) for k in ("NONE", "PRIOR", "DERIVED", "MEASURED")])

    def with_overrides(self, **kw: Any) -> EesmParams:
        """Return a copy with top-level fields replaced (used by ablations and tuning)."""
        return self.model_copy(update=kw)


# --------------------------------------------------------------------------- workloads
class KernelOp(_Strict):
    op: Literal["kernel"]
    name: str
    klass: str
    stream: int
    flops: float = Field(ge=0)
    bytes: float = Field(ge=0)
    dtype: str | None = None
    grid: int = Field(gt=0)
    block: int = Field(gt=0, le=1024)
    regs: int = Field(default=32, gt=0, le=255)
    smem: int = Field(default=0, ge=0)
    latency_ns: float = Field(default=0.0, ge=0)
    repeat: int = Field(default=1, ge=1)
    # ---- lever sites (what the program leaves on the table; see manifests/levers.json)
    #: a layout transpose around NCHW convolutions (channels_last removes it)
    role: Literal["compute", "layout_transform", "optimizer_foreach", "attention_math"] = "compute"
    #: convolution algorithm choice: cuDNN's heuristic pick, or the autotuned best
    algo: Literal["heuristic", "tuned"] | None = None
    #: ops of one unfused attention (QK^T, softmax, PV) share a group; flash_bytes = the fused
    #: kernel's DRAM traffic (Q, K, V, O and the bias)
    group: str | None = None
    flash_bytes: float | None = Field(default=None, gt=0)
    #: largest split-K / grid multiplier the kernel's shape allows (launch-config lever)
    split_max: int = Field(default=1, ge=1, le=64)
    #: the model's accuracy depends on this op staying in FP32 (a lower-precision lever breaks
    #: the workload's correctness check)
    fp32_required: bool = False

    @field_validator("klass")
    @classmethod
    def _klass(cls, v: str) -> str:
        if v not in Klass.__members__:
            raise ValueError(f"unknown kernel class {v!r}; one of {list(Klass.__members__)}")
        return v


class CopyOp(_Strict):
    op: Literal["copy"]
    stream: int
    bytes: float = Field(gt=0)
    direction: Literal["h2d", "d2h"] = "h2d"
    pinned: bool = False
    #: the copy's result is first needed at the end of the step (not by the next kernel), so a
    #: side stream can overlap it with compute
    deferred_use: bool = False


class HostOp(_Strict):
    op: Literal["host"]
    ns: float = Field(ge=0)
    what: str = "host work"
    #: work: framework/user code on the launching thread; data_loading: input pipeline work a
    #: loader can prefetch; alloc: cudaMalloc/cudaFree churn of the caching allocator
    kind: Literal["work", "data_loading", "alloc"] = "work"
    #: scales with the batch (per-sample host work) or not (per-step overhead)
    per_sample: bool = False


class RecordOp(_Strict):
    op: Literal["record"]
    stream: int
    event: str


class WaitOp(_Strict):
    op: Literal["wait"]
    stream: int
    event: str


class SyncOp(_Strict):
    op: Literal["sync"]
    stream: int | None = None  # None = cudaDeviceSynchronize
    #: required: the host reads a result after it; logging: a `.item()` for a log line only
    purpose: Literal["required", "logging"] = "required"


class LoopOp(_Strict):
    """Repeat a body of ops ``times`` times (an LSTM's time steps, a backbone's blocks)."""

    op: Literal["loop"]
    times: int = Field(ge=1, le=10_000)
    body: tuple[Op, ...]


Op = Annotated[
    KernelOp | CopyOp | HostOp | RecordOp | WaitOp | SyncOp | LoopOp, Field(discriminator="op")
]
LoopOp.model_rebuild()


def flatten_ops(ops: tuple[Any, ...]) -> list[Any]:
    """Return the ops with loops unrolled and kernel ``repeat`` expanded, in program order."""
    out: list[Any] = []
    for op in ops:
        if isinstance(op, LoopOp):
            body = flatten_ops(op.body)
            for _ in range(op.times):
                out.extend(body)
        elif isinstance(op, KernelOp) and op.repeat > 1:
            out.extend([op.model_copy(update={"repeat": 1})] * op.repeat)
        else:
            out.append(op)
    return out


class WorkloadSpec(_Strict):
    """One iteration of a workload's kernel graph, replayed by the simulated GPU."""

    name: str
    title: str
    description: str
    regime_mix: str
    streams: tuple[int, ...]
    memory_used_bytes: int = Field(gt=0)
    framework_ns: float = Field(ge=0, description="host-side framework cost per launched op")
    iteration: tuple[Op, ...]
    #: samples per iteration (the optimize loop reports time per sample)
    batch: int = Field(default=1, ge=1)
    #: shapes are static (CUDA graphs can capture the step)
    static_shapes: bool = True
    #: the node's power cap (W); None = the board's TDP
    power_limit_w: float | None = Field(default=None, gt=0)
    #: the real PyTorch model this simulated workload stands for (``--device cpu|cuda`` runs
    #: it: engine/workloads/models/)
    real_model: str | None = None

    @model_validator(mode="after")
    def _streams(self) -> WorkloadSpec:
        flat = flatten_ops(self.iteration)
        for op in flat:
            s = getattr(op, "stream", None)
            if s is not None and s not in self.streams:
                raise ValueError(f"op {op} uses stream {s} not declared in streams")
        recorded = {op.event for op in flat if isinstance(op, RecordOp)}
        for op in flat:
            if isinstance(op, WaitOp) and op.event not in recorded:
                raise ValueError(f"wait on event {op.event!r} that is never recorded")
        return self


class ExecConfig(_Strict):
    """How the simulated program executes: the settings levers change besides the op graph."""

    cuda_graphs: bool = False
    #: batches the data loader prepares ahead (0: loading runs inline on the launching thread)
    prefetch_depth: int = Field(default=0, ge=0, le=8)
    allocator: Literal["default", "expandable_segments"] = "default"
    #: power cap override (W); None = the workload's
    power_limit_w: float | None = Field(default=None, gt=0)
    batch_scale: int = Field(default=1, ge=1, le=16)


# --------------------------------------------------------------------------- loading
def _read(rel: str) -> Any:
    try:
        text = resources.files("manifests").joinpath(rel).read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise ManifestError(f"manifest {rel} not found") from e
    return json.loads(text)


class LeverPrior(_Strict):
    """A named effect-model constant a lever's transform scales by, with the range its source
    states (``low``/``high``: parameter values, not gains) and the source itself."""

    name: str
    value: float
    low: float
    high: float
    unit: str = ""
    source: str

    @model_validator(mode="after")
    def _in_range(self) -> LeverPrior:
        if not self.low <= self.value <= self.high:
            raise ValueError(f"prior {self.name!r}: {self.value} outside [{self.low}, {self.high}]")
        return self


class Threshold(_Strict):
    """A decision rule of the lever library (not an effect size): its value and why."""

    value: float
    why: str


class LeverPriors(_Strict):
    model_config = ConfigDict(extra="ignore", frozen=True)

    priors: dict[str, LeverPrior]
    thresholds: dict[str, Threshold]


class MeasurementParams(_Strict):
    """manifests/measurement.json: the measurement protocol's decision rules (each with its
    reason in the manifest)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    level: float = Field(gt=0.5, lt=1.0)
    min_gain: float = Field(ge=0.0, lt=0.5)
    aa_pairs: int = Field(ge=2)
    min_pairs: int = Field(ge=2)
    max_pairs: int = Field(ge=2)
    resolution: float = Field(gt=0.0, le=1.0)
    max_plausible_gain: float = Field(gt=0.0, lt=1.0)
    warmup_max_share: float = Field(gt=0.0, le=0.9)
    warmup_batch: int = Field(ge=1)
    launch_warmup_max_launches: int = Field(ge=4)
    launch_warmup_max_share: float = Field(gt=0.0, le=0.9)

    @model_validator(mode="after")
    def _ordered(self) -> MeasurementParams:
        if not self.min_pairs <= self.max_pairs:
            raise ValueError("min_pairs must not exceed max_pairs")
        return self


@lru_cache(maxsize=1)
def load_measurement() -> MeasurementParams:
    """Return manifests/measurement.json, validated."""
    return MeasurementParams.model_validate(_read("measurement.json"))


class CheckClass(_Strict):
    """One numerics class of manifests/correctness.json: its tolerances and their reason."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    rtol: float = Field(gt=0.0, lt=1.0)
    atol: float = Field(ge=0.0, lt=1.0)
    why: str


class CorrectnessParams(_Strict):
    """manifests/correctness.json: how close a lever's step must come to the baseline's, by
    what the lever does to the arithmetic (engine.workloads.torch_job.Reference.compare)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    rounding_ulps: int = Field(ge=0)
    classes: dict[str, CheckClass]


def load_correctness() -> CorrectnessParams:
    """manifests/correctness.json, with GITM_CHECK_RTOL's overrides ('reordered=1e-3,…': a
    class's rtol, its atol rtol / 100); ManifestError names a bad override."""
    base = _correctness()
    raw = os.environ.get("GITM_CHECK_RTOL", "").strip()
    if not raw:
        return base
    classes = dict(base.classes)
    for part in raw.split(","):
        name, _, value = part.strip().partition("=")
        try:
            rtol = float(value)
        except ValueError:
            rtol = math.nan
        if name not in classes or not 0 < rtol < 1:
            raise ManifestError(
                f"GITM_CHECK_RTOL: {part.strip()[:60]!r} is not CLASS=RTOL with CLASS one of "
                f"{', '.join(sorted(classes))} and 0 < RTOL < 1"
            )
        classes[name] = CheckClass(
            rtol=rtol, atol=rtol / 100, why=f"set by GITM_CHECK_RTOL={rtol:g}"
        )
    return base.model_copy(update={"classes": classes})


@lru_cache(maxsize=1)
def _correctness() -> CorrectnessParams:
    return CorrectnessParams.model_validate(_read("correctness.json"))


class CriticalPathParams(_Strict):
    """manifests/critical_path.json: when the critical-path account names an opportunity no
    lever implements (each share of the critical path; the reasons in the manifest)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    exposed_communication_share: float = Field(gt=0.0, lt=1.0)
    allocation_share: float = Field(gt=0.0, lt=1.0)
    pool_off_calls_per_step: int = Field(ge=1)
    pool_off_calls: int = Field(ge=1)
    data_loading_share: float = Field(gt=0.0, lt=1.0)
    host_share: float = Field(gt=0.0, lt=1.0)
    device_gap_share: float = Field(gt=0.0, lt=1.0)


@lru_cache(maxsize=1)
def load_critical_path() -> CriticalPathParams:
    """Return manifests/critical_path.json, validated."""
    return CriticalPathParams.model_validate(_read("critical_path.json"))


@lru_cache(maxsize=1)
def load_lever_priors() -> LeverPriors:
    """Return manifests/lever_priors.json, validated (every value inside its stated range)."""
    return LeverPriors.model_validate(_read("lever_priors.json"))


@lru_cache(maxsize=1)
def load_catalogue() -> tuple[GpuPeaks, ...]:
    """Return every GPU of manifests/hardware_catalogue.json, validated."""
    return tuple(GpuPeaks.model_validate(g) for g in _read("hardware_catalogue.json")["gpus"])


#: what a simulated device takes from its catalogue entry (one model of each GPU): the datasheet
#: peaks and the engineering priors the planner and the analysis of imported traces use too.
#: A telemetry manifest restating one of these is rejected.
CATALOGUE_FIELDS = (
    "id",
    "name",
    "sm_count",
    "sm_clock_max_mhz",
    "peak_flops",
    "hbm_bandwidth_Bps",
    "max_threads_per_sm",
    "regs_per_sm",
    "smem_per_sm",
    "max_blocks_per_sm",
    "launch_api_ns",
    "launch_latency_ns",
    "kernel_floor_ns",
    "graph_launch_api_ns",
    "graph_node_ns",
    "h2d_pinned_Bps",
    "h2d_pageable_Bps",
)


@lru_cache(maxsize=8)
def load_hardware(name: str = "h100_telemetry") -> HardwareSpec:
    """Return the simulated device ``manifests/<name>.json``: its catalogue entry (``device``)
    for the datasheet peaks and shared priors, plus the simulator's own calibration (clock
    floor, power, thermal model, achieved efficiency per class, noise)."""
    raw = {k: v for k, v in _read(f"{name}.json").items() if not k.startswith("_")}
    device = raw.pop("device", None)
    entry = next((g for g in load_catalogue() if g.id == device), None)
    if entry is None:
        raise ManifestError(f"{name}.json: 'device' {device!r} is not a hardware_catalogue.json id")
    restated = [k for k in (*CATALOGUE_FIELDS, "memory_bytes") if k in raw]
    if restated:
        raise ManifestError(
            f"{name}.json restates {', '.join(restated)} of catalogue entry {device!r}: "
            "edit hardware_catalogue.json (one model of each GPU)"
        )
    if entry.sm_clock_max_mhz is None:
        raise ManifestError(f"catalogue entry {device!r} lacks sm_clock_max_mhz (simulated clocks)")
    source = f"hardware_catalogue.json '{device}': {entry.source}"
    cites = {k: source for k in ("sm_count", "sm_clock_max_mhz", "hbm_bandwidth_Bps")}
    cites |= {f"peak_flops.{d}": source for d in entry.peak_flops}
    cites["memory_bytes"] = f"hardware_catalogue.json '{device}': memory_gb {entry.memory_gb:g}"
    shared = "hardware_catalogue.json _doc (engineering prior shared by every entry)"
    cites |= {k: shared for k in CATALOGUE_FIELDS[6:] if k not in raw.get("citations", {})}
    raw["citations"] = cites | raw.get("citations", {})
    fields = {k: getattr(entry, k) for k in CATALOGUE_FIELDS}
    fields["memory_bytes"] = round(entry.memory_gb * 2**30)
    return HardwareSpec.model_validate(fields | raw)


@lru_cache(maxsize=1)
def load_eesm() -> EesmParams:
    """Return the validated EESM hyperparameters from ``manifests/eesm.json``."""
    return EesmParams.model_validate(_read("eesm.json"))


def workload_names() -> list[str]:
    """Return the names of the built-in workloads, sorted."""
    files = resources.files("manifests").joinpath("workloads").iterdir()
    return sorted(f.name[:-5] for f in files if f.name.endswith(".json"))


@lru_cache(maxsize=16)
def load_workload(name: str) -> WorkloadSpec:
    """Return the validated workload spec; raise ManifestError naming the known ones if absent."""
    known = workload_names()
    if name not in known:
        raise ManifestError(f"unknown workload {name!r}; known: {', '.join(known)}")
    return WorkloadSpec.model_validate(_read(f"workloads/{name}.json"))
