"""The replay's dependency graph, built from a trace alone (DESIGN §5 "replay").

Nodes are the trace's host rows (launch / memcpy / sync / event / allocator / annotated host
work, in host order) and its device rows (kernels, copies). Edges:

* **host order** — one launching thread: row h starts ``gap[h]`` after row h-1 ends (the gap
  is the host time between calls: framework code, Python, unannotated work);
* **launch → device** — a device row may start ``L`` after its launch call began (``L``
  estimated from the trace: the shortest launch-to-start delay seen on an idle stream);
* **stream order** — each stream runs its rows in launch order;
* **event edges** — a ``cudaStreamWaitEvent`` makes later rows of its stream wait for the
  device row that preceded the matching ``cudaEventRecord`` on the recording stream;
* **sync edges** — ``cudaStreamSynchronize`` / ``cudaDeviceSynchronize`` and pageable copies
  block the host until the device rows they cover have finished.

:func:`schedule` replays the graph with each node's (possibly edited) duration and returns
the makespan; :class:`ReplayDag` is what a lever's transform edits. Nothing here reads the
simulator: only Segments, HostEvents and the hardware catalogue.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from engine.jit import jit, twin
from engine.manifest import GpuPeaks
from engine.trace.segments import Kind, Klass, NameTable, Segments
from engine.trace.trace import ApiKind, HostEvents, Trace

NOP = 254  # a host row a transform removed


@dataclass
class ReplayDag:
    """Host rows (in host order) and device rows, with the edges of the module docstring."""

    # host rows
    api: np.ndarray  # uint8 ApiKind (NOP when removed)
    gap_ns: np.ndarray  # float64 host time before the call
    dur_ns: np.ndarray  # float64 duration of the call itself (unblocked part)
    h_stream: np.ndarray  # int64
    h_event: np.ndarray  # int64
    h_dev: list[list[int]]  # device rows launched by each host row
    # device rows
    d_stream: np.ndarray  # int64
    d_dur: np.ndarray  # float64 (0 and d_live False when a transform removed the row)
    d_live: np.ndarray  # bool
    d_kind: np.ndarray  # uint8 Kind
    d_klass: np.ndarray  # uint8 Klass
    d_name: list[str]
    d_flops: np.ndarray  # float64, NaN unknown
    d_bytes: np.ndarray  # float64, NaN unknown
    d_grid: np.ndarray  # int64
    d_block: np.ndarray  # int64
    d_regs: np.ndarray  # int64 registers per thread (0 unknown)
    d_smem: np.ndarray  # int64 shared memory per block (0 unknown)
    d_regime: np.ndarray  # uint8 Regime (decoded), 255 unknown
    d_start_obs: np.ndarray  # int64 observed start (anchor for rows with no host row)
    d_row: np.ndarray  # int64 index of the row in the trace's Segments (-1: not from a trace)
    launch_latency_ns: float
    graph_node_ns: float
    iterations: int
    t0_ns: float
    observed_ns: float  # the observed makespan of the window
    #: a throughput floor on the whole window (a loader that cannot keep up), 0 = none
    min_makespan_ns: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: int64 observed start of each host row (ns; -1 for a row a transform inserted); None
    #: where the graph was not built from a trace
    h_start_obs: np.ndarray | None = None
    #: launch_lists' arrays, kept until h_dev changes: edit h_dev only through
    #: remove_launched / insert_host_rows, which clear it (a 2 M-event analysis built them 46
    #: times, 0.13 s, from the same lists)
    _launches: tuple[np.ndarray, np.ndarray] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def copy(self) -> ReplayDag:
        """Return a deep copy a transform may edit: every array copied, every list copied one
        level deep (the inner lists of h_dev are never edited in place: transforms replace
        them, so they are shared), launch_lists' arrays shared (read-only)."""
        changes: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                changes[f.name] = v.copy()
            elif isinstance(v, list):
                changes[f.name] = list(v)
        out = replace(self, **changes)
        out._launches = self._launches
        return out

    # ------------------------------------------------------------------ edits
    def remove_host_row(self, h: int) -> None:
        """Drop a host call (its gap and its duration disappear from the host thread)."""
        self.api[h] = NOP
        self.gap_ns[h] = 0.0
        self.dur_ns[h] = 0.0

    def insert_host_rows(
        self,
        at: Sequence[int],
        api: Sequence[int],
        gap: Sequence[float],
        dur: Sequence[float],
        stream: Sequence[int] | None = None,
        event: Sequence[int] | None = None,
    ) -> None:
        """Insert host calls, each before the row ``at[i]`` had *before this call* (several at
        one position keep their given order): one pass, however many rows."""
        m = len(at)
        if not m:
            return
        pos = np.asarray(at, np.int64)
        self.api = np.insert(self.api, pos, np.asarray(api, self.api.dtype))
        self.gap_ns = np.insert(self.gap_ns, pos, np.asarray(gap, np.float64))
        self.dur_ns = np.insert(self.dur_ns, pos, np.asarray(dur, np.float64))
        st = np.full(m, -1, np.int64) if stream is None else np.asarray(stream, np.int64)
        ev = np.full(m, -1, np.int64) if event is None else np.asarray(event, np.int64)
        self.h_stream = np.insert(self.h_stream, pos, st)
        self.h_event = np.insert(self.h_event, pos, ev)
        if self.h_start_obs is not None:
            self.h_start_obs = np.insert(self.h_start_obs, pos, np.int64(-1))
        new: list[list[int]] = []
        prev = 0
        for p in np.sort(pos, kind="stable").tolist():
            new.extend(self.h_dev[prev:p])
            new.append([])
            prev = p
        new.extend(self.h_dev[prev:])
        self.h_dev = new
        self._launches = None

    def remove_launched(self, rows: np.ndarray, host_of: np.ndarray | None = None) -> None:
        """Drop device rows (fused into another, or no longer needed) and the host calls that
        launched them, in one pass. ``host_of``: ``host_of()``, when a caller has it already
        (removing rows does not change which host row launched the others)."""
        rows = np.asarray(rows, np.int64)
        if not len(rows):
            return
        if host_of is None:
            host_of = self.host_of()
        self.d_live[rows] = False
        self.d_dur[rows] = 0.0
        h = host_of[rows]
        h = h[h >= 0]
        self.api[h] = NOP
        self.gap_ns[h] = 0.0
        self.dur_ns[h] = 0.0
        for r in h.tolist():
            self.h_dev[r] = []
        if len(h):
            self._launches = None

    def launch_lists(self) -> tuple[np.ndarray, np.ndarray]:
        """``h_dev`` as flat arrays: (offsets (n_host + 1,), device rows), CSR style; read-only,
        built again only after h_dev changed (``_launches``)."""
        if self._launches is not None:
            return self._launches
        lens = np.fromiter(map(len, self.h_dev), np.int64, len(self.h_dev))
        off = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=off[1:])
        flat = np.fromiter(itertools.chain.from_iterable(self.h_dev), np.int64, int(off[-1]))
        off.flags.writeable = flat.flags.writeable = False
        self._launches = (off, flat)
        return self._launches

    def host_of(self) -> np.ndarray:
        """Return, per device row, the host row that launched it (-1 none; the last one when
        several list it)."""
        off, flat = self.launch_lists()
        out = np.full(len(self.d_stream), -1, np.int64)
        out[flat] = np.repeat(np.arange(len(self.h_dev), dtype=np.int64), np.diff(off))
        return out

    @property
    def step_ns(self) -> float:
        """Observed time per iteration."""
        return self.observed_ns / max(1, self.iterations)


