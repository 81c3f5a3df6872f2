"""The whole account of one critical path, over the screen that opened it (its key ``c``):
every part, every opportunity with its evidence, the kernels and calls on the path, the steps."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gitm_tui.widgets.critical_path import critical_account, panel_title

if TYPE_CHECKING:
    from engine.analyze.breakdown.critical_model import CriticalPath


class CriticalPathScreen(ModalScreen[None]):
    """One analysis's critical path, whole; escape closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,c", "dismiss", "Close"),
    ]

    def __init__(self, cp: CriticalPath | None, who: str = "", lead: Text | None = None) -> None:
        """``cp``: the path to show (None: the analysis has none); ``who``: 'rank 3: ';
        ``lead``: a first line from the caller (a rank's waits)."""
        super().__init__()
        self.cp, self.who, self.lead = cp, who, lead

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="critical-account") as box:
            box.border_title = panel_title(self.cp, self.who)
            box.border_subtitle = "escape: close"
            yield Static(critical_account(self.cp, self.lead), id="critical-account-body")
