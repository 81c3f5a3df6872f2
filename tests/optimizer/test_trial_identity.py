"""Trials credited only for the same workload (issue 39): each trial's fingerprint against that
of the state it changed, the lever's own change allowed; anything else rolls the trial back with
the reason, journaled and in the report — and a loop with no trace of its trials says so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.levers.library import by_id as lever_by_id
from engine.optimizer.loop import NOT_CHECKED, Optimizer, trial_allowance
from engine.optimizer.report import write_run
from engine.store.journal import State, read

#: each test measures a gain on a real program: never beside another test (tests/conftest.py)
pytestmark = pytest.mark.quiet


def _proposed(run_dir: Path, lever: str) -> tuple[Optimizer, str]:
    """The simulated hft-lob loop up to its proposals, with ``lever`` approved."""
    o = Optimizer("hft-lob", run_dir, seed=0)
    o.target = 0.15
    o.profile()
    o.analyse()
    o.propose(o.rank())
    iid = next(iv.iid for iv in o.interventions.values() if iv.lever_id == lever)
    o.approve(iid, "test")
    return o, iid


def _records(o: Optimizer, iid: str, kind: str) -> list[dict]:
    return [r for r in read(o.journal.path) if r.get("type") == kind and r.get("id") == iid]


def test_a_lever_that_also_drops_a_kernel_class_is_rolled_back(tmp_path, monkeypatch):
    """CUDA graphs that also leave out the step's reductions (a lever that skips work): faster,
    but not the baseline's workload — graphs may cut launches, not kernels."""
    graphs = type(lever_by_id("cuda_graphs"))
    real = graphs.apply

    def graphs_and_no_reductions(self, state):
        s = real(self, state)
        return s.with_program([op for op in s.program() if getattr(op, "klass", "") != "REDUCTION"])

    monkeypatch.setattr(graphs, "apply", graphs_and_no_reductions)
    o, iid = _proposed(tmp_path, "cuda_graphs")
    before = o.state
    iv = o.trial(iid)
    assert iv.measured_gain is not None and iv.measured_gain > 0.05  # it was faster…
    assert iv.state == State.ROLLED_BACK  # …and rolled back for what it ran
    assert iv.note.startswith(
        "workload changed: not the baseline's workload (cuda_graphs allows fewer launches"
    )
    assert "reduce_kernel<risk_variance>" in iv.note
    assert o.state == before and iid not in o.kept and iid not in o.trial_traces
    (ident,) = _records(o, iid, "identity")
    assert ident["credited"] is False and ident["distance"] > 0
    assert ident["reason"] in iv.note
    last = _records(o, iid, "transition")[-1]
    assert last["to"] == "ROLLED_BACK" and last["reason"] == iv.note
    md, _ = write_run(o, o.finish(0.15), {})
    text = md.read_text()
    assert f"- {iid} cuda_graphs: workload changed: not the baseline's workload" in text
    assert "- Workload identity: not the baseline's workload" in text


def test_the_lever_as_it_is_is_credited_and_its_trace_diff_kept(tmp_path):
    o, iid = _proposed(tmp_path, "cuda_graphs")
    iv = o.trial(iid)
    assert iv.state == State.VERIFIED, iv.note
    (ident,) = _records(o, iid, "identity")
    assert ident["credited"] is True and ident["reason"].startswith("same workload (cuda_graphs")
    assert iid in o.trial_traces  # the report's trace diff: the state before → the trial


def test_a_trial_may_change_only_what_its_lever_is_meant_to():
    """The allowance the loop uses: the manifest's, and the dtype mix's counts for a lever that
    may change how many kernels some classes have (fusion) or move host operators (loader
    workers); not for one that may not."""
    fusion = trial_allowance("elementwise_fusion").spec
    assert fusion.dtypes and "ELEMENTWISE" in fusion.classes and fusion.launches == "fewer"
    graphs = trial_allowance("cuda_graphs").spec
    assert not graphs.dtypes and not graphs.classes
    # loader workers move the collate ops out of the traced process: their inputs' types go
    # with them (the operators both sides run keep their shapes: a changed batch still shows)
    workers = trial_allowance("loader_workers").spec
    assert workers.dtypes and workers.operators and workers.shapes == "same"
    assert not trial_allowance("not_a_lever").spec.dtypes


def test_a_command_workload_says_its_trials_workload_was_not_checked(tmp_path):
    from engine.optimizer.command_loop import CommandOptimizer
    from engine.workloads.command import ChoiceLever, CommandSpec, CommandWorkload

    prog = "import os; print('time_ms=' + str(10 - 2 * int(os.environ['KX'])))"
    spec = CommandSpec(
        argv=(sys.executable, "-S", "-c", prog),
        metric=r"time_ms=([0-9.]+)",
        levers=(ChoiceLever.parse("x=env:KX=0,1"),),
    )
    o = CommandOptimizer(CommandWorkload(spec), tmp_path, repeats=2)
    o.target = 0.1
    o.profile()
    g = o.qualify()
    assert g.decision == "commit" and g.reachable is None  # no ceiling for a black box
    o.analyse()
    (iv,) = o.propose(o.rank())
    o.approve(iv.iid, "test")
    o.trial(iv.iid)
    assert iv.state == State.VERIFIED, iv.note  # 10 → 8: a real gain, measured
    (ident,) = _records(o, iv.iid, "identity")
    assert ident["credited"] is None and ident["reason"] == NOT_CHECKED
    md, _ = write_run(o, o.finish(0.1), {})
    assert f"- Workload identity: {NOT_CHECKED}" in md.read_text()


@pytest.mark.slow
def test_a_torch_trial_that_halves_the_batch_is_rolled_back():
    """A lever that feeds the model half of each batch (as a loader lever would: the
    reference-step check cannot see it) looks twice as fast per sample: the capture of its
    trial shows other input shapes, and it is rolled back."""
    torch = pytest.importorskip("torch")
    from engine import optimize
    from engine.levers.torch_levers import TorchLever, Undo
    from engine.workloads.models import job
    from engine.workloads.torch_job import Batches, TorchJob

    class HalfTheBatch(TorchLever):
        checkable = False  # it changes only where batches come from

        def applicable(self, j: TorchJob) -> tuple[bool, str]:
            return True, "a test lever"

        def apply(self, j: TorchJob) -> Undo:
            first = Batches(j).next()

            def cut(x):
                if isinstance(x, torch.Tensor):
                    return x[: max(1, x.shape[0] // 2)]
                return type(x)(cut(v) for v in x)

            src, half = j.batches, cut(first)
            j.batches = lambda: half
            return lambda: setattr(j, "batches", src)

    j = job("hft-lob", "cpu", "tiny")
    res = optimize(
        j, budget="40s", target=0.3, repeats=2, levers=(HalfTheBatch("half", "x", "SAFE", ""),)
    )
    (iv,) = res.interventions.values()
    assert iv["state"] == "ROLLED_BACK", iv["note"]
    assert iv["note"].startswith("workload changed: not the baseline's workload (half allows")
    assert "shapes" in iv["note"] and "restored exactly" in iv["note"]
    recs = read(Path(res.run_dir) / "journal.jsonl")
    (ident,) = [r for r in recs if r.get("type") == "identity"]
    assert ident["credited"] is False
    assert sorted(p.name for p in (Path(res.run_dir) / "captures").iterdir()) == [
        "baseline.json",
        "half.json",
    ]