def build_dag(
    trace: Trace,
    hw: GpuPeaks,
    iterations: int,
    regimes: np.ndarray | None = None,
    window: tuple[int, int] | None = None,
) -> ReplayDag:
    """Build the replay graph of ``trace`` (``iterations`` steps in its window)."""
    seg, host, names = trace.segments, trace.host, trace.names
    timed = np.isin(seg.kind, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM))
    idx = np.flatnonzero(timed)
    seg = seg.take(idx)
    reg = (
        np.asarray(regimes, np.uint8)[idx]
        if regimes is not None
        else np.full(len(seg), 255, np.uint8)
    )
    horder = np.argsort(host.api_start_ns, kind="stable")
    h = host.take(horder)
    t0 = float(window[0]) if window else float(min(seg.start_ns.min(), h.api_start_ns.min()))
    t1 = float(window[1]) if window else float(max(seg.end_ns.max(), h.api_end_ns.max()))
    # device rows launched by each host row, by correlation (a graph launch has many), in
    # start order; a correlation two host rows carry is the later row's
    h_dev: list[list[int]] = [[] for _ in range(len(h))]
    for d, p in zip(*_launched_by(h.correlation, seg.correlation, seg.start_ns), strict=True):
        h_dev[p].append(d)
    starts = h.api_start_ns.astype(np.float64)
    ends = h.api_end_ns.astype(np.float64)
    prev_end = np.concatenate(([t0], ends[:-1]))
    gap = np.maximum(0.0, starts - np.maximum.accumulate(prev_end))
    dur = ends - starts
    api = h.api.copy()
    # blocking rows keep only their own call cost (a sync: none; a pageable copy: a launch's);
    # the replay recomputes the wait from the device rows they cover
    lat = _launch_latency(seg, h, h_dev, hw)
    launches = dur[api == ApiKind.LAUNCH]
    call = float(np.median(launches)) if launches.size else 0.0
    dur[api == ApiKind.SYNC] = 0.0
    sync_copy = api == ApiKind.MEMCPY_SYNC
    dur[sync_copy] = np.minimum(dur[sync_copy], call)
    names_s = [names[int(n)] for n in seg.name]
    return ReplayDag(
        api=api,
        gap_ns=gap,
        dur_ns=dur,
        h_stream=h.stream.astype(np.int64),
        h_event=h.event.copy(),
        h_dev=h_dev,
        d_stream=seg.stream.astype(np.int64),
        d_dur=seg.duration_ns.astype(np.float64),
        d_live=np.ones(len(seg), bool),
        d_kind=seg.kind.copy(),
        d_klass=seg.klass.copy(),
        d_name=names_s,
        d_flops=seg.flops.astype(np.float64),
        d_bytes=seg.dram_bytes.astype(np.float64),
        d_grid=seg.grid.astype(np.int64),
        d_block=seg.block.astype(np.int64),
        d_regs=seg.regs.astype(np.int64),
        d_smem=seg.smem.astype(np.int64),
        d_regime=reg,
        d_start_obs=seg.start_ns.copy(),
        d_row=idx.astype(np.int64),
        launch_latency_ns=lat,
        graph_node_ns=float(hw.graph_node_ns),
        iterations=iterations,
        t0_ns=t0,
        observed_ns=t1 - t0,
        h_start_obs=h.api_start_ns.astype(np.int64),
    )


