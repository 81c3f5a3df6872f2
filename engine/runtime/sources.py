"""Where a run's rows and telemetry come from, one coroutine per kind of source — the simulated
device streamed window by window, a real GPU watched through its telemetry, a Python program
captured under CUPTI — and where telemetry goes (telemetry.jsonl, Prometheus, an S3 mirror).

Each source runs until the engine stops it or its budget share ends, and reports through the
run's ``bus``, ``stream`` (decoded rows) and ``telemetry_out`` (engine.runtime.context.RunContext:
what the Engine offers; this module never imports the Engine). Which source a run streams is its
target's choice (engine/runtime/targets.py). The optimize phases (engine/runtime/phases.py)
measure the workload themselves; these only show it live.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from engine.regimes import Regime
from engine.runtime.events import LogEvent, RunStarted
from engine.runtime.stream import NamesHolder

if TYPE_CHECKING:
    from engine.device.simulator import SimulatedGPU
    from engine.eesm.live import LiveDecoder
    from engine.runtime.context import RunContext


#: seconds between two heartbeat ``progress`` events when nothing else moved
HEARTBEAT_S = 5.0


async def tick(eng: RunContext, every_s: float = HEARTBEAT_S) -> None:
    """Publish the run's progress every ``every_s`` while it runs — a heartbeat for readers
    of the JSON lines (a screen runs its own clock from ``Engine.elapsed``): the counters as
    they stand and the time spent waiting for a person."""
    from engine.runtime.events import Progress

    while True:
        t, gpu, tracker = eng.elapsed(), eng.gpu, eng.stream.tracker
        eng.bus.publish(
            Progress(
                t_wall=t,
                elapsed_s=t,
                budget_s=eng.config.budget_s,
                segments=tracker.rows,
                iterations=gpu.iterations_done if gpu is not None else 0,
                sim_time_ns=int(gpu.now) if gpu is not None else 0,
                regime_shares=tracker.shares() if tracker.rows else {},
                waiting_s=eng.waiting_s,
            )
        )
        await asyncio.sleep(every_s)


def announce(eng: RunContext) -> None:
    """Publish what this run is (``RunStarted``) and the device's notes."""
    cfg = eng.config
    if eng.workload is not None:
        name, title = eng.workload.name, eng.workload.title
    elif cfg.capture_program:
        name, title = "capture", " ".join(cfg.capture_program)
    else:
        name, title = cfg.workload, eng.real_title
    eng.bus.publish(
        RunStarted(
            t_wall=0.0,
            run_id=eng.run_id,
            workload=name,
            workload_title=title,
            device=eng.device_label,
            simulated=eng.workload is not None and eng.backend is None,
            budget_s=cfg.budget_s,
            seed=cfg.seed,
            streams=eng.workload.streams if eng.workload else (),
            regimes=tuple(r.name for r in Regime),
            target=cfg.target,
            approve=cfg.approve,
            run_dir=str(eng.run_dir),
        )
    )
    for note in eng.device_notes:
        eng.bus.publish(LogEvent(t_wall=0.0, level="info", message=f"device: {note}"))
    if cfg.device == "auto" and eng.backend is None:
        eng.bus.publish(
            LogEvent(
                t_wall=0.0,
                level="warning",
                message="no GPU found: running on the simulated H100 (gitm-tui doctor says why)",
            )
        )


async def stream_simulated(eng: RunContext, gpu: SimulatedGPU, decoder: LiveDecoder) -> None:
    """Stream live windows of the unchanged workload until the profile share is spent."""
    cfg = eng.config
    eng.stream.config = "baseline"
    end = eng.deadline("profile") if cfg.optimize else cfg.budget_s
    windows = 0
    while not eng.stopped and (windows == 0 or eng.elapsed() < end):
        if cfg.max_windows is not None and windows >= cfg.max_windows:
            break
        if eng.paused:
            await eng.wait_paused()
            continue
        t_tick = time.monotonic()
        eng.check_warm(decoder)
        batch = await asyncio.to_thread(gpu.run_for, cfg.window_ns)
        eng.stream.note_pushed(batch.segments)
        finals = await asyncio.to_thread(decoder.push, batch.segments, batch.truth)
        windows += 1
        eng.stream.publish(finals, gpu)
        eng.telemetry_out(batch.telemetry)
        eng.stream.progress(gpu, cfg.budget_s)
        if cfg.realtime:
            await asyncio.sleep(max(0.0, cfg.tick_s - (time.monotonic() - t_tick)))
        else:
            await asyncio.sleep(0)
    # the live stream ends here (measurements are decoded whole): release its last rows now,
    # under the configuration they ran under, not at the end of the run
    eng.stream.publish(await asyncio.to_thread(decoder.flush), gpu)
    eng.offset_ns = int(gpu.now)


