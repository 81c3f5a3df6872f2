"""Dashboard mode: live regimes per stream, κ gate, telemetry, the optimize loop and its log for
one engine run (``gitm-tui``). The screen drives the engine and shows its events."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import signal
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, RichLog, Static, TabbedContent, TabPane

from engine.runtime import EventBus, RunConfig
from engine.runtime.config import PHASES, phase_deadline
from engine.runtime.events import (
    DecodedBatch,
    Event,
    GateDecided,
    HypothesesReport,
    InterventionUpdate,
    InvariantsReport,
    KappaUpdate,
    KernelsReady,
    LogEvent,
    OptimizeStatus,
    PhaseChanged,
    Progress,
    ReportWritten,
    RunFinished,
    RunStarted,
    TelemetryEvent,
)
from engine.runtime.narrate import MEASURED_ONLY, event_lines, prediction
from engine.store.journal import decision_refused
from engine.text import clean
from gitm_tui.exit_codes import ExitCode, write_refused
from gitm_tui.render import SHOWN_CHARS, legend, outside_text
from gitm_tui.screens import ConfirmScreen, HelpScreen, InterventionScreen
from gitm_tui.theme import tone
from gitm_tui.widgets.causes import CauseTable
from gitm_tui.widgets.interventions import InterventionTable
from gitm_tui.widgets.kappa_panel import KappaPanel
from gitm_tui.widgets.kernel_table import KernelTable
from gitm_tui.widgets.optimize_bar import OptimizeBar
from gitm_tui.widgets.regime_strip import RegimeStrip
from gitm_tui.widgets.run_header import RunHeader
from gitm_tui.widgets.telemetry_panel import TelemetryPanel
from gitm_tui.widgets.violations import ViolationTable

PHASE_NAMES = {name for name, _ in PHASES}


class EngineLike(Protocol):
    """What the app needs of an engine (the real Engine, or a scripted one in tests)."""

    bus: EventBus
    config: RunConfig

    async def run(self) -> Any: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def stop(self) -> None: ...
    def decide(self, action: str, iid: str, by: str = "operator") -> None: ...
    def finish_apply(self, by: str = "operator") -> None: ...
    def keep_deciding_on(self, by: str = "operator") -> bool: ...


@dataclass(frozen=True)
class Settings:
    """Dashboard behaviour that is not part of the engine's run."""

    #: leave the app when the run finishes (screenshot script); default keeps it open to read
    quit_when_done: bool = False
    #: fixed-lag L, shown in the help screen
    lag: int = 32


