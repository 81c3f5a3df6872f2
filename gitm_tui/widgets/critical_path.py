"""What bounds the step, on a screen: the critical path's headline, its largest parts (ms,
share) and the opportunities it names (``Analysis.critical_path``), compact in a panel; whole in
``critical_account`` (the modal behind the panel's key); and the comparison of two paths by
headline group (``TraceDiff.critical_path``).

Rendering lives in plain functions returning Rich renderables (tests call them without an
app); every string from the model goes through ``outside_text`` (cleaned, never markup): kernel
names on the path come from the trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from gitm_tui.render import outside_text

if TYPE_CHECKING:
    from engine.analyze.breakdown.critical_model import CriticalPath, Opportunity
    from engine.analyze.diff.diff_model import CriticalDiff

#: parts in the compact panel (two columns of three rows: the rest in the whole account)
PARTS_COMPACT = 6
#: opportunities in the compact panel, one line each (the whole account has them all)
OPPORTUNITIES_COMPACT = 2
#: a headline group in a table cell a dozen characters wide (engine.analyze.breakdown.critical.GROUPS;
#: a group not named here shows its own name)
GROUP_SHORT = {
    "exposed communication": "exposed comm",
    "host/framework": "host",
    "launch and queueing": "launch/queue",
    "synchronisation": "sync",
    "allocation": "allocation",
    "data loading": "data loading",
    "device gaps": "device gaps",
    "idle nobody waits for": "idle",
    "kernels": "kernels",
    "copies": "copies",
}
#: what the panel says when the analysis has no path
NO_PATH = (
    "critical path: unknown — nothing was replayed (no host rows or timed device rows to "
    "replay; the analysis's notes say which)"
)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


def _pct(x: float) -> str:
    """As the headline words a share: whole per cents, one decimal under 1 %."""
    return f"{x:.0%}" if x >= 0.01 or x == 0 else f"{x:.1%}"


def panel_title(cp: CriticalPath | None, who: str = "") -> str:
    """The panel's border title: what it is, the path's length and window (``who``: 'rank 3: '
    on the ranks screen)."""
    if cp is None:
        return f"{who}what bounds the step: critical path unknown"
    window = outside_text(cp.window, limit=80).plain
    return f"{who}what bounds the step: critical path {_ms(cp.total_ns)} ({window})"


def parts_grid(cp: CriticalPath, n: int = PARTS_COMPACT, columns: int = 2) -> Table:
    """The ``n`` largest parts, label · ms · share, laid out in ``columns`` column groups (the
    label cut with "…" where the width ends; the figures never)."""
    t = Table(box=None, show_header=False, pad_edge=False, expand=True, padding=(0, 1))
    for _ in range(columns):
        t.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        t.add_column(justify="right", no_wrap=True)
        t.add_column(justify="right", no_wrap=True, style="bold")
    parts = cp.parts[:n]
    rows = -(-len(parts) // columns)  # ceil: the largest down the first column
    for r in range(rows):
        cells: list[RenderableType] = []
        for c in range(columns):
            i = c * rows + r
            if i < len(parts):
                p = parts[i]
                cells += [outside_text(p.label, limit=200), _ms(p.ns), f"{p.share:.1%}"]
            else:
                cells += ["", "", ""]
        t.add_row(*cells)
    return t


def opportunity_line(o: Opportunity, full: bool = False, total_ns: int = 0) -> Text:
    """One opportunity: what, its share and time, then (``full``) its evidence, what to try
    and which lever acts on it — or, compact, what to try, on one line cut with "…"."""
    line = Text(no_wrap=not full, overflow="ellipsis" if not full else "fold")
    line.append("▲ ", style="bold yellow")
    line.append(outside_text(o.what.replace("_", " "), "bold yellow", 80))
    size = o.size_text(total_ns) if total_ns else f"{_pct(o.share)} of the path ({_ms(o.ns)})"
    line.append(f" {size}", style="bold")
    if full:
        line.append(": ")
        line.append_text(outside_text(o.evidence))
    line.append(" — try: ")
    line.append_text(outside_text(o.suggestion))
    lever = (
        f" (lever: {', '.join(o.levers)})" if o.levers else " (no lever of the library does this)"
    )
    line.append_text(outside_text(lever, "dim", 400))
    return line


def critical_summary(cp: CriticalPath | None, lead: Text | None = None) -> RenderableType:
    """The compact panel: ``lead`` (a line the caller adds: a rank's waits), the headline, the
    largest parts in two columns and the largest opportunities, one line each."""
    out: list[RenderableType] = [lead] if lead is not None else []
    if cp is None:
        out.append(Text(NO_PATH, style="dim"))
        return Group(*out)
    out.append(outside_text(cp.headline, "bold"))
    if cp.parts:
        out.append(parts_grid(cp))
    for o in cp.opportunities[:OPPORTUNITIES_COMPACT]:
        out.append(opportunity_line(o, total_ns=cp.total_ns))
    more = len(cp.opportunities) - OPPORTUNITIES_COMPACT
    tail = Text(no_wrap=True, overflow="ellipsis", style="dim")
    if more > 0:
        tail.append(f"{more} more opportunit{'ies' if more > 1 else 'y'} · ")
    tail.append_text(outside_text(cp.peers, "dim"))
    out.append(tail)
    return Group(*out)


def critical_account(cp: CriticalPath | None, lead: Text | None = None) -> RenderableType:
    """The whole account (the modal): headline, every part with its ms, share and HTA's
    category, every opportunity with its evidence, the kernels and calls with most time on the
    path, the steps, the peers and the notes."""
    out: list[RenderableType] = [lead] if lead is not None else []
    if cp is None:
        out.append(Text(NO_PATH))
        return Group(*out)
    out += [outside_text(cp.headline, "bold"), Text("")]
    t = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    t.add_column("on the critical path", overflow="fold")
    t.add_column("ms", justify="right", no_wrap=True)
    t.add_column("share", justify="right", no_wrap=True)
    t.add_column("HTA's bound_by", style="dim", no_wrap=True)
    for p in cp.parts:
        t.add_row(outside_text(p.label), f"{p.ns / 1e6:,.2f}", f"{p.share:.1%}",
                  outside_text(p.hta, limit=60))  # fmt: skip
    out.append(t)
    if cp.opportunities:
        out += [Text(""), Text("named first: what the path is bound by", style="bold")]
        out += [opportunity_line(o, full=True, total_ns=cp.total_ns) for o in cp.opportunities]
    if cp.top_rows:
        out += [Text("")]
        rows = Table(box=None, pad_edge=False, show_header=True, header_style="bold", expand=True)
        rows.add_column("kernels and calls on the path", ratio=1, no_wrap=True,
                        overflow="ellipsis")  # fmt: skip
        rows.add_column("part", no_wrap=True)
        rows.add_column("ms", justify="right", no_wrap=True)
        rows.add_column("rows", justify="right", no_wrap=True)
        for r in cp.top_rows:
            rows.add_row(outside_text(r.name), outside_text(r.part, limit=40),
                         f"{r.ns / 1e6:,.2f}", f"{r.rows:,}")  # fmt: skip
        out.append(rows)
    if cp.steps:
        out += [Text("")]
        steps = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        steps.add_column("step", justify="right", no_wrap=True)
        steps.add_column("ms", justify="right", no_wrap=True)
        steps.add_column("bound by", overflow="fold")
        for s in cp.steps[:20]:
            steps.add_row("?" if s.step < 0 else str(s.step), f"{s.ns / 1e6:,.2f}",
                          outside_text(s.headline))  # fmt: skip
        out.append(steps)
    out += [Text(""), outside_text(cp.peers, "dim")]
    out += [outside_text(f"note: {n}", "dim") for n in cp.notes]
    return Group(*out)


def bound_by_cell(cp: CriticalPath | None) -> Text:
    """The group with most time on the path and its share, a dozen cells wide ('exposed comm
    67%'); 'unknown' without a path."""
    if cp is None or cp.total_ns <= 0:
        return Text("unknown", style="dim")
    from engine.analyze.diff.diff import path_groups

    groups = path_groups({p.part: p.ns for p in cp.parts})
    group, ns = max(groups.items(), key=lambda kv: kv[1])
    if ns <= 0:
        return Text("unknown", style="dim")
    return Text(f"{GROUP_SHORT.get(group, group)} {_pct(ns / cp.total_ns)}")


#: groups in the diff screen's panel (the text and --json have every group with time)
GROUPS_SHOWN = 5


def critical_diff_view(c: CriticalDiff) -> RenderableType:
    """The two paths compared (``c`` cleaned): the headline, then per headline group with time
    on either path (the ``GROUPS_SHOWN`` largest) its ms and share before → after and the
    change; 'unknown' on a side with no path, never 0."""
    from engine.analyze.diff.diff import share_cell, share_delta

    out: list[RenderableType] = [outside_text(c.headline, "bold")]
    for word, s in (("before", c.before), ("after", c.after)):
        if not s.known:
            out.append(outside_text(f"{word}: {s.window}", "dim"))
    t = Table(box=None, pad_edge=False, show_header=True, header_style="bold", expand=True)
    t.add_column("on the critical path", ratio=1, no_wrap=True, overflow="ellipsis")
    for head in ("ms before", "share", "ms after", "share", "Δ ms", "Δ share"):
        t.add_column(head, justify="right", no_wrap=True)

    def ms(ns: int | None) -> str:
        return "unknown" if ns is None else f"{ns / 1e6:,.2f}"

    b, a = c.before.total_ns, c.after.total_ns
    t.add_row("length", ms(b), "", ms(a), "",
              "—" if b is None or a is None else f"{(a - b) / 1e6:+,.2f}", "",
              style="dim")  # fmt: skip
    groups = [g for g in c.groups if g.before_ns or g.after_ns]
    for g in groups[:GROUPS_SHOWN]:
        t.add_row(
            outside_text(g.group, limit=80),
            ms(g.before_ns),
            share_cell(g.before_share),
            ms(g.after_ns),
            share_cell(g.after_share),
            "—" if g.delta_ns is None else f"{g.delta_ns / 1e6:+,.2f}",
            share_delta(g.delta_share),
        )
    out.append(t)
    if len(groups) > GROUPS_SHOWN:
        rest = len(groups) - GROUPS_SHOWN
        out.append(Text(f"{rest} smaller group{'s' if rest > 1 else ''}: in the text output "
                        "and --json", style="dim"))  # fmt: skip
    return Group(*out)


class CriticalPathPanel(Static):
    """The compact account of one analysis's critical path; the screen that holds it sets
    ``show`` (attributes down) and opens the whole account on its own key."""

    DEFAULT_CSS = "CriticalPathPanel { height: auto; }"

    def show(self, cp: CriticalPath | None, who: str = "", lead: Text | None = None) -> None:
        """Show ``cp`` (None: the analysis has no path), titled for ``who`` ('rank 3: ')."""
        self.border_title = panel_title(cp, who)
        self.set_class(cp is not None and bool(cp.opportunities), "-opportunity")
        self.update(critical_summary(cp, lead))
