"""RunHeader: workload, the device (always saying when it is simulated), phase, elapsed / budget."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from engine.runtime.budget import format_seconds
from engine.text import clean
from gitm_tui.theme import tone


class RunHeader(Static):
    """Top bar. Attributes are set by the app; state shows as dashed classes (-warming, -paused)."""

    workload = reactive("")
    device = reactive("")
    simulated = reactive(True)
    phase = reactive("starting")
    elapsed = reactive(0.0)
    budget = reactive(0.0)
    #: the time the run has waited for a person's decision: part of elapsed, unless
    #: keep_deciding (then the budget clock stands while it waits)
    waiting = reactive(0.0)
    keep_deciding = reactive(False)
    kernels = reactive("warming up")

    def render(self) -> Text:
        """One line that fits the width: where the whole does not, the parts least needed are
        shortened first — the kernels' state, then the device's explanation in brackets, then
        the workload's name (cut with an ellipsis) — so the clock and the phase always show
        (at 120 columns a command run's header was cut after "kernels:")."""
        width = self.size.width or 200
        device = clean(self.device, 200)
        workload = clean(self.workload, 200)
        # a simulated device keeps its whole name: its badge is what says no GPU is used
        short_device = device if self.simulated else device.split(" (", 1)[0]
        kernels = f"kernels: {self.kernels}"
        short_kernels = "" if self.kernels.startswith("not needed") else kernels.split(" (")[0]
        tries = (
            (workload, device, kernels),
            (workload, device, short_kernels),
            (workload, short_device, short_kernels),
            (workload, short_device, ""),
        )
        for w, d, k in tries:
            t = self._line(w, d, k)
            if t.cell_len <= width:
                return t
        w, d, k = tries[-1]
        over = t.cell_len - width
        if len(w) > 9:  # the workload's name gives way, its start kept
            w = w[: max(8, len(w) - over - 1)] + "…"
        t = self._line(w, d, k)
        t.truncate(width, overflow="ellipsis")
        return t

    def _line(self, workload: str, device: str, kernels: str) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(" gitm-tui ", style="bold reverse")
        # workload and device names come from the command line and the driver: cleaned
        t.append(f"  {workload}  ", style="bold")
        if self.simulated:
            t.append(
                f" {device.upper()} — no GPU used ", style="bold black on " + tone("gitm-warn")
            )
        else:
            t.append(f" {device} ", style="bold black on " + tone("gitm-real-device"))
        t.append(f"  {self.phase}  ")
        t.append(f"{format_seconds(self.elapsed)} / {format_seconds(self.budget)}")
        if self.waiting >= 1:
            t.append(f", {format_seconds(self.waiting)} waiting for you", style="bold")
            if self.keep_deciding:  # the budget clock stands while it waits
                t.append(" (not charged)", style="bold")
        elif self.keep_deciding:
            t.append(", keep deciding", style="bold")
        if kernels:
            t.append("  ")
            t.append(kernels, style="italic")
        return t

    def watch_phase(self, phase: str) -> None:
        self.set_class(phase == "paused", "-paused")
        self.set_class(phase == "done", "-done")

    def watch_kernels(self, kernels: str) -> None:
        self.set_class(kernels.startswith("warming"), "-warming")
