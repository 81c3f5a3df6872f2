"""The run header fits its width (issue 50): at 120 columns a command run's header was cut
after "kernels:"; the parts least needed give way first, the clock and the phase stay."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from gitm_tui.widgets.run_header import RunHeader


class _One(App[None]):
    def compose(self) -> ComposeResult:
        yield RunHeader()


async def _render(width: int, **fields: object) -> str:
    app = _One()
    async with app.run_test(size=(width, 3)) as pilot:
        h = app.query_one(RunHeader)
        for k, v in fields.items():
            setattr(h, k, v)
        await pilot.pause()
        return h.render().plain


COMMAND = {
    "workload": "command: python prog.py --epochs 3",
    "device": "this machine (command workload: measured for real, no device trace)",
    "simulated": False,
    "phase": "apply",
    "elapsed": 12.0,
    "budget": 90.0,
    "waiting": 3.0,
    "kernels": "not needed (no kernel trace)",
}


@pytest.mark.parametrize("width", [200, 120, 100])
async def test_a_command_runs_header_keeps_its_clock_and_cuts_nothing_midword(width: int):
    line = await _render(width, **COMMAND)
    assert len(line) <= width
    assert "12.0s / 1m30s, 3.0s waiting for you" in line and "apply" in line
    assert not line.rstrip().endswith("kernels:")
    if width >= 120:
        assert "command: python prog.py --epochs 3" in line  # the name whole while it fits
    if width == 200:  # room for everything: nothing shortened
        assert "(command workload: measured for real, no device trace)" in line


async def test_a_simulated_device_keeps_its_label_when_the_header_is_short():
    line = await _render(
        100, **{**COMMAND, "simulated": True, "device": "H100 SXM5 80GB (simulated)",
                "workload": "hft-lob", "kernels": "numba ✓ 3.4s"}
    )  # fmt: skip
    assert "H100 SXM5 80GB (SIMULATED) — no GPU used" in line and "12.0s / 1m30s" in line


async def test_the_optimize_bar_fits_120_columns_with_every_figure():
    """At 120 columns the bar was cut (issue 50): with a gate, a best trial not kept and a
    noise floor it took 146 cells; the words a figure can do without go, the figures stay."""
    from gitm_tui.widgets.optimize_bar import OptimizeBar

    class _Bar(App[None]):
        def compose(self) -> ComposeResult:
            yield OptimizeBar()

    app = _Bar()
    async with app.run_test(size=(120, 3)) as pilot:
        b = app.query_one(OptimizeBar)
        b.phase, b.baseline_ns, b.current_ns = "apply", 22_894_855.98, 20_100_000.0
        b.unit, b.scale, b.gain, b.target, b.noise = "ms/step", 1e6, 0.121, 0.15, 0.227
        b.best_trial, b.best_trial_id, b.gate = 0.181, "I2", "diagnose, forced"
        b.policy, b.budget, b.elapsed, b.deadline = "manual", 150, 95, 125
        await pilot.pause()
        line = b.render().plain
    assert len(line) <= 120, line
    for figure in ("22.89→20.1 ms/step", "+12.1%/15%", "I2 +18.1% not kept", "±22.7%", "forced"):
        assert figure in line, (figure, line)
