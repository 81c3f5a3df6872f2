"""The terminal under the app, and what happens when it goes away.

When the terminal closes under a running dashboard (the ssh session drops, the tmux server is
killed) Textual's output thread dies on its first refused write (EIO), and every later write
waits for it for ever: the app, the engine that runs on the app's loop and the user's run
with them (issue 36: dashboards found hung minutes after their terminal closed, run
unfinished). ``HangupSafeDriver`` is Textual's own Linux/macOS driver with one change: what
the terminal refuses is dropped, and the app is told once (``TerminalGone``), so it stops the
run as SIGHUP does — journal, report, exit 130 — with nobody left to show it to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import IO, Any, cast

from textual.message import Message


class TerminalGone(Message):
    """The terminal refused a write: it has gone (posted once, from the output thread)."""


class _Dropping:
    """A text file that drops what cannot be written and says so once."""

    def __init__(self, file: IO[str], gone: Callable[[], None]) -> None:
        self._file, self._gone, self.refused = file, gone, False

    def _refuse(self) -> None:
        if not self.refused:
            self.refused = True
            with contextlib.suppress(Exception):
                self._gone()

    def write(self, text: str) -> int:
        if not self.refused:
            try:
                return self._file.write(text)
            except (OSError, ValueError):  # EIO / EPIPE: the terminal hung up; closed file
                self._refuse()
        return len(text)

    def flush(self) -> None:
        if not self.refused:
            try:
                self._file.flush()
            except (OSError, ValueError):
                self._refuse()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding …
        return getattr(self._file, name)


def driver_class() -> type[Any] | None:
    """The driver for a real terminal here (None: Textual's own choice — Windows, or a driver
    named by TEXTUAL_DRIVER)."""
    import os
    import sys

    if sys.platform == "win32" or os.environ.get("TEXTUAL_DRIVER"):
        return None
    from textual.drivers.linux_driver import LinuxDriver

    class HangupSafeDriver(LinuxDriver):
        """Textual's driver writing through ``_Dropping``: a gone terminal never blocks."""

        def __init__(self, app: Any, **kwargs: Any) -> None:
            super().__init__(app, **kwargs)
            gone = _Dropping(cast(IO[str], self._file), lambda: app.post_message(TerminalGone()))
            self._file = cast(Any, gone)

    return HangupSafeDriver
