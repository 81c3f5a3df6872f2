"""The one Textual app of gitm-tui. Its modes are screens in ``gitm_tui/modes/``:

- ``dashboard`` — a live engine run (``gitm-tui``): regimes, κ, telemetry, the optimize loop;
- ``analysis`` — one trace read by ``gitm-tui analyze PATH --ui``;
- ``audit`` — an audit ledger (``gitm-tui audit --ui LEDGER``);
- ``ranks`` — the ranks of one job side by side (``gitm-tui analyze DIR --ui``).

An app shows one mode: each command builds the app of its own. The palette (ctrl+p) also offers
every key of the screen it opened on (``KeysProvider``), and the colours come from the theme
(``gitm_tui/theme.py``). ``make_app``, ``make_analysis_app``, ``make_audit_app`` and
``make_ranks_app`` are the factories the CLI, tests and screenshot script use.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from textual.app import App
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
    """gitm-tui's app: one mode's screen, one stylesheet, one theme."""

    CSS_PATH = "gitm.tcss"
    TITLE = "gitm-tui"
    COMMANDS = App.COMMANDS | {KeysProvider}

    def __init__(self, screen: Screen[None]) -> None:
        """``screen``: the mode's screen (id dashboard / analysis / audit / ranks)."""
        # the mode is the one Textual starts in (no blank default screen first)
        self.DEFAULT_MODE = str(screen.id)  # type: ignore[misc]
        # a terminal that goes away never blocks the app (gitm_tui/terminal.py)
        super().__init__(driver_class=terminal.driver_class())
        self.mode_screen = screen
        self.add_mode(str(screen.id), lambda: screen)

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
        """Return this app's screen if it is of ``kind`` (DashboardScreen, …), else None."""
        return self.mode_screen if isinstance(self.mode_screen, kind) else None

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


def make_app(settings: Settings, engine: EngineLike) -> GitmApp:
    """Return the app on the dashboard of ``engine``'s run (CLI, tests, screenshot script)."""
    return GitmApp(DashboardScreen(settings, engine))


def make_analysis_app(
    res: AnalysisResult | None = None,
    load: Callable[[Callable[[str], None]], AnalysisResult] | None = None,
    source: str = "",
) -> GitmApp:
    """Return the app on the analysis of a trace: for a result in hand, or for a loader that
    the screen runs in a thread while it shows progress."""
    return GitmApp(AnalysisScreen(res, load, source))


def make_audit_app(ledger: AuditLedger, path: str = "") -> GitmApp:
    """Return the app on an audit ledger."""
    return GitmApp(AuditScreen(ledger, path))


def make_ranks_app(load: Loader, source: str, open_rank: OpenRank | None = None) -> GitmApp:
    """Return the app on the ranks of one job, analysed by ``load`` in a thread."""
    return GitmApp(RanksScreen(load, source, open_rank))


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
