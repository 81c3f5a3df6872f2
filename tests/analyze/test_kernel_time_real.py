"""Issue 35 on the real traces with recorded shapes: the kernel-time invariant flags at most
10 % of the kernels it can judge, every flag shows observed vs its bound, no derived row is
judged "faster than physics", and the Perfetto export carries the report's tiers."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from engine.analyze.compute import analyze_trace
from engine.analyze.output.export import perfetto_json
from engine.analyze.run import load_trace
from engine.planner.graph import above_peak, trace_roofline
from engine.trace.segments import Kind, Provenance

DATA = Path(__file__).resolve().parents[1] / "data" / "traces" / "kineto"
#: the real traces whose ops carry recorded shapes (their kernels get DERIVED work)
WITH_SHAPES = (
    "v100_16gb_ddp_graphs_3streams.json.gz",
    "a100_80gb_5streams_graphs.json.gz",
    "a100_training_3streams.json.gz",
)


@pytest.fixture(scope="module", params=WITH_SHAPES)
def analysed(request):
    trace = load_trace(str(DATA / request.param))
    return analyze_trace(trace, top=10_000)


def test_kernel_time_flags_at_most_a_tenth_of_what_it_judges(analysed):
    kt = next(i for i in analysed.analysis.invariants if i.invariant == "kernel_time")
    assert kt.checkable and kt.checked > 1000  # it judges: the bound is not switched off
    assert kt.violating_rows <= 0.10 * kt.checked, (kt.violating_rows, kt.checked)
    for v in kt.violations:  # each flag shows the observed time against its bound
        assert v.unit == "ns" and v.observed > v.predicted
        assert f"{v.observed:.0f} ns observed" in v.message


def test_no_derived_row_is_called_faster_than_the_hardware(analysed):
    kt = next(i for i in analysed.analysis.invariants if i.invariant == "kernel_time")
    assert not [v for v in kt.violations if "faster" in v.message]
    rows = analysed.rows
    derived = (rows.provenance & Provenance.DERIVED) != 0
    hw_rows = rows.kind == Kind.KERNEL
    assert (derived & hw_rows).any()


def test_a_gemm_ops_flops_are_not_put_on_its_split_k_reduction(analysed):
    rows, names = analysed.rows, analysed.trace.names
    aux = np.array(
        ["splitKreduce" in names[int(n)] or "epilogue::" in names[int(n)] for n in rows.name]
    )
    derived = (rows.provenance & Provenance.DERIVED) != 0
    assert not (aux & derived).any()


def test_perfetto_rows_carry_the_reports_tier_and_confidence(analysed):
    a = analysed.analysis
    by_name: dict[str, list[tuple[float, str, float | None]]] = defaultdict(list)
    for line in perfetto_json(analysed).splitlines():
        line = line.strip().rstrip(",")
        if '"cat":"gpu"' not in line:
            continue
        ev = json.loads(line)
        by_name[ev["name"]].append((float(ev["dur"]), ev["args"]["tier"], ev["args"]["confidence"]))
    checked = 0
    for k in a.top_kernels:
        if k.tier == "-":
            continue
        evs = by_name[k.name]
        weight: dict[str, float] = defaultdict(float)
        for dur, tier, _ in evs:
            weight[tier] += max(dur, 1e-3)
        assert max(weight, key=lambda t: weight[t]) == k.tier, k.name
        confs = [c for _, _, c in evs if c is not None]
        if k.confidence is not None:
            assert abs(float(np.mean(confs)) - k.confidence) < 2e-3, k.name
        checked += 1
    assert checked > 10


def test_on_unknown_hardware_no_output_says_derived():
    trace = load_trace(str(DATA / "a100_training_3streams.json.gz"))
    trace.device_properties["devices"] = []  # no device: the hardware is unknown
    res = analyze_trace(trace, top=10_000)
    assert res.analysis.hardware.id is None
    assert all(k.tier != "DERIVED" for k in res.analysis.top_kernels)
    assert '"tier":"DERIVED"' not in perfetto_json(res)


def test_above_peak_is_what_the_invariant_leaves_unjudged(analysed):
    from engine.analyze.compute import _hardware

    hw = _hardware(analysed.trace, None).peaks
    assert hw is not None
    rows = analysed.rows
    ideal, _ = trace_roofline(rows, hw)
    n = int(above_peak(rows, ideal).sum())
    kt = next(i for i in analysed.analysis.invariants if i.invariant == "kernel_time")
    assert (f"Not judged: {n} rows" in kt.reason) == (n > 0)
