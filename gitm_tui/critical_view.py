"""The critical path in the terminal: its headline, its parts, and the opportunities it shows
(Rich renderables; the figures come from ``Analysis.critical_path``, already cleaned)."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from engine.analyze.breakdown.critical_model import CriticalPath

#: parts shown on the first screen (the rest: report.md, --json)
PARTS_SHOWN = 6


def critical_block(cp: CriticalPath) -> list[RenderableType]:
    """The headline, a table of the largest parts, and one line per opportunity (largest
    first: what the path is bound by comes before any lever)."""
    out: list[RenderableType] = []
    head = Text()
    head.append("critical path ", style="bold")
    head.append(f"({cp.total_ns / 1e6:,.2f} ms, {cp.window}): ", style="dim")
    head.append(cp.headline, style="bold")
    out.append(head)
    t = Table(box=None, pad_edge=False, show_header=True)
    t.add_column("on the critical path")
    t.add_column("ms", justify="right")
    t.add_column("share", justify="right")
    t.add_column("HTA", style="dim")
    for p in cp.parts[:PARTS_SHOWN]:
        t.add_row(Text(p.label), f"{p.ns / 1e6:,.2f}", f"{p.share:.1%}", p.hta)
    out.append(t)
    if cp.host_ops:  # the host part by operator, and what the rest waited for
        ops = "; ".join(f"{r.name} {r.ns / 1e6:,.2f} ms" for r in cp.host_ops[:4])
        line = Text(f"host time on the path by operator: {ops}", style="dim")
        if cp.host_waits:
            waits = "; ".join(f"{r.name} {r.ns / 1e6:,.2f} ms" for r in cp.host_waits[:3])
            line.append(f" — outside any operator, while another thread ran: {waits}")
        out.append(line)
    for o in cp.opportunities:
        line = Text()
        line.append(f"{o.what.replace('_', ' ')} {o.size_text(cp.total_ns)}", style="bold yellow")
        line.append(f": {o.evidence} — try: {o.suggestion}")
        line.append(
            f" (lever: {', '.join(o.levers)})"
            if o.levers
            else " (no lever of the library does this)",
            style="dim",
        )
        out.append(line)
    out += [Text(n, style="dim") for n in cp.notes]  # (its peers line: the levers' table's)
    return out
