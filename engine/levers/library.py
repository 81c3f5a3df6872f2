"""The lever library: 16 levers, each with its sites in a simulated workload, a replay transform
on the trace's dependency graph, and a mechanistic apply (the edited program is re-simulated).

Reading guide: every lever is a small class with three methods —

* ``sites(state)``: can this workload be changed this way (and where)? The reason says why not.
* ``transform(obs)``: the counterfactual, on the *trace's* replay graph only (engine.optimizer
  .dag): which rows it edits and how, using measured durations, counters, decoded regimes,
  telemetry and the hardware catalogue. Effect-model constants are named priors (levers.json).
* ``apply(state)``: the program/config edit the simulator then runs. Rollback is restoring the
  previous state, which the journal holds.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from engine.device.kernel_model import blocks_per_sm
from engine.levers.model import Applicability, Edit, LeverSpec, Observation, Prior, lever_specs
from engine.manifest import CopyOp, HostOp, KernelOp, RecordOp, SyncOp, WaitOp
from engine.planner.catalogue import GpuPeaks
from engine.regimes import Regime
from engine.schedule.dag import NOP, ReplayDag
from engine.telemetry.sample import ClockEventReason
from engine.trace.segments import Kind, Klass
from engine.trace.trace import ApiKind
from engine.workloads.sim import SimState

# ------------------------------------------------------------------ effect-model priors
# Each prior a transform scales by carries the range its source states (a Prior): the loop
# replays at the value; `gitm-tui analyze` also replays at the range's ends for an interval.
FUSED_SIDE_INPUT_SHARE = 0.25  # fused traffic = largest member + this share of the rest
# range 0-0.5: engineering prior, not measured by us. 0 = a pure chain (each op reads only the
# previous op's output: fused traffic is the first input plus the last output); 0.5 = half of
# every member's traffic is side inputs (bias, residual, mask) that the fused kernel still reads
SIDE_INPUT = Prior("fused side-input share", FUSED_SIDE_INPUT_SHARE, 0.0, 0.5)
MEM_EFFICIENCY = 0.8  # achieved share of HBM bandwidth assumed for new memory-bound kernels
# range 0.6-0.9: engineering prior, not measured by us (streaming kernels commonly reach 80-90 %
# of HBM peak; multi-tensor kernels with many small tensors less)
MEM_EFF = Prior("achieved share of HBM bandwidth", MEM_EFFICIENCY, 0.6, 0.9)
AUTOTUNE_SPEEDUP = 1.25  # cuDNN benchmark mode vs heuristic pick, compute-bound convs
# range 1.1-1.4: levers.json's own statement ("cuDNN benchmark mode commonly gains 10-40 % on
# convs"), an engineering prior, not measured by us
AUTOTUNE = Prior("cuDNN autotune speedup", AUTOTUNE_SPEEDUP, 1.1, 1.4, "x")
# share of the catalogue's peak ratio (peak_target / peak_source) a converted matmul/conv
# realises: 1 = it reaches the same fraction of its new peak as it did of the old one (the
# transform's model); 0.5 = half of that. Engineering prior, not measured by us: tensor-core
# kernels usually reach a smaller share of their much higher peak than SIMT FP32 kernels do
# (tile quantisation, epilogues and memory weigh more), so the ratio is an upper end
PEAK_RATIO = Prior("share of the peak-ratio speedup realised", 1.0, 0.5, 1.0)
MAX_SPLIT = 8  # split-K / grid multiplier ceiling
FLASH_EFFICIENCY = 0.55  # FlashAttention-2/3 share of dense BF16 peak on Hopper
# range 0.5-0.75: FlashAttention-2 (Dao, 2023) reaches 50-73 % of A100's peak FLOP/s in the
# forward pass; FlashAttention-3 (Shah et al., 2024) up to 75 % of H100's FP16 peak
FLASH = Prior("flash attention share of BF16 peak", FLASH_EFFICIENCY, 0.5, 0.75)
ALLOC_FACTOR = 0.1  # allocator host time left with expandable segments
# range 0-1: engineering prior, not measured by us. Expandable segments remove the cudaFree /
# cudaMalloc pairs of segment resizing but not allocations of new memory; which of the two an
# allocator call was is not in a trace, so anything from all (0) to none (1) of it may remain
ALLOC = Prior("allocator time left", ALLOC_FACTOR, 0.0, 1.0)
FOREACH_MIN_RUN = 16  # launches of one kernel in a row that look like a per-parameter loop
# CUDA graphs on an imported trace (CudaGraphs.transform_launch_api). Host cost of one
# cudaGraphLaunch and what each captured launch still costs on the host: the catalogue's
# defaults (graph_launch_api_ns 8 us, graph_node_ns 1 us) with the ranges its sources state
# ("a few to ~10 us regardless of node count", "~1 us or less": NVIDIA blog 'Getting Started
# with CUDA Graphs', 2019, as cited in manifests/h100_telemetry.json); not measured by us
GRAPH_LAUNCH = Prior("cudaGraphLaunch host cost", 8000.0, 3000.0, 10000.0, "ns")
GRAPH_NODE = Prior("host cost per captured launch", 1000.0, 0.0, 1000.0, "ns")
# A region needs at least this many kernel launches to count: below it the launch-API time a
# graph saves (a few us per launch) is of the order of the graph launch's own cost plus the
# static-buffer copies a capture needs, and nobody captures it; 5 is "a handful"
MIN_GRAPH_KERNELS = 5
# A launch call longer than this multiple of the trace's median launch is waiting, not
# launching: for room in the launch queue while the device is behind, or for lazy module
# loading on a kernel's first launch (milliseconds); a graph launch waits for those as well,
# so only this much of such a call counts as launch-API time. In the real A100 training trace
# launches take 5-17 us (p10-p99, median 6 us): 4x the median keeps that spread and clips 0.1 %
LAUNCH_OUTLIER = 4.0
FP32_GEMM = re.compile(r"sgemm|simt", re.IGNORECASE)
TF32_GEMM = re.compile(r"tf32|s1688|s16816", re.IGNORECASE)
LAYOUT = re.compile(r"nchwtonhwc|nhwctonchw|transpose.*(nchw|nhwc)", re.IGNORECASE)
SOFTMAX = re.compile(r"softmax", re.IGNORECASE)
_FUSABLE = (Klass.ELEMENTWISE, Klass.NORM)
_LAUNCHES = (ApiKind.LAUNCH, ApiKind.GRAPH_NODE)


# ------------------------------------------------------------------ graph helpers
def _floor(obs: Observation) -> float:
    return float(obs.hw.kernel_floor_ns)


def launch_runs(
    dag: ReplayDag, pred: Callable[[int], bool] | np.ndarray, min_len: int = 2
) -> list[list[int]]:
    """Runs of device rows launched back to back (consecutive host launch rows, one stream,
    nothing else on the host in between) that all satisfy ``pred`` (a function of the device
    row, or a boolean mask over device rows): program adjacency. Removed (NOP) host rows do not
    break a run."""
    off, flat = dag.launch_lists()
    rows = np.flatnonzero(dag.api != NOP)
    d0 = np.full(len(rows), -1, np.int64)
    cand = np.isin(dag.api[rows], _LAUNCHES) & (np.diff(off)[rows] == 1)
    d0[cand] = flat[off[rows[cand]]]
    cand[cand] = dag.d_live[d0[cand]]
    ok = cand.copy()
    if callable(pred):
        ok[cand] = np.fromiter((pred(d) for d in d0[cand].tolist()), np.bool_, int(cand.sum()))
    else:
        ok[cand] = np.asarray(pred, np.bool_)[d0[cand]]
    idx = np.flatnonzero(ok)
    if not len(idx):
        return []
    stream = dag.d_stream[d0[idx]]
    start = np.ones(len(idx), np.bool_)
    start[1:] = (idx[1:] != idx[:-1] + 1) | (stream[1:] != stream[:-1])
    cuts = [*np.flatnonzero(start).tolist(), len(idx)]
    return [d0[idx[a:b]].tolist() for a, b in itertools.pairwise(cuts) if b - a >= min_len]


def _merge(
    dag: ReplayDag,
    run: list[int],
    dur: float,
    flops: float,
    nbytes: float,
    host_of: np.ndarray | None = None,
) -> None:
    """Fuse ``run`` into its first row: new duration/counters; the others and their launch
    calls disappear. ``host_of``: ``dag.host_of()``, computed once by a caller merging many
    runs (merging does not change which host row launched a surviving row)."""
    if host_of is None:
        host_of = dag.host_of()
    first = run[0]
    dag.d_dur[first] = dur
    dag.d_flops[first] = flops
    dag.d_bytes[first] = nbytes
    for d in run[1:]:
        dag.remove_device_row(d)
        h = int(host_of[d])
        if h >= 0:
            dag.remove_host_row(h)
            dag.h_dev[h] = []


def _program_runs(ops: list[Any], pred: Callable[[Any], bool]) -> Iterator[tuple[int, int]]:
    """(start, end) index ranges of adjacent kernel ops on one stream satisfying ``pred``."""
    i = 0
    while i < len(ops):
        if isinstance(ops[i], KernelOp) and pred(ops[i]):
            j = i + 1
            while (
                j < len(ops)
                and isinstance(ops[j], KernelOp)
                and pred(ops[j])
                and ops[j].stream == ops[i].stream
            ):
                j += 1
            if j - i >= 2:
                yield i, j
            i = j
        else:
            i += 1


def _fill(dag: ReplayDag, d: int, hw: GpuPeaks) -> float:
    """Share of one wave's resident-block slots the row's grid fills (1 when unknown); blocks
    per SM from the row's threads, registers and shared memory against the catalogue limits."""
    if dag.d_grid[d] <= 0:
        return 1.0
    block = max(1, int(dag.d_block[d]))
    per_sm = min(
        hw.max_blocks_per_sm,
        hw.max_threads_per_sm // block,
        hw.regs_per_sm // max(1, int(dag.d_regs[d]) * block) if dag.d_regs[d] > 0 else 1 << 30,
        hw.smem_per_sm // int(dag.d_smem[d]) if dag.d_smem[d] > 0 else 1 << 30,
    )
    return float(dag.d_grid[d]) / (max(1, per_sm) * hw.sm_count)


