"""Unions of time intervals, as sorted disjoint (starts, ends): what the single-file analysis
(engine.analyze.compute: compute time beside the collectives) and the cross-rank summaries
(engine.analyze.ranks.ranks: compute and communication time, their overlap) both measure with — here,
so the analysis of one file does not import the cross-rank module."""

from __future__ import annotations

import numpy as np

from engine.trace.order import stable_order


def interval_union(
    start: np.ndarray, end: np.ndarray, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals (those of ``rows`` only, if given) as sorted disjoint (starts,
    ends), int64 — numpy, whatever the count. Each must end at or after its start (Segments
    guarantee it): a merged interval's end is the running end at its last row, kept in place
    of the sorted ends (no further whole-length arrays: the analysis's peak)."""
    o = stable_order(start if rows is None else start[rows])  # (int32, for times nearly in order)
    if rows is not None:
        o = rows[o]
    if not len(o):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    s, e = start[o].astype(np.int64, copy=False), end[o].astype(np.int64, copy=False)
    del o
    np.maximum.accumulate(e, out=e)
    # by masks, not index arrays (kernels rarely overlap: nearly every row starts an interval,
    # and the index arrays of the first and last rows were 8 bytes a row each)
    cut = np.empty(len(s), np.bool_)  # the row starts a merged interval
    cut[0] = True
    np.greater(s[1:], e[:-1], out=cut[1:])
    starts = s[cut]
    del s
    cut[:-1] = cut[1:]  # now: the row ends one (the next starts one, or it is the last)
    cut[-1] = True
    return starts, e[cut]


def length(u: tuple[np.ndarray, np.ndarray]) -> int:
    return int((u[1] - u[0]).sum())


def intersection(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """Total length covered by both unions (each sorted and disjoint)."""
    if not len(a[0]) or not len(b[0]):
        return 0
    # at every breakpoint, is each union covering? (disjoint intervals: a count of 0 or 1)
    t = np.sort(np.concatenate([a[0], a[1], b[0], b[1]]))  # np.unique: 10× slower here
    t = t[np.concatenate([[True], t[1:] != t[:-1]])]
    in_a = np.searchsorted(a[0], t, "right") - np.searchsorted(a[1], t, "right")
    in_b = np.searchsorted(b[0], t, "right") - np.searchsorted(b[1], t, "right")
    both = (in_a > 0) & (in_b > 0)
    return int((np.diff(t) * both[:-1]).sum())
