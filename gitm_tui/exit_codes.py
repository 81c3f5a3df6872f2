"""Process exit codes (documented in README); stable across releases."""

from __future__ import annotations

from enum import IntEnum

from engine.errors import write_refused

__all__ = ["ExitCode", "write_refused"]


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
