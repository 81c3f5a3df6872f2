"""The qualification gate (issue 39): in the Profile phase, before any lever is tried, commit to
the target or diagnose why not — out of reach of the applicable levers' ceilings, or not
measurable on the machine's noise — and end the run there unless ``--force``."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from engine.levers.library import LEVERS
from engine.measure import Block, Comparison, params, plan
from engine.optimizer.gate import LeverCeiling, Reach, combine, qualify
from engine.optimizer.loop import Optimizer
from engine.runtime import Engine, RunConfig
from engine.runtime.config import phase_deadline
from engine.runtime.events import GateDecided, PhaseChanged, RunFinished
from engine.store.journal import check, read


# ------------------------------------------------------------------------------ the arithmetic
def _plan(spread: float, target: float, pairs: int = 4, time_left: float = 100.0):
    """A noise plan from a synthetic A/A: ``pairs`` pairs whose log-ratios alternate ±spread."""
    a = tuple(100.0 for _ in range(pairs))
    b = tuple(100.0 * float(np.exp(spread * (-1) ** i)) for i in range(pairs))
    return plan(Comparison(a, b), target, pair_s=1.0, time_left_s=time_left)


def test_time_removed_adds_host_parts_cap_at_the_idle_and_per_sample_gains_compose():
    cs = [
        LeverCeiling("graphs", 0.30, host=0.30),
        LeverCeiling("sync", 0.20, host=0.20),
        LeverCeiling("tf32", 0.10, device=0.10),
        LeverCeiling("batch", 0.50, per_sample=True),
        LeverCeiling("unknown", None),
    ]
    free = combine(cs, None)
    assert free.gain == pytest.approx(1 - (1 - 0.60) * 0.5) and free.capped_from is None
    # the host parts together (0.5) cannot take more than the 0.25 the device idles
    capped = combine(cs, 0.25)
    assert capped.gain == pytest.approx(1 - (1 - 0.35) * 0.5)
    assert capped.capped_from == pytest.approx(0.5)


def test_an_out_of_reach_target_is_diagnosed_with_each_ceiling_and_its_prior():
    reach = Reach(
        (
            LeverCeiling("cuda_graphs", 0.040, host=0.040),
            LeverCeiling("tf32_matmul", 0.022, 0.011, device=0.022, prior="PEAK_RATIO 0.5–1"),
        ),
        room=0.5,
        not_applicable={"sdpa_flash": "no unfused attention"},
    )
    g = qualify(0.15, _plan(0.002, 0.15), reach)
    assert g.decision == "diagnose" and g.diagnosed and g.verdict == "out of reach"
    assert g.measurable is True and g.reachable is False
    assert g.combined == pytest.approx(0.062)
    assert "target 15% > the levers' combined ceiling 6.2%" in g.line
    assert "cuda_graphs ≤ 4.0%" in g.line and "tf32_matmul ≤ 2.2% (prior: 1.1% … 2.2%)" in g.line
    assert "over PEAK_RATIO 0.5–1" in g.reach_line  # the full line names the prior's range
    assert any("at or below 6.2%" in h for h in g.helps)
    assert any("sdpa_flash (no unfused attention)" in h for h in g.helps)
    forced = qualify(0.15, _plan(0.002, 0.15), reach, forced=True)
    assert forced.decision == "diagnose" and forced.forced and not forced.diagnosed
    assert forced.forced_line().startswith("the gate said diagnose (target 15% >")
    assert forced.forced_line().endswith("; overridden by --force")
    # within reach: commit, with both halves' figures
    ok = qualify(0.05, _plan(0.002, 0.05), reach)
    assert ok.decision == "commit" and ok.reachable is True and not ok.helps
    assert "target 5% ≤ the levers' combined ceiling 6.2%" in ok.line and "measurable" in ok.line


def test_a_noisy_baseline_is_not_measurable_and_says_what_would_help():
    p = _plan(0.25, 0.10, time_left=8.0)  # ±25 % pair to pair, 8 pairs' time for the run
    assert not p.measurable
    g = qualify(0.10, p, Reach((LeverCeiling("cuda_graphs", 0.5, host=0.5),), room=0.6))
    assert g.decision == "diagnose" and g.measurable is False and g.reachable is True
    assert g.verdict == "not measurable"
    assert "not measurable" in g.line and "noise floor ±" in g.line
    assert f"> {params().resolution:.0%} of the 10% target" in g.line
    assert any("a quieter machine" in h for h in g.helps)


def test_unknown_stays_unknown_the_gate_commits_and_says_why():
    blind = Reach((LeverCeiling("threads=4", None),), unknown="a command has no device trace")
    g = qualify(0.5, _plan(0.002, 0.5), blind)
    assert g.decision == "commit" and g.reachable is None
    assert "reachability unknown: a command has no device trace" in g.line
    assert "committing on the noise alone" in g.line
    # judged ceilings short of the target, and one lever with none: cannot tell either
    part = Reach((LeverCeiling("a", 0.05, device=0.05), LeverCeiling("b", None)), room=None)
    g = qualify(0.5, _plan(0.002, 0.5), part)
    assert g.decision == "commit" and g.reachable is None and "b has no ceiling" in g.line
    # an A/A that never completed: the noise is unknown, nothing can be judged against it
    cut = plan(Comparison((100.0,), (101.0,)), 0.1, 1.0, 10.0)
    g = qualify(0.1, cut, part)
    assert g.decision == "diagnose" and g.measurable is False and "noise unknown" in g.line


@pytest.fixture(scope="module")
def profiled() -> dict[str, Optimizer]:
    """Each simulated workload's loop after its profile phase (A/A) and attribution."""
    out = {}
    for wl in ("hft-lob", "af2", "kitti"):
        o = Optimizer(wl, Path(tempfile.mkdtemp(prefix="gate-")), seed=0)
        o.target = 0.15
        o.profile()
        o.analyse()
        out[wl] = o
    return out


