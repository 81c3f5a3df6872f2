"""Levers on launches and synchronisation: CUDA graphs (capturable regions only), launch
configuration, mid-step sync removal, fused/foreach optimizer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.device.kernel_model import blocks_per_sm
from engine.levers.base import (
    Lever,
    fills,
    kernel_floor,
    launch_runs,
    merge_rows,
    program_runs,
    same_name_run,
    state_hw,
    stem,
)
from engine.levers.model import Applicability, Edit, Observation
from engine.levers.priors import (
    FOREACH_MIN_RUN,
    GRAPH_LAUNCH,
    GRAPH_NODE,
    LAUNCH_OUTLIER,
    MAX_SPLIT,
    MEM_EFF,
    MIN_GRAPH_KERNELS,
)
from engine.manifest import KernelOp, SyncOp
from engine.regimes import Regime
from engine.schedule.dag import NOP, ReplayDag
from engine.trace.segments import Kind, Klass
from engine.trace.trace import ApiKind

if TYPE_CHECKING:  # (annotations only: the simulator is not imported to analyze a trace)
    from engine.workloads.sim import SimState


# ------------------------------------------------------------------ the levers
class CudaGraphs(Lever):
    id = "cuda_graphs"
    estimate = "graphs"
    ceiling_on_path = True
    skips_host_between_launches = True
    answers = ("host",)
    in_use_as = ("cuda_graphs",)

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


class LaunchConfig(Lever):
    id = "launch_config"
    can_slow = (
        "a split kernel adds a reduction pass and more blocks to schedule, so a kernel that was "
        "not starved can run longer"
    )

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
        fl = kernel_floor(obs)
        cand = np.flatnonzero(
            dag.d_live
            & (dag.d_regime == Regime.STALL)
            & (dag.d_kind == Kind.KERNEL)
            & np.isin(dag.d_klass, (Klass.GEMM, Klass.CONV))
        )
        f = fills(dag, cand, obs.hw)
        starved = f < 0.5
        rows, f = cand[starved], f[starved]
        split = np.minimum(MAX_SPLIT, np.maximum(1, (0.5 / f).astype(np.int64)))
        dag.d_dur[rows] = fl + (dag.d_dur[rows] - fl) / split
        n = len(rows)
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


class SyncRemoval(Lever):
    id = "sync_removal"
    removes_syncs = True

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
        if it == 1:  # (an imported trace's window: its steps are not counted here)
            return Edit(dag, len(drop), f"{len(drop)} of {len(rows)} syncs removed (the last kept)")
        return Edit(dag, len(drop), f"{len(drop) // it} mid-step syncs per step removed")

    def apply(self, state: SimState) -> SimState:
        ops = state.program()
        last = max(i for i, o in enumerate(ops) if isinstance(o, SyncOp))
        return state.with_program(
            [o for i, o in enumerate(ops) if not isinstance(o, SyncOp) or i == last]
        )


class FusedOptimizer(Lever):
    id = "fused_optimizer"
    fuses = True
    in_use_as = ("fused_kernels",)
    priors = (MEM_EFF,)

    def sites(self, state: SimState) -> Applicability:
        n = sum(isinstance(o, KernelOp) and o.role == "optimizer_foreach" for o in state.program())
        if not n:
            return Applicability(False, "no per-parameter optimizer kernels")
        return Applicability(True, f"{n} per-parameter optimizer launches")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl = kernel_floor(obs)

        ok = dag.d_klass == Klass.ELEMENTWISE
        runs = [r for r in launch_runs(dag, ok, FOREACH_MIN_RUN) if same_name_run(dag, r)]
        host_of = dag.host_of()
        mem_eff = obs.prior(MEM_EFF)
        for run in runs:
            total = float(np.nansum(dag.d_bytes[run]))
            mem = total / (obs.hw.hbm_bandwidth_Bps * mem_eff) * 1e9
            work = mem if total > 0 else float(np.sum(dag.d_dur[run] - fl))
            merge_rows(dag, run, fl + work, float(np.nansum(dag.d_flops[run])), total, host_of)
        n = sum(len(r) for r in runs)
        return Edit(
            dag, n, f"{n} per-parameter launches in {len(runs)} loops → multi-tensor kernels"
        )

    def apply(self, state: SimState) -> SimState:
        ops = state.program()
        out: list[Any] = []
        i = 0
        for s, e in program_runs(ops, lambda o: o.role == "optimizer_foreach"):
            out.extend(ops[i:s])
            run = ops[s:e]
            out.append(
                run[0].model_copy(
                    update={
                        "name": f"multi_tensor_apply_kernel<{stem(run[0].name)}>",
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
