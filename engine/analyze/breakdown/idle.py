"""Idle time on one stream, split as Holistic Trace Analysis splits it (host wait / kernel wait /
other), over the union of the stream's busy time.

HTA takes the gap before each row as its start less the previous row's end. Rows of one stream
can overlap — an MTIA stream's DMA rows run beside its kernels, a copy engine's row beside a
kernel queued on the same stream id — and then that difference is negative: summed, the idle
split went below zero ("kernel wait −17.38 ms"). Here the gap before a row is measured from the
latest end of every earlier row of the stream (the running end), and a row that starts before
it is an overlap, not a negative gap: idle is the stream's span less the union of its rows,
never negative, and the overlap is counted (rows, time) so that it can be said. Only the
``--counting hta`` mode, whose point is to count as HTA does, keeps HTA's gaps (negative ones
included), and says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import numpy as np

from engine.analyze.breakdown.model import Idle

#: HTA's default ``consecutive_kernel_delay`` (30 µs): shorter gaps between back-to-back GPU
#: events on a stream count as launch overhead ("kernel wait"), as in HTA's idle breakdown.
CONSECUTIVE_KERNEL_DELAY_NS = 30_000
#: a row's launch start where it has no linked host row (engine.analyze.breakdown.launches)
_NO_LAUNCH = np.iinfo(np.int64).min


def running_end(end: np.ndarray) -> np.ndarray:
    """The latest end of each row and every row before it (rows of one stream, by start)."""
    return np.maximum.accumulate(end.astype(np.int64, copy=False))


def grouped_running_end(key: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``running_end`` of each group of rows (sorted by ``key``, then by start), restarting at
    every new key: several streams' rows at once."""
    out = end.astype(np.int64, copy=True)
    cuts = [0, *(np.flatnonzero(key[1:] != key[:-1]) + 1).tolist(), len(key)]
    for a, b in itertools.pairwise(cuts):
        np.maximum.accumulate(out[a:b], out=out[a:b])
    return out


def stream_idle(start: np.ndarray, end: np.ndarray, launch: np.ndarray, hta: bool = False) -> Idle:
    """HTA's idle split for one stream's GPU rows (sorted by start), over the union of their
    busy time (module docstring). ``launch``: each row's launch-call start (``_NO_LAUNCH`` where
    not linked): a gap whose next row was launched after the previous rows ended waited for
    the host. ``hta``: HTA's own gaps — from the previous row's end, negative where rows
    overlap — as ``--counting hta`` compares with it (the overlap is counted all the same)."""
    if len(start) < 2:
        return Idle(total_ns=0, host_wait_ns=0, kernel_wait_ns=0, other_ns=0)
    latest = running_end(end)[:-1]
    over = start[1:] < latest  # the row began while an earlier row still ran: covered
    covered = np.minimum(end[1:], latest) - start[1:]  # its time under the earlier rows
    prev_end = end[:-1] if hta else latest
    gap = start[1:] - prev_end if hta else np.maximum(start[1:] - latest, 0)
    lt = launch[1:]
    host = (lt != _NO_LAUNCH) & (lt > prev_end)
    kern = ~host & (gap < CONSECUTIVE_KERNEL_DELAY_NS)
    other = ~host & ~kern
    return Idle(  # (integer sums over masks: no selected copies)
        total_ns=int(gap.sum()),
        host_wait_ns=int(gap.sum(where=host)),
        kernel_wait_ns=int(gap.sum(where=kern)),
        other_ns=int(gap.sum(where=other)),
        overlapping_rows=int(over.sum()),
        overlapped_ns=int(covered.sum(where=over)),
    )


def overlap_note(streams: Iterable[tuple[int, int, Idle]], hta: bool = False) -> str | None:
    """One line on the rows that overlap earlier rows of their stream ((device, stream, idle)
    of each stream; ``hta``: the split is HTA's, see ``stream_idle``), or None when none
    does."""
    hit = [(d, s, i) for d, s, i in streams if i.overlapping_rows]
    if not hit:
        return None
    rows = sum(i.overlapping_rows for _, _, i in hit)
    ns = sum(i.overlapped_ns for _, _, i in hit)
    worst = max(hit, key=lambda x: x[2].overlapped_ns)
    return (
        f"{rows:,} rows on {len(hit)} stream(s) began before an earlier row of their stream had "
        f"ended ({ns / 1e6:,.2f} ms overlapped; most on device {worst[0]} stream {worst[1]}): "
        + (
            "the idle split counts the gap before each as HTA does, from the previous row's "
            "end (negative where they overlap); the default counting takes the union"
            if hta
            else "a stream's busy time is the union of its rows and its idle only the gaps no "
            "row covers, so idle is never negative"
        )
    )


__all__ = [
    "CONSECUTIVE_KERNEL_DELAY_NS",
    "grouped_running_end",
    "overlap_note",
    "running_end",
    "stream_idle",
]
