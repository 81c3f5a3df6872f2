"""The latest analysis's invariant violations, and the invariants that cannot be checked
(the dashboard's Violations tab)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from engine.runtime.events import InvariantView
from gitm_tui.render import outside_text
from gitm_tui.theme import tone
from gitm_tui.widgets.fit import cut, fit_text_column


class ViolationTable(DataTable[object]):
    """Invariant violations of the latest analysis (and invariants that cannot be checked)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)

    def on_mount(self) -> None:
        for key, label, width in (
            ("inv", "invariant", 15),
            ("op", "op", 32),
            ("n", "rows", 5),
            ("obs", "observed", 11),
            ("pred", "predicted", 11),
            ("msg", "", 40),
        ):
            self.add_column(label, key=key, width=width)
        self.call_after_refresh(self.on_resize)

    def on_resize(self, _: object = None) -> None:
        """The message takes what the figures leave (cut with "…")."""
        fit_text_column(self, "msg", 12)

    def show(self, results: tuple[InvariantView, ...]) -> None:
        self.clear()
        for r in results:
            if not r.checkable:
                self.add_row(
                    outside_text(r.invariant),
                    Text("not checkable", style="italic " + tone("gitm-muted")),
                    "",
                    "",
                    "",
                    cut(outside_text(r.reason)),
                )
                continue
            if not r.violations:
                self.add_row(
                    outside_text(r.invariant),
                    Text(f"holds on {r.checked} rows", style=tone("gitm-ok")),
                    "",
                    "",
                    "",
                    "",
                )
            for v in r.violations:
                unit = v.unit
                fmt = (
                    (lambda x: f"{x / 1e3:.1f} µs")
                    if unit == "ns"
                    else ((lambda x: f"{x:.3g} B") if unit == "bytes" else (lambda x: f"{x:.0%}"))
                )
                self.add_row(  # names and messages quote the trace: Text, never markup
                    outside_text(r.invariant),
                    cut(outside_text(v.name, limit=44)),
                    str(v.count),
                    fmt(v.observed),
                    fmt(v.predicted),
                    cut(outside_text(v.message)),
                )
