"""What a run's parts may use of the run: the ``RunContext`` protocol the Engine
(engine/runtime/engine.py) keeps, and the ``RunTarget`` each kind of run is
(engine/runtime/targets.py).

The live sources (engine/runtime/sources.py), the optimize phases (engine/runtime/phases.py) and
the run targets are written against these two, never against the Engine class: the Engine
imports them, none of them imports the Engine, so engine/runtime has no import circle (an
import-linter contract in pyproject.toml keeps it so)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engine.device.simulator import SimulatedGPU
    from engine.eesm.live import LiveDecoder
    from engine.manifest import HardwareSpec, WorkloadSpec
    from engine.optimizer.contract import AnyLoop
    from engine.runtime.bus import EventBus
    from engine.runtime.config import RunConfig
    from engine.runtime.stream import DecodedStream


class RunTarget(Protocol):
    """One kind of run: what it runs, where, what streams in its profile phase and which
    optimize loop measures it (engine/runtime/targets.py has one class per kind)."""

    #: "simulated", "command", "torch-launch", "torch-live", "capture" or "watch"
    kind: str
    #: the built-in workload a simulated device runs (None for a real program)
    workload: WorkloadSpec | None
    #: the relaunched program (a command, or an unmodified PyTorch script)
    cmd_workload: Any
    #: the live PyTorch program measured in this process
    torch_job: Any
    #: the real GPU whose telemetry is read (None: none asked for, or none found)
    backend: Any
    #: what opening the backend said
    device_notes: list[str]
    #: where the run runs, for the dashboard's header and the journal
    device_label: str

    @property
    def title(self) -> str:
        """The title of a real program this run measures ('' for a simulated workload)."""
        ...

    @property
    def decodes(self) -> bool:
        """Whether rows are decoded live (the numba kernels are warmed up for it)."""
        ...

    @property
    def optimizes(self) -> bool:
        """Whether the optimize phases run after the profile phase (a watched GPU: no)."""
        ...

    async def profile(self, ctx: RunContext) -> None:
        """What streams to the dashboard in the profile phase (nothing for a real program:
        its loop measures it)."""
        ...

    def make_loop(self, ctx: RunContext) -> AnyLoop:
        """The optimize loop that measures this target (engine/optimizer/contract.py)."""
        ...


class RunContext(Protocol):
    """What the Engine offers the parts of a run."""

    config: RunConfig
    bus: EventBus
    hw: HardwareSpec
    run_id: str
    run_dir: Path
    target: RunTarget
    workload: WorkloadSpec | None
    cmd_workload: Any
    torch_job: Any
    torch_levers: tuple[Any, ...]
    backend: Any
    device_notes: list[str]
    device_label: str
    real_title: str
    gpu: SimulatedGPU | None
    decoder: LiveDecoder
    stream: DecodedStream
    offset_ns: int
    decisions: asyncio.Queue[tuple[str, str, str]]
    apply_finished: bool
    optimizer: AnyLoop | None
    store_refused: bool
    waiting_s: float
    keep_deciding: bool

    @property
    def paused(self) -> bool: ...

    @property
    def stopped(self) -> bool: ...

    def pending_decisions(self) -> bool: ...

    def elapsed(self) -> float: ...

    def deadline(self, phase: str) -> float: ...

    def log(self, level: str, message: str) -> None: ...

    def phase(self, phase: str, detail: str = "") -> None: ...

    def telemetry_out(self, samples: list[Any]) -> None: ...

    def waited(self, seconds: float) -> None: ...

    def decide(self, action: str, iid: str, by: str = "operator") -> None: ...

    def check_warm(self, decoder: LiveDecoder) -> None: ...

    async def wait_paused(self, back_to: str = "profile") -> None: ...

    async def await_warm(self) -> None: ...