class DashboardScreen(Screen[None]):
    """Live regimes per stream, κ gate, telemetry and log for one engine run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "toggle_pause", "Pause"),  # (and resume: the header says paused)
        Binding("a", "decide('approve')", "Approve"),
        Binding("x", "decide('reject')", "Reject"),
        Binding("b", "decide('rollback')", "Roll back"),
        Binding("d", "details", "Details"),
        Binding("f", "finish", "Finish"),  # the apply phase: on to the report
        Binding("k", "keep_deciding", "Keep deciding"),
        Binding("q", "quit_run", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        # Ctrl-C stops the run as headless does (stopped, report, exit 130), not Textual's
        # "press ctrl+q" notice
        Binding("ctrl+c", "interrupt", "Stop", show=False, priority=True),
    ]

    #: the run's phase (starting, warmup, profile … report, paused, done): the keys on offer
    #: follow it (check_action), so a change refreshes them
    phase: reactive[str] = reactive("starting", init=False)

    class EngineEvents(Message):
        """The engine events pending when the screen was last free, in order (see
        consume_events)."""

        def __init__(self, events: tuple[Event, ...]) -> None:
            super().__init__()
            self.events = events

    def __init__(self, settings: Settings, engine: EngineLike) -> None:
        super().__init__(id="dashboard")
        self.settings = settings
        self.engine = engine
        self.subscription = engine.bus.subscribe()  # before the run starts: miss nothing
        self._taken = asyncio.Event()  # the screen has shown what it was handed
        self._strips: dict[int, RegimeStrip] = {}
        self.run_id = ""
        self.finished: RunFinished | None = None
        self._stopping = False
        #: the run failed because the file system refused a write (disk full, read-only):
        #: the user's environment, not a bug — run_dashboard re-raises it for its one line
        self.write_error: OSError | None = None
        #: the last error the engine logged (the end line repeats it for a failed run)
        self._last_error = ""
        self._aa_spread = math.nan  # the A/A's pair-to-pair spread (OptimizeStatus)

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield OptimizeBar(id="optimize")
        yield Static(id="ended")  # how the run ended, where the report is (shown at the end)
        with Horizontal(id="body"):
            with Vertical(id="regimes") as regimes:
                regimes.border_title = "regimes per stream"
                yield Static(legend(), id="legend")
                yield Static(
                    "⧗ warming up numba kernels — decoding with the numpy reference meanwhile",
                    id="warming",
                )
                yield Vertical(id="strips")
                yield KernelTable(id="kernels")
                yield Static(id="measured")  # a run with no kernel trace: what it measures
            with Vertical(id="side"):
                yield KappaPanel(id="kappa")
                yield TelemetryPanel(id="telemetry")
        with TabbedContent(id="loop", initial="tab-interventions"):
            with TabPane("Interventions", id="tab-interventions"):
                yield InterventionTable(id="interventions")
            with TabPane("Violations", id="tab-violations"):
                yield ViolationTable(id="violations")
            with TabPane("Causes", id="tab-causes"):
                yield CauseTable(id="causes")
            with TabPane("Log", id="tab-log"):
                yield RichLog(id="log", wrap=True, markup=False, max_lines=500)
        yield Footer()

    def on_mount(self) -> None:
        self.consume_events()
        self.drive_engine()
        self.set_interval(0.5, self._run_clock)  # the clock runs between the engine's events
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):  # as headless: stop, report, exit 130
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.interrupt_once)

    def on_unmount(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(sig)

    def _run_clock(self) -> None:
        """Move the header's clock from the engine's own (it stood still while a run waited
        for a person: no event moves it then), with the time spent waiting."""
        elapsed = getattr(self.engine, "elapsed", None)
        if self.finished is not None or not self.run_id or elapsed is None:
            return
        header = self.query_one(RunHeader)
        # never backwards: time waited while keeping deciding (or paused) is given back to the
        # budget when the wait ends, after the clock may have shown part of it
        header.elapsed = self.query_one(OptimizeBar).elapsed = max(header.elapsed, elapsed())
        header.waiting = getattr(self.engine, "waiting_s", 0.0)
        header.keep_deciding = bool(getattr(self.engine, "keep_deciding", False))

    def _show_end(self, ev: RunFinished) -> None:
        """The run's end on the main view: how it ended, what is still undecided, the report;
        a question left open (approve? roll back?) is closed — nothing can act on it now."""
        header = self.query_one(RunHeader)
        header.elapsed = ev.wall_s
        waiting = [
            iv.id
            for iv in self.query_one(InterventionTable).latest.values()
            if iv.state == "PROPOSED"
        ]
        text = Text(f" ended {ev.status}", style="bold")
        if ev.headline:
            text.append(": ").append(outside_text(ev.headline))
        elif ev.status != "completed" and self._last_error:  # why it failed, off the Log tab
            text.append(": ").append(outside_text(self._last_error, "bold " + tone("gitm-bad")))
        kept_open = bool(getattr(self.engine, "keep_deciding", False))
        # f ends the apply phase whatever the budget: then the operator left them, not the clock
        finished = kept_open or bool(getattr(self.engine, "apply_finished", False))
        if waiting:
            text.append(
                f" · {len(waiting)} proposal(s) left undecided ({', '.join(waiting[:5])}"
                + ("…" if len(waiting) > 5 else "")
                + (
                    "): the apply phase was finished before they were decided"
                    if finished
                    else "): the budget ended before anyone decided"
                ),
                style="bold " + tone("gitm-warn"),
            )
            if not finished:
                text.append(
                    " — to decide after the budget, press k during the run or start it with "
                    "--keep-deciding (docs/optimize.md)",
                    style=tone("gitm-warn"),
                )
        if ev.report:
            text.append(" · report: ").append(outside_text(ev.report))
        text.append(" · q quits", style="dim")
        ended = self.query_one("#ended", Static)
        ended.update(text)
        ended.add_class("-shown")
        if isinstance(self.app.screen, ConfirmScreen):
            self.app.screen.dismiss(None)
            self.notify("the run ended: the question was closed, nothing was sent", timeout=10)

    #: seconds a stopped run has to write its report before the dashboard exits anyway
    STOP_GRACE_S = 20.0

    def interrupt_once(self) -> None:
        """SIGTERM, SIGHUP, a terminal that went away: stop as Ctrl-C does; a repeat changes
        nothing (the run is already stopping and writing its report)."""
        if not self._stopping:
            self.action_interrupt()

    def action_interrupt(self) -> None:
        """Ctrl-C, SIGTERM, SIGHUP: stop the run, let it journal and write its report, then
        exit 130 (the terminal restored as on any exit). Again while stopping: exit now."""
        if self._stopping:
            self.app.exit(int(ExitCode.INTERRUPTED))
            return
        self._stopping = True
        self.engine.stop()
        self._log_line("stopping: the run journals and writes its report, then exits", "bold")
        if self.finished is not None:  # the run had ended already
            self.app.exit(int(ExitCode.INTERRUPTED))
        else:
            self.set_timer(self.STOP_GRACE_S, lambda: self.app.exit(int(ExitCode.INTERRUPTED)))

    # ---------------------------------------------------------------- workers
    @work(group="engine", exit_on_error=False, name="engine run")
    async def drive_engine(self) -> None:
        """Run the engine on this loop; its numeric work already runs in threads."""
        try:
            await self.engine.run()
        except OSError as e:  # the engine journaled it and published run_finished: failed
            if not write_refused(e):
                raise
            self.write_error = e

    @work(group="events", exit_on_error=False, name="engine events")
    async def consume_events(self) -> None:
        """Hand the screen every pending engine event in one message, in order, and take no
        more until it has shown them: while the screen is busy, events wait in the
        subscription, where a stream's decoded batches merge into one (EventBus), not in the
        screen's message queue, where each would wait its turn (publish → screen p99 was
        ~100 ms at 1 M rows/s so)."""
        sub = self.subscription
        while True:
            events = [await sub.get()]
            while (ev := sub.get_nowait()) is not None:
                events.append(ev)
            self._taken.clear()
            self.post_message(self.EngineEvents(tuple(events)))
            if any(isinstance(e, RunFinished) for e in events):
                return
            await self._taken.wait()

    # ---------------------------------------------------------------- events → widgets
    def on_dashboard_screen_engine_events(self, message: EngineEvents) -> None:
        try:
            for ev in message.events:
                self._show(ev)
        finally:
            self._taken.set()

    # one handler per event type: singledispatch picks it by the event's class
    @functools.singledispatchmethod
    def _show(self, ev: Event) -> None:
        """An event kind the dashboard does not show."""

    @_show.register
    def _(self, ev: DecodedBatch) -> None:
        self._mount_strip(ev.stream).add(ev.labels, ev.degenerate, ev.names)
        self._kernels.add(
            ev.stream, ev.names, ev.start_ns, ev.end_ns, ev.labels, ev.degenerate, ev.config
        )

    @functools.cached_property
    def _kernels(self) -> KernelTable:
        return self.query_one(KernelTable)  # looked up once: a query walks the DOM

    @_show.register
    def _(self, ev: KappaUpdate) -> None:
        self.query_one(KappaPanel).update_kappa(ev)

    @_show.register
    def _(self, ev: TelemetryEvent) -> None:
        panel = self.query_one(TelemetryPanel)
        self.add_class("-telemetry")  # a run with no kernel trace shows its telemetry
        for sample in ev.samples():
            panel.add(sample)

    @_show.register
    def _(self, ev: Progress) -> None:
        header = self.query_one(RunHeader)
        header.elapsed, header.budget = ev.elapsed_s, ev.budget_s
        self.query_one(OptimizeBar).elapsed = ev.elapsed_s

    @_show.register
    def _(self, ev: PhaseChanged) -> None:
        self.phase = self.query_one(RunHeader).phase = ev.phase
        if ev.phase != "paused":
            bar = self.query_one(OptimizeBar)
            bar.phase = ev.phase
            if ev.phase in PHASE_NAMES:
                bar.deadline = phase_deadline(bar.budget, ev.phase)

    def watch_phase(self) -> None:
        self.refresh_bindings()

    @_show.register
    def _(self, ev: InterventionUpdate) -> None:
        table = self.query_one(InterventionTable)
        first = not table.row_count
        table.update_iv(ev)
        self._best_trial()
        if first:  # the loop's decisions are made here: put the cursor on them
            table.focus()
        self.refresh_bindings()
        self._show_measured()

    def _best_trial(self) -> None:
        """The bar's "best trial": the best measured gain of a lever that is not kept."""
        bar = self.query_one(OptimizeBar)
        tried = [
            iv
            for iv in self.query_one(InterventionTable).latest.values()
            if iv.measured_gain is not None
            and math.isfinite(iv.measured_gain)
            and iv.state not in ("VERIFIED", "APPLYING", "APPROVED")
        ]
        best = max(tried, key=lambda iv: iv.measured_gain or 0.0, default=None)
        bar.best_trial = (
            math.nan if best is None or best.measured_gain is None else best.measured_gain
        )
        bar.best_trial_id = clean(best.id, 12) if best is not None else ""

    @_show.register
    def _(self, ev: InvariantsReport) -> None:
        self.query_one(ViolationTable).show(ev.results)

    @_show.register
    def _(self, ev: HypothesesReport) -> None:
        self.query_one(CauseTable).show(ev.hypotheses)

    @_show.register
    def _(self, ev: OptimizeStatus) -> None:
        bar = self.query_one(OptimizeBar)
        bar.baseline_ns, bar.current_ns, bar.gain = ev.baseline_ns, ev.current_ns, ev.gain
        bar.target, bar.noise, bar.deadline = ev.target, ev.noise_floor, ev.phase_deadline_s
        bar.unit, bar.scale = ev.unit, ev.scale
        self._aa_spread = ev.aa_spread
        self._show_measured()

    def _show_measured(self) -> None:
        """A run with no kernel trace: its baseline, the A/A spread and each lever's trial —
        what it does measure, in place of the decoding panels."""
        if not self.has_class("-no-trace"):
            return
        bar = self.query_one(OptimizeBar)
        t = Text()
        t.append("No kernel trace: nothing to decode, so the regime, κ and kernel panels are ")
        t.append("hidden. The run times the program itself.\n\n")
        if bar.baseline_ns and math.isfinite(bar.baseline_ns):
            fmt = ".1f" if bar.unit.startswith("µs") else ".4g"
            t.append("baseline ", style="bold").append(
                f"{bar.baseline_ns / bar.scale:{fmt}} {bar.unit}"
            )
            spread = self._aa_spread
            t.append("   A/A ", style="bold").append(
                "noise floor "
                + (f"±{bar.noise:.1%}" if math.isfinite(bar.noise) else "unknown")
                + (
                    f", pair-to-pair spread {spread:.1%}\n"
                    if math.isfinite(spread)
                    else "\n"
                    if math.isfinite(bar.noise)
                    else " (the A/A did not resolve it)\n"
                )
            )
        elif self.finished is not None:  # ended before its A/A gave a baseline
            t.append("baseline: not measured — the run ended ", style="bold").append(
                outside_text(self.finished.status)
            )
            t.append(" before its A/A (the Log tab says why)\n")
        else:
            t.append("baseline: being measured (warm-up, then the program against itself)\n")
        for iv in self.query_one(InterventionTable).latest.values():
            t.append("\n").append(outside_text(f"{iv.id} {iv.lever}", "bold")).append("  ")
            t.append(outside_text(iv.state)).append("  ")
            t.append(
                f"measured {iv.measured_gain:+.1%}"
                if iv.measured_gain is not None
                else "not measured yet"
            )
        self.query_one("#measured", Static).update(t)

    @_show.register
    def _(self, ev: ReportWritten) -> None:
        bar = self.query_one(OptimizeBar)
        bar.gain = ev.gain
        bar.gain_low = ev.gain_low if ev.gain_low is not None else ev.gain
        bar.gain_high = ev.gain_high if ev.gain_high is not None else ev.gain
        bar.verdict = ev.verdict
        for line in event_lines(ev):
            self._log_line(line.full, "bold")

    @_show.register
    def _(self, ev: GateDecided) -> None:
        """The qualification gate's decision on the bar (its line, with the figures that say
        why, reaches the log as the engine's own log event)."""
        self.query_one(OptimizeBar).gate = f"{ev.decision}, forced" if ev.forced else ev.decision

    @_show.register
    def _(self, ev: KernelsReady) -> None:
        self.query_one(RunHeader).kernels = (
            f"{ev.backend} ✓ {ev.seconds:.1f}s"
            if ev.backend == "numba"
            else "numpy (numba unavailable)"
        )
        self.query_one("#warming").add_class("-hidden")

    @_show.register
    def _(self, ev: LogEvent) -> None:
        style = {"error": "bold red", "warning": "yellow"}.get(ev.level, "")
        for line in event_lines(ev):
            self._log_line(line.full, style)
        if ev.level == "error":  # said again on the end line of a run that failed
            self._last_error = ev.message

    @_show.register
    def _(self, ev: RunStarted) -> None:
        header = self.query_one(RunHeader)
        header.workload, header.device, header.simulated = ev.workload, ev.device, ev.simulated
        header.budget = ev.budget_s
        bar = self.query_one(OptimizeBar)
        bar.budget, bar.target, bar.policy = ev.budget_s, ev.target, ev.approve
        self.run_id = ev.run_id
        for s in ev.streams:
            self._mount_strip(s)
        if not ev.simulated and not ev.streams:  # a real program: measured, nothing decoded
            header.kernels = "not needed (no kernel trace)"
            self.query_one("#regimes").border_title = "what this run measures"
            # panels a run with no kernel trace cannot fill give way to what it measures;
            # telemetry comes back with its first sample (a real GPU's)
            self.add_class("-no-trace")
            self._show_measured()
        self._log_line(f"run {ev.run_id}: {ev.workload_title}")
        if ev.simulated:
            self._log_line(
                f"device: {ev.device} — a calibrated simulation, no GPU is used", "yellow"
            )

    @_show.register
    def _(self, ev: RunFinished) -> None:
        self.finished = ev
        self._show_end(ev)
        self._show_measured()  # a baseline never measured is no longer "being measured"
        for line in event_lines(ev):
            self._log_line(line.full, "bold" if line.emphasis else "")
        if ev.status == "failed":  # say it where it cannot be missed, and keep the log in view
            self.notify(
                "the run failed: the Log tab says why "
                f"(q quits with exit code {int(self._exit_code())})",
                severity="error",
                timeout=30,
            )
            self.query_one("#loop", TabbedContent).active = "tab-log"
        if self._stopping:  # stopped by Ctrl-C or a signal: the report is written
            self.app.exit(int(ExitCode.INTERRUPTED))
        elif self.settings.quit_when_done:
            self.app.exit(int(self._exit_code()))

    def _exit_code(self) -> ExitCode:
        if self.finished is None or self.finished.status != "failed":
            return ExitCode.OK
        return ExitCode.INPUT if self.write_error is not None else ExitCode.INTERNAL

    def _mount_strip(self, stream: int) -> RegimeStrip:
        """The stream's regime strip, mounted on first use."""
        strip = self._strips.get(stream)
        if strip is None:
            strip = self._strips[stream] = RegimeStrip(stream)
            self.query_one("#strips").mount(strip)
        return strip

    def _log_line(self, text: str, style: str = "") -> None:
        """Write one log entry: its lines cleaned one by one (a program's output or an error
        keeps its line breaks, loses its escape sequences); Text: never read as markup."""
        lines = text.split("\n")
        self.query_one(RichLog).write(
            Text("\n".join(clean(line, SHOWN_CHARS) for line in lines), style=style)
        )

    # ---------------------------------------------------------------- actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_pause" and self.phase in ("done", "starting"):
            return None  # shown dimmed: nothing to pause
        if action == "finish":
            return True if self.phase == "apply" else None
        if action == "keep_deciding":  # a person decides, the run is on, not already kept
            if (
                self.engine.config.approve != "manual"
                or self.finished is not None
                or getattr(self.engine, "keep_deciding", False)
            ):
                return False  # not offered: an unattended policy, an ended run, or already on
            return None if self.phase == "starting" else True
        if action in ("decide", "details"):
            iv = self.query_one(InterventionTable).selected()
            if iv is None or (action == "decide" and self.phase == "done"):
                return None
            if action == "decide":
                refused = decision_refused(str(parameters[0]), iv.id, iv.state)
                return True if refused is None else None
        return True

    def on_data_table_row_highlighted(self, _: object) -> None:
        self.refresh_bindings()

    def action_decide(self, action: str) -> None:
        """Approve / reject / roll back the selected intervention, after a confirmation."""
        iv = self.query_one(InterventionTable).selected()
        if iv is None:
            return
        verb = {"approve": "Apply", "reject": "Reject", "rollback": "Roll back"}[action]
        # built as Text, never as a markup string: lever and title may come from the user's
        # flags or a program's output
        question = Text(f"{verb} {clean(iv.id)} ")
        question.append(outside_text(iv.lever, "bold"))
        question.append(" — ").append(outside_text(iv.title)).append("?\n")
        question.append(
            prediction(iv.predicted_gain, iv.confidence)
            + (f", measured {iv.measured_gain:+.1%}" if iv.measured_gain is not None else "")
        )
        if action == "approve" and iv.safety != "SAFE":
            question.append("\n").append(
                outside_text(iv.safety, "bold " + tone("gitm-bad"))
            ).append(
                ": results may change beyond rounding."
                if iv.safety == "NUMERICS"
                else ": this changes node settings and needs admin rights."
            )

        def done(yes: bool | None) -> None:
            if yes:
                self.engine.decide(action, iv.id, "tui")
                self._log_line(f"{action} {iv.id} {iv.lever} sent")

        self.app.push_screen(ConfirmScreen(question), done)

    def action_finish(self) -> None:
        """Done deciding: the engine moves on to the report phase."""
        self.engine.finish_apply("tui")  # journaled as the dashboard's, as its decisions are
        self._log_line("apply phase finished by the operator")

    def action_keep_deciding(self) -> None:
        """Keep deciding: the budget stops counting while the run waits for a decision, so
        no proposal ends undecided; ``f`` ends the apply phase (the engine journals it)."""
        if self.engine.keep_deciding_on("tui"):
            self.query_one(RunHeader).keep_deciding = True
            self.refresh_bindings()
            self.notify(
                "keep deciding: waiting for you no longer uses the budget — decide each "
                "proposal, then f to finish the apply phase",
                timeout=10,
            )

    def action_details(self) -> None:
        iv = self.query_one(InterventionTable).selected()
        if iv is None:
            return
        # built as Text, never as a markup string: every field here may come from outside
        body = Text()
        body.append(outside_text(f"{iv.id} {iv.lever}", "bold"))
        body.append(" — ").append(outside_text(iv.title))
        body.append("   [").append(outside_text(iv.safety)).append("]   state ")
        body.append(outside_text(iv.state, "bold")).append("\n\n")
        body.append("Claim → evidence", style="bold").append(" (attribution)\n")
        for e in iv.evidence:
            body.append("  • ").append(outside_text(e)).append("\n")
        if not iv.evidence:
            body.append("  (none recorded)\n")
        body.append("\n")
        body.append("Replay", style="bold")
        if math.isfinite(iv.predicted_gain):
            body.append(" (counterfactual on the trace's dependency graph)\n  ")
            body.append(outside_text(iv.replay or "—")).append("\n")
            body.append(
                f"  {prediction(iv.predicted_gain, iv.confidence, ' less time per sample')}\n\n"
            )
        else:  # a run with no device trace: nothing was replayed
            body.append("\n  none: ").append(MEASURED_ONLY).append("\n\n")
        body.append("Measured", style="bold").append("\n  ")
        body.append(
            f"{iv.measured_gain:+.1%} vs the state it was applied to"
            if iv.measured_gain is not None
            else "not applied yet"
        )
        if iv.note:
            body.append("\n  ").append(outside_text(iv.note))
        if iv.approved_by:
            body.append("\n  approved by ").append(outside_text(iv.approved_by))
        body.append("\n\nFrom another terminal: gitm-tui approve|reject|rollback ")
        body.append(outside_text(f"{self.run_id} {iv.id}"))
        body.append("\n\nescape to close", style="dim")
        self.app.push_screen(InterventionScreen(body))

    def action_toggle_pause(self) -> None:
        if self.phase == "paused":
            self.engine.resume()
        else:
            self.engine.pause()

    def action_quit_run(self) -> None:
        self.engine.stop()
        self.app.exit(int(self._exit_code()))

    def action_help(self) -> None:
        keys = [
            (b.key_display or b.key, b.description)
            for b in self.BINDINGS
            if isinstance(b, Binding) and b.description
        ]
        self.app.push_screen(HelpScreen(self.settings.lag, keys))
