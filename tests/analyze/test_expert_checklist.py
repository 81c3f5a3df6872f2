"""An expert's checklist for every real trace in tests/data (issue 35, item 8).

Each file in tests/data/traces/checklists/ says what an expert checks first on one trace, written
from the trace file itself (its ``how`` says how each fact was read — Python's json or sqlite3,
never gitm's output): the hardware, the levers that device cannot do, kernels already launched
from CUDA graphs, the copies by direction and the collectives. The analysis is held to it, and to
what holds on every trace: the replay with no lever reproduces it, and the top lever sits under
its ceiling. (The ranks of a multi-rank job are held to HTA's straggler answer in
tests/analyze/test_straggler_hta.py.)"""

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

    # the hardware, named right (or unknown, never a neighbour)
    assert a.hardware.id == want["hardware"], a.hardware

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
            else:
                assert e.status != "not_applicable", e

    # the top lever within its ceiling; the replay reproduces the trace
    predicted = [e for e in a.interventions if e.status == "predicted"]
    if predicted:
        top = predicted[0]
        assert top.ceiling is not None and (top.predicted_gain or 0.0) <= top.ceiling + 1e-6
        assert a.replay is not None and a.replay.faithful, a.replay

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


LEVERS_REQ = {lv.id: lv.spec.requires for lv in LEVERS}
