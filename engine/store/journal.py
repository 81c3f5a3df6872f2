"""The run journal (DESIGN §6): every intervention state transition is appended and fsync'd
*before* it takes effect, so a run killed at any point can be put back on the next start.

Lifecycle: PROPOSED → APPROVED → APPLYING → APPLIED → VERIFIED | ROLLED_BACK, or
PROPOSED → REJECTED. ``recover(runs)`` finds interventions left in APPLYING/APPLIED by a run
that died — dead means its run lock (engine/store/runs.py) can be taken: a live run is never
touched — restores the workload state saved before the apply, journals ROLLED_BACK and rewrites
that run's report from its journal. Where the saved state cannot be used, nothing is claimed:
the intervention is journalled as *not restored* and the report says so.

Reading is defensive: the journal is a file anyone with the user's rights can edit, so each
record's fields are checked (types, known states) and a record that fails is skipped, never
trusted — one bad line cannot stop later starts.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from engine.store.runs import (
    JOURNAL,
    RunLock,
    append_line,
    atomic_write_text,
    end_orphans,
    sweep_temp_files,
)


class State(str, Enum):
    """Intervention lifecycle states."""

    PROPOSED = "PROPOSED"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    APPLYING = "APPLYING"
    APPLIED = "APPLIED"
    VERIFIED = "VERIFIED"
    ROLLED_BACK = "ROLLED_BACK"


#: transitions the lifecycle allows (an operator may roll back a VERIFIED intervention)
ALLOWED: dict[State | None, set[State]] = {
    None: {State.PROPOSED},
    State.PROPOSED: {State.APPROVED, State.REJECTED},
    State.APPROVED: {State.APPLYING, State.REJECTED},
    State.APPLYING: {State.APPLIED, State.ROLLED_BACK},
    State.APPLIED: {State.VERIFIED, State.ROLLED_BACK},
    State.VERIFIED: {State.ROLLED_BACK},
    State.REJECTED: set(),
    State.ROLLED_BACK: set(),
}
UNFINISHED = (State.APPLYING, State.APPLIED)

#: the states an operator decision applies to — the one rule `gitm-tui approve` (before it
#: sends), the engine (before it acts) and the dashboard (which keys it offers) all read
DECISIONS: dict[str, tuple[State, ...]] = {
    "approve": (State.PROPOSED,),
    "reject": (State.PROPOSED, State.APPROVED),
    "rollback": (State.VERIFIED,),
}


def decision_refused(action: str, iid: str, state: State | str) -> str | None:
    """Why ``action`` cannot apply to ``iid`` in ``state`` (one line), or None if it can."""
    st = State(state)
    if st in DECISIONS[action]:
        return None
    need = " or ".join(s.value for s in DECISIONS[action])
    return f"{iid} is {st.value}: only a {need} intervention can be {_DONE[action]}"


_DONE = {"approve": "approved", "reject": "rejected", "rollback": "rolled back"}


class JournalError(RuntimeError):
    """A transition the lifecycle does not allow (a bug, not user input)."""


class Journal:
    """Append-only JSON lines with fsync, one file per run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.states: dict[str, State] = {}
        self.seq = 0
        self._lock = threading.Lock()
        self._closed = False
        if path.exists():
            for rec in read(path):
                self.seq = max(self.seq, rec.get("seq") or 0)
                if rec.get("type") == "transition":
                    self.states[rec["id"]] = State(rec["to"])

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write one record durably (write + flush + fsync) and return it; a non-finite number
        is written as null (NaN is not JSON)."""
        with self._lock:
            if self._closed:
                raise JournalError(f"{self.path}: journal closed (the run has ended)")
            self.seq += 1
            rec = _finite({"seq": self.seq, "t": time.time(), **record})
            append_line(self.path, rec)
            return rec

    def close(self) -> None:
        """Refuse every later write (a worker thread still running when its run ends must not
        journal after the run's end). Waits for a write in progress."""
        with self._lock:
            self._closed = True

    def transition(self, iid: str, to: State, **detail: Any) -> dict[str, Any]:
        """Journal ``iid`` → ``to`` (checked against the lifecycle) before the caller acts."""
        frm = self.states.get(iid)
        if to not in ALLOWED[frm]:
            raise JournalError(f"{iid}: {frm.value if frm else 'new'} → {to.value} is not allowed")
        rec = self.append(
            {
                "type": "transition",
                "id": iid,
                "from": frm.value if frm else None,
                "to": to.value,
                **detail,
            }
        )
        self.states[iid] = to
        return rec


_STATES = {s.value for s in State}


def _finite(obj: Any) -> Any:
    """``obj`` with every NaN / ±inf float replaced by None, recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def _valid(rec: Any) -> bool:
    """Whether a decoded line is a record this code may act on: an object whose ``seq`` is an
    int, and, for a transition, whose ``id`` is a string and ``to``/``from`` are states."""
    if not isinstance(rec, dict):
        return False
    seq = rec.get("seq")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)):
        return False
    if not isinstance(rec.get("type", ""), str):
        return False
    if rec.get("type") == "transition":
        frm = rec.get("from")
        return (
            isinstance(rec.get("id"), str)
            and isinstance(rec.get("to"), str)
            and rec["to"] in _STATES
            and (frm is None or (isinstance(frm, str) and frm in _STATES))
        )
    return True


def read(path: Path) -> list[dict[str, Any]]:
    """Return a journal's valid records; a torn last line (the process died mid-write), a line
    that is not JSON, nests too deep, or holds fields of the wrong type is skipped."""
    out = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if _valid(rec):
                out.append(rec)
    return out


def states(path: Path) -> dict[str, State]:
    """Each intervention's latest state in a journal (read-only)."""
    out: dict[str, State] = {}
    for rec in read(path):
        if rec.get("type") == "transition":
            out[rec["id"]] = State(rec["to"])
    return out


@dataclass
class Recovered:
    """An interrupted run put back on start-up."""

    run_dir: Path
    #: interventions rolled back (their saved state restored)
    interventions: list[str] = field(default_factory=list)
    restored_state: Path | None = None
    #: interventions left as they were because their saved state could not be used, and why
    unrestored: dict[str, str] = field(default_factory=dict)
    #: set when the run's journal could not be read: nothing was changed
    error: str | None = None
    #: what was ended of the program the dead run had left running ('' nothing)
    ended_program: str = ""


def recover(runs_dir: Path) -> list[Recovered]:
    """Roll back every intervention a dead run left in APPLYING/APPLIED (DESIGN §6).

    A run counts as dead only when its lock can be taken; recovery holds that lock while it
    works, so two starts never recover the same run at once."""
    out: list[Recovered] = []
    if not runs_dir.is_dir():
        return out
    for jpath in sorted(runs_dir.glob(f"*/{JOURNAL}")):
        lock = RunLock(jpath.parent)
        try:
            if not lock.acquire():
                continue  # alive: another process is running it
        except OSError as e:  # cannot even open the lock file: leave the run alone
            out.append(Recovered(jpath.parent, error=f"{type(e).__name__}: {e}"))
            continue
        try:
            ended = end_orphans(jpath.parent)  # a SIGKILLed run's program, still running
            rec = _recover_run(jpath)
            if ended:
                rec = rec or Recovered(jpath.parent)
                rec.ended_program = ended
        except (OSError, ValueError, JournalError) as e:  # a damaged earlier run: say so, go on
            rec = Recovered(jpath.parent, error=f"{type(e).__name__}: {e}")
        finally:
            lock.release()
        if rec is not None:
            out.append(rec)
    return out


def _saved_state(jpath: Path, recs: list[dict[str, Any]], iid: str) -> tuple[Path | None, str]:
    """The state file saved before ``iid`` was applied, or None and why it cannot be used: it
    must be a regular file (not a link) inside this run's folder, named by the journal."""
    before = next(
        (
            r.get("state_before")
            for r in reversed(recs)
            if r.get("type") == "transition" and r["id"] == iid and r["to"] == State.APPLYING.value
        ),
        None,
    )
    if not isinstance(before, str) or not before:
        return None, "the journal names no saved state"
    home = jpath.parent.resolve()
    src = home / before
    if src.is_symlink():
        return None, f"the saved state {before!r} is a link"
    src = src.resolve()
    if not src.is_relative_to(home):
        return None, f"the saved state {before!r} is outside the run's folder"
    if not src.is_file():
        return None, f"the saved state {before!r} is missing"
    return src, ""


def _recover_run(jpath: Path) -> Recovered | None:
    """Recover one dead run's journal (None when the run had finished)."""
    recs = read(jpath)
    if any(r.get("type") == "run_finished" for r in recs):
        return None
    sweep_temp_files(jpath.parent)
    j = Journal(jpath)
    pending = [iid for iid, st in j.states.items() if st in UNFINISHED]
    rec = Recovered(jpath.parent)
    for iid in pending:
        src, why = _saved_state(jpath, recs, iid)
        text = None
        if src is not None:
            try:
                text = src.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                why = f"the saved state cannot be read ({type(e).__name__})"
        if text is None:
            j.append({"type": "not_restored", "id": iid, "reason": why})
            rec.unrestored[iid] = why
            continue
        atomic_write_text(jpath.parent / "state.json", text)
        rec.restored_state = jpath.parent / "state.json"
        j.transition(
            iid,
            State.ROLLED_BACK,
            reason="interrupted: the run died during the apply; rolled back on the next start",
        )
        rec.interventions.append(iid)
    j.append(
        {
            "type": "run_finished",
            "status": "interrupted",
            "recovered": rec.interventions,
            "not_restored": rec.unrestored,
        }
    )
    return rec
