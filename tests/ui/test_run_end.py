"""What a person reads on the dashboard (issue 38): a measured-only lever never reads "nan",
the clock runs while the run waits for a person, and the end of a run says how it ended, what
is left undecided and where the report is — closing a question that nothing can act on now."""

from __future__ import annotations

import dataclasses
import math

from textual.widgets import Static

from engine.runtime.events import OptimizeStatus, RunFinished
from engine.runtime.narrate import MEASURED_ONLY, prediction
from gitm_tui.app import Settings, make_app
from gitm_tui.screens import ConfirmScreen, InterventionScreen
from gitm_tui.widgets.interventions import InterventionTable
from gitm_tui.widgets.run_header import RunHeader
from tests.ui.scripted_engine import NoTraceEngine, ScriptedEngine, run_shown
from tests.ui.waiting import until


def test_a_prediction_reads_as_a_person_reads_it():
    assert prediction(0.276, 0.9) == "predicted +27.6% (confidence 0.90)"
    assert prediction(0.1, 0.5, " less time") == "predicted +10.0% less time (confidence 0.50)"
    for none in (math.nan, None, math.inf):
        assert prediction(none, 0.0) == MEASURED_ONLY
    assert "nan" not in MEASURED_ONLY


class _MeasuredOnly(ScriptedEngine):
    """The script, plus a lever of a run with no device trace (no prediction: NaN, conf 0)."""

    async def run(self) -> None:
        self._iv("I4", "threads", "SAFE", "PROPOSED", math.nan)
        self.ivs["I4"] = dataclasses.replace(self.ivs["I4"], confidence=0.0)
        self.bus.publish(self.ivs["I4"])
        await super().run()


class _Clocked(ScriptedEngine):
    """The script with an engine clock and time spent waiting for a person."""

    waiting_s = 42.0

    def elapsed(self) -> float:
        return 55.0


async def test_a_measured_only_lever_says_so_everywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    app = make_app(Settings(), _MeasuredOnly())
    async with app.run_test(size=(160, 45)) as pilot:
        await run_shown(pilot)
        table = app.query_one(InterventionTable)
        row = [str(c) for c in table.get_row("I4")]
        assert "measured" in row and "nan" not in " ".join(row).lower() and "0.00" not in row
        table.focus()
        table.move_cursor(row=table.get_row_index("I4"))
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, InterventionScreen))
        body = str(app.screen.query_one(Static).render())
        assert MEASURED_ONLY in body and "nan" not in body.lower()
        assert "counterfactual" not in body  # nothing was replayed
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.dashboard)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        question = str(app.screen.query_one(Static).render())
        assert MEASURED_ONLY in question and "nan" not in question.lower()
        await pilot.press("n")
        await pilot.press("q")


async def test_the_clock_runs_and_says_the_time_waiting_for_a_person(tmp_path, monkeypatch):
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    app = make_app(Settings(), _Clocked())
    async with app.run_test(size=(160, 45)) as pilot:
        await run_shown(pilot)
        header = app.query_one(RunHeader)
        await until(pilot, lambda: header.elapsed == 55.0, what="the clock past the last event")
        assert "42.0s waiting for you" in str(header.render())
        await pilot.press("q")


