"""engine.optimize() on a real PyTorch program on the CPU: levers applied to the live objects,
measured for real, kept or rolled back exactly (issue 15, must-show 1)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from engine import OptimizeResult, TorchJob, optimize
from engine.levers.torch_levers import TORCH_LEVERS, TorchLever, Undo, shutdown_loader
from engine.workloads.torch_job import Snapshot, global_flags

#: each test measures a gain on a real program: never beside another test (tests/conftest.py)
pytestmark = pytest.mark.quiet


class SlowReads(torch.utils.data.Dataset):
    """Synthetic samples whose reads wait 1.5 ms each, as a dataset on a network disk does."""

    def __init__(self, n: int = 256) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 32, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(0.0015)
        return self.x[i], self.y[i]


class HalfBatch(TorchLever):
    """Broken on purpose: trains on half of every batch (less compute, wrong updates)."""

    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        return True, "always (a test lever)"

    def apply(self, job: TorchJob) -> Undo:
        def wrap(fn):
            return lambda batch: fn(tuple(t[: len(t) // 2] for t in batch))

        job.wrappers.append(wrap)
        return lambda: job.wrappers.remove(wrap)


def _job() -> TorchJob:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = torch.utils.data.DataLoader(SlowReads(), batch_size=8, shuffle=True)
    loss_fn = nn.CrossEntropyLoss()

    def step(batch):
        x, y = batch
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return TorchJob(step, loader, model, opt, name="mlp (synthetic data)", samples_per_step=8)


def _journal(run_dir: str) -> list[dict]:
    return [json.loads(x) for x in (Path(run_dir) / "journal.jsonl").read_text().splitlines()]


def test_optimize_keeps_a_real_lever_and_rolls_back_a_broken_one_exactly():
    job = _job()
    before = Snapshot.take(job)
    flags = global_flags()
    levers = (
        HalfBatch("half_batch", "Train on half of each batch", "SAFE", "a broken test lever"),
        *(lv for lv in TORCH_LEVERS if lv.id in ("loader_workers", "channels_last")),
    )
    res = optimize(job, budget="60s", target=0.9, repeats=3, levers=levers)
    assert isinstance(res, OptimizeResult) and res.status == "completed"
    states = {iv["lever"]: iv for iv in res.interventions.values()}
    # the broken lever was applied and measured, and failed the check
    broken = states["half_batch"]
    assert broken["state"] == "ROLLED_BACK" and "correctness check failed" in broken["note"]
    assert broken["measured_gain"] is not None
    # reads that wait are what workers hide: kept, measured well beyond the noise floor
    workers = states["loader_workers"]
    assert workers["state"] == "VERIFIED", workers["note"]
    # VERIFIED means the noise gate found the gain beyond run-to-run noise; its size is the
    # machine's (52 % alone here, 19 % once on a loaded 2-core CI run): no fixed bar on it
    assert workers["measured_gain"] > 0
    assert "channels_last" not in states  # no convolution: not applicable, not proposed
    # the program is as it was: parameters, buffers, flags bit for bit (measurements and the
    # rollback restored them), and the kept lever stays in place on the live objects
    assert before.differences(job) == [] and global_flags() == flags
    assert job.batches.num_workers >= 2
    rolled = [e for e in _journal(res.run_dir) if e.get("to") == "ROLLED_BACK"]
    assert rolled and all(e["restored_exactly"] for e in rolled)
    report = Path(res.report).read_text()
    assert "loader_workers" in report and "half_batch" in report
    shutdown_loader(job.batches)  # the kept loader's workers, now, in this thread


def test_levers_that_cannot_apply_say_why_on_the_cpu():
    job = _job()
    why = {lv.id: lv.applicable(job) for lv in TORCH_LEVERS}
    for cuda_only in ("tf32", "cudnn_benchmark", "sdpa_flash"):
        ok, reason = why[cuda_only]
        assert not ok and reason
    assert not why["expandable_segments"][0] and "launcher" in why["expandable_segments"][1]
    assert why["loader_workers"][0] and why["fused_optimizer"][0]


def test_a_snapshot_restores_parameters_optimizer_state_and_rng_bit_for_bit():
    job = _job()
    snap = Snapshot.take(job)
    batch = next(iter(job.batches))
    for _ in range(3):
        job.run_step(batch)
    assert snap.differences(job)  # training moved the parameters
    snap.restore(job)
    assert snap.differences(job) == []
    a = job.run_step(batch).item()
    snap.restore(job)
    assert job.run_step(batch).item() == a  # same dropout mask: the RNG came back too


def test_on_a_gpu_the_captured_trace_predicts_each_lever_and_the_error_is_kept(monkeypatch):
    """The GPU path on this CPU machine, with fakes (what hardware adds is unverified here):
    'CUDA' is reported and the capture writes a real recorded A100 training trace; the torch
    levers then carry the replay's estimates of their library levers, are ranked by them, and
    each trial keeps the replay's error (predicted vs measured)."""
    import gzip

    from engine.optimizer import torch_loop
    from tests.paths import TRACES

    recorded = gzip.decompress((TRACES / "kineto" / "a100_training_3streams.json.gz").read_bytes())

    def fake_capture(job, batches, path, steps=10):
        Path(path).write_bytes(recorded)

    monkeypatch.setattr(torch_loop, "on_cuda", lambda job: True)
    monkeypatch.setattr(torch_loop, "capture", fake_capture)
    job = _job()
    levers = tuple(lv for lv in TORCH_LEVERS if lv.id in ("loader_workers", "bf16_autocast"))
    res = optimize(job, budget="60s", target=0.9, repeats=2, levers=levers, approve="all")
    shutdown_loader(job.batches)
    ivs = {iv["lever"]: iv for iv in res.interventions.values()}
    replayed = [iv for iv in ivs.values() if iv["predicted_gain"] is not None]
    assert replayed, ivs
    assert all("replayed on the captured trace" in " ".join(iv["evidence"]) for iv in replayed)
    report = Path(res.report).read_text()
    assert "profile.json" in report or "captured trace" in report
    assert ivs["loader_workers"]["predicted_gain"] is None  # the trace has no loader to judge
    bf16 = ivs["bf16_autocast"]  # a NUMERICS lever: approve="all" let this call decide
    assert bf16["state"] in ("VERIFIED", "ROLLED_BACK") and bf16["measured_gain"] is not None
    assert "bf16_autocast" in report and "predicted" in report
    assert (Path(res.run_dir) / "profile.json").exists()
    # report.json's replay rows are gains, as the simulated loop's (they were nanoseconds)
    rows = json.loads((Path(res.run_dir) / "report.json").read_text())["replay"]
    assert rows and all(-1 < r["predicted_gain"] < 1 for r in rows), rows
    assert all(r["measured_gain"] is None or -1 < r["measured_gain"] < 1 for r in rows), rows
    # the capture's invariant violations are reported, not dropped ("0 violating" of a trace
    # whose own analysis finds 95 kernel-time violations)
    inv = json.loads((Path(res.run_dir) / "report.json").read_text())["invariants"]
    kt = next(i for i in inv if i["invariant"] == "kernel_time")
    assert kt["violating_rows"] > 0 and kt["violations"], kt


