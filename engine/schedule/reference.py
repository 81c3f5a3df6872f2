"""The replay scheduler in plain Python: the specification ``engine.schedule.dag.schedule`` (numba,
dense ids) is tested against, bit for bit (tests/optimizer/test_replay.py). Not used at run time."""

from __future__ import annotations

import numpy as np

from engine.schedule.dag import NOP, ReplayDag, Schedule
from engine.trace.trace import ApiKind


def schedule_ref(dag: ReplayDag) -> Schedule:
    """Plain-Python ``schedule``: the specification the compiled replay is tested against."""
    n_d = len(dag.d_stream)
    d_ready = np.full(n_d, np.nan)
    d_start = np.full(n_d, np.nan)
    d_end = np.full(n_d, np.nan)
    stream_free: dict[int, float] = {}
    stream_last: dict[int, int] = {}  # last device row enqueued per stream
    record_pos: dict[int, int] = {}  # event id -> device row preceding its latest record
    wait_on: dict[int, list[int]] = {}  # stream -> device rows its next rows must wait for
    host_t = 0.0
    graph_t, slot = 0.0, 0  # the current graph launch's start and its next node's position
    h_start = np.zeros(len(dag.api))
    h_end = np.zeros(len(dag.api))
    host_of = dag.host_of()
    t_last = 0.0
    L = dag.launch_latency_ns

    def enqueue(d: int, ready: float) -> float:
        s = int(dag.d_stream[d])
        dep = stream_free.get(s, 0.0)
        for w in wait_on.pop(s, []):
            if not np.isnan(d_end[w]):
                dep = max(dep, d_end[w])
        start = max(ready, dep)
        end = start + (dag.d_dur[d] if dag.d_live[d] else 0.0)
        d_ready[d], d_start[d], d_end[d] = ready, start, end
        stream_free[s] = end
        stream_last[s] = d
        return end

    for r in range(len(dag.api)):
        kind = int(dag.api[r])
        host_t += dag.gap_ns[r]
        h_start[r] = host_t
        if kind == NOP:
            h_end[r] = host_t
            continue
        end = host_t + dag.dur_ns[r]
        ds = dag.h_dev[r]
        if kind == ApiKind.GRAPH_LAUNCH:
            graph_t, slot = host_t, 0
        elif kind == ApiKind.GRAPH_NODE:
            for d in ds:
                enqueue(d, graph_t + L + slot * dag.graph_node_ns)
            slot += 1
        elif ds:
            last = 0.0
            for d in ds:
                last = max(last, enqueue(d, host_t + L))
            if kind == ApiKind.MEMCPY_SYNC:
                end = max(end, last)
        elif kind == ApiKind.SYNC:
            s = int(dag.h_stream[r])
            streams = [s] if s >= 0 else list(stream_free)
            for st in streams:
                end = max(end, stream_free.get(st, 0.0))
        elif kind == ApiKind.EVENT_RECORD:
            s = int(dag.h_stream[r])
            if s in stream_last:
                record_pos[int(dag.h_event[r])] = stream_last[s]
        elif kind == ApiKind.STREAM_WAIT:
            p = record_pos.get(int(dag.h_event[r]))
            if p is not None:
                wait_on.setdefault(int(dag.h_stream[r]), []).append(p)
        h_end[r] = end
        host_t = end
        t_last = max(t_last, end)
    # device rows no host row launched: anchored at their observed start
    for d in np.flatnonzero((host_of < 0) & dag.d_live).tolist():
        enqueue(d, float(dag.d_start_obs[d]) - dag.t0_ns)
    dev_end = float(np.nanmax(d_end)) if n_d else 0.0
    return Schedule(
        makespan_ns=max(t_last, dev_end, dag.min_makespan_ns),
        d_ready=d_ready,
        d_start=d_start,
        d_end=d_end,
        h_start=h_start,
        h_end=h_end,
    )