@pytest.mark.parametrize("wl", ["hft-lob", "af2", "kitti"])
def test_each_ceiling_bounds_the_replay_of_its_lever(profiled, wl):
    """A ceiling counts what a lever's transform takes out of the baseline graph at the
    favourable end of its priors: never below the loop's own replayed gain of that lever."""
    o = profiled[wl]
    reach = o.reach()
    ceil = {c.lever: c for c in reach.ceilings}
    cands = [c for c in o.rank() if c.applicable]
    assert cands
    for c in cands:
        assert c.lever.id in ceil, c.lever.id
        assert ceil[c.lever.id].high >= c.predicted_gain - 1e-9, (c.lever.id, ceil[c.lever.id])
    assert 0 < reach.room < 1
    # the levers that do not apply say why, for the diagnosis
    assert set(reach.not_applicable) | set(ceil) == {lv.id for lv in LEVERS}


def test_out_of_reach_says_first_what_bounds_the_step(profiled):
    """The diagnosis of an unreachable target starts its advice with the baseline's critical
    path (issue 46): on the launch-bound hft-lob, the host bounds the step."""
    reach = profiled["hft-lob"].reach()
    assert reach.bound.startswith("bound by host/framework")
    g = qualify(0.99, None, reach)
    assert g.decision == "diagnose" and g.reachable is False
    assert g.helps[0] == f"first, what bounds the step: {reach.bound}"


# ------------------------------------------------------------------------------ a whole run
async def _run(cfg: RunConfig, tmp_path: Path, monkeypatch) -> tuple[Engine, list]:
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    eng = Engine(cfg)
    sub = eng.bus.subscribe()
    task = asyncio.ensure_future(eng.run())
    evs = [ev async for ev in sub]
    await task
    return eng, evs


_FAST = dict(realtime=False, max_windows=2, approve="auto", seed=0)


async def test_an_out_of_reach_target_ends_in_a_diagnosis_within_profile(tmp_path, monkeypatch):
    budget = 120.0
    eng, evs = await _run(
        RunConfig(workload="kitti", budget_s=budget, target=0.9, **_FAST), tmp_path, monkeypatch
    )
    fin = evs[-1]
    assert isinstance(fin, RunFinished) and fin.status == "diagnosed"
    assert fin.verdict == "out of reach" and fin.target_met is False
    assert fin.headline.startswith("target 90% out of reach: above the levers' combined ceiling")
    # the run never left its profile phase for the others: it ended with its diagnosis, long
    # before the attribute phase's share of the budget was spent
    phases = [e.phase for e in evs if isinstance(e, PhaseChanged)]
    assert not {"attribute", "rank", "apply"} & set(phases), phases
    assert phases[-2:] == ["report", "done"]
    assert fin.wall_s < phase_deadline(budget, "profile") < phase_deadline(budget, "attribute")
    (gate,) = [e for e in evs if isinstance(e, GateDecided)]
    assert gate.decision == "diagnose" and not gate.forced and gate.reachable is False
    assert gate.line.startswith("gate: diagnose — target 90% > the levers' combined ceiling")
    assert gate.ceilings and gate.combined_ceiling < 0.9
    assert any("at or below" in h for h in gate.helps)
    # journaled (in the hash chain), nothing proposed or applied
    recs = read(eng.run_dir / "journal.jsonl")
    kinds = [r["type"] for r in recs]
    assert kinds == ["run_started", "noise_floor", "gate", "run_finished"], kinds
    assert recs[2]["decision"] == "diagnose" and recs[-1]["status"] == "diagnosed"
    assert check(eng.run_dir / "journal.jsonl")[1].intact
    # the report leads with the gate and says why, and what would help
    md = (eng.run_dir / "report.md").read_text()
    assert md.split("\n## ")[1].startswith("Qualification gate: diagnose")
    assert "## Why the target cannot be committed to" in md and "What would help:" in md
    assert "## Interventions" not in md
    js = json.loads((eng.run_dir / "report.json").read_text())
    assert next(iter(js)) == "gate" and js["gate"]["decision"] == "diagnose"
    assert js["result"]["diagnosed"] is True and js["result"]["kept"] == []