def test_the_batch_size_lever_doubles_the_batch_and_its_undo_restores_the_loader():
    from engine.workloads.torch_job import Batches, run_steps

    job = _job()
    loader = job.batches
    lv = next(lv for lv in TORCH_LEVERS if lv.id == "batch_size")
    assert lv.safety == "NUMERICS" and lv.applicable(job)[0]
    undo = lv.apply(job)
    assert job.batches.batch_size == 16 and job.samples_per_step == 16
    m = run_steps(job, Batches(job), 1, 2)
    assert m.ok and m.samples_per_step == 16
    undo()
    assert job.batches is loader and job.samples_per_step == 8
    job.samples_per_step = 4  # a job that does not count its samples as the loader does
    assert not lv.applicable(job)[0]


def test_an_operator_rollback_puts_the_program_back_exactly_and_journals_it(tmp_path):
    """Two kept levers, the first rolled back by a person: the later one is undone and applied
    again around it, and the program is compared bit for bit with its state before the first."""
    from engine.optimizer.torch_loop import TorchOptimizer
    from engine.store.journal import State

    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    opt = torch.optim.Adam(m.parameters(), lr=0.01)

    def step(b):
        opt.zero_grad()
        loss = m(b).square().mean()
        loss.backward()
        opt.step()
        return loss

    x = torch.randn(2, 3, 8, 8)
    job = TorchJob(step, lambda: x, m, opt)
    ids = ("channels_last", "fused_optimizer")
    o = TorchOptimizer(
        job, tmp_path, repeats=2, levers=tuple(lv for lv in TORCH_LEVERS if lv.id in ids)
    )
    o.profile()
    o.analyse()
    start = Snapshot.take(job)
    ivs = o.propose(o.rank())
    o._verdict = lambda ok, why, comparison, *rest: (
        State.VERIFIED,
        "kept (forced: this test is about rollback)",
    )
    for iv in ivs:
        o.approve(iv.iid, "test")
        o.trial(iv.iid)
    # the library's order: the fused optimizer first, channels_last after it
    assert [o.interventions[k].lever_id for k in o.kept] == ["fused_optimizer", "channels_last"]
    o.rollback(o.kept[0], "operator")
    assert [o.interventions[k].lever_id for k in o.kept] == ["channels_last"]
    assert m[0].weight.is_contiguous(memory_format=torch.channels_last)  # still in effect
    assert not any(g["fused"] for g in opt.param_groups)  # the rolled-back one is gone
    last = [e for e in _journal(str(tmp_path)) if e.get("to") == "ROLLED_BACK"][-1]
    assert last["restored_exactly"] is True and last["differences"] == []
    o._use(())  # and with it undone too, nothing of either remains
    assert start.differences(job) == []