def _launched_by(
    h_corr: np.ndarray, d_corr: np.ndarray, d_start: np.ndarray
) -> tuple[list[int], list[int]]:
    """(device rows in start order, stable; the host row launching each) for every device row
    whose correlation a host row carries (> 0; the last such host row where several do). In
    numpy: a dict of every host row's correlation, read one numpy scalar at a time, was 6-7 ms
    of a 109k-event analysis's graph."""
    rows = np.flatnonzero(h_corr > 0)
    keys = h_corr[rows]
    by = np.argsort(keys, kind="stable")
    keys, rows = keys[by], rows[by]
    last = np.ones(len(keys), bool)  # the last row of each run of one correlation
    last[:-1] = keys[1:] != keys[:-1]
    keys, rows = keys[last], rows[last]
    order = np.argsort(d_start, kind="stable")
    if not len(keys):
        return [], []
    corr = d_corr[order]
    at = np.minimum(np.searchsorted(keys, corr), len(keys) - 1)
    hit = keys[at] == corr
    return order[hit].tolist(), rows[at[hit]].tolist()


def merge_idle_host_rows(dag: ReplayDag) -> ReplayDag:
    """The same graph with each run of consecutive host rows that only take host time (OTHER
    calls that launch nothing: cudaGetDevice, event queries, …) as one row, which the replay
    times the same: the first row's gap, then the run's durations and inner gaps as one
    duration (whole ns, so the sums are exact; the host clock they are added to is not whole
    after a wait that ends at a device row, launch latency included, so a time after the run
    can differ in its last bit: one addition instead of several roundings). No transform edits
    such a row, and one row breaks a run of launches or a capture region as several do. Most
    calls of a real trace are such rows: the 24,692 host rows of the 109k-event trace become
    13,325, and every replay and edited copy of the graph is that much smaller."""
    if len(dag.api) < 2:
        return dag
    off, _ = dag.launch_lists()
    idle = (dag.api == ApiKind.OTHER) & (off[1:] == off[:-1])
    inner = idle.copy()  # a row that continues a run begun by the row before it
    inner[0] = False
    inner[1:] &= idle[:-1]
    if not inner.any():
        return dag
    keep = ~inner
    run = np.cumsum(keep) - 1  # each row's row in the merged graph
    dur = np.bincount(run, weights=dag.dur_ns + np.where(inner, dag.gap_ns, 0.0))
    h_dev = [dag.h_dev[i] for i in np.flatnonzero(keep).tolist()]
    out = replace(
        dag,
        api=dag.api[keep],
        gap_ns=dag.gap_ns[keep],
        dur_ns=dur,
        h_stream=dag.h_stream[keep],
        h_event=dag.h_event[keep],
        h_dev=h_dev,
        h_start_obs=None if dag.h_start_obs is None else dag.h_start_obs[keep],
    )
    out._launches = None
    return out


