"""SVG snapshots of every screen screenshots/make_screenshots.py draws: the dashboard, the
approve confirmation, an intervention's details, the Violations and Causes tabs, the help
screen, the analysis, audit and ranks screens; and the dashboard's states a person reads
(issue 38): a run that ended with its target not met and proposals undecided, a run with no
kernel trace, and keep deciding.

Each is deterministic: the dashboard runs the scripted engine (tests/ui/scripted_engine.py: a
fixed event sequence, no wall clock, no simulator thread), the other screens are built from
fixed inputs (a committed trace, a seeded audit, seeded synthetic ranks), the terminal size is
fixed, and ``run_before`` waits for the state to be shown (tests/ui/waiting.py), never for a
time. A change to how a screen looks fails here; if it is meant, accept it with
``pytest tests/ui/test_snapshots.py --snapshot-update`` and regenerate screenshots/.
"""

from __future__ import annotations

from textual.widgets import DataTable, TabbedContent

from gitm_tui.app import Settings, make_analysis_app, make_app, make_audit_app, make_ranks_app
from gitm_tui.modes.analysis import RegimeTimeline
from gitm_tui.screens import ConfirmScreen, HelpScreen, InterventionScreen
from gitm_tui.widgets.interventions import InterventionTable
from tests.paths import ROOT
from tests.ui.scripted_engine import (
    EndedEngine,
    KeepDecidingEngine,
    NoTraceEngine,
    ScriptedEngine,
    run_shown,
)
from tests.ui.waiting import until

#: the dashboard's first snapshot size (kept: its snapshot predates the others)
SIZE = (120, 36)
#: the size screenshots/make_screenshots.py draws at
SHOT = (140, 44)


async def _select(pilot, iid: str) -> None:
    table = pilot.app.query_one(InterventionTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(iid))
    await until(pilot, lambda: table.selected() is not None and table.selected().id == iid)


def test_snapshot_dashboard(snap_compare):
    app = make_app(Settings(), ScriptedEngine())
    assert snap_compare(app, terminal_size=SIZE, run_before=run_shown)


def test_snapshot_confirm_approve(snap_compare):
    """`a` on a proposed SAFE intervention: the confirmation (screenshots/confirm.svg)."""

    async def run_before(pilot):
        await run_shown(pilot)
        await _select(pilot, "I2")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen))

    app = make_app(Settings(), ScriptedEngine())
    assert snap_compare(app, terminal_size=SHOT, run_before=run_before)


def test_snapshot_intervention_details(snap_compare):
    """`d` on a kept intervention: claim, evidence, replay, measured (intervention.svg)."""

    async def run_before(pilot):
        await run_shown(pilot)
        await _select(pilot, "I1")
        await pilot.press("d")
        await until(pilot, lambda: isinstance(pilot.app.screen, InterventionScreen))

    app = make_app(Settings(), ScriptedEngine())
    assert snap_compare(app, terminal_size=SHOT, run_before=run_before)


def _tab(name: str):
    async def run_before(pilot):
        await run_shown(pilot)
        tabs = pilot.app.query_one("#loop", TabbedContent)
        tabs.active = f"tab-{name}"
        await until(pilot, lambda: tabs.get_pane(f"tab-{name}").display)

    return run_before


def test_snapshot_violations_tab(snap_compare):
    app = make_app(Settings(), ScriptedEngine())
    assert snap_compare(app, terminal_size=SHOT, run_before=_tab("violations"))


def test_snapshot_causes_tab(snap_compare):
    app = make_app(Settings(), ScriptedEngine())
    assert snap_compare(app, terminal_size=SHOT, run_before=_tab("causes"))


def test_snapshot_help(snap_compare):
    async def run_before(pilot):
        await run_shown(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen))

    app = make_app(Settings(), ScriptedEngine())
    assert snap_compare(app, terminal_size=SHOT, run_before=run_before)


