"""The ranks screen (`analyze DIR --ui`): per-rank progress while the ranks are analysed in a
thread, then one row per rank with the straggler and outliers marked, the cross-rank findings
(a planted slow link), a rank opened in the analysis screen and closed again."""

from __future__ import annotations

import threading

from textual.widgets import DataTable, ProgressBar, Static

from engine.analyze.api import AnalyzeOptions, Hooks, analyze
from engine.analyze.compute import analyze_trace
from engine.analyze.ranks.synth_ranks import write_ranks
from engine.analyze.run import read_trace
from gitm_tui.app import make_ranks_app
from gitm_tui.modes.ranks import RankAnalysisScreen
from tests.ui.waiting import until


def _rows(app) -> int:
    """The rows of the ranks table (0 while there is none): the table is mounted empty and
    filled a moment later, so a test waits for its rows, not for the table."""
    tables = app.query("#ranks-table")
    return tables.first(DataTable).row_count if tables else 0


async def test_ranks_screen_shows_progress_then_ranks_straggler_and_slow_link(tmp_path):
    paths = write_ranks(tmp_path / "ranks", ranks=4, steps=2, straggler=2, slow_link=(0, 1))
    gate = threading.Event()

    def load(progress, dashboard, stage=None):
        assert threading.current_thread() is not threading.main_thread()
        dashboard("http://127.0.0.1:8787/status")
        progress(1, 4, str(paths[0]))
        gate.wait(10)
        # workers=1: every rank here, fast for a test; the front door counts the ranks itself
        options = AnalyzeOptions(workers=1)
        return analyze([str(tmp_path / "ranks")], options, Hooks(progress=progress))

    opened = []

    def open_rank(path, progress):
        opened.append(path)
        progress("reading…")
        return analyze_trace(read_trace(paths[2]))

    app = make_ranks_app(load, source=str(tmp_path / "ranks"), open_rank=open_rank)
    async with app.run_test(size=(150, 40)) as pilot:
        await until(pilot, lambda: "1/4" in str(app.query_one("#ranks-stage").render()))
        stage = str(app.query_one("#ranks-stage", Static).render())
        assert "rank0000.json.gz" in stage and "127.0.0.1:8787" in stage  # the Dask dashboard
        assert app.query_one(ProgressBar).progress == 1
        gate.set()
        await until(pilot, lambda: _rows(app) == 4, what="the ranks table's 4 rows")
        table = app.query_one("#ranks-table", DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(4)]
        assert [r[0] for r in rows] == ["0", "1", "2", "3"]
        assert "straggler" in rows[2][-1] and not any("straggler" in r[-1] for r in rows[:2])
        findings = str(app.query_one("#ranks-findings", Static).render())
        assert "slow link 0→1" in findings and "straggler rank 2" in findings
        await pilot.press("down", "down", "enter")  # rank 2
        await until(pilot, lambda: isinstance(app.screen, RankAnalysisScreen))
        await until(pilot, lambda: app.screen.res is not None)
        assert opened == [str(paths[2])]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.ranks)
        await pilot.press("q")


async def test_a_loader_that_fails_ends_the_app_with_its_line():
    def load(progress, dashboard, stage=None):
        raise ConnectionError("cannot reach the Dask scheduler at tcp://127.0.0.1:1")

    app = make_ranks_app(load, source="ranks/")
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.ranks.error is not None)
    assert app.ranks.error == "cannot reach the Dask scheduler at tcp://127.0.0.1:1"
    assert app.return_code == 1


async def test_a_rank_that_cannot_be_opened_is_a_notice_not_the_end(tmp_path):
    write_ranks(tmp_path / "ranks", ranks=3, steps=2, straggler=None)

    def load(progress, dashboard, stage=None):
        return analyze([str(tmp_path / "ranks")], AnalyzeOptions(workers=1))

    tried: list[str] = []

    def open_rank(path, progress):
        tried.append(path)
        raise OSError(f"{path}: gone")

    app = make_ranks_app(load, source="ranks/", open_rank=open_rank)
    async with app.run_test(size=(150, 40)) as pilot:
        await until(pilot, lambda: _rows(app) == 3, what="the ranks table's 3 rows")
        table = app.query_one("#ranks-table", DataTable)
        assert not any("straggler" in str(table.get_row_at(i)[-1]) for i in range(3))
        await pilot.press("enter")
        # the rank's screen was pushed before its loader ran: back on the ranks, it was popped
        await until(pilot, lambda: tried and app.screen is app.ranks, what="the rank's screen gone")
        assert app.ranks.error is None
        # a check that nothing happens (the app does not end): only a time can show it
        await pilot.pause(0.2)
        assert app.is_running and app.screen is app.ranks
        await pilot.press("q")


