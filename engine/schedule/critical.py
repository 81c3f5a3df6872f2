"""What bounds the step: the critical path of one replay (DESIGN §5 "replay").

The replay (``engine.schedule.dag.schedule``) gives every host and device row a start and an
end, each set by one binding constraint: a host call starts when the call before it on its
thread ended plus the host time between them; a device row starts at the latest of its launch
(the call's start + launch latency), the end of the row before it on its stream, a recorded
event wait or an inferred wait on another stream (plus the unexplained delay the trace showed),
its observed start (a row no call launched, unless it was queued behind the row before it on
its stream), and — where the peers are known — the arrival of its collective's last peer. A
blocking call ends when the device row it waited for ends.

The critical path is found by walking back from whatever ended last, at each row following the
constraint that set its start, and every nanosecond between the window's start and its end is
given to exactly one part (``PARTS``): the walk covers the makespan with no gap and no overlap,
so the parts add up to the replayed span. This is the longest path HTA's critical-path analysis
finds on its graph (HTA: nodes at each event's start and end, edges for durations, launches,
stream order and syncs), found here on the replay's own times instead of a second graph: the
binding constraint of a node is the last edge into it, so following it back is the longest path.

Ties (two constraints that end at the same instant) are broken toward the device chain: a kernel
that was both ready and next on its stream is bound by its stream, as the time before it was
spent on the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.regimes import N_REGIMES, Regime
from engine.schedule.dag import NOP, ReplayDag, Schedule
from engine.trace.segments import Kind, Klass
from engine.trace.trace import ApiKind

#: the parts of a critical path, in the order they are printed; each is one kind of time
PARTS: dict[str, str] = {
    "kernel": "kernels",
    "communication": "collective kernels (exposed)",
    "peer_wait": "waiting for peers at collectives",
    "comm_wait": "collectives held back, cause unrecorded (peers or the network)",
    "copy": "copies and memsets",
    "host": "host/framework time between calls",
    "launch_api": "launch API calls",
    "launch_delay": "launch and queueing delay",
    "sync": "synchronisation calls",
    "allocation": "allocation (cudaMalloc/cudaFree)",
    "data_loading": "data loading",
    "kernel_gap": "device gaps between dependent rows",
    "idle": "idle nobody waits for",
}
#: what each part is in HTA's critical-path breakdown (``bound_by``): the parts compared with it
HTA_BOUND_BY: dict[str, str] = {
    "kernel": "gpu_compute_bound",
    "copy": "gpu_compute_bound",  # HTA: a memcpy on a stream is a GPU op like a kernel
    "communication": "gpu_communication_bound",
    "peer_wait": "gpu_communication_bound",
    "comm_wait": "gpu_kernel_kernel_overhead",  # HTA: the delay before a kernel on its stream
    "host": "cpu_bound",
    "launch_api": "cpu_bound",
    "sync": "cpu_bound",
    "allocation": "cpu_bound",
    "data_loading": "cpu_bound",
    "launch_delay": "gpu_kernel_launch_overhead",
    "kernel_gap": "gpu_kernel_kernel_overhead",
    "idle": "gpu_kernel_kernel_overhead",
}
#: the parts one headline group adds up (what an engineer calls one thing)
GROUPS: dict[str, tuple[str, ...]] = {
    "exposed communication": ("communication", "comm_wait", "peer_wait"),
    "kernels": ("kernel",),
    "copies": ("copy",),
    "host/framework": ("host", "launch_api"),
    "launch and queueing": ("launch_delay",),
    "synchronisation": ("sync",),
    "allocation": ("allocation",),
    "data loading": ("data_loading",),
    "device gaps": ("kernel_gap",),
    "idle nobody waits for": ("idle",),
}
_PART_ID = {p: i for i, p in enumerate(PARTS)}
_HOST_PART = {
    ApiKind.LAUNCH: "launch_api",
    ApiKind.GRAPH_LAUNCH: "launch_api",
    ApiKind.GRAPH_NODE: "launch_api",
    ApiKind.MEMCPY_ASYNC: "launch_api",
    ApiKind.MEMCPY_SYNC: "sync",
    ApiKind.SYNC: "sync",
    ApiKind.EVENT_RECORD: "sync",
    ApiKind.STREAM_WAIT: "sync",
    ApiKind.MALLOC: "allocation",
    ApiKind.HOST_WORK: "host",
    ApiKind.DATA_LOADING: "data_loading",
}
_DEV, _HOST_END, _HOST_START = 0, 1, 2
#: ``CriticalPath.dev`` of the host time before a host row (between it and the call before it)
GAP = -2


@dataclass(frozen=True)
class CriticalPath:
    """One replay's critical path as intervals on the replay's clock (ns from the window's
    start, ``t0_ns`` on the trace's clock): interval i covers [start[i], end[i]) and is of
    part ``PARTS`` key ``part[i]`` (an index into ``list(PARTS)``), caused by device row
    ``dev[i]`` (-1: none) or host row ``host[i]`` (-1: none) of the replayed graph; ``dev[i]``
    is ``GAP`` where the interval is the host time between host row ``host[i]`` and the call
    before it on its thread (not the call's own time)."""

    start: np.ndarray  # float64
    end: np.ndarray  # float64
    part: np.ndarray  # uint8
    dev: np.ndarray  # int64
    host: np.ndarray  # int64
    makespan_ns: float
    t0_ns: float
    #: the walk stopped before the window's start (a cycle of zero-length constraints)
    cut_short: bool = False

    @property
    def parts(self) -> list[str]:
        """The part names of ``part``'s indices."""
        return list(PARTS)

    def length(self) -> np.ndarray:
        """Each interval's length (ns)."""
        return self.end - self.start

    def by_part(self, lo: float = -np.inf, hi: float = np.inf) -> dict[str, float]:
        """ns of the path in each part, over the window [lo, hi) of the replay's clock."""
        a = np.clip(self.start, lo, hi)
        b = np.clip(self.end, lo, hi)
        w = np.bincount(self.part, weights=b - a, minlength=len(PARTS))
        return {p: float(w[i]) for i, p in enumerate(PARTS)}

    def device_rows(self) -> np.ndarray:
        """Device rows with time on the path (each once)."""
        return np.unique(self.dev[self.dev >= 0])


def critical_path(dag: ReplayDag, sched: Schedule) -> CriticalPath:
    """The critical path of ``sched`` (a replay of ``dag``), walked as the module docstring says."""
    w = _Walk(dag, sched)
    w.run()
    n = len(w.s)
    order = np.arange(n)[::-1]  # walked backwards: the path forwards
    return CriticalPath(
        start=np.asarray(w.s, np.float64)[order],
        end=np.asarray(w.e, np.float64)[order],
        part=np.asarray(w.p, np.uint8)[order],
        dev=np.asarray(w.d, np.int64)[order],
        host=np.asarray(w.h, np.int64)[order],
        makespan_ns=float(sched.makespan_ns),
        t0_ns=float(dag.t0_ns),
        cut_short=w.cut_short,
    )


def _tol(t: float) -> float:
    """How close two replay times must be to be one instant: sums of the same float64 terms in
    another order differ in their last bits (1e-9 relative), never by a nanosecond."""
    return 0.5 + 1e-9 * abs(t)


class _Walk:
    """The backward walk; lists of Python scalars (the walk touches a few values per row)."""

    def __init__(self, dag: ReplayDag, sched: Schedule) -> None:
        n_d, n_h = len(dag.d_stream), len(dag.api)
        self.n_d, self.n_h = n_d, n_h
        self.live = dag.d_live.tolist()
        ds = np.where(dag.d_live, sched.d_start, np.nan)
        de = np.where(dag.d_live, sched.d_end, np.nan)
        self.ds, self.de = ds.tolist(), de.tolist()
        self.dr = sched.d_ready.tolist()
        self.hs, self.he = sched.h_start.tolist(), sched.h_end.tolist()
        self.h_dur = np.asarray(dag.dur_ns, np.float64).tolist()
        self.api = dag.api.tolist()
        self.host_of = dag.host_of().tolist()
        self.delay = (
            np.zeros(n_d) if dag.d_delay is None else np.asarray(dag.d_delay, np.float64)
        ).tolist()
        self.after = (
            np.full(n_d, -1) if dag.d_after is None else np.asarray(dag.d_after, np.int64)
        ).tolist()
        nb = getattr(dag, "d_not_before", None)
        self.not_before = None if nb is None else np.asarray(nb, np.float64).tolist()
        self.kind = dag.d_kind.tolist()
        self.klass = dag.d_klass.tolist()
        self.prev_stream = _prev_on_stream(dag, ds, de).tolist()
        thread = np.zeros(n_h, np.int64) if dag.h_thread is None else dag.h_thread
        self.prev_thread = _prev_on_thread(np.asarray(thread, np.int64)).tolist()
        if dag.h_wait_off is not None and dag.h_wait is not None:
            self.w_off, self.w_rows = dag.h_wait_off.tolist(), dag.h_wait.tolist()
        else:
            self.w_off, self.w_rows = None, None
        self.h_dev = dag.h_dev
        # every live device row by its end, for a wait whose cause is not recorded
        live = np.flatnonzero(np.isfinite(de))
        by_end = live[np.argsort(de[live], kind="stable")]
        self.end_sorted = de[by_end]
        self.end_rows = by_end
        # host rows by end (a row no call launched hangs off the host's latest call before it)
        self.h_by_end = np.argsort(sched.h_end, kind="stable")
        self.h_end_sorted = np.asarray(sched.h_end)[self.h_by_end]
        self.makespan = float(sched.makespan_ns)
        self.s: list[float] = []
        self.e: list[float] = []
        self.p: list[int] = []
        self.d: list[int] = []
        self.h: list[int] = []
        self.cut_short = False

    def add(self, part: str, a: float, b: float, dev: int = -1, host: int = -1) -> None:
        if b > a:
            self.s.append(a)
            self.e.append(b)
            self.p.append(_PART_ID[part])
            self.d.append(dev)
            self.h.append(host)

    # ------------------------------------------------------------------ the walk
    def run(self) -> None:
        state, idx, cursor = self._last()
        if cursor < self.makespan:  # a throughput floor on the window (a loader)
            self.add("data_loading", cursor, self.makespan)
        steps = 0
        cap = 4 * (self.n_d + self.n_h) + 16
        while state >= 0 and cursor > 0.0:
            steps += 1
            if steps > cap:
                self.cut_short = True
                break
            if state == _DEV:
                state, idx, cursor = self._device(idx, cursor)
            elif state == _HOST_END:
                state, idx, cursor = self._host_end(idx, cursor)
            else:
                state, idx, cursor = self._host_start(idx, cursor)
        if cursor > 0.0 and not self.cut_short:
            self.add("idle", 0.0, cursor)

    def _last(self) -> tuple[int, int, float]:
        de = np.asarray(self.de)
        d_last = int(np.nanargmax(de)) if np.isfinite(de).any() else -1
        h_last = int(np.argmax(self.he)) if self.n_h else -1
        t_d = self.de[d_last] if d_last >= 0 else -np.inf
        t_h = self.he[h_last] if h_last >= 0 else -np.inf
        if d_last < 0 and h_last < 0:
            return -1, -1, 0.0
        if t_d >= t_h:
            return _DEV, d_last, float(t_d)
        return _HOST_END, h_last, float(t_h)

    def _device(self, d: int, cursor: float) -> tuple[int, int, float]:
        s, e = self.ds[d], self.de[d]
        part = _device_part(self.kind[d], self.klass[d])
        self.add(part, s, min(e, cursor), dev=d)
        delay = self.delay[d] if self.live[d] else 0.0
        own = s  # where this row would have started without its peers
        nb = self.not_before[d] if self.not_before is not None else np.nan
        if nb == nb and abs(nb - s) <= _tol(s):
            own = self._own_arrival(d, delay)
            if own < s:
                self.add("peer_wait", own, s, dev=d)
        # the delay the trace shows and does not explain: before a collective, it is that
        # collective held back (its peers late, or the network), not the device's own gap
        gap = "comm_wait" if part == "communication" else "kernel_gap"
        # 1. the row before it on its stream (the device chain)
        p = self.prev_stream[d]
        if p >= 0 and abs(self.de[p] + delay - own) <= _tol(own):
            self.add(gap, self.de[p], own, dev=d)
            return _DEV, p, self.de[p]
        # 2. an inferred wait on another stream
        q = self.after[d]
        if q >= 0 and self.live[q] and abs(self.de[q] - own) <= _tol(own):
            return _DEV, q, self.de[q]
        # 3. its launch
        h = self.host_of[d]
        if h >= 0 and abs(self.dr[d] + delay - own) <= _tol(own):
            self.add(gap, max(self.hs[h], own - delay), own, dev=d)
            self.add("launch_delay", self.hs[h], max(self.hs[h], own - delay), dev=d)
            return _HOST_START, h, self.hs[h]
        # 4. a recorded event wait: a row on another stream that ended at this instant
        q = self._ended_at(own, d)
        if q >= 0:
            return _DEV, q, self.de[q]
        # nothing recorded set its start: it ran at its observed time. What ran before it is
        # the latest of what could have: its stream's previous row, its launch, the host
        return self._unexplained(d, own)

    def _own_arrival(self, d: int, delay: float) -> float:
        """When row d could have started by its own rank's constraints alone."""
        t = self.dr[d]
        p = self.prev_stream[d]
        if p >= 0:
            t = max(t, self.de[p])
        t += delay
        q = self.after[d]
        if q >= 0 and self.live[q]:
            t = max(t, self.de[q])
        return min(t, self.ds[d])

    def _ended_at(self, t: float, d: int) -> int:
        tol = _tol(t)
        i = int(np.searchsorted(self.end_sorted, t - tol, "left"))
        while i < len(self.end_sorted) and self.end_sorted[i] <= t + tol:
            q = int(self.end_rows[i])
            if q != d:
                return q
            i += 1
        return -1

    def _unexplained(self, d: int, t: float) -> tuple[int, int, float]:
        best: tuple[float, int, int] = (-np.inf, -1, -1)
        p = self.prev_stream[d]
        if p >= 0 and self.de[p] <= t:
            best = max(best, (self.de[p], _DEV, p))
        h = self.host_of[d]
        if h >= 0 and self.hs[h] <= t:
            best = max(best, (self.hs[h], _HOST_START, h))
        k = int(np.searchsorted(self.h_end_sorted, t + _tol(t), "right")) - 1
        if k >= 0:
            r = int(self.h_by_end[k])
            best = max(best, (self.he[r], _HOST_END, r))
        if best[1] < 0:
            self.add("idle", 0.0, t, dev=d)
            return -1, -1, 0.0
        self.add("idle", best[0], t, dev=d)
        return best[1], best[2], best[0]

    def _host_end(self, r: int, cursor: float) -> tuple[int, int, float]:
        hs, he = self.hs[r], min(self.he[r], cursor)
        kind = self.api[r]
        part = _HOST_PART.get(kind, "host")
        tail = self.h_dur[r]
        if kind != NOP and he - tail > hs + _tol(he):  # it blocked: until a device row ended
            q = self._waited(r, he - tail)
            if q >= 0:
                self.add(part, he - tail, he, host=r)
                return _DEV, q, self.de[q]
        self.add(part, hs, he, host=r)
        return _HOST_START, r, hs

    def _waited(self, r: int, t: float) -> int:
        tol = _tol(t)
        rows: list[int] = []
        if self.w_off is not None and self.w_rows is not None:
            rows = self.w_rows[self.w_off[r] : self.w_off[r + 1]]
        rows = rows + list(self.h_dev[r])
        for q in rows:
            if self.live[q] and abs(self.de[q] - t) <= tol:
                return q
        return self._ended_at(t, -1)

    def _host_start(self, r: int, cursor: float) -> tuple[int, int, float]:
        p = self.prev_thread[r]
        before = self.he[p] if p >= 0 else 0.0
        self.add("host", min(before, cursor), cursor, dev=GAP, host=r)
        if p < 0:
            return -1, -1, 0.0
        return _HOST_END, p, min(before, cursor)


def _device_part(kind: int, klass: int) -> str:
    if kind == Kind.COMM or klass == Klass.COMM:
        return "communication"
    if kind in (Kind.MEMCPY, Kind.MEMSET):
        return "copy"
    return "kernel"


def _prev_on_stream(dag: ReplayDag, ds: np.ndarray, de: np.ndarray) -> np.ndarray:
    """Per device row: the live row before it on its stream in the replay (-1 none)."""
    n = len(ds)
    out = np.full(n, -1, np.int64)
    live = np.flatnonzero(np.isfinite(ds))
    if not len(live):
        return out
    order = live[np.lexsort((de[live], ds[live], dag.d_stream[live]))]
    same = dag.d_stream[order[1:]] == dag.d_stream[order[:-1]]
    out[order[1:][same]] = order[:-1][same]
    return out


def _prev_on_thread(thread: np.ndarray) -> np.ndarray:
    """Per host row: the row before it on its thread (-1 none)."""
    n = len(thread)
    out = np.full(n, -1, np.int64)
    if n < 2:
        return out
    order = np.lexsort((np.arange(n), thread))
    same = thread[order[1:]] == thread[order[:-1]]
    out[order[1:][same]] = order[:-1][same]
    return out


def kernel_breakdown(
    cp: CriticalPath, dag: ReplayDag, lo: float = -np.inf, hi: float = np.inf
) -> tuple[dict[str, float], dict[str, float]]:
    """ns of the path's kernel part by kernel class and by decoded regime (UNKNOWN: none)."""
    k = (cp.part == _PART_ID["kernel"]) & (cp.dev >= 0)
    w = np.clip(cp.end[k], lo, hi) - np.clip(cp.start[k], lo, hi)
    rows = cp.dev[k]
    klass = np.bincount(dag.d_klass[rows], weights=w, minlength=len(Klass))
    reg = dag.d_regime[rows].astype(np.int64)
    reg[reg >= N_REGIMES] = N_REGIMES
    regime = np.bincount(reg, weights=w, minlength=N_REGIMES + 1)
    by_class = {Klass(i).name: float(v) for i, v in enumerate(klass) if v > 0}
    by_regime = {
        (Regime(i).name if i < N_REGIMES else "UNKNOWN"): float(v)
        for i, v in enumerate(regime)
        if v > 0
    }
    return by_class, by_regime


def share_text(x: float) -> str:
    """A share as the headline prints it: whole per cent, one decimal under 1 %."""
    return f"{x:.0%}" if x >= 0.01 or x == 0 else f"{x:.1%}"


def headline(parts_ns: dict[str, float], total: float) -> str:
    """'bound by exposed communication: 67% of the critical path; device gaps 16%; …'."""
    if total <= 0:
        return "no critical path: nothing was replayed"
    groups = {g: sum(parts_ns.get(p, 0.0) for p in ps) for g, ps in GROUPS.items()}
    ranked = sorted(((v, g) for g, v in groups.items() if v > 0), reverse=True)
    if not ranked:
        return "no critical path: nothing was replayed"
    (v0, g0), rest = ranked[0], ranked[1:4]
    first = f"bound by {g0}: {share_text(v0 / total)} of the critical path"
    if g0 == "exposed communication":
        held = parts_ns.get("comm_wait", 0.0) + parts_ns.get("peer_wait", 0.0)
        if held > 0:
            first += (
                f" ({share_text(parts_ns.get('communication', 0.0) / total)} in collective kernels, "
                f"{share_text(held / total)} held back before them)"
            )
    return "; ".join([first, *(f"{g} {share_text(v / total)}" for v, g in rest)])
