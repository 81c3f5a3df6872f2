"""The run journal (DESIGN §6): every intervention state transition is appended and fsync'd
*before* it takes effect, so a run killed at any point can be put back on the next start.

Lifecycle: PROPOSED → APPROVED → APPLYING → APPLIED → VERIFIED | ROLLED_BACK, or
PROPOSED → REJECTED. ``recover(scratch)`` finds interventions left in APPLYING/APPLIED by a
run that died, restores the workload state saved before the apply, journals ROLLED_BACK and
rewrites that run's report from its journal.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from engine.runtime.store import atomic_write_text


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


class JournalError(RuntimeError):
    """A transition the lifecycle does not allow (a bug, not user input)."""


class Journal:
    """Append-only JSON lines with fsync, one file per run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.states: dict[str, State] = {}
        self.seq = 0
        if path.exists():
            for rec in read(path):
                seq = rec.get("seq")
                if isinstance(seq, int) and not isinstance(seq, bool):
                    self.seq = max(self.seq, seq)
                iid, to = rec.get("id"), rec.get("to")
                if rec.get("type") == "transition" and isinstance(iid, str) and to in _STATES:
                    self.states[iid] = State(to)

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write one record durably (write + flush + fsync) and return it."""
        self.seq += 1
        rec = {"seq": self.seq, "t": time.time(), **record}
        line = json.dumps(rec, separators=(",", ":"), default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return rec

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


def read(path: Path) -> list[dict[str, Any]]:
    """Return a journal's records; a torn last line (the process died mid-write) and anything
    that is not a JSON object (a damaged file) are skipped."""
    out = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


@dataclass
class Recovered:
    """An interrupted run put back on start-up."""

    run_dir: Path
    interventions: list[str] = field(default_factory=list)
    restored_state: Path | None = None
    #: set when the run's journal or saved state could not be read: nothing was changed
    error: str | None = None


def recover(runs_dir: Path) -> list[Recovered]:
    """Roll back every intervention a dead run left in APPLYING/APPLIED (DESIGN §6)."""
    out: list[Recovered] = []
    if not runs_dir.is_dir():
        return out
    for jpath in sorted(runs_dir.glob("*/journal.jsonl")):
        try:
            rec = _recover_run(jpath)
        except (OSError, ValueError, JournalError) as e:  # a damaged earlier run: say so, go on
            rec = Recovered(jpath.parent, error=f"{type(e).__name__}: {e}")
        if rec is not None:
            out.append(rec)
    return out


def _recover_run(jpath: Path) -> Recovered | None:
    """Recover one run's journal (None when the run had finished)."""
    recs = read(jpath)
    if any(r.get("type") == "run_finished" for r in recs):
        return None
    j = Journal(jpath)
    pending = [iid for iid, st in j.states.items() if st in UNFINISHED]
    rec = Recovered(jpath.parent)
    for iid in pending:
        before = next(
            (
                r.get("state_before")
                for r in reversed(recs)
                if r.get("type") == "transition"
                and r.get("id") == iid
                and r.get("to") == State.APPLYING.value
            ),
            None,
        )
        # the saved state is a file inside this run's folder, named by the journal
        home = jpath.parent.resolve()
        src = (home / before).resolve() if isinstance(before, str) and before else None
        if src is not None and src.is_relative_to(home):
            atomic_write_text(jpath.parent / "state.json", src.read_text(encoding="utf-8"))
            rec.restored_state = jpath.parent / "state.json"
        j.transition(
            iid,
            State.ROLLED_BACK,
            reason="interrupted: the run died during the apply; rolled back on the next start",
        )
        rec.interventions.append(iid)
    j.append({"type": "run_finished", "status": "interrupted", "recovered": rec.interventions})
    return rec
