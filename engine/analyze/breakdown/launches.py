"""Launch statistics: how each kernel's run compares with the host call that launched it.

A kernel is compared with its launch call only where that call launched it alone
(``cudaLaunchKernel``, ``hipModuleLaunchKernel``, …). One ``cudaGraphLaunch`` /
``hipGraphLaunch`` launches every node of its graph: its duration is the cost of the whole
replay, so "the kernel ran shorter than its launch call" says nothing about one of its kernels
(424 of 425 kernels of a decode step captured in one graph would all be "shorter"). Those
kernels are found by correlation (the device row's correlation id names the graph-launch call)
and counted apart, with the graph launches they came from.
"""

from __future__ import annotations

import numpy as np

from engine.analyze.breakdown.model import LaunchStats
from engine.trace.segments import Kind, Segments
from engine.trace.trace import ApiKind, Trace

#: host rows that launch a graph's nodes, not one kernel: the launch itself and, where a
#: source records them, its nodes' own rows (engine.trace.trace.ApiKind)
GRAPH_CALLS = (ApiKind.GRAPH_LAUNCH, ApiKind.GRAPH_NODE)

#: a row's launch start where it has no linked host row
NO_LAUNCH = np.iinfo(np.int64).min


def launch_times(rows: Segments, trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return each row's launch-call start (``NO_LAUNCH`` where not linked), its duration (-1
    where not linked) and whether that call is a graph launch (``GRAPH_CALLS``)."""
    start = np.full(len(rows), NO_LAUNCH, np.int64)
    dur = np.full(len(rows), -1, np.int64)
    graph = np.zeros(len(rows), np.bool_)
    h = trace.host
    row = h.rows_of(rows.correlation)
    hit = row >= 0
    idx = row[hit]
    start[hit] = h.api_start_ns[idx]
    dur[hit] = h.api_end_ns[idx] - h.api_start_ns[idx]
    if len(h.api):
        graph[hit] = np.isin(h.api[idx], np.array(GRAPH_CALLS, np.uint8))
    return start, dur, graph


def launch_stats(
    rows: Segments, trace: Trace, launch_dur: np.ndarray, graph: np.ndarray
) -> LaunchStats:
    """The kernels of ``rows`` against their own launch call (``launch_times``' duration and
    graph mask): kernels launched by a graph launch are counted apart, with the number of
    graph launches they came from, and enter neither the comparison nor the medians."""
    kern = rows.kind == Kind.KERNEL
    dur = rows.end_ns - rows.start_ns
    linked = kern & (launch_dur >= 0)
    by_graph = linked & graph
    own = linked & ~graph
    launches = 0
    if by_graph.any():
        h_rows = trace.host.rows_of(rows.correlation[by_graph])
        launches = len(np.unique(h_rows))
    return LaunchStats(
        kernels_linked=int(own.sum()),
        shorter_than_launch=int((own & (dur < launch_dur)).sum()),
        graph_kernels=int(by_graph.sum()),
        graph_launches=launches,
        # (each median's input is a fresh selection: partitioned in place, not copied again)
        median_launch_ns=float(np.median(launch_dur[own], overwrite_input=True))
        if own.any()
        else None,
        median_kernel_ns=float(np.median(dur[kern], overwrite_input=True)) if kern.any() else None,
    )


__all__ = ["GRAPH_CALLS", "NO_LAUNCH", "launch_stats", "launch_times"]
