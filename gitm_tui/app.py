"""The Textual dashboard. ``make_app`` is the one factory the CLI, tests and screenshot script use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Footer, RichLog, Static

from engine.runtime import Engine, EventBus, RunConfig
from engine.runtime.events import (
    DecodedBatch,
    Event,
    KappaUpdate,
    KernelsReady,
    LogEvent,
    PhaseChanged,
    Progress,
    RunFinished,
    RunStarted,
    TelemetryEvent,
)
from gitm_tui.exit_codes import ExitCode
from gitm_tui.render import legend
from gitm_tui.screens import HelpScreen
from gitm_tui.widgets.kappa_panel import KappaPanel
from gitm_tui.widgets.kernel_table import KernelTable
from gitm_tui.widgets.regime_strip import RegimeStrip
from gitm_tui.widgets.run_header import RunHeader
from gitm_tui.widgets.telemetry_panel import TelemetryPanel


class EngineLike(Protocol):
    """What the app needs of an engine (the real Engine, or a scripted one in tests)."""

    bus: EventBus
    config: RunConfig

    async def run(self) -> Any: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def stop(self) -> None: ...


@dataclass(frozen=True)
class Settings:
    """Dashboard behaviour that is not part of the engine's run."""

    #: leave the app when the run finishes (screenshot script); default keeps it open to read
    quit_when_done: bool = False
    #: fixed-lag L, shown in the help screen
    lag: int = 32


class GitmApp(App[int]):
    """Live regimes per stream, κ gate, telemetry and log for one engine run."""

    CSS_PATH = "gitm.tcss"
    TITLE = "gitm-tui"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "toggle_pause", "Pause/Resume"),
        Binding("q", "quit_run", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
    ]

    class EngineEvent(Message):
        """One engine event, carried from the events worker to the UI."""

        def __init__(self, event: Event) -> None:
            super().__init__()
            self.event = event

    def __init__(self, settings: Settings, engine: EngineLike) -> None:
        super().__init__()
        self.settings = settings
        self.engine = engine
        self.subscription = engine.bus.subscribe()  # before the run starts: miss nothing
        self.phase = "starting"
        self.finished: RunFinished | None = None

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
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
            with Vertical(id="side"):
                yield KappaPanel(id="kappa")
                yield TelemetryPanel(id="telemetry")
        yield RichLog(id="log", wrap=True, markup=False, max_lines=500)
        yield Footer()

    def on_mount(self) -> None:
        self.consume_events()
        self.drive_engine()

    # ---------------------------------------------------------------- workers
    @work(group="engine", exit_on_error=False, name="engine run")
    async def drive_engine(self) -> None:
        """Run the engine on this loop; its numeric work already runs in threads."""
        await self.engine.run()

    @work(group="events", exit_on_error=False, name="engine events")
    async def consume_events(self) -> None:
        """Turn engine events into messages for the UI, in order."""
        async for ev in self.subscription:
            self.post_message(self.EngineEvent(ev))

    # ---------------------------------------------------------------- events → widgets
    def on_gitm_app_engine_event(self, message: EngineEvent) -> None:
        ev = message.event
        header = self.query_one(RunHeader)
        if isinstance(ev, DecodedBatch):
            strips = self.query(f"#strip-{ev.stream}")
            if not strips:
                self._mount_strip(ev.stream)
                strips = self.query(f"#strip-{ev.stream}")
            strips.first(RegimeStrip).add(ev.labels, ev.degenerate, ev.names)
            self.query_one(KernelTable).add(
                ev.stream, ev.names, ev.start_ns, ev.end_ns, ev.labels, ev.degenerate
            )
        elif isinstance(ev, KappaUpdate):
            self.query_one(KappaPanel).update_kappa(ev)
        elif isinstance(ev, TelemetryEvent):
            panel = self.query_one(TelemetryPanel)
            for sample in ev.samples():
                panel.add(sample)
        elif isinstance(ev, Progress):
            header.elapsed, header.budget = ev.elapsed_s, ev.budget_s
        elif isinstance(ev, PhaseChanged):
            self.phase = header.phase = ev.phase
            self.refresh_bindings()
        elif isinstance(ev, KernelsReady):
            header.kernels = (
                f"{ev.backend} ✓ {ev.seconds:.1f}s"
                if ev.backend == "numba"
                else "numpy (numba unavailable)"
            )
            self.query_one("#warming").add_class("-hidden")
        elif isinstance(ev, LogEvent):
            style = {"error": "bold red", "warning": "yellow"}.get(ev.level, "")
            self._log(f"{ev.level}: {ev.message}", style)
        elif isinstance(ev, RunStarted):
            self._on_started(ev, header)
        elif isinstance(ev, RunFinished):
            self._on_finished(ev)

    def _on_started(self, ev: RunStarted, header: RunHeader) -> None:
        header.workload, header.device, header.simulated = ev.workload, ev.device, ev.simulated
        header.budget = ev.budget_s
        for s in ev.streams:
            self._mount_strip(s)
        self._log(f"run {ev.run_id}: {ev.workload_title}")
        if ev.simulated:
            self._log(f"device: {ev.device} — a calibrated simulation, no GPU is used", "yellow")

    def _on_finished(self, ev: RunFinished) -> None:
        self.finished = ev
        shares = ", ".join(f"{k} {v:.0%}" for k, v in ev.regime_shares.items())
        self._log(f"{ev.status}: {ev.segments:,} segments decoded ({shares})", "bold")
        v = ev.validation
        if v:
            self._log(
                f"vs {v['against']}: macro-F1 {v['macro_f1']:.3f}, accuracy {v['accuracy']:.3f}"
            )
        if self.settings.quit_when_done:
            self.exit(int(ExitCode.OK))

    def _mount_strip(self, stream: int) -> None:
        if not self.query(f"#strip-{stream}"):
            self.query_one("#strips").mount(RegimeStrip(stream))

    def _log(self, text: str, style: str = "") -> None:
        self.query_one(RichLog).write(Text(text, style=style))  # Text: no markup from outside

    # ---------------------------------------------------------------- actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_pause" and self.phase in ("done", "starting"):
            return None  # shown dimmed: nothing to pause
        return True

    def action_toggle_pause(self) -> None:
        if self.phase == "paused":
            self.engine.resume()
        else:
            self.engine.pause()

    def action_quit_run(self) -> None:
        self.engine.stop()
        self.exit(int(ExitCode.OK))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.settings.lag))


def make_app(settings: Settings, engine: EngineLike) -> GitmApp:
    """Return the dashboard for ``engine`` (the CLI, tests and screenshot script all call this)."""
    return GitmApp(settings, engine)


def run_dashboard(config: RunConfig) -> ExitCode:
    """Open the dashboard on a new engine run; return the exit code."""
    from engine.eesm.pipeline import EesmModel

    app = make_app(Settings(lag=EesmModel.build().params.fixed_lag), Engine(config))
    rc = app.run()
    return ExitCode(rc) if rc is not None else ExitCode.OK
