"""The one Textual app of gitm-tui. Its modes are screens in ``gitm_tui/modes/``:

- ``dashboard`` — a live engine run (``gitm-tui``): regimes, κ, telemetry, the optimize loop;
- ``analysis`` — one trace read by ``gitm-tui analyze PATH --ui``;
- ``audit`` — an audit ledger (``gitm-tui audit --ui LEDGER``);
- ``ranks`` — the ranks of one job side by side (``gitm-tui analyze DIR --ui``).

An app holds the modes it was given something to show and opens on the first; the others are
one key (``m``) or one palette command away. The palette (ctrl+p) also offers every key of the
screen it opened on (``KeysProvider``), and the colours come from the theme (``gitm_tui/theme.py``).
``make_app``, ``make_analysis_app``, ``make_audit_app`` and ``make_ranks_app`` are the factories the CLI, tests and
screenshot script use.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, ClassVar, TypeVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.screen import Screen

from gitm_tui import terminal, theme
from gitm_tui.exit_codes import ExitCode
from gitm_tui.modes.analysis import AnalysisScreen
from gitm_tui.modes.audit import AuditScreen
from gitm_tui.modes.dashboard import DashboardScreen, EngineLike, Settings
from gitm_tui.modes.ranks import Loader, OpenRank, RanksScreen

if TYPE_CHECKING:
    from engine.analyze.compute import AnalysisResult
    from engine.runtime import RunConfig
    from engine.study.audit import AuditLedger

__all__ = [
    "EngineLike",
    "GitmApp",
    "Settings",
    "make_analysis_app",
    "make_app",
    "make_audit_app",
    "make_ranks_app",
]

#: the modes in the order ``m`` cycles them, with what the palette says of each
MODES_SHOWN = {
    "dashboard": "the live run: regimes, κ, telemetry, the optimize loop",
    "analysis": "the analysed trace: timeline, kernels, details",
    "audit": "the audit ledger: PCS matrix, equivalence, κ geometry",
    "ranks": "the ranks of one job: stragglers, waits, links",
}

S = TypeVar("S", bound=Screen[None])


class KeysProvider(Provider):
    """The keys of the screen the palette opened on, as commands: the same actions, offered
    only where the key is (a key dimmed in the footer is not offered)."""

    def _commands(self) -> Iterator[tuple[str, str, Callable[[], object]]]:
        seen: set[tuple[int, str]] = set()
        for key, active in self.screen.active_bindings.items():
            b = active.binding
            if not b.description or not active.enabled or (id(active.node), b.action) in seen:
                continue
            seen.add((id(active.node), b.action))
            run = functools.partial(self.app.run_action, b.action, active.node)
            shown = b.key_display or key
            yield f"{b.description} ({shown})", b.tooltip or f"the {shown} key", run

    async def discover(self) -> Hits:
        for name, help_text, run in self._commands():
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, run in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, help=help_text)


class GitmApp(App[int]):
    """gitm-tui's app: one screen per mode, one stylesheet, one theme."""

    CSS_PATH = "gitm.tcss"
    TITLE = "gitm-tui"
    COMMANDS = App.COMMANDS | {KeysProvider}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "next_mode", "Mode", tooltip="switch to the next mode this app holds"),
    ]

    def __init__(self, screens: Iterable[Screen[None]]) -> None:
        """``screens``: the modes' screens (ids dashboard / analysis / audit); the first opens."""
        screens = list(screens)
        # the first mode is the one Textual starts in (no blank default screen first)
        self.DEFAULT_MODE = str(screens[0].id)  # type: ignore[misc]
        # a terminal that goes away never blocks the app (gitm_tui/terminal.py)
        super().__init__(driver_class=terminal.driver_class())
        self.screens: dict[str, Screen[None]] = {}
        for screen in screens:
            assert screen.id in MODES_SHOWN, screen.id
            self.screens[screen.id] = screen
            self.add_mode(screen.id, functools.partial(lambda s: s, screen))

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(theme.DEFAULTS)

    def on_mount(self) -> None:
        theme.use(self.theme_variables)
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        # Python's full garbage collections walk every object alive — millions once numpy,
        # numba and Textual are loaded — and each stopped the loop for up to 77 ms under a
        # 1 M rows/s load (benchmarks/bench_dashboard.py). What exists once the app is up lives
        # as long as the app: moved out of the collector's reach, a full collection walks only
        # what came after.
        gc.freeze()

    def on_unmount(self) -> None:
        gc.unfreeze()  # the app is gone: what it froze may be collected again

    def on_terminal_gone(self, _msg: terminal.TerminalGone) -> None:
        """Nobody can see the app any more: a live run stops as on SIGHUP (journal, report,
        exit 130); any other mode quits."""
        dash = self.mode(DashboardScreen)
        if dash is not None:
            dash.interrupt_once()
        else:
            self.exit(int(ExitCode.INTERRUPTED))

    def _theme_changed(self, _new: object) -> None:
        """Widgets that draw Rich text read the colours through theme.tone: give it the new ones."""
        theme.use(self.theme_variables)
        self.screen.refresh(recompose=False, layout=False, repaint=True)

    def mode(self, kind: type[S]) -> S | None:
        """Return this app's screen of ``kind`` (DashboardScreen, …), or None if it has none."""
        return next((s for s in self.screens.values() if isinstance(s, kind)), None)

    @property
    def dashboard(self) -> DashboardScreen:
        screen = self.mode(DashboardScreen)
        assert screen is not None, "this app holds no dashboard"
        return screen

    @property
    def analysis(self) -> AnalysisScreen:
        screen = self.mode(AnalysisScreen)
        assert screen is not None, "this app holds no analysis"
        return screen

    @property
    def audit(self) -> AuditScreen:
        screen = self.mode(AuditScreen)
        assert screen is not None, "this app holds no audit"
        return screen

    @property
    def ranks(self) -> RanksScreen:
        screen = self.mode(RanksScreen)
        assert screen is not None, "this app holds no ranks"
        return screen

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next_mode":
            return len(self.screens) > 1  # hidden with one mode: nowhere to go
        return True

    def action_next_mode(self) -> None:
        names = list(self.screens)
        current = self.current_mode if self.current_mode in names else names[0]
        self.switch_mode(names[(names.index(current) + 1) % len(names)])

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for name in self.screens:
            if name != self.current_mode:
                yield SystemCommand(
                    f"{name.capitalize()} mode",
                    MODES_SHOWN[name],
                    functools.partial(self.switch_mode, name),
                )


