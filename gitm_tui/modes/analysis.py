"""Analysis mode (`gitm-tui analyze PATH --ui`): what bounds the step first (the critical path's
headline, largest parts and opportunities; ``c`` opens the whole account), then the regime
timeline per stream (zoom, scroll), a sortable kernel table and the selected kernel's details."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, LoadingIndicator, Static

from engine.analyze.breakdown.model import Analysis, KernelRow
from engine.analyze.compute import AnalysisResult
from engine.analyze.output.export import clean_analysis
from engine.regimes import Label
from gitm_tui.loading import load_in_thread, post_from_thread
from gitm_tui.render import SHOWN_CHARS, legend, mode_title, outside_text
from gitm_tui.theme import regime_style
from gitm_tui.timeline import timeline_text
from gitm_tui.widgets.critical_path import CriticalPathPanel
from gitm_tui.widgets.critical_path_screen import CriticalPathScreen
from gitm_tui.widgets.fit import NARROW, FitTable

_LABEL_W = 12


class RegimeTimeline(Widget, can_focus=True):
    """Streams × time bins; keys zoom (+/-), scroll (←/→) and reset (0) the window."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "zoom(0.5)", "Zoom in", key_display="+"),
        Binding("minus", "zoom(2.0)", "Zoom out", key_display="-"),
        Binding("left", "scroll_time(-0.25)", "Earlier", key_display="←"),
        Binding("right", "scroll_time(0.25)", "Later", key_display="→"),
        Binding("0", "reset", "Whole trace"),
    ]
    DEFAULT_CSS = "RegimeTimeline { height: auto; }"
    window: reactive[tuple[int, int]] = reactive((0, 1))

    def __init__(self, res: AnalysisResult, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        rows = res.rows
        self.t_min, self.t_max = int(rows.start_ns.min()), int(rows.end_ns.max())
        self._streams: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []
        for dev, st in sorted(
            {(int(d), int(s)) for d, s in zip(rows.device, rows.stream, strict=True)}
        ):
            sel = np.flatnonzero((rows.device == dev) & (rows.stream == st))
            sel = sel[np.argsort(rows.start_ns[sel], kind="stable")]
            label = f"d{dev} s{st}" if len({int(d) for d in rows.device}) > 1 else f"stream {st}"
            self._streams.append(
                (label, rows.start_ns[sel], rows.end_ns[sel], res.decoded.labels[sel])
            )
        self.set_reactive(RegimeTimeline.window, (self.t_min, max(self.t_max, self.t_min + 1)))

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[no-untyped-def]
        return len(self._streams) + 1

    def render(self) -> Text:
        t0, t1 = self.window
        width = max(10, self.size.width - _LABEL_W)
        out = Text(no_wrap=True)
        span_ms = (t1 - t0) / 1e6
        out.append(
            f"{'':<{_LABEL_W}}{(t0 - self.t_min) / 1e6:,.3f} ms"
            f"  ·  window {span_ms:,.3f} ms  ·  "
            f"{100 * (t1 - t0) / max(1, self.t_max - self.t_min):.1f}% of the trace\n",
            style="dim",
        )
        for i, (label, s, e, lab) in enumerate(self._streams):
            out.append(label[: _LABEL_W - 1].ljust(_LABEL_W), style="bold")
            out.append_text(timeline_text(s, e, lab, t0, t1, width))
            if i < len(self._streams) - 1:
                out.append("\n")
        return out

    def action_zoom(self, factor: float) -> None:
        t0, t1 = self.window
        mid, half = (t0 + t1) / 2, (t1 - t0) * factor / 2
        half = min(max(half, 500.0), (self.t_max - self.t_min) / 2 + 1)  # ≥ 1 µs wide
        self._set(int(mid - half), int(mid + half))

    def action_scroll_time(self, frac: float) -> None:
        t0, t1 = self.window
        step = int((t1 - t0) * frac)
        self._set(t0 + step, t1 + step)

    def action_reset(self) -> None:
        self._set(self.t_min, self.t_max)

    def _set(self, t0: int, t1: int) -> None:
        span = t1 - t0
        if t0 < self.t_min:
            t0, t1 = self.t_min, self.t_min + span
        if t1 > self.t_max:
            t0, t1 = max(self.t_min, self.t_max - span), self.t_max
        self.window = (t0, max(t1, t0 + 1))


def kernel_details(k: KernelRow) -> Table:
    """Return the details panel of one kernel row (its name cleaned and cut to SHOWN_CHARS:
    folded whole, an 8 MB name is a hundred thousand lines)."""
    t = Table(box=None, show_header=False, pad_edge=False, expand=True)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    t.add_row("kernel", outside_text(k.name))
    t.add_row("class", k.klass)
    t.add_row("streams", ", ".join(map(str, k.streams)))
    t.add_row("calls", f"{k.calls:,}")
    t.add_row("total", f"{k.total_ns / 1e6:,.3f} ms ({k.share_of_gpu_time:.1%} of GPU time)")
    t.add_row("mean", f"{k.mean_ns / 1e3:,.2f} µs")
    r = Label[k.regime]
    t.add_row(
        "label", Text(f"{k.regime} in {k.regime_share:.0%} of its time", style=regime_style(r))
    )
    conf = "—" if k.confidence is None else f"{k.confidence:.2f}"
    t.add_row("evidence", f"{k.tier} (mean confidence {conf})")
    if k.flops is not None:
        t.add_row("FLOPs", outside_text(f"{k.flops:.4g}" + (f" ({k.dtype})" if k.dtype else "")))
    if k.roofline_bound_ns is None:
        t.add_row(
            "roofline", "unknown (no measured or shape-derived FLOPs/bytes, or hardware unknown)"
        )
    else:
        t.add_row(
            "roofline",
            f"bound {k.roofline_bound_ns / 1e6:,.3f} ms, achieved {k.achieved_fraction or 0:.1%}",
        )
    return t


class AnalysisScreen(Screen[None]):
    """One analysed trace: what bounds the step, timeline, kernel table, details."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "critical_path", "Critical path"),
        Binding("w", "advice", "What would help"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("tab", "app.focus_next", "Next pane", show=False),
        Binding("q", "app.quit", "Quit"),
    ]
    SORTS = (("total", "total ms"), ("calls", "calls"), ("mean", "mean µs"), ("name", "kernel"))

    class LoadStage(Message):
        """The loader's thread reached a new stage (its one-line description)."""

        def __init__(self, stage: str) -> None:
            super().__init__()
            self.stage = stage

    class LoadDone(Message):
        """The loader's thread finished: a result, or the one line of its error."""

        def __init__(self, res: AnalysisResult | None, error: str | None) -> None:
            super().__init__()
            self.res, self.error = res, error

    def __init__(
        self,
        res: AnalysisResult | None = None,
        load: Callable[[Callable[[str], None]], AnalysisResult] | None = None,
        source: str = "",
    ) -> None:
        """Show ``res``; or open at once, run ``load(progress)`` in a worker thread (reading,
        decoding and replaying a big trace takes seconds) and show its result when it comes.
        A failure ends the app: ``self.error`` holds its one line for the caller to print.
        Everything shown comes from ``self.shown``, the analysis with every string cleaned
        (engine.text.clean): no escape sequence from the trace reaches the terminal."""
        super().__init__(id="analysis")
        self.res = res
        self._load = load
        self._source = source
        self.shown: Analysis | None = None
        self._kernels: dict[str, KernelRow] = {}
        if res is not None:
            self._show_result(res)
        self._sort = 0
        self.selected: KernelRow | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        if self.res is None:
            yield Static(mode_title("analyze", self._source), id="analysis-header")
            with Vertical(id="analysis-loading"):
                yield LoadingIndicator()
                yield Static("reading the trace…", id="analysis-stage")
            yield Footer()
            return
        a = self.shown
        assert a is not None
        head = mode_title("analyze", a.source)
        head.append(
            f"{a.hardware.name}  ·  {a.segments:,} segments  ·  pressures "
            f"{'measured' if a.pressures.startswith('measured') else 'estimated'}"
        )
        yield Static(head, id="analysis-header")
        # first under the header: what bounds the step, before the regimes that explain it
        yield CriticalPathPanel(id="analysis-critical")
        with Vertical(id="analysis-top") as top:
            top.border_title = "regimes over time (+/- zoom, ←/→ scroll, 0 all)"
            yield Static(legend(), id="legend")
            yield RegimeTimeline(self.res, id="timeline")
        with Horizontal(id="analysis-bottom"):
            yield FitTable(
                "name", 16, 80, id="analysis-kernels", cursor_type="row", zebra_stripes=True
            )
            yield Static(id="analysis-details")
        yield Footer()

    def on_mount(self) -> None:
        if self.res is None and self._load is not None:
            load = self._load
            # the numeric work in its thread; the UI only receives messages (stages, result)
            load_in_thread(
                self,
                lambda: load(lambda stage: post_from_thread(self, self.LoadStage(stage))),
                self.LoadDone,
                name="gitm-analyze-load",
            )
            return
        self._populate()

    def on_analysis_screen_load_stage(self, message: LoadStage) -> None:
        stage = self.query("#analysis-stage")
        if stage:
            stage.first(Static).update(outside_text(message.stage))  # it names the file

    def on_analysis_screen_load_done(self, message: LoadDone) -> None:
        if message.res is None:
            self.error = message.error
            self.app.exit(return_code=1)
            return
        self.res = message.res
        self._show_result(message.res)
        self.call_later(self._rebuild)

    def _show_result(self, res: AnalysisResult) -> None:
        self.shown = clean_analysis(res.analysis, SHOWN_CHARS)
        self._kernels = {str(i): k for i, k in enumerate(self.shown.top_kernels)}

    async def _rebuild(self) -> None:
        await self.recompose()  # compose() now builds the analysis screen
        self._populate()

    def _populate(self) -> None:
        assert self.shown is not None
        self.query_one(CriticalPathPanel).show(self.shown.critical_path)  # cleaned
        table = self.query_one("#analysis-kernels", DataTable)
        table.add_column("kernel", key="name", width=48)
        table.add_column("label", key="regime", width=13)
        table.add_column("evidence", key="tier", width=9)
        table.add_column("conf", key="conf", width=5)
        table.add_column("calls", key="calls")
        table.add_column("total ms", key="total")
        table.add_column("mean µs", key="mean")
        for key, k in self._kernels.items():
            r = Label[k.regime]
            table.add_row(
                Text(k.name, overflow="ellipsis", no_wrap=True),  # cleaned in self.shown
                Text(f"{k.regime} {k.regime_share:.0%}", style=regime_style(r)),
                k.tier,
                "—" if k.confidence is None else f"{k.confidence:.2f}",
                k.calls,
                round(k.total_ns / 1e6, 3),
                round(k.mean_ns / 1e3, 2),
                key=key,
            )
        if isinstance(table, FitTable):
            table.fit()
        if self._kernels:
            self._show(next(iter(self._kernels)))
        self.query_one(RegimeTimeline).focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._show(event.row_key.value)

    def _show(self, key: str) -> None:
        self.selected = self._kernels[key]
        self.query_one("#analysis-details", Static).update(kernel_details(self.selected))

    def on_resize(self) -> None:
        """Under NARROW columns the details go under the table: beside it they left the
        table ~70 cells for ~110 cells of figures."""
        self.set_class(self.size.width < NARROW, "-narrow")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # nothing to sort or open until the analysis is in
        opens = ("cycle_sort", "critical_path", "advice")
        return self.shown is not None if action in opens else True

    def action_critical_path(self) -> None:
        """The whole account of the critical path, over this screen."""
        if self.shown is not None:
            self.app.push_screen(CriticalPathScreen(self.shown.critical_path))

    def action_advice(self) -> None:
        """Every lever replayed on the trace (what `analyze` prints), over this screen."""
        if self.shown is not None:
            from gitm_tui.widgets.advice_screen import AdviceScreen

            self.app.push_screen(AdviceScreen(self.shown))

    def action_cycle_sort(self) -> None:
        self._sort = (self._sort + 1) % len(self.SORTS)
        col, _label = self.SORTS[self._sort]
        table = self.query_one("#analysis-kernels", DataTable)
        if col == "name":
            table.sort("name", key=lambda t: str(t))
        else:
            table.sort(col, reverse=True)
        self.notify(f"sorted by {self.SORTS[self._sort][1]}", timeout=1.5)
