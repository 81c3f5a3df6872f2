"""The predicted execution graph (DESIGN §5 "planner"): what should have happened.

For a workload spec on a catalogue GPU: each op's roofline — ideal time (dense peak of its
dtype, full HBM bandwidth) and expected time (at the class efficiency a well-tuned library
reaches, manifests/planner.json) — then the whole step scheduled with the replay machinery
(host launch costs from the catalogue, stream order, events, syncs). The predicted schedule
says which kernels should run concurrently (invariant 3).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from engine.manifest import (
    MATRIX_CLASSES,
    CopyOp,
    HostOp,
    KernelOp,
    RecordOp,
    SyncOp,
    WaitOp,
    WorkloadSpec,
    dtype_peak_table,
    flatten_ops,
)
from engine.planner.catalogue import CLASS_PEAK, GpuPeaks
from engine.schedule.dag import ReplayDag, Schedule, schedule
from engine.trace.segments import Kind, Klass, Provenance, Segments
from engine.trace.trace import ApiKind, Trace


@lru_cache(maxsize=1)
def planner_priors() -> dict[str, Any]:
    """Return manifests/planner.json."""
    return json.loads(resources.files("manifests").joinpath("planner.json").read_text())


@dataclass(frozen=True)
class BatchConfig:
    """Samples per step (scales kernel work and per-sample host work, like the batch lever)."""

    scale: int = 1


@dataclass
class Graph:
    """One predicted step: a row per device op (program order) and its predicted schedule."""

    workload: str
    hardware: str
    names: list[str]
    stream: np.ndarray  # int64
    klass: np.ndarray  # uint8
    ideal_ns: np.ndarray  # float64: roofline at peak (no kernel can beat it)
    expected_ns: np.ndarray  # float64: at the planner's expected efficiency
    bytes: np.ndarray  # float64 predicted DRAM bytes
    flops: np.ndarray  # float64
    start_ns: np.ndarray  # predicted start within the step
    end_ns: np.ndarray
    step_ns: float
    concurrent: list[tuple[int, int]]  # pairs of rows predicted to overlap
    #: per row, what the prediction rests on: roofline (from the spec or measured counters),
    #: geometry (an imported kernel without counters: its time at full waves), observed (no
    #: basis: the trace's own duration, so it cannot violate)
    basis: list[str] | None = None
    #: "spec": planned from a workload spec; "trace": derived from an imported trace, which
    #: carries no independent byte counts or concurrency plan to check against
    plan_source: str = "spec"

    def key(self) -> list[tuple[int, str, int]]:
        """(stream, name, occurrence) per row: how observed rows are matched to predicted ones."""
        seen: dict[tuple[int, str], int] = {}
        out = []
        for s, n in zip(self.stream.tolist(), self.names, strict=True):
            k = (int(s), n)
            out.append((int(s), n, seen.get(k, 0)))
            seen[k] = seen.get(k, 0) + 1
        return out


def expected_efficiency() -> np.ndarray:
    """The planner's expected library efficiency per class: (n_classes, 2) compute, memory."""
    ex = planner_priors()["expected"]
    return np.array([[ex[k.name]["compute"], ex[k.name]["memory"]] for k in Klass])


def row_peaks(klass: np.ndarray, dtype: np.ndarray, hw: GpuPeaks) -> np.ndarray:
    """FLOP/s bound per row: the peak of its dtype (Segments' DTYPES codes) where known, else
    its class's (``CLASS_PEAK``). A matrix-class row of a dtype whose datasheet gives a matrix
    rate apart from the vector one (CDNA's FP32/FP64) gets the matrix rate
    (``dtype_peak_table``)."""
    by_dtype = dtype_peak_table(hw)[np.asarray(klass, np.intp), np.asarray(dtype, np.intp)]
    return np.where(np.isfinite(by_dtype), by_dtype, hw.class_peak_flops()[klass])


