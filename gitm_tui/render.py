"""Plain rendering functions (Rich renderables) the widgets use; tests call them without an app."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from rich.text import Text

from engine.regimes import Label, Regime
from engine.text import clean
from gitm_tui.theme import regime_style, tone

#: the most characters of one outside string (a kernel or device name, a note, a log line) that
#: a widget or the terminal summary receives: long C++ template names run to about a thousand
#: characters; laid out whole, an 8 MB name held the screen at 100 % CPU for minutes
SHOWN_CHARS = 2000

#: a confident label is a full block; a label in M_deg (κ > K_max) is shaded
CELL_CONFIDENT = "█"
CELL_DEGENERATE = "▒"


def outside_text(text: str, style: str = "", limit: int = SHOWN_CHARS) -> Text:
    """Return a string from outside (a trace, a device, a program's output) as a Text:
    through engine.text.clean (no escape sequence, one line, at most ``limit`` characters) and
    never read as markup."""
    return Text(clean(text, limit), style=style)


def mode_title(mode: str, subject: str) -> Text:
    """Return the start of a mode's header line: ' gitm-tui MODE ' reversed, then what it shows
    (a path or a workload: from outside, so cleaned)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f" gitm-tui {mode} ".replace("  ", " "), style="bold reverse")
    t.append(f"  {clean(subject, SHOWN_CHARS)}  ", style="bold")
    return t


def legend() -> Text:
    """Return the label legend line: the regimes, then what copies and collectives are."""
    t = Text()
    for r in (*Regime, Label.COPY, Label.COMM):
        t.append(CELL_CONFIDENT * 2, style=regime_style(r))
        t.append(f" {r.name} ")
    t.append(CELL_DEGENERATE * 2, style=tone("gitm-shaded"))
    t.append(" low confidence")
    return t


def cell_runs(
    labels: Sequence[int], degenerate: Sequence[bool], width: int
) -> Iterator[tuple[str, str]]:
    """(text, style) runs of the newest ``width`` segments as coloured cells, newest on the
    right, faint dots before them: consecutive cells of one regime and confidence are one run
    (the regime strip draws a segment per run)."""
    n = len(labels)
    if width > n:
        yield "·" * (width - n), tone("gitm-faint")
    i = max(0, n - width)
    while i < n:
        j = i + 1
        while j < n and labels[j] == labels[i] and degenerate[j] == degenerate[i]:
            j += 1
        yield (
            (CELL_DEGENERATE if degenerate[i] else CELL_CONFIDENT) * (j - i),
            regime_style(labels[i]),
        )
        i = j


def strip_cells(labels: Sequence[int], degenerate: Sequence[bool], width: int) -> Text:
    """Return the newest ``width`` segments as coloured cells, newest on the right."""
    t = Text(no_wrap=True, overflow="crop")
    for text, style in cell_runs(labels, degenerate, width):
        t.append(text, style=style)
    return t


def shares_text(counts: Sequence[int]) -> Text:
    """Return 'C 12% M 30% S 40% I 18%' coloured by regime (24 cells), then the copy and
    collective shares ('copy 5%', 'comm 9%') where ``counts`` (indexed by Label) has any."""
    total = max(1, sum(counts))
    t = Text(no_wrap=True)
    for r in Regime:
        t.append(f"{r.name[0]}{counts[r] / total:4.0%} ", style=regime_style(r))
    for lab in (Label.COPY, Label.COMM):
        if len(counts) > lab and counts[lab]:
            t.append(f"{lab.name.lower()}{counts[lab] / total:4.0%} ", style=regime_style(lab))
    return t


_BARS = "▁▂▃▄▅▆▇█"


def spark(values: Sequence[float], lo: float, hi: float, width: int) -> str:
    """Return a sparkline of the newest ``width`` values on a fixed [lo, hi] scale.

    A fixed scale (not the data's min..max) keeps 97% utilisation looking like 97%.
    """
    vals = list(values)[-width:] if width > 0 else []
    span = hi - lo if hi > lo else 1.0
    out = []
    for v in vals:
        f = min(1.0, max(0.0, (v - lo) / span))
        out.append(_BARS[min(len(_BARS) - 1, int(f * len(_BARS)))])
    return "".join(out).rjust(max(0, width))


def fmt_kappa(k: float) -> str:
    """Return κ for display ('—' while the window fills)."""
    if k is None or (isinstance(k, float) and math.isnan(k)):
        return "—"
    return f"{k:,.1f}"
