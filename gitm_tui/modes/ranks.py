"""Ranks mode (`gitm-tui analyze DIR --ui`): the ranks of one job side by side — per rank its
GPU time, regime mix, step time, time waited at collectives, communication share and overlap,
what bounds its critical path, the straggler and outliers marked — the highlighted rank's
critical path (headline, parts, opportunities; ``c``: the whole account) with its waits, and
the cross-rank findings (the straggler verdict with its basis, stragglers per step, arrival
skews, slow links, notes). Enter opens a rank's own analysis (timeline, kernels); escape comes
back. The ranks are analysed in a thread (on Dask for several files) while a bar counts them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, LoadingIndicator, ProgressBar, Static

from engine.analyze.api import Analyzed
from engine.analyze.breakdown.model import Analysis
from engine.analyze.compute import AnalysisResult
from engine.analyze.ranks.ranks import CrossRank, RankStats
from engine.analyze.run import FileOutcome
from engine.regimes import Label
from gitm_tui.analyze_view import cross_rank_text
from gitm_tui.loading import load_in_thread, post_from_thread
from gitm_tui.modes.analysis import AnalysisScreen
from gitm_tui.render import mode_title, outside_text
from gitm_tui.theme import regime_style
from gitm_tui.widgets.critical_path import CriticalPathPanel, bound_by_cell
from gitm_tui.widgets.critical_path_screen import CriticalPathScreen
from gitm_tui.widgets.fit import NARROW

#: progress(done, total, path) and the Dask dashboard's address when the cluster has one
Progress = Callable[[int, int, str], None]
#: the ranks' loader: what the analysis's front door returns (engine.analyze.api.analyze), told
#: where to send the progress, the dashboard's address and the stage lines (a job's first round)
Loader = Callable[[Progress, Callable[[str], None], Callable[[str], None]], Analyzed]
#: a rank's own analysis, loaded when asked (the client holds summaries, not events)
OpenRank = Callable[[str, Callable[[str], None]], AnalysisResult]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f}"


class RankAnalysisScreen(AnalysisScreen):
    """One rank's analysis, pushed over the ranks: escape goes back; a failure to load it is a
    notification, not the end of the app."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Ranks")]

    def on_analysis_screen_load_done(self, message: AnalysisScreen.LoadDone) -> None:
        # Textual runs this handler, then AnalysisScreen's (the base class's) unless the
        # default is prevented: a result is shown there; a failure stops here
        if message.res is None:
            message.prevent_default()
            self.app.pop_screen()
            self.app.notify(outside_text(message.error or "cannot open the rank").plain,
                            severity="error")  # fmt: skip


