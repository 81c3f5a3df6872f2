"""Process exit codes (documented in README); stable across releases."""

from __future__ import annotations

import errno
from enum import IntEnum

#: errnos that say the disk or file system refused a write (full, over quota, read-only, file
#: too large): the user's environment, never a bug in gitm-tui
_WRITE_REFUSED = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EROFS", "EFBIG") if hasattr(errno, name)
)


class ExitCode(IntEnum):
    OK = 0
    #: a bug in gitm-tui: a traceback was written to the run's log
    INTERNAL = 1
    #: bad flag, bad value (budget, seed), unknown workload or hardware
    USAGE = 2
    #: unreadable or corrupt input file (trace, ledger)
    INPUT = 3
    #: a requested device backend is missing (library, driver, permission)
    BACKEND = 4
    #: the run was stopped by the operator (Ctrl-C / stop command) before its budget ended
    INTERRUPTED = 130


def write_refused(e: BaseException) -> bool:
    """Return whether ``e`` is the file system refusing a write (disk full, quota, read-only):
    exit INPUT ("an output cannot be written") with one line, wherever it surfaces."""
    return isinstance(e, OSError) and e.errno in _WRITE_REFUSED
