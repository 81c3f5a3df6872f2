"""What bounds the step, on the screens (issue 46 item 6): the analysis screen's critical-path
panel (headline, parts, opportunities; ``c``: the whole account), each rank's on the ranks
screen with its waits and the straggler verdict, and the diff screen's comparison of two paths
— every figure whole at 120 columns, every string from a trace shown as text, never markup."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from engine.analyze.api import AnalyzeOptions, analyze
from engine.analyze.compute import AnalysisResult, analyze_trace
from engine.analyze.ranks.synth_ranks import write_ranks
from engine.trace.kineto.kineto import read_kineto
from gitm_tui.app import GitmApp, make_analysis_app, make_ranks_app
from gitm_tui.modes.diff import DiffScreen
from gitm_tui.widgets.critical_path import (
    NO_PATH,
    CriticalPathPanel,
    bound_by_cell,
    critical_account,
    critical_diff_view,
    critical_summary,
    panel_title,
)
from gitm_tui.widgets.critical_path_screen import CriticalPathScreen
from tests.paths import TRACES
from tests.ui.waiting import until

#: the A100 rank 0 of 16 (tests/data/traces/kineto): collectives 42 % of GPU time, 1 %
#: overlapped — its path is bound by exposed communication (issue 46)
A100 = TRACES / "kineto" / "a100_80gb_5streams_graphs.json.gz"


@pytest.fixture(scope="module")
def a100() -> AnalysisResult:
    return analyze_trace(read_kineto(A100))


def _text(renderable: object, width: int = 116) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def _shown(widget: Static) -> str:
    return _text(widget.content, max(40, widget.content_region.width or 116))


def test_the_compact_panel_keeps_its_figures_whole_at_120(a100):
    """The panel inside a 120-column screen (116 cells inside its border and padding): the
    headline, the six largest parts with their ms and share, each opportunity on one line."""
    cp = a100.analysis.critical_path
    assert cp is not None and cp.headline.startswith("bound by exposed communication")
    text = _text(critical_summary(cp), 116)
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 116
    assert " ".join(text.split()).startswith(cp.headline)  # (wrapped, whole)
    for p in cp.parts[:6]:
        assert f"{p.ns / 1e6:,.2f} ms" in text and f"{p.share:.1%}" in text, p.label
    opp = cp.opportunities[0]
    line = next(ln for ln in lines if ln.startswith("▲ "))
    assert line.startswith(f"▲ {opp.what.replace('_', ' ')} {opp.share:.0%} of the path")
    assert "try: " in line
    assert "critical path 1,231.41 ms (the whole trace)" in panel_title(cp)


def test_trace_text_on_the_path_is_shown_never_read_as_markup(a100):
    cp = a100.analysis.critical_path
    assert cp is not None and cp.top_rows
    evil = "[bold red]kernel[/]\x1b[2J\u202eevil"
    rows = [cp.top_rows[0].model_copy(update={"name": evil}), *cp.top_rows[1:]]
    hostile = cp.model_copy(update={"top_rows": rows, "window": "[link=x]w[/link]"})
    text = _text(critical_account(hostile), 200)
    assert "[bold red]kernel[/]" in text and "\x1b" not in text and "\u202e" not in text
    assert "[link=x]w[/link]" in panel_title(hostile)


def test_no_path_says_unknown():
    assert NO_PATH in _text(critical_summary(None), 200)
    assert bound_by_cell(None).plain == "unknown"
    assert "unknown" in panel_title(None)


async def test_the_analysis_screen_shows_what_bounds_the_step_first(a100):
    app = make_analysis_app(a100)
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one("#analysis-critical", CriticalPathPanel)
        await until(pilot, lambda: "bound by" in _shown(panel), what="the critical path panel")
        cp = app.analysis.shown.critical_path
        shown = " ".join(_shown(panel).split())
        assert cp.headline.startswith("bound by exposed communication: ")
        assert cp.headline in shown
        assert cp.parts[0].label[:30] in shown and f"{cp.parts[0].share:.1%}" in shown
        assert "▲ exposed communication" in shown
        assert panel.border_title.startswith("what bounds the step: critical path 1,231.41 ms")
        assert panel.has_class("-opportunity")
        # placed first: above the timeline and the kernel table
        assert panel.region.y < app.query_one("#analysis-top").region.y
        assert panel.region.y < app.query_one("#analysis-kernels").region.y
        assert panel.region.bottom <= 14  # (the header's line, then at most 12)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CriticalPathScreen), what="the account")
        body = app.screen.query_one("#critical-account-body", Static)
        account = _text(body.content, 150)
        assert "named first: what the path is bound by" in account
        assert "HTA's bound_by" in account and cp.parts[-1].label in account
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.analysis, what="back on the analysis")
        await pilot.press("q")


async def test_a_trace_without_a_path_says_so_on_the_screen(a100):
    import dataclasses

    bare = a100.analysis.model_copy(update={"critical_path": None})
    app = make_analysis_app(dataclasses.replace(a100, analysis=bare))
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one("#analysis-critical", CriticalPathPanel)
        await until(pilot, lambda: "unknown" in _shown(panel), what="the unknown path")
        assert "nothing was replayed" in _shown(panel)
        assert not panel.has_class("-opportunity")
        await pilot.press("q")


def _rows(app) -> int:
    tables = app.query("#ranks-table")
    return tables.first(DataTable).row_count if tables else 0


async def test_the_ranks_screen_shows_each_ranks_path_and_the_straggler(tmp_path: Path):
    write_ranks(tmp_path, ranks=4, steps=2, straggler=2)  # SYNTHETIC ranks

    def load(progress, dashboard, stage=None):
        return analyze([str(tmp_path)], AnalyzeOptions(workers=1))

    app = make_ranks_app(load, "ranks/ (SYNTHETIC)")
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: _rows(app) == 4, what="the ranks table's 4 rows")
        screen = app.ranks
        assert screen.result is not None and screen.crossed is not None
        table = app.query_one("#ranks-table", DataTable)
        good = sorted(screen.result.analyses, key=lambda a: a.rank or 0)
        col = [c.label.plain for c in table.columns.values()].index("bound by")
        for i, a in enumerate(good):  # each rank's bound-by cell is its own path's
            assert str(table.get_row_at(i)[col]) == bound_by_cell(a.critical_path).plain
            assert str(table.get_row_at(i)[col]) != "unknown"
        panel = app.query_one("#ranks-critical", CriticalPathPanel)
        await until(pilot, lambda: "bound by" in _shown(panel), what="rank 0's path")
        assert str(panel.border_title).startswith("rank 0: what bounds the step: critical path")
        assert good[0].critical_path is not None
        assert good[0].critical_path.headline[:40] in " ".join(_shown(panel).split())
        stats = {p.rank: p for p in screen.crossed.per_rank}
        assert stats[0].waited_ns is not None
        assert f"waited {stats[0].waited_ns / 1e6:,.2f} ms" in _shown(panel)
        assert f"arrived last at {stats[0].last_arrivals}" in _shown(panel)
        assert "the straggler" not in _shown(panel)
        await pilot.press("down", "down")  # rank 2: the straggler
        await until(
            pilot, lambda: str(panel.border_title).startswith("rank 2: "), what="rank 2's path"
        )
        assert "the straggler: the others wait for this rank" in _shown(panel)
        cross = app.query_one("#ranks-cross")
        assert cross.border_title == "across ranks · straggler: rank 2"
        findings = " ".join(_text(app.query_one("#ranks-findings", Static).content, 200).split())
        verdict = f"straggler: {screen.crossed.straggler}"[:60]
        assert verdict.startswith("straggler: rank 2")
        assert findings.count(verdict) == 1  # the verdict once, with its basis
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CriticalPathScreen), what="the account")
        account = _text(app.screen.query_one("#critical-account-body", Static).content, 150)
        assert "the straggler" in account and "on the critical path" in account
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.ranks, what="back on the ranks")
        await pilot.press("q")


async def test_the_diff_screen_compares_the_two_paths(tmp_path: Path):
    from engine.analyze.diff.diff import diff_paths
    from tests.analyze.test_diff_critical import _synthetic

    before = _synthetic(tmp_path / "before.json.gz", gemm_us=50.0, comm_us=250.0)
    after = _synthetic(tmp_path / "after.json.gz", gemm_us=250.0, comm_us=50.0)
    d = diff_paths(str(before), str(after))
    comm = next(g for g in d.critical_path.groups if g.group == "exposed communication")
    assert comm.delta_share is not None
    text = _text(critical_diff_view(d.critical_path), 116)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 116
    row = next(ln for ln in text.splitlines() if ln.startswith("exposed communication"))
    assert f"{comm.before_share:.1%}" in row and f"{100 * comm.delta_share:+.1f} pt" in row
    app = GitmApp(DiffScreen(d, source="before → after"))
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one("#diff-critical", Static)
        await until(pilot, lambda: "bound by" in _shown(panel), what="the critical path panel")
        assert "bound by exposed communication → kernels; exposed communication 8" in (
            " ".join(_shown(panel).split())
        )
        await pilot.press("q")
