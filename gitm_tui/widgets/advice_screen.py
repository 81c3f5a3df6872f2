"""What would help, over the analysis screen that opened it (its key ``w``): every lever replayed
on the trace with its prediction, interval, ceiling and basis — the table `gitm-tui analyze`
prints (issue 50: `analyze --ui` showed no advice)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gitm_tui.analyze_view import advice_block

if TYPE_CHECKING:
    from engine.analyze.breakdown.model import Analysis


class AdviceScreen(ModalScreen[None]):
    """One analysis's levers, whole (every judged one, not only the first six); escape closes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,w", "dismiss", "Close"),
    ]

    def __init__(self, analysis: Analysis) -> None:
        """``analysis``: shown as it is — the caller cleaned its strings (clean_analysis)."""
        super().__init__()
        self.analysis = analysis

    def compose(self) -> ComposeResult:
        parts = advice_block(self.analysis, judged_most=len(self.analysis.interventions))
        body = Group(*parts) if parts else Text("no lever found a target in this trace")
        self.body = body  # (what is shown: tests read it)
        with VerticalScroll(id="advice") as box:
            box.border_title = "what would help — replayed on this trace, nothing applied"
            box.border_subtitle = "escape: close"
            yield Static(body, id="advice-body")
