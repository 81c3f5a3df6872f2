"""The kinds of run, one class each, behind one protocol (engine.runtime.context.RunTarget).

=============  ==========================================  ==============================
kind           what runs                                   measured by
=============  ==========================================  ==============================
simulated      a built-in workload on the simulated GPU,   engine.optimizer.loop
               streamed live and decoded
command        any program, relaunched per trial           engine.optimizer.command_loop
torch-launch   an unmodified PyTorch script, relaunched    engine.optimizer.torch_loop
torch-live     a live PyTorch program in this process      engine.optimizer.torch_loop
               (``engine.optimize``, ``--device cpu|cuda``)
capture        a Python program under CUPTI capture        engine.optimizer.loop
watch          a real GPU's telemetry, watched             (not optimized)
=============  ==========================================  ==============================

``resolve`` picks the kind from the run's configuration; the Engine then asks its target what
to stream in the profile phase (``profile``), whether the optimize phases run (``optimizes``)
and which loop measures it (``make_loop``). A new kind of run is one class here and one branch
of ``resolve``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.runtime import sources

if TYPE_CHECKING:
    from engine.manifest import HardwareSpec, WorkloadSpec
    from engine.optimizer.contract import AnyLoop
    from engine.runtime.config import RunConfig
    from engine.runtime.context import RunContext

__all__ = [
    "CaptureTarget",
    "CommandTarget",
    "SimulatedTarget",
    "Target",
    "TorchLaunchTarget",
    "TorchLiveTarget",
    "WatchTarget",
    "resolve",
    "torch_levers",
]


@dataclass
class Target:
    """What every kind of run has: what runs and where. A subclass per kind says what streams
    in its profile phase and which loop measures it."""

    workload: WorkloadSpec | None = None
    cmd_workload: Any = None
    torch_job: Any = None
    backend: Any = None
    device_notes: list[str] = field(default_factory=list)
    device_label: str = ""
    kind: str = "simulated"

    @property
    def title(self) -> str:
        """The title of a real program this run measures ('' for a simulated workload)."""
        if self.torch_job is not None:
            return str(self.torch_job.name)
        return str(self.cmd_workload.title) if self.cmd_workload is not None else ""

    @property
    def decodes(self) -> bool:
        return False

    @property
    def optimizes(self) -> bool:
        return self.backend is None

    async def profile(self, ctx: RunContext) -> None:
        """A real program streams nothing live: its loop measures it."""

    def make_loop(self, ctx: RunContext) -> AnyLoop:
        """The simulated workload's loop (the default: the configuration's workload)."""
        from engine.optimizer.loop import Optimizer

        cfg = ctx.config
        return Optimizer(
            cfg.workload, ctx.run_dir, seed=cfg.seed, repeats=cfg.repeats, hardware=cfg.hardware
        )


@dataclass
class SimulatedTarget(Target):
    """A built-in workload on the simulated GPU: streamed window by window and decoded live."""

    kind: str = "simulated"

    @property
    def decodes(self) -> bool:
        return True

    async def profile(self, ctx: RunContext) -> None:
        if ctx.gpu is not None:
            await sources.stream_simulated(ctx, ctx.gpu, ctx.decoder)


@dataclass
class WatchTarget(Target):
    """A real GPU (nvidia / amd, or auto when one works): its telemetry watched until the
    budget or stop; kernel regimes need a trace, so nothing is optimized."""

    kind: str = "watch"

    async def profile(self, ctx: RunContext) -> None:
        await sources.watch_device(ctx)


@dataclass
class CaptureTarget(Target):
    """A Python program run under CUPTI capture, its kernels decoded as they arrive."""

    kind: str = "capture"

    async def profile(self, ctx: RunContext) -> None:
        await sources.stream_capture(ctx, ctx.decoder)


@dataclass
class CommandTarget(Target):
    """Any program, relaunched per trial and measured by its metric (engine.workloads.command)."""

    kind: str = "command"

    def make_loop(self, ctx: RunContext) -> AnyLoop:
        from engine.optimizer.command_loop import CommandOptimizer

        return CommandOptimizer(self.cmd_workload, ctx.run_dir, repeats=ctx.config.repeats)


@dataclass
class TorchLaunchTarget(Target):
    """An unmodified PyTorch script, relaunched per trial (engine.workloads.torch_launch)."""

    kind: str = "torch-launch"

    def make_loop(self, ctx: RunContext) -> AnyLoop:
        from engine.optimizer.torch_loop import TorchLaunchOptimizer

        return TorchLaunchOptimizer(self.cmd_workload, ctx.run_dir, repeats=ctx.config.repeats)


@dataclass
class TorchLiveTarget(Target):
    """A live PyTorch program measured in this process (``engine.optimize``, or a built-in
    workload's real model with ``--device cpu|cuda``)."""

    kind: str = "torch-live"

    def make_loop(self, ctx: RunContext) -> AnyLoop:
        from engine.optimizer.torch_loop import TorchOptimizer

        cfg = ctx.config
        return TorchOptimizer(
            self.torch_job,
            ctx.run_dir,
            repeats=cfg.repeats,
            levers=ctx.torch_levers,
            deadline=time.monotonic() + cfg.budget_s - ctx.elapsed(),
            analyze_capture=_analyze_file,
            fingerprint_file=_fingerprint_file,
        )


def _analyze_file(path: Any) -> Any:
    """``gitm-tui analyze`` of one trace file (a live program's captured steps), through the
    analysis's front door (engine.analyze.api) as the command's; no first-run child: the
    program's own run has compiled what it needs. AnalysisFailed (a RuntimeError) says why not."""
    from engine.analyze.api import AnalyzeOptions, analyze

    here = AnalyzeOptions(first_run=False, ranks=False, keep_arrays=True)
    return analyze([str(path)], here).one()


def _fingerprint_file(path: Any) -> Any:
    """The workload fingerprint of a live program's capture (a trial's or its baseline's), as
    `gitm-tui analyze` writes it (engine.analyze.fingerprints)."""
    from engine.analyze.fingerprints import fingerprint_file

    return fingerprint_file(path)


def real_model(workload: str, device: str) -> Any:
    """The TorchJob of a built-in workload's real model (engine/workloads/models/); a
    CommandError (one line) when torch or the device is missing."""
    from engine.errors import BackendUnavailable
    from engine.workloads.command import CommandError

    try:
        import torch
    except ImportError:  # a missing backend library: exit 4 (README, Exit codes)
        raise BackendUnavailable(
            "torch",
            f"runs the real {workload} model, which needs PyTorch, not installed here",
            "pip install 'gitm-tui[torch]'",
        ) from None
    if device == "cuda" and not torch.cuda.is_available():
        raise BackendUnavailable(
            "torch", "torch sees no CUDA device here", "use --device cpu, or a CUDA build of torch"
        )
    from engine.workloads.models import REAL_MODELS, job

    if workload not in REAL_MODELS:
        raise CommandError(
            f"--device {device} runs a real model; {workload!r} has none "
            f"(one of {', '.join(REAL_MODELS)})"
        )
    return job(workload, device)


def torch_levers(job: Any, levers: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The levers a live PyTorch program may try: ``levers``, or the library's torch levers."""
    if job is None:
        return ()
    if levers is None:
        from engine.levers.torch_levers import TORCH_LEVERS

        return TORCH_LEVERS
    return levers


def resolve(config: RunConfig, hw: HardwareSpec, job: Any = None) -> Target:
    """The run's target from its configuration: CommandError on a bad command workload,
    BackendUnavailable when a requested GPU backend cannot start (one line for the user).
    ``job``: a live PyTorch program (``engine.optimize``), measured in this process."""
    if job is None and config.device in ("cpu", "cuda"):  # a built-in workload's real model
        job = real_model(config.workload, config.device)
    if job is not None:
        from engine.workloads.torch_job import TorchJob, on_cuda

        job = TorchJob.of(job)
        where = "its CUDA device" if on_cuda(job) else "the CPU"
        label = f"this process ({job.name}: a live PyTorch program measured on {where})"
        return TorchLiveTarget(torch_job=job, device_label=label)
    if config.workload == "torch":
        from engine.workloads.command import CommandError
        from engine.workloads.torch_launch import TorchLaunchWorkload

        if not config.command:
            raise CommandError("--workload torch needs the script after '--'")
        launched = TorchLaunchWorkload(config.command)
        label = "this machine (an unmodified PyTorch script, relaunched per trial)"
        return TorchLaunchTarget(cmd_workload=launched, device_label=label)
    cmd: Any = None
    if config.workload == "command":
        from engine.workloads.command import ChoiceLever, CommandSpec, CommandWorkload

        cmd = CommandWorkload(
            CommandSpec(
                argv=config.command,
                metric=config.metric,
                goal=config.goal,  # type: ignore[arg-type]
                levers=tuple(ChoiceLever.parse(x) for x in config.levers),
                check=config.check,
            )
        )
    capturing = bool(config.capture_program)
    workload = None
    if not (cmd or capturing):
        from engine.manifest import load_workload

        workload = load_workload(config.workload)
    # a real GPU (nvidia / amd, or auto when one works): telemetry is read from it
    backend: Any = None
    notes: list[str] = []
    if config.device != "sim":
        from engine.telemetry.backends import open_backend

        backend, notes = open_backend(config.device)
    label = (
        "this machine (command workload: measured for real, no device trace)"
        if cmd
        else f"simulated {hw.name}"
    )
    if backend is not None:
        label = backend.label
    if capturing:
        where = backend.label if backend is not None else "the CUDA device"
        label = f"{where} — CUPTI capture of {' '.join(config.capture_program)}"
    kind: type[Target] = (
        CaptureTarget
        if capturing
        else WatchTarget
        if backend is not None
        else CommandTarget
        if cmd is not None
        else SimulatedTarget
    )
    return kind(
        workload=workload,
        cmd_workload=cmd,
        backend=backend,
        device_notes=notes,
        device_label=label,
    )
