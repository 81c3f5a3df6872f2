"""Every optimize loop keeps the one contract the runtime and the report reach it through
(engine/optimizer/contract.py). mypy checks the members' types; this checks that each loop,
built as a run target makes it (``engine.runtime.targets``, ``make_loop``), has every member at run time
(the attributes its ``__init__`` sets included), and that only the simulated workload's loop
has a model to decode a device trace with."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.optimizer.contract import OptimizeLoop


def _simulated(run_dir: Path) -> object:
    from engine.optimizer.loop import Optimizer

    return Optimizer("hft-lob", run_dir, seed=0, repeats=2)


def _command(run_dir: Path) -> object:
    from engine.optimizer.command_loop import CommandOptimizer
    from engine.workloads.command import CommandSpec, CommandWorkload

    spec = CommandSpec(argv=(sys.executable, "-c", "print('time=1')"), metric=r"time=(\d+)")
    return CommandOptimizer(CommandWorkload(spec), run_dir, repeats=2)


def _torch_launch(run_dir: Path) -> object:
    from engine.optimizer.torch_loop import TorchLaunchOptimizer
    from engine.workloads.torch_launch import TorchLaunchWorkload

    return TorchLaunchOptimizer(TorchLaunchWorkload((sys.executable, "x.py")), run_dir, repeats=2)


def _torch(run_dir: Path) -> object:
    torch = pytest.importorskip("torch")
    from engine import TorchJob
    from engine.optimizer.torch_loop import TorchOptimizer

    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(3, 4)

    def step(batch: object) -> object:
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    return TorchOptimizer(TorchJob(step, lambda: x, model, opt), run_dir, repeats=2)


@pytest.mark.parametrize("build", [_simulated, _command, _torch_launch, _torch])
def test_every_loop_has_every_member_of_the_contract(build, tmp_path):
    loop = build(tmp_path / build.__name__.strip("_"))
    assert isinstance(loop, OptimizeLoop)
    # the dashboard decodes a device trace only with the simulated workload's model; every
    # other loop says so (None) instead of lacking the attribute
    assert (loop.model is not None) == (build is _simulated)
    assert loop.cancelled is False
