"""The asyncio Engine: the optimize loop's five phases over one workload, live.

``Engine._run`` is the main loop a newcomer should read first:

1. **profile** (2/24 of the budget): warm the numba kernels in a thread (decoding meanwhile
   with the numpy references) while the source streams the workload through the fixed-lag
   decoder to the dashboard (engine/runtime/sources.py); then repeated measurements give the
   A/A noise floor.
2. **attribute** (4/24): EESM regimes, the planner's predicted graph, the three invariants,
   the replay graph and ranked hypotheses (engine.optimizer.loop.Optimizer.analyse).
3. **rank** (6/24): every lever's applicability and replayed gain; proposals journaled.
4. **apply** (8/24): approvals by policy or by the operator (commands, or ``gitm-tui
   approve`` through the run's commands file); each approved lever is applied, measured and
   kept or rolled back by the gate; survivors re-ranked on the new state.
5. **report** (4/24): the kept levers re-measured together; report.md + report.json.

Phases 2-5 are engine/runtime/phases.py; what runs where and the live sources are
engine/runtime/sources.py; decoded rows reach subscribers through
engine/runtime/stream.py. Numeric work runs in worker threads; the event loop only moves data.
A phase that finishes early leaves its time to the next. Every state transition is journaled
before it happens, and the run holds its run lock (engine/store/runs.py) throughout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from engine.device.simulator import SimulatedGPU
from engine.eesm.live import LiveDecoder, compile_early, warm_up_elsewhere
from engine.eesm.pipeline import EesmModel
from engine.errors import write_refused
from engine.manifest import load_hardware
from engine.measure import finite_or_none
from engine.runtime import sources, targets
from engine.runtime.bus import EventBus
from engine.runtime.config import APPROVAL_POLICIES, PHASES, RunConfig, phase_deadline
from engine.runtime.events import (
    KernelsReady,
    LogEvent,
    PhaseChanged,
    RunFinished,
    TelemetryEvent,
)
from engine.runtime.phases import OptimizePhases, end_early, end_watch, recover_earlier_runs
from engine.runtime.stream import DecodedStream
from engine.runtime.warmup import in_daemon_thread
from engine.store.runs import RunLock, new_run_id, run_path
from engine.workloads.command import CommandError
from engine.workloads.torch_job import TorchJobError

if TYPE_CHECKING:
    from engine.optimizer.contract import AnyLoop
    from engine.runtime.context import RunTarget

__all__ = ["PHASES", "Engine", "RunConfig", "phase_deadline"]

KEEP_DECIDING = (
    "keep deciding: time waiting for your decision is not charged to the budget; proposals "
    "stay open until you decide them or finish the apply phase (f in the dashboard or at the "
    "prompt; Ctrl-C stops the run and still writes its report)"
)


class Engine:
    """One optimize-loop run on one device source. Create, subscribe to ``bus``, ``await run()``."""

    def __init__(
        self,
        config: RunConfig,
        bus: EventBus | None = None,
        job: Any = None,
        torch_levers: tuple[Any, ...] | None = None,
    ) -> None:
        """``job``: a live PyTorch program to optimize in this process (``engine.optimize``);
        ``torch_levers``: the levers it may try (default: the library's torch levers)."""
        if config.approve not in APPROVAL_POLICIES:
            raise ValueError(
                f"unknown approval policy {config.approve!r}; one of {APPROVAL_POLICIES}"
            )
        self.config = config
        self.bus = bus or EventBus()
        self.hw = load_hardware(config.hardware)
        #: what runs, on what device: one kind of run (engine/runtime/targets.py)
        self.target: RunTarget = targets.resolve(config, self.hw, job)
        target = self.target
        self.workload, self.cmd_workload = target.workload, target.cmd_workload
        self.torch_job, self.real_title = target.torch_job, target.title
        self.torch_levers = targets.torch_levers(target.torch_job, torch_levers)
        self.backend, self.device_notes = target.backend, target.device_notes
        self.device_label = target.device_label
        self.run_id = new_run_id()
        self.run_dir = run_path(self.run_id)
        #: held for the whole run: recovery and `gitm-tui approve` tell a live run from a dead
        #: one by it (engine/store/runs.py)
        self.lock = RunLock(self.run_dir)
        self.gpu: SimulatedGPU | None = None
        self.decoder: LiveDecoder = LiveDecoder(EesmModel.build(self.hw), use_numba=False)
        self.stream = DecodedStream(self.bus, self.elapsed, self.decoder.model.params.kappa.k_max)
        #: simulated time already shown: a measurement is drawn after it
        self.offset_ns = 0
        #: operator decisions (action, intervention, by) waiting for the apply phase
        self.decisions: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
        self.apply_finished = False
        #: the run's optimize loop, once the phases made it (engine/optimizer/contract.py)
        self.optimizer: AnyLoop | None = None
        self.state = "idle"
        self._sinks: list[Any] = []
        self._paused = asyncio.Event()
        self._paused.set()  # set = running
        self._stop = False
        self._t0 = 0.0
        #: the run store refused a write (disk full, read-only): said once, in the log
        self.store_refused = False
        #: seconds the apply phase has waited for a person's decision (part of elapsed, unless
        #: ``keep_deciding``: then not charged to the budget)
        self.waiting_s = 0.0
        #: the operator keeps deciding after the budget would have ended (see keep_deciding_on)
        self.keep_deciding = config.keep_deciding and config.approve == "manual"
        self._paused_s = 0.0
        self._pause_began: float | None = None  # while wait_paused waits
        self._warm: asyncio.Future[float] | None = None

    # ------------------------------------------------------------------ commands
    def pause(self) -> None:
        """Pause after the current window (the budget clock stops too)."""
        if self.state == "running":
            self._paused.clear()

    def resume(self) -> None:
        """Resume a paused run."""
        self._paused.set()

    def stop(self) -> None:
        """Finish after the current step; the run ends with status 'stopped'."""
        self._stop = True
        self._paused.set()
        self.decisions.put_nowait(("stop", "", ""))
        if self.cmd_workload is not None:  # end the running program now, start no other
            self.cmd_workload.cancel()
        if self.torch_job is not None and self.optimizer is not None:
            self.optimizer.cancelled = True  # no new measurement starts

    def finish_apply(self, by: str = "operator") -> None:
        """End the apply phase now (the operator is done deciding): go on to the report.
        Journaled when the loop runs (what is left undecided then stays PROPOSED)."""
        if self.optimizer is not None and not self.apply_finished and self.state != "done":
            self.optimizer.journal.append({"type": "apply_finished", "by": by})
        self.apply_finished = True
        self.decisions.put_nowait(("finish", "", ""))

    def keep_deciding_on(self, by: str = "operator") -> bool:
        """Keep deciding: from now on, time spent waiting for a person's decision is not
        charged to the budget, so undecided proposals stay open until the operator decides
        them or ends the apply phase (``finish_apply``). Journaled. Returns False where it
        cannot apply: an unattended policy decides alone, or the run has ended."""
        if self.config.approve != "manual" or self.state == "done":
            return False
        if not self.keep_deciding:
            self.keep_deciding = True
            if self.optimizer is not None:  # else run_started records it (phases.run_started)
                self.optimizer.journal.append({"type": "keep_deciding", "by": by})
            self.log("info", KEEP_DECIDING)
        return True

    def waited(self, seconds: float) -> None:
        """The apply phase waited ``seconds`` for a person: count it apart, and, when keeping
        deciding, give it back to the budget (as a pause does)."""
        self.waiting_s += seconds
        if self.keep_deciding:
            self._paused_s += seconds
            self._sync_deadline()
            # a live PyTorch program's loop stops measuring at its own wall-clock deadline
            deadline = getattr(self.optimizer, "deadline", None)
            if isinstance(deadline, float):
                setattr(self.optimizer, "deadline", deadline + seconds)  # noqa: B010

    def decide(self, action: str, iid: str, by: str = "operator") -> None:
        """Queue an operator decision on an intervention: approve | reject | rollback."""
        if action not in ("approve", "reject", "rollback"):
            raise ValueError(f"unknown decision {action!r}; one of approve, reject, rollback")
        self.decisions.put_nowait((action, iid, by))

    def command(self, name: str, arg: str = "") -> None:
        """Apply a command by name: pause | resume | stop | approve ID | reject ID | rollback ID."""
        handlers = {"pause": self.pause, "resume": self.resume, "stop": self.stop}
        if name in handlers:
            handlers[name]()
            return
        if name in ("approve", "reject", "rollback"):
            self.decide(name, arg)
            return
        raise ValueError(
            f"unknown command {name!r}; one of {sorted([*handlers, 'approve', 'reject', 'rollback'])}"
        )

    # ------------------------------------------------------------------ what collaborators read
    @property
    def paused(self) -> bool:
        """Return whether the run is paused."""
        return not self._paused.is_set()

    @property
    def stopped(self) -> bool:
        """Return whether the operator stopped the run."""
        return self._stop

    def pending_decisions(self) -> bool:
        return not self.decisions.empty()

    def elapsed(self) -> float:
        """Return budget seconds used so far (wall time minus paused time)."""
        if not self._t0:
            return 0.0
        now = time.monotonic()
        pausing = now - self._pause_began if self._pause_began is not None else 0.0
        return now - self._t0 - self._paused_s - pausing

    def deadline(self, phase: str) -> float:
        """Budget seconds by which ``phase`` must end (cumulative shares of the budget)."""
        return phase_deadline(self.config.budget_s, phase)

    def log(self, level: str, message: str) -> None:
        """Publish one log line."""
        self.bus.publish(LogEvent(t_wall=self.elapsed(), level=level, message=message))

    def phase(self, phase: str, detail: str = "") -> None:
        """Publish that the run entered ``phase``."""
        self.bus.publish(PhaseChanged(t_wall=self.elapsed(), phase=phase, detail=detail))

    def telemetry_out(self, samples: list[Any]) -> None:
        """Write telemetry samples to the sinks and publish them."""
        for sink in self._sinks:
            sink.write(samples)
        for smp in samples:
            self.bus.publish(TelemetryEvent(t_wall=self.elapsed(), sample=smp))

    async def wait_paused(self, back_to: str = "profile") -> None:
        """Wait while the run is paused (the budget clock stops with it), then say the run is
        back in ``back_to`` (the phase it was paused in)."""
        t = time.monotonic()
        self.bus.publish(PhaseChanged(t_wall=self.elapsed(), phase="paused"))
        self._pause_began = t  # elapsed() stands still from here, not only once resumed
        try:
            await self._paused.wait()
        finally:
            self._pause_began = None
        self._paused_s += time.monotonic() - t
        self._sync_deadline()
        deadline = getattr(self.optimizer, "deadline", None)  # a live program's own clock
        if isinstance(deadline, float) and self.torch_job is not None:
            setattr(self.optimizer, "deadline", deadline + time.monotonic() - t)  # noqa: B010
        if not self._stop:
            self.phase(back_to, self.device_label if back_to == "profile" else "")

    # ------------------------------------------------------------------ the main loop
    async def run(self) -> RunFinished:
        """Run the phases to the end (or stop); return the final event (also published).

        Whatever happens, subscribers get a ``run_finished``: a failure before the phases start
        (the run store, recovery of an earlier run) publishes one with status ``failed``."""
        try:
            if not self.lock.acquire():  # a fresh id: only another process with the same one
                raise RuntimeError(f"run {self.run_id} is locked by another process")
            return await self._run()
        except BaseException as e:
            if self.state != "done":  # _run's own finally did not get to publish it
                self.state = "done"
                if isinstance(e, Exception):
                    self.log("error", f"engine failed: {e!r}")
                self.bus.publish(
                    RunFinished(
                        t_wall=self.elapsed(),
                        status="failed" if isinstance(e, Exception) else "stopped",
                        segments=0,
                        iterations=0,
                        sim_time_ns=0,
                        wall_s=self.elapsed(),
                        regime_shares={},
                        kappa_partition={},
                        fixed_lag_exact=0.0,
                        validation={},
                        dropped_events=self.bus.dropped,
                        kernels="numpy",
                    )
                )
            raise
        finally:
            self.lock.release()

    async def _run(self) -> RunFinished:
        cfg = self.config
        self._t0 = time.monotonic()
        self._sync_deadline()
        self.state = "running"
        self.gpu = gpu = (
            SimulatedGPU(self.hw, self.workload, seed=cfg.seed) if self.workload else None
        )
        sources.announce(self)
        if self.keep_deciding:
            self.log("info", KEEP_DECIDING)
        self._sinks = sources.open_sinks(self)
        await recover_earlier_runs(self)
        if self.target.decodes:  # a command, a real GPU: no decoding
            self.phase("warmup", "compiling numba kernels; numpy reference decoder active")
            self._warm = in_daemon_thread(warm_up_elsewhere)
        phases = OptimizePhases(self)
        # a real program has no device windows to pace the clock: tick it for subscribers
        ticker = asyncio.ensure_future(sources.tick(self))
        status, report = "completed", ""
        result: dict[str, Any] = {}
        try:
            self.phase("profile", self.device_label)
            await self.target.profile(self)  # what streams live: the target's kind says
            if cfg.optimize and not self._stop and self.target.optimizes:
                result, report = await phases.run()
            if self._stop:
                status = "stopped"
            elif phases.diagnosed:  # the qualification gate ended it in its profile phase
                status = "diagnosed"
            if gpu is not None:
                self.stream.publish(self.decoder.flush(), gpu)
        except (CommandError, TorchJobError) as e:  # the user's program cannot be run: not a bug
            status = "stopped" if self._stop else "workload_failed"
            self.log("error", str(e))
        except asyncio.CancelledError:  # the dashboard quit mid-run: cut short, not completed
            status = "stopped"
            raise
        except Exception as e:  # a bug: report it as an event, then re-raise for the caller
            status = "failed"
            if isinstance(e, OSError) and write_refused(e):  # the disk, not a bug: one line
                self.store_refused = True
                self.log(
                    "error",
                    f"the run store refused a write: cannot write {e.filename} "
                    f"({e.strerror}); the run stopped, what it wrote before is kept — free "
                    "space there or set GITM_SCRATCH",
                )
            else:
                self.log("error", f"engine failed: {e!r}")
            raise
        finally:
            if ticker is not None:
                ticker.cancel()
            phases.stop_showing()  # (a trial's blocks still arriving have no screen left)
            if self._warm is not None and not self._warm.done():
                self._warm.cancel()
            if phases.opt is not None:
                status, report = phases.end_journal(status, report)
            elif cfg.optimize and self.target.optimizes:  # cut short before the loop began
                report = end_early(self, status)
            else:
                end_watch(self, status)
            for sink in self._sinks:
                sink.close()
            await sources.mirror(self)
            self.state = "done"
            tracker = self.stream.tracker
            fin = RunFinished(
                t_wall=self.elapsed(),
                status=status,
                segments=tracker.rows,
                iterations=gpu.iterations_done if gpu else 0,
                sim_time_ns=int(gpu.now) if gpu else 0,
                wall_s=self.elapsed(),
                regime_shares=tracker.shares(),
                kappa_partition=tracker.partition(),
                fixed_lag_exact=tracker.exact_share(),
                validation=tracker.validation(),
                dropped_events=self.bus.dropped,
                kernels="numba" if self.decoder.use_numba else "numpy",
                gain=result.get("gain"),
                target_met=result.get("target_met"),
                report=report,
                verdict=result.get("verdict", ""),
                gain_low=finite_or_none(result.get("gain_low")),
                gain_high=finite_or_none(result.get("gain_high")),
                headline=result.get("headline", ""),
            )
            self.phase("done", status)
            self.bus.publish(fin)
        return fin

    # ------------------------------------------------------------------ numba warm-up
    def compile_early(self) -> None:
        """Start compiling the live decoder's kernels now, where this run will decode (a
        simulated workload): before the dashboard's start-up, not after it."""
        if self.target.decodes:
            compile_early()

    def check_warm(self, decoder: LiveDecoder) -> None:
        """Switch ``decoder`` to the numba kernels once they compiled (or say why not)."""
        if self._warm is None or not self._warm.done():
            return
        warm, self._warm = self._warm, None
        try:
            secs = warm.result()
        except Exception as e:  # numba could not compile here: keep the numpy decoder
            self.log("warning", f"numba kernels unavailable ({e}); using numpy")
            self.bus.publish(KernelsReady(t_wall=self.elapsed(), backend="numpy", seconds=0.0))
            return
        decoder.use_numba = True
        self.bus.publish(KernelsReady(t_wall=self.elapsed(), backend="numba", seconds=secs))
        self.log("info", f"numba kernels ready in {secs:.1f}s")

    async def await_warm(self) -> None:
        """Let the numba warm-up finish before the optimize phases: both import scipy, and two
        threads importing the same extension modules can deadlock in the import system."""
        if self._warm is not None:
            with contextlib.suppress(Exception):  # check_warm reports a failure
                await asyncio.shield(self._warm)
            self.check_warm(self.decoder)

    def _sync_deadline(self) -> None:
        """The command workload's programs end with the budget (paused time not counted)."""
        if self.cmd_workload is not None and self._t0:
            self.cmd_workload.deadline = self._t0 + self._paused_s + self.config.budget_s
