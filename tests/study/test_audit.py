"""EESM audit: the do-operators keep what they must, the ledger verifies, a tampered ledger is
rejected with the line that differs, and the committed JSON Schema is the model's."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from engine.device.simulator import simulate
from engine.study import interventions as ops
from engine.study.audit import AuditLedger, run_audit, verify
from engine.trace.segments import Kind
from tests.paths import ROOT, TRACES


@pytest.fixture(scope="module")
def seg_truth():
    b, _ = simulate("af2", 6, seed=3)
    return b.segments, b.truth


def test_jitter_keeps_durations_and_rows(seg_truth):
    seg, _ = seg_truth
    s2, align = ops.jitter(seg, 2000.0, 1)
    assert np.array_equal(align, np.arange(len(seg)))
    assert np.array_equal(s2.duration_ns, seg.duration_ns) and not np.array_equal(
        s2.start_ns, seg.start_ns
    )
    assert np.array_equal(ops.jitter(seg, 2000.0, 1)[0].start_ns, s2.start_ns)  # seeded


def test_reorder_keeps_every_stream_order_and_changes_the_interleaving(seg_truth):
    seg, _ = seg_truth
    s2, align = ops.reorder(seg, 50_000.0, 7)
    assert np.array_equal(s2.name[align], seg.name)  # align maps each row to its copy
    for s in np.unique(seg.stream):
        a = seg.start_ns[seg.stream == s]
        b = s2.start_ns[align][seg.stream == s]
        assert np.array_equal(np.argsort(a, kind="stable"), np.argsort(b, kind="stable"))
        assert np.all(np.diff(np.sort(b)) == np.diff(np.sort(a)))  # gaps kept
    glob = lambda t: tuple(t.stream[np.argsort(t.start_ns, kind="stable")].tolist())  # noqa: E731
    assert glob(s2) != glob(seg)


def test_fuse_merges_adjacent_fusable_kernels_with_counters_combined(seg_truth):
    seg, truth = seg_truth
    s2, align = ops.fuse(seg, 1.0, 0)
    assert len(s2) < len(seg) and align.max() == len(s2) - 1
    for g in np.unique(align[np.bincount(align)[align] > 1])[:20]:
        parts = np.flatnonzero(align == g)
        assert len(set(seg.stream[parts].tolist())) == 1 and (seg.kind[parts] == Kind.KERNEL).all()
        assert (
            s2.start_ns[g] == seg.start_ns[parts].min() and s2.end_ns[g] == seg.end_ns[parts].max()
        )
        assert s2.flops[g] == pytest.approx(seg.flops[parts].sum())
        assert s2.dram_bytes[g] == pytest.approx(seg.dram_bytes[parts].sum())
        assert (
            min(seg.issue_active[parts]) - 1e-6
            <= s2.issue_active[g]
            <= max(seg.issue_active[parts]) + 1e-6
        )
    t2 = ops.truth_after_fuse(truth, align, len(s2))
    assert len(t2) == len(s2)
    assert len(ops.fuse(seg, 0.0, 0)[0]) == len(seg)  # prob 0: nothing fused


@pytest.mark.slow
def test_calibrated_ledger_verifies_and_a_tampered_one_is_rejected(tmp_path):
    led = run_audit(["calibrated"], seeds=2)
    assert {c.synthetic for c in led.corpus} == {True} and all(c.generated_by for c in led.corpus)
    variants = {r.variant for r in led.results}
    assert variants == {"full", "abl1_no_tstream", "abl2_no_bound", "abl3_no_kappa", "raw"}
    assert all(0 <= r.pcs.mean <= 1 and r.accuracy is not None for r in led.results)
    assert verify(led) == []
    bad = led.model_copy(deep=True)
    bad.results[4].pcs.mean = 0.5
    diffs = verify(bad)
    assert diffs and diffs[0].startswith("results[4].pcs.mean: ledger 0.5")


@pytest.mark.slow
def test_cli_audit_on_a_real_trace_and_verify(tmp_path):
    path = TRACES / "kineto" / "a100_training_3streams.json.gz"
    out = tmp_path / "audit_ledger.json"
    cli = [sys.executable, "-m", "gitm_tui", "audit"]
    r = subprocess.run(
        [*cli, str(path), "--seeds", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    led = AuditLedger.model_validate_json(out.read_text())
    assert led.corpus[0].kind == "trace" and not led.corpus[0].synthetic
    assert all(r.accuracy is None for r in led.results)  # no ground truth for a real trace
    ok = subprocess.run([*cli, "--verify", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0 and "verified" in ok.stderr
    data = json.loads(out.read_text())
    data["equivalence"][0]["agreement"]["mean"] = 0.123
    out.write_text(json.dumps(data))
    bad = subprocess.run([*cli, "--verify", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 3 and "REJECTED" in bad.stderr
    assert "equivalence[0].agreement.mean: ledger 0.123" in bad.stderr


def test_committed_schema_is_the_models():
    committed = json.loads(
        (ROOT / "manifests" / "schemas" / "audit_ledger.schema.json").read_text()
    )
    assert committed == AuditLedger.model_json_schema()


@pytest.mark.slow
def test_paper_regenerates_byte_for_byte(tmp_path):
    """paper/EESM_GPU_TELEMETRY.md and paper/reference_tables.json are what `gitm-tui audit
    --paper` writes from a fresh run (same corpus: the calibrated one + the shared traces)."""
    from engine.study.paper import default_traces, write_paper

    traces = default_traces(ROOT)
    assert traces, "tests/data/traces is missing: the committed paper includes them"
    md, tables = write_paper(tmp_path, traces)
    assert md.read_bytes() == (ROOT / "paper" / "EESM_GPU_TELEMETRY.md").read_bytes()
    assert tables.read_bytes() == (ROOT / "paper" / "reference_tables.json").read_bytes()
    text = md.read_text()
    for claim in ("PCS full > raw", "Abl_1", "HBM saturation", "δ_reord"):
        assert claim in text
    assert "synthetic" in text and "Limitations" in text


async def test_audit_screen_shows_the_ledger(tmp_path):
    from textual.widgets import DataTable

    from gitm_tui.app import make_audit_app

    led = run_audit(["calibrated"], seeds=2)
    app = make_audit_app(led, "audit_ledger.json")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause(0.2)
        pcs = app.query_one("#pcs", DataTable)
        assert pcs.row_count == len(led.corpus) * len(led.operators)
        assert len(pcs.columns) == 2 + 5
        assert app.query_one("#geo", DataTable).row_count == len(led.kappa_geometry)
        header = str(app.query_one("#audit-header").render())
        assert "SYNTHETIC" in header
        await pilot.press("q")


@pytest.mark.parametrize(
    "change",
    [
        {"corpus_spec": ["/etc/passwd"]},  # not a trace
        {"corpus_spec": ["/dev/null"]},  # a device, not a file
        {"seeds": 10**400},  # more than any int type
        {"seeds": 10**9},  # hours of work asked by a file
        {"seeds": -3},
    ],
    ids=["passwd", "device", "seeds-10e400", "seeds-10e9", "seeds-negative"],
)
def test_a_hostile_ledger_is_one_line_and_exit_3(tmp_path, capsys, change):
    """Issue 36: a ledger is input. Its corpus must be readable traces (or 'calibrated') and its
    seeds within MAX_SEEDS — checked before any work; each case was a crash (exit 1) or a run
    that did not end."""
    from gitm_tui.cli import main

    led = json.loads(run_audit(["calibrated"], seeds=1).model_dump_json())
    led.update(change)
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(led))
    rc = main(["audit", "--verify", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 3 and len(err) == 1 and err[0].startswith("gitm-tui: error:"), err