def test_the_update_check_allows_rounding_but_not_a_wrong_update():
    """A SAFE lever's reassociated arithmetic moves an update by a few units in the last place
    of the *parameter* — 1.4e-7 on a parameter of 1 with an update of 1e-3 once vetoed a
    correct channels_last; a skipped or rescaled update still fails."""
    from engine.workloads.torch_job import Reference

    eps = torch.finfo(torch.float32).eps
    w = torch.ones(100)
    upd = torch.full((100,), 1e-3)
    ref = Reference(None, {"update of w": upd, "rounding of w": w.abs() * eps})

    def got(u):
        return {"update of w": u, "rounding of w": w.abs() * eps}

    assert ref.compare(got(upd + 1.4e-7), "SAFE") == ""
    assert "differs" in ref.compare(got(torch.zeros(100)), "SAFE")  # the update skipped
    assert "differs" in ref.compare(got(2 * upd), "SAFE")  # twice the learning rate
    assert "differs" in ref.compare(got(upd + 1e-5), "SAFE")  # far past rounding


def test_channels_last_on_a_real_conv_net_passes_its_safe_check():
    from engine.workloads.torch_job import Reference, check_values

    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Conv2d(16, 8, 3), nn.Flatten())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    x = torch.randn(4, 3, 16, 16)

    def step(batch):
        opt.zero_grad()
        loss = m(batch).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    job = TorchJob(step, lambda: x, m, opt)
    snap = Snapshot.take(job)
    ref = Reference.record(job, x)
    snap.restore(job)
    lv = next(lv for lv in TORCH_LEVERS if lv.id == "channels_last")
    undo = lv.apply(job)
    assert ref.compare(check_values(job, x), "SAFE") == ""
    undo()


def test_framework_logs_of_a_trial_go_to_the_run_folder(tmp_path, capsys):
    import logging
    import warnings

    from engine.workloads.framework_log import framework_output

    lg = logging.getLogger("torch._inductor.gitm_test")
    own = logging.StreamHandler(sys.stderr)
    lg.addHandler(own)
    with framework_output(tmp_path, "I3") as log:
        lg.error("Traceback: BackendCompilerFailed")
        logging.getLogger("torch.fx.gitm_test").warning("a child with no handler of its own")
        warnings.warn("a library warning", UserWarning, stacklevel=1)
    text = (tmp_path / "logs" / "I3.log").read_text()
    assert "BackendCompilerFailed" in text and "a child with no handler" in text
    assert "a library warning" in text and log.lines >= 3 and log.rel == "logs/I3.log"
    assert "BackendCompilerFailed" not in capsys.readouterr().err  # not on the terminal
    assert lg.handlers == [own] and lg.propagate  # put back as it was
    lg.error("after the trial")
    assert "after the trial" in capsys.readouterr().err
    lg.removeHandler(own)


def test_bf16_autocast_is_not_offered_on_a_gpu_without_bf16_tensor_cores(monkeypatch):
    """A V100 (compute capability 7.0): PyTorch may call bf16 'supported' (emulated on the
    FP32 pipeline), but there are no BF16 tensor cores to gain from, so the lever says so; an
    A100 (8.0) is offered it. The GPU is faked here (unverified on hardware)."""
    import torch

    from engine.levers import torch_levers

    job = _job()
    lv = next(lv for lv in TORCH_LEVERS if lv.id == "bf16_autocast")
    monkeypatch.setattr(torch_levers, "on_cuda", lambda job: True)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 0))
    ok, why = lv.applicable(job)
    assert not ok and "BF16 tensor cores" in why
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    assert lv.applicable(job)[0]
    shutdown_loader(job.batches)
