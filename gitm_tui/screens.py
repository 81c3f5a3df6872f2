"""Modal screens of the dashboard."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """[b]gitm-tui — live regime decoding[/b]

Each strip is one CUDA stream; each cell is one kernel or copy, newest on the right,
coloured by the bottleneck regime EESM decoded for it:

  [b #5fd75f]COMPUTE[/]  tensor / ALU pipes busy     [b #5fafff]MEMORY[/]  HBM bandwidth-bound
  [b #ff8700]STALL[/]    waiting on latency or deps  [#8a8a8a]IDLE[/]    launch-bound, tiny kernel

A shaded cell ▒ lies in M_deg: the covariance of recent pressures is ill-conditioned
(κ > K_max), so its label is low-confidence. Labels become final {lag} segments after
they arrive on their stream.

Keys:  p pause/resume   q quit   ? this help   escape close
"""


class HelpScreen(ModalScreen[None]):
    """What the dashboard shows and its keys."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, lag: int) -> None:
        super().__init__()
        self.lag = lag

    def compose(self) -> ComposeResult:
        yield Static(HELP.format(lag=self.lag), id="help")