# ------------------------------------------------------------------ base class
class Lever:
    """Base: subclasses set ``id`` and implement sites / transform / apply."""

    id: ClassVar[str]
    #: the named priors its transform scales by (their ranges give `analyze` its interval)
    priors: ClassVar[tuple[Prior, ...]] = ()

    @property
    def spec(self) -> LeverSpec:
        return lever_specs()[self.id]

    def sites(self, state: SimState) -> Applicability:
        raise NotImplementedError

    def transform(self, obs: Observation) -> Edit:
        raise NotImplementedError

    def apply(self, state: SimState) -> SimState:
        raise NotImplementedError


# ------------------------------------------------------------------ the levers
class CudaGraphs(Lever):
    id = "cuda_graphs"

    def sites(self, state: SimState) -> Applicability:
        if state.config.cuda_graphs:
            return Applicability(False, "the step already runs as CUDA graphs")
        if not state.spec.static_shapes:
            return Applicability(
                False, "shapes vary between steps: a captured graph would not replay"
            )
        return Applicability(True, "static-shape step launched eagerly")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        capt = {ApiKind.LAUNCH, ApiKind.MEMCPY_ASYNC, ApiKind.EVENT_RECORD, ApiKind.STREAM_WAIT}
        regions: list[tuple[int, int]] = []
        r, n = 0, len(dag.api)
        while r < n:
            if int(dag.api[r]) in capt:
                e = r
                while e < n and (int(dag.api[e]) in capt or int(dag.api[e]) == NOP):
                    e += 1
                if any(dag.h_dev[k] for k in range(r, e)):
                    regions.append((r, e))
                r = e
            else:
                r += 1
        rows = 0
        gaps = []
        for r, e in regions:
            gaps.append(float(dag.gap_ns[r]))
            for k in range(r, e):
                if int(dag.api[k]) in (ApiKind.LAUNCH, ApiKind.MEMCPY_ASYNC):
                    dag.api[k] = ApiKind.GRAPH_NODE
                    rows += 1
                dag.gap_ns[k] = 0.0
                dag.dur_ns[k] = 0.0
        dag.insert_host_rows(  # one graph launch before each region, in one pass
            [r for r, _ in regions],
            [ApiKind.GRAPH_LAUNCH] * len(regions),
            gaps,
            [obs.hw.graph_launch_api_ns] * len(regions),
        )
        return Edit(
            dag, rows, f"{rows} launches in {len(regions)} capturable regions → graph launches"
        )

    def transform_launch_api(self, obs: Observation) -> tuple[Edit, GraphCapture]:
        """The counterfactual for an *imported* trace (`gitm-tui analyze`): what such a trace
        measures of a graph's saving is the launch calls' own host time. In each capturable
        region (``capturable_regions``) every launch keeps ``GRAPH_NODE`` of its API time and
        the region's first launch pays one ``GRAPH_LAUNCH``; the rest of the launch-API time
        goes (a call counts up to ``LAUNCH_OUTLIER`` x the trace's median launch). The host
        time *between* launches (framework dispatch, Python, autograd, the optimizer) stays:
        the trace cannot show how much of it a capture would skip, and the launches stay where
        the host issued them. (``transform``, for the simulated workloads,
        also removes that time: there it is the simulator's per-op framework cost, which its
        graph replay skips.) A region whose saving would not pay for its graph launch stays
        eager."""
        dag = obs.dag.copy()
        node, launch = obs.prior(GRAPH_NODE), obs.prior(GRAPH_LAUNCH)
        launches = dag.dur_ns[dag.api == ApiKind.LAUNCH]
        cap = GraphCapture(LAUNCH_OUTLIER * float(np.median(launches)) if len(launches) else 0.0)
        for rows in capturable_regions(dag):
            call = dag.dur_ns[rows]
            kept = call - np.maximum(0.0, np.minimum(call, cap.clip_ns) - node)
            saved = float((call - kept).sum()) - launch
            if saved <= 0:
                continue
            inside = slice(int(rows[0]) + 1, int(rows[-1]) + 1)  # host rows after the first
            cap.between_ns += float(
                dag.gap_ns[inside].sum() + dag.dur_ns[inside].sum() - dag.dur_ns[rows[1:]].sum()
            )
            dag.dur_ns[rows] = kept
            dag.dur_ns[rows[0]] += launch
            cap.regions += 1
            cap.launches += len(rows)
            cap.removed_ns += saved
        edit = Edit(
            dag,
            cap.launches,
            f"{cap.launches} launches in {cap.regions} capturable regions: launch-API time "
            "beyond a graph node's cost removed, host time between launches kept",
        )
        return edit, cap

    def apply(self, state: SimState) -> SimState:
        return state.with_config(cuda_graphs=True)


