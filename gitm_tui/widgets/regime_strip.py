"""RegimeStrip: one CUDA stream's decoded segments scrolling live, a coloured cell per segment."""

from __future__ import annotations

from collections import deque

import numpy as np
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from engine.regimes import N_LABELS, Label
from engine.text import clean
from gitm_tui.render import shares_text, strip_cells
from gitm_tui.theme import regime_style

_LABEL_W = 11  # "stream 123 "
_SHARES_W = 25  # "C 12% M 30% S 40% I 18% "
_HISTORY = 4096  # cells kept: wider than any terminal


class RegimeStrip(Widget):
    """Live strip of one stream: coloured cells (newest right), regime shares, latest kernel."""

    DEFAULT_CSS = "RegimeStrip { height: 2; }"
    segments = reactive(0)

    def __init__(self, stream: int, **kw: object) -> None:
        super().__init__(id=f"strip-{stream}", **kw)  # type: ignore[arg-type]
        self.stream = stream
        self._labels: deque[int] = deque(maxlen=_HISTORY)
        self._degenerate: deque[bool] = deque(maxlen=_HISTORY)
        self._counts = np.zeros(N_LABELS, np.int64)
        self._latest = ""

    def add(self, labels: np.ndarray, degenerate: np.ndarray, names: tuple[str, ...] = ()) -> None:
        """Append decoded segments (oldest first); ``names`` are their kernel names if known."""
        if not len(labels):
            return
        self._labels.extend(labels[-_HISTORY:].tolist())
        self._degenerate.extend(np.asarray(degenerate[-_HISTORY:], bool).tolist())
        self._counts += np.bincount(labels, minlength=N_LABELS)
        if names:
            self._latest = names[-1]
        self.segments += len(labels)

    @property
    def counts(self) -> np.ndarray:
        """Return segments decoded so far per regime."""
        return self._counts.copy()

    def latest(self) -> list[int]:
        """Return the labels currently held, oldest first."""
        return list(self._labels)

    def render(self) -> Text:
        shares = shares_text(self._counts.tolist())
        width = max(1, self.size.width - _LABEL_W - max(_SHARES_W, shares.cell_len + 1))
        t = Text(f"stream {self.stream}"[:_LABEL_W].ljust(_LABEL_W), style="bold", no_wrap=True)
        t.append_text(strip_cells(self._labels, self._degenerate, width))
        t.append(" ")
        t.append_text(shares)
        t.append("\n" + " " * _LABEL_W)
        if self._labels:
            r = Label(self._labels[-1])
            t.append(f"{self.segments:,} segments · latest ", style="dim")
            t.append(r.name, style=regime_style(r))
            room = max(0, self.size.width - _LABEL_W - 40)
            # cut to the room left, then cleaned (escapes shown, never sent to the terminal)
            t.append(" " + clean(self._latest[:room]), style="dim")
        return t
