"""Pilot tests of the dashboard with a scripted engine (its snapshots: test_snapshots.py)."""

from __future__ import annotations

from textual.widgets import Static

from engine.runtime import Engine, RunConfig
from gitm_tui.app import Settings, make_app
from gitm_tui.render import spark, strip_cells
from gitm_tui.screens import HelpScreen
from gitm_tui.widgets.kappa_panel import KappaPanel
from gitm_tui.widgets.kernel_table import KernelTable
from gitm_tui.widgets.regime_strip import RegimeStrip
from gitm_tui.widgets.run_header import RunHeader
from tests.ui.scripted_engine import PATTERN, ScriptedEngine, run_shown
from tests.ui.waiting import until

SIZE = (120, 36)


async def test_scripted_segments_reach_the_regime_strips():
    eng = ScriptedEngine()
    app = make_app(Settings(), eng)
    async with app.run_test(size=SIZE) as pilot:
        await run_shown(pilot)
        strips = {s.stream: s for s in app.query(RegimeStrip)}
        assert set(strips) == {7, 13}
        assert strips[7].segments == 72 and strips[13].segments == 72
        expected = [PATTERN[7][(11 * 3 + i) % len(PATTERN[7])] for i in range(6)]
        assert strips[7].latest()[-6:] == [int(x) for x in expected]
        header = app.query_one(RunHeader)
        assert header.simulated and "SIMULATED" in header.render().plain
        assert header.kernels.startswith("numba")
        assert app.query_one(KappaPanel).has_class("-degenerate")  # stream 13 has κ 75 > 60
        table = app.query_one(KernelTable)
        assert table.row_count == 6


async def test_pause_key_sends_the_command_and_quit_stops_the_engine():
    eng = ScriptedEngine()
    app = make_app(Settings(), eng)
    async with app.run_test(size=SIZE) as pilot:
        await run_shown(pilot)
        await pilot.press("p")
        await until(pilot, lambda: app.dashboard.phase == "paused")
        assert eng.commands == ["pause"]
        await pilot.press("p")
        await until(pilot, lambda: app.dashboard.phase == "profile")
        assert eng.commands == ["pause", "resume"]
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        shown = str(app.screen.query_one("#help", Static).render())
        for (
            b
        ) in app.dashboard.BINDINGS:  # the key list is the app's own bindings, every one of them
            assert f"{b.key_display or b.key} {b.description.lower()}" in shown
        assert "COPY" in shown and "COMM" in shown
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.dashboard)
        await pilot.press("q")  # the key's action stops the engine, then exits the app
    assert eng.commands[-1] == "stop"


async def test_live_engine_decodes_into_strips():
    eng = Engine(RunConfig(workload="hft-lob", budget_s=30, tick_s=0.05))
    app = make_app(Settings(), eng)
    async with app.run_test(size=SIZE) as pilot:

        def decoded() -> bool:
            strips = list(app.query(RegimeStrip))
            return len(strips) == 2 and all(s.segments > 0 for s in strips)

        await until(pilot, decoded, what="segments on both streams' strips")
        assert {s.stream for s in app.query(RegimeStrip)} == {7, 13}
        await pilot.press("q")


def test_render_helpers():
    t = strip_cells([0, 1, 2, 3], [False, False, True, False], width=6)
    assert t.plain == "··██▒█"
    assert spark([0, 50, 100], 0, 100, 3) == "▁▅█"
    assert spark([97], 0, 100, 4) == "   █"


async def test_kernel_table_starts_over_when_the_configuration_changes():
    import numpy as np
    from textual.app import App

    class One(App[None]):
        def compose(self):
            yield KernelTable()

    def rows(n):
        start = np.arange(n, dtype=np.int64) * 100
        return ("k",) * n, start, start + 50, np.zeros(n, np.uint8), np.zeros(n, np.bool_)

    app = One()
    async with app.run_test():  # flush() rewrites the rows at once: nothing to wait for
        t = app.query_one(KernelTable)
        t.add(7, *rows(5), config="baseline")
        t.add(7, *rows(3), config="baseline")
        t.flush()
        assert t._agg[(7, "k")].calls == 8 and t.border_title == "kernels — baseline"
        t.add(7, *rows(2), config="baseline + cuda_graphs")
        t.flush()
        assert t._agg[(7, "k")].calls == 2 and t.row_count == 1
        assert t.border_title == "kernels — baseline + cuda_graphs"