def roofline_times(
    klass: np.ndarray,
    flops: np.ndarray,
    dram_bytes: np.ndarray,
    peak: np.ndarray,
    hw: GpuPeaks,
    floor_ns: float | None = None,
    sm_share: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(ideal, expected) duration in ns per row — the one kernel-time rule of the planner, the
    optimize loop's monitor and `gitm-tui analyze`:

    * ideal = max(FLOPs / (peak · s), bytes / HBM bandwidth): no kernel can run faster;
    * expected = kernel floor + max(FLOPs / (peak · s · eff_c), bytes / (HBM · eff_m)), with eff
      the efficiency a well-tuned library reaches for the row's class (manifests/planner.json).

    ``s`` (``sm_share``, 1 when not given) is the share of the SMs the kernel's grid can occupy:
    a block runs on one SM, so a grid of 24 blocks on 108 SMs has 24/108 of the device's
    arithmetic (``grid_sm_share``). ``floor_ns``: a kernel's fixed launch-to-drain cost (the
    catalogue's ``kernel_floor_ns`` when not given; an imported trace measures its own,
    ``kernel_floor``). A NaN FLOPs or bytes is unknown and bounds nothing; a row with neither
    is NaN on both."""
    eff = expected_efficiency()[np.asarray(klass, np.intp)]
    t_c = np.asarray(flops, np.float64) / peak * 1e9
    if sm_share is not None:
        t_c /= sm_share
    t_m = np.asarray(dram_bytes, np.float64) / hw.hbm_bandwidth_Bps * 1e9
    ideal = np.fmax(t_c, t_m)  # fmax ignores a NaN side
    floor = float(hw.kernel_floor_ns if floor_ns is None else floor_ns)
    expected = floor + np.fmax(t_c / eff[:, 0], t_m / eff[:, 1])
    return ideal, expected


def grid_sm_share(grid: np.ndarray, hw: GpuPeaks) -> np.ndarray:
    """The share of the device's SMs a launch grid can occupy: min(1, blocks / SMs) — each
    block runs on one SM, so a kernel of fewer blocks than SMs has at most that share of the
    arithmetic. 1 where the grid is not recorded (AMD Kineto traces)."""
    g = np.asarray(grid, np.float64)
    return np.where(g > 0, np.minimum(1.0, g / hw.sm_count), 1.0)


def shared_fraction(seg: Segments) -> np.ndarray:
    """Per row, the share of its duration during which another device row (kernel, copy or
    memset, on any stream) was running too: the device was shared, so the row's time says less
    about the row itself (in the worst case it made no progress meanwhile). 0 for rows that are
    not device activity."""
    dev = np.flatnonzero(np.isin(seg.kind, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)))
    out = np.zeros(len(seg))
    if len(dev) < 2:
        return out
    s, e = seg.start_ns[dev], seg.end_ns[dev]
    t = np.concatenate([s, e])
    step = np.concatenate([np.ones(len(s), np.int32), np.full(len(e), -1, np.int32)])
    order = np.lexsort((step, t))  # an end before a start at the same time: no overlap
    t, active = t[order], np.cumsum(step[order])
    del order, step
    # time with two or more rows running, accumulated at each breakpoint
    both = active[:-1] >= 2
    acc = np.concatenate(([0], np.cumsum(np.where(both, np.diff(t), 0))))

    def at(x: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(t, x, "right") - 1, 0, len(t) - 1)
        inside = np.where(i < len(both), both[np.minimum(i, len(both) - 1)], False)
        return acc[i] + np.where(inside, x - t[i], 0)

    dur = np.maximum(e - s, 1).astype(np.float64)
    out[dev] = np.clip((at(e) - at(s)) / dur, 0.0, 1.0)
    return out


def time_resolution_ns(seg: Segments) -> int:
    """The trace's time resolution: 1000 ns when every device row's start and end are whole
    microseconds (older Kineto writes integer µs), else 1 ns. A duration is known to within it."""
    dev = np.isin(seg.kind, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET))
    if not dev.any():
        return 1
    whole = (seg.start_ns[dev] % 1000 == 0).all() and (seg.end_ns[dev] % 1000 == 0).all()
    return 1000 if whole else 1


@dataclass(frozen=True)
class KernelFloor:
    """A kernel's fixed launch-to-drain cost on this device, and what it rests on."""

    ns: float
    rows: int  # the trace's kernels it was measured on (0: the catalogue's prior)
    basis: str


#: kernels whose roofline work at peak is under this share of the catalogue's empty-kernel
#: prior measure the fixed cost: their duration is (nearly) all of it
_NEGLIGIBLE = 0.1
#: the fewest such kernels a trace's own floor is measured on
_FLOOR_MIN_ROWS = 5