@dataclass
class GraphCapture:
    """What ``CudaGraphs.transform_launch_api`` captured: the most of one call that counts as
    launch-API time, regions, launches (and async copies) in them, the launch-API host time
    removed (net of the graph launches) and the host time between those launches it kept."""

    clip_ns: float = 0.0
    regions: int = 0
    launches: int = 0
    removed_ns: float = 0.0
    between_ns: float = 0.0


#: host rows a stream capture cannot span (see ``capturable_regions``)
_CAPTURE_CUTS = (
    ApiKind.SYNC,  # cudaStream/Device/EventSynchronize: illegal while capturing
    ApiKind.MEMCPY_SYNC,  # a blocking (pageable) copy: host-visible data, illegal too
    ApiKind.MALLOC,  # cudaMalloc/cudaFree: illegal while capturing
    ApiKind.HOST_WORK,  # annotated host work: launches after it may take its results
    ApiKind.DATA_LOADING,  # new input every step
    ApiKind.GRAPH_LAUNCH,  # already a graph
    ApiKind.GRAPH_NODE,
)


def capture_cuts(dag: ReplayDag) -> tuple[np.ndarray, np.ndarray]:
    """(cut, node) masks over host rows. ``node``: a kernel launch or async copy a capture would
    turn into a graph node. ``cut``: a row no stream capture can span — a synchronisation, an
    allocation, a blocking copy, a copy from/to pageable memory (named so by its device row:
    host-visible data, which capture forbids), annotated host work or data loading, a graph."""
    api = dag.api
    off, _ = dag.launch_lists()
    node = (np.diff(off) > 0) & np.isin(api, (ApiKind.LAUNCH, ApiKind.MEMCPY_ASYNC))
    pageable = np.zeros(len(api), np.bool_)
    for r in np.flatnonzero(node & (api == ApiKind.MEMCPY_ASYNC)).tolist():
        pageable[r] = any("pageable" in dag.d_name[d].lower() for d in dag.h_dev[r])
    return np.isin(api, _CAPTURE_CUTS) | pageable, node & ~pageable


