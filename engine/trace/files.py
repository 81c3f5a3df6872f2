"""Opening an input: regular files only, refused up front otherwise, and never blocking on open.

A named pipe (FIFO) blocks ``open()`` until a writer comes, forever if none does; a device such
as /dev/zero never ends. Neither is a trace file, so both are refused with one line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from engine.trace.errors import TraceImportError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def not_regular(mode: int) -> str | None:
    """The problem line for a file of this ``st_mode`` if it is not a regular file, else None."""
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    return f"not a regular file but {kind}: traces are read from files only"


def check_regular(path: str | Path) -> None:
    """TraceImportError unless ``path`` is a regular file (symbolic links followed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise TraceImportError(path, f"cannot read: {e.strerror or e}") from None
    if (problem := not_regular(mode)) is not None:
        raise TraceImportError(path, problem)


def open_regular(path: str | Path) -> BinaryIO:
    """Open ``path`` for binary reading, or raise TraceImportError: cannot be opened, or not a
    regular file. Opened non-blocking, so a FIFO is refused instead of waited on (the flag
    does nothing to a regular file's reads)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise TraceImportError(path, f"cannot read: {e.strerror or e}") from None
    try:
        problem = not_regular(os.fstat(fd).st_mode)
    except OSError as e:  # pragma: no cover - fstat of an open descriptor
        os.close(fd)
        raise TraceImportError(path, f"cannot read: {e.strerror or e}") from None
    if problem is not None:
        os.close(fd)
        raise TraceImportError(path, problem)
    return os.fdopen(fd, "rb")


def head(path: Path, n: int = 16) -> bytes:
    """The first ``n`` bytes of a regular file, to tell its format (TraceImportError, one line,
    when it cannot be read)."""
    with open_regular(path) as f:
        try:
            return f.read(n)
        except OSError as e:
            raise TraceImportError(path, f"cannot read: {e.strerror or e}") from None
