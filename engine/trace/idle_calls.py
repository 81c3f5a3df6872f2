"""Runs of back-to-back host calls that only take host time, kept as one row each.

Most runtime calls of a real trace launch nothing: cudaGetDevice, event queries, attribute
lookups (15k of the 24.7k host rows of the 109k-event A100 trace; 1.4 M of 2.3 M in a 10 M-event
one). Every consumer of such a row reads only its interval on the launching threads' timeline:
the replay advances the host clock by its gap and duration, and it breaks a run of launches or a
capture region as a run of them does (engine.schedule.dag.merge_idle_host_rows merged them in
every replay already). Kept one row per call, they were a fifth of a large trace's resident
columns and of the sorts over them.

``merge_idle_calls`` keeps each run of such calls as its first row, ending where the run's last
call ends, when the replay's times are then exactly what they were:

* a row is *idle* when it is an OTHER call (``ApiKind.OTHER``) whose correlation no device row
  carries;
* in start order (stable), an idle row joins the run of the row before it when that row is idle
  and not nested in an earlier call (it ends at or after every call before it ends), the row
  itself starts at or after every call before it ended, and no time in ``exact_at`` lies between
  their starts (``t <= start``: a window selecting rows by start from ``t`` on takes a run whole
  or not at all).

Under those conditions each joined call's gap is what separated it from the call before, so the
run's one row lasts exactly the durations and gaps it replaces (engine.schedule.dag.build_dag:
gap = start − the running maximum of ends), and the calls after it see the same running
maximum. Tests replay both and compare every time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.jit import jit
from engine.trace.order import stable_order
from engine.trace.trace import ApiKind, HostEvents

_BLOCK = 1 << 18  # host rows per search of the device correlations


def idle_rows(host: HostEvents, dev_correlation: np.ndarray) -> np.ndarray:
    """Per host row: an OTHER call whose correlation no device row carries (bool)."""
    idle = host.api == ApiKind.OTHER
    if not len(dev_correlation) or not idle.any():
        return idle
    corr = host.correlation
    lo, hi = int(dev_correlation.min()), int(dev_correlation.max())
    if hi - lo < 8 * (len(corr) + len(dev_correlation)):  # dense ids (as runtimes number
        # them): a table of the device rows' ids, a byte each (a search: 30 ms of 2 M events)
        carried = np.zeros(hi - lo + 1, np.bool_)
        for a in range(0, len(dev_correlation), _BLOCK):
            carried[dev_correlation[a : a + _BLOCK] - lo] = True
        for a in range(0, len(corr), _BLOCK):  # a block at a time: no whole-length temporaries
            c = corr[a : a + _BLOCK] - lo
            inside = (c >= 0) & (c <= hi - lo)
            idle[a : a + _BLOCK] &= ~(inside & carried[np.where(inside, c, 0)])
        return idle
    ids = np.sort(dev_correlation)  # (np.unique: 22 ms of 170k ids; duplicates do no harm)
    last = len(ids) - 1
    for a in range(0, len(corr), _BLOCK):
        c = corr[a : a + _BLOCK]
        idle[a : a + _BLOCK] &= ids[np.minimum(np.searchsorted(ids, c), last)] != c
    return idle


def merge_idle_calls(
    host: HostEvents,
    dev_correlation: np.ndarray,
    exact_at: Sequence[int] = (),
    compiled: bool = True,
) -> np.ndarray | None:
    """Keep each run of idle calls (see the module) as its first row, in place: the row ends
    where the run's last call ends, the other rows are dropped. Returns the mask of the rows
    kept (for columns kept beside the host rows), or None when no run has two calls.
    ``compiled``: the run-finding pass as a kernel (no sorted copies of the columns); else numpy
    (a first run's small file, with nothing compiled)."""
    n = len(host)
    if n < 2:
        return None
    idle = idle_rows(host, dev_correlation)
    if not idle.any():
        return None
    bounds = np.unique(np.asarray(exact_at, np.int64))
    keep = np.ones(n, np.bool_)
    start = host.api_start_ns
    thread = np.ascontiguousarray(host.thread, np.int32)
    if not compiled:
        order = np.argsort(start, kind="stable")
        _runs_numpy(order, start, host.api_end_ns, idle, bounds, keep, thread)
    else:
        order = stable_order(start)  # (int32 under 2**31 rows, as _runs is compiled for)
        _runs(order, start, host.api_end_ns, idle, bounds, keep, thread)
    del order, idle
    if keep.all():
        return None
    host.keep_only(keep)
    return keep


@jit
def _runs(
    order: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    idle: np.ndarray,
    bounds: np.ndarray,
    keep: np.ndarray,
    thread: np.ndarray,
) -> None:
    """Visit the rows in ``order`` (by start); a row that joins the run before it gets
    keep = False, and the run's first row's end becomes the joined row's end (``end`` in place:
    each row's own end is read once, when it is visited). A row joins only a run of its own
    thread (the replay keeps a clock per thread)."""
    m = start[order[0]]  # every call before this one has ended by m (running maximum of ends)
    b = 0  # how many of ``bounds`` lie at or before this row's start
    head = order[0]
    prev_open = False  # the row before is idle and ends at or after every call before it
    prev_b = 0
    for i in range(order.shape[0]):
        r = order[i]
        s = start[r]
        e = end[r]
        while b < bounds.shape[0] and bounds[b] <= s:
            b += 1
        if prev_open and idle[r] and s >= m and b == prev_b and thread[r] == thread[head]:
            keep[r] = False
            end[head] = e  # e >= s >= m: the run's end so far
        else:
            head = r
        prev_open = idle[r] and e >= m
        prev_b = b
        if e > m:
            m = e


def _runs_numpy(
    order: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    idle: np.ndarray,
    bounds: np.ndarray,
    keep: np.ndarray,
    thread: np.ndarray,
) -> None:
    """``_runs`` in numpy (sorted copies of the columns: for small traces)."""
    s, e, idl, th = start[order], end[order], idle[order], thread[order]
    m = np.empty_like(e)  # the running maximum of ends before each row
    m[0] = s[0]
    np.maximum.accumulate(e[:-1], out=m[1:])  # (s[0] <= e[0]: the first is the same)
    side = np.searchsorted(bounds, s, "right")
    is_open = idl & (e >= m)
    joins = np.zeros(len(s), np.bool_)
    joins[1:] = (
        is_open[:-1] & idl[1:] & (s[1:] >= m[1:]) & (side[1:] == side[:-1]) & (th[1:] == th[:-1])
    )
    heads = np.flatnonzero(~joins)
    last = np.append(heads[1:] - 1, len(s) - 1)  # each run's last row
    end[order[heads]] = e[last]
    keep[order[joins]] = False
