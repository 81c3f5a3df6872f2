"""The top-level CPU operators of a Kineto trace: each thread's framework ops (``cpu_op``) and
user annotations that no other on the same thread contains, ProfilerStep# ranges left out (they
are steps, not work). They say which operator the host's own time between runtime calls
belongs to (engine.analyze.breakdown.critical_ops); the ops nested inside them are not kept.

The reader keeps them block by block: an op contained in another of its block is contained in
one of the trace, so each block drops its nested ops at once (``nested``) and only the outer
ones are held until the join (``join``), which drops the ops nested across blocks, the ops of
threads that launch no GPU work, and makes each thread's intervals disjoint.
"""

from __future__ import annotations

import itertools

import numpy as np

from engine.trace.segments import NameTable
from engine.trace.trace import TopOps

#: names of the annotations that are steps (the reader keeps them as ``profiler_steps``)
STEP_PREFIX = "ProfilerStep#"


def name_id(ids: dict[int, int], table: NameTable, h: int, name: str) -> int:
    """The id in ``table`` (the reader's table of op names, apart from the kernels') of the op
    whose name hashes to ``h``; -1 for a ProfilerStep# range. Decided once per distinct name."""
    got = ids.get(h)
    if got is None:
        got = ids[h] = -1 if name.startswith(STEP_PREFIX) else table.intern(name)
    return got


def _running_max_before(group: np.ndarray, value: np.ndarray) -> np.ndarray:
    """For rows sorted by ``group``: the largest ``value`` of the rows before each in its group
    (the group's first row: one less than its own, so a test ``value > that`` holds for it).
    Group by group where there are a few (threads), else one running maximum over the column
    with each group lifted above the ones before it (values relative to the smallest, group g
    offset by g × (range + 1)), where that fits in int64."""
    n = len(value)
    out = np.empty(n, np.int64)
    if not n:
        return out
    at = np.flatnonzero(group[1:] != group[:-1]) + 1
    bounds = [0, *at.tolist(), n]
    lo = int(value.min()) if len(bounds) > 66 else 0
    span = int(value.max()) - lo + 1 if len(bounds) > 66 else 2**62
    if (len(bounds) - 1) * span < 2**62:
        g = np.repeat(np.arange(len(bounds) - 1, dtype=np.int64) * span, np.diff(bounds))
        run = np.maximum.accumulate((value - lo) + g)
        out[1:] = run[:-1] - g[1:] + lo
    else:
        for a, b in itertools.pairwise(bounds):
            out[a + 1 : b] = np.maximum.accumulate(value[a : b - 1])
    first = np.append(0, at)
    out[first] = value[first] - 1
    return out


def _outer(
    tid: np.ndarray, start: np.ndarray, end: np.ndarray, order: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(an order of the rows by thread, start and longest first; in it, whether each op is
    contained in no op before it in a run of one thread). So ordered, an op is contained in
    another of its run exactly when an op before it there ends no earlier; of equal intervals
    the first is kept. ``order``: the rows grouped by thread (None: as they are — each thread
    a run only where the rows are so, else an op is judged within its run alone). A profiler
    writes each thread's ops in order of start: only the ops that start together are then
    sorted again (longest first); else the rows are sorted by all three."""
    if order is None:
        order = np.arange(len(tid))
        t, s, e = tid, start, end.copy()
    else:
        t, s, e = tid[order], start[order], end[order]
    if not ((s[1:] >= s[:-1]) | (t[1:] != t[:-1])).all():
        order = np.lexsort((-end, start, tid))
        t, s, e = tid[order], start[order], end[order]
    else:
        tie = np.zeros(len(s), bool)  # row i starts with row i + 1 on its thread
        tie[:-1] = (s[1:] == s[:-1]) & (t[1:] == t[:-1])
        if tie.any():  # the runs of one (thread, start), each longest first (a few rows)
            in_run = tie.copy()
            in_run[1:] |= tie[:-1]
            p = np.flatnonzero(in_run)
            run = np.cumsum(~tie[p - 1])  # (p - 1 = -1: the last row, which ties nothing)
            by = np.lexsort((-e[p], run))  # (a permutation within each run)
            order[p] = order[p][by]
            e[p] = e[p][by]
    return order, e > _running_max_before(t, e)


def nested(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The rows (indices) of the ops contained in no other of the same block on their thread:
    the only ones that may be top-level in the trace. A block whose threads' ops are in runs
    of one thread, each in order of start (as the profiler writes them), is swept as it is:
    an op contained in another of its run is dropped, the rest are for ``join`` to judge."""
    order, outer = _outer(tid, start, end)
    return order[outer]


def tid_of_thread(tid: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """The raw thread id of each dense thread number (HostEvents.threads_of ``thread`` of the
    host rows' ``tid``), without sorting the rows: every row of a number has the same id."""
    k = int(thread.max()) + 1 if len(thread) else 0
    out = np.zeros(k, np.int64)
    out[thread] = tid
    return out


def join(
    parts: list[dict[str, np.ndarray]],
    tids: np.ndarray,
    op_names: NameTable,
    names: NameTable,
) -> TopOps:
    """The trace's top-level ops from the reader's blocks (each block's outer ops: ``nested``;
    the blocks are emptied): those of the threads that launch GPU work (``tids``: the raw id of
    each host thread number, ``tid_of_thread``), on those numbers; per thread in order of start,
    an op that overlaps the one before it without being inside it (clocks that disagree by a
    µs; async ops) starts where that one ends, so a thread's intervals are disjoint. Their names
    are interned in ``names`` (the trace's table, after every name already in it: no id that
    the rows hold moves) from ``op_names`` (the reader's table of op names)."""
    if not parts or not len(tids):
        parts.clear()
        return TopOps.empty()
    cols = {k: np.concatenate([p.pop(k) for p in parts]) for k in ("tid", "start", "end", "name")}
    parts.clear()
    by_id = np.argsort(tids, kind="stable")  # (one thread number per raw id)
    ids = tids[by_id]
    tid = cols["tid"].astype(np.int64, copy=False)
    at = np.minimum(np.searchsorted(ids, tid), len(ids) - 1)
    on = ids[at] == tid  # ops of threads with no runtime call launch nothing: not kept
    thread = by_id[at[on]]
    start = cols["start"][on].astype(np.int64, copy=False)
    end = cols["end"][on].astype(np.int64, copy=False)
    name = cols["name"][on]
    del cols, at, on
    order, outer = _outer(thread, start, end, np.argsort(thread, kind="stable"))
    keep = order[outer]
    thread, start, end, name = thread[keep], start[keep], end[keep], name[keep]
    if len(keep):  # the ends rise along a thread: each op starts no earlier than its
        # predecessor's end (where it began inside it, it is clipped there)
        prev = np.empty(len(keep), np.int64)
        prev[1:] = end[:-1]
        same = np.zeros(len(keep), bool)
        same[1:] = thread[1:] == thread[:-1]
        start = np.where(same & (prev > start), prev, start)
    # interned in the order the kept ops first name them (thread, then time): the same
    # however the file fell into blocks, the reader's table of op names being in block order
    used, first = np.unique(name, return_index=True)
    used = used[np.argsort(first)]
    remap = np.zeros(len(op_names), np.int32)
    remap[used] = [names.intern(op_names[int(i)]) for i in used.tolist()]
    return TopOps(start_ns=start, end_ns=end, thread=thread.astype(np.int32), name=remap[name])
