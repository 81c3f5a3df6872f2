"""Levers and invariants that read the program's state (issue 47, item 5): graph-launched
kernels counted apart from the launch statistics, ceilings that count only what a lever can
remove, memsets that never move as copies, idle over the union of a stream's rows, and a
safety class that says what can change. The traces written here are SYNTHETIC (the test
writes them; nothing was recorded); the real ones are the repository's own."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from engine.analyze.breakdown.idle import grouped_running_end, stream_idle
from engine.analyze.breakdown.launches import launch_stats, launch_times
from engine.analyze.compute import analyze_trace
from engine.analyze.diff.diff import _idle as diff_idle
from engine.levers.model import Safety, lever_specs
from engine.trace.read import read_trace
from tests.paths import TRACES
from tests.schedule.test_critical_path import T0, _Host, _kineto

GRAPHS = [
    TRACES / "kineto" / "v100_16gb_ddp_graphs_3streams.json.gz",
    TRACES / "kineto" / "a100_80gb_5streams_graphs.json.gz",
]


def _runtime(h: _Host, name: str, at: float, dur: float) -> int:
    """A runtime call of ``name`` at ``at`` µs lasting ``dur``; returns its correlation id."""
    c = h.corr
    h.corr += 1
    h.ev.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1,
                 "ts": T0 + at, "dur": dur, "args": {"correlation": c}})  # fmt: skip
    return c


def _device(h: _Host, cat: str, name: str, corr: int, at: float, dur: float, stream: int = 7,
            nbytes: int = 0) -> None:  # fmt: skip
    args: dict[str, object] = {"stream": stream, "correlation": corr, "device": 0}
    if cat == "kernel":
        args |= {"grid": [108, 1, 1], "block": [256, 1, 1]}
    else:
        args["bytes"] = nbytes
    h.ev.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream,
                 "ts": T0 + at, "dur": dur, "args": args})  # fmt: skip


# ------------------------------------------------------------------ 1. graph launches
def test_kernels_of_a_graph_launch_are_counted_apart(tmp_path):
    h = _Host()
    for i in range(5):  # own launches: 4 µs calls, 2 µs kernels (each shorter than its call)
        h.launch(10.0, f"at::native::vectorized_elementwise_kernel<{i}>", 2.0)
    c = _runtime(h, "cudaGraphLaunch", 200.0, 20.0)
    for i in range(10):  # one call, ten kernels of 3 µs: no kernel's launch is that call
        _device(h, "kernel", f"graph_node_kernel_{i}", c, 225.0 + 4.0 * i, 3.0)
    la = analyze_trace(read_trace(_kineto(tmp_path, h.ev))).analysis.launch
    assert (la.kernels_linked, la.shorter_than_launch) == (5, 5)
    assert (la.graph_kernels, la.graph_launches) == (10, 1)
    assert la.median_launch_ns == 4000.0  # the graph launch's 20 µs is no kernel's launch
    assert la.line() == (
        "5 of 5 kernels ran shorter than their launch call; 10 kernels from 1 graph launch, "
        "not counted (one call launches a whole graph)"
    )


def _graph_kernels_in_json(path) -> tuple[int, int]:
    """Kernels whose correlation id is a cudaGraphLaunch / hipGraphLaunch call's, and those
    calls: read from the file's JSON, independently of the importer."""
    with gzip.open(path, "rt") as f:
        ev = json.load(f)["traceEvents"]
    calls = {
        e["args"]["correlation"]
        for e in ev
        if e.get("cat") == "cuda_runtime" and "GraphLaunch" in e.get("name", "")
    }
    kern = [e for e in ev if e.get("cat") == "kernel" and e["args"].get("correlation") in calls]
    return len(kern), len({e["args"]["correlation"] for e in kern})


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.name)
def test_real_graph_traces_count_graph_kernels_apart(path):
    trace = read_trace(path)
    seg = trace.segments
    rows = seg.take(np.isin(seg.kind, (0, 1, 2, 3)))  # (timed rows: the analysis's)
    _, dur, graph = launch_times(rows, trace)
    la = launch_stats(rows, trace, dur, graph)
    kernels, launches = _graph_kernels_in_json(path)
    assert kernels > 100 and (la.graph_kernels, la.graph_launches) == (kernels, launches)
    linked = (rows.kind == 0) & (dur >= 0)
    assert la.kernels_linked == int(linked.sum()) - kernels


# ------------------------------------------------------------------ 2. idle never negative
def test_overlapping_rows_leave_no_negative_idle():
    # SYNTHETIC: a 100 ns row with two rows inside it, then a gap of 20 ns and one more row
    start = np.array([0, 10, 20, 120], np.int64)
    end = np.array([100, 30, 150, 200], np.int64)
    launch = np.full(4, np.iinfo(np.int64).min, np.int64)
    i = stream_idle(start, end, launch)
    # HTA's rule took 10-100 and 20-30 as gaps: -100 ns of "kernel wait"; the union has none
    assert (i.total_ns, i.kernel_wait_ns, i.host_wait_ns, i.other_ns) == (0, 0, 0, 0)
    assert (i.overlapping_rows, i.overlapped_ns) == (3, 20 + 80 + 30)
    # --counting hta counts as HTA does, to compare with it: its negative gaps, said so
    h = stream_idle(start, end, launch, hta=True)
    assert (h.total_ns, h.kernel_wait_ns, h.overlapping_rows) == (-130, -130, 3)
    assert grouped_running_end(np.array([1, 1, 2, 2]), np.array([50, 10, 5, 3])).tolist() == [
        50, 50, 5, 5,
    ]  # fmt: skip


