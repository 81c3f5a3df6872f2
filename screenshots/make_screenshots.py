"""Regenerate screenshots/*.svg from the real app on the real (simulated-device) engine.

    python screenshots/make_screenshots.py

Uses the same ``make_app`` factory as the CLI. Each dashboard runs the optimize loop: on
hft-lob the top proposal is approved with the keys a person would press (manual policy), then
the details screen and the causes tab are captured; af2 and kitti run with ``auto``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from textual.widgets import TabbedContent  # noqa: E402

from engine.runtime import Engine, RunConfig  # noqa: E402
from gitm_tui.app import Settings, make_app  # noqa: E402
from gitm_tui.screens import HelpScreen  # noqa: E402
from gitm_tui.widgets.interventions import InterventionTable  # noqa: E402
from gitm_tui.widgets.kernel_table import KernelTable  # noqa: E402

SIZE = (140, 44)
SHOTS = (
    ("dashboard.svg", "hft-lob", "manual"),
    ("dashboard-af2.svg", "af2", "auto"),
    ("dashboard-kitti.svg", "kitti", "auto"),
)


async def _until(pilot, pred, rounds: int = 600) -> None:  # type: ignore[no-untyped-def]
    for _ in range(rounds):
        await pilot.pause(0.05)
        if pred():
            return
    raise TimeoutError("screenshot: the state never came")


async def shoot(name: str, workload: str, approve: str) -> None:
    from gitm_tui.screens import ConfirmScreen

    eng = Engine(RunConfig(workload=workload, budget_s=60, seed=1, approve=approve))
    app = make_app(Settings(), eng)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(InterventionTable)
        await _until(pilot, lambda: table.row_count > 0)
        if approve == "manual":
            top = next(v for v in table.latest.values() if v.safety == "SAFE")
            table.focus()
            table.move_cursor(row=table.get_row_index(top.id))
            await pilot.press("a")
            await _until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            app.save_screenshot(str(HERE / "confirm.svg"))
            await pilot.press("y")
            await _until(pilot, lambda: table.latest[top.id].state in ("VERIFIED", "ROLLED_BACK"))
            # the kept lever's measurement reaches the kernel table a moment after the verdict
            kernels = app.query_one(KernelTable)
            await _until(pilot, lambda: top.lever in kernels.config)
            await pilot.pause(1.0)
        else:
            await _until(pilot, lambda: app.dashboard.phase in ("done",))
        app.query_one(KernelTable).flush()
        await pilot.pause(0.3)
        app.save_screenshot(str(HERE / name))
        if name == "dashboard.svg":
            await pilot.press("d")
            await pilot.pause(0.3)
            app.save_screenshot(str(HERE / "intervention.svg"))
            await pilot.press("escape")
            app.query_one("#loop", TabbedContent).active = "tab-causes"
            await pilot.pause(0.3)
            app.save_screenshot(str(HERE / "causes.svg"))
            app.query_one("#loop", TabbedContent).active = "tab-violations"
            await pilot.pause(0.3)
            app.save_screenshot(str(HERE / "violations.svg"))
            await pilot.press("question_mark")  # the help screen as its key opens it
            await _until(pilot, lambda: isinstance(app.screen, HelpScreen))
            app.save_screenshot(str(HERE / "help.svg"))
        await pilot.press("q")
    print(f"wrote screenshots/{name}")


async def shoot_analysis() -> None:
    """The analysis screen on the real 3-stream A100 training trace the tests carry."""
    from engine.analyze.compute import analyze_trace
    from engine.trace.kineto.kineto import read_kineto
    from gitm_tui.app import make_analysis_app

    # read by its path from the repository root, as tests/ui/test_snapshots.py reads it: the
    # header shows that path, and tests/ui/test_screenshots.py holds this picture to that one
    os.chdir(HERE.parent)
    trace = "tests/data/traces/kineto/a100_training_3streams.json.gz"
    app = make_analysis_app(analyze_trace(read_kineto(trace), top=200))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.5)
        await pilot.press("plus")
        await pilot.pause(0.2)
        app.save_screenshot(str(HERE / "analysis.svg"))
    print("wrote screenshots/analysis.svg")


async def shoot_audit() -> None:
    """The audit screen on a fresh calibrated-corpus ledger (2 seeds)."""
    from engine.study.audit import run_audit
    from gitm_tui.app import make_audit_app

    app = make_audit_app(run_audit(["calibrated"], seeds=2), "audit_ledger.json")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        app.save_screenshot(str(HERE / "audit.svg"))
    print("wrote screenshots/audit.svg")


async def shoot_ranks() -> None:
    """The ranks screen on 8 SYNTHETIC rank traces (a planted straggler and slow link) and the
    tests' CPU-only torch.profiler trace among them (its own line: CPU-only, not a rank)."""
    import shutil
    import tempfile

    from textual.widgets import DataTable

    from engine.analyze.api import Analyzed, AnalyzeOptions, Hooks, analyze
    from engine.analyze.ranks.synth_ranks import write_ranks
    from gitm_tui.app import make_ranks_app

    with tempfile.TemporaryDirectory() as d:
        write_ranks(Path(d), ranks=8, steps=3, straggler=5, slow_link=(2, 3))
        cpu = HERE.parent / "tests" / "data" / "traces" / "cpu" / "cpu_only_train_small.json.gz"
        shutil.copy(cpu, Path(d) / "cpu_only.json.gz")

        def load(
            progress: Callable[[int, int, str], None], _dashboard: object, _stage: object
        ) -> Analyzed:
            return analyze([d], AnalyzeOptions(workers=1), Hooks(progress=progress))

        app = make_ranks_app(load, "ranks/ (SYNTHETIC, one CPU-only)")
        async with app.run_test(size=SIZE) as pilot:

            def filled() -> bool:  # the ranks are analysed in the screen's loader thread
                tables = app.query("#ranks-table")
                return bool(tables) and tables.first(DataTable).row_count == 8

            await _until(pilot, filled)
            await pilot.pause(0.3)
            app.save_screenshot(str(HERE / "ranks.svg"))
    print("wrote screenshots/ranks.svg")


async def main() -> None:
    only = sys.argv[1:]
    for name, workload, approve in SHOTS:
        if not only or name in only:
            await shoot(name, workload, approve)
    if not only or "analysis.svg" in only:
        await shoot_analysis()
    if not only or "audit.svg" in only:
        await shoot_audit()
    if not only or "ranks.svg" in only:
        await shoot_ranks()


if __name__ == "__main__":
    asyncio.run(main())