def kernel_floor(seg: Segments, hw: GpuPeaks, ideal: np.ndarray, shared: np.ndarray) -> KernelFloor:
    """The fixed cost of a kernel on this device as the trace measures it: the median duration
    of its kernels whose FLOPs and bytes (measured or derived) take under 10 % of the
    catalogue's empty-kernel prior at peak and that had the device to themselves (``shared``
    0). Their duration is the launch, block scheduling, memory latency and drain that every
    kernel pays; on real traces it is 3-6 µs, not the 1.5 µs of an empty kernel's prior. Fewer
    than 5 such kernels: the catalogue's ``kernel_floor_ns`` (a prior, and said so)."""
    prior = float(hw.kernel_floor_ns)
    with np.errstate(invalid="ignore"):
        sel = (
            (seg.kind == Kind.KERNEL)
            & (seg.klass != Klass.COMM)
            & (ideal < _NEGLIGIBLE * prior)
            & (shared == 0)
        )
    n = int(sel.sum())
    if n < _FLOOR_MIN_ROWS:
        return KernelFloor(
            prior,
            0,
            f"{prior / 1e3:g} µs, the catalogue's prior for an empty kernel (the trace has "
            f"{n} kernels of negligible work that ran alone to measure it on)",
        )
    ns = float(np.median(seg.duration_ns[sel]))
    return KernelFloor(
        ns,
        n,
        f"{ns / 1e3:g} µs, the median duration of the {n} kernels of this trace whose work "
        f"takes under {_NEGLIGIBLE * prior:g} ns at peak and that ran alone on the device",
    )


def trace_roofline(seg: Segments, hw: GpuPeaks) -> tuple[np.ndarray, np.ndarray]:
    """(ideal, expected) ns per row of an imported trace by ``roofline_times``: compute kernels
    whose FLOPs or bytes are measured (counters) or derived from the launching op's shapes, at
    their dtype's peak where known; NaN for every other row — copies cross a link, not HBM,
    and collectives wait on peers."""
    n = len(seg)
    ideal, expected = np.empty(n), np.empty(n)
    for lo in range(0, n, _BLOCK):  # in blocks: ~10 temporaries of 8-16 bytes a row otherwise
        s = slice(lo, lo + _BLOCK)
        prov, klass = seg.provenance[s], seg.klass[s]
        derived = (prov & Provenance.DERIVED) != 0
        kern = (seg.kind[s] == Kind.KERNEL) & (klass != Klass.COMM)
        known_f = kern & (((prov & Provenance.FLOPS) != 0) | derived)
        known_b = kern & (((prov & Provenance.DRAM_BYTES) != 0) | derived)
        ideal[s], expected[s] = roofline_times(
            klass,
            np.where(known_f, seg.flops[s], np.nan),
            np.where(known_b, seg.dram_bytes[s], np.nan),
            row_peaks(klass, seg.dtype[s], hw),
            hw,
            sm_share=grid_sm_share(seg.grid[s], hw),
        )
    # the fixed cost: the trace's own where it can measure it (kernel_floor)
    floor = kernel_floor(seg, hw, ideal, shared_fraction(seg))
    expected += floor.ns - float(hw.kernel_floor_ns)
    return ideal, expected


def counted(seg: Segments) -> np.ndarray:
    """Rows whose FLOPs or bytes are measured by counters (the rest that have them are derived
    from shapes): the rows whose work is known, not estimated."""
    prov = seg.provenance
    return (prov & np.uint8(Provenance.FLOPS | Provenance.DRAM_BYTES)) != 0


def above_peak(seg: Segments, ideal: np.ndarray) -> np.ndarray:
    """Rows whose work, derived from shapes, implies more than the device's peak (FLOPs on the
    SMs its grid can occupy, or bytes at the HBM bandwidth) in the time they took: evidence that
    the count is not what the kernel did (logical bytes an L2 served, an op's work that shapes
    overstate), not a kernel faster than the hardware. Measured rows are never in it."""
    with np.errstate(invalid="ignore"):
        return (seg.duration_ns < ideal) & ~counted(seg) & np.isfinite(ideal)


#: rows per block of trace_roofline
_BLOCK = 1 << 16


def roofline(op: KernelOp, hw: GpuPeaks) -> tuple[float, float]:
    """(ideal, expected) duration of one kernel op in ns (``roofline_times``, plus the op's own
    latency in the expected time)."""
    k = Klass[op.klass]
    peak_key = op.dtype or CLASS_PEAK.get(k, "fp32")
    # a matrix-class op runs on the matrix units: their rate where the datasheet gives one
    rates = {**hw.peak_flops, **hw.matrix_peak_flops} if k in MATRIX_CLASSES else hw.peak_flops
    peak = rates.get(peak_key, hw.peak_flops["fp32"])
    ideal, expected = roofline_times(
        np.array([Klass[op.klass]]),
        np.array([op.flops]),
        np.array([op.bytes]),
        np.array([peak]),
        hw,
    )
    return float(ideal[0]), float(expected[0]) + op.latency_ns