def test_snapshot_analysis(snap_compare, monkeypatch):
    """The 3-stream A100 training trace, zoomed in once (screenshots/analysis.svg). Read by
    its path from the repository root, as `gitm-tui analyze tests/data/… --ui` would be: the
    header shows that path, the same on every checkout."""
    from engine.analyze.compute import analyze_trace
    from engine.trace.kineto.kineto import read_kineto

    monkeypatch.chdir(ROOT)
    res = analyze_trace(
        read_kineto("tests/data/traces/kineto/a100_training_3streams.json.gz"), top=200
    )

    async def run_before(pilot):
        timeline = pilot.app.query_one(RegimeTimeline)
        await until(pilot, lambda: timeline.has_focus)
        whole = timeline.window
        await pilot.press("plus")
        await until(pilot, lambda: timeline.window != whole, what="the zoom")

    assert snap_compare(make_analysis_app(res), terminal_size=SHOT, run_before=run_before)


def test_snapshot_audit(snap_compare):
    """A fresh calibrated-corpus ledger, 2 seeds (screenshots/audit.svg)."""
    from engine.study.audit import run_audit

    app = make_audit_app(run_audit(["calibrated"], seeds=2), "audit_ledger.json")

    async def run_before(pilot):
        pcs = pilot.app.query_one("#pcs", DataTable)
        await until(pilot, lambda: pcs.row_count > 0)

    assert snap_compare(app, terminal_size=SHOT, run_before=run_before)


def test_snapshot_ranks(snap_compare, tmp_path):
    """8 synthetic ranks with a planted straggler and slow link, and the tests' CPU-only trace
    among them (screenshots/ranks.svg, which tests/ui/test_screenshots.py holds to this)."""
    import shutil

    from engine.analyze.api import AnalyzeOptions, analyze
    from engine.analyze.ranks.synth_ranks import write_ranks

    write_ranks(tmp_path, ranks=8, steps=3, straggler=5, slow_link=(2, 3))
    cpu = ROOT / "tests" / "data" / "traces" / "cpu" / "cpu_only_train_small.json.gz"
    shutil.copy(cpu, tmp_path / "cpu_only.json.gz")

    def load(progress, dashboard, stage=None):
        return analyze([str(tmp_path)], AnalyzeOptions(workers=1))

    app = make_ranks_app(load, "ranks/ (SYNTHETIC, one CPU-only)")

    async def run_before(pilot):
        def filled() -> bool:
            tables = pilot.app.query("#ranks-table")
            return bool(tables) and tables.first(DataTable).row_count == 8

        await until(pilot, filled, what="the ranks table's 8 rows")

    assert snap_compare(app, terminal_size=SHOT, run_before=run_before)


def test_snapshot_ended_not_met_undecided(snap_compare):
    """The end on the main view: not met, nothing kept (a trial measured +2.5% rolled back:
    the bar's kept gain vs its best trial), two proposals undecided and how to keep deciding."""
    app = make_app(Settings(), EndedEngine())

    async def run_before(pilot):
        await run_shown(pilot)
        await until(pilot, lambda: pilot.app.dashboard.finished is not None, what="the end")

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_snapshot_no_trace_run(snap_compare):
    """A torch/command run on the CPU: the #measured panel in place of the decoding panels."""
    app = make_app(Settings(), NoTraceEngine())

    async def run_before(pilot):
        await run_shown(pilot)
        await until(
            pilot, lambda: "interop_threads" in str(pilot.app.query_one("#measured").render())
        )

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_snapshot_keep_deciding(snap_compare):
    """k pressed: the header says the time waiting for a person is not charged."""
    engine = KeepDecidingEngine()
    app = make_app(Settings(), engine)

    async def run_before(pilot):
        await run_shown(pilot)
        await pilot.press("k")
        header = pilot.app.query_one("#header")
        await until(pilot, lambda: "not charged" in str(header.render()), what="the header")

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)