def capturable_regions(dag: ReplayDag) -> list[np.ndarray]:
    """Host rows (graph nodes, in host order) of each region one stream capture could cover:
    the launch sequence cut at every ``capture_cuts`` row. Other calls (attribute queries,
    event record/wait, …) neither cut a region nor count in it. Only regions with at least
    ``MIN_GRAPH_KERNELS`` kernel launches are returned."""
    cut, node = capture_cuts(dag)
    rows = np.flatnonzero(node)
    if not len(rows):
        return []
    region = np.cumsum(cut)[rows]  # region id of each node: cuts seen before it
    parts = np.split(rows, np.flatnonzero(np.diff(region)) + 1)
    return [p for p in parts if int((dag.api[p] == ApiKind.LAUNCH).sum()) >= MIN_GRAPH_KERNELS]


class ElementwiseFusion(Lever):
    id = "elementwise_fusion"
    priors = (SIDE_INPUT,)

    @staticmethod
    def _op_ok(o: KernelOp) -> bool:
        return o.klass in ("ELEMENTWISE", "NORM") and o.role == "compute"

    def sites(self, state: SimState) -> Applicability:
        runs = list(_program_runs(state.program(), self._op_ok))
        if not runs:
            return Applicability(False, "no adjacent elementwise/norm kernels to fuse")
        return Applicability(True, f"{len(runs)} chains of adjacent elementwise/norm kernels")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl = _floor(obs)

        ok = np.isin(dag.d_klass, _FUSABLE) & (dag.d_kind == Kind.KERNEL)
        runs = [
            run
            for run in launch_runs(dag, ok)
            if not _same_name_run(dag, run)  # a per-parameter loop: the fused optimizer's job
        ]
        host_of = dag.host_of()
        side = obs.prior(SIDE_INPUT)
        for run in runs:
            b = np.nan_to_num(dag.d_bytes[run])
            work = float(np.sum(np.maximum(0.0, dag.d_dur[run] - fl)))
            total = float(b.sum())
            fused = float(b.max() + side * (total - b.max())) if total else 0.0
            # bytes not measured (a profiler trace without counters): members of equal
            # traffic, so the same side-input share applies to the k - 1 others
            ratio = fused / total if total > 0 else (1.0 + side * (len(run) - 1)) / len(run)
            merged_flops = float(np.nansum(dag.d_flops[run]))
            _merge(dag, run, fl + work * ratio, merged_flops, fused, host_of)
        n = sum(len(r) for r in runs)
        return Edit(dag, n, f"{n} kernels in {len(runs)} adjacent elementwise/norm chains fused")

    def apply(self, state: SimState) -> SimState:
        ops = state.program()
        out: list[Any] = []
        i = 0
        for s, e in _program_runs(ops, self._op_ok):
            out.extend(ops[i:s])
            run = ops[s:e]
            b = [o.bytes for o in run]
            fused = max(b) + FUSED_SIDE_INPUT_SHARE * (sum(b) - max(b))
            out.append(
                run[0].model_copy(
                    update={
                        "name": f"triton_poi_fused_{len(run)}_{_stem(run[0].name)}",
                        "flops": sum(o.flops for o in run),
                        "bytes": fused,
                        "grid": max(o.grid for o in run),
                        "latency_ns": max(o.latency_ns for o in run),
                        "repeat": 1,
                    }
                )
            )
            i = e
        out.extend(ops[i:])
        return state.with_program(out)


def _same_name_run(dag: ReplayDag, run: list[int]) -> bool:
    return len(run) >= FOREACH_MIN_RUN and len({dag.d_name[d] for d in run}) == 1


def _stem(name: str) -> str:
    m = re.search(r"<([^>]+)>", name)
    return re.sub(r"\W+", "_", m.group(1) if m else name)[:40]


@functools.lru_cache(maxsize=65536)
def _precision_of(name: str) -> str | None:
    """'fp32' / 'tf32' matmul or conv kernel by name, else None (once per distinct name)."""
    if FP32_GEMM.search(name) and "tensorop" not in name.lower():
        return "fp32"
    if TF32_GEMM.search(name):
        return "tf32"
    return None


@functools.lru_cache(maxsize=65536)
def _is_layout_transform(name: str) -> bool:
    return LAYOUT.search(name) is not None


