"""The asyncio Engine: the optimize loop's five phases over one workload, live.

``Engine.run`` — the main loop a newcomer should read first:

1. **profile** (2/24 of the budget): warm the numba kernels in a thread (decoding meanwhile
   with the numpy references) while windows of the simulated device stream through the
   fixed-lag decoder to the dashboard; then repeated measurements give the A/A noise floor.
2. **attribute** (4/24): EESM regimes, the planner's predicted graph, the three invariants,
   the replay graph and ranked hypotheses (engine.optimizer.loop.Optimizer.analyse).
3. **rank** (6/24): every lever's applicability and replayed gain; proposals journaled.
4. **apply** (8/24): approvals by policy or by the operator (commands, or ``gitm-tui
   approve`` through the run's commands file); each approved lever is applied, measured and
   kept or rolled back by the gate; survivors re-ranked on the new state.
5. **report** (4/24): the kept levers re-measured together; report.md + report.json.

Numeric work runs in worker threads; the event loop only moves data. A phase that finishes
early leaves its time to the next. Every state transition is journaled before it happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.device.simulator import SimulatedGPU
from engine.eesm import metrics
from engine.eesm.live import FinalRows, LiveDecoder, warm_up
from engine.eesm.pipeline import EesmModel, decode, row_labels
from engine.manifest import load_hardware, load_workload
from engine.regimes import N_LABELS, N_REGIMES, Label, Regime
from engine.runtime.bus import EventBus
from engine.runtime.commands import CommandReader
from engine.runtime.events import (
    DecodedBatch,
    HypothesesReport,
    InterventionUpdate,
    InvariantsReport,
    KappaUpdate,
    KernelsReady,
    LogEvent,
    OptimizeStatus,
    PhaseChanged,
    Progress,
    ReportWritten,
    RunFinished,
    RunStarted,
    TelemetryEvent,
)
from engine.runtime.journal import State, recover
from engine.runtime.store import RunLock, new_run_id, run_path
from engine.trace.segments import Segments
from engine.workloads.command import CommandError

#: the phases' shares of the budget (DESIGN §7: 2:4:6:8:4)
PHASES = (("profile", 2), ("attribute", 4), ("rank", 6), ("apply", 8), ("report", 4))
APPROVAL_POLICIES = ("manual", "auto", "none")


def phase_deadline(budget_s: float, phase: str) -> float:
    """Budget seconds by which ``phase`` must end (cumulative shares); KeyError if unknown."""
    total = sum(w for _, w in PHASES)
    acc = 0
    for name, w in PHASES:
        acc += w
        if name == phase:
            return budget_s * acc / total
    raise KeyError(phase)


@dataclass(frozen=True)
class RunConfig:
    """What to run and for how long."""

    workload: str = "hft-lob"
    budget_s: float = 60.0
    seed: int = 0
    hardware: str = "h100_telemetry"
    #: wall seconds between device windows; the dashboard's refresh rhythm
    tick_s: float = 0.1
    #: simulated device time per window (20 ms ≈ 10-20 iterations of the built-in workloads)
    window_ns: float = 20e6
    #: sleep between windows to pace the run at ``tick_s`` (False: as fast as possible)
    realtime: bool = True
    #: stop streaming the profile after this many windows (tests); None = its budget share
    max_windows: int | None = None
    #: the gain (time per sample) the loop aims for
    target: float = 0.15
    #: approval policy: manual (a person decides), auto (SAFE levers only), none (propose only)
    approve: str = "manual"
    #: measurements per arm (noise floor, each trial, the final check)
    repeats: int = 4
    #: run the optimize phases after profiling (False: profile/watch only)
    optimize: bool = True
    #: tests: seconds to hold between APPLYING and the measurement (a kill window)
    hold_apply_s: float = 0.0
    # --workload command: the program (no shell), its metric, levers and check
    command: tuple[str, ...] = ()
    metric: str = ""
    goal: str = "min"
    levers: tuple[str, ...] = ()
    check: str | None = None
    #: telemetry source: sim (default), auto (a real GPU if one works, else sim), nvidia, amd
    device: str = "sim"
    #: real-device sampling interval (s)
    telemetry_interval_s: float = 1.0
    #: Prometheus exposition port (None: off) and bind address
    prometheus_port: int | None = None
    prometheus_addr: str = "127.0.0.1"
    #: `gitm-tui capture --ui -- python PROGRAM`: run it here under CUPTI and stream its kernels
    capture_program: tuple[str, ...] = ()
    capture_flush_s: float = 0.5


class Engine:
    """One optimize-loop run on one device source. Create, subscribe to ``bus``, ``await run()``."""

    def __init__(self, config: RunConfig, bus: EventBus | None = None) -> None:
        if config.approve not in APPROVAL_POLICIES:
            raise ValueError(
                f"unknown approval policy {config.approve!r}; one of {APPROVAL_POLICIES}"
            )
        self.config = config
        self._config = ""  # the workload configuration rows pushed now run under
        # per stream: [configuration, rows] in push order, to tag rows the fixed lag releases
        self._pushed: dict[int, deque[list[Any]]] = {}
        self.bus = bus or EventBus()
        self.hw = load_hardware(config.hardware)
        self.cmd_workload: Any = None
        if config.workload == "command":  # a real process: CommandError on a bad definition
            from engine.workloads.command import ChoiceLever, CommandSpec, CommandWorkload

            self.cmd_workload = CommandWorkload(
                CommandSpec(
                    argv=config.command,
                    metric=config.metric,
                    goal=config.goal,  # type: ignore[arg-type]
                    levers=tuple(ChoiceLever.parse(x) for x in config.levers),
                    check=config.check,
                )
            )
        capturing = bool(config.capture_program)
        self.workload = None if (self.cmd_workload or capturing) else load_workload(config.workload)
        # a real GPU (nvidia / amd, or auto when one works): telemetry is read from it and the
        # run watches it; BackendUnavailable (one line for the user) when it cannot start
        self.backend: Any = None
        self.device_notes: list[str] = []
        if config.device != "sim":
            from engine.telemetry.backends import open_backend

            backend, self.device_notes = open_backend(config.device)
            if backend.name != "sim":
                self.backend = backend
        self.run_id = new_run_id()
        self.run_dir = run_path(self.run_id)
        #: held for the whole run: recovery and `gitm-tui approve` tell a live run from a dead
        #: one by it (engine/runtime/store.py)
        self.lock = RunLock(self.run_dir)
        self.device_label = (
            "this machine (command workload: measured for real, no device trace)"
            if self.cmd_workload
            else f"simulated {self.hw.name}"
        )
        if self.backend is not None:
            self.device_label = self.backend.label
        if capturing:
            where = self.backend.label if self.backend is not None else "the CUDA device"
            self.device_label = f"{where} — CUPTI capture of {' '.join(config.capture_program)}"
        self._sinks: list[Any] = []
        self._paused = asyncio.Event()
        self._paused.set()  # set = running
        self._stop = False
        self._t0 = 0.0
        self._paused_s = 0.0
        self._decisions: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
        self._finish_apply = False
        self._shown_state: dict[str, str] = {}
        self.optimizer: Any = None
        self.state = "idle"

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
        self._decisions.put_nowait(("stop", "", ""))
        if self.cmd_workload is not None:  # end the running program now, start no other
            self.cmd_workload.cancel()

    def finish_apply(self) -> None:
        """End the apply phase now (the operator is done deciding): go on to the report."""
        self._finish_apply = True
        self._decisions.put_nowait(("finish", "", ""))

    def decide(self, action: str, iid: str, by: str = "operator") -> None:
        """Queue an operator decision on an intervention: approve | reject | rollback."""
        if action not in ("approve", "reject", "rollback"):
            raise ValueError(f"unknown decision {action!r}; one of approve, reject, rollback")
        self._decisions.put_nowait((action, iid, by))

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

    @property
    def paused(self) -> bool:
        """Return whether the run is paused."""
        return not self._paused.is_set()

    def elapsed(self) -> float:
        """Return budget seconds used so far (wall time minus paused time)."""
        return 0.0 if not self._t0 else time.monotonic() - self._t0 - self._paused_s

    def deadline(self, phase: str) -> float:
        """Budget seconds by which ``phase`` must end (cumulative shares of the budget)."""
        return phase_deadline(self.config.budget_s, phase)

    # ------------------------------------------------------------------ main loop
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
                    self.bus.publish(
                        LogEvent(
                            t_wall=self.elapsed(), level="error", message=f"engine failed: {e!r}"
                        )
                    )
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
        cfg, pub = self.config, self.bus.publish
        self._t0 = time.monotonic()
        self._sync_deadline()
        self.state = "running"
        gpu = SimulatedGPU(self.hw, self.workload, seed=cfg.seed) if self.workload else None
        model = EesmModel.build(self.hw)
        decoder = LiveDecoder(model, use_numba=False)
        pub(
            RunStarted(
                t_wall=0.0,
                run_id=self.run_id,
                workload=self.workload.name
                if self.workload
                else ("capture" if cfg.capture_program else "command"),
                workload_title=self.workload.title
                if self.workload
                else (
                    " ".join(cfg.capture_program)
                    if cfg.capture_program
                    else self.cmd_workload.title
                ),
                device=self.device_label,
                simulated=self.workload is not None and self.backend is None,
                budget_s=cfg.budget_s,
                seed=cfg.seed,
                streams=self.workload.streams if self.workload else (),
                regimes=tuple(r.name for r in Regime),
                target=cfg.target,
                approve=cfg.approve,
                run_dir=str(self.run_dir),
            )
        )
        for note in self.device_notes:
            pub(LogEvent(t_wall=0.0, level="info", message=f"device: {note}"))
        if cfg.device == "auto" and self.backend is None:
            pub(
                LogEvent(
                    t_wall=0.0,
                    level="warning",
                    message="no GPU found: running on the simulated H100 (gitm-tui doctor says why)",
                )
            )
        self._open_sinks()
        for rec in await asyncio.to_thread(recover, self.run_dir.parent):
            from engine.optimizer.report import rewrite_recovered

            if rec.error is not None:
                pub(
                    LogEvent(
                        t_wall=self.elapsed(),
                        level="warning",
                        message=f"run {rec.run_dir.name}: its journal or saved state cannot be "
                        f"read ({rec.error}); left as it is",
                    )
                )
                continue
            try:
                await asyncio.to_thread(
                    rewrite_recovered,
                    rec.run_dir,
                    rec.interventions,
                    not_restored=rec.unrestored,
                )
            except Exception as e:  # the journal is put right; only its report stays stale
                pub(
                    LogEvent(
                        t_wall=self.elapsed(),
                        level="warning",
                        message=f"run {rec.run_dir.name}: report not rewritten ({e!r})",
                    )
                )
            what = (
                f"rolled back {', '.join(rec.interventions)}"
                if rec.interventions
                else "nothing was being applied"
            )
            if rec.unrestored:
                what += (
                    "; NOT restored ("
                    + "; ".join(f"{iid}: {why}" for iid, why in rec.unrestored.items())
                    + ") — check its state by hand"
                )
            pub(
                LogEvent(
                    t_wall=self.elapsed(),
                    level="warning",
                    message=f"run {rec.run_dir.name} had died before it finished: {what} "
                    "(journal and report updated)",
                )
            )
        warm: asyncio.Future[float] | None = None
        if self.workload is not None and self.backend is None:  # command / real GPU: no decoding
            pub(
                PhaseChanged(
                    t_wall=self.elapsed(),
                    phase="warmup",
                    detail="compiling numba kernels; numpy reference decoder active",
                )
            )
            warm = _in_daemon_thread(warm_up)
        self._warm = warm
        self._decoder = decoder
        self._tracker = tracker = _Tracker(model.params.kappa.k_max)
        self._gpu = gpu
        self._offset_ns = 0
        self._config = ""
        self._pushed = {}
        status = "completed"
        result: dict[str, Any] = {}
        report = ""
        try:
            self._phase("profile", self.device_label)
            if cfg.capture_program:
                await self._stream_capture(decoder, tracker)
            elif self.backend is not None:
                await self._watch_device()
            elif gpu is not None:
                await self._stream_profile(gpu, decoder, tracker)
            if cfg.optimize and not self._stop and self.backend is None:
                result, report = await self._optimize()
            if self._stop:
                status = "stopped"
            if gpu is not None:
                self._publish_finals(decoder.flush(), gpu, tracker)
        except CommandError as e:  # the user's program cannot be run or measured: not a bug
            status = "stopped" if self._stop else "workload_failed"
            pub(LogEvent(t_wall=self.elapsed(), level="error", message=str(e)))
        except asyncio.CancelledError:  # the dashboard quit mid-run: cut short, not completed
            status = "stopped"
            raise
        except Exception as e:  # a bug: report it as an event, then re-raise for the caller
            status = "failed"
            pub(LogEvent(t_wall=self.elapsed(), level="error", message=f"engine failed: {e!r}"))
            raise
        finally:
            if self._warm is not None and not self._warm.done():
                self._warm.cancel()
            if self.optimizer is not None:
                status, report = self._end_journal(status, report)
            for sink in self._sinks:
                sink.close()
            await self._mirror()
            self.state = "done"
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
                kernels="numba" if decoder.use_numba else "numpy",
                gain=result.get("gain"),
                target_met=result.get("target_met"),
                report=report,
            )
            pub(PhaseChanged(t_wall=self.elapsed(), phase="done", detail=status))
            pub(fin)
        return fin

    def _end_journal(self, status: str, report: str) -> tuple[str, str]:
        """Close the run's journal; return the final status and the report's path.

        A run cut short (stopped, quit, its program failing) in the middle of an apply is put
        back as recovery would put back a dead one — the state saved before the apply restored,
        ROLLED_BACK journalled — and ends ``interrupted``; a run cut short before its report
        phase still gets a report, written from its journal (what was done, and that it was
        cut short). Synchronous on purpose: it runs in a ``finally`` that a cancelled task
        may not await in."""
        from engine.optimizer.report import rewrite_recovered
        from engine.runtime.journal import UNFINISHED, Journal, _recover_run, states

        opt = self.optimizer
        assert opt is not None
        rolled: list[str] = []
        unrestored: dict[str, str] = {}
        try:
            # a trial still running in its worker thread (the task was cancelled around it)
            # must not journal after this
            opt.journal.close()
            if any(st in UNFINISHED for st in states(opt.journal.path).values()):
                rec = _recover_run(opt.journal.path)
                if rec is not None:
                    rolled, unrestored = rec.interventions, rec.unrestored
                status = "interrupted"
            else:
                Journal(opt.journal.path).append({"type": "run_finished", "status": status})
            if not report:
                report = str(
                    rewrite_recovered(
                        self.run_dir, rolled, cut_short=status, not_restored=unrestored
                    )
                )
        except Exception as e:  # the journal itself cannot be written: say so, keep the status
            self.bus.publish(
                LogEvent(
                    t_wall=self.elapsed(),
                    level="error",
                    message=f"the run's journal or report could not be written ({e!r})",
                )
            )
        return status, report

    def _phase(self, phase: str, detail: str = "") -> None:
        self.bus.publish(PhaseChanged(t_wall=self.elapsed(), phase=phase, detail=detail))

    async def _stream_profile(
        self, gpu: SimulatedGPU, decoder: LiveDecoder, tracker: _Tracker
    ) -> None:
        """Stream live windows of the unchanged workload until the profile share is spent."""
        cfg = self.config
        self._config = "baseline"
        end = self.deadline("profile") if cfg.optimize else cfg.budget_s
        windows = 0
        while not self._stop and (windows == 0 or self.elapsed() < end):
            if cfg.max_windows is not None and windows >= cfg.max_windows:
                break
            if self.paused:
                await self._wait_paused()
                continue
            t_tick = time.monotonic()
            self._check_warm(decoder)
            batch = await asyncio.to_thread(gpu.run_for, cfg.window_ns)
            self._note_pushed(batch.segments)
            finals = await asyncio.to_thread(decoder.push, batch.segments, batch.truth)
            windows += 1
            self._publish_finals(finals, gpu, tracker)
            self._telemetry_out(batch.telemetry)
            self._progress(gpu, tracker)
            if cfg.realtime:
                await asyncio.sleep(max(0.0, cfg.tick_s - (time.monotonic() - t_tick)))
            else:
                await asyncio.sleep(0)
        # the live stream ends here (measurements are decoded whole): release its last rows now,
        # under the configuration they ran under, not at the end of the run
        self._publish_finals(await asyncio.to_thread(decoder.flush), gpu, tracker)
        self._offset_ns = int(gpu.now)

    def _open_sinks(self) -> None:
        """telemetry.jsonl in the run store always; Prometheus when a port was given."""
        from engine.telemetry.sinks import JsonlSink, PrometheusSink

        self._sinks = [JsonlSink(self.run_dir / "telemetry.jsonl")]
        cfg = self.config
        if cfg.prometheus_port is not None:
            try:
                prom = PrometheusSink(cfg.prometheus_port, cfg.prometheus_addr)
            except OSError as e:
                self.bus.publish(
                    LogEvent(
                        t_wall=self.elapsed(),
                        level="warning",
                        message=f"Prometheus endpoint not started on {cfg.prometheus_addr}:{cfg.prometheus_port}: {e.strerror or e}",
                    )
                )
            else:
                self._sinks.append(prom)
                self.bus.publish(
                    LogEvent(
                        t_wall=self.elapsed(),
                        level="info",
                        message=f"Prometheus metrics on http://{prom.addr}:{prom.port}/metrics",
                    )
                )

    def _telemetry_out(self, samples: list[Any]) -> None:
        for sink in self._sinks:
            sink.write(samples)
        for smp in samples:
            self.bus.publish(TelemetryEvent(t_wall=self.elapsed(), sample=smp))

    async def _watch_device(self) -> None:
        """A real GPU: sample its telemetry until the budget or stop (kernel regimes need
        `gitm-tui capture -- …`, which records the kernels the program launches)."""
        from engine.telemetry.sampler import Sampler

        cfg = self.config
        self.bus.publish(
            LogEvent(
                t_wall=self.elapsed(),
                level="info",
                message=f"watching {self.backend.label}; for kernel regimes run a program under "
                "`gitm-tui capture -- python train.py`",
            )
        )
        stop = asyncio.Event()

        def lost(idx: int, why: str) -> None:
            self.bus.publish(
                LogEvent(t_wall=self.elapsed(), level="warning", message=f"GPU {idx}: {why}")
            )

        sampler = Sampler(
            self.backend, cfg.telemetry_interval_s, publish=self._telemetry_out, on_lost=lost
        )
        task = asyncio.ensure_future(sampler.run(stop))
        try:
            while not self._stop and self.elapsed() < cfg.budget_s and not task.done():
                await asyncio.sleep(min(0.1, cfg.telemetry_interval_s))
        finally:  # also when the run is cancelled (the dashboard quit): no write after close
            stop.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.backend.close()

    async def _stream_capture(self, decoder: LiveDecoder, tracker: _Tracker) -> None:
        """Run the program in a thread under CUPTI; decode its batches as they arrive."""
        from engine.trace.cupti import capture, run_python_program

        cfg = self.config
        loop = asyncio.get_running_loop()
        q: asyncio.Queue[Any] = asyncio.Queue()
        done = object()
        out = self.run_dir / "trace.json"
        box: dict[str, Any] = {}

        def on_batch(seg: Any, names: Any) -> None:
            loop.call_soon_threadsafe(q.put_nowait, (seg, names))

        def program() -> None:
            try:
                with capture(
                    out,
                    flush_interval_s=cfg.capture_flush_s,
                    on_batch=on_batch,
                ) as cap:
                    box["session"] = cap
                    box["code"] = run_python_program(list(cfg.capture_program))
            except BaseException as e:
                box["error"] = e
            finally:
                loop.call_soon_threadsafe(q.put_nowait, done)

        threading.Thread(target=program, name="gitm-capture", daemon=True).start()
        sampler_stop = asyncio.Event()
        sampler_task = None
        if self.backend is not None:
            from engine.telemetry.sampler import Sampler

            sampler_task = asyncio.ensure_future(
                Sampler(self.backend, cfg.telemetry_interval_s, publish=self._telemetry_out).run(
                    sampler_stop
                )
            )
        names = None
        holder = _NamesHolder()
        try:
            while not self._stop:
                item = await q.get()
                if item is done:
                    break
                seg, names = item
                holder.names = names
                self._note_pushed(seg)
                finals = await asyncio.to_thread(decoder.push, seg)
                self._publish_finals(finals, holder, tracker)
        finally:
            sampler_stop.set()
            if sampler_task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await sampler_task
        if names is not None:
            self._publish_finals(decoder.flush(), holder, tracker)
        if "error" in box:
            self.bus.publish(
                LogEvent(t_wall=self.elapsed(), level="error", message=f"capture: {box['error']}")
            )
        else:
            self.bus.publish(
                LogEvent(
                    t_wall=self.elapsed(),
                    level="info",
                    message=f"program exited with status {box.get('code')}; trace in {out}",
                )
            )

    async def _mirror(self) -> None:
        from engine.telemetry.sinks import mirror_run

        if not os.environ.get("GITM_S3_ROOT") or not self.run_dir.exists():
            return
        try:
            n = len(await asyncio.to_thread(mirror_run, self.run_dir))
        except Exception as e:
            self.bus.publish(
                LogEvent(
                    t_wall=self.elapsed(),
                    level="warning",
                    message=f"mirroring to {os.environ['GITM_S3_ROOT']} failed ({e}); the run is in {self.run_dir}",
                )
            )
            return
        self.bus.publish(
            LogEvent(
                t_wall=self.elapsed(),
                level="info",
                message=f"mirrored {n} files to {os.environ['GITM_S3_ROOT']}",
            )
        )

    def _check_warm(self, decoder: LiveDecoder) -> None:
        if self._warm is not None and self._warm.done():
            self._kernels_ready(self._warm, decoder)
            self._warm = None

    def _progress(self, gpu: SimulatedGPU, tracker: _Tracker) -> None:
        self.bus.publish(
            Progress(
                t_wall=self.elapsed(),
                elapsed_s=self.elapsed(),
                budget_s=self.config.budget_s,
                segments=tracker.rows,
                iterations=gpu.iterations_done,
                sim_time_ns=int(gpu.now),
                regime_shares=tracker.shares(),
            )
        )

    async def _show(self, m: Any, opt: Any) -> None:
        """Stream a measurement's trace to the dashboard (shifted after what was shown), tagged
        with the configuration it ran under. A measurement is a complete trace: it is decoded
        whole (batch Viterbi, exact labels), so every row reaches the strips and the kernel
        table at once instead of waiting behind the live decoder's fixed lag."""
        if m.trace is None or self._gpu is None:  # a command workload has no device trace
            return
        seg = m.trace.segments
        if not len(seg):
            return
        kept = [opt.interventions[k].lever_id for k in opt.kept]
        self._config = " + ".join(["baseline", *kept])
        shift = self._offset_ns - int(seg.start_ns.min()) + 1000
        # one name table for everything shown
        cols = seg.with_names_remapped(self._gpu.names.remap_from(m.trace.names)).columns()
        cols["start_ns"] = cols["start_ns"] + shift  # new arrays: the trace itself is analysed
        cols["end_ns"] = cols["end_ns"] + shift
        seg = Segments(**cols)
        self._offset_ns = int(seg.end_ns.max())
        self._check_warm(self._decoder)
        finals = await asyncio.to_thread(self._decode_whole, seg, m.truth)
        self._publish_finals(finals, self._gpu, self._tracker, config=self._config)
        self._telemetry_out(m.telemetry)
        self._progress(self._gpu, self._tracker)

    def _decode_whole(self, seg: Segments, truth: np.ndarray | None) -> list[FinalRows]:
        """Batch-decode a complete trace into per-stream final rows (start order)."""
        dec = decode(seg, self._decoder.model, use_numba=self._decoder.use_numba)
        order = np.lexsort((seg.start_ns, seg.stream))
        cuts = np.flatnonzero(np.diff(seg.stream[order])) + 1
        out = []
        for rows in np.split(order, cuts):
            if not len(rows):
                continue
            out.append(
                FinalRows(
                    stream=int(seg.stream[rows[0]]),
                    start_ns=seg.start_ns[rows],
                    end_ns=seg.end_ns[rows],
                    name=seg.name[rows],
                    klass=seg.klass[rows],
                    labels=row_labels(seg.kind[rows], seg.klass[rows], dec.labels[rows]),
                    exact=np.ones(len(rows), np.bool_),
                    kappa=dec.kappa[rows],
                    degenerate=dec.degenerate[rows],
                    truth=truth[rows] if truth is not None else None,
                )
            )
        return out

    # ------------------------------------------------------------------ optimize phases
    async def _await_warm(self) -> None:
        """Let the numba warm-up finish before the optimize phases: both import scipy, and two
        threads importing the same extension modules can deadlock in the import system."""
        if self._warm is not None:
            with contextlib.suppress(Exception):  # _kernels_ready reports a failure
                await asyncio.shield(self._warm)
            self._check_warm(self._decoder)

    async def _optimize(self) -> tuple[dict[str, Any], str]:
        import importlib

        await self._await_warm()
        # heavy imports (scipy.stats) off the event loop: the dashboard keeps drawing
        await asyncio.to_thread(importlib.import_module, "engine.optimizer.loop")
        from engine.optimizer.loop import Optimizer
        from engine.optimizer.report import write_run

        cfg, pub = self.config, self.bus.publish
        if self.cmd_workload is not None:
            from engine.optimizer.command_loop import CommandOptimizer

            opt: Any = CommandOptimizer(self.cmd_workload, self.run_dir, repeats=cfg.repeats)
        else:
            opt = Optimizer(
                cfg.workload,
                self.run_dir,
                seed=cfg.seed,
                repeats=cfg.repeats,
                hardware=cfg.hardware,
            )
        self.optimizer = opt
        opt.journal.append(
            {
                "type": "run_started",
                "run_id": self.run_id,
                "workload": cfg.workload,
                "budget_s": cfg.budget_s,
                "target": cfg.target,
                "approve": cfg.approve,
                "seed": cfg.seed,
                "device": self.device_label,
            }
        )
        noise = await asyncio.to_thread(opt.profile)
        await self._show(opt.current[0], opt)
        self._status("profile")
        unit = "µs/sample" if self.cmd_workload is None else f"(metric, goal {cfg.goal})"
        scale = 1e3 if self.cmd_workload is None else 1.0
        pub(
            LogEvent(
                t_wall=self.elapsed(),
                level="info",
                message=f"baseline {noise.mean_ns / scale:.4g} {unit}; A/A {noise.aa_delta:.2%}, "
                f"noise floor {noise.floor:.2%}",
            )
        )
        # attribute
        self._phase(
            "attribute",
            "no device trace: nothing to decode or attribute"
            if self.cmd_workload
            else "EESM, planner, invariants, replay graph, attribution",
        )
        a = await asyncio.to_thread(opt.analyse)
        self._publish_analysis(a)
        await self._until_paused_or_stopped()
        # rank
        self._phase(
            "rank",
            "declared levers in order (no replay for a black box)"
            if self.cmd_workload
            else "replaying each lever on the trace",
        )
        cands = await asyncio.to_thread(opt.rank)
        for iv in opt.propose(cands):
            self._publish_iv(iv)
        pub(
            LogEvent(
                t_wall=self.elapsed(),
                level="info",
                message=f"{sum(getattr(c, 'proposable', True) for c in cands)} interventions "
                f"proposed; {sum(not getattr(c, 'applicable', True) for c in cands)} levers not "
                "applicable",
            )
        )
        # apply
        if not self._stop:
            self._phase("apply", f"approval policy {cfg.approve}")
            await self._apply_phase(opt)
        # report
        self._phase("report", "re-measuring the kept levers together")
        result = await asyncio.to_thread(opt.finish, cfg.target)
        md, js = await asyncio.to_thread(write_run, opt, result, self._provenance())
        self._status("report")
        met = result["target_met"]
        b, f = result["baseline_ns_per_sample"], result["final_ns_per_sample"]
        what = (
            f"time per sample ({b / 1e3:.1f} → {f / 1e3:.1f} µs)"
            if self.cmd_workload is None
            else f"on the metric ({b:.4g} → {f:.4g}, goal {cfg.goal})"
        )
        summary = (
            f"target {cfg.target:.0%} {'met' if met else 'NOT met'}: {result['gain']:+.1%} {what}, "
            f"kept {', '.join(result['kept']) or 'nothing'}"
        )
        pub(
            ReportWritten(
                t_wall=self.elapsed(),
                path=str(md),
                json_path=str(js),
                target_met=met,
                gain=result["gain"],
                summary=summary,
            )
        )
        return result, str(md)

    def _provenance(self) -> dict[str, Any]:
        import platform

        from engine.manifest import load_workload as _lw

        cfg = self.config
        return {
            "run_id": self.run_id,
            "workload": cfg.workload,
            "workload_title": self.cmd_workload.title
            if self.cmd_workload
            else _lw(cfg.workload).title,
            "device": self.device_label,
            "budget_s": cfg.budget_s,
            "target": cfg.target,
            "approve": cfg.approve,
            "seed": cfg.seed,
            "repeats": cfg.repeats,
            #: the operator stopped the run (q, Ctrl-C, SIGTERM, the stop command) before its end
            "stopped": self._stop,
            "python": platform.python_version(),
            "gitm_tui": _pkg_version(),
            "started": time.strftime(
                "%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - self.elapsed())
            ),
        }

    async def _apply_phase(self, opt: Any) -> None:
        """Approve (policy or person), trial, gate; until the target, the candidates or the
        phase's share of the budget run out."""
        cfg = self.config
        deadline = self.deadline("apply")
        poller = asyncio.ensure_future(self._poll_commands())
        asked: set[str] = set()
        try:
            while not self._stop and not self._finish_apply:
                # unattended policies stop at the target; with a person deciding (manual) the
                # phase stays open for more approvals or a roll back until its deadline or
                # until the operator finishes it
                met = opt.gain() >= cfg.target
                if met and cfg.approve != "manual" and not self._pending_decisions():
                    break
                pending = [iv for iv in opt.interventions.values() if iv.state == State.PROPOSED]
                ready = [iv for iv in opt.interventions.values() if iv.state == State.APPROVED]
                if cfg.approve == "auto":
                    for iv in pending:
                        if opt.policy_allows(iv, "auto"):
                            await asyncio.to_thread(opt.approve, iv.iid, "policy:auto")
                            self._publish_iv(iv)
                            ready.append(iv)
                            break
                        if iv.iid not in asked:
                            asked.add(iv.iid)
                            self.bus.publish(
                                LogEvent(
                                    t_wall=self.elapsed(),
                                    level="info",
                                    message=f"{iv.iid} {iv.lever_id} is {iv.safety}: it needs a person "
                                    f"(gitm-tui approve {self.run_id} {iv.iid})",
                                )
                            )
                if ready and (not met or cfg.approve == "manual"):
                    iv = sorted(ready, key=lambda v: -v.predicted_gain * v.confidence)[0]
                    await self._trial(opt, iv.iid)
                    for upd in opt.propose(await asyncio.to_thread(opt.rank)):
                        self._publish_iv(upd)
                    continue
                # nothing left this policy may approve and no person is deciding: move on
                auto_done = cfg.approve == "auto" and not any(
                    opt.policy_allows(v, "auto") for v in pending
                )
                idle = cfg.approve == "none" or auto_done or not (pending or ready)
                if idle and not self._pending_decisions():
                    break
                left = deadline - self.elapsed()
                if left <= 0:
                    break
                try:
                    action, iid, by = await asyncio.wait_for(
                        self._decisions.get(), timeout=min(left, 0.5)
                    )
                except TimeoutError:
                    continue
                await self._handle(opt, action, iid, by)
        finally:
            poller.cancel()

    def _pending_decisions(self) -> bool:
        return not self._decisions.empty()

    async def _handle(self, opt: Any, action: str, iid: str, by: str) -> None:
        pub = self.bus.publish
        if action in ("stop", "finish"):
            return
        iv = opt.interventions.get(iid)
        if iv is None:
            pub(
                LogEvent(
                    t_wall=self.elapsed(),
                    level="warning",
                    message=f"no intervention {iid!r} in this run",
                )
            )
            return
        try:
            if action == "approve":
                if iv.state != State.PROPOSED:
                    raise ValueError(f"{iid} is {iv.state.value}, not PROPOSED")
                await asyncio.to_thread(opt.approve, iid, by)
            elif action == "reject":
                if iv.state not in (State.PROPOSED, State.APPROVED):
                    raise ValueError(
                        f"{iid} is {iv.state.value}: only a pending intervention can be rejected"
                    )
                await asyncio.to_thread(opt.reject, iid, by)
            else:
                self._phase("apply", f"rolling back {iid}")
                await asyncio.to_thread(opt.rollback, iid, by)
                await self._show(opt.current[0], opt)
                self._status("apply")
                for upd in opt.propose(await asyncio.to_thread(opt.rank)):
                    self._publish_iv(upd)
        except ValueError as e:
            pub(LogEvent(t_wall=self.elapsed(), level="warning", message=str(e)))
            return
        self._publish_iv(iv)

    async def _trial(self, opt: Any, iid: str) -> None:
        iv = opt.interventions[iid]
        self._phase("apply", f"{iid} {iv.lever_id}: applying and measuring")
        fut = asyncio.ensure_future(asyncio.to_thread(opt.trial, iid, self.config.hold_apply_s))
        while not fut.done():  # show APPLYING while the trial runs
            if iv.state == State.APPLYING:
                self._publish_iv(iv)
                break
            await asyncio.sleep(0.01)
        await fut
        self._publish_iv(iv)
        for other in opt.interventions.values():  # e.g. an earlier value this one superseded
            if other is not iv and self._shown_state.get(other.iid) != other.state.value:
                self._publish_iv(other)
        if iv.state == State.VERIFIED:
            await self._show(opt.current[0], opt)
            if opt.analysis is not None:
                self._publish_analysis(opt.analysis)
        self._status("apply")
        self.bus.publish(
            LogEvent(
                t_wall=self.elapsed(),
                level="info",
                message=f"{iid} {iv.lever_id}: predicted {_pct(iv.predicted_gain)}, measured "
                f"{_pct(iv.measured_gain)} → {iv.state.value} ({iv.note})",
            )
        )

    async def _poll_commands(self) -> None:
        """Apply ``gitm-tui approve/reject/rollback`` decisions from the run's commands file."""
        reader = CommandReader(self.run_dir)
        while True:
            for d in reader.poll():
                self.decide(d.action, d.iid, d.by)
            await asyncio.sleep(0.2)

    async def _until_paused_or_stopped(self) -> None:
        if self.paused:
            await self._wait_paused()

    def _status(self, phase: str) -> None:
        opt = self.optimizer
        if opt is None or opt.noise is None:
            return
        self.bus.publish(
            OptimizeStatus(
                t_wall=self.elapsed(),
                baseline_ns=opt.baseline_ns,
                current_ns=opt.mean_ns(opt.current),
                gain=opt.gain(),
                target=self.config.target,
                noise_floor=opt.noise.floor,
                phase=phase,
                phase_deadline_s=self.deadline(phase),
            )
        )

    def _publish_analysis(self, a: Any) -> None:
        self.bus.publish(
            InvariantsReport(
                t_wall=self.elapsed(),
                results=tuple(r.as_dict(most=8, rows=True) for r in a.invariants),
            )
        )
        self.bus.publish(
            HypothesesReport(
                t_wall=self.elapsed(),
                hypotheses=tuple(
                    {
                        "cause": h.cause.name,
                        "description": h.cause.value,
                        "impact": h.impact,
                        "confidence": h.confidence,
                        "claimed": h.claimed,
                        "evidence": [
                            {
                                "kind": e.kind,
                                "what": e.what,
                                "value": e.value,
                                "p": e.p,
                                "p_adjusted": e.p_adjusted,
                            }
                            for e in h.evidence
                        ],
                    }
                    for h in a.hypotheses.hypotheses
                    if h.impact > 0 or h.claimed
                ),
            )
        )

    def _publish_iv(self, iv: Any) -> None:
        self._shown_state[iv.iid] = iv.state.value
        self.bus.publish(
            InterventionUpdate(
                t_wall=self.elapsed(),
                id=iv.iid,
                lever=iv.lever_id,
                title=iv.title,
                safety=iv.safety,
                state=iv.state.value,
                predicted_gain=iv.predicted_gain,
                confidence=iv.confidence,
                measured_gain=iv.measured_gain,
                approved_by=iv.approved_by,
                note=iv.note,
                replay=iv.what,
                evidence=tuple(iv.evidence),
            )
        )

    def _sync_deadline(self) -> None:
        """The command workload's programs end with the budget (paused time not counted)."""
        if self.cmd_workload is not None and self._t0:
            self.cmd_workload.deadline = self._t0 + self._paused_s + self.config.budget_s

    async def _wait_paused(self) -> None:
        t = time.monotonic()
        self.bus.publish(PhaseChanged(t_wall=self.elapsed(), phase="paused"))
        await self._paused.wait()
        self._paused_s += time.monotonic() - t
        self._sync_deadline()
        if not self._stop:
            self.bus.publish(
                PhaseChanged(t_wall=self.elapsed(), phase="profile", detail=self.device_label)
            )

    def _kernels_ready(self, warm: asyncio.Future[float], decoder: LiveDecoder) -> None:
        try:
            secs = warm.result()
        except Exception as e:  # numba could not compile here: keep the numpy decoder
            self.bus.publish(
                LogEvent(
                    t_wall=self.elapsed(),
                    level="warning",
                    message=f"numba kernels unavailable ({e}); using numpy",
                )
            )
            self.bus.publish(KernelsReady(t_wall=self.elapsed(), backend="numpy", seconds=0.0))
            return
        decoder.use_numba = True
        self.bus.publish(KernelsReady(t_wall=self.elapsed(), backend="numba", seconds=secs))
        self.bus.publish(
            LogEvent(
                t_wall=self.elapsed(), level="info", message=f"numba kernels ready in {secs:.1f}s"
            )
        )

    def _note_pushed(self, seg: Segments) -> None:
        """Record how many rows of each stream go to the decoder under the current configuration
        (the fixed lag releases them later, possibly after the configuration changed)."""
        streams, counts = np.unique(seg.stream, return_counts=True)
        for sid, c in zip(streams.tolist(), counts.tolist(), strict=True):
            q = self._pushed.setdefault(sid, deque())
            if q and q[-1][0] == self._config:
                q[-1][1] += c
            else:
                q.append([self._config, c])

    def _configs_of(self, stream: int, n: int) -> list[tuple[str, int, int]]:
        """Split the next n released rows of ``stream`` by the configuration they ran under."""
        q = self._pushed.get(stream)
        out, a = [], 0
        while a < n:
            if not q:  # rows never noted (cannot happen on the engine's paths): current config
                out.append((self._config, a, n))
                break
            cfg, left = q[0]
            take = min(left, n - a)
            if take == left:
                q.popleft()
            else:
                q[0][1] = left - take
            out.append((cfg, a, a + take))
            a += take
        return out

    def _publish_finals(
        self, finals: list[FinalRows], gpu: Any, tracker: _Tracker, config: str | None = None
    ) -> None:
        """Publish final rows; ``config`` names their configuration, else the rows are the
        live decoder's and ``_configs_of`` says which configuration each ran under."""
        for f in finals:
            tracker.add(f)
            parts = (
                [(config, 0, len(f.labels))]
                if config is not None
                else self._configs_of(f.stream, len(f.labels))
            )
            for cfg, a, b in parts:
                self.bus.publish(
                    DecodedBatch(
                        t_wall=self.elapsed(),
                        stream=f.stream,
                        start_ns=f.start_ns[a:b],
                        end_ns=f.end_ns[a:b],
                        labels=f.labels[a:b],
                        degenerate=f.degenerate[a:b],
                        kappa=f.kappa[a:b],
                        names=tuple(gpu.names[int(i)] for i in f.name[a:b]),
                        config=cfg,
                    )
                )
            k = f.kappa[-1] if len(f.kappa) else np.nan
            part = tracker.stream_partition(f.stream)
            self.bus.publish(
                KappaUpdate(
                    t_wall=self.elapsed(),
                    stream=f.stream,
                    kappa=float(k),
                    k_max=tracker.k_max,
                    **part,
                )
            )