async def test_kernel_table_ranks_rows_and_brings_rows_scrolled_into_view_up_to_date():
    """Row i is rank i (heaviest first). The timer's flush rewrites the rows on screen only;
    a row scrolled into view shows the current figures, never old ones."""
    import numpy as np
    from textual.app import App

    class One(App[None]):
        def compose(self):
            yield KernelTable()

    def batch(names, dur):
        n = len(names)
        start = np.arange(n, dtype=np.int64) * 10_000
        return (
            tuple(names),
            start,
            start + np.asarray(dur),
            np.zeros(n, np.uint8),
            np.zeros(n, np.bool_),
        )

    app = One()
    async with app.run_test(size=(100, 12)) as pilot:
        t = app.query_one(KernelTable)
        names = [f"k{i:03d}" for i in range(60)]
        t.add(0, *batch(names, [1000 * (i + 1) for i in range(60)]))  # k059 heaviest
        t.flush()  # rewrites the rows at once: nothing to wait for
        shown = [str(t.get_row_at(r)[0]) for r in range(t.row_count)]
        assert shown == [f"k{i:03d}" for i in reversed(range(60))]
        # the lightest kernel becomes the heaviest: on screen at once, elsewhere when seen
        t.add(0, *batch(["k000"], [10**9]))
        t.flush(visible_only=True)
        assert str(t.get_row_at(0)[0]) == "k000"
        assert str(t.get_row_at(59)[0]) == "k000"  # off screen: not rewritten yet
        t.scroll_end(animate=False)
        # scrolled into view: up to date
        await until(pilot, lambda: str(t.get_row_at(59)[0]) == "k001")
        t.flush()  # an explicit flush rewrites every row
        assert [str(t.get_row_at(r)[0]) for r in range(60)] == ["k000"] + [
            f"k{i:03d}" for i in reversed(range(1, 60))
        ]


async def test_a_failed_run_is_shown_and_quits_with_exit_code_1(monkeypatch):
    """An engine failure (planted: recovering earlier runs raises) is not silent in the
    dashboard: an error notice, the Log tab in view with the reason, and q exits with 1."""
    from textual.widgets import RichLog, TabbedContent

    def broken(_runs):
        raise RuntimeError("planted failure")

    monkeypatch.setattr("engine.runtime.phases.recover", broken)
    eng = Engine(RunConfig(workload="hft-lob", budget_s=10, tick_s=0.05))
    app = make_app(Settings(), eng)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.dashboard.finished is not None, what="the run's end")
        assert app.dashboard.finished.status == "failed"
        assert app.query_one("#loop", TabbedContent).active == "tab-log"

        def log() -> str:  # a hidden log shows its lines once its tab gives it a size
            return "\n".join(str(line.text) for line in app.query_one(RichLog).lines)

        await until(pilot, lambda: "planted failure" in log())
        await pilot.press("q")
    assert app.return_value == 1  # run_dashboard turns it into the exit code


async def test_the_palette_offers_the_keys_the_screen_offers_and_runs_them():
    """ctrl+p lists the dashboard's keys as commands (only those on offer now) and running one
    does what the key does."""
    from textual.command import CommandList, CommandPalette

    from gitm_tui.app import KeysProvider

    eng = ScriptedEngine()
    app = make_app(Settings(), eng)
    async with app.run_test(size=SIZE) as pilot:
        await run_shown(pilot)
        names = [hit.text async for hit in KeysProvider(app.screen).discover()]
        assert app.dashboard.phase == "apply"  # where the scripted run ends
        assert {"Pause (p)", "Help (?)", "Finish (f)"} <= set(names)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"pause (")
        hits = app.screen.query_one(CommandList)
        await until(
            pilot,
            lambda: (
                hits.option_count == 1 and "Pause (p)" in str(hits.get_option_at_index(0).prompt)
            ),
            what="the palette's one hit for 'pause ('",
        )
        await pilot.press("enter")
        await until(pilot, lambda: app.dashboard.phase == "paused")
        assert eng.commands == ["pause"]
        names = [hit.text async for hit in KeysProvider(app.screen).discover()]
        assert "Pause (p)" in names
        assert "Finish (f)" not in names  # as its key: only in the apply phase


def test_colours_come_from_the_theme():
    """Rich text takes its colours from the active theme's variables (a theme may override
    them); no Python module of the UI spells a colour of its own."""
    import re

    from gitm_tui import theme
    from gitm_tui.render import legend
    from tests.paths import ROOT

    try:
        theme.use({"gitm-compute": "#123456"})
        assert "#123456" in str(legend().spans[0].style)
    finally:
        theme.use({})
    assert "#123456" not in str(legend().spans[0].style)
    spelled = [
        f"{p.relative_to(ROOT)}: {m}"
        for p in (ROOT / "gitm_tui").rglob("*.py")
        if p.name != "theme.py"
        for m in re.findall(r"#[0-9a-fA-F]{6}\b", p.read_text())
    ]
    assert spelled == []


def test_kernel_table_sums_a_batch_per_kernel_as_row_by_row_would():
    """add() sums with bincounts; every figure equals a row-by-row sum."""
    import numpy as np

    rng = np.random.default_rng(3)
    n = 500
    names = tuple(f"k{i}" for i in rng.integers(0, 7, n))
    start = np.sort(rng.integers(0, 10**6, n)).astype(np.int64)
    end = start + rng.integers(1, 5000, n)
    labels = rng.integers(0, 6, n).astype(np.uint8)
    deg = rng.random(n) < 0.2
    t = KernelTable()
    t.add(3, names, start, end, labels, deg)
    t.add(3, names[:10], start[:10], end[:10], labels[:10], deg[:10])
    for name in set(names):
        rows = [i for i in range(n) if names[i] == name] + [
            i for i in range(10) if names[i] == name
        ]
        a = t._agg[(3, name)]
        assert a.calls == len(rows)
        assert a.total_ns == sum(int(end[i] - start[i]) for i in rows)
        assert a.degenerate == sum(bool(deg[i]) for i in rows)
        assert a.regimes.tolist() == np.bincount(labels[rows], minlength=len(a.regimes)).tolist()
