"""KernelTable: kernels by total device time with their decoded regime, heaviest first.

The table shows one workload configuration at a time — the one running now: when decoded rows
arrive from another (a lever was kept or rolled back), it starts over, and its border title
names the configuration, so a kernel's time never mixes before and after a change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rich.text import Text
from textual.widgets import DataTable

from engine.regimes import N_LABELS, Label
from engine.text import clean
from gitm_tui.render import SHOWN_CHARS
from gitm_tui.theme import regime_style
from gitm_tui.widgets.fit import fit_text_column

_REFRESH_S = 0.5  # table redraw rhythm: rows change every tick, eyes need less
_MAX_ROWS = 200
# fixed widths because a DataTable column does not grow when its cells later do: each figure's
# column holds its header and its widest figure (_fits keeps a figure within it); the kernel
# name takes what they leave of the pane (fit_text_column, on every resize), cut with "…" —
# at 120 terminal columns the pane is ~76 cells and the figures need 62 of them
_WIDTHS = {"kernel": 40, "regime": 12, "stream": 6, "calls": 7, "total": 8, "mean": 7, "lowconf": 8}
# a pane under _COMPACT_BELOW cells (120 terminal columns: ~76) takes shorter headers and
# narrower figures: the full ones left a kernel name 14 characters ("sm90_xmma_gem…")
_COMPACT_BELOW = 100
_COMPACT = {
    "kernel": 40,
    "regime": 11,
    "stream": 4,
    "calls": 5,
    "total": 6,
    "mean": 6,
    "lowconf": 4,
}
_COMPACT_LABELS = {"stream": "strm", "total": "ms", "mean": "µs", "lowconf": "low%"}
_LEAST_NAME = 12  # a kernel name narrower than this says nothing


@dataclass
class _Agg:
    calls: int = 0
    total_ns: int = 0
    regimes: np.ndarray = field(default_factory=lambda: np.zeros(N_LABELS, np.int64))
    degenerate: int = 0


class KernelTable(DataTable[object]):
    """Aggregates decoded rows per (stream, kernel name); redraws changed cells twice a second."""

    COLUMNS = (
        ("kernel", "kernel"),
        ("regime", "regime"),
        ("stream", "stream"),
        ("calls", "calls"),
        ("total", "total ms"),
        ("mean", "mean µs"),
        ("lowconf", "low-conf"),
    )

    def __init__(self, **kw: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)  # type: ignore[arg-type]
        self._agg: dict[tuple[int, str], _Agg] = {}
        self._dirty: set[tuple[int, str]] = set()
        self._shown: list[tuple[object, ...]] = []  # the cells of each row, by rank
        self._ranked: list[tuple[int, str]] = []  # (stream, kernel) of each rank
        self._stale: set[int] = set()  # ranks whose row may show old figures
        self.config = ""
        self.widths = _WIDTHS  # _COMPACT in a narrow pane (on_resize)

    def on_mount(self) -> None:
        for key, label in self.COLUMNS:
            self.add_column(label, key=key, width=_WIDTHS.get(key))
        self.call_after_refresh(self.on_resize)
        self.set_interval(_REFRESH_S, lambda: self.flush(visible_only=True))

    def add(
        self,
        stream: int,
        names: tuple[str, ...],
        start_ns: np.ndarray,
        end_ns: np.ndarray,
        labels: np.ndarray,
        degenerate: np.ndarray,
        config: str = "",
    ) -> None:
        """Accumulate one decoded batch (no redraw until the next flush); rows of another
        configuration than the one shown start the table over."""
        if config != self.config:
            self.config = config
            self._agg.clear()
            self._dirty.clear()
            self._shown.clear()
            self._ranked = []
            self._stale.clear()
            self.clear()
            self.border_title = f"kernels — {config}" if config else None
            self.set_class(bool(config), "-config")
        n = min(len(names), len(labels))
        if not n:
            return
        # one dict lookup per row, the sums in numpy: a batch of thousands of rows of a few
        # kernels costs a few bincounts, not a Python loop of array updates
        rows = names[:n]
        code = {name: i for i, name in enumerate(dict.fromkeys(rows))}  # first-seen order
        idx = np.fromiter(map(code.__getitem__, rows), np.int64, n)  # no Python frame per row
        k = len(code)
        dur = (end_ns[:n] - start_ns[:n]).astype(np.float64)
        calls = np.bincount(idx, minlength=k)
        total = np.bincount(idx, weights=dur, minlength=k)
        regimes = np.bincount(
            idx * N_LABELS + labels[:n].astype(np.int64), minlength=k * N_LABELS
        ).reshape(k, N_LABELS)
        deg = np.bincount(idx, weights=degenerate[:n].astype(np.float64), minlength=k)
        for name, i in code.items():
            key = (stream, name)
            a = self._agg.get(key)
            if a is None:
                a = self._agg[key] = _Agg()
            a.calls += int(calls[i])
            a.total_ns += int(total[i])
            a.regimes += regimes[i]
            a.degenerate += int(deg[i])
            self._dirty.add(key)

    def flush(self, visible_only: bool = False) -> None:
        """Show the heaviest kernels, heaviest first: row i is rank i, its cells rewritten only
        where they changed. Rows are added or removed only when the count changes — removing
        and re-sorting keyed rows made every flush a full layout of the screen (tens of ms
        with a few hundred kernels). ``visible_only`` (the timer's flush): rewrite the rows on
        screen; the others are rewritten when scrolled into view (a flush of 200 changing rows
        held the loop 10-20 ms twice a second at 1 M rows/s)."""
        if self._dirty:
            self._ranked = sorted(self._agg, key=lambda k: self._agg[k].total_ns, reverse=True)[
                :_MAX_ROWS
            ]
            self._dirty.clear()
            self._stale = set(range(len(self._ranked)))
        if not self._stale:
            return
        top = self._ranked
        with self.app.batch_update():
            while self.row_count > len(top):
                self.remove_row(f"r{self.row_count - 1}")
                self._shown.pop()
            while self.row_count < len(top):  # new ranks: drawn now, whatever is visible
                i = self.row_count
                cells = self._cells(top[i], self._agg[top[i]], self.widths)
                self.add_row(*cells, key=f"r{i}")
                self._shown.append(cells)
                self._stale.discard(i)
            rows = self._visible() if visible_only else range(len(top))
            for i in rows:
                if i not in self._stale:
                    continue
                self._stale.discard(i)
                cells = self._cells(top[i], self._agg[top[i]], self.widths)
                for (col, _), v, was in zip(self.COLUMNS, cells, self._shown[i], strict=True):
                    if v != was:
                        self.update_cell(f"r{i}", col, v)
                self._shown[i] = cells

    def on_resize(self, _: object = None) -> None:
        width = self.scrollable_content_region.width
        widths = _COMPACT if 0 < width < _COMPACT_BELOW else _WIDTHS
        if widths is not self.widths:  # the figures' columns narrowed or widened: redrawn
            self.widths = widths
            compact = widths is _COMPACT
            for key, label in self.COLUMNS:
                col = next((c for k, c in self.columns.items() if k.value == key), None)
                if col is not None and key != "kernel":
                    col.width = widths[key]
                    col.label = Text(_COMPACT_LABELS.get(key, label) if compact else label)
            self._stale = set(range(len(self._ranked)))
            self._shown = [tuple("" for _ in self.COLUMNS) for _ in self._shown]
            self.call_later(self.flush, True)
        fit_text_column(self, "kernel", _LEAST_NAME)

    def _visible(self) -> range:
        """The ranks on screen, with a margin."""
        top = max(0, int(self.scroll_y) - 4)
        return range(top, min(len(self._ranked), top + self.size.height + 8))

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._stale:  # rows scrolled into view are brought up to date
            self.call_later(self.flush, True)

    @staticmethod
    def _cells(k: tuple[int, str], a: _Agg, w: dict[str, int] = _WIDTHS) -> tuple[object, ...]:
        r = Label(int(a.regimes.argmax()))
        share = a.regimes[r] / max(1, a.calls)
        regime = Text(f"{r.name} {share:.0%}", style=regime_style(r))
        return (
            # a kernel name: cleaned and cut (engine.text.clean), a Text: never markup
            Text(clean(k[1], SHOWN_CHARS), overflow="ellipsis", no_wrap=True),
            regime,
            _fits(k[0], w["stream"], 0),
            _fits(a.calls, w["calls"], 0),
            _fits(a.total_ns / 1e6, w["total"], 2),
            _fits(a.total_ns / max(1, a.calls) / 1e3, w["mean"], 1),
            f"{a.degenerate / max(1, a.calls):.0%}",
        )


def _fits(x: float, width: int, decimals: int) -> str:
    """``x`` in at most ``width`` characters: grouped with its decimals while it fits, then
    fewer decimals, then with a k/M/G suffix (3 significant figures) — never cut."""
    for d in range(decimals, -1, -1):
        text = f"{x:,.{d}f}"
        if len(text) <= width:
            return text
    for scale, suffix in ((1e3, "k"), (1e6, "M"), (1e9, "G"), (1e12, "T")):
        text = f"{x / scale:.3g}{suffix}"
        if len(text) <= width and "e" not in text:
            return text
    return f"{x:.0e}"
