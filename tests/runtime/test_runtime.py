"""Runtime: budgets, the non-blocking bus, and the Engine's run, commands and summary."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from engine.runtime import BudgetError, Engine, EventBus, RunConfig, parse_budget
from engine.runtime.budget import format_seconds
from engine.runtime.events import (
    EVENT_TYPES,
    DecodedBatch,
    KappaUpdate,
    LogEvent,
    PhaseChanged,
    RunFinished,
    TelemetryEvent,
)
from engine.telemetry.sample import TelemetrySample


@pytest.mark.parametrize(
    "text,secs",
    [
        ("10s", 10),
        ("5m", 300),
        ("1h30m", 5400),
        ("24h", 86400),
        ("90", 90),
        ("1.5h", 5400),
        ("250ms", 0.25),
        (" 2 m ", 120),
    ],
)
def test_parse_budget(text, secs):
    assert parse_budget(text) == pytest.approx(secs)


@pytest.mark.parametrize("bad", ["", "10x", "s", "-5s", "0s", "5 parsecs", "1h xx", "nan"])
def test_parse_budget_rejects(bad):
    with pytest.raises(BudgetError):
        parse_budget(bad)


def test_format_seconds():
    assert format_seconds(4.25) == "4.2s" and format_seconds(185) == "3m05s"
    assert format_seconds(7800) == "2h10m"


def _decoded(stream, n, t=0.0):
    a = np.arange(n)
    return DecodedBatch(
        t_wall=t,
        stream=stream,
        start_ns=a,
        end_ns=a + 1,
        labels=np.zeros(n, np.uint8),
        degenerate=np.zeros(n, bool),
        kappa=np.ones(n, np.float32),
        names=("k",) * n,
    )


def test_bus_coalesces_high_rate_kinds_and_keeps_order_of_others():
    bus = EventBus(maxsize=8)
    sub = bus.subscribe()
    bus.publish(PhaseChanged(t_wall=0, phase="profile"))
    for i in range(100):
        bus.publish(_decoded(7, 3, t=i))
        bus.publish(TelemetryEvent(t_wall=i, sample=TelemetrySample(t_ns=i, device=0, source="x")))
    bus.publish(LogEvent(t_wall=1, level="info", message="hello"))
    evs = [sub.get_nowait() for _ in range(len(sub))]
    assert [e.kind for e in evs] == ["phase", "decoded", "telemetry", "log"]
    assert len(evs[1]) == 300  # merged, nothing lost
    assert evs[2].sample.t_ns == 99  # latest on top, history kept for sparklines
    assert [x.t_ns for x in evs[2].samples()] == list(range(100))
    assert sub.dropped == 0 and sub.get_nowait() is None


def test_bus_overflow_drops_info_logs_first_never_lifecycle():
    bus = EventBus(maxsize=4)
    sub = bus.subscribe()
    bus.publish(PhaseChanged(t_wall=0, phase="profile"))
    for i in range(10):
        bus.publish(LogEvent(t_wall=i, level="info", message=str(i)))
    bus.publish(LogEvent(t_wall=99, level="error", message="boom"))
    evs = [sub.get_nowait() for _ in range(len(sub))]
    assert evs[0].kind == "phase" and evs[-1].message == "boom"
    assert len(evs) == 4 and sub.dropped == 8 and bus.dropped == 8


def test_every_event_serialises_with_type_and_version():
    fin = RunFinished(
        t_wall=1,
        status="completed",
        segments=1,
        iterations=1,
        sim_time_ns=1,
        wall_s=1,
        regime_shares={},
        kappa_partition={},
        fixed_lag_exact=float("nan"),
        validation={},
        dropped_events=0,
        kernels="numba",
    )
    for ev in (
        fin,
        _decoded(1, 2),
        KappaUpdate(
            t_wall=0, stream=1, kappa=float("nan"), m_id=1, m_deg=0, undetermined=0, k_max=60
        ),
    ):
        j = ev.to_json()
        assert j["v"] == 1 and j["type"] in EVENT_TYPES
    assert fin.to_json()["fixed_lag_exact"] is None  # NaN → null, valid JSON
    assert _decoded(1, 2).to_json()["labels"] == ["COMPUTE", "COMPUTE"]


async def _collect(engine):
    sub = engine.bus.subscribe()
    task = asyncio.ensure_future(engine.run())
    evs = [ev async for ev in sub]
    await task
    return evs


async def test_engine_run_publishes_decoded_rows_for_every_segment():
    eng = Engine(
        RunConfig(
            workload="kitti", budget_s=30, realtime=False, max_windows=4, seed=2, optimize=False
        )
    )
    evs = await _collect(eng)
    kinds = [e.kind for e in evs]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    fin = evs[-1]
    decoded = sum(len(e) for e in evs if e.kind == "decoded")
    assert fin.status == "completed" and decoded == fin.segments > 0
    assert {e.stream for e in evs if e.kind == "decoded"} == {7, 14}
    assert fin.validation["macro_f1"] > 0.9 and fin.validation["against"].startswith("simulator")
    assert abs(sum(fin.regime_shares.values()) - 1) < 1e-9
    assert "telemetry" in kinds and "kappa" in kinds


async def test_engine_pause_resume_stop():
    eng = Engine(RunConfig(workload="hft-lob", budget_s=60, tick_s=0.02))
    sub = eng.bus.subscribe()
    task = asyncio.ensure_future(eng.run())
    phases = []
    async for ev in sub:
        if isinstance(ev, PhaseChanged):
            phases.append(ev.phase)
            if ev.phase == "profile" and "paused" not in phases:
                eng.pause()
            elif ev.phase == "paused":
                await asyncio.sleep(0.1)
                assert eng.paused
                eng.resume()
                await asyncio.sleep(0.05)
                eng.stop()
        if isinstance(ev, RunFinished):
            fin = ev
    await task
    assert "paused" in phases and phases[-1] == "done"
    assert fin.status == "stopped"
    with pytest.raises(ValueError, match="unknown command"):
        eng.command("explode")


async def test_engine_budget_ends_the_run():
    eng = Engine(RunConfig(workload="af2", budget_s=0.3, tick_s=0.05))
    evs = await _collect(eng)
    assert evs[-1].status == "completed" and 0.3 <= evs[-1].wall_s < 5


def test_warmup_finishing_after_the_loop_closed_is_silent():
    """Quitting during the first-run numba compile: the warm-up thread finishes after the event
    loop has closed and must not print a thread traceback."""
    import asyncio
    import threading

    from engine.runtime.warmup import in_daemon_thread

    release = threading.Event()
    errors: list[BaseException] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value) if args.exc_value else None
    try:

        async def start() -> None:
            in_daemon_thread(lambda: (release.wait(5), 1.0)[1])

        asyncio.run(start())  # the loop closes with the warm-up still running
        release.set()
        for t in threading.enumerate():
            if t.name == "gitm-numba-warmup":
                t.join(5)
    finally:
        threading.excepthook = old_hook
    assert errors == []


def test_released_rows_keep_the_configuration_they_ran_under():
    """The fixed lag releases rows late: those pushed before a lever was kept stay 'baseline'."""
    from engine.trace.segments import Segments

    def seg(n: int, stream: int) -> Segments:
        start = np.arange(n, dtype=np.int64)
        return Segments.from_columns(start_ns=start, end_ns=start + 1, stream=np.full(n, stream))

    eng = Engine(RunConfig(workload="hft-lob", budget_s=5))
    st = eng.stream
    st.config = "baseline"
    st.note_pushed(seg(10, 7))
    st.note_pushed(seg(5, 7))
    st.config = "baseline + cuda_graphs"
    st.note_pushed(seg(4, 7))
    assert st.configs_of(7, 12) == [("baseline", 0, 12)]
    assert st.configs_of(7, 5) == [("baseline", 0, 3), ("baseline + cuda_graphs", 3, 5)]
    assert st.configs_of(7, 2) == [("baseline + cuda_graphs", 0, 2)]


async def test_commands_file_ignores_malformed_lines():
    """Lines anyone may append to a run's commands file — not JSON, JSON of another shape, an
    unknown action, a non-string id — are skipped; the well-formed decision still arrives."""
    import contextlib

    eng = Engine(RunConfig(workload="hft-lob", budget_s=5))
    eng.run_dir.mkdir(parents=True, exist_ok=True)
    lines = [
        "not json",
        "[1, 2]",
        '"approve"',
        '{"action": "launch", "id": "I1"}',
        '{"action": "approve", "id": 5}',
        '{"action": "approve", "id": "I2", "by": ["x"]}',
    ]
    (eng.run_dir / "commands.jsonl").write_text("\n".join(lines) + "\n")
    from engine.runtime.phases import OptimizePhases

    task = asyncio.ensure_future(OptimizePhases(eng).poll_commands())
    try:
        for _ in range(50):
            await asyncio.sleep(0.05)
            if not eng.decisions.empty():
                break
        assert not task.done()  # the poller is still alive
        assert eng.decisions.get_nowait() == ("approve", "I2", "cli")
        assert eng.decisions.empty()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_a_released_run_lock_is_free_even_while_a_forked_child_lives(tmp_path):
    """A run that forked (DataLoader workers) and then ended must not look alive because a
    child still holds a copy of the lock's descriptor."""
    import os
    import signal

    from engine.store.runs import RunLock, is_live

    lock = RunLock(tmp_path)
    assert lock.acquire()
    pid = os.fork()
    if pid == 0:  # the child keeps the inherited descriptor and sleeps
        import time

        time.sleep(30)
        os._exit(0)
    try:
        lock.release()
        assert not is_live(tmp_path)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