class _Precision(Lever):
    """Shared by TF32 and BF16: rescale compute time of matmul/conv rows by peak ratios."""

    target: ClassVar[str]
    sources: ClassVar[tuple[str, ...]]
    bytes_factor: ClassVar[float]
    new_prefix: ClassVar[str]
    priors = (PEAK_RATIO,)

    @staticmethod
    def _row_source(name: str) -> str | None:
        return _precision_of(name)

    def sites(self, state: SimState) -> Applicability:
        ops = [
            o
            for o in state.program()
            if isinstance(o, KernelOp) and o.klass in ("GEMM", "CONV") and o.dtype in self.sources
        ]
        if not ops:
            return Applicability(False, f"no {'/'.join(self.sources).upper()} matmuls or convs")
        return Applicability(
            True, f"{len(ops)} {'/'.join(self.sources).upper()} matmul/conv launches"
        )

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl, peaks = _floor(obs), obs.hw.peak_flops
        realised, mem_eff = obs.prior(PEAK_RATIO), obs.prior(MEM_EFF)
        n = 0
        for d in np.flatnonzero(dag.d_live).tolist():
            if int(dag.d_klass[d]) not in (Klass.GEMM, Klass.CONV):
                continue
            src = self._row_source(dag.d_name[d])
            if src not in self.sources:
                continue
            work = max(0.0, dag.d_dur[d] - fl)
            b = float(dag.d_bytes[d])
            nbytes = (0.0 if b != b else b) * self.bytes_factor  # unknown bytes: none
            mem = nbytes / (obs.hw.hbm_bandwidth_Bps * mem_eff) * 1e9
            comp = work * peaks[src] / peaks[self.target] / realised
            if int(dag.d_regime[d]) in (Regime.MEMORY, Regime.IDLE):
                comp = work * self.bytes_factor  # memory- or launch-bound: traffic decides
            dag.d_dur[d] = fl + max(comp, mem)
            dag.d_bytes[d] = nbytes
            n += 1
        return Edit(
            dag,
            n,
            f"{n} {'/'.join(self.sources).upper()} matmul/conv rows at {self.target.upper()} peak",
        )

    def apply(self, state: SimState) -> SimState:
        out = []
        for o in state.program():
            if isinstance(o, KernelOp) and o.klass in ("GEMM", "CONV") and o.dtype in self.sources:
                name = re.sub(
                    r"(cutlass_\d+_)?(simt_sgemm|tensorop_s1688gemm|sm90_xmma_gemm_tf32f32_tf32f32_f32)",
                    self.new_prefix,
                    o.name,
                )
                o = o.model_copy(
                    update={
                        "dtype": self.target,
                        "bytes": o.bytes * self.bytes_factor,
                        "name": name,
                    }
                )
            out.append(o)
        return state.with_program(out)


class Tf32Matmul(_Precision):
    id = "tf32_matmul"
    target = "tf32"
    sources = ("fp32",)
    bytes_factor = 1.0
    new_prefix = "sm90_xmma_gemm_tf32f32_tf32f32_f32"


class Bf16Autocast(_Precision):
    id = "bf16_autocast"
    target = "bf16"
    sources = ("fp32", "tf32")
    bytes_factor = 0.5
    new_prefix = "sm90_xmma_gemm_bf16bf16_bf16f32_f32"


class ChannelsLast(Lever):
    id = "channels_last"

    def sites(self, state: SimState) -> Applicability:
        n = sum(isinstance(o, KernelOp) and o.role == "layout_transform" for o in state.program())
        if not n:
            return Applicability(False, "no NCHW/NHWC layout transforms in the step")
        return Applicability(True, f"{n} layout-transform kernels around convolutions")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        host_of = dag.host_of()
        rows = [
            d for d in np.flatnonzero(dag.d_live).tolist() if _is_layout_transform(dag.d_name[d])
        ]
        for d in rows:
            dag.remove_device_row(d)
            h = int(host_of[d])
            if h >= 0:
                dag.remove_host_row(h)
                dag.h_dev[h] = []
        return Edit(dag, len(rows), f"{len(rows)} layout-transform kernels removed")

    def apply(self, state: SimState) -> SimState:
        return state.with_program(
            [
                o
                for o in state.program()
                if not (isinstance(o, KernelOp) and o.role == "layout_transform")
            ]
        )


class CudnnAutotune(Lever):
    id = "cudnn_autotune"
    priors = (AUTOTUNE,)

    def sites(self, state: SimState) -> Applicability:
        n = sum(isinstance(o, KernelOp) and o.algo == "heuristic" for o in state.program())
        if not n:
            return Applicability(False, "no convolutions on cuDNN's heuristic algorithm")
        return Applicability(True, f"{n} convolution launches on the heuristic algorithm")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl = _floor(obs)
        sel = np.flatnonzero(
            dag.d_live & (dag.d_klass == Klass.CONV) & (dag.d_regime == Regime.COMPUTE)
        )
        speedup = obs.prior(AUTOTUNE)
        dag.d_dur[sel] = fl + (dag.d_dur[sel] - fl) / speedup
        return Edit(
            dag,
            len(sel),
            f"{len(sel)} compute-bound conv rows at {speedup:g}x (prior)",
            prior_based=True,
        )

    def apply(self, state: SimState) -> SimState:
        return state.with_program(
            [
                o.model_copy(update={"algo": "tuned"})
                if isinstance(o, KernelOp) and o.algo == "heuristic"
                else o
                for o in state.program()
            ]
        )


class LaunchConfig(Lever):
    id = "launch_config"

    def _split(self, state: SimState, o: KernelOp) -> int:
        hw = state_hw(state)
        cap = blocks_per_sm(hw, o.block, o.regs, o.smem) * hw.sm_count
        return min(o.split_max, MAX_SPLIT, max(1, int(0.5 * cap / o.grid)))

    def sites(self, state: SimState) -> Applicability:
        n = sum(
            isinstance(o, KernelOp) and o.split_max > 1 and self._split(state, o) > 1
            for o in state.program()
        )
        if not n:
            return Applicability(False, "no under-filled kernel whose shape allows split-K")
        return Applicability(True, f"{n} under-filled launches whose shape allows split-K")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl = _floor(obs)
        n = 0
        for d in np.flatnonzero(dag.d_live & (dag.d_regime == Regime.STALL)).tolist():
            if int(dag.d_kind[d]) != Kind.KERNEL or int(dag.d_klass[d]) not in (
                Klass.GEMM,
                Klass.CONV,
            ):
                continue
            f = _fill(dag, d, obs.hw)
            if f >= 0.5:
                continue
            split = min(MAX_SPLIT, max(1, int(0.5 / f)))
            dag.d_dur[d] = fl + (dag.d_dur[d] - fl) / split
            n += 1
        return Edit(
            dag, n, f"{n} starved GEMM/conv rows (grid < half a wave) split up to {MAX_SPLIT}x"
        )

    def apply(self, state: SimState) -> SimState:
        out = []
        for o in state.program():
            if isinstance(o, KernelOp) and o.split_max > 1:
                k = self._split(state, o)
                if k > 1:
                    o = o.model_copy(
                        update={
                            "grid": o.grid * k,
                            "bytes": o.bytes * (1 + 0.05 * (k - 1) / k),
                            "split_max": 1,
                        }
                    )
            out.append(o)
        return state.with_program(out)


