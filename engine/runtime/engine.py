"""The asyncio Engine: drives a device source, decodes live, publishes events, obeys commands.

Main loop (``Engine.run``): warm the numba kernels in a worker thread (decoding meanwhile with
the numpy references), then until the budget is spent or ``stop`` is called: simulate a window
of device time (worker thread) → decode it with the fixed-lag pipeline (worker thread, nogil
kernels) → publish decoded rows, κ, telemetry and progress on the bus. The event loop itself
only moves data. Issue #4 adds the attribute / rank / apply / report phases to this loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.device.simulator import SimulatedGPU
from engine.eesm import metrics
from engine.eesm.live import FinalRows, LiveDecoder, warm_up
from engine.eesm.pipeline import EesmModel
from engine.manifest import load_hardware, load_workload
from engine.regimes import N_REGIMES, Regime
from engine.runtime.bus import EventBus
from engine.runtime.events import (
    DecodedBatch,
    KappaUpdate,
    KernelsReady,
    LogEvent,
    PhaseChanged,
    Progress,
    RunFinished,
    RunStarted,
    TelemetryEvent,
)


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
    #: stop after this many windows (tests); None = until the budget is spent
    max_windows: int | None = None


class Engine:
    """One optimize-loop run on one device source. Create, subscribe to ``bus``, ``await run()``."""

    def __init__(self, config: RunConfig, bus: EventBus | None = None) -> None:
        self.config = config
        self.bus = bus or EventBus()
        self.hw = load_hardware(config.hardware)
        self.workload = load_workload(config.workload)
        self.run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.device_label = f"simulated {self.hw.name}"
        self._paused = asyncio.Event()
        self._paused.set()  # set = running
        self._stop = False
        self._t0 = 0.0
        self._paused_s = 0.0
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
        """Finish after the current window; the run ends with status 'stopped'."""
        self._stop = True
        self._paused.set()

    def command(self, name: str) -> None:
        """Apply a command by name: pause | resume | stop."""
        handlers = {"pause": self.pause, "resume": self.resume, "stop": self.stop}
        if name not in handlers:
            raise ValueError(f"unknown command {name!r}; one of {sorted(handlers)}")
        handlers[name]()

    @property
    def paused(self) -> bool:
        """Return whether the run is paused."""
        return not self._paused.is_set()

    def elapsed(self) -> float:
        """Return budget seconds used so far (wall time minus paused time)."""
        return 0.0 if not self._t0 else time.monotonic() - self._t0 - self._paused_s

    # ------------------------------------------------------------------ main loop
    async def run(self) -> RunFinished:
        """Run to the end of the budget (or stop); return the final event (also published)."""
        cfg, pub = self.config, self.bus.publish
        self._t0 = time.monotonic()
        self.state = "running"
        gpu = SimulatedGPU(self.hw, self.workload, seed=cfg.seed)
        model = EesmModel.build(self.hw)
        decoder = LiveDecoder(model, use_numba=False)
        pub(
            RunStarted(
                t_wall=0.0,
                run_id=self.run_id,
                workload=self.workload.name,
                workload_title=self.workload.title,
                device=self.device_label,
                simulated=True,
                budget_s=cfg.budget_s,
                seed=cfg.seed,
                streams=self.workload.streams,
                regimes=tuple(r.name for r in Regime),
            )
        )
        pub(
            PhaseChanged(
                t_wall=self.elapsed(),
                phase="warmup",
                detail="compiling numba kernels; numpy reference decoder active",
            )
        )
        warm: asyncio.Future[float] | None = _in_daemon_thread(warm_up)
        pub(PhaseChanged(t_wall=self.elapsed(), phase="profile", detail=self.device_label))
        tracker = _Tracker(model.params.kappa.k_max)
        windows, status = 0, "completed"
        try:
            while not self._stop and self.elapsed() < cfg.budget_s:
                if cfg.max_windows is not None and windows >= cfg.max_windows:
                    break
                if self.paused:
                    await self._wait_paused()
                    continue
                t_tick = time.monotonic()
                if warm is not None and warm.done():
                    self._kernels_ready(warm, decoder)
                    warm = None
                batch = await asyncio.to_thread(gpu.run_for, cfg.window_ns)
                finals = await asyncio.to_thread(decoder.push, batch.segments, batch.truth)
                windows += 1
                self._publish_finals(finals, gpu, tracker)
                for s in batch.telemetry:
                    pub(TelemetryEvent(t_wall=self.elapsed(), sample=s))
                pub(
                    Progress(
                        t_wall=self.elapsed(),
                        elapsed_s=self.elapsed(),
                        budget_s=cfg.budget_s,
                        segments=tracker.rows,
                        iterations=gpu.iterations_done,
                        sim_time_ns=int(gpu.now),
                        regime_shares=tracker.shares(),
                    )
                )
                if cfg.realtime:
                    await asyncio.sleep(max(0.0, cfg.tick_s - (time.monotonic() - t_tick)))
                else:
                    await asyncio.sleep(0)
            if self._stop:
                status = "stopped"
            self._publish_finals(decoder.flush(), gpu, tracker)
        except Exception as e:  # a bug: report it as an event, then re-raise for the caller
            status = "failed"
            pub(LogEvent(t_wall=self.elapsed(), level="error", message=f"engine failed: {e!r}"))
            raise
        finally:
            if warm is not None and not warm.done():
                warm.cancel()
            self.state = "done"
            fin = RunFinished(
                t_wall=self.elapsed(),
                status=status,
                segments=tracker.rows,
                iterations=gpu.iterations_done,
                sim_time_ns=int(gpu.now),
                wall_s=self.elapsed(),
                regime_shares=tracker.shares(),
                kappa_partition=tracker.partition(),
                fixed_lag_exact=tracker.exact_share(),
                validation=tracker.validation(),
                dropped_events=self.bus.dropped,
                kernels="numba" if decoder.use_numba else "numpy",
            )
            pub(PhaseChanged(t_wall=self.elapsed(), phase="done", detail=status))
            pub(fin)
        return fin

    async def _wait_paused(self) -> None:
        t = time.monotonic()
        self.bus.publish(PhaseChanged(t_wall=self.elapsed(), phase="paused"))
        await self._paused.wait()
        self._paused_s += time.monotonic() - t
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

    def _publish_finals(
        self, finals: list[FinalRows], gpu: SimulatedGPU, tracker: _Tracker
    ) -> None:
        for f in finals:
            tracker.add(f)
            self.bus.publish(
                DecodedBatch(
                    t_wall=self.elapsed(),
                    stream=f.stream,
                    start_ns=f.start_ns,
                    end_ns=f.end_ns,
                    labels=f.labels,
                    degenerate=f.degenerate,
                    kappa=f.kappa,
                    names=tuple(gpu.names[int(i)] for i in f.name),
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


def _in_daemon_thread(fn: Callable[[], float]) -> asyncio.Future[float]:
    """Run ``fn`` in a daemon thread; return a future resolved on this loop.

    Compilation can take seconds on a cold cache: a daemon thread lets the process exit at once
    when the user quits, where ``asyncio.to_thread`` would make interpreter shutdown wait for it.
    """
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[float] = loop.create_future()

    def target() -> None:
        try:
            result = fn()
        except BaseException as e:  # delivered to the engine, which falls back to numpy
            loop.call_soon_threadsafe(_settle, fut, None, e)
        else:
            loop.call_soon_threadsafe(_settle, fut, result, None)

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
        self.counts = np.zeros(N_REGIMES, np.int64)
        self.exact = 0
        self.conf = np.zeros((N_REGIMES, N_REGIMES), np.int64)
        self.part: dict[int, np.ndarray] = {}  # stream -> [M_id, M_deg, undetermined]

    def add(self, f: FinalRows) -> None:
        self.rows += len(f.labels)
        self.counts += np.bincount(f.labels, minlength=N_REGIMES)
        self.exact += int(f.exact.sum())
        und = np.isnan(f.kappa)
        p = self.part.setdefault(f.stream, np.zeros(3, np.int64))
        p += [int((~und & ~f.degenerate).sum()), int(f.degenerate.sum()), int(und.sum())]
        if f.truth is not None:
            self.conf += metrics.confusion(f.truth, f.labels)

    def shares(self) -> dict[str, float]:
        n = max(1, self.rows)
        return {r.name: float(self.counts[r]) / n for r in Regime}

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
