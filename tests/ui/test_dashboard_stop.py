"""Ctrl-C and SIGTERM/SIGHUP stop a dashboard run as headless does (issue 36): the run stops,
journals, writes its report, and the app exits 130 (Textual then restores the terminal)."""

from __future__ import annotations

from engine.runtime import Engine, RunConfig
from engine.store.journal import read
from gitm_tui.app import Settings, make_app
from tests.ui.waiting import until


async def _stopped(tmp_path, monkeypatch, how: str) -> None:
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    eng = Engine(RunConfig(workload="kitti", budget_s=60, tick_s=0.05))
    app = make_app(Settings(), eng)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.dashboard.run_id, what="the run's start")
        if how == "key":
            await pilot.press("ctrl+c")
        else:  # what the SIGTERM / SIGHUP handler calls
            app.dashboard.action_interrupt()
        await until(pilot, lambda: app.return_value is not None, what="the app's exit")
    assert app.return_value == 130  # what run() returns: the exit code (run_dashboard)
    (journal,) = (tmp_path / "runs").glob("*/journal.jsonl")
    finished = [r for r in read(journal) if r.get("type") == "run_finished"]
    assert finished and finished[-1]["status"] == "stopped"
    assert (journal.parent / "report.md").exists()


async def test_ctrl_c_stops_the_run_with_a_report_and_exit_130(tmp_path, monkeypatch):
    await _stopped(tmp_path, monkeypatch, "key")


async def test_a_termination_signal_stops_the_run_with_a_report_and_exit_130(tmp_path, monkeypatch):
    await _stopped(tmp_path, monkeypatch, "signal")
