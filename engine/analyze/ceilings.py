"""Each lever's ceiling: the most it could gain, from the observed trace alone (DESIGN §5).

A ceiling is accounting, not a schedule: it adds up what the lever could remove at most and
never replays anything, so a prediction above it is the replay's error, not the lever's
promise. What it counts (every time as observed in the replayed window):

* **host time** a lever takes out of calls — launch calls it drops or captures (a call counts
  up to ``LAUNCH_OUTLIER`` × the median launch: beyond that the thread was waiting, not
  launching), blocking syncs it removes (their whole observed time) — can shorten the span by no
  more than the busiest stream's idle time (the span cannot fall below what that stream ran);
* **device time** a lever takes out of rows — at the most favourable end of its priors' stated
  ranges (precision at the peak ratio, fusion keeping only what the chain must still move, a
  copy's time on the stream it leaves) — shortens the span by at most that.

The ceiling is their sum, as a share of the span the prediction is a share of (the replayed
one; the no-lever replay is within 3 % of the observed span where it is faithful). ``cuda_graphs`` counts only the
launches not already in graphs (graph launches are not captured again), ``sync_removal`` the
syncs it drops, ``copy_overlap`` the time the copies it moves took on their compute streams
(what the stream is freed of).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.analyze.fidelity import busy_ns
from engine.levers.model import Edit
from engine.levers.priors import LAUNCH_OUTLIER
from engine.schedule.dag import NOP, ReplayDag
from engine.trace.trace import ApiKind


@dataclass(frozen=True)
class Observed:
    """What every ceiling reads from the observed window, computed once."""

    span_ns: float
    #: the span minus the busiest stream's busy time: the most host-side changes could save
    host_room_ns: float
    #: the most of one launch call that counts as launching
    clip_ns: float
    #: per device row, observed start (relative to the window) and end
    start: np.ndarray
    end: np.ndarray


def observe(dag: ReplayDag) -> Observed:
    """The window's observed quantities the ceilings share."""
    span = float(dag.observed_ns)
    start = dag.d_start_obs.astype(np.float64) - float(dag.t0_ns)
    end = start + dag.d_dur
    busiest = 0.0
    for st in np.unique(dag.d_stream).tolist():
        m = dag.d_stream == st
        busiest = max(busiest, busy_ns(start[m], end[m], 0.0, span))
    launches = dag.dur_ns[dag.api == ApiKind.LAUNCH]
    clip = LAUNCH_OUTLIER * float(np.median(launches)) if len(launches) else 0.0
    return Observed(span, max(0.0, span - busiest), clip, start, end)


@dataclass(frozen=True)
class Ceiling:
    gain: float  # share of the span (the replayed one where given: the prediction's)
    ns: float
    basis: str


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms" if ns < 1e7 else f"{ns / 1e6:,.1f} ms"


def ceiling(
    lever: str, base: ReplayDag, edits: list[Edit], ob: Observed, per_ns: float = 0.0
) -> Ceiling | None:
    """The ceiling of ``lever`` whose transform gave ``edits`` (at its priors' values and the
    corners of their ranges: the most favourable counts) on ``base``; None when the span is
    empty. ``per_ns``: the span the share is of (the replayed one, which the prediction is a
    share of; default the observed span)."""
    per = per_ns if per_ns > 0 else ob.span_ns
    if ob.span_ns <= 0 or not edits:
        return None
    host = max(_host_removed(lever, base, e.dag, ob) for e in edits)
    dev = max(_device_removed(lever, base, e.dag, ob) for e in edits)
    host_part = min(host, ob.host_room_ns)
    ns = host_part + dev
    parts = []
    if host > 0:
        what = "syncs removed (their observed time, waits included)"
        if lever != "sync_removal":
            what = f"launch/host calls removed (each up to {ob.clip_ns / 1e3:.1f} µs)"
        parts.append(
            f"{_ms(host)} of {what}, of which at most {_ms(ob.host_room_ns)} (the busiest "
            f"stream's idle time) can come off the span"
        )
    if dev > 0:
        what = {
            "copy_overlap": "copy time on the streams the copies leave",
        }.get(lever, "device time taken out of rows at the favourable end of the priors")
        parts.append(f"{_ms(dev)} of {what}")
    if not parts:
        parts.append("nothing this lever removes in the observed window")
    return Ceiling(
        ns / per, ns, f"ceiling {ns / per:+.1%} from the trace alone: " + "; ".join(parts)
    )


def _host_removed(lever: str, base: ReplayDag, edit: ReplayDag, ob: Observed) -> float:
    """Host time the edit took out of calls (observed, clipped as the module says)."""
    if len(edit.api) != len(base.api):  # rows inserted (a side stream's record/wait): net
        return max(0.0, float(_clipped(base, ob).sum()) - float(_clipped(edit, ob).sum()))
    removed = (edit.api == NOP) & (base.api != NOP)
    took = np.where(removed, _clipped(base, ob), np.maximum(0.0, base.dur_ns - edit.dur_ns))
    took = np.where((edit.api != NOP) & (base.api == ApiKind.SYNC), 0.0, took)
    # a blocking call made non-blocking (a pageable copy made async): its observed time, waits
    # included
    blocking = (ApiKind.SYNC, ApiKind.MEMCPY_SYNC)
    unblocked = np.isin(base.api, blocking) & ~np.isin(edit.api, blocking) & ~removed
    if unblocked.any() and base.h_dur_obs is not None:
        took[unblocked] = np.maximum(took[unblocked], base.h_dur_obs[unblocked])
    return float(took.sum())


def _clipped(dag: ReplayDag, ob: Observed) -> np.ndarray:
    """Each call's time that a lever removing it takes away: a launch (or copy) call up to the
    clip, a sync all of its observed time, anything else its own duration."""
    launch = np.isin(dag.api, (ApiKind.LAUNCH, ApiKind.MEMCPY_ASYNC, ApiKind.GRAPH_NODE))
    dur = np.where(launch, np.minimum(dag.dur_ns, ob.clip_ns), dag.dur_ns)
    if dag.h_dur_obs is not None:  # a sync: its whole observed time, waits included
        sync = dag.api == ApiKind.SYNC
        dur = np.where(sync, np.maximum(dur, dag.h_dur_obs), dur)
    return np.where(dag.api == NOP, 0.0, dur)


def _device_removed(lever: str, base: ReplayDag, edit: ReplayDag, ob: Observed) -> float:
    """Device time the edit took out of rows: every row shortened or removed, net of what the
    rows that absorbed them (a fused kernel) gained; for a moved copy, its exposed time."""
    if lever == "copy_overlap":  # a copy moved off a stream frees that stream of its time
        moved = edit.d_stream != base.d_stream
        return float((ob.end[moved] - ob.start[moved]).sum())
    before = np.where(base.d_live, base.d_dur, 0.0)
    after = np.where(edit.d_live, edit.d_dur, 0.0)
    removed = float(before.sum() - after.sum())
    if base.d_delay is not None:  # a row removed takes its observed gap before it along
        gone = base.d_live & ~edit.d_live
        removed += float(base.d_delay[gone].sum())
    return max(0.0, removed)


__all__ = ["Ceiling", "Observed", "ceiling", "observe"]
