"""The critical path's host part by the operator it was spent in (engine.analyze.breakdown.critical_ops):
exact on a SYNTHETIC trace written here, and adding up to the host part on a real one."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine.analyze.breakdown.critical_ops import (
    OUTSIDE,
    OUTSIDE_ALL,
    host_by_operator,
    outside_while,
)
from engine.analyze.breakdown.steady import exact_at
from engine.analyze.compute import analyze_trace
from engine.planner.catalogue import by_id
from engine.schedule.critical import critical_path
from engine.schedule.dag import build_dag, merge_idle_host_rows, schedule
from engine.trace.read import read_trace
from engine.trace.trace import TopOps
from tests.paths import TRACES

T0 = 1_700_000_000_000  # µs
US = 1000.0  # ns


def _write(tmp: Path, events: list[dict]) -> Path:
    """A SYNTHETIC Kineto trace (written by this test, never recorded) of ``events``."""
    doc = {"schemaVersion": 1, "synthetic": True, "traceEvents": events,
           "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "numSms": 108,
                                 "totalGlobalMem": 85e9, "computeMajor": 8,
                                 "computeMinor": 0}]}  # fmt: skip
    p = tmp / "synthetic.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(doc, f)
    return p


def _op(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": T0 + ts, "dur": dur}


def _call(name: str, ts: float, dur: float, corr: int, tid: int = 1) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": tid, "ts": T0 + ts,
            "dur": dur, "args": {"correlation": corr}}  # fmt: skip


def _launch(ts: float, corr: int, tid: int = 1, stream: int = 7) -> list[dict]:
    """A 4 µs launch call and its 5 µs kernel, 5 µs after the call began."""
    return [_call("cudaLaunchKernel", ts, 4, corr, tid),
            {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0,
             "tid": stream, "ts": T0 + ts + 5, "dur": 5,
             "args": {"stream": stream, "correlation": corr, "device": 0,
                      "grid": [108, 1, 1], "block": [256, 1, 1]}}]  # fmt: skip


def _synthetic(tmp: Path) -> Path:
    """Thread 1 (µs): "aten::linear" [10, 100) around two launches (20, 60; a nested
    "aten::addmm" around the first), Python [100, 300), "aten::relu" [300, 350) around a
    launch (310) and a cudaStreamIsCapturing [330, 332); a ProfilerStep#1 around it all.
    Thread 2 launches at 150 inside "## forward ##" [140, 250); thread 9 launches nothing.

    The path ends with thread 1's last call: its own 2 µs and the host time before each call —
    16 µs (in relu), 246 µs (36 in linear, 200 outside, 10 in relu), 36 µs (in linear)."""
    ev = [
        _op("ProfilerStep#1", 0, 400, cat="user_annotation"),
        _op("aten::linear", 10, 90),
        _op("aten::addmm", 15, 55),
        *_launch(20, 1),
        *_launch(60, 2),
        _op("aten::relu", 300, 50),
        *_launch(310, 3),
        _call("cudaStreamIsCapturing", 330, 2, 4),
        _op("## forward ##", 140, 110, tid=2, cat="user_annotation"),
        *_launch(150, 5, tid=2, stream=8),
        _op("aten::copy_", 120, 80, tid=9),
    ]
    return _write(tmp, ev)


def _path(path: Path):
    tr = read_trace(path, merge_idle=exact_at)
    regimes = np.full(len(tr.segments), 255, np.uint8)
    dag = merge_idle_host_rows(build_dag(tr, by_id("a100-80gb"), iterations=1, regimes=regimes))
    return tr, dag, critical_path(dag, schedule(dag))


def test_the_host_part_goes_to_the_operator_around_it_exactly(tmp_path):
    tr, dag, cp = _path(_synthetic(tmp_path))
    assert cp.by_part()["host"] == pytest.approx(300 * US, abs=1)
    got = host_by_operator(cp, dag, tr)
    assert [(name, calls) for name, _, calls in got] == [
        (OUTSIDE, 1), ("aten::linear", 1), ("aten::relu", 1)
    ]  # fmt: skip
    assert [ns for _, ns, _ in got] == pytest.approx([200 * US, 72 * US, 28 * US], abs=1)
    # the Python between the two ops: thread 2 ran "## forward ##" for 110 µs of it
    while_ = outside_while(cp, dag, tr)
    assert [(name, calls) for name, _, calls in while_] == [("## forward ##", 1), (OUTSIDE_ALL, 1)]
    assert [ns for _, ns, _ in while_] == pytest.approx([110 * US, 90 * US], abs=1)
    # at most n operators, the time outside them still said
    assert [name for name, _, _ in host_by_operator(cp, dag, tr, n=1)] == [OUTSIDE, "aten::linear"]


def test_no_operators_no_attribution(tmp_path):
    """A trace that records no operators (an Nsight export; Kineto without cpu_op events)."""
    tr, dag, cp = _path(_synthetic(tmp_path))
    bare = replace(tr, top_ops=TopOps.empty())
    assert host_by_operator(cp, dag, bare) == [] and outside_while(cp, dag, bare) == []


def test_on_the_real_training_trace_the_operators_add_up_to_the_host_part():
    """The A100 training trace as `gitm-tui analyze` reads and replays it (idle calls merged,
    the steady window): operators take a share of the host part, and the attribution adds up
    to it to the ns; the time outside them adds up to what the other threads ran then."""
    tr = read_trace(TRACES / "kineto" / "a100_training_3streams.json.gz", merge_idle=exact_at)
    res = analyze_trace(tr)
    assert res.path is not None
    cp, dag = res.path
    host = cp.by_part()["host"]
    got = host_by_operator(cp, dag, tr, n=None)
    assert sum(ns for _, ns, _ in got) == pytest.approx(host, abs=1)
    ops = sum(ns for name, ns, _ in got if name != OUTSIDE)
    assert 0.1 * host < ops < host
    assert [ns for _, ns, _ in got] == sorted((ns for _, ns, _ in got), reverse=True)
    outside = next(ns for name, ns, _ in got if name == OUTSIDE)
    assert sum(ns for _, ns, _ in outside_while(cp, dag, tr, n=None)) == pytest.approx(
        outside, abs=1
    )
    top = host_by_operator(cp, dag, tr, n=5)
    assert len(top) == 6 and {name for name, _, _ in top} >= {OUTSIDE}
