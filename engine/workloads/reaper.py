"""``python -I -S reaper.py PROGRAM ARGS…``: run a command workload's program so that nothing it
starts outlives it (Linux). Run by engine.workloads.command in place of the program itself.

This process makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): a descendant
of the program whose parent exits — a daemon started with ``setsid`` and an empty environment,
a double fork — is reparented to it instead of to init, wherever it went (another session,
another process group, no environment to be found by). It forks the program, which runs in its
process group (the group engine.workloads.command signals), lets go of its own copies of the
program's output and of the descriptors passed to it (so the output ends when the program's
last descendant has ended), and waits. When the program has exited it ends every descendant
still there — SIGTERM, then SIGKILL after ``GRACE_S`` — until it has no child left, and exits
as the program did (its exit status, or the signal that ended it), so the caller reads the
program's own status.

A stop is signalled to the whole process group (engine.workloads.command, and a killed run's
recovery, signal the group): the program gets it directly, and this process, which catches
SIGTERM, SIGINT and SIGHUP, lives on to end its descendants once it exits — within the
caller's grace before it SIGKILLs the group. Where the subreaper cannot be had, the program is
run in this process's place (exec), as without this helper.

Standard library only, no site packages (``-I -S``: ~15 ms to start), nothing of ``engine``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
#: seconds a descendant has between SIGTERM and SIGKILL
GRACE_S = 0.5
#: rounds of ending descendants (each may orphan the next generation) before giving up
ROUNDS = 64


def _children() -> list[int]:
    """Pids whose parent is this process (the program's orphans, reparented here)."""
    me, kids = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me and fields[0] != b"Z":
            kids.append(int(name))
    return kids


def _reap() -> None:
    """Collect every child that has ended (zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _end_descendants() -> int:
    """End every descendant left (SIGTERM, SIGKILL after GRACE_S), generation by generation;
    how many were ended."""
    ended = 0
    for _ in range(ROUNDS):
        _reap()
        kids = _children()
        if not kids:
            return ended
        ended += len(kids)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in kids:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
            end = time.monotonic() + (GRACE_S if sig == signal.SIGTERM else 1.0)
            while time.monotonic() < end:
                _reap()
                kids = [k for k in kids if k in _children()]
                if not kids:
                    break
                time.sleep(0.01)
            if not kids:
                break
    return ended


def main(argv: list[str]) -> None:
    if not argv:
        os._exit(2)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        ok = False
    if not ok:  # no subreaper: the program runs here, as it would without this helper
        _exec(argv)

    def outlive(_sig: int, _frame: object) -> None:
        """A stop is the program's group's (the caller signals the group): the program has it
        already — passed on again, a program that takes a second SIGTERM as "force" would be
        forced. This process only outlives it, to end what it leaves."""

    # caught, not ignored: an exec resets a caught signal to its default (an ignored one would
    # stay ignored in the program)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, outlive)
    child = os.fork()
    if child == 0:
        _exec(argv)
    # this process holds no end of the program's output, nor of what was passed to it
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 1 << 16)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            status = 0
            break
    _end_descendants()
    if os.WIFSIGNALED(status):
        died_of = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # (SIGKILL, SIGSTOP: no handler to reset)
            signal.signal(died_of, signal.SIG_DFL)
        os.kill(os.getpid(), died_of)
        os._exit(128 + died_of)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _exec(argv: list[str]) -> None:
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.write(2, f"cannot run {argv[0]!r}: {e.strerror}\n".encode(errors="replace"))
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