def test_a_copy_overlapping_kernels_on_their_stream_is_explained(tmp_path):
    h = _Host()
    h.launch(5.0, "ampere_sgemm_128x64_nn", 100.0, at=10.0)  # 10..110 µs on stream 7
    h.launch(5.0, "ampere_sgemm_128x64_nn", 100.0, at=115.0)  # 115..215 µs
    c = _runtime(h, "cudaMemcpyAsync", 20.0, 3.0)
    _device(h, "gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", c, 100.0, 30.0, nbytes=1 << 20)
    res = analyze_trace(read_trace(_kineto(tmp_path, h.ev)))
    (st,) = res.analysis.streams
    i = st.idle
    assert min(i.total_ns, i.host_wait_ns, i.kernel_wait_ns, i.other_ns) >= 0
    # the copy ran 100..130 µs: 10 µs under the first kernel, 15 µs under the second
    assert (i.overlapping_rows, i.overlapped_ns) == (2, 25_000)
    assert i.total_ns == 0  # 10..215 µs is covered
    (note,) = [n for n in res.analysis.notes if "overlapped" in n]
    assert "2 rows on 1 stream(s)" in note and "0.03 ms overlapped" in note
    assert diff_idle(_scoped(res))[0] == 0  # the diff's idle counts it alike


def _scoped(res):
    """The diff's view of an analysis's rows (engine.analyze.diff.diff): the whole trace."""
    from engine.analyze.diff.diff import _scope

    return _scope(res, None)


# ------------------------------------------------------------------ 3. ceilings, copies
def test_pinned_memory_ceiling_counts_the_copy_not_its_wait(tmp_path):
    """A 768-byte blocking DtoH copy queued behind 40 ms of kernels: its call waits for them,
    pinned or not (the host reads what they wrote): only its 5 µs transfer is the lever's."""
    h = _Host()
    for i in range(20):
        h.launch(5.0, "ampere_sgemm_128x64_nn", 2000.0, at=20.0 + 2000.0 * i)
    end = 20.0 + 2000.0 * 20
    c = _runtime(h, "cudaMemcpy", h.t + 5.0, end + 5.0 - h.t)
    _device(h, "gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", c, end, 5.0, nbytes=768)
    h.t = end + 10.0
    for i in range(200):  # then host-bound: 200 µs of Python before each 5 µs kernel
        h.launch(200.0, f"at::native::vectorized_elementwise_kernel<{i % 4}>", 5.0)
    a = analyze_trace(read_trace(_kineto(tmp_path, h.ev))).analysis
    pin = next(e for e in a.interventions if e.lever == "pinned_memory")
    assert pin.rows == 1
    # the stream idles ~40 ms, so the host room does not hide it: counting the call's 40 ms
    # wait gave ≤ +49 % of the ~82 ms span; its 5 µs transfer is < 0.01 %
    assert pin.ceiling is not None and pin.ceiling < 0.001
    assert "waits for earlier device work are not counted" in pin.ceiling_basis


def test_copy_overlap_moves_copies_never_memsets(tmp_path):
    h = _Host()
    at = 20.0
    for _ in range(6):
        h.launch(5.0, "ampere_sgemm_128x64_nn", 200.0, at=at)
        at += 200.0
        c = _runtime(h, "cudaMemsetAsync", h.t + 2.0, 3.0)
        _device(h, "gpu_memset", "Memset (Device)", c, at, 20.0, nbytes=1 << 20)
        at += 20.0
        c = _runtime(h, "cudaMemcpyAsync", h.t + 6.0, 3.0)
        _device(h, "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", c, at, 50.0, nbytes=1 << 20)
        at += 50.0
        h.t += 12.0
    h.sync(5.0, at + 5.0)
    a = analyze_trace(read_trace(_kineto(tmp_path, h.ev))).analysis
    co = next(e for e in a.interventions if e.lever == "copy_overlap")
    assert co.rows == 6  # the six copies; the six memsets stay on their stream (12 before)
    assert co.what.startswith("6 async copies moved")


# ------------------------------------------------------------------ 5. safety classes
def test_sync_removal_says_results_can_change():
    spec = lever_specs()["sync_removal"]
    assert spec.safety == Safety.NUMERICS  # a person decides: never auto-approved
    assert "host code that reads device data after a removed sync" in spec.changes
    # every class but SAFE says what it changes
    assert all(s.changes for s in lever_specs().values() if s.safety != Safety.SAFE)


def test_the_sync_removal_basis_states_what_can_change(tmp_path):
    h = _Host()
    for step in range(3):
        for i in range(4):
            h.launch(20.0, f"at::native::vectorized_elementwise_kernel<{i}>", 30.0)
        h.sync(2.0, h.last_end + 1.0)  # a mid-step .item()
        for i in range(4):
            h.launch(20.0, f"at::native::vectorized_elementwise_kernel<{i}>", 30.0)
        h.sync(2.0, h.last_end + 1.0)  # the step end
        del step
    a = analyze_trace(read_trace(_kineto(tmp_path, h.ev))).analysis
    sr = next(e for e in a.interventions if e.lever == "sync_removal")
    assert sr.safety == "NUMERICS"
    assert "NUMERICS: results can change: host code that reads device data" in sr.basis
