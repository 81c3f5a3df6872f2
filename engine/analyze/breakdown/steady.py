"""The window of a long trace the levers are replayed on: its steady state.

Every lever's estimate is a replay of the trace's device rows and host calls with the lever's
transform applied — about thirty replays (a point and the corners of its priors' ranges per
lever). On a trace of a million device rows that was most of `analyze`'s time (9.8 s of 13.8 s
for 2 M events), although a training or inference loop repeats the same step: a lever's gain is
a share of the step, and a few steady-state steps show it.

Above ``REPLAY_ROWS`` timed device rows the replay runs on a window: consecutive ProfilerSteps
around the middle one, skipping the first (warm-up: allocation, autotuning, compilation), as
many as fit in ``REPLAY_ROWS``; without steps (or with one step bigger than that), the middle
``REPLAY_ROWS`` rows in time. The analysis says which window (a note), and every gain is that
window's share of its own replayed span.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from engine.trace.segments import Kind
from engine.trace.trace import HostEvents, Trace

#: the most timed device rows replayed (above it, a steady-state window)
REPLAY_ROWS = 20_000
_BLOCK = 1 << 18  # host rows per np.isin in _first_call
_TIMED = np.array((Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM), np.uint8)


def steady_window(trace: Trace, regimes: np.ndarray) -> tuple[Trace, np.ndarray, str | None]:
    """(the trace to replay, its rows' regimes, the note saying which window — None when the
    whole trace is replayed)."""
    got = _window(trace)
    if got is None:
        return trace, regimes, None
    t1, h0, sel, what, kept, n = got
    host = trace.host
    hsel = (host.api_start_ns >= h0) & (host.api_start_ns < t1)
    sub = Trace(
        segments=trace.segments.take(sel),
        names=trace.names,
        host=host.take(hsel),
        device_properties=dict(trace.device_properties),
        source=trace.source,
        simulated=trace.simulated,
        top_ops=trace.top_ops,  # (the host part of the critical path by operator reads them)
    )
    note = (
        f"levers replayed on {what}: {kept:,} of {n:,} device rows — each gain is that "
        "window's share of its replayed span (a whole-trace replay of every lever would take "
        "minutes; the steps repeat)"
    )
    return sub, regimes[sel], note


def exact_at(trace: Trace) -> list[int]:
    """The times the replay window selects host calls from and to (by their start): none when
    the whole trace is replayed. An importer that keeps a run of idle calls as one row keeps
    them exact there (engine.trace.idle_calls: a run is then taken whole or not at all)."""
    got = _window(trace)
    return [] if got is None else [got[1], got[0]]


def _window(trace: Trace) -> tuple[int, int, np.ndarray, str, int, int] | None:
    """(t1, h0, the window's device rows, what it is, its timed rows, all timed rows): device
    rows starting in [t0, t1), host calls starting in [h0, t1) (h0 <= t0); None: the whole
    trace."""
    seg = trace.segments
    timed = np.isin(seg.kind, _TIMED)
    n = int(timed.sum())
    if n <= REPLAY_ROWS:
        return None
    starts = np.sort(seg.start_ns[timed])
    steps = sorted(trace.device_properties.get("profiler_steps") or [])
    window = _steps_window(steps, starts) if len(steps) >= 3 else None
    if window is not None:
        t0, t1, a, b = window
        ids = trace.device_properties.get("profiler_step_ids") or []
        # by their ids only when the ids rise with time (a trace joined from several
        # profiles, or written by a generator, repeats them: "#1010–#1009")
        named = len(ids) == len(steps) and min(ids) >= 0
        named = named and all(x < y for x, y in pairwise(ids))
        if named:
            what = f"ProfilerSteps #{ids[a]}–#{ids[b]} of {len(steps)} (the first is warm-up)"
        else:  # by their place in time, counted from 1
            what = f"ProfilerSteps {a + 1}–{b + 1} in time of {len(steps)} (the first is warm-up)"
    else:
        mid = n // 2
        t0 = int(starts[max(0, mid - REPLAY_ROWS // 2)])
        t1 = int(starts[min(n - 1, mid + REPLAY_ROWS // 2)])
        what = "the middle of the trace in time"
    del starts
    sel = (seg.start_ns >= t0) & (seg.start_ns < t1)
    # the calls that launched the window's rows start before them: keep those too
    h0 = min(t0, _first_call(trace.host, seg.correlation[sel & (seg.correlation >= 0)], t0))
    return t1, h0, sel, what, int((sel & timed).sum()), n


def _first_call(host: HostEvents, ids: np.ndarray, none: int) -> int:
    """The earliest start of the host calls whose correlation is in ``ids`` (``none`` when no
    call is). Block by block: one search over all 2.3 M host rows of a 10 M-event trace made
    index arrays of them all at once (np.isin's sorted copies were ~50 MiB at the analysis's
    peak)."""
    ids = np.sort(ids)  # (searched only: duplicates do no harm; np.unique hashes, 10× slower)
    if not len(ids):
        return none
    first = none
    found = False
    for a in range(0, len(host), _BLOCK):
        # a binary search of the window's sorted ids per row: np.isin sorted the block with
        # them each time (33 ms of a 2 M-event analysis; this: a few)
        c = host.correlation[a : a + _BLOCK]
        hit = ids[np.minimum(np.searchsorted(ids, c), len(ids) - 1)] == c
        if hit.any():
            t = int(host.api_start_ns[a : a + _BLOCK][hit].min())
            first = t if not found else min(first, t)
            found = True
    return first


def _steps_window(
    steps: list[tuple[int, int]], starts: np.ndarray
) -> tuple[int, int, int, int] | None:
    """(t0, t1, first step, last step) of consecutive steps around the middle one (never the
    first), at most REPLAY_ROWS rows; None when even one step is bigger."""
    rows = [
        int(np.searchsorted(starts, b, "left") - np.searchsorted(starts, a, "left"))
        for a, b in steps
    ]
    m = 1 + (len(steps) - 1) // 2
    if rows[m] > REPLAY_ROWS:
        return None
    a = b = m
    total = rows[m]
    while True:
        grew = False
        if b + 1 < len(steps) and total + rows[b + 1] <= REPLAY_ROWS:
            b += 1
            total += rows[b]
            grew = True
        if a - 1 >= 1 and total + rows[a - 1] <= REPLAY_ROWS:
            a -= 1
            total += rows[a]
            grew = True
        if not grew:
            break
    return steps[a][0], steps[b][1], a, b


__all__ = ["REPLAY_ROWS", "exact_at", "steady_window"]
