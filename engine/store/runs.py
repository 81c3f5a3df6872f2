"""The run store (DESIGN §7): where runs live, their names, their lock, and atomic writes —
nothing the user keeps is ever half-written, and no run touches another that is still alive.

Layout: ``<scratch>/runs/<run id>/`` holds ``journal.jsonl`` (the lifecycle, engine/runtime/
journal.py), ``commands.jsonl`` (operator decisions from another terminal), ``run.lock`` (held
by the live run), ``state.json`` and the reports. This module is the one place those names and
the run-id format are written down.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import stat
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

JOURNAL = "journal.jsonl"
COMMANDS = "commands.jsonl"
LOCK = "run.lock"

#: a run id: start time (local, to the second) and 6 hex digits, e.g. 20261201-145253-1a2b3c
RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")


class RunIdError(ValueError):
    """Not a run id (one line for the user)."""


def scratch_dir() -> Path:
    """Return $GITM_SCRATCH, or the platform's user data dir for gitm-tui."""
    env = os.environ.get("GITM_SCRATCH")
    if env:
        return Path(env)
    from platformdirs import user_data_path

    return user_data_path("gitm-tui", appauthor=False)


def save_crash(e: BaseException) -> str:
    """Write ``e``'s traceback under scratch_dir()/crashes; return the file's path, or
    "(could not be saved)". For the one line that names a bug in gitm-tui."""
    import time
    import traceback

    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        crash = scratch_dir() / "crashes" / f"{stamp}.txt"
        crash.parent.mkdir(parents=True, exist_ok=True)
        crash.write_text("".join(traceback.format_exception(e)), encoding="utf-8")
    except OSError:
        return "(could not be saved)"
    return str(crash)


def runs_dir() -> Path:
    """Return the folder every run lives in."""
    return scratch_dir() / "runs"


def new_run_id() -> str:
    """Return a fresh run id (``RUN_ID``)."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def run_path(run_id: str) -> Path:
    """Return the folder of run ``run_id``; RunIdError unless it is exactly a run id — never a
    path (``../x``, ``/abs``), so nothing outside the run store is named by one."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise RunIdError(f"{run_id!r} is not a run id (like 20261201-145253-1a2b3c)")
    return runs_dir() / run_id


class RunLock:
    """An exclusive lock on ``<run>/run.lock`` held for the run's whole life.

    The operating system drops it when the process ends, however it ends (SIGKILL included), so
    a run whose lock can be taken is dead and one whose lock is held is alive: recovery and
    ``gitm-tui approve`` ask the lock, never the journal alone. The file also records the pid
    and start time of its holder, for people."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> bool:
        """Take the lock without waiting; return False when another process holds it."""
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # never through a link: a run.lock that is a symbolic link (which we never make) would
        # have the holder's pid written into whatever it points at (OSError: ELOOP, and the
        # caller leaves that run alone)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        if not _try_lock(fd):
            os.close(fd)
            return False
        self._fd = fd
        with contextlib.suppress(OSError):  # informative only: the lock is what counts
            info = json.dumps({"pid": os.getpid(), "started": time.time()}) + "\n"
            os.ftruncate(fd, 0)
            os.pwrite(fd, info.encode(), 0)
        return True

    def release(self) -> None:
        """Let the lock go: unlocked first, then closed. Closing alone is not enough when the
        run forked (a DataLoader's workers, a program's helpers): a child holds a copy of the
        descriptor and the lock with it until the child ends."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                _unlock(self._fd)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def is_live(run_dir: Path) -> bool:
    """Return whether a process holds ``run_dir``'s lock (the run is running). The lock is
    probed read-only (a shared lock, on POSIX): another user's live run, whose lock file this
    user cannot open for writing, was reported "not running"."""
    path = Path(run_dir) / LOCK
    if not path.exists():
        return False
    if _held_elsewhere is not None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return False  # (a link, a file gone: no lock we made)
        try:
            return _held_elsewhere(fd)
        finally:
            os.close(fd)
    probe = RunLock(run_dir)
    try:
        if probe.acquire():
            probe.release()
            return False
    except OSError:
        return False
    return True