async def watch_device(eng: RunContext) -> None:
    """A real GPU: sample its telemetry until the budget or stop (kernel regimes need
    `gitm-tui capture -- …`, which records the kernels the program launches)."""
    from engine.telemetry.sampler import Sampler

    cfg, backend = eng.config, eng.backend
    eng.log(
        "info",
        f"watching {backend.label}; for kernel regimes run a program under "
        "`gitm-tui capture -- python train.py`",
    )
    stop = asyncio.Event()

    def lost(idx: int, why: str) -> None:
        eng.log("warning", f"GPU {idx}: {why}")

    sampler = Sampler(backend, cfg.telemetry_interval_s, publish=eng.telemetry_out, on_lost=lost)
    task = asyncio.ensure_future(sampler.run(stop))
    try:
        while not eng.stopped and eng.elapsed() < cfg.budget_s and not task.done():
            await asyncio.sleep(min(0.1, cfg.telemetry_interval_s))
    finally:  # also when the run is cancelled (the dashboard quit): no write after close
        stop.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        backend.close()


async def stream_capture(eng: RunContext, decoder: LiveDecoder) -> None:
    """Run the program in a thread under CUPTI; decode its batches as they arrive."""
    from engine.trace.cupti.cupti import capture, run_python_program

    cfg = eng.config
    loop = asyncio.get_running_loop()
    q: asyncio.Queue[Any] = asyncio.Queue()
    done = object()
    out = eng.run_dir / "trace.json"
    box: dict[str, Any] = {}

    def on_batch(seg: Any, names: Any) -> None:
        loop.call_soon_threadsafe(q.put_nowait, (seg, names))

    def program() -> None:
        try:
            with capture(out, flush_interval_s=cfg.capture_flush_s, on_batch=on_batch) as cap:
                box["session"] = cap
                box["code"] = run_python_program(list(cfg.capture_program))
        except BaseException as e:
            box["error"] = e
        finally:
            loop.call_soon_threadsafe(q.put_nowait, done)

    threading.Thread(target=program, name="gitm-capture", daemon=True).start()
    sampler_stop = asyncio.Event()
    sampler_task = None
    if eng.backend is not None:
        from engine.telemetry.sampler import Sampler

        sampler_task = asyncio.ensure_future(
            Sampler(eng.backend, cfg.telemetry_interval_s, publish=eng.telemetry_out).run(
                sampler_stop
            )
        )
    names = None
    holder = NamesHolder()
    try:
        while not eng.stopped:
            item = await q.get()
            if item is done:
                break
            seg, names = item
            holder.names = names
            eng.stream.note_pushed(seg)
            finals = await asyncio.to_thread(decoder.push, seg)
            eng.stream.publish(finals, holder)
    finally:
        sampler_stop.set()
        if sampler_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await sampler_task
    if names is not None:
        eng.stream.publish(decoder.flush(), holder)
    if "error" in box:
        eng.log("error", f"capture: {box['error']}")
    else:
        eng.log("info", f"program exited with status {box.get('code')}; trace in {out}")


def open_sinks(eng: RunContext) -> list[Any]:
    """telemetry.jsonl in the run store always; Prometheus when a port was given; OTLP when an
    endpoint was."""
    from engine.telemetry.sinks import JsonlSink, PrometheusSink

    sinks: list[Any] = [JsonlSink(eng.run_dir / "telemetry.jsonl")]
    cfg = eng.config
    if cfg.prometheus_port is not None:
        try:
            prom = PrometheusSink(cfg.prometheus_port, cfg.prometheus_addr)
        except OSError as e:
            eng.log(
                "warning",
                f"Prometheus endpoint not started on {cfg.prometheus_addr}:"
                f"{cfg.prometheus_port}: {e.strerror or e}",
            )
        else:
            sinks.append(prom)
            eng.log("info", f"Prometheus metrics on http://{prom.addr}:{prom.port}/metrics")
    if cfg.otlp_endpoint is not None:
        from engine.telemetry.otlp import start_otlp

        interval = cfg.telemetry_interval_s
        sinks += start_otlp(cfg.otlp_endpoint, eng.run_id, interval, eng.log, eng.hw.name)
    return sinks


def mirror_bound_s(budget_s: float) -> float:
    """Seconds the run waits for its mirror: a fifth of its budget, between 2 and 10 s (an
    unreachable S3 root held a 2 s run to 32.9 s, its client retrying)."""
    return min(10.0, max(2.0, 0.2 * budget_s))


async def mirror(eng: RunContext) -> None:
    """Copy the run's folder to $GITM_S3_ROOT when it is set, waiting at most
    ``mirror_bound_s``: the copy runs in a daemon thread, so one that never answers neither
    holds the run's end nor the process's exit (the run's folder is complete either way)."""

    from engine.telemetry.sinks import mirror_run

    root = os.environ.get("GITM_S3_ROOT")
    if not root or not eng.run_dir.exists():
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not done.done():
            (done.set_result if ok else done.set_exception)(value)

    def copy() -> None:
        try:
            got: tuple[bool, Any] = (True, len(mirror_run(eng.run_dir)))
        except Exception as e:
            got = (False, e)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, *got)

    threading.Thread(target=copy, name="mirror", daemon=True).start()
    bound = mirror_bound_s(eng.config.budget_s)
    try:
        n = await asyncio.wait_for(asyncio.shield(done), bound)
    except TimeoutError:
        eng.log(
            "warning",
            f"mirroring to {root} did not finish within {bound:g} s (unreachable?); not waited "
            f"for — the run is in {eng.run_dir}",
        )
        return
    except Exception as e:
        eng.log("warning", f"mirroring to {root} failed ({e}); the run is in {eng.run_dir}")
        return
    eng.log("info", f"mirrored {n} files to {root}")