def predict_graph(model: WorkloadSpec, hw: GpuPeaks, batch: BatchConfig | None = None) -> Graph:
    """Predict one step of ``model`` on ``hw`` (DESIGN §9: predict_graph(model, hw, batch))."""
    k = (batch or BatchConfig()).scale
    ops = flatten_ops(model.iteration)
    names: list[str] = []
    stream, klass, ideal, expected, nbytes, flops = [], [], [], [], [], []
    api: list[int] = []
    gap: list[float] = []
    dur: list[float] = []
    h_stream: list[int] = []
    h_event: list[int] = []
    h_dev: list[list[int]] = []
    events: dict[str, int] = {}
    fw = model.framework_ns
    for op in ops:
        if isinstance(op, KernelOp | CopyOp):
            d = len(names)
            if isinstance(op, KernelOp):
                op_k = op.model_copy(update={"flops": op.flops * k, "bytes": op.bytes * k})
                i_ns, e_ns = roofline(op_k, hw)
                names.append(op.name)
                klass.append(int(Klass[op.klass]))
                flops.append(op_k.flops)
                b = op_k.bytes
            else:
                bw = hw.h2d_pinned_Bps if op.pinned else hw.h2d_pageable_Bps
                b = op.bytes * k
                i_ns = e_ns = max(float(hw.kernel_floor_ns), b / bw * 1e9)
                names.append(
                    f"Memcpy {'HtoD' if op.direction == 'h2d' else 'DtoH'} "
                    f"({'Pinned' if op.pinned else 'Pageable'})"
                )
                klass.append(int(Klass.COPY))
                flops.append(0.0)
            stream.append(op.stream)
            ideal.append(i_ns)
            expected.append(e_ns)
            nbytes.append(b)
            blocking = isinstance(op, CopyOp) and not op.pinned
            kind = ApiKind.MEMCPY_SYNC if blocking else ApiKind.LAUNCH
            api.append(kind)
            gap.append(fw)
            dur.append(float(hw.launch_api_ns))
            h_stream.append(op.stream)
            h_event.append(-1)
            h_dev.append([d])
        elif isinstance(op, HostOp):
            api.append(ApiKind.HOST_WORK)
            gap.append(0.0)
            dur.append(op.ns * (k if op.per_sample else 1))
            h_stream.append(-1)
            h_event.append(-1)
            h_dev.append([])
        elif isinstance(op, RecordOp | WaitOp):
            api.append(ApiKind.EVENT_RECORD if isinstance(op, RecordOp) else ApiKind.STREAM_WAIT)
            gap.append(0.0)
            dur.append(0.0)
            h_stream.append(op.stream)
            h_event.append(events.setdefault(op.event, len(events)))
            h_dev.append([])
        elif isinstance(op, SyncOp):
            api.append(ApiKind.SYNC)
            gap.append(0.0)
            dur.append(0.0)
            h_stream.append(-1 if op.stream is None else op.stream)
            h_event.append(-1)
            h_dev.append([])
    n = len(names)
    dag = ReplayDag(
        api=np.array(api, np.uint8),
        gap_ns=np.array(gap, float),
        dur_ns=np.array(dur, float),
        h_stream=np.array(h_stream, np.int64),
        h_event=np.array(h_event, np.int64),
        h_dev=h_dev,
        d_stream=np.array(stream, np.int64),
        d_dur=np.array(expected, float),
        d_live=np.ones(n, bool),
        d_kind=np.full(n, Kind.KERNEL, np.uint8),
        d_klass=np.array(klass, np.uint8),
        d_name=names,
        d_flops=np.array(flops, float),
        d_bytes=np.array(nbytes, float),
        d_grid=np.zeros(n, np.int64),
        d_block=np.zeros(n, np.int64),
        d_regs=np.zeros(n, np.int64),
        d_smem=np.zeros(n, np.int64),
        d_regime=np.full(n, 255, np.uint8),
        d_start_obs=np.zeros(n, np.int64),
        d_row=np.full(n, -1, np.int64),
        launch_latency_ns=float(hw.launch_latency_ns),
        graph_node_ns=float(hw.graph_node_ns),
        iterations=1,
        t0_ns=0.0,
        observed_ns=0.0,
    )
    sc: Schedule = schedule(dag)
    return Graph(
        workload=model.name,
        hardware=hw.id,
        names=names,
        stream=dag.d_stream,
        klass=dag.d_klass,
        ideal_ns=np.array(ideal, float),
        expected_ns=np.array(expected, float),
        bytes=np.array(nbytes, float),
        flops=np.array(flops, float),
        start_ns=sc.d_start,
        end_ns=sc.d_end,
        step_ns=sc.makespan_ns,
        concurrent=_concurrent(dag.d_stream, sc.d_start, sc.d_end),
    )