async def test_a_run_waiting_for_a_person_says_how_long_and_beats_not_floods(tmp_path, monkeypatch):
    """Issue 38: the dashboard's clock froze while a manual run waited for a person, and a real
    program's run was 200 of 231 JSON lines of empty progress. The engine now counts the time
    the apply phase waits for a decision (``waiting_s``, part of the elapsed time) and its own
    progress is a heartbeat (sources.HEARTBEAT_S apart), carrying the counters as they stand."""
    from engine.runtime import sources
    from engine.runtime.events import Progress

    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    monkeypatch.setattr(sources, "HEARTBEAT_S", 1.0)  # a short run still sees a few beats
    eng = Engine(RunConfig(workload="hft-lob", budget_s=12, approve="manual", tick_s=0.05))
    sub = eng.bus.subscribe()
    task = asyncio.ensure_future(eng.run())
    waiting: list[Progress] = []
    async for ev in sub:
        if isinstance(ev, Progress) and ev.waiting_s > 0:
            waiting.append(ev)
        if isinstance(ev, RunFinished):
            break
    await task
    assert waiting, "nobody decided, yet no waiting was counted"
    assert all(b.waiting_s <= b.elapsed_s for b in waiting)
    assert [b.waiting_s for b in waiting] == sorted(b.waiting_s for b in waiting)  # it grows
    assert all(b.segments > 0 and b.regime_shares for b in waiting)  # counters as they stand