def state_hw(state: SimState) -> Any:
    """The simulated device's spec (for geometry-dependent sites)."""
    from engine.manifest import load_hardware

    return load_hardware()


class CopyOverlap(Lever):
    id = "copy_overlap"

    def sites(self, state: SimState) -> Applicability:
        ops = state.program()
        kstreams = {o.stream for o in ops if isinstance(o, KernelOp)}
        n = sum(
            isinstance(o, CopyOp) and o.deferred_use and o.pinned and o.stream in kstreams
            for o in ops
        )
        if not n:
            return Applicability(
                False, "no async copy on a compute stream whose result is used later"
            )
        return Applicability(True, f"{n} async copies serialised with compute")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        kstreams = set(dag.d_stream[dag.d_live & (dag.d_kind == Kind.KERNEL)].tolist())
        n = len(dag.api)
        # the first SYNC row at or after each row (n: none)
        next_sync = np.full(n + 1, n, np.int64)
        for r in range(n - 1, -1, -1):
            next_sync[r] = r if int(dag.api[r]) == ApiKind.SYNC else next_sync[r + 1]
        at: list[int] = []
        api: list[int] = []
        stream: list[int] = []
        event: list[int] = []
        moved = 0
        for r in range(n):
            ds = dag.h_dev[r]
            if not (
                int(dag.api[r]) == ApiKind.MEMCPY_ASYNC
                and ds
                and int(dag.d_stream[ds[0]]) in kstreams
            ):
                continue
            s = int(dag.d_stream[ds[0]])
            side = 100_000 + s
            eid = 1_000_000 + moved
            for d in ds:
                dag.d_stream[d] = side
            # recorded on the side stream right after the copy; the next sync point joins it
            at += [r + 1, int(next_sync[r + 1])]
            api += [ApiKind.EVENT_RECORD, ApiKind.STREAM_WAIT]
            stream += [side, s]
            event += [eid, eid]
            moved += 1
        dag.insert_host_rows(at, api, [0.0] * len(at), [0.0] * len(at), stream, event)
        return Edit(
            dag, moved, f"{moved} async copies moved to a side stream, joined at the next sync"
        )

    def apply(self, state: SimState) -> SimState:
        ops = state.program()
        kstreams = {o.stream for o in ops if isinstance(o, KernelOp)}
        side = max(state.spec.streams) + 1
        out: list[Any] = []
        pending: list[tuple[int, str]] = []
        k = 0
        for o in ops:
            if isinstance(o, SyncOp) and pending:
                out.extend(WaitOp(op="wait", stream=s, event=e) for s, e in pending)
                pending = []
            if isinstance(o, CopyOp) and o.deferred_use and o.pinned and o.stream in kstreams:
                ev = f"copy_overlap_{k}"
                k += 1
                out.append(o.model_copy(update={"stream": side}))
                out.append(RecordOp(op="record", stream=side, event=ev))
                pending.append((o.stream, ev))
                continue
            out.append(o)
        out.extend(WaitOp(op="wait", stream=s, event=e) for s, e in pending)
        streams = (*state.spec.streams, side)
        return state.with_program(out, streams=list(streams))


class PinnedMemory(Lever):
    id = "pinned_memory"

    def sites(self, state: SimState) -> Applicability:
        n = sum(isinstance(o, CopyOp) and not o.pinned for o in state.program())
        if not n:
            return Applicability(False, "every copy already uses pinned memory")
        return Applicability(True, f"{n} pageable copies")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        rows = np.flatnonzero(dag.api == ApiKind.MEMCPY_SYNC).tolist()
        ratio = obs.hw.h2d_pageable_Bps / obs.hw.h2d_pinned_Bps
        fl = _floor(obs)
        for r in rows:
            dag.api[r] = ApiKind.MEMCPY_ASYNC
            for d in dag.h_dev[r]:
                dag.d_dur[d] = max(fl, dag.d_dur[d] * ratio)
        return Edit(
            dag,
            len(rows),
            f"{len(rows)} host-blocking pageable copies made async at pinned bandwidth",
        )

    def apply(self, state: SimState) -> SimState:
        return state.with_program(
            [
                o.model_copy(update={"pinned": True}) if isinstance(o, CopyOp) else o
                for o in state.program()
            ]
        )


