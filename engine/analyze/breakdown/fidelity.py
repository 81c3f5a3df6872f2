"""The replay with no lever against the trace it replays (DESIGN §5): before any lever is
predicted, the unedited replay's schedule is compared with what was observed — the span, each
stream's last end, the time no stream ran anything, and how far each row's start moved. A
prediction resting on a replay that does not reproduce its own trace says so."""

from __future__ import annotations

import numpy as np

from engine.analyze.breakdown.model import ReplayFidelity
from engine.schedule.dag import ReplayDag, Schedule

#: a faithful replay reproduces the observed span, and every stream's end, within this share of
#: the span (issue 35: 3 %)
TOLERANCE = 0.03

WAITS = (
    "each host thread on its own clock; a blocking call waits for the rows that finished while "
    "it was blocked in the trace; waits the trace shows but does not record (a row starting "
    "well after its launch and its stream allowed) kept as observed"
)


def busy_ns(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> float:
    """Length of the union of [start, end) intervals, clipped to [lo, hi)."""
    if not len(start):
        return 0.0
    s = np.clip(np.asarray(start, np.float64), lo, hi)
    e = np.clip(np.asarray(end, np.float64), lo, hi)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return float((reach[last] - s[first]).sum())


def fidelity(dag: ReplayDag, base: Schedule) -> ReplayFidelity:
    """The unedited replay ``base`` of ``dag`` against the observed window."""
    span = float(dag.observed_ns)
    t0 = float(dag.t0_ns)
    live = dag.d_live & np.isfinite(base.d_start)
    obs_start = dag.d_start_obs.astype(np.float64) - t0
    obs_end = obs_start + dag.d_dur
    idle_obs = span - busy_ns(obs_start[live], obs_end[live], 0.0, span)
    rep_span = float(base.makespan_ns)
    idle_rep = rep_span - busy_ns(base.d_start[live], base.d_end[live], 0.0, rep_span)
    ends: dict[str, float] = {}
    for st in np.unique(dag.d_stream[live]).tolist():
        m = live & (dag.d_stream == st)
        ends[str(st)] = (
            round(float(base.d_end[m].max() - obs_end[m].max()) / span, 6) if span else 0.0
        )
    moved = np.abs(base.d_start[live] - obs_start[live])
    err = rep_span / span - 1.0 if span > 0 else 0.0
    faithful = abs(err) <= TOLERANCE and all(abs(v) <= TOLERANCE for v in ends.values())
    return ReplayFidelity(
        observed_span_ns=round(span),
        replayed_span_ns=round(rep_span),
        span_error=round(err, 6),
        device_idle_observed_ns=round(max(0.0, idle_obs)),
        device_idle_replayed_ns=round(max(0.0, idle_rep)),
        stream_end_error=ends,
        start_error_p95_ns=round(float(np.percentile(moved, 95)), 1) if len(moved) else 0.0,
        tolerance=TOLERANCE,
        faithful=faithful,
        waits=WAITS,
    )


__all__ = ["TOLERANCE", "busy_ns", "fidelity"]
