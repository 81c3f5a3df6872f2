"""Errors every layer may raise and the CLI turns into one line and an exit code."""

from __future__ import annotations

import errno

#: errnos that say the disk or file system refused a write (full, over quota, read-only, file
#: too large): the user's environment, never a bug in gitm-tui
_WRITE_REFUSED = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EROFS", "EFBIG") if hasattr(errno, name)
)


def write_refused(e: BaseException) -> bool:
    """Return whether ``e`` is the file system refusing a write (disk full, quota, read-only):
    exit INPUT ("an output cannot be written") with one line, wherever it surfaces."""
    return isinstance(e, OSError) and e.errno in _WRITE_REFUSED


class BackendUnavailable(Exception):
    """A device backend (NVML, amdsmi, CUPTI) cannot start: ``reason`` says why, ``remedy``
    what to do (exit code 4)."""

    def __init__(self, backend: str, reason: str, remedy: str) -> None:
        super().__init__(f"{backend}: {reason} — {remedy}")
        self.backend, self.reason, self.remedy = backend, reason, remedy
