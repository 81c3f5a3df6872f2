"""What every subcommand shares: the program name, the one-line stderr writers (every line
cleaned by engine.text.clean), UsageError and an argparse parser that raises it."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from engine.text import clean

PROG = "gitm-tui"


#: the most characters of one stderr line: a path may be 4,096 bytes, with room for the rest
LINE_CHARS = 8192


#: this process is the gitm-tui program (gitm_tui.cli.main called without an argv), not a
#: caller of main: process-wide settings are ours to make
as_program = False

_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"  # see loading_modules


@contextmanager
def loading_modules() -> Iterator[None]:
    """Around a command's heavy imports (numpy, numba, pydantic's models): ~110k objects and no
    garbage cycles, during which the cyclic GC started a collection every 700 allocations and
    several walked every object alive — 20-50 ms of `analyze`'s ~0.33 s of imports. Paused
    meanwhile; in the program, what the imports made is then frozen (it lives as long as the
    process: later collections need not walk it); a caller's GC is left as it was.

    Meanwhile pydantic also looks for no plugins (PYDANTIC_DISABLE_PLUGINS, unless the user set
    it): its first model made it read the entry points of every installed package, ~30 ms of
    the 109k-event analyze, to instrument gitm's own models — nothing gitm asks for. The
    environment is as it was after the block (a program gitm starts later inherits the user's)."""
    was = gc.isenabled()
    gc.disable()
    plugins = os.environ.get(_PLUGINS)
    if plugins is None:
        os.environ[_PLUGINS] = "__all__"
    try:
        yield
    finally:
        if plugins is None:
            os.environ.pop(_PLUGINS, None)
        if as_program:
            gc.freeze()
        if was:
            gc.enable()


def say(message: str) -> None:
    """Write ``gitm-tui: message`` to stderr as one cleaned line (engine.text.clean)."""
    print(f"{PROG}: {clean(message, LINE_CHARS)}", file=sys.stderr)


def first_line(e: Exception) -> str:
    """The first line of an exception's message; for a pydantic validation error, its first
    error as ``where: what`` (its own first line only counts the errors)."""
    from pydantic import ValidationError

    if isinstance(e, ValidationError) and e.errors():
        err = e.errors()[0]
        where = ".".join(str(part) for part in err.get("loc", ())) or "the file"
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        return f"{where}: {err.get('msg', 'invalid')}{more}"
    return next(iter(str(e).splitlines()), repr(e))


def error(message: str) -> None:
    """Write the one error line, ``gitm-tui: error: message`` (cleaned, one line)."""
    say(f"error: {message}")


class UsageError(Exception):
    """A bad command line: the message is the one line the user sees."""


def has_terminal() -> bool:
    """Whether stdin and stdout are a terminal: what a screen needs (without one, Textual's
    app wrote its escape sequences into the redirected file and never exited: issue 51)."""
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def need_terminal(what: str) -> None:
    """UsageError (one line, exit 2) when there is no terminal for the screen ``what``."""
    if not has_terminal():
        raise UsageError(
            f"{what} needs a terminal (stdin and stdout are not one): run it in a terminal, "
            "or without --ui for text"
        )


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse prints usage + exits 2; we want one line
        raise UsageError(f"{message} (see {self.prog} --help)")


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gitm-tui")
    except PackageNotFoundError:  # running from a source tree without install
        return "0+unknown"


def stdout_console() -> Any:
    """A rich Console on stdout: as wide as the terminal, or 140 columns when piped (tables get
    room to stay tables). A reader that goes away (``| head``) raises BrokenPipeError, which
    ``cli.main`` takes as "it read what it wanted" (exit 0) — rich's own answer is exit 1."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return _Console(width=None if sys.stdout.isatty() else 140)
