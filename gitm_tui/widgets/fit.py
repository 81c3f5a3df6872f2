"""Fit a DataTable to its width: the figures keep their columns whole, the one text column
(a kernel name, a note) takes what is left and is cut with "…".

A DataTable column keeps the width it was given at mount, whatever the pane's width: at 120
columns the kernel table's fixed widths (~109 cells) overflowed its ~76-cell pane and cut
``low-conf`` to ``lo``. Called on every resize, ``fit_text_column`` gives the text column the
width the other columns leave, never less than ``least``.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.geometry import Size
from textual.widgets import DataTable


def fit_text_column(table: DataTable[Any], key: str, least: int, most: int = 200) -> None:
    """Set column ``key``'s width to what the table's other columns leave of its width
    (clamped to ``least``..``most``); no-op before the table has a size or the column."""
    width = table.scrollable_content_region.width
    col = next((c for k, c in table.columns.items() if k.value == key), None)
    if width <= 0 or col is None:
        return
    others = sum(c.get_render_width(table) for c in table.columns.values() if c is not col)
    new = max(least, min(most, width - others - 2 * table.cell_padding))
    if new == col.width:
        return
    col.width = new
    total = sum(c.get_render_width(table) for c in table.columns.values())
    table.virtual_size = Size(total, table.virtual_size.height)
    table._clear_caches()  # the rows' cached renders have the old width
    table.refresh()


def cut(text: Text) -> Text:
    """``text`` on one line, cut with "…" where its column ends (a text column's cell)."""
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


class FitTable(DataTable[object]):
    """A DataTable whose text column ``text_key`` takes the width the others leave."""

    def __init__(self, text_key: str, least: int = 12, most: int = 200, **kw: Any) -> None:
        super().__init__(**kw)
        self.text_key, self.least, self.most = text_key, least, most

    def fit(self) -> None:
        """Fit now (after the columns were added) and again once laid out."""
        fit_text_column(self, self.text_key, self.least, self.most)
        self.call_after_refresh(fit_text_column, self, self.text_key, self.least, self.most)

    def on_resize(self, _: object = None) -> None:
        fit_text_column(self, self.text_key, self.least, self.most)


#: below this many terminal columns a screen with a table beside a text pane stacks them
NARROW = 160
