"""Levers on data movement and memory: copy overlap, pinned memory, batch size, expandable
segments, loader prefetch."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.levers.base import Lever, fills, kernel_floor, state_hw
from engine.levers.model import Applicability, Edit, Observation
from engine.levers.priors import ALLOC
from engine.manifest import CopyOp, HostOp, KernelOp, RecordOp, SyncOp, WaitOp
from engine.regimes import Regime
from engine.schedule.dag import ReplayDag
from engine.trace.segments import Kind
from engine.trace.trace import ApiKind

if TYPE_CHECKING:  # (annotations only: the simulator is not imported to analyze a trace)
    from engine.workloads.sim import SimState


#: copy names whose both ends are device memory (Kineto / Nsight: "Memcpy DtoD (Device ->
#: Device)", "Memcpy PtoP …"): no host buffer, so pinning has nothing to pin
_DEVICE_TO_DEVICE = re.compile(r"\b(DtoD|PtoP)\b|Device -> Device", re.IGNORECASE)


def transfers(dag: ReplayDag, rows: np.ndarray) -> np.ndarray:
    """Which host rows of ``rows`` launch a transfer over a link: a copy row first (a memset,
    which ``api_kind_from_name`` files with the copies, is device work on its own stream — a
    fill of device memory, moving nothing over a link — and stays where it is)."""
    off, flat = dag.launch_lists()
    has = off[1:][rows] > off[:-1][rows]
    out = np.zeros(len(rows), np.bool_)
    out[has] = dag.d_kind[flat[off[rows[has]]]] == Kind.MEMCPY
    return out


class CopyOverlap(Lever):
    id = "copy_overlap"
    moves_copies = True

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
        syncs = np.append(np.flatnonzero(dag.api == ApiKind.SYNC), n)
        next_sync = syncs[np.searchsorted(syncs, np.arange(n + 1))]
        # async copies (not memsets: ``transfers``) whose first device row runs on a stream
        # that runs kernels
        off, flat = dag.launch_lists()
        cand = np.flatnonzero((dag.api == ApiKind.MEMCPY_ASYNC) & (off[1:] > off[:-1]))
        cand = cand[transfers(dag, cand)]
        cand = cand[np.isin(dag.d_stream[flat[off[cand]]], list(kstreams))]
        at: list[int] = []
        api: list[int] = []
        stream: list[int] = []
        event: list[int] = []
        moved = 0
        for r in cand.tolist():
            ds = dag.h_dev[r]
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
        # blocking copies to or from host memory: not memsets (``transfers``), not copies
        # between device buffers (nothing of the host's to pin)
        sync = np.flatnonzero(dag.api == ApiKind.MEMCPY_SYNC)
        sync = sync[transfers(dag, sync)]
        rows = [
            r
            for r in sync.tolist()
            if not all(_DEVICE_TO_DEVICE.search(dag.d_name[d]) for d in dag.h_dev[r])
        ]
        ratio = obs.hw.h2d_pageable_Bps / obs.hw.h2d_pinned_Bps
        fl = kernel_floor(obs)
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
    estimate = "ceiling"
    per_sample = True
    ml_only = True

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
        fl = kernel_floor(obs)
        live = np.flatnonzero(dag.d_live)
        # traffic-bound and copy rows do twice the work; compute/latency-bound ones only as
        # far as the bigger grid fills idle SMs (a sub-wave grid doubles for free)
        grow = np.full(len(live), 2.0)
        bound = (dag.d_kind[live] == Kind.KERNEL) & np.isin(
            dag.d_regime[live], (Regime.COMPUTE, Regime.STALL)
        )
        grow[bound] = np.maximum(1.0, 2.0 * np.minimum(1.0, fills(dag, live[bound], obs.hw)))
        dur = dag.d_dur[live]
        dag.d_dur[live] = np.where(dur > fl, fl + (dur - fl) * grow, dur)
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
    estimate = "allocator"
    answers = ("allocation",)
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


class PrefetchDepth(Lever):
    id = "prefetch_depth"
    answers = ("data_loading",)
    ml_only = True

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