def _concurrent(stream: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[tuple[int, int]]:
    """Pairs on different streams whose predicted intervals overlap by at least the planner's
    ``concurrency_min_overlap`` share of the shorter one."""
    share = planner_priors()["concurrency_min_overlap"]
    out = []
    order = np.argsort(start)
    for a_i, a in enumerate(order.tolist()):
        for b in order[a_i + 1 :].tolist():
            if start[b] >= end[a]:
                break
            if stream[a] == stream[b]:
                continue
            ov = min(end[a], end[b]) - max(start[a], start[b])
            short = min(end[a] - start[a], end[b] - start[b])
            if short > 0 and ov >= share * short:
                out.append((int(min(a, b)), int(max(a, b))))
    return out


def predict_trace_graph(trace: Trace, hw: GpuPeaks) -> Graph:
    """The predicted execution of an imported trace: the trace's own dependency graph (launch,
    stream, event and sync edges) with each row at what it should have taken —

    * compute kernels with measured or shape-derived FLOPs or DRAM bytes: the roofline at the
      planner's expected library efficiency for their class, and the ideal at peak
      (``trace_roofline``, the rule `gitm-tui analyze` checks too);
    * tensor-core classes (GEMM, conv, attention) with launch geometry but no counters: their
      observed time with the wave-quantisation loss removed (a grid of 1.1 waves pays for 2);
    * anything else: its observed time (no basis to predict it; it cannot violate).
    """
    from engine.schedule.dag import build_dag

    dag = build_dag(trace, hw, iterations=1)
    seg = trace.segments.take(dag.d_row)
    n = len(dag.d_stream)
    klass = dag.d_klass.astype(np.intp)
    ideal, expected = trace_roofline(seg, hw)
    roof = np.isfinite(expected)
    # tensor-core kernels without counters: their time at full waves (geometry)
    tc = np.isin(klass, (Klass.GEMM, Klass.CONV, Klass.ATTENTION)) & (seg.grid > 0)
    tc &= (seg.block > 0) & ~roof
    block = np.maximum(seg.block, 1).astype(np.int64)
    per_sm = np.clip(hw.max_threads_per_sm // block, 1, hw.max_blocks_per_sm)
    cap = per_sm * hw.sm_count
    grid = seg.grid.astype(np.int64)
    waves = -(-grid // cap)
    wave_eff = grid / np.maximum(waves * cap, 1)
    geo = tc & (waves > 1) & (wave_eff < 0.999)
    floor = float(hw.kernel_floor_ns)
    at_waves = floor + (dag.d_dur - floor) * wave_eff
    expected = np.where(roof, expected, np.where(geo, at_waves, dag.d_dur))
    ideal = np.where(roof, ideal, np.where(geo, at_waves, dag.d_dur))
    basis = np.where(roof, "roofline", np.where(geo, "geometry", "observed")).tolist()
    order = np.argsort(dag.d_start_obs, kind="stable")  # rows in start order, as residuals
    pred = dag.copy()
    pred.d_dur = expected
    sc = schedule(pred)
    return Graph(
        workload=trace.source or "trace",
        hardware=hw.id,
        names=[dag.d_name[i] for i in order],
        stream=dag.d_stream[order],
        klass=dag.d_klass[order],
        ideal_ns=ideal[order],
        expected_ns=expected[order],
        bytes=np.full(n, np.nan),
        flops=np.where(np.isfinite(expected), seg.flops, np.nan)[order],
        start_ns=sc.d_start[order],
        end_ns=sc.d_end[order],
        step_ns=sc.makespan_ns,
        concurrent=[],
        basis=[basis[i] for i in order],
        plan_source="trace",
    )
