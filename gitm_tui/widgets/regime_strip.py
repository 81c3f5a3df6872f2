"""RegimeStrip: one CUDA stream's decoded segments scrolling live, a coloured cell per segment."""

from __future__ import annotations

import functools
import itertools
from collections import deque

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from engine.regimes import N_LABELS, Label
from engine.text import clean
from gitm_tui.render import cell_runs, shares_text
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
        self._lines: tuple[tuple[object, ...], tuple[Strip, Strip]] | None = None

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

    def render_line(self, y: int) -> Strip:
        """Line 0: the stream, its newest cells and the regime shares; line 1: segments so far
        and the latest kernel. Drawn as segments of cached styles, cells of one regime merged
        into one run (the Line API: a Text of a span per cell, converted every frame, took
        2 ms a strip, half the frame at 1 M rows/s)."""
        width = self.size.width
        key = (self.segments, width, self.app.theme)
        if self._lines is None or self._lines[0] != key:
            self._lines = (key, self._draw(width))
        lines = self._lines[1]
        return lines[y] if 0 <= y < len(lines) else Strip.blank(width)

    def _draw(self, width: int) -> tuple[Strip, Strip]:
        base = self.rich_style  # the widget's colours, under every segment's own

        def _style(spec: str) -> Style:
            return base + _parsed(spec)

        shares = [
            Segment(seg.text, base + seg.style if seg.style else base)
            for seg in shares_text(self._counts.tolist()).render(self.app.console)
        ]
        shares_len = Segment.get_line_length(shares)
        room = max(1, width - _LABEL_W - max(_SHARES_W, shares_len + 1))
        head = [Segment(f"stream {self.stream}"[:_LABEL_W].ljust(_LABEL_W), _style("bold"))]
        n = len(self._labels)
        first = max(0, n - room)
        labels = list(itertools.islice(self._labels, first, n))
        degenerate = list(itertools.islice(self._degenerate, first, n))
        head += [Segment(t, _style(st)) for t, st in cell_runs(labels, degenerate, room)]
        head.append(Segment(" ", base))
        head += shares
        second = [Segment(" " * _LABEL_W, base)]
        if self._labels:
            r = Label(self._labels[-1])
            dim = _style("dim")
            second.append(Segment(f"{self.segments:,} segments · latest ", dim))
            second.append(Segment(r.name, _style(regime_style(r))))
            cut = max(0, width - _LABEL_W - 40)
            # cut to the room left, then cleaned (escapes shown, never sent to the terminal)
            second.append(Segment(" " + clean(self._latest[:cut]), dim))
        return (
            Strip(head).adjust_cell_length(width, base),
            Strip(second).adjust_cell_length(width, base),
        )


@functools.lru_cache(maxsize=256)
def _parsed(spec: str) -> Style:
    return Style.parse(spec)