class BatchSize(Lever):
    id = "batch_size"

    def sites(self, state: SimState) -> Applicability:
        hw = state_hw(state)
        k = state.config.batch_scale * 2
        if k > 16:
            return Applicability(False, "batch already 16x the original")
        if state.spec.memory_used_bytes * k > hw.memory_bytes:
            return Applicability(False, f"{k}x the batch would not fit in device memory")
        return Applicability(True, f"memory allows {k}x the batch")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl = _floor(obs)
        for d in np.flatnonzero(dag.d_live).tolist():
            # traffic-bound and copy rows do twice the work; compute/latency-bound ones only as
            # far as the bigger grid fills idle SMs (a sub-wave grid doubles for free)
            grow = 2.0
            if int(dag.d_kind[d]) == Kind.KERNEL and int(dag.d_regime[d]) in (
                Regime.COMPUTE,
                Regime.STALL,
            ):
                grow = max(1.0, 2.0 * min(1.0, _fill(dag, d, obs.hw)))
            dag.d_dur[d] = fl + (dag.d_dur[d] - fl) * grow if dag.d_dur[d] > fl else dag.d_dur[d]
        loads = dag.api == ApiKind.DATA_LOADING
        dag.dur_ns[loads] *= 2.0
        return Edit(
            dag,
            int(dag.d_live.sum()),
            "every row at twice the batch (if memory allows: not checked here); time per sample "
            "halves the step",
            sample_factor=2.0,
        )

    def apply(self, state: SimState) -> SimState:
        return state.with_config(batch_scale=state.config.batch_scale * 2)


class ExpandableSegments(Lever):
    id = "expandable_segments"
    priors = (ALLOC,)

    def sites(self, state: SimState) -> Applicability:
        if state.config.allocator == "expandable_segments":
            return Applicability(False, "expandable segments already on")
        if not any(isinstance(o, HostOp) and o.kind == "alloc" for o in state.program()):
            return Applicability(False, "no allocator churn in the step")
        return Applicability(True, "cudaMalloc/cudaFree on the launching thread")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        rows = dag.api == ApiKind.MALLOC
        left = obs.prior(ALLOC)
        dag.dur_ns[rows] *= left
        return Edit(
            dag,
            int(rows.sum()),
            f"{int(rows.sum())} allocator calls at {left:.0%} of their time (prior)",
            prior_based=True,
        )

    def apply(self, state: SimState) -> SimState:
        return state.with_config(allocator="expandable_segments")


class SyncRemoval(Lever):
    id = "sync_removal"

    def sites(self, state: SimState) -> Applicability:
        n = sum(isinstance(o, SyncOp) for o in state.program())
        if n < 2:
            return Applicability(False, "no sync inside the step (only the step-end one)")
        return Applicability(True, f"{n - 1} mid-step syncs")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        rows = np.flatnonzero(dag.api == ApiKind.SYNC).tolist()
        it = max(1, dag.iterations)
        if not rows or len(rows) % it:
            return Edit(dag, 0, "sync pattern does not repeat per step: nothing removed")
        k = len(rows) // it
        drop = [r for i, r in enumerate(rows) if i % k != k - 1]
        for r in drop:
            dag.remove_host_row(r)
        return Edit(dag, len(drop), f"{len(drop) // it} mid-step syncs per step removed")

    def apply(self, state: SimState) -> SimState:
        ops = state.program()
        last = max(i for i, o in enumerate(ops) if isinstance(o, SyncOp))
        return state.with_program(
            [o for i, o in enumerate(ops) if not isinstance(o, SyncOp) or i == last]
        )


class FusedOptimizer(Lever):
    id = "fused_optimizer"
    priors = (MEM_EFF,)

    def sites(self, state: SimState) -> Applicability:
        n = sum(isinstance(o, KernelOp) and o.role == "optimizer_foreach" for o in state.program())
        if not n:
            return Applicability(False, "no per-parameter optimizer kernels")
        return Applicability(True, f"{n} per-parameter optimizer launches")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl = _floor(obs)

        ok = dag.d_klass == Klass.ELEMENTWISE
        runs = [r for r in launch_runs(dag, ok, FOREACH_MIN_RUN) if _same_name_run(dag, r)]
        host_of = dag.host_of()
        mem_eff = obs.prior(MEM_EFF)
        for run in runs:
            total = float(np.nansum(dag.d_bytes[run]))
            mem = total / (obs.hw.hbm_bandwidth_Bps * mem_eff) * 1e9
            work = mem if total > 0 else float(np.sum(dag.d_dur[run] - fl))
            _merge(dag, run, fl + work, float(np.nansum(dag.d_flops[run])), total, host_of)
        n = sum(len(r) for r in runs)
        return Edit(
            dag, n, f"{n} per-parameter launches in {len(runs)} loops → multi-tensor kernels"
        )

    def apply(self, state: SimState) -> SimState:
        ops = state.program()
        out: list[Any] = []
        i = 0
        for s, e in _program_runs(ops, lambda o: o.role == "optimizer_foreach"):
            out.extend(ops[i:s])
            run = ops[s:e]
            out.append(
                run[0].model_copy(
                    update={
                        "name": f"multi_tensor_apply_kernel<{_stem(run[0].name)}>",
                        "flops": sum(o.flops for o in run),
                        "bytes": sum(o.bytes for o in run),
                        "grid": min(65535, sum(o.grid for o in run)),
                        "role": "compute",
                        "repeat": 1,
                    }
                )
            )
            i = e
        out.extend(ops[i:])
        return state.with_program(out)


