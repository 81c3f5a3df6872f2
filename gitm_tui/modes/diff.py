"""Diff mode (`gitm-tui diff BEFORE AFTER --ui`): what changed between two traces — the two traces
and the fingerprint's verdict, then their critical paths compared by headline group ("exposed
communication 38% → 12%"), then the kernel names with the largest change in time (or, by
``v``, the classes, the labels, the copies) in a table with the whole-trace totals beside it.
The traces are read and diffed in a thread (engine.analyze.diff.diff) while the screen says how far
it has got; a failure ends the app with its one line in ``error``."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, LoadingIndicator, Static

from engine.analyze.diff.diff_model import Change, TraceDiff
from gitm_tui.commands.diff import METRIC_NAMES, metric_value, ms, shown_names, signed_ms
from gitm_tui.loading import load_in_thread, post_from_thread
from gitm_tui.render import SHOWN_CHARS, mode_title, outside_text
from gitm_tui.widgets.critical_path import critical_diff_view

#: what ``v`` cycles through: (TraceDiff field, title)
VIEWS = (
    ("kernels", "kernels by |Δ time|"),
    ("classes", "classes"),
    ("labels", "labels (decoded regimes, copies, collectives)"),
    ("copies", "copies and memsets"),
)


def totals_table(d: TraceDiff) -> Table:
    """The whole-trace totals, before / after / Δ (a plain renderable: tests call it)."""
    t = Table(box=None, pad_edge=False, expand=True, show_edge=False)
    t.add_column("total", no_wrap=True)
    t.add_column("before", justify="right", no_wrap=True)
    t.add_column("after", justify="right", no_wrap=True)
    t.add_column("Δ", justify="right", no_wrap=True)
    for m in d.totals:
        t.add_row(
            METRIC_NAMES.get(m.name, m.name),
            metric_value(m, m.before),
            metric_value(m, m.after),
            metric_value(m, m.delta, signed=True),
        )
    return t


def summary_text(d: TraceDiff) -> Text:
    """The two traces, what was compared, the fingerprint and the notes (``d`` cleaned)."""
    out = Text()
    for word, s in (("before", d.before), ("after ", d.after)):
        steps = f"{s.steps} steps" if s.steps else "no ProfilerStep"
        out.append(f"{word} ", style="bold")
        out.append(f"{s.source} · {s.device} · {s.scope} · {s.rows:,} GPU rows · {steps}\n")
    f = d.fingerprint
    if f.available and f.value is not None:
        verdict = "same workload" if f.same else "different workload: " + "; ".join(f.reasons[:3])
        out.append(f"fingerprint: distance {f.value:.3g} (threshold {f.threshold:.3g}) — {verdict}")
    else:
        out.append(f"fingerprint: {f.note or 'unknown'}", style="dim")
    for n in d.notes:
        out.append(f"\nnote: {n}", style="dim")
    return out


class DiffScreen(Screen[None]):
    """Two traces compared."""

    DEFAULT_CSS = """
    #diff-header { dock: top; height: 1; background: $panel; }
    #diff-summary { height: auto; padding: 0 1; }
    #diff-critical {
        height: auto; max-height: 14; border: round $gitm-border; border-title-style: bold;
        padding: 0 1;
    }
    #diff-body { height: 1fr; }
    #diff-table { width: 1fr; border: round $gitm-border; }
    #diff-totals { width: 70; border: round $gitm-border; padding: 0 1; }
    #diff-details { height: auto; max-height: 4; padding: 0 1; }
    #diff-loading { height: 1fr; align: center middle; }
    #diff-loading LoadingIndicator { height: 3; }
    #diff-stage { width: 100%; content-align: center middle; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("v", "cycle_view", "View"),
        Binding("tab", "app.focus_next", "Next pane", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    class LoadStage(Message):
        """The loader's thread reached a new stage (its one-line description)."""

        def __init__(self, stage: str) -> None:
            super().__init__()
            self.stage = stage

    class LoadDone(Message):
        """The loader's thread finished: a diff, or the one line of its error."""

        def __init__(self, diff: TraceDiff | None, error: str | None) -> None:
            super().__init__()
            self.diff, self.error = diff, error

    def __init__(
        self,
        diff: TraceDiff | None = None,
        load: Callable[[Callable[[str], None]], TraceDiff] | None = None,
        source: str = "",
        top: int = 200,
    ) -> None:
        """Show ``diff``; or open at once, run ``load(progress)`` in a thread and show what it
        returns. Everything shown comes from ``self.shown``, the diff with every string cleaned
        (engine.text.clean): no escape sequence from a trace reaches the terminal. ``top``:
        kernel names in the table."""
        super().__init__(id="diff")
        self._load = load
        self._source = source
        self._top = top
        self._view = 0
        self.shown: TraceDiff | None = None
        self.rows: list[Change] = []
        #: the highlighted row
        self.selected: Change | None = None
        #: the loader's error line (the app then exits), and what it raised
        self.error: str | None = None
        self.failure: BaseException | None = None
        if diff is not None:
            self.shown = diff.cleaned(SHOWN_CHARS)

    def compose(self) -> ComposeResult:
        d = self.shown
        head = mode_title(
            "diff", self._source if d is None else f"{d.before.source} → {d.after.source}"
        )
        if d is None:
            yield Static(head, id="diff-header")
            with Vertical(id="diff-loading"):
                yield LoadingIndicator()
                yield Static("reading the traces…", id="diff-stage")
            yield Footer()
            return
        by = ", ".join(f"{n} {k}" for k, n in d.kernels_by_status.items() if n)
        head.append(f"{d.kernels_total:,} kernel names ({by})")
        yield Static(head, id="diff-header")
        yield Static(summary_text(d), id="diff-summary")
        critical = Static(critical_diff_view(d.critical_path), id="diff-critical")
        critical.border_title = "what bounds the step: critical path before → after"
        yield critical
        with Horizontal(id="diff-body"):
            yield DataTable(id="diff-table", cursor_type="row", zebra_stripes=True)
            yield Static(totals_table(d), id="diff-totals")
        yield Static(id="diff-details")
        yield Footer()

    def on_mount(self) -> None:
        if self.shown is None and self._load is not None:
            load = self._load

            def work() -> TraceDiff:
                try:
                    return load(lambda stage: post_from_thread(self, self.LoadStage(stage)))
                except Exception as e:  # its line is the error; its type, the exit code
                    self.failure = e
                    raise

            load_in_thread(self, work, self._done, name="gitm-diff-load")
            return
        self._populate()

    def _done(self, diff: TraceDiff | None, error: str | None) -> LoadDone:
        return self.LoadDone(diff, error)

    def on_diff_screen_load_stage(self, message: LoadStage) -> None:
        stage = self.query("#diff-stage")
        if stage:
            stage.first(Static).update(outside_text(message.stage))

    def on_diff_screen_load_done(self, message: LoadDone) -> None:
        if message.diff is None:
            self.error = message.error
            self.app.exit(return_code=1)
            return
        self.shown = message.diff.cleaned(SHOWN_CHARS)
        self.call_later(self._rebuild)

    async def _rebuild(self) -> None:
        await self.recompose()
        self._populate()

    def _populate(self) -> None:
        d = self.shown
        if d is None:
            return
        field, title = VIEWS[self._view]
        rows: list[Change] = getattr(d, field)
        self.rows = rows[: self._top] if field == "kernels" else rows
        table = self.query_one("#diff-table", DataTable)
        table.clear(columns=True)
        table.border_title = title
        kernels = field == "kernels"
        table.add_column("change", key="status")
        table.add_column("kernel" if kernels else field[:-1], key="key", width=30)
        table.add_column("Δ ms", key="delta")
        table.add_column("Δ ms/step", key="step")
        table.add_column("calls", key="calls")
        table.add_column("ms before", key="before")
        table.add_column("ms after", key="after")
        table.add_column("label" if kernels else "class", key="extra")
        keys = shown_names([c.key for c in self.rows]) if kernels else [c.key for c in self.rows]
        for i, (c, key) in enumerate(zip(self.rows, keys, strict=True)):
            label = c.after.label or c.before.label or ""
            table.add_row(
                c.status,
                # cleaned in self.shown; kernel names shortened (the details line has it whole)
                Text(key, overflow="ellipsis", no_wrap=True),
                *(
                    Text(cell, justify="right")
                    for cell in (
                        signed_ms(c.delta_ns),
                        signed_ms(c.delta_per_step_ns),
                        f"{c.before.count:,}→{c.after.count:,}",
                        ms(c.before.total_ns),
                        ms(c.after.total_ns),
                    )
                ),
                label if kernels else (c.klass or ""),
                key=str(i),
            )
        if self.rows:
            self._details(0)
        table.focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._details(int(event.row_key.value))

    def _details(self, i: int) -> None:
        """The highlighted row whole: its full name (cleaned), class, mean time and label
        before → after, and how much of its label rests on the name prior."""
        c = self.rows[i]
        self.selected = c
        t = Text(c.key, style="bold")  # cleaned in self.shown
        parts = [c.klass or "", f"status {c.status}"]
        for word, f in (("before", c.before), ("after", c.after)):
            if f.count:
                mean = f"{(f.mean_ns or 0) / 1e3:,.2f} µs mean"
                label = f", {f.label}" if f.label else ""
                prior = (
                    f" ({f.prior_share:.0%} of it on the name prior)"
                    if f.prior_share is not None
                    else ""
                )
                parts.append(f"{word}: {f.count:,} calls, {mean}{label}{prior}")
        t.append("\n" + " · ".join(p for p in parts if p), style="")
        self.query_one("#diff-details", Static).update(t)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.shown is not None if action == "cycle_view" else True

    def action_cycle_view(self) -> None:
        self._view = (self._view + 1) % len(VIEWS)
        self._populate()
        self.notify(VIEWS[self._view][1], timeout=1.5)
