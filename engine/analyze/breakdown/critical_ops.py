"""The host's own time on the critical path, by the operator it was spent in (issue 46: "host/
framework time, by operator where the trace has them").

The critical path's part "host" (engine.schedule.critical) is the host's time between two
runtime calls on one thread (an interval with ``dev == GAP`` before host row r) and the own time
of host rows that are no runtime call of a kind the path names apart (annotated host work, runs
of calls that only take host time, kept as one row). Each such interval is put back on the
trace's clock by its host row's observed start, which the no-lever replay keeps: the time
before row r ends where r began, ``[h_start_obs[r] - length, h_start_obs[r])``; a row's own
time is its observed call ``[h_start_obs[r], + h_dur_obs[r])``, its length spread over it. The
part of it inside a top-level CPU operator on the same thread (Trace.top_ops: disjoint per
thread) goes to that operator, the rest to ``OUTSIDE`` — Python or framework code between
operators. The attribution adds up to the path's host part exactly (to float rounding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.schedule.critical import GAP, PARTS
from engine.schedule.critical import CriticalPath as Path
from engine.schedule.dag import ReplayDag
from engine.trace.trace import Trace

#: the name of the host path time no top-level operator covers
OUTSIDE = "outside any operator (Python / framework between ops)"
#: of it, the time no other launching thread was inside an operator either (``outside_while``)
OUTSIDE_ALL = "no thread inside an operator (Python / framework)"
_HOST = list(PARTS).index("host")


def host_intervals(
    cp: Path, dag: ReplayDag
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The path's host part on the trace's clock: (thread, start, end — ns relative to
    ``dag.t0_ns``, float64 —, the path ns each carries, its path interval's index). An interval
    whose row has no observed start (a row a transform inserted) has start == end: no operator
    takes it."""
    length = cp.length()
    i = np.flatnonzero((cp.part == _HOST) & (length > 0) & (cp.host >= 0))
    r = cp.host[i]
    ns = length[i]
    if dag.h_thread is None:
        thread = np.zeros(len(r), np.int64)
    else:
        thread = np.asarray(dag.h_thread, np.int64)[r]
    if dag.h_start_obs is None:
        zero = np.zeros(len(r))
        return thread, zero, zero.copy(), ns, i
    # relative to the window's start before float64: 1.7e18 ns has a 256 ns ulp
    obs = np.asarray(dag.h_start_obs, np.int64)[r]
    known = obs >= 0
    at = np.where(known, obs - np.int64(round(dag.t0_ns)), 0).astype(np.float64)
    gap = cp.dev[i] == GAP
    own = np.zeros(len(r)) if dag.h_dur_obs is None else np.asarray(dag.h_dur_obs, np.float64)[r]
    start = np.where(gap, at - ns, at)
    end = np.where(gap, at, at + np.maximum(own, 0.0))
    return thread, start, np.where(known, end, start), ns, i


