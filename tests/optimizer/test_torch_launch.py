"""The torch launcher on an unmodified script (issue 15, must-show 2): steps found without
code changes, the baseline and process-level levers measured by relaunching, a report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.workloads.torch_launch import TorchLaunchWorkload
from tests.paths import ROOT

#: each test measures a gain on a real program: never beside another test (tests/conftest.py)
pytestmark = pytest.mark.quiet

SLEEPY = ROOT / "tests" / "fixtures" / "sleepy_train.py"
SCRIPT = ROOT / "tests" / "fixtures" / "train_small.py"


def test_the_step_finder_times_an_unmodified_script():
    w = TorchLaunchWorkload((sys.executable, str(SCRIPT), "--steps", "60"), warmup=3, steps=10)
    run = w.run_once(w.base)
    assert run.ok, run.reason
    assert run.value is not None and 1e3 < run.value < 1e9  # ns per step
    assert w.device == "cpu" and w.defaults["threads"].isdigit()
    # the first step's gradients (the step finder's G line), the check's reference
    assert w.grad_reference is not None and w.grad_reference[1] > 0


def test_a_script_without_steps_is_one_clear_failure(tmp_path):
    script = tmp_path / "no_steps.py"
    script.write_text("import torch\nprint(torch.ones(2).sum())\n")
    w = TorchLaunchWorkload((sys.executable, str(script)), warmup=1, steps=2)
    run = w.run_once(w.base)
    assert not run.ok and "optimizer.step()" in run.reason


def test_the_launch_check_fails_a_changed_update_and_says_when_it_cannot_judge():
    w = TorchLaunchWorkload((sys.executable, "x.py"))
    base = w.base
    # 'C Δsum Δsum-of-squares sum-of-squares' after the first optimizer step
    assert w._check_params("0.01 -0.02 50.0", base) == ""  # the reference
    numerics = base.with_choice("flush_denormal", "1")
    assert w._check_params("0.0102 -0.0199 50.0", numerics) == ""  # within NUMERICS' 5e-2
    safe = base.with_choice("threads", "1")
    assert "first update differs" in w._check_params("0.0 0.0 50.0", safe)  # update skipped
    assert "first update differs" in w._check_params("0.0102 -0.02 50.0", safe)  # beyond 1e-4
    # the baseline disagreeing with itself: not deterministic, said so, no longer judged
    assert w._check_params("0.013 -0.02 50.0", base) == "" and "not checkable" in w.check_note
    assert w._check_params("9.0 9.0 50.0", safe) == ""


def test_the_launch_check_holds_the_first_gradients_not_the_adaptive_update():
    """threads=1 on a Conv+BatchNorm+Adam script was rolled back as "correctness check failed"
    (issue 50): Adam's first update is lr * sign(g), so a reordered sum flipped the update of
    every parameter whose gradient is rounding noise. The check now holds the gradients the
    step applied (the step finder's G line) within the lever's numerics class."""
    w = TorchLaunchWorkload((sys.executable, "x.py"))
    base = w.base
    assert w._check_grads("12.5 3.25 0.9", base) == ""  # the reference
    safe = base.with_choice("threads", "1")
    assert w._check_grads("12.5000004 3.2500001 0.9", safe) == ""  # a reordered sum: 3e-8
    bad = w._check_grads("12.4 3.25 0.9", safe)  # a gradient 0.8 % off: beyond reordering
    assert bad.startswith("the first gradients differ (Σ|g| 12.4 vs baseline 12.5")
    assert "reordered allows 0.0001" in bad
    numerics = base.with_choice("flush_denormal", "1")
    assert w._check_grads("12.4 3.25 0.9", numerics) == ""  # within reduced precision's 5e-2
    assert "differ" in w._check_grads("0.0 0.0 0.0", numerics)  # no gradient: a skipped step


@pytest.mark.slow
def test_gitm_tui_no_ui_optimizes_an_unmodified_training_script(tmp_path):
    """The launcher end to end on a script with a known effect (tests/fixtures/sleepy_train.py:
    one intra-op thread makes each step 6 ms → 4 ms): relaunched per block, its warm-up
    detected, baseline and lever interleaved in pairs; threads=1 is kept with an interval
    around the true gain, and the run's verdict says so."""
    env = {"GITM_SCRATCH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    p = subprocess.run(
        [sys.executable, "-m", "gitm_tui", "--no-ui", "--workload", "torch", "--budget", "150s",
         "--target", "20%", "--approve", "auto", "--",
         sys.executable, str(SLEEPY), "--steps", "2000"],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    events = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    fin = events[-1]
    assert fin["type"] == "run_finished" and fin["status"] == "completed"
    run_dir = Path(fin["report"]).parent
    journal = [json.loads(x) for x in (run_dir / "journal.jsonl").read_text().splitlines()]
    assert any(e.get("type") == "noise_floor" for e in journal)
    assert any(e.get("type") == "warm_up" for e in journal)
    measured = [e for e in journal if e.get("to") == "APPLIED"]
    assert measured and all(e["measured"] > 0 for e in measured)  # relaunched and timed
    first = measured[0]
    assert first["pairs"]["pairs"] >= 4 and 0.15 < first["gain"] < 0.45
    assert fin["verdict"] == "met" and fin["gain_low"] >= 0.2, fin["headline"]
    assert fin["headline"].endswith("kept threads=1")
    report = Path(fin["report"]).read_text()
    assert "threads" in report and "measured for real" in report
    assert "tf32" in report  # not applicable on the CPU, and the report says why


def test_an_inference_loop_marks_its_steps_with_engine_step(tmp_path):
    script = tmp_path / "infer.py"
    script.write_text(
        "import torch, engine\n"
        "m = torch.nn.Linear(64, 64)\n"
        "x = torch.randn(32, 64)\n"
        "with torch.inference_mode():\n"
        "    for _ in range(40):\n"
        "        m(x)\n"
        "        engine.step()\n"
    )
    w = TorchLaunchWorkload((sys.executable, str(script)), warmup=3, steps=10)
    run = w.run_once(w.base)
    assert run.ok, run.reason
    assert run.value is not None and run.value > 0
    assert w.reference is None and w.grad_reference is None  # no optimizer step: nothing to check