class RanksScreen(Screen[None]):
    """The ranks of one job and what crossing them found."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_rank", "Open rank"),
        Binding("c", "critical_path", "Critical path"),
        Binding("tab", "app.focus_next", "Next pane", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    class Progressed(Message):
        def __init__(self, done: int, total: int, path: str) -> None:
            super().__init__()
            self.done, self.total, self.path = done, total, path

    class Dashboard(Message):
        def __init__(self, link: str) -> None:
            super().__init__()
            self.link = link

    class Staged(Message):
        def __init__(self, line: str) -> None:
            super().__init__()
            self.line = line

    class Done(Message):
        def __init__(self, result: Analyzed | None, error: str | None) -> None:
            super().__init__()
            self.result, self.error = result, error

    def __init__(self, load: Loader, source: str, open_rank: OpenRank | None = None) -> None:
        """Run ``load(progress, dashboard, stage)`` in a thread and show what it returns;
        ``open_rank(path, progress)`` analyses one rank again here when the user opens it."""
        super().__init__(id="ranks")
        self._load = load
        self._open_rank = open_rank
        self._source = source
        #: what the loader returned (None: not yet)
        self.result: Analyzed | None = None
        self.error: str | None = None
        self._paths: dict[str, str] = {}
        #: each row's rank analysis (by row key), for the highlighted rank's critical path
        self._analyses: dict[str, Analysis] = {}
        #: the highlighted rank's analysis (None: no row yet)
        self.highlighted: Analysis | None = None
        self._dashboard = ""

    @property
    def outcomes(self) -> list[FileOutcome] | None:
        """Every file's outcome (None: the ranks are not analysed yet)."""
        return None if self.result is None else self.result.outcomes

    @property
    def crossed(self) -> CrossRank | None:
        return None if self.result is None else self.result.crossed

    def compose(self) -> ComposeResult:
        yield Static(self._header(), id="ranks-header")
        if self.outcomes is None:
            with Vertical(id="ranks-loading"):
                yield LoadingIndicator()
                yield ProgressBar(id="ranks-progress", show_eta=False)
                yield Static("listing the rank files…", id="ranks-stage")
            yield Footer()
            return
        with Horizontal(id="ranks-body"):
            with Vertical(id="ranks-main"):
                table: DataTable[object] = DataTable(
                    id="ranks-table", cursor_type="row", zebra_stripes=True
                )
                table.border_title = "ranks (enter: open one)"
                yield table
                yield CriticalPathPanel(id="ranks-critical")
            with VerticalScroll(id="ranks-cross") as side:
                side.border_title = self._cross_title()
                yield Static(self._cross(), id="ranks-findings")
        yield Footer()

    def _header(self) -> Text:
        head = mode_title("ranks", self._source)
        if self.outcomes is not None:
            good = [o for o in self.outcomes if o.analysis is not None]
            head.append(f"{len(good)} analysed")
            cpu = _cpu_only(self.outcomes)
            if cpu:  # read, but with no GPU rows to compare: not a failure
                head.append(f"  ·  {len(cpu)} CPU-only (no GPU rows)", style="bold")
            bad = len(self.outcomes) - len(good) - len(cpu)
            if bad:
                head.append(f"  ·  {bad} failed", style="bold")
        return head

    def _cross_title(self) -> str:
        """The findings' title, with the verdict's rank where one is named: the first thing an
        engineer asks of many ranks (the verdict's sentence, with its basis, comes first
        inside)."""
        if self.crossed is None or self.result is None:
            return "across ranks"
        rank, verdict = self.result.straggler, self.crossed.straggler
        if rank is not None:
            return f"across ranks · straggler: rank {rank}"
        if verdict.startswith("cannot tell"):
            return "across ranks · straggler: cannot tell"
        if verdict.startswith("none"):
            return "across ranks · no straggler"
        return "across ranks"

    def _cross(self) -> Text:
        out = Text()
        for o in _cpu_only(self.outcomes or []):  # first: read, yet not among what follows
            out.append_text(_cpu_line(o))
            out.append("\n")
        if self.crossed is not None:
            # the verdict with its basis is its second line (engine.analyze.ranks.ranks words it)
            out.append_text(cross_rank_text(self.crossed))  # cleaned where it comes from a trace
        elif self.result is not None:
            odd = self.result.not_one_job
            if odd:  # files of different jobs: the one line naming the odd ones
                out.append_text(outside_text(odd, "bold", 2000))
            else:
                why = (
                    "fewer than two ranks were analysed"
                    if len(self.result.summaries) < 2
                    else "the files do not carry distinct rank ids (distributedInfo.rank)"
                )
                out.append(f"not compared: {why}", style="dim")
        for o in self.outcomes or []:
            if o.error:
                out.append("\n")
                out.append_text(outside_text(o.error, "bold"))
        return out

    def on_mount(self) -> None:
        def work() -> Analyzed:  # the analyses run in the loader's thread (or on Dask)
            return self._load(
                lambda d, n, p: post_from_thread(self, self.Progressed(d, n, p)),
                lambda link: post_from_thread(self, self.Dashboard(link)),
                lambda line: post_from_thread(self, self.Staged(line)),
            )

        load_in_thread(self, work, self.Done, name="gitm-ranks-load")

    def on_ranks_screen_dashboard(self, message: Dashboard) -> None:
        self._dashboard = message.link

    def on_ranks_screen_staged(self, message: Staged) -> None:
        """A line of what the job is going through before its ranks are analysed (the first
        round: each rank read for its collectives)."""
        stage = self.query("#ranks-stage")
        if stage:
            line = outside_text(message.line)
            if self._dashboard:
                line.append("\nDask dashboard: ")
                line.append_text(outside_text(self._dashboard))
            stage.first(Static).update(line)

    def on_ranks_screen_progressed(self, message: Progressed) -> None:
        bars = self.query("#ranks-progress")
        if bars:
            bars.first(ProgressBar).update(total=message.total, progress=message.done)
        stage = self.query("#ranks-stage")
        if stage:
            line = Text(f"analysed {message.done}/{message.total}: ")
            line.append_text(outside_text(Path(message.path).name))
            if self._dashboard:
                line.append("\nDask dashboard: ")
                line.append_text(outside_text(self._dashboard))
            stage.first(Static).update(line)

    def on_ranks_screen_done(self, message: Done) -> None:
        if message.result is None:
            self.error = message.error
            self.app.exit(return_code=1)
            return
        self.result = message.result
        self.call_later(self._rebuild)

    async def _rebuild(self) -> None:
        await self.recompose()
        self._populate()

    def _populate(self) -> None:
        table = self.query_one("#ranks-table", DataTable)
        stats = {p.rank: p for p in self.crossed.per_rank} if self.crossed else {}
        straggler = self.result.straggler if self.result is not None else None
        odd: dict[int, list[str]] = {}
        for out in self.crossed.outliers if self.crossed else []:
            odd.setdefault(out.rank, []).append(out.metric)
        for col in ("rank", "GPU ms", "step ms", "waited ms", "last", "comm", "overlap",
                    "bound by", "regimes", ""):  # fmt: skip
            table.add_column(col, key=col)
        good = [(o, o.analysis) for o in self.outcomes or [] if o.analysis is not None]
        for o, a in sorted(good, key=lambda g: (g[1].rank is None, g[1].rank or 0)):
            p = stats.get(a.rank) if a.rank is not None else None
            mark = Text()
            if a.rank is not None and a.rank == straggler:
                mark.append("straggler ", style="bold red")
            if a.rank is not None and a.rank in odd:  # the metrics it is an outlier on
                short = {"waited_ns": "waited", "comm_share": "comm", "step_ns": "step"}
                mark.append("odd " + ",".join(short.get(m, m) for m in odd[a.rank]), style="red")
            key = str(len(self._paths))
            self._paths[key] = o.path
            self._analyses[key] = a
            table.add_row(
                "?" if a.rank is None else str(a.rank),
                _ms(a.gpu_time_ns),
                "—" if p is None or p.step_ns is None else _ms(p.step_ns),
                "—" if p is None else "unknown" if p.waited_ns is None else _ms(p.waited_ns),
                "—" if p is None or p.last_arrivals is None else str(p.last_arrivals),
                "—" if p is None else f"{p.comm_share:.0%}",
                "—" if p is None else f"{p.overlap_share:.0%}",
                bound_by_cell(a.critical_path),
                _mix(a.time_by_regime_ns, 12),
                mark,
                key=key,
            )
        if self._analyses:
            self._highlight(next(iter(self._analyses)))
        table.focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._highlight(event.row_key.value)

    def _highlight(self, key: str) -> None:
        """The highlighted rank's critical path, under the table, with its waits as the
        cross-rank model has them."""
        a = self._analyses.get(key)
        if a is None:
            return
        self.highlighted = a
        who, lead = self._rank_lead(a)
        self.query_one(CriticalPathPanel).show(a.critical_path, who, lead)

    def _rank_lead(self, a: Analysis) -> tuple[str, Text]:
        """('rank 3: ', its line of waits): what it waited at the collectives, how often it
        arrived last, and whether the verdict names it."""
        who = "rank ? (no rank id): " if a.rank is None else f"rank {a.rank}: "
        stats: RankStats | None = None
        if self.crossed is not None and a.rank is not None:
            stats = next((p for p in self.crossed.per_rank if p.rank == a.rank), None)
        line = Text(no_wrap=True, overflow="ellipsis")
        if stats is None:
            line.append("at collectives: not compared across ranks", style="dim")
        elif stats.waited_ns is None and stats.last_arrivals is None:
            line.append(
                "at collectives: waits not given (clocks not trusted, or no collective has all "
                "its ranks here)",
                style="dim",
            )
        else:
            waited = "unknown" if stats.waited_ns is None else f"{_ms(stats.waited_ns)} ms"
            last = "unknown" if stats.last_arrivals is None else f"{stats.last_arrivals}"
            line.append(f"at collectives: waited {waited}, arrived last at {last}")
        if a.rank is not None and self.result is not None and self.result.straggler == a.rank:
            line.append("  ·  the straggler: the others wait for this rank", style="bold red")
        return who, line

    def on_resize(self) -> None:
        """Under NARROW columns the findings go under the table: beside it they left the
        table ~70 cells for ~100 cells of figures."""
        self.set_class(self.size.width < NARROW, "-narrow")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open_rank":
            return self.outcomes is not None and self._open_rank is not None
        if action == "critical_path":
            return self.highlighted is not None
        return True

    def action_critical_path(self) -> None:
        """The highlighted rank's critical path, whole, over this screen."""
        a = self.highlighted
        if a is not None:
            who, lead = self._rank_lead(a)
            # (the ranks' analyses are as the traces wrote them: the account cleans each string)
            self.app.push_screen(CriticalPathScreen(a.critical_path, who, lead))

    def action_open_rank(self) -> None:
        table = self.query_one("#ranks-table", DataTable)
        if table.row_count:
            self._open(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # enter on the focused table selects the row (the table's own key comes first)
        self._open(event.row_key.value)

    def _open(self, key: object) -> None:
        path = self._paths.get(str(key))
        opener = self._open_rank
        if path is None or opener is None:
            return
        self.app.push_screen(
            RankAnalysisScreen(load=lambda progress: opener(path, progress), source=path)
        )


def _cpu_only(outcomes: list[FileOutcome]) -> list[FileOutcome]:
    """The files read as CPU-only traces (a CpuSummary, no analysis): their own outcome, neither
    a rank nor a failure."""
    return [o for o in outcomes if o.cpu is not None and o.analysis is None]


def _cpu_line(o: FileOutcome) -> Text:
    """A CPU-only file's line: what it holds, why it is not among the ranks, what next."""
    name = Path(o.path).name or o.path
    steps = o.cpu.steps if o.cpu is not None else None
    held = (
        f"{steps.count} steps, median {steps.median_ns / 1e6:,.2f} ms"
        if steps is not None and steps.count
        else "CPU operators, no ProfilerStep"
    )
    line = outside_text(name, "bold", 200)
    line.append(f": CPU-only (no GPU rows; {held}), not among the ranks — ")
    line.append_text(outside_text(f"gitm-tui analyze {name}", "italic", 240))
    line.append(" prints its CPU summary; a trace with ProfilerActivity.CUDA puts it here")
    return line


def _mix(by_regime: dict[str, int], width: int = 16) -> Text:
    """The regime mix as a bar of ``width`` cells coloured by regime (largest first)."""
    total = sum(by_regime.values())
    out = Text()
    if total <= 0:
        return Text("—")
    used = 0
    parts = sorted(((v, k) for k, v in by_regime.items() if v > 0), reverse=True)
    for i, (v, k) in enumerate(parts):
        n = width - used if i == len(parts) - 1 else round(width * v / total)
        n = max(0, min(n, width - used))
        if n:
            out.append("█" * n, style=regime_style(Label[k]))
            used += n
    return out
