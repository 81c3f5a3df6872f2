"""Events a trace lists twice, counted once (issue 51): every importer's rows pass here
(engine.trace.read), so a Kineto file whose traceEvents hold each event twice, or an Nsight
export whose kernel table holds a row twice, is not counted as twice the work.

The rule: two device rows are one execution listed twice when they agree on device, stream,
kind, name, start, end and correlation id. A stream runs one row at a time, so two distinct
executions on one stream cannot share both ends — except rows of no duration, which two
distinct events can share; those count twice unless a correlation id (one launch each) says
they are one. Host rows likewise: one call listed twice agrees on thread, API kind, start, end,
correlation id, stream and event. What is dropped is counted in ``device_properties``
(``duplicate_rows``, ``duplicate_host_rows``) and said once by the analysis; the first of each
set is kept, in its place.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from engine.trace.trace import Trace


def _repeats(
    cols: list[np.ndarray], time: np.ndarray, distinct_without: np.ndarray
) -> npt.NDArray[np.bool_]:
    """Rows equal on every column to an earlier row (the first of each set is not), among the
    rows not in ``distinct_without`` (rows that may be distinct although equal). ``time`` is
    one of the columns: only rows sharing their start with another are compared, so a trace
    with no two rows at one instant (most) costs one pass — a 10 M-row trace is not sorted
    on seven keys to find nothing."""
    n = len(time)
    rep = np.zeros(n, bool)
    if n < 2:
        return rep
    order = None if bool((time[1:] >= time[:-1]).all()) else np.argsort(time, kind="stable")
    t = time if order is None else time[order]
    eq = t[1:] == t[:-1]
    if not eq.any():
        return rep
    tied = np.zeros(n, bool)
    tied[1:] |= eq
    tied[:-1] |= eq
    rows = np.flatnonzero(tied) if order is None else np.sort(order[tied])
    sub = [c[rows] for c in cols]
    by = np.lexsort(sub[::-1])  # stable: equal rows keep their order, the first first
    same = np.ones(len(rows) - 1, bool)
    for c in sub:
        v = c[by]
        same &= v[1:] == v[:-1]
    rep[rows[by[1:][same]]] = True
    return rep & ~distinct_without


def drop_duplicates(trace: Trace) -> Trace:
    """``trace`` with every row listed twice kept once (the module's rule), the counts in its
    device_properties. The same object when nothing is listed twice (the usual case)."""
    seg = trace.segments
    if len(seg) > 1:
        no_time = (seg.end_ns == seg.start_ns) & (seg.correlation < 0)
        cols = [seg.device.astype(np.int64), seg.stream.astype(np.int64), seg.start_ns,
                seg.end_ns, seg.name.astype(np.int64), seg.correlation,
                seg.kind.astype(np.int64)]  # fmt: skip
        rep = _repeats(cols, seg.start_ns, no_time)
        if rep.any():
            trace.segments = seg.take(~rep)
            props = trace.device_properties
            props["duplicate_rows"] = int(rep.sum())
            if props.get("collectives"):  # a collective's facts, by (start, stream): once
                kept: dict[tuple[int, int], object] = {}
                for c in props["collectives"]:
                    kept.setdefault((c[0], c[1]), c)
                props["collectives"] = list(kept.values())
    host = trace.host
    if len(host) > 1:
        no_time = (host.api_end_ns == host.api_start_ns) & (host.correlation < 0)
        cols = [np.asarray(host.thread, np.int64), host.api.astype(np.int64),
                host.api_start_ns, host.api_end_ns, host.correlation,
                np.asarray(host.stream, np.int64), np.asarray(host.event, np.int64)]  # fmt: skip
        rep = _repeats(cols, host.api_start_ns, no_time)
        if rep.any():
            host.keep_only(~rep)
            trace.device_properties["duplicate_host_rows"] = int(rep.sum())
    return trace


def duplicates_note(props: dict[str, object]) -> str | None:
    """The one line the analysis says of what was listed twice (None: nothing was)."""
    dev = int(props.get("duplicate_rows") or 0)  # type: ignore[call-overload]
    host = int(props.get("duplicate_host_rows") or 0)  # type: ignore[call-overload]
    if not dev and not host:
        return None
    what = " and ".join(
        t
        for t in (
            f"{dev:,} GPU row{'s' if dev != 1 else ''}" if dev else "",
            f"{host:,} host call{'s' if host != 1 else ''}" if host else "",
        )
        if t
    )
    return (
        f"{what} listed twice in the trace (the same device or thread, stream, name, start, end "
        "and correlation id as a row before it) counted once"
    )
