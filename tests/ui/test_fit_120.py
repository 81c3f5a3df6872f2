"""Every table fits 120 columns without losing a figure (issue 38): at 120×40 the dashboard's
kernel, intervention, violation and cause tables, the analysis screen's kernel table and the
ranks table keep every header and every figure whole inside their pane; only a text column (a
kernel name, a note, evidence) is cut, and then with "…".

A DataTable column keeps its width whatever its pane's (the kernel table's fixed widths summed
~109 cells in a ~76-cell pane and cut ``low-conf`` to ``lo``): this checks each table's
columns against the width it is given, after the screen laid out at that size."""

from __future__ import annotations

import io
import re

import pytest
from textual.widgets import DataTable, TabbedContent

from gitm_tui.app import Settings, make_analysis_app, make_app, make_ranks_app
from gitm_tui.widgets.kernel_table import _fits
from gitm_tui.widgets.optimize_bar import OptimizeBar
from tests.paths import ROOT
from tests.ui.scripted_engine import EndedEngine, NoTraceEngine, ScriptedEngine, run_shown
from tests.ui.waiting import until

#: the columns of each table that hold text, not figures: cut with "…" where they must be
TEXT = {"kernels": {"kernel"}, "interventions": {"lever", "note"}, "violations": {"op", "msg"}}
TEXT |= {"causes": {"cause", "ev"}, "analysis-kernels": {"name"}, "ranks-table": {""}}


def cut_cells(table: DataTable) -> list[str]:
    """What of ``table`` does not fit its width: headers narrower than their label, figures
    wider than their column, a table wider than its pane."""
    bad = []
    room = table.scrollable_content_region.width
    total = sum(c.get_render_width(table) for c in table.columns.values())
    if total > room:
        bad.append(f"{table.id}: columns need {total} cells, the pane gives {room}")
    text = TEXT.get(table.id or "", set())
    for key, col in table.columns.items():
        width = col.content_width if col.auto_width else col.width
        if col.label.cell_len > width:
            bad.append(f"{table.id}: header {col.label.plain!r} cut to {width}")
        if key.value in text:
            continue
        for row in table.rows:
            cell = table.get_cell(row, key)
            shown = cell.cell_len if hasattr(cell, "cell_len") else len(str(cell))
            if shown > width:
                bad.append(f"{table.id}: {col.label.plain} {str(cell)!r} cut to {width}")
    return bad


@pytest.mark.parametrize("size", [(120, 40), (160, 45)])
async def test_the_dashboard_tables_fit(size, tmp_path, monkeypatch):
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    app = make_app(Settings(), ScriptedEngine())
    async with app.run_test(size=size) as pilot:
        await run_shown(pilot)
        kernels = app.query_one("#kernels", DataTable)
        assert kernels.row_count and kernels.columns
        problems = cut_cells(kernels)
        tabs = app.query_one("#loop", TabbedContent)
        for tab, table_id in (
            ("tab-interventions", "interventions"),
            ("tab-violations", "violations"),
            ("tab-causes", "causes"),
        ):
            tabs.active = tab
            table = app.query_one(f"#{table_id}", DataTable)
            await until(pilot, lambda t=table: t.size.width > 0, what=f"the {tab} tab")
            await pilot.pause()
            assert table.row_count, table_id
            problems += cut_cells(table)
        assert not problems, problems
        await pilot.press("q")


@pytest.mark.parametrize("engine", [EndedEngine, NoTraceEngine, ScriptedEngine])
async def test_the_optimize_bar_keeps_its_figures_at_120(engine, tmp_path, monkeypatch):
    """The bar under the header: phases shrink to the current one before a figure is cut."""
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    app = make_app(Settings(), engine())
    async with app.run_test(size=(120, 40)) as pilot:
        await run_shown(pilot)
        bar = app.query_one(OptimizeBar)
        await until(pilot, lambda: bar.baseline_ns > 0, what="the bar's figures")
        line = bar.render()
        assert line.cell_len <= bar.size.width, line.plain
        assert ("noise ±" in line.plain and "gain" in line.plain) or "nothing kept" in line.plain
        await pilot.press("q")


@pytest.fixture(scope="module")
def a100():
    """The 3-stream A100 training trace, analysed once for the screen and the text."""
    from engine.analyze.compute import analyze_trace
    from engine.trace.kineto.kineto import read_kineto

    return analyze_trace(
        read_kineto(ROOT / "tests/data/traces/kineto/a100_training_3streams.json.gz")
    )


def test_the_analyze_text_fits_120_with_every_figure(a100):
    from rich.console import Console

    from gitm_tui.analyze_view import summary

    console = Console(width=120, record=True, file=io.StringIO())
    console.print(summary(a100.analysis))
    lines = console.export_text().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 120
    text = "\n".join(lines)
    for header in ("calls", "share", "evidence", "of roofline", "predicted (interval)", "ceiling"):
        assert header in text
    top = a100.analysis.top_kernels[:10]  # the summary's top ten
    assert top
    for k in top:  # each kernel's call count, GPU time and share whole on its row
        row = rf"{k.calls:,}\s+{k.total_ns / 1e6:.2f}\s+{k.share_of_gpu_time:.1%}"
        assert re.search(row, text), (k.name, row)


async def test_the_analysis_table_fits_120(a100):
    app = make_analysis_app(a100)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: bool(app.query("#analysis-kernels")), what="the table")
        table = app.query_one("#analysis-kernels", DataTable)
        await until(pilot, lambda: table.row_count > 0 and table.size.width > 0)
        await pilot.pause()
        assert not cut_cells(table), cut_cells(table)


async def test_the_ranks_table_fits_120(tmp_path):
    from engine.analyze.api import AnalyzeOptions, analyze
    from engine.analyze.ranks.synth_ranks import write_ranks

    write_ranks(tmp_path, ranks=4, steps=2, straggler=1)  # SYNTHETIC ranks

    def load(progress, dashboard, stage=None):
        return analyze([str(tmp_path)], AnalyzeOptions(workers=1))

    app = make_ranks_app(load, "ranks/ (SYNTHETIC)")
    async with app.run_test(size=(120, 40)) as pilot:

        def filled() -> bool:
            tables = app.query("#ranks-table")
            return bool(tables) and tables.first(DataTable).row_count == 4

        await until(pilot, filled, what="the ranks table's rows")
        table = app.query_one("#ranks-table", DataTable)
        await pilot.pause()
        assert not cut_cells(table), cut_cells(table)


def test_a_figure_too_wide_for_its_column_is_written_shorter_never_cut():
    assert _fits(8704, 7, 0) == "8,704"
    assert _fits(12_345_678, 7, 0) == "12.3M"
    assert _fits(12_345.678, 8, 2) == "12,345.7"
    assert _fits(98_765_432.1, 8, 2) == "98.8M"
    for x in (0.0, 7.0, 1e3, 1e6 - 1, 1e9, 3.3e14):
        assert len(_fits(x, 7, 1)) <= 7