class _NamesHolder:
    """Gives a capture session's name table the ``.names`` shape ``_publish_finals`` reads."""

    names: Any = None


def _pct(x: float | None) -> str:
    return "—" if x is None or x != x else f"{x:+.1%}"


def _pkg_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gitm-tui")
    except PackageNotFoundError:
        return "0+unknown"


def _in_daemon_thread(fn: Callable[[], float]) -> asyncio.Future[float]:
    """Run ``fn`` in a daemon thread; return a future resolved on this loop.

    Compilation can take seconds on a cold cache: a daemon thread lets the process exit at once
    when the user quits, where ``asyncio.to_thread`` would make interpreter shutdown wait for it.
    """
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[float] = loop.create_future()

    def deliver(result: float | None, exc: BaseException | None) -> None:
        # a closed loop means the run ended (the user quit) before compiling did: nobody waits
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, fut, result, exc)

    def target() -> None:
        try:
            result = fn()
        except BaseException as e:  # delivered to the engine, which falls back to numpy
            deliver(None, e)
        else:
            deliver(result, None)

    threading.Thread(target=target, name="gitm-numba-warmup", daemon=True).start()
    return fut


def _settle(fut: asyncio.Future[float], result: float | None, exc: BaseException | None) -> None:
    if fut.done():  # cancelled because the run ended first
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(float(result or 0.0))


