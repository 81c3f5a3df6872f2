"""Command line: `gitm-tui` (dashboard), `--no-ui` (headless), and subcommands — one module each
in gitm_tui/commands/; this file dispatches and turns every failure into one line and an exit code.

Every error a user can cause ends in one line on stderr and an ExitCode (README), never a
traceback; every line on stderr goes through engine.text.clean (file names, SQLite messages and
trace contents quoted in it cannot put an escape sequence on the terminal or break the line).
Textual is imported only on the dashboard path.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from engine.text import clean
from gitm_tui.commands import common
from gitm_tui.commands.analyze import cmd_analyze
from gitm_tui.commands.audit import cmd_audit
from gitm_tui.commands.capture import cmd_capture
from gitm_tui.commands.common import UsageError, error, has_terminal, say
from gitm_tui.commands.decide import cmd_decision
from gitm_tui.commands.diff import cmd_diff
from gitm_tui.commands.doctor import cmd_doctor
from gitm_tui.commands.run import run_config, run_parser
from gitm_tui.commands.validate import cmd_validate
from gitm_tui.exit_codes import ExitCode, write_refused

SUBCOMMANDS = {
    "audit": cmd_audit,
    "capture": cmd_capture,
    "doctor": cmd_doctor,
    "validate": cmd_validate,
    "analyze": cmd_analyze,
    "diff": cmd_diff,
    "approve": lambda argv: cmd_decision("approve", argv),
    "reject": lambda argv: cmd_decision("reject", argv),
    "rollback": lambda argv: cmd_decision("rollback", argv),
}


def _main(argv: Sequence[str]) -> ExitCode:
    if argv and argv[0] in SUBCOMMANDS:
        return SUBCOMMANDS[argv[0]](argv[1:])
    ns = run_parser().parse_args(argv)
    config = run_config(ns)
    from engine.errors import BackendUnavailable
    from engine.store.runs import runs_dir

    # the run store first: a GITM_SCRATCH that is a file or cannot be written is said in one
    # line (main: _store_refused) before any engine starts
    runs_dir().mkdir(parents=True, exist_ok=True)

    if not ns.no_ui and not has_terminal():  # no screen to draw on: the same run, headless
        say("no terminal (stdin and stdout are not one): running headless, as --no-ui")
        ns.no_ui = True
    try:
        if ns.no_ui:
            import asyncio  # here: `analyze` and the other subcommands do not need it (40 ms)

            from gitm_tui.headless import run_headless

            return asyncio.run(run_headless(config))
        from gitm_tui.app import run_dashboard

        return run_dashboard(config)
    except BackendUnavailable as e:
        error(f"--device {config.device}: {e.reason} — fix: {e.remedy}")
        return ExitCode.BACKEND


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `gitm-tui` console script; returns the process exit code. Called as
    the program (``argv`` None: the console script, ``python -m gitm_tui``), it leaves the
    process ready to end fast (``_ending``)."""
    common.as_program = argv is None
    if common.as_program:
        _term_as_interrupt()
    try:
        code = int(_main(list(sys.argv[1:] if argv is None else argv)))
        sys.stdout.flush()  # a full disk under a redirected stdout says so here, not at exit
        return code
    except UsageError as e:
        error(str(e))
        return int(ExitCode.USAGE)
    except KeyboardInterrupt:
        say("interrupted")
        _quiet_dask_exit()
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:  # the reader went away (`| head`): it read what it wanted
        _drop_stdout()
        return int(ExitCode.OK)
    except Exception as e:
        if write_refused(e):  # a full disk (an output, the run store, stdout): not a bug
            _write_refused_line(e)
            return int(ExitCode.INPUT)
        store = _store_refused(e)
        if store is not None:  # GITM_SCRATCH is a file, unwritable, …: the environment
            error(store)
            return int(ExitCode.INPUT)
        return int(_internal_error(e))  # a bug: one line here, the traceback in a file
    finally:
        if common.as_program:
            _ending()


def _quiet_dask_exit() -> None:
    """An interrupt during a local cluster's start left Dask's atexit hook to close it, which
    printed a traceback ("Exception ignored in atexit callback … AssertionError"). Close what
    is left here, quietly, and take the hook off: one line, never a traceback."""
    spec = sys.modules.get("distributed.deploy.spec")
    hook = getattr(spec, "close_clusters", None)
    if hook is None:
        return
    import atexit

    with contextlib.suppress(Exception):
        hook()
    atexit.unregister(hook)


def _term_as_interrupt() -> None:
    """SIGTERM ends a command as Ctrl-C does: its one line and exit 130, as README's table
    says (`analyze DIR` killed with SIGTERM ended 143, silently: issue 51). The optimize run
    puts its own handler in place of this one (it journals and reports first)."""
    import signal

    def interrupt(_sig: int, _frame: object) -> None:
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError, OSError):  # (not the main thread; no such signal)
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, interrupt)


def _ending() -> None:
    """The process ends next. Python's finalisation runs full garbage collections over every
    object the run left (numba's and the analysis's: ~114k objects, ~70 ms a pass), 0.3 s of
    every `analyze` measured; frozen, they are passed over. Nothing else changes: objects are
    still freed and files closed as their references drop, atexit handlers still run; only
    garbage cycles are left to the process's end, which frees all its memory anyway."""
    gc.freeze()


def _store_refused(e: BaseException) -> str | None:
    """The one line for an OSError on the run store's own path (GITM_SCRATCH or the platform
    default): a file where the folder should be, no permission, … — None for anything else."""
    if not isinstance(e, OSError) or e.filename is None:
        return None
    from engine.store.runs import scratch_dir

    store = scratch_dir()
    try:
        path = Path(os.fsdecode(e.filename))
    except (TypeError, ValueError):
        return None
    if path != store and store not in path.parents:
        return None
    src = "GITM_SCRATCH" if os.environ.get("GITM_SCRATCH") else "the run store"
    return clean(
        f"{src} {store} cannot be used: {e.strerror or e} ({path}); set GITM_SCRATCH to a "
        "writable directory"
    )


def _write_refused_line(e: BaseException) -> None:
    """The one line for a write the file system refused (see exit_codes.write_refused)."""
    assert isinstance(e, OSError)
    if e.filename is None:  # no file named: a print to stdout failed
        error(f"cannot write stdout: {e.strerror or e}")
        _drop_stdout()
    else:
        error(f"cannot write {e.filename}: {e.strerror or e}")


def _drop_stdout() -> None:
    """After stdout refused a write: point it at /dev/null, so the interpreter's last flush of
    what is still buffered does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file behind stdout (tests)
        pass


def _internal_error(e: Exception) -> ExitCode:
    from engine.store.runs import save_crash

    where = save_crash(e)
    say(
        f"internal error: {e!r} — a bug in gitm-tui; the traceback is in {where} "
        "(please include it in a report)"
    )
    return ExitCode.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
