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
    graph_t, slot = 0.0, 0  # the current graph launch's start and its next node's position
    n_h = len(dag.api)
    h_start = np.zeros(n_h)
    h_end = np.zeros(n_h)
    host_of = dag.host_of()
    t_last = 0.0
    L = dag.launch_latency_ns
    clock: dict[int, float] = {}  # each host thread's clock
    observed = dag.h_wait_off is not None and dag.h_wait is not None

    def enqueue(d: int, ready: float, takes_wait: bool = True) -> float:
        s = int(dag.d_stream[d])
        dep = stream_free.get(s, 0.0)
        live = bool(dag.d_live[d])
        if dag.d_delay is not None and live:
            start = max(ready, dep) + float(dag.d_delay[d])
        else:
            start = max(ready, dep) + 0.0
        # recorded event waits: after the delay (the delay is the gap the stream's own order
        # and the launch left unexplained); a row no call launched does not take them (it was
        # queued at an unknown earlier time: its observed start is its anchor)
        if takes_wait:
            for w in wait_on.pop(s, []):
                if not np.isnan(d_end[w]):
                    start = max(start, d_end[w])
        p = -1 if dag.d_after is None else int(dag.d_after[d])
        if live and p >= 0:  # an inferred wait; on a removed row: what its stream ran so far
            e = float(d_end[p])
            if np.isnan(e) and not dag.d_live[p]:
                e = stream_free.get(int(dag.d_stream[p]), 0.0)
            if not np.isnan(e) and e > start:
                start = e
        # a collective held by its peers: its transfer begins once its last peer arrived
        nb = np.nan if dag.d_not_before is None else float(dag.d_not_before[d])
        if live and not np.isnan(nb) and nb > start:
            start = nb
        end = start + (dag.d_dur[d] if dag.d_live[d] else 0.0)
        d_ready[d], d_start[d], d_end[d] = ready, start, end
        stream_free[s] = end
        stream_last[s] = d
        return end

    def anchor_ready(d: int) -> float:
        """A row no call launched: ready at its observed start, or at the window's start where
        it was queued behind the row before it on its stream (``d_queued``: then its observed
        gap after that row, ``d_delay``, places it)."""
        if dag.d_queued is not None and dag.d_queued[d]:
            return 0.0
        return float(dag.d_start_obs[d]) - dag.t0_ns

    # device rows no host row launched: enqueued in their observed place among the host rows
    # (by observed start; an inserted host row has the time of the row before it), at their
    # observed start (or, queued, behind the row before them on their stream)
    anchored = [d for d in range(n_d) if host_of[d] < 0 and dag.d_live[d]]
    if dag.h_start_obs is not None:
        anchored.sort(key=lambda d: int(dag.d_start_obs[d]))
        times, t = [], -(2**63)
        for v in dag.h_start_obs.tolist():
            t = max(t, int(v))
            times.append(t)
        at = [sum(1 for x in times if x <= int(dag.d_start_obs[d])) for d in anchored]
        # and before any call launching a row its stream ran after it (observed order)
        for i, d in enumerate(anchored):
            later = [
                int(host_of[x])
                for x in range(n_d)
                if dag.d_stream[x] == dag.d_stream[d]
                and host_of[x] >= 0
                and (int(dag.d_start_obs[x]), x) > (int(dag.d_start_obs[d]), d)
            ]
            if later:
                at[i] = min(at[i], min(later))
            # and before a blocking call that waited for it
            if dag.h_wait_off is not None and dag.h_wait is not None:
                for r in range(n_h):
                    rows = dag.h_wait[dag.h_wait_off[r] : dag.h_wait_off[r + 1]].tolist()
                    if d in rows:
                        at[i] = min(at[i], r)
                        break
        # and no later than any row its stream ran after it that no call launched either
        at = [
            min(
                at[j]
                for j, x in enumerate(anchored)
                if dag.d_stream[x] == dag.d_stream[d]
                and (int(dag.d_start_obs[x]), x) >= (int(dag.d_start_obs[d]), d)
            )
            for d in anchored
        ]
        pairs = sorted(zip(at, range(len(anchored)), anchored, strict=True))
        at = [a for a, _, _ in pairs]
        anchored = [d for _, _, d in pairs]
    else:
        at = [n_h] * len(anchored)

    for r in range(n_h):
        while anchored and at[0] <= r:
            d = anchored.pop(0)
            at.pop(0)
            enqueue(d, anchor_ready(d), False)
        kind = int(dag.api[r])
        th = 0 if dag.h_thread is None else int(dag.h_thread[r])
        host_t = clock.get(th, 0.0) + dag.gap_ns[r]
        h_start[r] = host_t
        if kind == NOP:
            h_end[r] = host_t
            clock[th] = host_t
            continue
        end = host_t + dag.dur_ns[r]
        ds = dag.h_dev[r]
        if kind == ApiKind.GRAPH_LAUNCH:
            graph_t, slot = host_t, 0
            for d in ds:  # the graph's kernels, where the trace links them to its launch
                enqueue(d, graph_t + L + slot * dag.graph_node_ns)
                slot += 1
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
        elif kind == ApiKind.SYNC and not observed:
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
        if observed:  # what the call waited for in the trace, then its time after that
            assert dag.h_wait_off is not None and dag.h_wait is not None
            rows = dag.h_wait[dag.h_wait_off[r] : dag.h_wait_off[r + 1]].tolist()
            if rows:
                w = host_t
                for d in rows:
                    e = float(d_end[d])
                    if np.isnan(e):  # not queued: launched later (another thread) or removed
                        obs_end = float(dag.d_start_obs[d]) - dag.t0_ns + float(dag.d_dur[d])
                        e = obs_end if dag.d_live[d] else stream_free.get(int(dag.d_stream[d]), 0.0)
                    w = max(w, e)
                end = w + dag.dur_ns[r]
        h_end[r] = end
        clock[th] = end
        t_last = max(t_last, end)
    for d in anchored:
        enqueue(d, anchor_ready(d), False)
    dev_end = float(np.nanmax(d_end)) if n_d else 0.0
    return Schedule(
        makespan_ns=max(t_last, dev_end, dag.min_makespan_ns),
        d_ready=d_ready,
        d_start=d_start,
        d_end=d_end,
        h_start=h_start,
        h_end=h_end,
    )
