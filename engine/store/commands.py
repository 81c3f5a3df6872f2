"""Operator decisions from another terminal (``gitm-tui approve|reject|rollback RUN ID``).

``send`` checks a decision against the run it names — a run id, never a path; a run that is
alive (its lock is held); an intervention of that run in a state the decision applies to — and
appends it to the run's ``commands.jsonl``; the live run's engine reads the file with a
``CommandReader``. The file's name, format and rules live here and nowhere else.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from engine.store.journal import DECISIONS, State, decision_refused, read
from engine.store.runs import (
    COMMANDS,
    JOURNAL,
    append_line,
    is_live,
    open_regular,
    run_path,
    runs_dir,
)


class DecisionError(ValueError):
    """A decision that cannot be sent (one line for the user)."""


#: the longest "by" (who decided) journaled and shown: a name, not a payload (anyone with the
#: user's rights can append a 5 MB one to the commands file)
MAX_BY = 80


def bounded_by(by: str) -> str:
    """``by`` cut to ``MAX_BY`` characters, saying it was cut."""
    return by if len(by) <= MAX_BY else by[: MAX_BY - 1] + "…"


@dataclass(frozen=True)
class Decision:
    action: str
    iid: str
    by: str


def send(run_id: str, action: str, iid: str, by: str) -> Path:
    """Append ``action`` on ``iid`` to run ``run_id``'s commands file; return the run's folder.
    DecisionError (or RunIdError, also a ValueError) says why it cannot be sent."""
    if action not in DECISIONS:
        raise DecisionError(f"unknown decision {action!r}; one of {', '.join(DECISIONS)}")
    run_dir = run_path(run_id)
    journal = run_dir / JOURNAL
    # a run is a folder of the store's own: never a link out of it (approve wrote through one)
    if run_dir.is_symlink() or not journal.is_file() or journal.is_symlink():
        raise DecisionError(f"no run {run_id} under {runs_dir()}")
    recs = read(journal)
    if any(r.get("type") == "run_finished" for r in recs):
        raise DecisionError(f"run {run_id} has finished; no decision can be sent to it now")
    if not is_live(run_dir):
        raise DecisionError(
            f"run {run_id} is not running (it ended without finishing; the next start of "
            "gitm-tui puts it back)"
        )
    states: dict[str, State] = {}
    since: dict[str, float] = {}  # when each intervention's state was journaled
    for r in recs:
        if r.get("type") == "transition":
            states[r["id"]] = State(r["to"])
            t = r.get("t")
            since[r["id"]] = float(t) if isinstance(t, (int, float)) else 0.0
    if iid not in states:
        have = ", ".join(sorted(states)) or "none yet"
        raise DecisionError(f"run {run_id} has no intervention {iid!r}; it has {have}")
    why = decision_refused(action, iid, states[iid])
    if why is not None:
        raise DecisionError(why)
    why = _conflict(run_dir, action, iid, states[iid], since[iid])
    if why is not None:
        raise DecisionError(why)
    try:
        append_line(
            run_dir / COMMANDS,
            {"action": action, "id": iid, "by": bounded_by(by), "t": time.time()},
        )
    except PermissionError:
        raise DecisionError(
            f"run {run_id} is running, but its commands file cannot be written by this user "
            "(permission denied: another user's run?); a decision must come from its owner"
        ) from None
    except OSError as e:  # a FIFO or a device planted in its place, a full disk
        raise DecisionError(
            f"run {run_id}: its commands file cannot be written ({e.strerror or e}); "
            "nothing was sent"
        ) from None
    return run_dir


#: what a decision makes of the state it applies to (engine.store.journal's lifecycle)
_AFTER = {"approve": State.APPROVED, "reject": State.REJECTED, "rollback": State.ROLLED_BACK}
#: the bytes of the commands file read back for decisions still waiting (the last ones)
_PENDING_TAIL = 1 << 20


def _conflict(run_dir: Path, action: str, iid: str, state: State, since: float) -> str | None:
    """Why ``action`` on ``iid`` would not be taken as sent, given the decisions on ``iid``
    already sent and not yet journaled (sent after its state was journaled): the same decision
    again, or one that a waiting decision makes impossible (a reject waiting, then an approve:
    both answered "sent", the approve was refused by the run). None: it can be sent."""
    try:  # a regular file of the run's (no link followed, no FIFO waited on)
        fd = open_regular(run_dir / COMMANDS, os.O_RDONLY)
    except OSError:
        return None
    try:
        os.lseek(fd, max(0, os.fstat(fd).st_size - _PENDING_TAIL), os.SEEK_SET)
        tail = os.read(fd, _PENDING_TAIL)
    except OSError:
        return None
    finally:
        os.close(fd)
    st = state
    for line in tail.split(b"\n"):
        c = _json(line)
        if not (isinstance(c, dict) and c.get("id") == iid and c.get("action") in _AFTER):
            continue
        t = c.get("t")
        if not isinstance(t, (int, float)) or t <= since:
            continue  # taken already (its effect journaled), or of an older tool
        if decision_refused(c["action"], iid, st) is not None:
            continue  # the run will refuse that one itself
        if c["action"] == action:
            by = c.get("by")
            return (
                f"{iid}: a {action} is sent already and waits for the run to take it "
                f"(by {bounded_by(by) if isinstance(by, str) else '?'}); not sent twice"
            )
        st = _AFTER[c["action"]]
    if st is not state:
        why = decision_refused(action, iid, st)
        if why is not None:
            return f"a decision sent before this one still waits: once the run takes it, {why}"
    return None


#: the longest line taken (a decision is ~80 bytes; a 5 MB author name is still read, then
#: cut), and what one poll reads at most: a commands file that is a link to /dev/zero, or an
#: endless line, costs a bounded read a poll, never the run's memory
READ_CHUNK = 1 << 20
MAX_LINE = 8 << 20
POLL_BYTES = 2 * MAX_LINE


class CommandReader:
    """Reads a run's commands file as it grows; only well-formed decisions come out (anyone
    with the user's rights can append to the file, or put something else in its place). The
    file is never trusted to be a file: opened without following a link and without blocking
    (a FIFO there froze the run, deaf to SIGTERM), read only when it is a regular file, at
    most ``READ_CHUNK`` a poll; a line past ``MAX_LINE`` is skipped to its end; a torn line
    (a writer that died mid-line) does not swallow the decision appended after it.
    ``problem`` says, once, what is wrong with the file (the caller logs it)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / COMMANDS
        self._pos = 0
        self._skipping = False  # inside a line longer than MAX_LINE
        self.problem = ""

    def poll(self) -> list[Decision]:
        """Return the complete new lines' decisions (a torn last line waits for its end)."""

        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags)
        except FileNotFoundError:
            return []
        except OSError as e:  # a link (ELOOP), no permission: said once, nothing read
            self.problem = (
                f"{self.path.name}: not read ({e.strerror or e}): decisions sent to it are not seen"
            )
            return []
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.problem = (
                    f"{self.path.name} is not a regular file: decisions sent to it are not seen"
                )
                return []
            if st.st_size < self._pos:  # truncated or replaced: read it from its start
                self._pos, self._skipping = 0, False
            return self._read(fd)
        except OSError as e:
            self.problem = f"{self.path.name}: not read ({e.strerror or e})"
            return []
        finally:
            os.close(fd)

    def _read(self, fd: int) -> list[Decision]:
        """The decisions of the complete lines from ``_pos`` on, at most POLL_BYTES read."""
        out: list[Decision] = []
        buf, pos, left = b"", self._pos, POLL_BYTES
        while left > 0:
            chunk = os.pread(fd, min(READ_CHUNK, left), pos)
            if not chunk:
                break
            pos += len(chunk)
            left -= len(chunk)
            if self._skipping:  # inside a line too long to be a decision: to its end
                nl = chunk.find(b"\n")
                if nl < 0:
                    self._pos = pos
                    continue
                chunk, self._skipping = chunk[nl + 1 :], False
            buf += chunk
            end = buf.rfind(b"\n") + 1
            if end:
                out += [d for line in buf[:end].split(b"\n")[:-1] if (d := _decision(line))]
                buf = buf[end:]
            self._pos = pos - len(buf)  # a torn last line is read again, whole, next time
            if len(buf) > MAX_LINE:
                buf, self._skipping, self._pos = b"", True, pos
                self.problem = (
                    f"{self.path.name}: a line over {MAX_LINE >> 20} MiB skipped (not a decision)"
                )
        return out


def _decision(line: bytes) -> Decision | None:
    """The decision a line holds; where the line is not JSON, the last decision object in it
    (a torn line and the next decision glued together: 'garbage{"action": …}')."""
    c = _json(line)
    if c is None and len(line) <= MAX_LINE:
        at = line.rfind(b"{")
        while at > 0 and c is None:
            c = _json(line[at:])
            at = line.rfind(b"{", 0, at)
    if not (
        isinstance(c, dict)
        and c.get("action") in DECISIONS
        and isinstance(c.get("id"), str)
        and len(c["id"]) <= 64
    ):
        return None
    by = c.get("by")
    return Decision(c["action"], c["id"], bounded_by(by) if isinstance(by, str) else "cli")


def _json(b: bytes) -> object | None:
    try:
        return json.loads(b)
    except (ValueError, RecursionError):
        return None


def operator() -> str:
    """Who sends a decision from this terminal, as journalled ('cli:<user>')."""
    import getpass

    try:  # LOGNAME, USER, LNAME, USERNAME, then the password database
        who = getpass.getuser()
    except (KeyError, OSError, ImportError):
        who = f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"cli:{who}"