def make_app(settings: Settings, engine: EngineLike) -> GitmApp:
    """Return the app on the dashboard of ``engine``'s run (CLI, tests, screenshot script)."""
    return GitmApp([DashboardScreen(settings, engine)])


def make_analysis_app(
    res: AnalysisResult | None = None,
    load: Callable[[Callable[[str], None]], AnalysisResult] | None = None,
    source: str = "",
) -> GitmApp:
    """Return the app on the analysis of a trace: for a result in hand, or for a loader that
    the screen runs in a thread while it shows progress."""
    return GitmApp([AnalysisScreen(res, load, source)])


def make_audit_app(ledger: AuditLedger, path: str = "") -> GitmApp:
    """Return the app on an audit ledger."""
    return GitmApp([AuditScreen(ledger, path)])


def make_ranks_app(load: Loader, source: str, open_rank: OpenRank | None = None) -> GitmApp:
    """Return the app on the ranks of one job, analysed by ``load`` in a thread."""
    return GitmApp([RanksScreen(load, source, open_rank)])


def dashboard_app(config: RunConfig) -> GitmApp:
    """Return the app on a new engine run of ``config`` (`gitm-tui`; the benchmark's first run)."""
    from engine.eesm.pipeline import EesmModel
    from engine.runtime import Engine

    engine = Engine(config)
    engine.compile_early()  # the live kernels' compile starts before Textual's start-up
    return make_app(Settings(lag=EesmModel.build().params.fixed_lag), engine)


def run_dashboard(config: RunConfig) -> ExitCode:
    """Open the dashboard on a new engine run; return the exit code."""
    app = dashboard_app(config)
    rc = app.run()
    write_error = app.dashboard.write_error
    if write_error is not None:  # the CLI turns it into one line and exit code 3
        raise write_error
    return ExitCode(rc) if rc is not None else ExitCode.OK
