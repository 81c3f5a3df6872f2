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
  block the host until the device rows they cover have finished. In a graph built from a trace
  a blocking call waits *as observed* (``h_wait``): for the device rows that finished while it
  was blocked (a sync's stream is rarely recorded, and waiting for every stream made a sync
  wait out a collective it never waited for), and a ``cudaMemcpyAsync`` that returned only
  when its copy had finished (to pageable memory) waits for its copy;
* **host threads** — each thread the trace records keeps its own clock (``h_thread``): a call
  blocked on one thread does not hold up another thread's launches;
* **peers** — a collective whose peers are known (``d_not_before``, set by
  engine.analyze.advice.peers) starts no earlier than its last peer arrived, and then takes its
  transfer time. A graph built from one rank's trace has none: it holds no row.

Device rows no host row launched are enqueued in their observed place among the host rows
(by observed start), never after a row their stream ran after them, and may not start before
their observed start — except one that started right after the row before it on its stream
(``ReplayDag.d_queued``: work queued before the trace's host record began, a graph's kernels
whose launch is not linked), which follows that row after its observed gap.

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
    #: int64 thread of each host row (0..); None: one thread
    h_thread: np.ndarray | None = None
    #: float64 observed duration of each host call, waits included (0 for a row a transform
    #: inserted; a run of merged idle calls: from its first call's start to its last's end);
    #: None: not from a trace
    h_dur_obs: np.ndarray | None = None
    #: the device rows each host row waits for as observed, CSR style (offsets (n_host + 1,),
    #: rows); None: the model's own waits (a sync on every stream it names, or all)
    h_wait_off: np.ndarray | None = None
    h_wait: np.ndarray | None = None
    #: waits the trace shows but does not record (``_inferred_waits``): per device row, a row
    #: on another stream it waits for (-1 none), and a delay after it could otherwise start
    #: (ns); None: none
    d_after: np.ndarray | None = None
    d_delay: np.ndarray | None = None
    #: bool per device row no host row launched: queued behind the row before it on its
    #: stream (``_inferred_waits``) — it follows that row after its observed gap (``d_delay``)
    #: instead of waiting for its observed start; None: every such row at its observed start
    d_queued: np.ndarray | None = None
    #: uint8 arithmetic type per device row (engine.trace.segments.DTYPES; 0 unknown); None:
    #: not known
    d_dtype: np.ndarray | None = None
    #: float64 per device row: the earliest it may start (ns relative to t0; NaN: no bound) —
    #: a collective held by its peers (engine.analyze.advice.peers: its transfer cannot begin before
    #: its last peer arrived); None: no row is held (a rank replayed alone)
    d_not_before: np.ndarray | None = None
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
        if self.h_thread is not None:  # on the thread of the row it is inserted before
            n_h = len(self.h_thread)
            at_th = self.h_thread[np.minimum(pos, max(0, n_h - 1))] if n_h else np.zeros(m)
            self.h_thread = np.insert(self.h_thread, pos, at_th.astype(np.int64))
        if self.h_dur_obs is not None:
            self.h_dur_obs = np.insert(self.h_dur_obs, pos, 0.0)
        if self.h_wait_off is not None:  # an inserted row waits for nothing
            off = self.h_wait_off
            self.h_wait_off = np.insert(off, pos, off[pos])
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
    thread = h.thread.astype(np.int64)
    gap = starts - _prev_end_per_thread(ends, thread, t0)
    np.maximum(gap, 0.0, out=gap)
    dur = ends - starts
    api = h.api.copy()
    # blocking rows keep only their own call cost (a pageable copy: a launch's); the replay
    # recomputes the wait from the device rows they cover (as observed: _observed_waits)
    lat = _launch_latency(seg, h, h_dev, hw)
    launches = dur[api == ApiKind.LAUNCH]
    call = float(np.median(launches)) if launches.size else 0.0
    sync_copy = api == ApiKind.MEMCPY_SYNC
    dur[sync_copy] = np.minimum(dur[sync_copy], call)
    wait_off, wait, after = _observed_waits(seg, h, h_dev, call)
    waits = np.diff(wait_off) > 0
    dur[waits] = after[waits]  # the call's time after the last row it waited for
    names_s = [names[int(n)] for n in seg.name]
    d_after, d_delay, d_queued = _inferred_waits(seg, h, h_dev, lat, float(hw.graph_node_ns))
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
        h_thread=thread,
        h_dur_obs=ends - starts,
        h_wait_off=wait_off,
        h_wait=wait,
        d_after=d_after,
        d_delay=d_delay,
        d_dtype=seg.dtype.copy(),
        d_queued=d_queued,
    )


