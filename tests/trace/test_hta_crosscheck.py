"""Cross-check with Holistic Trace Analysis (HTA, a test dependency) on every shipped Kineto trace:
GPU time per stream and idle time per stream (HTA's host/kernel/other split), like with like.

* ``--counting exact`` (our default: every GPU row, no step filter, exact ns) against HTA loaded
  with ``include_last_profiler_step=True`` — the HTA load closest to ours (it still drops GPU
  rows without a launch event and rows after the last step's end; the shipped traces have none).
* ``--counting hta`` (engine/analyze/semantics.py) against HTA's *default* load
  (``include_last_profiler_step=False``: drops what is launched at or after the last
  ProfilerStep's start, and GPU rows without a launch event).

Tolerances. Where a trace's timestamps are whole µs (the older NVIDIA traces) both sides hold the
same integers, so we require 0.5 % (+1 ns). HTA keeps whole microseconds: on fractional
timestamps (ROCm, newer PyTorch) it rounds each start up and each end down, so in exact mode each
of its durations can be up to 2 µs shorter than ours and the bound is 2 µs per event (the test
says how far apart the two are). In hta mode we round as HTA does, so the 0.5 % bound holds there
too, plus 1 µs per row that spans no whole µs (HTA gives those −1 µs, we 0: counted by
apply_counting).
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
import warnings
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from engine.analyze.compute import analyze_trace
from engine.analyze.semantics import apply_counting
from engine.trace.kineto import read_kineto
from engine.trace.segments import Provenance
from tests.paths import TRACES

hta = pytest.importorskip("hta.trace_analysis")

KINETO_DIR = TRACES / "kineto"
KINETO = sorted(KINETO_DIR.glob("*.json.gz"))
US = 1000  # HTA reports microseconds
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")  # what HTA's idle breakdown counts as work

#: shipped traces in which HTA counts no GPU rows at all, and why. Asserted, not skipped: if HTA
#: starts counting them, or another trace ends up with none, the test says so.
HTA_SEES_NO_GPU_ROWS = {
    # CUPTI profiler-range mode: the kernels are ``cuda_profiler_range`` events, which have no
    # stream, so to HTA they are CPU ops; we read them as kernels with measured FLOPs
    "a100_cupti_counters.json.gz": "profiler-range kernels have no stream",
}


def test_the_expectations_name_shipped_traces():
    """A renamed or removed trace must not leave a stale expectation behind."""
    assert len(KINETO) >= 6  # the shipped set (tests/data/traces/kineto)
    assert set(HTA_SEES_NO_GPU_ROWS) <= {p.name for p in KINETO}


def _profiler_steps(path: Path) -> list[list[int]]:
    """[start_ns, end_ns] of each ``ProfilerStep#N`` user annotation, in time order, parsed
    independently of our importer (``json`` with exact decimals)."""
    with gzip.open(path, "rb") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    steps = []
    for e in events:
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"):
            ts, dur = Decimal(e["ts"]), Decimal(e["dur"])
            steps.append([int(ts * US), int((ts + dur) * US)])
    return sorted(steps)


def _read(path: Path):
    """Our trace with its ProfilerStep boundaries: the importer's when it records them (checked
    against the independent parse), else the independent parse's."""
    trace = read_kineto(path)
    steps = _profiler_steps(path)
    if "profiler_steps" in trace.device_properties:
        assert [list(map(int, s)) for s in trace.device_properties["profiler_steps"]] == steps
    else:
        trace.device_properties["profiler_steps"] = steps
    return trace


def _hta(path: Path, tmp: Path, include_last_profiler_step: bool):
    d = tmp / path.stem
    d.mkdir()
    shutil.copy(path, d)
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # a trace HTA cannot load fails the test: every shipped trace loads today
            return hta.TraceAnalysis(
                trace_dir=str(d), include_last_profiler_step=include_last_profiler_step
            )
    finally:
        logging.disable(logging.NOTSET)


def _close(ours_ns: float, hta_us: float, slack_us: float) -> bool:
    return abs(ours_ns - hta_us * US) <= slack_us * US + 0.005 * max(abs(hta_us * US), 1.0) + 1.0


def _compare(path: Path, trace, ta, per_event_slack_us: float, extra_slack_us: float) -> None:
    """GPU time and idle split per stream, ours (``trace`` as counted) against HTA's ``ta``."""
    rank = next(iter(ta.t.traces))
    df = ta.t.get_trace(rank)
    sym = ta.t.symbol_table.get_sym_id_map()
    cats = [sym.get(c, -1000) for c in _GPU_CATS]
    gpu = df[df["cat"].isin(cats) & df["stream"].ne(-1)]
    if path.name in HTA_SEES_NO_GPU_ROWS:
        assert gpu.empty, f"HTA now counts GPU rows in {path.name}: update the expectation"
        s = trace.segments
        # ours: the profiler ranges, every one with measured FLOPs
        assert len(s) and ((s.provenance & Provenance.FLOPS) > 0).all()
        return
    assert not gpu.empty, f"HTA finds no GPU rows in {path.name}"
    ours = analyze_trace(trace).analysis
    assert np.isfinite(ours.gpu_time_ns)
    # HTA's GPU rows include copies and memsets: so does the regime time of each stream
    ours_time = {s.stream: sum(s.regime_time_ns.values()) for s in ours.streams}
    by_stream = gpu.groupby("stream")["dur"].agg(["sum", "count"])
    assert set(by_stream.index) == set(ours_time), (by_stream, ours_time)
    for stream, row in by_stream.iterrows():
        slack = per_event_slack_us * int(row["count"]) + extra_slack_us
        assert _close(ours_time[int(stream)], float(row["sum"]), slack), (
            stream,
            ours_time[int(stream)] / US,
            float(row["sum"]),
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idle = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
    idle = idle[0] if isinstance(idle, tuple) else idle
    for s in ours.streams:
        rows = idle[idle["stream"] == s.stream]
        assert not rows.empty, (s.stream, idle)
        get = {r.idle_category: float(r.idle_time) for r in rows.itertuples()}
        slack = per_event_slack_us * (s.kernels + 1) + extra_slack_us
        for ours_ns, cat in (
            (s.idle.host_wait_ns, "host_wait"),
            (s.idle.kernel_wait_ns, "kernel_wait"),
            (s.idle.other_ns, "other"),
        ):
            assert _close(ours_ns, get.get(cat, 0.0), slack), (s.stream, cat, s.idle, get)


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
@pytest.mark.slow
def test_exact_counting_agrees_with_hta_including_the_last_step(path, tmp_path):
    trace = _read(path)
    counted, _ = apply_counting(trace, "exact")
    fractional = bool((trace.segments.start_ns % US).any())
    # fractional timestamps: HTA's rounding takes up to 2 µs off each duration (see top)
    _compare(path, counted, _hta(path, tmp_path, True), 2.0 if fractional else 0.0, 0.0)


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
@pytest.mark.slow
def test_hta_counting_agrees_with_hta_default(path, tmp_path):
    trace = _read(path)
    counted, _ = apply_counting(trace, "hta")
    # rows spanning no whole µs: HTA gives them −1 µs, we 0 µs, so 1 µs each (see top)
    s = trace.segments
    short = int(((s.end_ns // US) < -(-s.start_ns // US)).sum())
    _compare(path, counted, _hta(path, tmp_path, False), 0.0, float(short))