class SdpaFlash(Lever):
    id = "sdpa_flash"
    priors = (FLASH,)

    def sites(self, state: SimState) -> Applicability:
        groups = {
            o.group
            for o in state.program()
            if isinstance(o, KernelOp) and o.role == "attention_math"
        }
        if not groups:
            return Applicability(False, "no unfused (math) attention")
        return Applicability(
            True, f"unfused attention: {', '.join(sorted(g or '?' for g in groups))}"
        )

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl = _floor(obs)
        peak = obs.hw.peak_flops["bf16"]
        flash, mem_eff = obs.prior(FLASH), obs.prior(MEM_EFF)

        ok = (dag.d_kind == Kind.KERNEL) & np.isin(
            dag.d_klass, (Klass.GEMM, Klass.REDUCTION, Klass.ATTENTION)
        )
        host_of = dag.host_of()
        n = 0
        for run in launch_runs(dag, ok, 3):
            for i in range(len(run) - 2):
                a, sm, b = run[i : i + 3]
                if not (dag.d_live[a] and dag.d_live[sm] and dag.d_live[b]):
                    continue
                if int(dag.d_klass[a]) == Klass.REDUCTION or int(dag.d_klass[b]) == Klass.REDUCTION:
                    continue
                if not SOFTMAX.search(dag.d_name[sm]):
                    continue
                flops = float(np.nansum(dag.d_flops[[a, b]]))
                score = float(np.nan_to_num(dag.d_bytes[sm])) / 2
                nbytes = max(0.0, float(np.nansum(dag.d_bytes[[a, b]])) - 2 * score)
                t = (
                    max(
                        flops / (peak * flash),
                        nbytes / (obs.hw.hbm_bandwidth_Bps * mem_eff),
                    )
                    * 1e9
                )
                _merge(dag, [a, sm, b], fl + t, flops, nbytes, host_of)
                dag.d_klass[a] = Klass.ATTENTION
                n += 1
        return Edit(dag, 3 * n, f"{n} GEMM→softmax→GEMM attentions fused", prior_based=False)

    def apply(self, state: SimState) -> SimState:
        ops = state.program()
        out: list[Any] = []
        i = 0
        for s, e in _program_runs(ops, lambda o: o.role == "attention_math"):
            out.extend(ops[i:s])
            run = ops[s:e]
            flash = next(
                (o.flash_bytes for o in run if o.flash_bytes), sum(o.bytes for o in run) / 10
            )
            out.append(
                KernelOp(
                    op="kernel",
                    name=f"flash_fwd_kernel<{run[0].group or 'attn'}>",
                    klass="ATTENTION",
                    stream=run[0].stream,
                    flops=sum(o.flops for o in run if o.klass == "GEMM"),
                    bytes=flash,
                    grid=max(o.grid for o in run),
                    block=128,
                )
            )
            i = e
        out.extend(ops[i:])
        return state.with_program(out)


class PrefetchDepth(Lever):
    id = "prefetch_depth"

    def sites(self, state: SimState) -> Applicability:
        if state.config.prefetch_depth > 0:
            return Applicability(False, "the loader already prefetches")
        if not any(isinstance(o, HostOp) and o.kind == "data_loading" for o in state.program()):
            return Applicability(False, "no data loading on the launching thread")
        return Applicability(True, "data loading runs inline on the launching thread")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        rows = dag.api == ApiKind.DATA_LOADING
        total = float(dag.dur_ns[rows].sum())
        dag.dur_ns[rows] = 0.0
        dag.min_makespan_ns = total  # the loader's own throughput bounds the step
        return Edit(
            dag, int(rows.sum()), f"{int(rows.sum())} data-loading ranges moved to a loader thread"
        )

    def apply(self, state: SimState) -> SimState:
        return state.with_config(prefetch_depth=2)


class PowerPolicy(Lever):
    id = "power_policy"

    def sites(self, state: SimState) -> Applicability:
        hw = state_hw(state)
        cap = state.config.power_limit_w or state.spec.power_limit_w or hw.tdp_w
        if cap >= hw.tdp_w:
            return Applicability(False, "the power cap is already the board's TDP")
        return Applicability(True, f"node power cap {cap:.0f} W below the {hw.tdp_w:.0f} W TDP")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        clocks = [s.sm_clock_mhz for s in obs.telemetry if s.sm_clock_mhz]
        cmax = obs.hw.sm_clock_max_mhz
        capped = [
            s
            for s in obs.telemetry
            if s.clock_event_reasons
            and s.clock_event_reasons
            & (
                ClockEventReason.SW_POWER_CAP
                | ClockEventReason.HW_THERMAL_SLOWDOWN
                | ClockEventReason.SW_THERMAL_SLOWDOWN
            )
        ]
        if not clocks or not cmax or len(capped) < len(obs.telemetry) / 2:
            return Edit(dag, 0, "clocks were not held down by a power/thermal limit")
        ratio = float(np.mean(clocks)) / cmax
        fl = _floor(obs)
        sel = np.flatnonzero(dag.d_live & (dag.d_regime == Regime.COMPUTE))
        dag.d_dur[sel] = fl + (dag.d_dur[sel] - fl) * ratio
        return Edit(
            dag, len(sel), f"{len(sel)} compute-bound rows at max clock ({ratio:.0%} → 100%)"
        )

    def apply(self, state: SimState) -> SimState:
        return state.with_config(power_limit_w=state_hw(state).tdp_w)


LEVERS: tuple[Lever, ...] = (
    CudaGraphs(),
    ElementwiseFusion(),
    Tf32Matmul(),
    Bf16Autocast(),
    ChannelsLast(),
    CudnnAutotune(),
    LaunchConfig(),
    CopyOverlap(),
    PinnedMemory(),
    BatchSize(),
    ExpandableSegments(),
    SyncRemoval(),
    FusedOptimizer(),
    SdpaFlash(),
    PrefetchDepth(),
    PowerPolicy(),
)


def by_id(lever_id: str) -> Lever:
    """Return the lever ``lever_id``; KeyError names the known ones."""
    for lv in LEVERS:
        if lv.id == lever_id:
            return lv
    raise KeyError(f"unknown lever {lever_id!r}; known: {', '.join(lv.id for lv in LEVERS)}")