def _launch_latency(seg: Segments, h: HostEvents, h_dev: list[list[int]], hw: GpuPeaks) -> float:
    """Shortest launch-call-start → device-start delay seen (the stream was idle then)."""
    lens = np.fromiter(map(len, h_dev), np.int64, len(h_dev))
    rows = np.flatnonzero((lens > 0) & np.isin(h.api, (ApiKind.LAUNCH, ApiKind.MEMCPY_ASYNC)))
    first = np.fromiter((h_dev[r][0] for r in rows.tolist()), np.int64, len(rows))
    delays = (seg.start_ns[first] - h.api_start_ns[rows]).astype(np.float64)
    delays = delays[delays >= 0]
    if len(delays) < 3:
        return float(hw.launch_latency_ns)
    return float(np.percentile(delays, 1))


@dataclass
class Schedule:
    """One replay: when each row ran and the makespan."""

    makespan_ns: float
    d_ready: np.ndarray  # when each device row could have started by its launch alone
    d_start: np.ndarray
    d_end: np.ndarray
    h_start: np.ndarray
    h_end: np.ndarray

    def step_ns(self, iterations: int) -> float:
        """Time per iteration."""
        return self.makespan_ns / max(1, iterations)


def schedule(dag: ReplayDag) -> Schedule:
    """Replay the graph: host rows in order, device rows FIFO per stream (module docstring).

    Compiled (``_replay``) over dense stream / event ids and the launch lists as flat arrays;
    ``engine.schedule.reference.schedule_ref`` is the same algorithm in Python, and a test checks they agree exactly.
    """
    n_d = len(dag.d_stream)
    inv, n_streams = _dense_ids(np.concatenate([dag.d_stream, dag.h_stream]).astype(np.int64))
    ev_inv, n_events = _dense_ids(dag.h_event.astype(np.int64))
    off, flat = dag.launch_lists()
    host_of = np.full(n_d, -1, np.int64)
    host_of[flat] = np.repeat(np.arange(len(dag.h_dev), dtype=np.int64), np.diff(off))
    anchored = np.flatnonzero((host_of < 0) & dag.d_live)
    f64, i64 = np.float64, np.int64  # asarray: no copy of what has its dtype already
    d_ready, d_start, d_end, h_start, h_end, t_last = _replay(
        dag.api.astype(i64),
        np.asarray(dag.gap_ns, f64),
        np.asarray(dag.dur_ns, f64),
        inv[n_d:],
        np.asarray(dag.h_stream, i64),
        ev_inv,
        off,
        flat,
        inv[:n_d],
        np.asarray(dag.d_dur, f64),
        np.asarray(dag.d_live, np.bool_),
        anchored,
        dag.d_start_obs[anchored].astype(f64) - dag.t0_ns,
        float(dag.launch_latency_ns),
        float(dag.graph_node_ns),
        n_streams,
        n_events,
    )
    dev_end = float(np.nanmax(d_end)) if n_d else 0.0
    return Schedule(
        makespan_ns=max(t_last, dev_end, dag.min_makespan_ns),
        d_ready=d_ready,
        d_start=d_start,
        d_end=d_end,
        h_start=h_start,
        h_end=h_end,
    )


