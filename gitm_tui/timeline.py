"""Per-stream regime timeline: time bins coloured by the regime that filled most of each bin.

Plain functions (numpy + Rich) so that tests call them without an app; the widget in
``widgets/regime_timeline.py`` only holds the view window and keys.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text

from engine.regimes import Label
from gitm_tui.theme import regime_style, tone

#: busy share of a bin → glyph: mostly busy, partly busy, barely busy, idle
_GLYPHS = ((0.5, "█"), (0.2, "▅"), (1e-9, "▂"))
_IDLE = "·"


def covered_until(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Return C(t) = time covered by [start, end) rows before each edge t (rows sorted, disjoint)."""
    if len(start) == 0:
        return np.zeros(len(edges))
    dur = (end - start).astype(np.float64)
    prefix = np.concatenate([[0.0], np.cumsum(dur)])
    k = np.searchsorted(start, edges, side="left")  # rows starting before t
    c = prefix[k]
    last = np.clip(k - 1, 0, len(start) - 1)
    overhang = np.where(k > 0, np.maximum(0, end[last] - edges), 0)  # row still running at t
    return c - overhang


def bin_regimes(
    start: np.ndarray, end: np.ndarray, labels: np.ndarray, t0: int, t1: int, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return (dominant regime per bin, busy share per bin) of one stream over [t0, t1)."""
    edges = np.linspace(t0, t1, width + 1)
    cover = np.zeros((len(Label), width))
    for r in range(len(Label)):
        m = labels == r
        if m.any():
            cover[r] = np.diff(covered_until(start[m], end[m], edges))
    busy = cover.sum(axis=0) / max(1e-9, (t1 - t0) / width)
    return cover.argmax(axis=0), np.clip(busy, 0.0, 1.0)


def timeline_text(
    start: np.ndarray, end: np.ndarray, labels: np.ndarray, t0: int, t1: int, width: int
) -> Text:
    """Return one stream's timeline row as coloured cells."""
    dom, busy = bin_regimes(start, end, labels, t0, t1, width)
    t = Text(no_wrap=True, overflow="crop")
    for r, b in zip(dom.tolist(), busy.tolist(), strict=True):
        glyph = next((g for lo, g in _GLYPHS if b >= lo), _IDLE)
        if glyph == _IDLE:
            t.append(_IDLE, style=tone("gitm-faint"))
        else:
            t.append(glyph, style=regime_style(r))
    return t
