"""An expert's checklist for every real trace in tests/data (issue 35, item 8).

Each file in tests/data/traces/checklists/ says what an expert checks first on one trace, written
from the trace file itself (its ``how`` says how each fact was read — Python's json or sqlite3,
never gitm's output): the hardware, the levers that device cannot do, kernels already launched
from CUDA graphs, the copies by direction and the collectives. The analysis is held to it, and to
what holds on every trace: the replay with no lever reproduces it, and the top lever sits under
its ceiling. (The ranks of a multi-rank job are held to HTA's straggler answer in
tests/analyze/test_straggler_hta.py.)

Some checklists hold more (each key optional, checked where present): ``device_name`` (the
device as the trace names it), ``roofline`` ("catalogue" or "estimate": where the peaks come
from), ``fp32_matrix_kernels`` (the matrix/attention kernels whose launching op's recorded
``Input type`` is float: no precision lever edits more rows or gains more time than they
have), ``classes`` (kernel-name prefix → the class the launching op or library gives it) and
``compute_bound_gemms`` (kernel-name prefixes of GEMMs whose every launch's recorded shape puts
them well past the device's ridge: labelled COMPUTE from the shapes, not from a name prior).
``known_failing`` names items the engine gets wrong today, each with the issue that fixes it:
the item is still checked, a failure makes the test xfail with that reason, and an item that
passes fails the test until the entry is removed (strict)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.analyze.compute import analyze_trace
from engine.levers.library import LEVERS
from engine.trace.read import read_trace
from tests.paths import TRACES

CHECKLISTS = sorted((TRACES / "checklists").glob("*.json"))


def test_every_real_trace_has_a_checklist():
    traces = sorted((TRACES / "kineto").glob("*.json.gz")) + sorted(
        (TRACES / "nsys").glob("*.sqlite")
    )
    listed = {json.loads(c.read_text())["trace"] for c in CHECKLISTS}
    assert {f"{p.parent.name}/{p.name}" for p in traces} == listed


@pytest.mark.parametrize("checklist", CHECKLISTS, ids=lambda p: p.stem)
def test_the_analysis_passes_the_experts_checklist(checklist: Path):
    want = json.loads(checklist.read_text())
    tr = read_trace(TRACES / want["trace"])
    a = analyze_trace(tr[0] if isinstance(tr, tuple) else tr).analysis
    known: dict[str, str] = want.get("known_failing", {})
    failed: dict[str, str] = {}

    def check(item: str, ok: bool, detail: object) -> None:
        assert item in known or ok, (item, detail)
        if item in known and not ok:
            failed[item] = known[item]

    # the hardware, named right (or unknown, never a neighbour), as the trace names it, and
    # where its roofline comes from
    check("hardware", a.hardware.id == want["hardware"], a.hardware)
    if "device_name" in want:
        check("device_name", a.hardware.reported_name == want["device_name"], a.hardware)
    if "roofline" in want:
        source = {"trace": "catalogue", "estimate": "estimate"}.get(a.hardware.detected_from)
        check("roofline", source == want["roofline"], a.hardware)

    # levers the device cannot do: never predicted; where the trace has their targets, "not
    # applicable" with the reason; every other lever is not refused for the device
    by = {e.lever: e for e in a.interventions}
    cannot = want["cannot_apply"]
    if cannot is None:  # device unknown: nothing device-dependent is judged
        assert all(e.status != "predicted" or LEVERS_REQ[e.lever] is None for e in by.values())
    else:
        for lever, e in by.items():
            if lever in cannot:
                assert e.status == "not_applicable" and "lacks" in e.basis, e
            else:  # (or the program shows none of the framework the lever configures)
                assert e.status != "not_applicable" or "the trace shows no " in e.basis, e

    # the top lever within its ceiling; the replay reproduces the trace
    predicted = [e for e in a.interventions if e.status == "predicted"]
    if predicted:
        top = predicted[0]
        assert top.ceiling is not None and (top.predicted_gain or 0.0) <= top.ceiling + 1e-6
        check("replay", a.replay is not None and a.replay.faithful, a.replay)

    # kernels already in graphs: counted as the trace links them, and named
    graphs = next((u for u in a.in_use if u.what == "cuda_graphs"), None)
    if want["graph_kernels"]:
        assert graphs is not None and graphs.rows == want["graph_kernels"], graphs
        assert graphs.of_rows == want["kernels"]
    else:
        assert graphs is None

    # copies and memsets, by direction, as what they are; the collectives
    copies = {
        f"{c.direction} {c.memory}".strip(): c.count for c in a.copies if c.direction != "memset"
    }
    assert copies == want["copies"]
    assert sum(c.count for c in a.copies if c.direction == "memset") == want["memsets"]
    assert sum(m.kernels for m in a.communication) == want["collectives"]

    # no precision lever proposes what the launching ops already use: it edits at most the
    # FP32-launched matrix rows and gains at most their time
    fp32 = want.get("fp32_matrix_kernels")
    if fp32 is not None:
        for e in a.interventions:
            if e.lever in ("tf32_matmul", "bf16_autocast") and e.status in ("predicted", "ceiling"):
                gain = e.predicted_gain if e.predicted_gain is not None else e.gain_high
                ok = fp32["rows"] > 0 and e.rows <= fp32["rows"]
                ok = ok and (gain or 0.0) * a.span_ns <= fp32["time_ns"] * 1.05 + 1000
                check("precision_levers", ok, (e, fp32))

    # kernel classes as the launching op or the library says, and large GEMMs' regime
    rows = a.top_kernels
    for prefix, klass in want.get("classes", {}).items():
        got = [k.klass for k in rows if k.name.startswith(prefix)]
        assert got, (prefix, "not among the top kernels: pick another")
        check("classes", set(got) == {klass}, (prefix, got))
    for prefix in want.get("compute_bound_gemms", []):
        labels = [(k.regime, k.tier) for k in rows if k.name.startswith(prefix)]
        assert labels, (prefix, "not among the top kernels: pick another")
        ok = all(r == "COMPUTE" and t in ("MEASURED", "DERIVED") for r, t in labels)
        check("compute_bound_gemms", ok, (prefix, labels))

    unused = set(known) - set(failed)
    assert not unused, ("known_failing items now pass: remove them", sorted(unused))
    if failed:
        pytest.xfail("; ".join(f"{k}: {v}" for k, v in sorted(failed.items())))


LEVERS_REQ = {lv.id: lv.spec.requires for lv in LEVERS}
