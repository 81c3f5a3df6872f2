"""The optimize loop's interventions: one row each, its lifecycle state and safety class
coloured, predicted against measured gain (the dashboard's Interventions tab)."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable

from engine.runtime.events import InterventionUpdate
from gitm_tui.render import outside_text
from gitm_tui.theme import tone
from gitm_tui.widgets.fit import cut, fit_text_column

#: how each lifecycle state and safety class is drawn: (emphasis, theme colour)
STATE_TONE = {
    "PROPOSED": ("bold ", "gitm-warn"),
    "APPROVED": ("", "gitm-info"),
    "APPLYING": ("bold ", "gitm-info"),
    "APPLIED": ("", "gitm-info"),
    "VERIFIED": ("bold ", "gitm-ok"),
    "ROLLED_BACK": ("", "gitm-bad"),
    "REJECTED": ("", "gitm-muted"),
    "SAFE": ("", "gitm-ok"),
    "NUMERICS": ("", "gitm-warn"),
    "PRIVILEGED": ("bold ", "gitm-bad"),
}


def _style(word: str) -> str:
    """Return the style of a state or safety class in the active theme ('' if unknown)."""
    emphasis, colour = STATE_TONE.get(word, ("", ""))
    return emphasis + tone(colour) if colour else ""


def _pct(x: float | None) -> str:
    return "—" if x is None or x != x else f"{x:+.1%}"


class InterventionTable(DataTable[object]):
    """One row per intervention, updated in place by id; the latest update is kept per id."""

    COLUMNS = (
        ("id", "id", 4),
        ("lever", "lever", 20),
        ("safety", "safety", 10),
        ("state", "state", 12),
        ("pred", "predicted", 9),
        ("conf", "conf", 5),
        ("meas", "measured", 9),
        ("note", "note", 48),  # the rest of the table's width (fit_text_column)
    )

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self.latest: dict[str, InterventionUpdate] = {}

    def on_mount(self) -> None:
        for key, label, width in self.COLUMNS:
            self.add_column(label, key=key, width=width)
        self.call_after_refresh(self.on_resize)

    def on_resize(self, _: object = None) -> None:
        """The note takes what the figures leave (cut with "…"; ``d`` shows it whole)."""
        fit_text_column(self, "note", 12)

    def update_iv(self, ev: InterventionUpdate) -> None:
        self.latest[ev.id] = ev
        # every text cell a Text: a str cell is read as markup, and a note quotes a program's
        # output or the --check pattern (a metric printed as "[/]" crashed the dashboard)
        cells = {
            "id": outside_text(ev.id),
            "lever": outside_text(ev.lever),
            "safety": outside_text(ev.safety, _style(ev.safety)),
            "state": outside_text(ev.state, _style(ev.state)),
            "pred": _pct(ev.predicted_gain)
            if ev.predicted_gain == ev.predicted_gain
            else "measured",
            "conf": f"{ev.confidence:.2f}" if ev.predicted_gain == ev.predicted_gain else "—",
            "meas": _pct(ev.measured_gain),
            "note": cut(
                outside_text(ev.note or (f"by {ev.approved_by}" if ev.approved_by else ""))
            ),
        }
        if ev.id in self.rows:
            for key, value in cells.items():
                self.update_cell(ev.id, key, value)
        else:
            self.add_row(*cells.values(), key=ev.id)

    def selected(self) -> InterventionUpdate | None:
        """The intervention under the cursor."""
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return self.latest.get(str(key))