def holder(run_dir: Path) -> dict[str, Any]:
    """Return what the lock file says of its holder ({} when unreadable)."""
    try:
        data = json.loads((Path(run_dir) / LOCK).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


try:  # POSIX
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    def _shared_probe(fd: int) -> bool:
        """Whether another process holds the lock ``fd`` is open on (read-only is enough)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    _held_elsewhere: Callable[[int], bool] | None = _shared_probe

except ImportError:  # Windows: a byte-range lock on the first byte
    import msvcrt

    def _unlock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        except OSError:
            return False
        return True

    _held_elsewhere = None  # (a byte-range lock needs the file open for writing)


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line to ``path`` durably (one write, then fsync): concurrent writers'
    lines never interleave, and NaN/∞ are refused (they are not JSON)."""
    line = json.dumps(record, separators=(",", ":"), allow_nan=False, default=str) + "\n"
    append_bytes(path, line.encode())


def open_regular(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags)`` for a regular file only: never through a link someone planted
    in the run's folder, never a FIFO or a device (opening a FIFO blocks until its other end
    opens). Raises OSError naming ``path``."""
    no_link = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | no_link, mode)
    except OSError as e:
        raise OSError(e.errno, e.strerror, os.fspath(path)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
    return fd


def append_bytes(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (a regular file: ``open_regular``) in one write, then fsync.
    A refused write (a full disk) raises OSError naming ``path``: os.write's own error names
    no file."""
    fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        view = memoryview(data)
        while view:  # a short write (a disk that fills mid-record) is not taken as done
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(errno.ENOSPC, "no byte written", os.fspath(path))
            view = view[n:]
        os.fsync(fd)
    except OSError as e:
        raise OSError(e.errno, e.strerror, os.fspath(path)) from None
    finally:
        os.close(fd)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder, fsync and os.replace.

    The temp file is named ``.<name>.<random>.tmp``; one left by a process killed between the
    write and the rename is removed by ``sweep_temp_files`` on the next start."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # as open() would make it (mkstemp's is 0600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # a full disk: name the file (a write's own error names none)
        Path(tmp).unlink(missing_ok=True)
        if e.filename is None:
            raise OSError(e.errno, e.strerror, os.fspath(path)) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask: from /proc on Linux (setting it to read it would change it for a
    moment under every other thread), else set and put back."""
    with (
        contextlib.suppress(OSError, ValueError),
        open("/proc/self/status", encoding="ascii", errors="replace") as f,
    ):
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def sweep_temp_files(run_dir: Path) -> int:
    """Remove temp files an atomic write left in a dead run's folder; return how many."""
    n = 0
    for p in Path(run_dir).glob(".*.tmp"):
        with contextlib.suppress(OSError):
            p.unlink()
            n += 1
    return n


#: the running program of a command workload, in its run folder while it runs: its process
#: group and its start time (so a later start can end what a killed run left running)
PROGRAM = "program.json"


def _start_ticks(pid: int) -> int | None:
    """A process's start time (clock ticks since boot, /proc/PID/stat field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


#: the environment variable every process a command workload starts inherits, set to a fresh
#: tag per program: how what left its process group (``setsid``, a daemon) is found again
TAG_VAR = "GITM_TUI_PROGRAM"


def new_tag() -> str:
    """A fresh program tag (``TAG_VAR``'s value)."""
    return uuid.uuid4().hex


def tagged(tag: str) -> list[int]:
    """The pids of this user's processes whose environment carries ``TAG_VAR=tag`` (Linux's
    /proc; [] elsewhere). A process that cleared its environment is not found."""
    needle = f"{TAG_VAR}={tag}".encode()
    me, out = os.getpid(), []
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone, or not ours
            continue
        if needle in env.split(b"\0"):
            out.append(pid)
    return out


def end_tagged(tag: str, grace_s: float = 1.0) -> int:
    """End every process still carrying ``tag`` (SIGTERM, then SIGKILL after ``grace_s``):
    the program's descendants that left its process group. Returns how many there were."""
    if not tag:
        return 0
    pids = tagged(tag)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    left = pids
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = [p for p in left if _alive(p)]
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended and waiting for its parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :][:1] != "Z"


def record_program(run_dir: Path, pgid: int, tag: str = "") -> None:
    """Note the program's process group and tag in ``run_dir`` (PROGRAM) while it runs."""
    with contextlib.suppress(OSError):
        atomic_write_text(
            Path(run_dir) / PROGRAM,
            json.dumps({"pgid": pgid, "start": _start_ticks(pgid), "tag": tag}),
        )


def forget_program(run_dir: Path) -> None:
    """The program's group has ended: remove the note."""
    with contextlib.suppress(OSError):
        (Path(run_dir) / PROGRAM).unlink()


def end_orphans(run_dir: Path) -> str:
    """A dead run's program still running (the run was SIGKILLed): end its process group —
    only when the process that led it is still the one the run started (same start time: a
    recycled pid is never signalled). Returns what was done ('' when nothing was left)."""
    path = Path(run_dir) / PROGRAM
    if not path.is_file() or path.is_symlink():
        return ""
    try:
        note = json.loads(path.read_text(encoding="utf-8"))
        pgid, start = int(note["pgid"]), note.get("start")
        tag = note.get("tag") or ""
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ""
    done = []
    if pgid > 1 and pgid != os.getpgrp() and start is not None and _start_ticks(pgid) == start:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.5)
        done.append(f"ended its program's process group {pgid}")
    # the tag is a fresh random hex string: only the run's own descendants carry it
    n = end_tagged(tag) if isinstance(tag, str) and re.fullmatch(r"[0-9a-f]{32}", tag) else 0
    if n:
        done.append(f"ended {n} process(es) its program had started outside that group")
    forget_program(run_dir)
    return " and ".join(done) + (", left running when the run died" if done else "")