def _dense_ids(v: np.ndarray) -> tuple[np.ndarray, int]:
    """Map values to 0..k-1 (any consistent numbering: the replay only needs identity)."""
    # a table over the ids' range where it is small beside them (the ids of a trace's streams
    # and events; a transform's side streams and events are numbered far above: a sort)
    if len(v) and int(v.max()) - int(v.min()) < max(1 << 16, 4 * len(v)):
        return _dense_small(v, int(v.min()), int(v.max()))
    ids, inv = np.unique(v, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), len(ids)


@jit
def _dense_small(v: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, int]:
    table = np.full(hi - lo + 1, -1, np.int64)
    out = np.empty(v.shape[0], np.int64)
    k = 0
    for i in range(v.shape[0]):
        j = v[i] - lo
        if table[j] < 0:
            table[j] = k
            k += 1
        out[i] = table[j]
    return out, k


@jit
def _enqueue(
    d: int,
    ready: float,
    d_s: np.ndarray,
    d_dur: np.ndarray,
    d_live: np.ndarray,
    stream_free: np.ndarray,
    stream_last: np.ndarray,
    pending: np.ndarray,
    d_ready: np.ndarray,
    d_start: np.ndarray,
    d_end: np.ndarray,
) -> float:
    s = d_s[d]
    dep = stream_free[s]
    if pending[s] == pending[s]:  # waits recorded for this stream's next row (NaN: none)
        dep = max(dep, pending[s])
        pending[s] = np.nan
    start = max(ready, dep)
    end = start + (d_dur[d] if d_live[d] else 0.0)
    d_ready[d] = ready
    d_start[d] = start
    d_end[d] = end
    stream_free[s] = end
    stream_last[s] = d
    return end