async def test_the_end_of_a_run_says_what_is_left_and_closes_an_open_question(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    engine = ScriptedEngine()
    app = make_app(Settings(), engine)
    async with app.run_test(size=(160, 45)) as pilot:
        await run_shown(pilot)
        table = app.query_one(InterventionTable)
        table.focus()
        table.move_cursor(row=table.get_row_index("I2"))
        await pilot.press("a")  # the question is open when the budget ends
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        engine.bus.publish(
            RunFinished(
                t_wall=60.0,
                status="completed",
                segments=144,
                iterations=12,
                sim_time_ns=10**9,
                wall_s=60.0,
                regime_shares={},
                kappa_partition={},
                fixed_lag_exact=1.0,
                validation={},
                dropped_events=0,
                kernels="numba",
                report=str(tmp_path / "report.md"),
                headline="target 15% met: +27.7% kept",
            )
        )
        await until(pilot, lambda: app.screen is app.dashboard, what="the question closed")
        end = str(app.query_one("#ended", Static).render())
        assert "ended completed: target 15% met" in end
        assert "2 proposal(s) left undecided (I2, I3)" in end
        assert f"report: {tmp_path / 'report.md'}" in end
        assert "approve I2" not in engine.commands  # closing it sent nothing
        await pilot.press("q")


class _NoTrace(NoTraceEngine):
    """A real program measured from outside, with a wide A/A spread."""

    noise_floor = 0.2


async def test_a_run_with_no_kernel_trace_shows_what_it_measures(tmp_path, monkeypatch):
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    app = make_app(Settings(), _NoTrace())
    async with app.run_test(size=(160, 45)) as pilot:
        dash = app.dashboard
        await until(pilot, lambda: "I2" in str(dash.query_one("#measured", Static).render()))
        measured = str(dash.query_one("#measured", Static).render())
        assert "baseline 3.949 ms/step" in measured and "A/A noise floor ±20.0%" in measured
        assert "I1 threads=1  ROLLED_BACK  measured +3.1%" in measured
        assert "I2 interop_threads=1  PROPOSED  not measured yet" in measured
        assert dash.has_class("-no-trace")
        for hidden in ("KernelTable", "KappaPanel", "#strips", "#side"):
            assert not dash.query_one(hidden).display, hidden
        assert dash.query_one("#measured").display
        await pilot.press("q")


async def test_the_keys_the_help_names_switch_tables(tmp_path, monkeypatch):
    """The help says: on the tab bar, ←/→ switch tables (it used to promise Tab, which moves
    the focus)."""
    from textual.widgets import TabbedContent, Tabs

    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    app = make_app(Settings(), ScriptedEngine())
    async with app.run_test(size=(160, 45)) as pilot:
        await run_shown(pilot)
        loop = app.dashboard.query_one("#loop", TabbedContent)
        loop.query_one(Tabs).focus()
        await pilot.press("right")
        await until(pilot, lambda: loop.active == "tab-violations")
        await pilot.press("left")
        await until(pilot, lambda: loop.active == "tab-interventions")
        await pilot.press("q")


async def test_an_unresolved_noise_floor_reads_unknown_never_nan(tmp_path, monkeypatch):
    """A run diagnosed in its profile phase (a machine too noisy: the A/A gave no finite
    spread) said 'noise ±nan%' on the bar and 'A/A spread ±nan%' in the measured panel."""
    from gitm_tui.widgets.optimize_bar import OptimizeBar
    from tests.ui.scripted_engine import NoTraceEngine

    class _Unresolved(NoTraceEngine):
        async def run(self) -> None:
            self.bus.publish(
                OptimizeStatus(
                    t_wall=1.0, baseline_ns=11_470_000.0, current_ns=11_470_000.0, gain=0.0,
                    target=0.15, noise_floor=math.nan, phase="profile", phase_deadline_s=3.3,
                    unit="ms/step", scale=1e6,
                )
            )  # fmt: skip
            await super().run()

    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    engine = _Unresolved()
    app = make_app(Settings(), engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await run_shown(pilot)
        bar = app.query_one(OptimizeBar)
        bar.noise = math.nan  # the last status, as a diagnosed run leaves it
        app.dashboard._show_measured()
        await pilot.pause()
        shown = bar.render().plain + str(app.query_one("#measured", Static).render())
        assert "noise unknown" in shown and "A/A noise floor unknown (the A/A did not" in shown
        assert "nan" not in shown.lower()
        # a floor the time left cannot resolve, from an A/A that did measure its spread: the
        # panel gives the spread, as the end line does (it said "A/A spread unknown")
        app.dashboard._aa_spread = 0.099
        app.dashboard._show_measured()
        await pilot.pause()
        panel = str(app.query_one("#measured", Static).render())
        assert "A/A noise floor unknown, pair-to-pair spread 9.9%" in panel
        await pilot.press("q")


def test_the_report_of_a_diagnosed_run_says_unknown_not_nan():
    """report.md's noise line of a run diagnosed before its A/A resolved a floor (the torch
    CPU must-show: 'an interval of about ±nan%')."""
    from engine.optimizer.report import _result_lines

    res = {
        "baseline_ns_per_sample": 11_470_000.0, "final_ns_per_sample": 11_470_000.0,
        "gain": 0.0, "target": 0.15, "target_met": False, "verdict": "not measurable",
        "noise_floor": math.nan, "aa_delta": 0.8, "pairs_per_lever": 2, "kept": [],
        "noise": {"aa": {"gain": 0.836, "low": -0.674, "high": 0.984, "pairs": 4},
                  "measurable": False, "diagnosis": "a 15% gain cannot be measured here"},
    }  # fmt: skip
    for r in (res, {**res, "noise": {}}):
        text = "\n".join(_result_lines(r))
        assert "unknown" in text and "nan" not in text.lower(), text


def test_the_bar_says_the_qualification_gates_decision():
    from gitm_tui.widgets.optimize_bar import OptimizeBar

    bar = OptimizeBar()
    assert "gate" not in bar._figures(compact=False).plain  # before the gate has decided
    bar.gate = "diagnose, forced"
    assert "· gate diagnose, forced" in bar._figures(compact=True).plain


async def test_a_run_whose_program_failed_before_its_baseline_does_not_say_being_measured(
    tmp_path, monkeypatch
):
    """A command run that ends workload_failed in its profile phase: the measured panel said
    "baseline: being measured" after the end line (issue 50)."""
    from engine.runtime.events import RunStarted

    class _Failed(NoTraceEngine):
        async def run(self) -> None:
            self.bus.publish(
                RunStarted(
                    t_wall=0.0, run_id="20261207-000000-abcdef", workload="command",
                    workload_title="a command (scripted)", device="this machine",
                    simulated=False, budget_s=40.0, seed=0, streams=(), regimes=(),
                )
            )  # fmt: skip
            self.bus.publish(
                RunFinished(
                    t_wall=1.0, status="workload_failed", segments=0, iterations=0,
                    sim_time_ns=0, wall_s=1.0, regime_shares={}, kappa_partition={},
                    fixed_lag_exact=math.nan, validation={}, dropped_events=0, kernels="",
                )
            )  # fmt: skip

    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    app = make_app(Settings(), _Failed())
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.dashboard.finished is not None)
        await pilot.pause()
        panel = str(app.query_one("#measured", Static).render())
        assert "being measured" not in panel
        assert "baseline: not measured — the run ended workload_failed before its A/A" in panel
        await pilot.press("q")
