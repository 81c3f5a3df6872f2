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
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(" gitm-tui ", style="bold reverse")
        # workload and device names come from the command line and the driver: cleaned
        t.append(f"  {clean(self.workload, 200)}  ", style="bold")
        device = clean(self.device, 200)
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
        t.append("  ")
        t.append(f"kernels: {self.kernels}", style="italic")
        return t

    def watch_phase(self, phase: str) -> None:
        self.set_class(phase == "paused", "-paused")
        self.set_class(phase == "done", "-done")

    def watch_kernels(self, kernels: str) -> None:
        self.set_class(kernels.startswith("warming"), "-warming")
