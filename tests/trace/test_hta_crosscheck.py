"""Cross-check with Holistic Trace Analysis (HTA, a test dependency) on every shipped Kineto trace:
GPU time per stream and idle time per stream (HTA's host/kernel/other split), like with like.

* ``--counting exact`` (our default: every GPU row, no step filter, exact ns) against HTA loaded
  with ``include_last_profiler_step=True`` — the HTA load closest to ours. It still drops, in a
  trace with two or more ProfilerSteps, the GPU rows without a launch event and those launched
  only after the last step's end. Ours are right to count them (our exact semantics: every row
  the GPU ran in the window). Two shipped traces have such rows: the CUDA-graph ones
  (a100_80gb_5streams_graphs: 872 rows, 59.5 ms; v100_16gb_ddp_graphs_3streams: 614 rows,
  56.5 ms), all in the first step, with correlation ids below the first recorded launch — work
  queued before the profiler recorded host calls, run inside the window. So the test finds those
  rows in the trace *independently* (the JSON parsed here, HTA's rule applied), leaves them out of
  ours, compares like with like, and asserts that they are exactly the difference: per stream,
  HTA's row count is ours less theirs, and its time ours less theirs (to the tolerance below).
* ``--counting hta`` (engine/analyze/breakdown/semantics.py) against HTA's *default* load
  (``include_last_profiler_step=False``: drops what is launched at or after the last
  ProfilerStep's start, and GPU rows without a launch event).
* MTIA: HTA counts every ``mtia_ccp_events`` row on a stream as GPU work, the stream's
  ``event_wait`` / ``event_record`` rows included; we import those as SYNC rows (the stream
  waiting for another, as CUDA's ``cuda_sync`` rows, which HTA leaves out of its idle breakdown
  too), not busy time. Like with like: the test counts them busy on our side and asserts that,
  per stream, they are exactly the difference.

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

from engine.analyze.breakdown.semantics import apply_counting
from engine.analyze.compute import analyze_trace
from engine.trace.kineto.kineto import read_kineto
from engine.trace.segments import Kind, Provenance, Segments
from engine.trace.trace import Trace
from tests.paths import TRACES

hta = pytest.importorskip("hta.trace_analysis")

KINETO_DIR = TRACES / "kineto"
KINETO = sorted(KINETO_DIR.rglob("*.json.gz"))  # with job128_two_ranks/rank-{0,1}
US = 1000  # HTA reports microseconds
#: what HTA's idle breakdown counts as work (BreakdownAnalysis.get_idle_time_breakdown), with
#: the 2021 schema's spellings, which HTA 0.5.0 lists too (v100_dgxs_32gb_resnet50_kineto2021)
_GPU_CATS = ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "mtia_ccp_events")
#: the categories a ProfilerStep#N range is written in: a user annotation, or in Kineto's 2021
#: schema an "Operator" (every CPU activity was one: engine/trace/kineto/json_scan.py)
_STEP_CATS = ("user_annotation", "Operator")

#: shipped traces in which HTA counts no GPU rows at all, and why. Asserted, not skipped: if HTA
#: starts counting them, or another trace ends up with none, the test says so.
HTA_SEES_NO_GPU_ROWS = {
    # CUPTI profiler-range mode: the kernels are ``cuda_profiler_range`` events, which have no
    # stream, so to HTA they are CPU ops; we read them as kernels with measured FLOPs
    "a100_cupti_counters.json.gz": "profiler-range kernels have no stream",
}
#: shipped traces HTA fails to load, with the error it raises. Asserted, not skipped: if HTA
#: loads one, the test says so. (mi300x_torch_compile_triton: HTA's
#: ``transform_correlation_to_index`` writes row indices up to 182 into a column pandas keeps as
#: int8, and pandas raises TypeError; our side is checked by the expert checklist instead)
HTA_CANNOT_LOAD = {
    "mi300x_torch_compile_triton.json.gz": TypeError,
}


def test_the_expectations_name_shipped_traces():
    """A renamed or removed trace must not leave a stale expectation behind."""
    assert len(KINETO) >= 6  # the shipped set (tests/data/traces/kineto)
    assert set(HTA_SEES_NO_GPU_ROWS) <= {p.name for p in KINETO}
    assert set(HTA_CANNOT_LOAD) <= {p.name for p in KINETO}


def _profiler_steps(path: Path) -> list[list[int]]:
    """[start_ns, end_ns] of each ``ProfilerStep#N`` user annotation (2021: "Operator"), in
    time order, parsed independently of our importer (``json`` with exact decimals)."""
    with gzip.open(path, "rb") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    steps = []
    for e in events:
        if e.get("cat") in _STEP_CATS and str(e.get("name", "")).startswith("ProfilerStep#"):
            ts, dur = Decimal(e["ts"]), Decimal(e["dur"])
            steps.append([int(ts * US), int((ts + dur) * US)])
    return sorted(steps)


def _hta_unlaunched(path: Path) -> list[tuple[int, int, int]]:
    """(stream, start_ns, end_ns) of each GPU row HTA's include-last load drops, found in the
    JSON parsed here (exact decimals), by HTA's rule (``Trace._filter_irrelevant_gpu_kernels``):
    with two or more distinct ProfilerStep names, a GPU row (stream >= 0 and correlation >= 0)
    stays only when some other event with its correlation id starts at or before the end of
    the last ProfilerStep; a row kept by several such events (HTA would count it several
    times) fails the test, so that case is met when it comes, not summed wrongly."""
    with gzip.open(path, "rb") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    timed = [e for e in events if isinstance(e, dict) and "dur" in e and e.get("cat")]
    steps = [e for e in timed if "ProfilerStep" in str(e.get("name", ""))]
    if len({e["name"] for e in steps}) < 2:
        return []

    def arg(e: dict, key: str) -> int:
        v = (e.get("args") or {}).get(key, -1)
        return int(v) if isinstance(v, int) else -1

    gpu = [e for e in timed if arg(e, "stream") >= 0 and arg(e, "correlation") >= 0]
    gpu_ids = {id(e) for e in gpu}
    last_end = max(Decimal(e["ts"]) + Decimal(e["dur"]) for e in steps if id(e) not in gpu_ids)
    launches: dict[int, int] = {}
    for e in timed:
        if id(e) not in gpu_ids and Decimal(e["ts"]) <= last_end and arg(e, "correlation") >= 0:
            c = arg(e, "correlation")
            launches[c] = launches.get(c, 0) + 1
    dropped = []
    for e in gpu:
        n = launches.get(arg(e, "correlation"), 0)
        assert n <= 1, (path.name, e, "HTA counts this row", n, "times: extend the test")
        if not n:
            ts, dur = Decimal(e["ts"]), Decimal(e["dur"])
            dropped.append((arg(e, "stream"), int(ts * US), int((ts + dur) * US)))
    return dropped


def _as_hta_counts(trace, dropped: list[tuple[int, int, int]]):
    """Our trace as HTA counts it: without the rows ``dropped`` (each found in ours exactly
    once) and, on MTIA, with the streams' event record / wait rows busy (see top). Returns it
    with the rows set aside and the rows made busy, each a Segments."""
    seg = trace.segments
    key: dict[tuple[int, int, int], list[int]] = {}
    rows_of = zip(seg.stream.tolist(), seg.start_ns.tolist(), seg.end_ns.tolist(), strict=True)
    for i, k in enumerate(rows_of):
        key.setdefault(k, []).append(i)
    out = np.zeros(len(seg), bool)
    for k in dropped:
        rows = [i for i in key.get(k, []) if not out[i]]
        assert rows, (k, "a row HTA drops is not in ours")
        out[rows[0]] = True
    busy = np.zeros(len(seg), bool)
    if trace.device_properties.get("platform") == "mtia":
        busy = seg.kind == Kind.SYNC
    cols = seg.columns()
    cols["kind"] = np.where(busy, np.uint8(Kind.KERNEL), seg.kind).astype(np.uint8)
    like = Segments(**{c: np.ascontiguousarray(a[~out]) for c, a in cols.items()})
    view = Trace(like, trace.names, trace.host, dict(trace.device_properties), trace.source)
    return view, seg.take(out), seg.take(busy)


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
            # a trace HTA cannot load fails the test, but the ones listed with their error
            if path.name in HTA_CANNOT_LOAD:
                with pytest.raises(HTA_CANNOT_LOAD[path.name]):
                    hta.TraceAnalysis(
                        trace_dir=str(d), include_last_profiler_step=include_last_profiler_step
                    )
                return None
            return hta.TraceAnalysis(
                trace_dir=str(d), include_last_profiler_step=include_last_profiler_step
            )
    finally:
        logging.disable(logging.NOTSET)


def _close(ours_ns: float, hta_us: float, slack_us: float) -> bool:
    return abs(ours_ns - hta_us * US) <= slack_us * US + 0.005 * max(abs(hta_us * US), 1.0) + 1.0


def _per_stream(seg, every: bool = False) -> dict[int, tuple[int, int]]:
    """{stream: (rows, ns)} of ``seg``'s rows that are GPU time (kernels, copies, memsets …;
    ``every``: all its rows)."""
    timed = np.isin(seg.kind, [Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM, Kind.RANGE])
    timed |= every
    out: dict[int, tuple[int, int]] = {}
    for st, d in zip(seg.stream[timed].tolist(), seg.duration_ns[timed].tolist(), strict=True):
        n, t = out.get(st, (0, 0))
        out[st] = (n + 1, t + d)
    return out


def _compare(
    path: Path,
    trace,
    ta,
    per_event_slack_us: float,
    extra_slack_us: float,
    dropped: list[tuple[int, int, int]] = (),  # type: ignore[assignment]
) -> None:
    """GPU time and idle split per stream, ours (``trace`` as counted) against HTA's ``ta``,
    like with like: without the rows HTA drops (``dropped``) and, on MTIA, with the rows HTA
    counts busy (see top), which must be, per stream, exactly the difference in rows and time."""
    if ta is None:  # HTA raised the error HTA_CANNOT_LOAD expects: nothing to compare
        assert path.name in HTA_CANNOT_LOAD
        return
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
    like, aside, busy = _as_hta_counts(trace, list(dropped))
    ours = analyze_trace(trace).analysis
    assert np.isfinite(ours.gpu_time_ns)
    # HTA's GPU rows include copies and memsets: so does the regime time of each stream
    ours_time = {s.stream: sum(s.regime_time_ns.values()) for s in ours.streams}
    ours_rows = _per_stream(trace.segments)
    less, more = _per_stream(aside), _per_stream(busy, every=True)
    by_stream = gpu.groupby("stream")["dur"].agg(["sum", "count"])
    assert set(by_stream.index) == set(_per_stream(like.segments)), (by_stream, ours_time)
    for stream, row in by_stream.iterrows():
        st = int(stream)
        n_less, t_less = less.get(st, (0, 0))
        n_more, t_more = more.get(st, (0, 0))
        # the rows set aside and the rows made busy are exactly the difference: in count …
        n_ours = ours_rows.get(st, (0, 0))[0]
        assert n_ours - n_less + n_more == int(row["count"]), (st, n_ours, n_less, n_more, row)
        # … and in time, to the rounding tolerance
        slack = per_event_slack_us * int(row["count"]) + extra_slack_us
        t_ours = ours_time.get(st, 0)
        assert _close(t_ours - t_less + t_more, float(row["sum"]), slack), (
            st,
            t_ours / US,
            t_less / US,
            t_more / US,
            float(row["sum"]),
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idle = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
    idle = idle[0] if isinstance(idle, tuple) else idle
    # the idle split of the rows HTA counts: our analysis of them
    like_rows = _per_stream(like.segments)
    for s in analyze_trace(like).analysis.streams:
        rows = idle[idle["stream"] == s.stream]
        assert not rows.empty, (s.stream, idle)
        get = {r.idle_category: float(r.idle_time) for r in rows.itertuples()}
        # each of the stream's rows (kernels, copies, memsets alike) bounds a gap
        slack = per_event_slack_us * (like_rows[s.stream][0] + 1) + extra_slack_us
        # HTA takes each gap from the previous row's end, negative where rows of the stream
        # overlap; ours takes the union (never negative): alike where no row overlaps, and
        # where some do, our split by HTA's rule (engine.analyze.breakdown.idle, hta=True) is compared
        assert min(s.idle.total_ns, s.idle.kernel_wait_ns, s.idle.other_ns) >= 0
        split = s.idle if not s.idle.overlapping_rows else _hta_rule(like, s.device, s.stream)
        for ours_ns, cat in (
            (split.host_wait_ns, "host_wait"),
            (split.kernel_wait_ns, "kernel_wait"),
            (split.other_ns, "other"),
        ):
            assert _close(ours_ns, get.get(cat, 0.0), slack), (s.stream, cat, split, get)


def _hta_rule(trace, device: int, stream: int):
    """One stream's idle split by HTA's own rule (gaps from the previous row's end)."""
    from engine.analyze.breakdown.idle import stream_idle
    from engine.analyze.breakdown.launches import launch_times

    seg = trace.segments
    rows = seg.take(np.isin(seg.kind, [Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM]))
    launch, _, _ = launch_times(rows, trace)
    sel = np.flatnonzero((rows.device == device) & (rows.stream == stream))
    sel = sel[np.argsort(rows.start_ns[sel], kind="stable")]
    return stream_idle(rows.start_ns[sel], rows.end_ns[sel], launch[sel], hta=True)


@pytest.mark.parametrize("path", KINETO, ids=lambda p: str(p.relative_to(KINETO_DIR)))
@pytest.mark.slow
def test_exact_counting_agrees_with_hta_including_the_last_step(path, tmp_path):
    trace = _read(path)
    counted, _ = apply_counting(trace, "exact")
    fractional = bool((trace.segments.start_ns % US).any())
    # fractional timestamps: HTA's rounding takes up to 2 µs off each duration (see top)
    ta = _hta(path, tmp_path, True)
    slack = 2.0 if fractional else 0.0
    _compare(path, counted, ta, slack, 0.0, _hta_unlaunched(path))


@pytest.mark.parametrize("path", KINETO, ids=lambda p: str(p.relative_to(KINETO_DIR)))
@pytest.mark.slow
def test_hta_counting_agrees_with_hta_default(path, tmp_path):
    trace = _read(path)
    counted, _ = apply_counting(trace, "hta")
    # rows spanning no whole µs: HTA gives them −1 µs, we 0 µs, so 1 µs each (see top)
    s = trace.segments
    short = int(((s.end_ns // US) < -(-s.start_ns // US)).sum())
    _compare(path, counted, _hta(path, tmp_path, False), 0.0, float(short))
