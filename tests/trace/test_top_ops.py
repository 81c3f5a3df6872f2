"""The top-level CPU operators the Kineto importer keeps (Trace.top_ops): on SYNTHETIC traces
written here with a known answer, against the definition on random ops, and on the real
training trace however the file falls into blocks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from engine.trace.kineto import kineto
from engine.trace.kineto.kineto import read_kineto
from engine.trace.kineto.top_ops import _outer, nested
from engine.trace.trace import Trace
from tests.paths import TRACES

T0 = 1_700_000_000_000  # µs
REAL = TRACES / "kineto" / "a100_training_3streams.json.gz"


def _write(tmp: Path, events: list[dict]) -> Path:
    """A SYNTHETIC Kineto trace (written by this test, never recorded) of ``events``."""
    doc = {"schemaVersion": 1, "synthetic": True, "traceEvents": events,
           "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "numSms": 108,
                                 "computeMajor": 8, "computeMinor": 0}]}  # fmt: skip
    p = tmp / "synthetic.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(doc, f)
    return p


def _op(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": T0 + ts, "dur": dur}


def _launch(ts: float, corr: int, tid: int = 1) -> list[dict]:
    """A launch call at ``ts`` (4 µs) and its 5 µs kernel 5 µs later."""
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
         "ts": T0 + ts, "dur": 4, "args": {"correlation": corr}},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7,
         "ts": T0 + ts + 5, "dur": 5, "args": {"stream": 7, "correlation": corr, "device": 0,
                                             "grid": [108, 1, 1], "block": [256, 1, 1]}},
    ]  # fmt: skip


def _rows(tr: Trace) -> list[tuple[int, str, float, float]]:
    o = tr.top_ops
    return [
        (int(t), tr.names[int(n)], (int(s) - T0 * 1000) / 1e3, (int(e) - T0 * 1000) / 1e3)
        for t, n, s, e in zip(o.thread, o.name, o.start_ns, o.end_ns, strict=True)
    ]


def test_the_outer_ops_of_the_launching_threads_in_order_disjoint(tmp_path):
    """Each launching thread's ops that no other contains, by start: a step is no op, nested
    ops and ops of a thread that launches nothing are not kept, a parent written after the
    child that starts with it still contains it, an op that began inside the one before it
    starts where that one ends, a zero-length op is not kept."""
    ev = [
        _op("ProfilerStep#7", 0, 1000, cat="user_annotation"),
        _op("aten::addmm", 10, 30),  # the child, written before its parent (same start)
        _op("aten::linear", 10, 50),
        *_launch(20, 1),
        _op("aten::empty", 70, 0),  # zero length
        _op("## optimizer ##", 100, 80, cat="user_annotation"),
        _op("aten::add_", 110, 20),
        *_launch(115, 2),
        _op("aten::mul", 170, 40),  # begins inside "## optimizer ##": starts at 180
        _op("aten::copy_", 300, 10, tid=9),  # thread 9 launches nothing
        *_launch(400, 3, tid=5),  # a second launching thread (thread 1)
        _op("aten::relu", 395, 15, tid=5),
    ]
    tr = read_kineto(_write(tmp_path, ev))
    assert np.bincount(tr.host.thread).tolist() == [2, 1]
    assert _rows(tr) == [
        (0, "aten::linear", 10.0, 60.0),
        (0, "## optimizer ##", 100.0, 180.0),
        (0, "aten::mul", 180.0, 210.0),
        (1, "aten::relu", 395.0, 410.0),
    ]
    # the kernels' names keep their ids: op names are interned after every other name
    first_op = min(int(n) for n in tr.top_ops.name)
    assert int(tr.segments.name.max()) < first_op


def test_a_trace_without_cpu_ops_keeps_none(tmp_path):
    tr = read_kineto(_write(tmp_path, _launch(0, 1)))
    assert len(tr.top_ops) == 0 and tr.top_ops.start_ns.dtype == np.int64


def _brute(tid: np.ndarray, s: np.ndarray, e: np.ndarray) -> list[tuple[int, int, int]]:
    """The definition, op by op: contained in no other of its thread (of equal ones, one)."""
    keep = set()
    for i in range(len(s)):
        inside = any(
            j != i and tid[j] == tid[i] and s[j] <= s[i] and e[i] <= e[j]
            and ((s[j], e[j]) != (s[i], e[i]) or j < i)
            for j in range(len(s))
        )  # fmt: skip
        if not inside:
            keep.add((int(tid[i]), int(s[i]), int(e[i])))
    return sorted(keep)


@pytest.mark.parametrize("layout", ["any", "by start", "by thread and start"])
def test_blocks_then_join_keep_exactly_the_ops_no_other_contains(layout):
    """A block drops only ops contained in another of its block (``nested``: a run of one
    thread at a time, as the profiler writes them), the join judges the rest: together exactly
    the ops the definition keeps, on random nests, ties and overlaps."""
    rng = np.random.default_rng(46)
    for _ in range(400):
        n = int(rng.integers(1, 40))
        tid = rng.integers(0, 3, n)
        s = rng.integers(0, 30, n)
        e = s + rng.integers(1, 12, n)
        if layout != "any":
            keys = (rng.random(n), s) if layout == "by start" else (rng.random(n), s, tid)
            o = np.lexsort(keys)
            tid, s, e = tid[o], s[o], e[o]
        halves = np.array_split(np.arange(n), 2)  # two blocks
        kept = np.concatenate([h[nested(tid[h], s[h], e[h])] for h in halves])
        order, outer = _outer(tid[kept], s[kept], e[kept], np.argsort(tid[kept], kind="stable"))
        got = kept[order[outer]]
        rows = zip(tid[got].tolist(), s[got].tolist(), e[got].tolist(), strict=True)
        assert sorted(rows) == _brute(tid, s, e)


@pytest.mark.parametrize("chunk", [1 << 16, 1 << 20])
def test_the_real_trace_gives_the_same_ops_in_any_blocks_and_from_the_twin(monkeypatch, chunk):
    """The training trace (two launching threads; the autograd thread's ops and the main
    thread's annotations): the same operators however the file is cut into blocks, and from
    the first-run Python twin (one block); disjoint along each thread."""
    want = read_kineto(REAL)
    o = want.top_ops
    assert len(o) > 1000 and set(np.unique(o.thread).tolist()) <= set(
        np.unique(want.host.thread).tolist()
    )
    same = o.thread[1:] == o.thread[:-1]
    assert (o.thread[1:] >= o.thread[:-1]).all()
    assert (o.start_ns[1:][same] >= o.end_ns[:-1][same]).all() and (o.end_ns > o.start_ns).all()
    names = {want.names[int(n)] for n in np.unique(o.name)}
    assert "## forward ##" in names and not any(n.startswith("ProfilerStep#") for n in names)
    twin = read_kineto(REAL, interpreted=True)
    monkeypatch.setattr(kineto, "CHUNK", chunk)
    for got in (read_kineto(REAL), twin):
        for f in ("start_ns", "end_ns", "thread", "name"):
            assert np.array_equal(getattr(got.top_ops, f), getattr(o, f)), f
        assert list(got.names.names()) == list(want.names.names())
