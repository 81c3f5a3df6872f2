"""What the runtime asks of an optimize loop: the one contract every loop keeps.

Four loops share the base ``LoopRun`` (engine/optimizer/loop.py) and its measurement protocol:
``Optimizer`` (a simulated workload, with a device trace to attribute), ``CommandOptimizer``
(any command, measured only), ``TorchOptimizer`` (a live PyTorch program, traced on a GPU)
and ``TorchLaunchOptimizer`` (an unmodified script, relaunched). The driver
(engine/runtime/phases.py), the engine (engine/runtime/engine.py) and the report
(engine/optimizer/report.py) reach a loop only through ``OptimizeLoop`` below: exactly the
members they use, no more. mypy checks that every loop satisfies it (the four lines at the
end, and the return type of a run target's ``make_loop``, engine/runtime/targets.py).

A loop's candidates are its own (a library lever with its replayed gain, a declared choice, a
torch lever): the driver only hands what ``rank`` returned back to ``propose``, so the contract
is generic in them (``C``) and the driver holds an ``AnyLoop``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from engine.eesm.pipeline import EesmModel
    from engine.levers.torch_levers import TorchLever
    from engine.optimizer.attribution import RankedHypotheses
    from engine.optimizer.command_loop import CommandCandidate, CommandOptimizer
    from engine.optimizer.gate import GateDecision
    from engine.optimizer.loop import (
        Candidate,
        Intervention,
        LoopAnalysis,
        NoiseFloor,
        Optimizer,
    )
    from engine.optimizer.monitor import InvariantResult
    from engine.optimizer.torch_loop import TorchLaunchOptimizer, TorchOptimizer
    from engine.store.journal import Journal
    from engine.trace.trace import Trace
    from engine.workloads.command import CommandMeasurement
    from engine.workloads.sim import Measurement
    from engine.workloads.torch_job import TorchMeasurement

#: one measurement of a loop's current state: a simulated workload's (with its device trace),
#: a command's runs, a live PyTorch program's steps
LoopMeasurement: TypeAlias = "Measurement | CommandMeasurement | TorchMeasurement"

C = TypeVar("C")


@runtime_checkable  # tests/optimizer/test_loop_contract.py: each loop, as built, has them all
class OptimizeLoop(Protocol[C]):
    """The members of an optimize loop the runtime and the report use, typed; ``C`` is the
    loop's candidate (what ``rank`` returns and ``propose`` takes)."""

    # -------------------------------------------------------------- set by the phases
    #: the run's target gain (the noise gate's plan sizes the trials for it)
    target: float
    #: seconds left for trials (the apply phase's share), and for the whole run
    time_left: Callable[[], float]
    budget_left: Callable[[], float]
    #: a thread-safe narration hook (the engine's log; what it returns is ignored)
    say: Callable[[str], object]
    #: each arm-A block of a trial as it is measured (LoopRun.on_block)
    on_block: Callable[[Any], object]
    #: set by the engine's stop; a live PyTorch program's loop starts no new measurement once
    #: it is (the others end with their process: the workload's ``cancel``)
    cancelled: bool

    # -------------------------------------------------------------- what the run is
    @property
    def run_dir(self) -> Path: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def traced(self) -> bool:
        """Whether a measurement has a device trace (regimes, invariants, replay)."""
        ...

    @property
    def unit(self) -> str: ...
    @property
    def scale(self) -> float: ...
    @property
    def model(self) -> EesmModel | None:
        """The EESM model a measurement's device trace is decoded with for the dashboard;
        None for a loop whose measurements are not decoded (no simulated device trace)."""
        ...

    # -------------------------------------------------------------- what the run knows
    @property
    def noise(self) -> NoiseFloor | None: ...
    @property
    def baseline_ns(self) -> float: ...
    @property
    def current(self) -> Sequence[LoopMeasurement]: ...
    @property
    def analysis(self) -> LoopAnalysis | None: ...
    @property
    def interventions(self) -> Mapping[str, Intervention]: ...
    @property
    def kept(self) -> Sequence[str]: ...
    @property
    def not_applicable(self) -> Mapping[str, str]: ...
    @property
    def baseline_invariants(self) -> Sequence[InvariantResult]: ...
    @property
    def baseline_hypotheses(self) -> RankedHypotheses | None: ...
    @property
    def replay_errors(self) -> Sequence[tuple[str, float, float]]: ...
    @property
    def gate(self) -> GateDecision | None:
        """The qualification gate's decision, once ``qualify`` made it."""
        ...

    @property
    def trial_traces(self) -> Mapping[str, tuple[Trace, Trace]]:
        """Each kept trial's traces (the state before it, the trial) where the loop has them."""
        ...

    # -------------------------------------------------------------- the phases' steps
    def profile(self) -> NoiseFloor: ...
    def qualify(self, force: bool = False) -> GateDecision: ...
    def diagnose(self, target: float) -> dict[str, Any]: ...
    def noise_text(self) -> str: ...
    def analyse(self) -> LoopAnalysis: ...
    def rank(self) -> list[C]: ...
    def propose(self, cands: list[C]) -> list[Intervention]: ...
    def policy_allows(self, iv: Intervention, policy: str) -> bool: ...
    def approve(self, iid: str, by: str) -> None: ...
    def reject(self, iid: str, by: str) -> None: ...
    def trial(self, iid: str) -> Intervention: ...
    def rollback(self, iid: str, by: str) -> Intervention: ...
    def gain(self) -> float: ...
    def confirmed_gain(self) -> float: ...
    def current_value(self) -> float: ...
    def finish(self, target: float) -> dict[str, Any]: ...


#: a loop whatever its candidates (the driver never looks inside one)
AnyLoop: TypeAlias = "OptimizeLoop[Any]"

if TYPE_CHECKING:  # mypy: every loop keeps the contract, with its own candidates
    _simulated: type[OptimizeLoop[Candidate]] = Optimizer
    _command: type[OptimizeLoop[CommandCandidate]] = CommandOptimizer
    _torch: type[OptimizeLoop[TorchLever]] = TorchOptimizer
    _torch_launch: type[OptimizeLoop[CommandCandidate]] = TorchLaunchOptimizer