@jit
def _replay(
    api: np.ndarray,
    gap: np.ndarray,
    dur: np.ndarray,
    h_s: np.ndarray,
    h_stream_raw: np.ndarray,
    h_ev: np.ndarray,
    off: np.ndarray,
    flat: np.ndarray,
    d_s: np.ndarray,
    d_dur: np.ndarray,
    d_live: np.ndarray,
    anchored: np.ndarray,
    anchor_ready: np.ndarray,
    L: float,
    graph_node_ns: float,
    n_streams: int,
    n_events: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """``schedule_ref``'s loop over arrays. A wait's dependency is folded into ``pending`` of
    its stream at once (the recorded row has run by then, so its end is final); the next row
    enqueued on that stream takes it, as ``wait_on.pop`` does."""
    n_d = d_s.shape[0]
    n_h = api.shape[0]
    d_ready = np.full(n_d, np.nan)
    d_start = np.full(n_d, np.nan)
    d_end = np.full(n_d, np.nan)
    h_start = np.zeros(n_h)
    h_end = np.zeros(n_h)
    stream_free = np.zeros(n_streams)
    used = np.zeros(n_streams, np.bool_)  # streams with a row enqueued (stream_free's keys)
    stream_last = np.full(n_streams, -1, np.int64)
    pending = np.full(n_streams, np.nan)
    record_pos = np.full(n_events, -1, np.int64)
    host_t = 0.0
    graph_t = 0.0
    slot = 0
    t_last = 0.0
    for r in range(n_h):
        kind = api[r]
        host_t += gap[r]
        h_start[r] = host_t
        if kind == NOP:
            h_end[r] = host_t
            continue
        end = host_t + dur[r]
        a, b = off[r], off[r + 1]
        if kind == _GRAPH_LAUNCH:
            graph_t = host_t
            slot = 0
        elif kind == _GRAPH_NODE:
            for k in range(a, b):
                d = flat[k]
                _enqueue(
                    d,
                    graph_t + L + slot * graph_node_ns,
                    d_s,
                    d_dur,
                    d_live,
                    stream_free,
                    stream_last,
                    pending,
                    d_ready,
                    d_start,
                    d_end,
                )
                used[d_s[d]] = True
            slot += 1
        elif b > a:
            last = 0.0
            for k in range(a, b):
                d = flat[k]
                e = _enqueue(
                    d,
                    host_t + L,
                    d_s,
                    d_dur,
                    d_live,
                    stream_free,
                    stream_last,
                    pending,
                    d_ready,
                    d_start,
                    d_end,
                )
                used[d_s[d]] = True
                last = max(last, e)
            if kind == _MEMCPY_SYNC:
                end = max(end, last)
        elif kind == _SYNC:
            if h_stream_raw[r] >= 0:
                end = max(end, stream_free[h_s[r]])
            else:
                for st in range(n_streams):
                    if used[st]:
                        end = max(end, stream_free[st])
        elif kind == _EVENT_RECORD:
            if stream_last[h_s[r]] >= 0:
                record_pos[h_ev[r]] = stream_last[h_s[r]]
        elif kind == _STREAM_WAIT:
            p = record_pos[h_ev[r]]
            if p >= 0 and d_end[p] == d_end[p]:
                s = h_s[r]
                pending[s] = d_end[p] if pending[s] != pending[s] else max(pending[s], d_end[p])
        h_end[r] = end
        host_t = end
        t_last = max(t_last, end)
    # device rows no host row launched: anchored at their observed start
    for k in range(anchored.shape[0]):
        d = anchored[k]
        _enqueue(
            d,
            anchor_ready[k],
            d_s,
            d_dur,
            d_live,
            stream_free,
            stream_last,
            pending,
            d_ready,
            d_start,
            d_end,
        )
        used[d_s[d]] = True
    return d_ready, d_start, d_end, h_start, h_end, t_last


@twin(_dense_small)
def _dense_small_py(v: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, int]:
    """``_dense_small`` in numpy (ids in order of first appearance)."""
    uniq, first, inv = np.unique(v, return_index=True, return_inverse=True)
    rank = np.empty(len(uniq), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(uniq), dtype=np.int64)
    return rank[inv.reshape(-1)], len(uniq)


@twin(_replay)
def _replay_py(
    api: np.ndarray,
    gap: np.ndarray,
    dur: np.ndarray,
    h_s: np.ndarray,
    h_stream_raw: np.ndarray,
    h_ev: np.ndarray,
    off: np.ndarray,
    flat: np.ndarray,
    d_s: np.ndarray,
    d_dur: np.ndarray,
    d_live: np.ndarray,
    anchored: np.ndarray,
    anchor_ready: np.ndarray,
    L: float,
    graph_node_ns: float,
    n_streams: int,
    n_events: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """``_replay`` over Python lists (interpreted runs: numpy scalars are ~5x slower to index);
    the same operations in the same order, so the same floats."""
    nan = float("nan")
    n_d, n_h = len(d_s), len(api)
    ds, dd = d_s.tolist(), d_dur.tolist()
    live = d_live.tolist()
    d_ready, d_start, d_end = [nan] * n_d, [nan] * n_d, [nan] * n_d
    h_start, h_end = [0.0] * n_h, [0.0] * n_h
    stream_free = [0.0] * n_streams
    used = [False] * n_streams
    stream_last = [-1] * n_streams
    pending: list[float | None] = [None] * n_streams
    record_pos = [-1] * n_events
    hs, hraw, hev = h_s.tolist(), h_stream_raw.tolist(), h_ev.tolist()
    lo, fl = off.tolist(), flat.tolist()

    def enqueue(d: int, ready: float) -> float:
        s = ds[d]
        dep = stream_free[s]
        p = pending[s]
        if p is not None:
            dep = p if p > dep else dep  # max(), as numba's: the second only when greater
            pending[s] = None
        start = dep if dep > ready else ready
        end = start + (dd[d] if live[d] else 0.0)
        d_ready[d], d_start[d], d_end[d] = ready, start, end
        stream_free[s] = end
        stream_last[s] = d
        used[s] = True
        return end

    host_t = graph_t = t_last = 0.0
    slot = 0
    for r, (kind, g, du) in enumerate(zip(api.tolist(), gap.tolist(), dur.tolist(), strict=True)):
        host_t += g
        h_start[r] = host_t
        if kind == NOP:
            h_end[r] = host_t
            continue
        end = host_t + du
        a, b = lo[r], lo[r + 1]
        if kind == _GRAPH_LAUNCH:
            graph_t = host_t
            slot = 0
        elif kind == _GRAPH_NODE:
            for k in range(a, b):
                enqueue(fl[k], graph_t + L + slot * graph_node_ns)
            slot += 1
        elif b == a + 1:  # one launch: most rows
            e = enqueue(fl[a], host_t + L)
            if kind == _MEMCPY_SYNC and e > end:
                end = e
        elif b > a:
            last = 0.0
            for k in range(a, b):
                e = enqueue(fl[k], host_t + L)
                last = e if e > last else last
            if kind == _MEMCPY_SYNC and last > end:
                end = last
        elif kind == _SYNC:
            if hraw[r] >= 0:
                end = max(end, stream_free[hs[r]])
            else:
                for st in range(n_streams):
                    if used[st]:
                        end = max(end, stream_free[st])
        elif kind == _EVENT_RECORD:
            if stream_last[hs[r]] >= 0:
                record_pos[hev[r]] = stream_last[hs[r]]
        elif kind == _STREAM_WAIT:
            p = record_pos[hev[r]]
            if p >= 0 and d_end[p] == d_end[p]:
                s = hs[r]
                q = pending[s]
                pending[s] = d_end[p] if q is None else max(q, d_end[p])
        h_end[r] = end
        host_t = end
        if end > t_last:
            t_last = end
    for d, ready in zip(anchored.tolist(), anchor_ready.tolist(), strict=True):
        enqueue(d, ready)
    return (np.array(d_ready, np.float64), np.array(d_start, np.float64),
            np.array(d_end, np.float64), np.array(h_start, np.float64),
            np.array(h_end, np.float64), t_last)  # fmt: skip


_GRAPH_LAUNCH, _GRAPH_NODE = int(ApiKind.GRAPH_LAUNCH), int(ApiKind.GRAPH_NODE)
_MEMCPY_SYNC, _SYNC = int(ApiKind.MEMCPY_SYNC), int(ApiKind.SYNC)
_EVENT_RECORD, _STREAM_WAIT = int(ApiKind.EVENT_RECORD), int(ApiKind.STREAM_WAIT)


def kernel_names(dag: ReplayDag, klass: Klass) -> list[int]:
    """Live device rows of a class (helper for transforms)."""
    return [int(i) for i in np.flatnonzero(dag.d_live & (dag.d_klass == klass))]


__all__ = ["NOP", "NameTable", "ReplayDag", "Schedule", "build_dag", "kernel_names", "schedule"]