#: a device row ending this close after a blocking call returned counts as finished while it was
#: blocked (timestamps in whole µs round each end by up to 1 µs)
WAIT_SLACK_NS = 2_000


#: a device row that started this much later than its launch and its stream allowed waited for
#: something the trace does not record (``_inferred_waits``)
UNEXPLAINED_NS = 20_000
#: ... and waited for a row of another stream when that row ended at most this long before it
#: started (a cross-stream event wait resolves within a few µs: 2.8–4.9 µs on the V100 trace)
EDGE_SLACK_NS = 10_000


def _inferred_waits(
    seg: Segments, h: HostEvents, h_dev: list[list[int]], lat: float, node_ns: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(after, delay, queued) per device row: the waits a trace shows but does not record,
    and which rows no call launched were queued behind their stream's previous row. Each row
    keeps the delay it had after both its launch (+ the launch latency) and the end of the row
    before it on its stream (``delay``: the device's gap between dependent kernels, launch
    jitter). One delayed more than ``UNEXPLAINED_NS`` waited for something else: where a row of
    another stream ended just before it started (``EDGE_SLACK_NS``: a cross-stream event whose
    record or wait the trace does not name — older Kineto traces name neither), it waits for
    that row instead (``after``); otherwise (another rank, the host) it keeps its delay. A row a
    lever removes takes its delay with it. The unedited replay then starts every row when it
    started.

    A row no call launched (``queued``, ``ReplayDag.d_queued``) that started within
    ``UNEXPLAINED_NS`` of the end of the row before it on its stream was queued by then (work
    queued before the trace's host record began, a graph's kernels whose launch the trace does
    not link): it follows that row after its observed gap, as a launched row does; any other
    (its stream's first, or one that started later) is held to its observed start."""
    n = len(seg)
    after = np.full(n, -1, np.int64)
    delay = np.zeros(n)
    queued = np.zeros(n, bool)
    if not n:
        return after, delay, queued
    start, end = seg.start_ns.astype(np.float64), seg.end_ns.astype(np.float64)
    ready = start.copy()  # rows no host row launched: at their observed start (below: queued)
    lens = np.fromiter(map(len, h_dev), np.int64, len(h_dev))
    off = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    flat = np.fromiter(itertools.chain.from_iterable(h_dev), np.int64, int(off[-1]))
    host = np.repeat(np.arange(len(lens)), lens)
    slot = np.arange(len(flat)) - off[host]  # position in its host row's list
    graph = h.api[host] == ApiKind.GRAPH_LAUNCH
    ready[flat] = h.api_start_ns[host] + lat + np.where(graph, slot * node_ns, 0.0)
    # the row before on each stream (by observed start)
    order = np.lexsort((start, seg.stream))
    prev_end = np.full(n, -np.inf)
    same = seg.stream[order][1:] == seg.stream[order][:-1]
    prev_end[order[1:][same]] = end[order[:-1][same]]
    launched = np.zeros(n, bool)
    launched[flat] = True
    queued = ~launched & (start - prev_end <= UNEXPLAINED_NS)  # (-inf: its stream's first)
    ready[queued] = -np.inf
    explained = np.maximum(ready, prev_end)
    # every row keeps the gap it had after its launch and its stream allowed (the device's
    # own gap between dependent kernels, a few µs each: over thousands of kernels, percent of
    # the span); a longer one may be a wait on another stream, found below
    np.maximum(start - explained, 0.0, out=delay)
    late = np.flatnonzero(start - explained > UNEXPLAINED_NS)
    # when each row is enqueued in the replay: its launching call's place among the host rows
    # (a row no call launched: its observed start's place, before the call starting with it);
    # a wait on a row enqueued later could not be honoured, so that one keeps its delay
    when = np.searchsorted(h.api_start_ns, seg.start_ns, "left").astype(np.float64) - 0.5
    when[flat] = host
    if not len(late):
        return after, delay, queued
    by_end = np.argsort(end, kind="stable")
    ends = end[by_end]
    for d in late.tolist():
        # the latest row of another stream ending at most WAIT_SLACK_NS after d started
        k = int(np.searchsorted(ends, start[d] + WAIT_SLACK_NS, "right")) - 1
        found = -1
        while k >= 0 and ends[k] >= explained[d]:
            q = int(by_end[k])
            if seg.stream[q] != seg.stream[d]:
                if ends[k] >= start[d] - EDGE_SLACK_NS and when[q] < when[d]:
                    found = q
                break
            k -= 1
        if found >= 0:
            after[d] = found
            delay[d] = 0.0
    return after, delay, queued


def _prev_end_per_thread(ends: np.ndarray, thread: np.ndarray, t0: float) -> np.ndarray:
    """Per host row (in start order): the latest end of the calls before it on its thread (t0
    for a thread's first call): where its thread's clock stood when it was called."""
    n = len(ends)
    out = np.full(n, t0)
    if n < 2:
        return out
    order = np.argsort(thread, kind="stable")  # by thread, start order kept within each
    th, e = thread[order], ends[order]
    # a running maximum within each thread: offset each thread above every earlier one
    lo, width = float(e.min()), float(e.max() - e.min()) + 1.0
    first = np.ones(n, bool)
    first[1:] = th[1:] != th[:-1]
    group = np.cumsum(first) - 1
    shifted = (e - lo) + group * width
    run = np.maximum.accumulate(shifted) - group * width + lo
    prev = np.empty(n)
    prev[0] = t0
    prev[1:] = run[:-1]
    prev[first] = t0
    out[order] = prev
    return out


def _observed_waits(
    seg: Segments, h: HostEvents, h_dev: list[list[int]], call: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, device rows, time after): what each blocking host call waited for, as the trace
    shows it. A sync (``ApiKind.SYNC``) waited for the rows that finished while it was blocked:
    per stream (only its own where the trace names it), the last row that ended between the
    call's start and its return (``WAIT_SLACK_NS``); a blocking ``cudaMemcpy`` waited for its
    copy, and so did a ``cudaMemcpyAsync`` that lasted more than twice a launch call and
    returned only once its copy had finished (a copy to pageable memory blocks). ``after``: the
    call's time from the last of those rows' end to its return (what the replay adds after the
    wait)."""
    n = len(h)
    dend = seg.end_ns
    hs, he = h.api_start_ns, h.api_end_ns
    pair_h: list[np.ndarray] = []
    pair_d: list[np.ndarray] = []
    # blocking copies: the one copy each launched — a pageable cudaMemcpy always, an async
    # one that lasted more than two launch calls and returned only once its copy had finished
    lens = np.fromiter(map(len, h_dev), np.int64, n)
    slow_async = (h.api == ApiKind.MEMCPY_ASYNC) & ((he - hs) > 2 * call) & (call > 0)
    cand = np.flatnonzero(((h.api == ApiKind.MEMCPY_SYNC) | slow_async) & (lens == 1))
    if len(cand):
        d = np.fromiter((h_dev[r][0] for r in cand.tolist()), np.int64, len(cand))
        blocked = (dend[d] <= he[cand] + WAIT_SLACK_NS) & (dend[d] >= hs[cand])
        pair_h.append(cand[blocked])
        pair_d.append(d[blocked])
    # syncs: per stream, the last row that ended while the call was blocked
    syncs = np.flatnonzero(h.api == ApiKind.SYNC)
    if len(syncs) and len(seg):
        want = h.stream[syncs].astype(np.int64)
        for st in np.unique(seg.stream).tolist():
            idx = np.flatnonzero(seg.stream == st)
            idx = idx[np.argsort(dend[idx], kind="stable")]
            ends = dend[idx]
            k = np.searchsorted(ends, he[syncs] + WAIT_SLACK_NS, "right") - 1
            ok = (k >= 0) & ((want < 0) | (want == st))
            ok[ok] = ends[k[ok]] >= hs[syncs[ok]]
            pair_h.append(syncs[ok])
            pair_d.append(idx[k[ok]])
    ph = np.concatenate(pair_h) if pair_h else np.zeros(0, np.int64)
    pd = np.concatenate(pair_d) if pair_d else np.zeros(0, np.int64)
    order = np.argsort(ph, kind="stable")
    ph, pd = ph[order], pd[order]
    off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(ph, minlength=n), out=off[1:])
    after = np.zeros(n)
    if len(ph):
        last = np.full(n, -np.inf)
        np.maximum.at(last, ph, dend[pd].astype(np.float64))
        w = np.flatnonzero(np.isfinite(last))
        took = (he[w] - hs[w]).astype(np.float64)
        after[w] = np.clip(he[w] - last[w], 0.0, took)
    return off, pd.astype(np.int64), after


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
    if dag.h_wait_off is not None:
        idle &= dag.h_wait_off[1:] == dag.h_wait_off[:-1]  # (idle calls wait for nothing)
    inner = idle.copy()  # a row that continues a run begun by the row before it
    inner[0] = False
    inner[1:] &= idle[:-1]
    if dag.h_thread is not None:  # a run of one thread's calls (each thread has its clock)
        inner[1:] &= dag.h_thread[1:] == dag.h_thread[:-1]
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
        h_thread=None if dag.h_thread is None else dag.h_thread[keep],
        h_dur_obs=None
        if dag.h_dur_obs is None
        else np.bincount(run, weights=dag.h_dur_obs + np.where(inner, dag.gap_ns, 0.0)),
        h_wait_off=None
        if dag.h_wait_off is None
        else dag.h_wait_off[np.flatnonzero(np.append(keep, True))],
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
    n_h = len(dag.api)
    if dag.h_start_obs is not None and len(anchored):
        # each in its observed place among the host rows (an inserted row, -1, takes the time
        # of the row before it)
        at_obs = np.maximum.accumulate(np.asarray(dag.h_start_obs, np.int64))
        first = np.argsort(dag.d_start_obs[anchored], kind="stable")
        anchored = anchored[first]
        anchor_at = np.searchsorted(at_obs, dag.d_start_obs[anchored], "right").astype(np.int64)
        # and before any call launching a row its stream ran after it (a stream runs its rows
        # in order: one it ran before a launched row is queued before that row)
        np.minimum(anchor_at, _next_launch(dag, host_of)[anchored], out=anchor_at)
        if dag.h_wait_off is not None and dag.h_wait is not None and len(dag.h_wait):
            # and before a blocking call that waited for it (it finished while that call was
            # blocked: it was queued before the call returned)
            waiter = np.repeat(np.arange(n_h, dtype=np.int64), np.diff(dag.h_wait_off))
            first_wait = np.full(n_d, n_h, np.int64)
            np.minimum.at(first_wait, dag.h_wait, waiter)
            np.minimum(anchor_at, first_wait[anchored], out=anchor_at)
        # and no later than any row its stream ran after it that no call launched either (a
        # wait above pulls a row forward, and the rows its stream ran before it with it: a
        # stream runs its rows in order, so a row queued after a later one would start after
        # it — a device sync waiting out work queued before the trace began ran that work in
        # observed order, not its last row first)
        in_stream = np.lexsort((dag.d_start_obs[anchored], dag.d_stream[anchored]))
        anchor_at[in_stream] = _min_from_here(
            dag.d_stream[anchored][in_stream], anchor_at[in_stream]
        )
        by = np.argsort(anchor_at, kind="stable")  # (observed order kept at one place)
        anchored, anchor_at = anchored[by], anchor_at[by]
    else:
        anchor_at = np.full(len(anchored), n_h, np.int64)  # after every host row
    # each at its observed start, or where its stream lets it (queued behind the row before it
    # there: ready at the window's start, its observed gap after that row in d_delay)
    anchor_ready = dag.d_start_obs[anchored].astype(np.float64) - dag.t0_ns
    if dag.d_queued is not None:
        anchor_ready[dag.d_queued[anchored]] = 0.0
    thread = np.zeros(n_h, np.int64) if dag.h_thread is None else np.asarray(dag.h_thread, np.int64)
    n_threads = int(thread.max()) + 1 if n_h else 1
    observed = dag.h_wait_off is not None and dag.h_wait is not None
    w_off = dag.h_wait_off if observed else np.zeros(n_h + 1, np.int64)
    w_rows = dag.h_wait if observed else np.zeros(0, np.int64)
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
        np.full(n_d, -1, np.int64) if dag.d_after is None else np.asarray(dag.d_after, i64),
        np.zeros(n_d) if dag.d_delay is None else np.asarray(dag.d_delay, f64),
        np.full(n_d, np.nan) if dag.d_not_before is None else np.asarray(dag.d_not_before, f64),
        anchored,
        anchor_ready,
        anchor_at,
        float(dag.launch_latency_ns),
        float(dag.graph_node_ns),
        n_streams,
        n_events,
        thread,
        n_threads,
        np.asarray(w_off, i64),
        np.asarray(w_rows, i64),
        observed,
        dag.d_start_obs.astype(f64) - dag.t0_ns + np.asarray(dag.d_dur, f64),
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


def _min_from_here(group: np.ndarray, val: np.ndarray) -> np.ndarray:
    """Per row of ``val`` (rows sorted by ``group``, each group's in order): the minimum of
    ``val`` over that row and the rows after it in its group."""
    n = len(val)
    if n < 2:
        return val.copy()
    first = np.ones(n, bool)
    first[1:] = group[1:] != group[:-1]
    g = np.cumsum(first) - 1
    # a running minimum over the reversed rows, each group's values shifted below every group
    # visited before it (so no minimum crosses a group)
    lo, big = int(val.min()), int(val.max()) - int(val.min()) + 1
    rev_g = (g[-1] - g)[::-1]
    run = np.minimum.accumulate((val[::-1] - lo) - rev_g * big) + rev_g * big + lo
    return run[::-1].astype(val.dtype)


def _next_launch(dag: ReplayDag, host_of: np.ndarray) -> np.ndarray:
    """Per device row: the first host row (in host order) launching any row its stream ran
    after it (observed order), or the number of host rows where none does."""
    n_h = len(dag.api)
    order = np.lexsort((dag.d_start_obs, dag.d_stream))
    ho = host_of[order]
    val = np.where(ho >= 0, ho, n_h).astype(np.int64)
    st = dag.d_stream[order]
    n = len(order)
    out = np.full(n, n_h, np.int64)
    if n < 2:
        return out
    # the minimum over the rows after each one within its stream: a running minimum over the
    # reversed order, each stream's keys shifted below every stream visited before it
    first = np.ones(n, bool)
    first[1:] = st[1:] != st[:-1]
    group = np.cumsum(first) - 1  # ascending in ``order``
    big = n_h + 1
    rev_k = (group[-1] - group)[::-1]  # 0 for the last stream, visited first in reverse
    key = val[::-1] - rev_k * big
    run = np.minimum.accumulate(key) + rev_k * big  # min over this row and those after it
    after = np.full(n, n_h, np.int64)  # the min over the rows strictly after it
    run_fwd = run[::-1]
    last_of_group = np.append(first[1:], True)
    after[:-1] = run_fwd[1:]
    after[last_of_group] = n_h
    out[order] = after
    return out


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
    d_after: np.ndarray,
    d_delay: np.ndarray,
    d_nb: np.ndarray,
    stream_free: np.ndarray,
    stream_last: np.ndarray,
    pending: np.ndarray,
    d_ready: np.ndarray,
    d_start: np.ndarray,
    d_end: np.ndarray,
    takes_wait: bool = True,
) -> float:
    s = d_s[d]
    start = max(ready, stream_free[s]) + (d_delay[d] if d_live[d] else 0.0)
    if takes_wait and pending[s] == pending[s]:  # waits recorded for this stream's next row
        start = max(start, pending[s])
        pending[s] = np.nan
    p = d_after[d]
    if d_live[d] and p >= 0:  # an inferred wait
        e = d_end[p]
        if e != e and not d_live[p]:  # a row a lever removed: what its stream ran so far
            e = stream_free[d_s[p]]
        if e == e and e > start:
            start = e
    nb = d_nb[d]
    if d_live[d] and nb == nb and nb > start:  # held by its peers (ReplayDag.d_not_before)
        start = nb
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
    d_after: np.ndarray,
    d_delay: np.ndarray,
    d_nb: np.ndarray,
    anchored: np.ndarray,
    anchor_ready: np.ndarray,
    anchor_at: np.ndarray,
    L: float,
    graph_node_ns: float,
    n_streams: int,
    n_events: int,
    thread: np.ndarray,
    n_threads: int,
    w_off: np.ndarray,
    w_rows: np.ndarray,
    observed: bool,
    d_obs_end: np.ndarray,
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
    clock = np.zeros(n_threads)
    graph_t = 0.0
    slot = 0
    t_last = 0.0
    ka = 0
    for r in range(n_h):
        while ka < anchored.shape[0] and anchor_at[ka] <= r:
            d = anchored[ka]
            _enqueue(d, anchor_ready[ka], d_s, d_dur, d_live, d_after, d_delay, d_nb, stream_free,
                     stream_last, pending, d_ready, d_start, d_end, False)  # fmt: skip
            used[d_s[d]] = True
            ka += 1
        kind = api[r]
        th = thread[r]
        host_t = clock[th] + gap[r]
        h_start[r] = host_t
        if kind == NOP:
            h_end[r] = host_t
            clock[th] = host_t
            continue
        end = host_t + dur[r]
        a, b = off[r], off[r + 1]
        if kind == _GRAPH_LAUNCH:
            graph_t = host_t
            slot = 0
            for k in range(a, b):  # the graph's kernels, where the trace links them to it
                d = flat[k]
                _enqueue(d, graph_t + L + slot * graph_node_ns, d_s, d_dur, d_live, d_after, d_delay, d_nb, stream_free,
                         stream_last, pending, d_ready, d_start, d_end)  # fmt: skip
                used[d_s[d]] = True
                slot += 1
        elif kind == _GRAPH_NODE:
            for k in range(a, b):
                d = flat[k]
                _enqueue(d, graph_t + L + slot * graph_node_ns, d_s, d_dur, d_live, d_after, d_delay, d_nb, stream_free,
                         stream_last, pending, d_ready, d_start, d_end)  # fmt: skip
                used[d_s[d]] = True
            slot += 1
        elif b > a:
            last = 0.0
            for k in range(a, b):
                d = flat[k]
                e = _enqueue(d, host_t + L, d_s, d_dur, d_live, d_after, d_delay, d_nb, stream_free, stream_last,
                             pending, d_ready, d_start, d_end)  # fmt: skip
                used[d_s[d]] = True
                last = max(last, e)
            if kind == _MEMCPY_SYNC:
                end = max(end, last)
        elif kind == _SYNC and not observed:
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
        if observed and w_off[r + 1] > w_off[r]:  # waits as observed, then the call's tail
            w = host_t
            for k in range(w_off[r], w_off[r + 1]):
                q = w_rows[k]
                e = d_end[q]
                if e != e:  # not queued: launched later (another thread) or removed
                    e = d_obs_end[q] if d_live[q] else stream_free[d_s[q]]
                if e > w:
                    w = e
            end = w + dur[r]
        h_end[r] = end
        clock[th] = end
        t_last = max(t_last, end)
    # device rows no host row launched after the last host row: at their observed start
    while ka < anchored.shape[0]:
        d = anchored[ka]
        _enqueue(d, anchor_ready[ka], d_s, d_dur, d_live, d_after, d_delay, d_nb, stream_free,
                 stream_last, pending, d_ready, d_start, d_end, False)  # fmt: skip
        used[d_s[d]] = True
        ka += 1
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
    d_after: np.ndarray,
    d_delay: np.ndarray,
    d_nb: np.ndarray,
    anchored: np.ndarray,
    anchor_ready: np.ndarray,
    anchor_at: np.ndarray,
    L: float,
    graph_node_ns: float,
    n_streams: int,
    n_events: int,
    thread: np.ndarray,
    n_threads: int,
    w_off: np.ndarray,
    w_rows: np.ndarray,
    observed: bool,
    d_obs_end: np.ndarray,
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
    ths, wo, wr = thread.tolist(), w_off.tolist(), w_rows.tolist()
    obs_end = d_obs_end.tolist()
    anch, a_ready, a_at = anchored.tolist(), anchor_ready.tolist(), anchor_at.tolist()
    clock = [0.0] * n_threads

    after, delay, not_before = d_after.tolist(), d_delay.tolist(), d_nb.tolist()

    def enqueue(d: int, ready: float, takes_wait: bool = True) -> float:
        s = ds[d]
        dep = stream_free[s]
        start = (dep if dep > ready else ready) + (delay[d] if live[d] else 0.0)
        p = pending[s]
        if takes_wait and p is not None:
            start = p if p > start else start  # max(), as numba's: the second only when greater
            pending[s] = None
        q = after[d]
        if live[d] and q >= 0:  # an inferred wait
            e = d_end[q]
            if e != e and not live[q]:  # a row a lever removed: what its stream ran so far
                e = stream_free[ds[q]]
            if e == e and e > start:
                start = e
        nb = not_before[d]
        if live[d] and nb == nb and nb > start:  # held by its peers
            start = nb
        end = start + (dd[d] if live[d] else 0.0)
        d_ready[d], d_start[d], d_end[d] = ready, start, end
        stream_free[s] = end
        stream_last[s] = d
        used[s] = True
        return end

    graph_t = t_last = 0.0
    slot = ka = 0
    n_a = len(anch)
    for r, (kind, g, du) in enumerate(zip(api.tolist(), gap.tolist(), dur.tolist(), strict=True)):
        while ka < n_a and a_at[ka] <= r:
            enqueue(anch[ka], a_ready[ka], False)
            ka += 1
        th = ths[r]
        host_t = clock[th] + g
        h_start[r] = host_t
        if kind == NOP:
            h_end[r] = host_t
            clock[th] = host_t
            continue
        end = host_t + du
        a, b = lo[r], lo[r + 1]
        if kind == _GRAPH_LAUNCH:
            graph_t = host_t
            slot = 0
            for k in range(a, b):
                enqueue(fl[k], graph_t + L + slot * graph_node_ns)
                slot += 1
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
        elif kind == _SYNC and not observed:
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
        if observed and wo[r + 1] > wo[r]:
            w = host_t
            for k in range(wo[r], wo[r + 1]):
                q = wr[k]
                e = d_end[q]
                if e != e:  # not queued: launched later (another thread) or removed
                    e = obs_end[q] if live[q] else stream_free[ds[q]]
                if e > w:
                    w = e
            end = w + du
        h_end[r] = end
        clock[th] = end
        if end > t_last:
            t_last = end
    while ka < n_a:
        enqueue(anch[ka], a_ready[ka], False)
        ka += 1
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