async def test_analyze_dir_ui_runs_the_ranks_on_a_local_dask_cluster_under_the_app(tmp_path):
    """The CLI's own app (`analyze DIR --ui`): Dask's worker processes start from the loader
    thread while Textual holds sys.stderr; the outputs are written as without --ui."""
    from gitm_tui.commands.analyze import analyze_parser, ranks_app

    write_ranks(tmp_path / "ranks", ranks=4, steps=2, straggler=1)
    ns = analyze_parser().parse_args(
        [str(tmp_path / "ranks"), "--ui", "--workers", "2", "--out", str(tmp_path / "out")]
    )
    files = sorted(str(f) for f in (tmp_path / "ranks").iterdir())
    app, said, failures = ranks_app(ns, files)
    async with app.run_test(size=(150, 40)) as pilot:
        await until(pilot, lambda: app.ranks.outcomes or app.ranks.error, timeout=120)
        assert app.ranks.error is None
        assert [o.error for o in app.ranks.outcomes if o.error] == []
        await pilot.press("q")
    assert not failures and not said and (tmp_path / "out" / "cross_rank.md").exists()
    assert (tmp_path / "out" / "ranks.perfetto.json.gz").exists()


async def test_a_cpu_only_rank_has_its_own_line_not_a_failure(tmp_path):
    """A Kineto trace with no GPU row among the ranks is read for its CPU events: the header
    counts it apart ("CPU-only", never "failed") and the findings say what it holds and what
    to run on it."""
    import shutil

    from tests.paths import TRACES

    ranks = tmp_path / "ranks"
    write_ranks(ranks, ranks=2, steps=1)
    shutil.copy(TRACES / "cpu" / "cpu_only_train_small.json.gz", ranks / "cpu_rank.json.gz")

    def load(progress, dashboard, stage=None):
        return analyze([str(ranks)], AnalyzeOptions(workers=1), Hooks(progress=progress))

    app = make_ranks_app(load, source=str(ranks))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: _rows(app) == 2, what="the two GPU ranks' rows")
        header = str(app.query_one("#ranks-header", Static).render())
        assert "2 analysed  ·  1 CPU-only (no GPU rows)" in header and "failed" not in header
        findings = str(app.query_one("#ranks-findings", Static).render())
        assert "cpu_rank.json.gz: CPU-only (no GPU rows; " in findings
        assert "steps, median" in findings and "not among the ranks" in findings
        assert "gitm-tui analyze cpu_rank.json.gz prints its CPU summary" in findings
        await pilot.press("q")


async def test_the_first_rounds_stage_lines_are_shown_while_the_ranks_are_read(tmp_path):
    """A job's first round (each rank read for its collectives) says how far it is on the
    screen, cleaned, before any rank is analysed."""
    go = threading.Event()
    write_ranks(tmp_path / "ranks", ranks=2, steps=2, straggler=None)

    def load(progress, dashboard, stage):
        stage("collectives: 1 of 2 ranks read…\x1b[31m")
        go.wait(10)
        return analyze([str(tmp_path / "ranks")], AnalyzeOptions(workers=1))

    app = make_ranks_app(load, source="ranks/")
    async with app.run_test(size=(120, 30)) as pilot:
        stage = app.query_one("#ranks-stage", Static)

        def shown() -> str:
            return str(stage.render())

        await until(pilot, lambda: "collectives: 1 of 2 ranks read" in shown(), what="the stage")
        assert "\x1b" not in shown()
        go.set()
        await until(pilot, lambda: _rows(app) == 2, what="the ranks table's 2 rows")
        await pilot.press("q")
