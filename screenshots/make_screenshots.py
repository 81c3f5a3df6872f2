"""Regenerate screenshots/*.svg from the real app on the real (simulated-device) engine.

    python screenshots/make_screenshots.py

Uses the same ``make_app`` factory as the CLI; the dashboard runs for a few seconds of live
decoding before each capture.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.runtime import Engine, RunConfig  # noqa: E402
from gitm_tui.app import Settings, make_app  # noqa: E402
from gitm_tui.screens import HelpScreen  # noqa: E402
from gitm_tui.widgets.kernel_table import KernelTable  # noqa: E402

SIZE = (140, 42)
SHOTS = (
    ("dashboard.svg", "hft-lob", 4.0),
    ("dashboard-af2.svg", "af2", 4.0),
    ("dashboard-kitti.svg", "kitti", 4.0),
)


async def shoot(name: str, workload: str, seconds: float) -> None:
    app = make_app(Settings(), Engine(RunConfig(workload=workload, budget_s=60, seed=1)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(seconds)
        app.query_one(KernelTable).flush()
        await pilot.pause(0.2)
        app.save_screenshot(str(HERE / name))
        if name == "dashboard.svg":
            app.push_screen(HelpScreen(app.settings.lag))
            await pilot.pause(0.3)
            app.save_screenshot(str(HERE / "help.svg"))
        await pilot.press("q")
    print(f"wrote screenshots/{name}")


async def shoot_analysis() -> None:
    """The analysis screen on the shared 3-stream A100 training trace (when ../shared is there)."""
    from engine.analyze.compute import analyze_trace
    from engine.trace.kineto import read_kineto
    from gitm_tui.analysis_app import make_analysis_app

    trace = HERE.parents[1] / "shared" / "traces" / "kineto" / "a100_training_3streams.json.gz"
    if not trace.exists():
        print("skipped analysis.svg: ../shared/traces not present")
        return
    app = make_analysis_app(analyze_trace(read_kineto(trace), top=200))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.5)
        await pilot.press("plus")
        await pilot.pause(0.2)
        app.save_screenshot(str(HERE / "analysis.svg"))
    print("wrote screenshots/analysis.svg")


async def main() -> None:
    for name, workload, seconds in SHOTS:
        await shoot(name, workload, seconds)
    await shoot_analysis()


if __name__ == "__main__":
    asyncio.run(main())
