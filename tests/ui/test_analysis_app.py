"""The analysis screen: timeline rows per stream, zoom/scroll, kernel details, sorting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console

from engine.analyze.compute import analyze_trace
from engine.trace.kineto.kineto import read_kineto
from gitm_tui.app import make_analysis_app
from gitm_tui.modes.analysis import RegimeTimeline, kernel_details
from gitm_tui.timeline import bin_regimes, covered_until
from tests.paths import TRACES
from tests.ui.waiting import until

TRACE = TRACES / "kineto" / "a100_training_3streams.json.gz"


def test_covered_until_and_binning():
    start = np.array([0, 10, 20])
    end = np.array([5, 15, 30])
    assert covered_until(start, end, np.array([0, 3, 5, 12, 40])).tolist() == [0, 3, 5, 7, 20]
    labels = np.array([0, 1, 1])
    dom, busy = bin_regimes(start, end, labels, 0, 40, 4)
    assert dom.tolist()[:3] == [0, 1, 1] and busy.tolist() == [0.5, 0.5, 1.0, 0.0]


async def test_analysis_screen_zoom_and_details():
    res = analyze_trace(read_kineto(TRACE))
    app = make_analysis_app(res)
    async with app.run_test(size=(140, 40)) as pilot:
        tl = app.query_one(RegimeTimeline)
        await until(pilot, lambda: tl.has_focus, what="the filled screen (its timeline focused)")
        lines = tl.render().plain.splitlines()
        assert len(lines) == 1 + len(res.analysis.streams)
        whole = tl.window
        await pilot.press("plus")
        await until(pilot, lambda: tl.window != whole, what="the zoom")
        zoomed = tl.window
        assert zoomed[1] - zoomed[0] < whole[1] - whole[0]
        await pilot.press("right")
        await until(pilot, lambda: tl.window != zoomed, what="the scroll")
        assert tl.window[0] > zoomed[0]
        await pilot.press("0")
        await until(pilot, lambda: tl.window == whole, what="the whole trace again")
        assert app.analysis.selected == res.analysis.top_kernels[0]
        await pilot.press("tab")
        await pilot.press("down")
        await until(pilot, lambda: app.analysis.selected == res.analysis.top_kernels[1])
        console = Console(width=100, record=True)
        console.print(kernel_details(app.analysis.selected))
        text = console.export_text()
        assert app.analysis.selected.name[:20] in text and "calls" in text
        await pilot.press("s")  # a key is handled before press returns: a sort that failed
        await pilot.press("q")  # would have ended the app with its error


async def test_analysis_screen_opens_at_once_and_loads_in_a_worker():
    """The screen is up (with its stage line) while the loader runs in a worker thread; the
    analysis replaces it when it comes."""
    import threading

    from textual.widgets import DataTable, Static

    gate = threading.Event()

    def load(progress):
        progress("reading a100_training_3streams.json.gz…")
        assert threading.current_thread() is not threading.main_thread()
        gate.wait(10)
        return analyze_trace(read_kineto(TRACE))

    app = make_analysis_app(load=load, source=str(TRACE))
    async with app.run_test(size=(140, 40)) as pilot:
        await until(
            pilot,
            lambda: "reading" in str(app.query_one("#analysis-stage", Static).render()),
            what="the loader's stage line",
        )
        assert app.analysis.res is None  # the loader is held at its gate
        await pilot.press("s")  # nothing to sort yet: must not fail
        gate.set()

        def filled() -> bool:  # the result arrives, the screen is rebuilt, then filled
            tables = app.query("#analysis-kernels")
            return bool(tables) and tables.first(DataTable).row_count > 0

        await until(pilot, filled, what="the kernel table's rows")
        assert app.analysis.selected == app.analysis.res.analysis.top_kernels[0]


async def test_analysis_screen_loader_error_ends_the_app_with_its_line():
    from engine.trace.errors import TraceImportError

    def load(progress):
        raise TraceImportError(Path("x.json.gz"), "truncated gzip file (the stream ends early)")

    app = make_analysis_app(load=load, source="x.json.gz")
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.analysis.error, what="the loader's error")
    assert app.analysis.error is not None and "truncated gzip" in app.analysis.error
    assert app.return_code == 1


async def test_w_shows_what_would_help_as_analyze_prints_it():
    """`analyze --ui` showed no advice (issue 50): w opens every lever replayed on the trace,
    with its prediction and basis, the table `gitm-tui analyze` prints."""
    from textual.widgets import Static

    from gitm_tui.widgets.advice_screen import AdviceScreen

    res = analyze_trace(read_kineto(TRACE))
    assert res.analysis.interventions  # (this trace has levers with targets)
    app = make_analysis_app(res)
    async with app.run_test(size=(140, 40)) as pilot:
        tl = app.query_one(RegimeTimeline)
        await until(pilot, lambda: tl.has_focus, what="the filled screen")
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, AdviceScreen), what="the advice")
        console = Console(width=140, record=True)
        assert app.screen.query_one("#advice-body", Static) is not None
        console.print(app.screen.body)
        text = console.export_text()
        assert "what would help (replayed on this trace; nothing applied)" in text
        for e in res.analysis.interventions:
            assert e.lever in text  # every lever, not only the first six judged
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, AdviceScreen), what="closed")
        await pilot.press("q")