class _Tracker:
    """Running totals for progress and the final summary (truth used for scoring only)."""

    def __init__(self, k_max: float) -> None:
        self.k_max = k_max
        self.rows = 0
        self.counts = np.zeros(N_LABELS, np.int64)
        self.exact = 0
        self.conf = np.zeros((N_REGIMES, N_REGIMES), np.int64)
        self.part: dict[int, np.ndarray] = {}  # stream -> [M_id, M_deg, undetermined]

    def add(self, f: FinalRows) -> None:
        self.rows += len(f.labels)
        self.counts += np.bincount(f.labels, minlength=N_LABELS)
        self.exact += int(f.exact.sum())
        und = np.isnan(f.kappa)
        p = self.part.setdefault(f.stream, np.zeros(3, np.int64))
        p += [int((~und & ~f.degenerate).sum()), int(f.degenerate.sum()), int(und.sum())]
        if f.truth is not None:
            # scored on decoded rows only: a copy or collective is labelled by what it is
            dec = f.labels < N_REGIMES
            self.conf += metrics.confusion(f.truth[dec], f.labels[dec])

    def shares(self) -> dict[str, float]:
        """Share of rows per regime, and per COPY / COMM label where there are any."""
        n = max(1, self.rows)
        return {r.name: float(self.counts[r]) / n for r in Label if r < N_REGIMES or self.counts[r]}

    def stream_partition(self, stream: int) -> dict[str, float]:
        p = self.part[stream]
        n = max(1, int(p.sum()))
        return {"m_id": p[0] / n, "m_deg": p[1] / n, "undetermined": p[2] / n}

    def partition(self) -> dict[str, float]:
        tot = sum(self.part.values(), np.zeros(3, np.int64))
        n = max(1, int(tot.sum()))
        return {"M_id": tot[0] / n, "M_deg": tot[1] / n, "undetermined": tot[2] / n}

    def exact_share(self) -> float:
        return self.exact / self.rows if self.rows else float("nan")

    def validation(self) -> dict[str, Any]:
        if not self.conf.sum():
            return {}
        return {
            "against": "simulator ground truth",
            "macro_f1": metrics.macro_f1(self.conf),
            "accuracy": metrics.accuracy(self.conf),
            "recall": metrics.recall(self.conf),
        }
