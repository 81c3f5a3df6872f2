"""Attribution's hypotheses, claimed causes first (the dashboard's Causes tab)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from engine.runtime.events import HypothesisView
from gitm_tui.render import outside_text
from gitm_tui.theme import tone
from gitm_tui.widgets.fit import cut, fit_text_column


class CauseTable(DataTable[object]):
    """Attribution's hypotheses: claimed causes first."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)

    def on_mount(self) -> None:
        for key, label, width in (
            ("cause", "cause", 20),
            ("imp", "impact", 7),
            ("conf", "conf", 5),
            ("claim", "claimed", 7),
            ("ev", "evidence", 80),
        ):
            self.add_column(label, key=key, width=width)
        self.call_after_refresh(self.on_resize)

    def on_resize(self, _: object = None) -> None:
        """The evidence takes what the figures leave (cut with "…")."""
        fit_text_column(self, "ev", 12)

    def show(self, hyps: tuple[HypothesisView, ...]) -> None:
        self.clear()
        for h in hyps:
            claimed = (
                Text("yes", style="bold " + tone("gitm-ok"))
                if h.claimed
                else Text("no", style=tone("gitm-muted"))
            )
            ev = "; ".join(e.what for e in h.evidence[:2])
            self.add_row(
                outside_text(h.cause),
                f"{h.impact:.1%}",
                f"{h.confidence:.2f}",
                claimed,
                cut(outside_text(ev)),  # evidence quotes kernel names: Text, never markup
            )
