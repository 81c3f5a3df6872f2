"""Each lever's ceiling: the most it could gain, from the observed trace alone (DESIGN §5).

A ceiling is accounting, not a schedule: it adds up what the lever could remove at most and
never replays anything, so a prediction above it is the replay's error, not the lever's
promise. What it counts (every time as observed in the replayed window):

* **host time** a lever takes out of calls — launch calls it drops or captures (a call counts
  up to ``LAUNCH_OUTLIER`` × the median launch: beyond that the thread was waiting, not
  launching), blocking syncs it removes (their whole observed time: the wait is what removing
  a sync removes), blocking copies it makes asynchronous (only their own transfer — their
  device rows' time — never the call's wait for the stream's earlier work to drain: a 768-byte
  ``hipMemcpyWithStream`` that blocked 463 ms behind a queue of kernels waits for them pinned
  or not, the host reads what they wrote) — can shorten the span by no more than the busiest
  stream's idle time (the span cannot fall below what that stream ran);
* **device time** a lever takes out of rows — at the most favourable end of its priors' stated
  ranges (precision at the peak ratio, fusion keeping only what the chain must still move, a
  copy's time on the stream it leaves) — shortens the span by at most that.

Where the no-lever replay is given (``observe(dag, base)``), whole-step capture
(``cuda_graphs``) is held to the **critical path** (engine.schedule.critical) instead: it
shortens host calls in place, and shortening a call that is not on the path cannot shorten the
span, so its launch time counts only as far as the calls lie on the path — plus the host time
*between* the launches it captures that lies on the path (a captured step replays without the
framework code between its launches; the trace cannot show how much of that code a capture
keeps, so the prediction keeps it and only the ceiling counts it) — and all of it at most the
path's device-idle time (its host, launch, sync, allocation, loading and idle parts). Levers
that remove rows keep the counts above: a removed row also removes the waits on it, which can
take more than its own time off the path (``_PATH_LEVERS``).

The ceiling is their sum, as a share of the span the prediction is a share of (the replayed
one; the no-lever replay is within 3 % of the observed span where it is faithful). ``cuda_graphs`` counts only the
launches not already in graphs (graph launches are not captured again), ``sync_removal`` the
syncs it drops, ``copy_overlap`` the time the copies it moves took on their compute streams
(what the stream is freed of; memsets are device work and never move), ``pinned_memory`` the
blocking copies' own transfers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.analyze.breakdown.fidelity import busy_ns
from engine.levers.library import by_id
from engine.levers.model import Edit
from engine.levers.priors import LAUNCH_OUTLIER
from engine.schedule.critical import GAP, CriticalPath, critical_path
from engine.schedule.dag import NOP, ReplayDag, Schedule
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
    #: the no-lever replay's critical path, and per device / host row its time on it (None:
    #: no replay given)
    path: CriticalPath | None = None
    dev_on_path: np.ndarray | None = None
    host_on_path: np.ndarray | None = None  # a call's own time on the path
    gap_on_path: np.ndarray | None = None  # the host time before a call on the path
    #: the path's time off the device (host, launch, sync, allocation, loading, idle)
    path_idle_ns: float = float("inf")


def observe(dag: ReplayDag, base: Schedule | None = None) -> Observed:
    """The window's observed quantities the ceilings share; with the no-lever replay
    ``base``, its critical path too (the module docstring says what it bounds)."""
    span = float(dag.observed_ns)
    start = dag.d_start_obs.astype(np.float64) - float(dag.t0_ns)
    end = start + dag.d_dur
    busiest = 0.0
    for st in np.unique(dag.d_stream).tolist():
        m = dag.d_stream == st
        busiest = max(busiest, busy_ns(start[m], end[m], 0.0, span))
    launches = dag.dur_ns[dag.api == ApiKind.LAUNCH]
    clip = LAUNCH_OUTLIER * float(np.median(launches)) if len(launches) else 0.0
    if base is None:
        return Observed(span, max(0.0, span - busiest), clip, start, end)
    cp = critical_path(dag, base)
    length = cp.length()
    d = cp.dev >= 0
    dev_on = np.bincount(cp.dev[d], weights=length[d], minlength=len(dag.d_stream))
    h = (cp.host >= 0) & (cp.dev == -1)
    host_on = np.bincount(cp.host[h], weights=length[h], minlength=len(dag.api))
    g = (cp.host >= 0) & (cp.dev == GAP)
    gap_on = np.bincount(cp.host[g], weights=length[g], minlength=len(dag.api))
    by = cp.by_part()
    idle = sum(by[p] for p in OFF_DEVICE)
    return Observed(
        span, max(0.0, span - busiest), clip, start, end, cp, dev_on, host_on, gap_on, idle
    )


#: the critical path's parts during which the device runs nothing the path waits for
OFF_DEVICE = ("host", "launch_api", "launch_delay", "sync", "allocation", "data_loading", "idle")
# (which levers' ceilings are held to the critical path, and how each lever's time is counted,
# the levers declare: engine.levers.base.Lever's capabilities)


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
    lv = by_id(lever)
    on_path = ob.path is not None and lv.ceiling_on_path
    host = max(_host_removed(lever, base, e.dag, ob, on_path) for e in edits)
    dev = max(_device_removed(lever, base, e.dag, ob, on_path) for e in edits)
    between = (
        max(_between(base, e.dag, ob) for e in edits) if lv.skips_host_between_launches else 0.0
    )
    room = min(ob.host_room_ns, ob.path_idle_ns) if on_path else ob.host_room_ns
    host_part = min(host + between, room)
    ns = host_part + dev
    parts = []
    if host + between > 0:
        what = "syncs removed (their observed time, waits included)"
        if _unblocks_copies(base, edits):
            what = (
                "host time blocking copies held the host for their own transfer (their device "
                "rows' time; the calls' waits for earlier device work are not counted: making "
                "a copy asynchronous cannot remove them)"
            )
        elif not lv.removes_syncs:
            what = f"launch/host calls removed (each up to {ob.clip_ns / 1e3:.1f} µs)"
        if on_path:
            what += " on the critical path"
        if between > 0:
            what += (
                f" and {_ms(between)} of host time between the captured launches on the "
                "critical path (whole-step capture skips the framework code between them)"
            )
        bound = (
            "the critical path's device-idle time"
            if on_path and ob.path_idle_ns < ob.host_room_ns
            else "the busiest stream's idle time"
        )
        parts.append(
            f"{_ms(host + between)} of {what}, of which at most {_ms(room)} ({bound}) can come "
            "off the span"
        )
    if dev > 0:
        what = (
            "copy time on the streams the copies leave"
            if lv.moves_copies
            else "device time taken out of rows at the favourable end of the priors"
        )
        if on_path:
            what += ", counted only where those rows lie on the critical path"
        parts.append(f"{_ms(dev)} of {what}")
    if not parts:
        parts.append("nothing this lever removes in the observed window")
    return Ceiling(
        ns / per, ns, f"ceiling {ns / per:+.1%} from the trace alone: " + "; ".join(parts)
    )


def _between(base: ReplayDag, edit: ReplayDag, ob: Observed) -> float:
    """Whole-step capture: the critical path's host time before each captured launch that
    follows another captured launch (a region's first launch keeps the time before it)."""
    if ob.gap_on_path is None or len(edit.api) != len(base.api):
        return 0.0
    captured = (edit.dur_ns != base.dur_ns) & (base.api == ApiKind.LAUNCH)
    follows = np.zeros(len(captured), bool)
    follows[1:] = captured[1:] & captured[:-1]
    if base.h_thread is not None:  # (one thread's launches: a capture is per thread)
        follows[1:] &= base.h_thread[1:] == base.h_thread[:-1]
    return float(ob.gap_on_path[follows].sum())


def _host_removed(
    lever: str, base: ReplayDag, edit: ReplayDag, ob: Observed, on_path: bool = False
) -> float:
    """Host time the edit took out of calls (observed, clipped as the module says; with
    ``on_path``, only as far as each call lies on the critical path)."""
    if len(edit.api) != len(base.api):  # rows inserted (a side stream's record/wait): net
        return max(0.0, float(_clipped(base, ob).sum()) - float(_clipped(edit, ob).sum()))
    removed = (edit.api == NOP) & (base.api != NOP)
    took = np.where(removed, _clipped(base, ob), np.maximum(0.0, base.dur_ns - edit.dur_ns))
    took = np.where((edit.api != NOP) & (base.api == ApiKind.SYNC), 0.0, took)
    # a blocking call made non-blocking: a sync, its observed time (waits included: the host
    # no longer waits); a copy (a pageable copy made async), its own transfer only, at most
    # its observed time — not its wait for the stream's earlier work (module docstring)
    blocking = (ApiKind.SYNC, ApiKind.MEMCPY_SYNC)
    unblocked = np.isin(base.api, blocking) & ~np.isin(edit.api, blocking) & ~removed
    if unblocked.any() and base.h_dur_obs is not None:
        own = np.where(
            base.api == ApiKind.MEMCPY_SYNC,
            np.minimum(base.h_dur_obs, _own_transfer(base, edit)),
            base.h_dur_obs,
        )
        took[unblocked] = np.maximum(took[unblocked], own[unblocked])
    if on_path and ob.host_on_path is not None:
        took = np.minimum(took, ob.host_on_path)
    return float(took.sum())


def _own_transfer(base: ReplayDag, edit: ReplayDag) -> np.ndarray:
    """Per host row, the time of the device rows it launched as the edit leaves them (a copy
    made async at pinned bandwidth: its shorter transfer — the device part of the saving is
    counted with the rows, so the two add up to the copy's observed transfer); a call with no
    device row: its own duration (the part after its waits)."""
    d_dur = edit.d_dur if len(edit.d_dur) == len(base.d_dur) else base.d_dur
    off, flat = base.launch_lists()
    cum = np.concatenate([[0.0], np.cumsum(d_dur[flat])])
    own = cum[off[1:]] - cum[off[:-1]]
    return np.where(off[1:] > off[:-1], own, base.dur_ns)


def _unblocks_copies(base: ReplayDag, edits: list[Edit]) -> bool:
    """Whether an edit made a blocking copy call asynchronous (``pinned_memory``)."""
    sync_copy = base.api == ApiKind.MEMCPY_SYNC
    return any(
        len(e.dag.api) == len(base.api) and bool((sync_copy & (e.dag.api != base.api)).any())
        for e in edits
    )


def _clipped(dag: ReplayDag, ob: Observed) -> np.ndarray:
    """Each call's time that a lever removing it takes away: a launch (or copy) call up to the
    clip, a sync all of its observed time, anything else its own duration."""
    launch = np.isin(dag.api, (ApiKind.LAUNCH, ApiKind.MEMCPY_ASYNC, ApiKind.GRAPH_NODE))
    dur = np.where(launch, np.minimum(dag.dur_ns, ob.clip_ns), dag.dur_ns)
    if dag.h_dur_obs is not None:  # a sync: its whole observed time, waits included
        sync = dag.api == ApiKind.SYNC
        dur = np.where(sync, np.maximum(dur, dag.h_dur_obs), dur)
    return np.where(dag.api == NOP, 0.0, dur)


def _device_removed(
    lever: str, base: ReplayDag, edit: ReplayDag, ob: Observed, on_path: bool = False
) -> float:
    """Device time the edit took out of rows: every row shortened or removed, net of what the
    rows that absorbed them (a fused kernel) gained; for a moved copy, its exposed time. With
    ``on_path``: only the time of rows on the critical path (a fused kernel's own time stays
    on it, so the net saving is each path row's loss less what the rows that grew gained)."""
    if by_id(lever).moves_copies:  # a copy moved off a stream frees that stream of its time
        moved = edit.d_stream != base.d_stream
        return float((ob.end[moved] - ob.start[moved]).sum())
    before = np.where(base.d_live, base.d_dur, 0.0)
    after = np.where(edit.d_live, edit.d_dur, 0.0)
    if base.d_delay is not None:  # a row removed takes its observed gap before it along
        before = before + np.where(base.d_live & ~edit.d_live, base.d_delay, 0.0)
    if on_path and ob.dev_on_path is not None and len(after) == len(before):
        loss = np.maximum(0.0, before - after)
        grew = float(np.maximum(0.0, after - before).sum())
        return max(0.0, float(np.minimum(loss, ob.dev_on_path).sum()) - grew)
    return max(0.0, float(before.sum() - after.sum()))


__all__ = ["Ceiling", "Observed", "ceiling", "observe"]