async def test_a_watch_run_journals_its_end_so_the_next_start_does_not_call_it_dead():
    """A run that only watches (no optimize loop) still journals its start and end: before, its
    folder held only a lock and telemetry, and every next start warned it had died."""
    cfg = dict(workload="kitti", budget_s=30, realtime=False, max_windows=2, seed=2)
    first = Engine(RunConfig(**cfg, optimize=False))
    await _collect(first)
    journal = (first.run_dir / "journal.jsonl").read_text().splitlines()
    assert '"run_started"' in journal[0] and '"watch only: nothing applied"' in journal[-1]
    second = Engine(RunConfig(**cfg, optimize=False))
    logs = [e.message for e in await _collect(second) if e.kind == "log"]
    assert not [m for m in logs if "had died" in m], logs


async def test_the_strips_move_while_a_trial_measures(tmp_path, monkeypatch):
    """The regime strips stood still through every trial (issue 50): only a kept lever's blocks
    were streamed, after its verdict. Each block of the configuration a trial compares with is
    streamed as it is measured, under that configuration's name."""
    from engine.runtime.events import DecodedBatch, InterventionUpdate

    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    eng = Engine(RunConfig(workload="hft-lob", budget_s=20, approve="auto", force=True))
    sub = eng.bus.subscribe()
    task = asyncio.ensure_future(eng.run())
    trying: str | None = None
    during: list[str] = []
    async for ev in sub:
        if isinstance(ev, InterventionUpdate):
            if ev.state == "APPLYING":
                trying = ev.id
            elif ev.id == trying:
                break  # its verdict
        elif isinstance(ev, DecodedBatch) and trying is not None:
            during.append(ev.config)
        if task.done():
            break
    assert trying is not None, "no trial ran"
    assert during, "no decoded rows reached the strips while the trial measured"
    assert all(c.startswith("baseline") and "(trial)" not in c for c in during)  # arm A only
    eng.stop()
    await asyncio.wait_for(task, 60)