@dataclass(frozen=True)
class _Ops:
    """Operators as float64 ns relative to the window's start, sorted by thread and start,
    disjoint per thread; ``key``: each one's row in Trace.top_ops (one call)."""

    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    name: np.ndarray
    key: np.ndarray

    @classmethod
    def of(cls, trace: Trace, base: np.int64) -> _Ops:
        t = trace.top_ops
        thread = np.asarray(t.thread, np.int64)
        by = np.lexsort((t.start_ns, thread))  # (as the importer keeps them; made sure)
        return cls(thread[by], (t.start_ns[by] - base).astype(np.float64),
                   (t.end_ns[by] - base).astype(np.float64), np.asarray(t.name, np.int64)[by],
                   by.astype(np.int64))  # fmt: skip

    def others(self, t: int) -> _Ops:
        """The operators of every thread but ``t`` as one timeline (thread 0), disjoint: where
        two overlap, the one that began first keeps the time."""
        m = self.thread != t
        by = np.argsort(self.start[m], kind="stable")
        s, e = self.start[m][by], self.end[m][by]
        before = np.maximum.accumulate(e)
        s = np.maximum(s, np.concatenate([[-np.inf], before[:-1]]))
        live = e > s
        return _Ops(np.zeros(int(live.sum()), np.int64), s[live], e[live],
                    self.name[m][by][live], self.key[m][by][live])  # fmt: skip

    def near(self, thread: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per query [a, b) on ``thread``: (the first operator of its thread that may overlap
        it, how many may) — those ending after a and starting before b."""
        lo = np.zeros(len(a), np.int64)
        hi = np.zeros(len(a), np.int64)
        for t in np.unique(thread).tolist():  # (a few threads: each one vectorised search)
            w = np.flatnonzero(thread == t)
            t0, t1 = (int(x) for x in np.searchsorted(self.thread, [t, t + 1]))
            lo[w] = t0 + np.searchsorted(self.end[t0:t1], a[w], "right")
            hi[w] = t0 + np.searchsorted(self.start[t0:t1], b[w], "left")
        return lo, np.maximum(hi - lo, 0)

    def overlaps(
        self, a: np.ndarray, b: np.ndarray, scale: np.ndarray, lo: np.ndarray, count: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every (query, operator) pair that ``near`` found: (the query, the operator, the
        path ns of their overlap: trace ns × the query's ``scale``)."""
        row = np.repeat(np.arange(len(a)), count)
        k = np.arange(len(row)) - np.repeat(np.cumsum(count) - count, count) + lo[row]
        over = np.minimum(b[row], self.end[k]) - np.maximum(a[row], self.start[k])
        return row, k, np.clip(over, 0.0, None) * scale[row]


def _ranked(
    trace: Trace, name: np.ndarray, key: np.ndarray, ns: np.ndarray, n: int | None
) -> list[tuple[str, float, int]]:
    """(name, ns, distinct calls) by operator name, largest first, at most ``n``."""
    live = ns > 0
    names, inv = np.unique(name[live], return_inverse=True)
    per_name = np.bincount(inv, weights=ns[live], minlength=len(names))
    _, first = np.unique(key[live], return_index=True)  # each call of an operator once
    calls = np.bincount(inv[first], minlength=len(names))
    ranked = sorted(
        ((trace.names[int(m)], float(v), int(c)) for m, v, c in zip(
            names.tolist(), per_name.tolist(), calls.tolist(), strict=True)),
        key=lambda x: (-x[1], x[0]),
    )  # fmt: skip
    return ranked if n is None else ranked[:n]


def _with_rest(
    ranked: list[tuple[str, float, int]], label: str, rest: np.ndarray, of: np.ndarray
) -> list[tuple[str, float, int]]:
    """``ranked`` with ``label``: the ``rest`` ns (per query; its count: the distinct ``of`` of
    the queries with some), placed by its size; left out when there is none."""
    total = float(rest.sum())
    if total > 0:
        ranked.append((label, total, len(np.unique(of[rest > 0]))))
        ranked.sort(key=lambda x: -x[1])
    return ranked


@dataclass(frozen=True)
class _Host:
    """The path's host intervals on the trace's clock (``host_intervals``) beside the
    operators: ``scale`` is the path ns per trace ns of each (0 where it has no width)."""

    ops: _Ops
    thread: np.ndarray
    a: np.ndarray
    b: np.ndarray
    ns: np.ndarray
    scale: np.ndarray
    index: np.ndarray

    @classmethod
    def of(cls, cp: Path, dag: ReplayDag, trace: Trace) -> _Host | None:
        """None when there is nothing to attribute: no operators, or no host part."""
        if not len(trace.top_ops):
            return None
        thread, a, b, ns, i = host_intervals(cp, dag)
        if not len(ns):
            return None
        width = b - a
        scale = np.where(width > 0, ns / np.where(width > 0, width, 1.0), 0.0)
        return cls(_Ops.of(trace, np.int64(round(dag.t0_ns))), thread, a, b, ns, scale, i)

    def inside(self) -> tuple[np.ndarray, ...]:
        """(lo, count: ``_Ops.near``; the pairs' operator and path ns; each interval's ns
        outside its thread's operators). An interval's operators are disjoint, so they take at
        most its ns (an excess is float rounding, taken off them)."""
        lo, count = self.ops.near(self.thread, self.a, self.b)
        row, k, took = self.ops.overlaps(self.a, self.b, self.scale, lo, count)
        inside = np.bincount(row, weights=took, minlength=len(self.ns))
        over = inside > self.ns
        if over.any():
            took = took * np.where(over, self.ns / np.where(over, inside, 1.0), 1.0)[row]
            inside = np.minimum(inside, self.ns)
        return lo, count, k, took, self.ns - inside


def host_by_operator(
    cp: Path, dag: ReplayDag, trace: Trace, n: int | None = 10
) -> list[tuple[str, float, int]]:
    """The path's host part by the top-level operator it was spent in: (operator name, path ns,
    calls of it with path time), largest first; at most ``n`` operators (None: all), and
    ``OUTSIDE`` (its count: the path intervals with time outside every operator) where its size
    puts it — always listed when it has time. The ns add up to the host part. [] where the
    trace records no operators (Trace.top_ops empty: not a Kineto trace) or the path has no
    host part."""
    h = _Host.of(cp, dag, trace)
    if h is None:
        return []
    _, _, k, took, outside = h.inside()
    ranked = _ranked(trace, h.ops.name[k], h.ops.key[k], took, n)
    return _with_rest(ranked, OUTSIDE, outside, h.index)


def outside_while(
    cp: Path, dag: ReplayDag, trace: Trace, n: int | None = 10
) -> list[tuple[str, float, int]]:
    """``host_by_operator``'s ``OUTSIDE`` time by what the *other* launching threads ran then:
    (operator name, path ns, its calls), largest first, at most ``n`` (None: all), and
    ``OUTSIDE_ALL`` (no thread inside an operator: Python or framework code indeed). The replay
    keeps one clock per thread, so a thread that waits for another (the autograd thread for the
    forward pass, a main thread for a worker) puts the wait on the path as host time between
    its calls: it is the other thread's operator that the path waits for. Where several other
    threads run operators at once, the one that began first takes the time. Adds up to
    ``OUTSIDE``'s ns; [] where ``host_by_operator`` is []."""
    h = _Host.of(cp, dag, trace)
    if h is None:
        return []
    ops = h.ops
    lo, count, _, _, outside = h.inside()
    # the pieces of each interval between its thread's operators: [a, s0), [e0, s1) … [e, b)
    m = count + 1
    q = np.repeat(np.arange(len(h.ns)), m)
    j = np.arange(len(q)) - np.repeat(np.cumsum(m) - m, m)
    last = len(ops.start) - 1
    pa = np.where(j == 0, h.a[q], ops.end[np.clip(lo[q] + j - 1, 0, last)])
    pb = np.where(j == count[q], h.b[q], ops.start[np.clip(lo[q] + j, 0, last)])
    pa, pb = np.maximum(pa, h.a[q]), np.minimum(pb, h.b[q])
    live = pb > pa
    q, pa, pb = q[live], pa[live], pb[live]
    # an interval of no width on the trace's clock (no observed start) is outside all of them
    rest = np.concatenate([h.scale[q] * (pb - pa), np.where(h.scale > 0, 0.0, outside)])
    of = np.concatenate([h.index[q], h.index])
    names, keys, took = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
    for t in np.unique(h.thread[q]).tolist():  # (a few threads)
        w = np.flatnonzero(h.thread[q] == t)
        other = ops.others(t)
        p_lo, p_count = other.near(np.zeros(len(w), np.int64), pa[w], pb[w])
        row, k, ns_k = other.overlaps(pa[w], pb[w], h.scale[q[w]], p_lo, p_count)
        rest[w] -= np.bincount(row, weights=ns_k, minlength=len(w))
        names.append(other.name[k])
        keys.append(other.key[k])
        took.append(ns_k)
    ranked = _ranked(trace, np.concatenate(names), np.concatenate(keys), np.concatenate(took), n)
    return _with_rest(ranked, OUTSIDE_ALL, np.maximum(rest, 0.0), of)