async def test_force_goes_on_and_the_report_says_the_gate_was_overridden(tmp_path, monkeypatch):
    eng, evs = await _run(
        RunConfig(workload="kitti", budget_s=8, target=0.9, force=True, **_FAST),
        tmp_path,
        monkeypatch,
    )
    fin = evs[-1]
    assert fin.status == "completed" and fin.verdict != "out of reach"
    (gate,) = [e for e in evs if isinstance(e, GateDecided)]
    assert gate.decision == "diagnose" and gate.forced
    assert gate.line.startswith("the gate said diagnose (target 90% >")
    assert gate.line.endswith("overridden by --force")
    phases = {e.phase for e in evs if isinstance(e, PhaseChanged)}
    assert {"attribute", "rank", "apply"} <= phases
    recs = read(eng.run_dir / "journal.jsonl")
    assert any(r.get("to") == "APPLYING" for r in recs)  # levers were tried
    assert next(r for r in recs if r["type"] == "gate")["forced"] is True
    md = (eng.run_dir / "report.md").read_text()
    assert "## Qualification gate: diagnose, overridden by --force" in md
    assert "overridden by --force**: the loop went on" in md


async def test_a_reachable_measurable_target_commits(tmp_path, monkeypatch):
    eng, evs = await _run(
        RunConfig(workload="hft-lob", budget_s=20, target=0.15, **_FAST), tmp_path, monkeypatch
    )
    (gate,) = [e for e in evs if isinstance(e, GateDecided)]
    assert gate.decision == "commit" and gate.measurable and gate.reachable
    assert gate.line.startswith("gate: commit — target 15% ≤ the levers' combined ceiling")
    assert evs[-1].status == "completed"
    md = (eng.run_dir / "report.md").read_text()
    assert md.split("\n## ")[1].startswith("Qualification gate: commit")


async def test_a_noisy_baseline_is_diagnosed_not_measurable(tmp_path, monkeypatch):
    """A machine whose blocks vary by ±40 % (synthetic: each simulated measurement scaled by
    a seeded log-normal factor): 10 % cannot be resolved in a 20 s budget."""
    rng = np.random.default_rng(3)
    real = Optimizer.block

    def noisy(self, config):
        b = real(self, config)
        return Block(b.value * float(np.exp(rng.normal(0, 0.4))), b.ok, b.reason, b.raw)

    monkeypatch.setattr(Optimizer, "block", noisy)
    eng, evs = await _run(
        RunConfig(workload="hft-lob", budget_s=20, target=0.10, **_FAST), tmp_path, monkeypatch
    )
    fin = evs[-1]
    assert fin.status == "diagnosed" and fin.verdict == "not measurable"
    assert fin.headline.startswith("target 10% not measurable here: the A/A moves")
    (gate,) = [e for e in evs if isinstance(e, GateDecided)]
    assert gate.measurable is False and "not measurable" in gate.line
    assert "noise floor ±" in gate.line or "noise:" in gate.line
    assert not any(r.get("to") == "APPLYING" for r in read(eng.run_dir / "journal.jsonl"))


def test_force_is_a_flag_of_the_run_command():
    from gitm_tui.commands.run import run_config, run_parser

    ns = run_parser().parse_args(["--no-ui", "--workload", "kitti", "--force"])
    assert run_config(ns).force is True
    assert run_config(run_parser().parse_args(["--no-ui"])).force is False


def test_a_prior_whose_two_ends_give_one_figure_prints_no_empty_interval():
    c = LeverCeiling("elementwise_fusion", high=0.19, low=0.19, prior="fusion_prior 10–30%")
    assert c.text() == "elementwise_fusion ≤ 19.0% (prior: both ends of its range give this)"
    assert "19.0% … 19.0%" not in c.text(full=True)
    spread = LeverCeiling("tf32_matmul", high=0.022, low=0.011, prior="tf32")
    assert spread.text() == "tf32_matmul ≤ 2.2% (prior: 1.1% … 2.2%)"
