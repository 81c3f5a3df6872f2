"""Operator decisions from another terminal (``gitm-tui approve|reject|rollback RUN ID``).

``send`` checks a decision against the run it names — a run id, never a path; a run that is
alive (its lock is held); an intervention of that run in a state the decision applies to — and
appends it to the run's ``commands.jsonl``; the live run's engine reads the file with a
``CommandReader``. The file's name, format and rules live here and nowhere else.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from engine.store.journal import DECISIONS, State, decision_refused, read
from engine.store.runs import COMMANDS, JOURNAL, append_line, is_live, run_path, runs_dir


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
    if not journal.is_file() or journal.is_symlink():
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
    for r in recs:
        if r.get("type") == "transition":
            states[r["id"]] = State(r["to"])
    if iid not in states:
        have = ", ".join(sorted(states)) or "none yet"
        raise DecisionError(f"run {run_id} has no intervention {iid!r}; it has {have}")
    why = decision_refused(action, iid, states[iid])
    if why is not None:
        raise DecisionError(why)
    append_line(run_dir / COMMANDS, {"action": action, "id": iid, "by": bounded_by(by)})
    return run_dir


class CommandReader:
    """Reads a run's commands file as it grows; only well-formed decisions come out (anyone
    with the user's rights can append to the file)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / COMMANDS
        self._pos = 0

    def poll(self) -> list[Decision]:
        """Return the complete new lines' decisions (a torn last line waits for its end)."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._pos)
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self._pos += end
        out = []
        for line in data[:end].splitlines():
            try:
                c = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if (
                isinstance(c, dict)
                and c.get("action") in DECISIONS
                and isinstance(c.get("id"), str)
                and len(c["id"]) <= 64
            ):
                by = c.get("by")
                who = bounded_by(by) if isinstance(by, str) else "cli"
                out.append(Decision(c["action"], c["id"], who))
        return out


def operator() -> str:
    """Who sends a decision from this terminal, as journalled ('cli:<user>')."""
    import getpass

    try:  # LOGNAME, USER, LNAME, USERNAME, then the password database
        who = getpass.getuser()
    except (KeyError, OSError, ImportError):
        who = f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"cli:{who}"
