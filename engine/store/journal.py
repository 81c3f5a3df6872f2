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

Each line is sealed and chained: it ends with ``"h"``, the SHA-256 of the line before that
field, and carries ``"prev"``, the ``h`` of the record before it (``GENESIS`` for the first).
``check`` believes a line only when its seal matches its content, it follows the line before
it and the line after it follows it; anything else — an edited, inserted, deleted, unsealed
or reordered line, or one written after the run finished — is named in the journal's
``Integrity`` and not believed (reports, recovery and ``approve`` read only believed records).
The seal is not a signature: anyone who can write the file and recompute SHA-256 can forge a
chain, and an edit of the last line that recomputes its seal is not caught. It makes a naive
edit or an appended line visible; it does not authenticate the user's own account.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from engine.store.runs import (
    JOURNAL,
    LOCK,
    RUN_ID,
    RunLock,
    append_bytes,
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
    """Append-only, sealed and chained JSON lines with fsync, one file per run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.states: dict[str, State] = {}
        self.seq = 0
        self._lock = threading.Lock()
        self._closed = False
        #: the seal the next record chains to, and whether the file ends in a torn line
        self._head, self._torn = GENESIS, False
        self._finished = False
        if path.exists():
            recs, integrity = check(path)
            for rec in recs:
                self.seq = max(self.seq, rec.get("seq") or 0)
                if rec.get("type") == "transition":
                    self.states[rec["id"]] = State(rec["to"])
            self._head, self._torn = integrity.head, integrity.torn
            self._finished = any(r.get("type") == "run_finished" for r in recs)

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write one record durably (write + flush + fsync), sealed and chained to the one
        before, and return it; a non-finite number is written as null (NaN is not JSON)."""
        with self._lock:
            if self._closed:
                raise JournalError(f"{self.path}: journal closed (the run has ended)")
            self.seq += 1
            rec = _finite({"seq": self.seq, "t": time.time(), **record, "prev": self._head})
            line, seal = _seal(rec)
            # a line torn by a death mid-write is ended first, so this one stands alone
            append_bytes(self.path, b"\n" + line if self._torn else line)
            self._head, self._torn = seal, False
            self._finished = self._finished or rec.get("type") == "run_finished"
            _write_head(self.path, self.seq, seal, self._finished)
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
        before = detail.get("state_before")
        if isinstance(before, str) and before and "state_before_sha256" not in detail:
            # the saved state sealed by its hash: recovery restores only what was saved
            digest = _file_sha256(self.path.parent / before)
            if digest is not None:
                detail = {**detail, "state_before_sha256": digest}
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


def _file_sha256(path: Path) -> str | None:
    """The sha256 of a regular file's bytes (None when it cannot be read)."""
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except (OSError, ValueError):
        return None
    return h.hexdigest()


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
    if rec.get("type") == "gate":  # the qualification gate's decision (engine/optimizer/gate.py)
        return rec.get("decision") in GATE_DECISIONS and isinstance(rec.get("line"), str)
    if rec.get("type") == "identity":  # a trial's workload against its baseline's
        return isinstance(rec.get("id"), str) and rec.get("credited") in (True, False, None)
    return True


#: a ``gate`` record's decisions: commit to the target, or diagnose why not (in the profile
#: phase, before any lever is tried; ``forced``: the operator went on anyway)
GATE_DECISIONS = ("commit", "diagnose")


#: the ``prev`` of a journal's first record
GENESIS = "0" * 64
_SEALED = re.compile(rb'(\{.*),"h":"([0-9a-f]{64})"\}')


def _seal(rec: dict[str, Any]) -> tuple[bytes, str]:
    """``rec`` as one sealed line (with its newline) and its seal."""
    body = json.dumps(rec, separators=(",", ":"), allow_nan=False, default=str).encode()
    seal = hashlib.sha256(body).hexdigest()
    return body[:-1] + b',"h":"' + seal.encode() + b'"}\n', seal


@dataclass(frozen=True)
class Integrity:
    """What ``check`` found: how many records it believed and, line by line, what it did not
    believe and why."""

    believed: int
    #: (line number, why) of every line not believed
    doubts: tuple[tuple[int, str], ...] = ()
    #: the seal of the last sealed line (what the next record chains to)
    head: str = GENESIS
    #: the file ends in a line without its newline (a death mid-write)
    torn: bool = False

    @property
    def intact(self) -> bool:
        return not self.doubts

    def line(self) -> str:
        """One line for people: the chain is intact, or which lines are not believed."""
        if self.intact:
            return f"journal hash chain intact ({self.believed} records)"
        shown = "; ".join(f"line {n}: {why}" for n, why in self.doubts[:3])
        more = f"; and {len(self.doubts) - 3} more" if len(self.doubts) > 3 else ""
        return (
            f"journal hash chain BROKEN — {len(self.doubts)} line(s) not believed "
            f"({shown}{more}); {self.believed} records believed"
        )


@dataclass
class _Line:
    no: int
    rec: Any
    seal_ok: bool
    seal: str
    prev: Any


def _parse(path: Path) -> tuple[list[_Line], list[tuple[int, str]], bool]:
    """Each sealed line of ``path``, the lines that are not, and whether the file's last line
    lacks its newline (a death mid-write, or a newline lost: the next append ends it first). A
    line's ending is not part of its seal: CRLF line ends (a file converted) are read as LF, and
    a complete sealed last line without its newline is a record like any other."""
    sealed: list[_Line] = []
    doubts: list[tuple[int, str]] = []
    torn = False
    with path.open("rb") as f:
        raw_lines = f.read().split(b"\n")
    last = len(raw_lines)
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
        last = 0  # the file ends with a newline
    for no, raw in enumerate(raw_lines, 1):
        raw = raw.removesuffix(b"\r")
        if not raw.strip():
            continue
        if no == last:
            torn = True  # no newline after it: the next record starts on a line of its own
        m = _SEALED.fullmatch(raw)
        if m is None:
            if no != last:  # (a last line cut mid-write is not a claim, not a doubt)
                doubts.append((no, _unsealed_why(raw)))
            continue
        body = m[1] + b"}"
        try:
            rec = json.loads(body)
        except (ValueError, RecursionError):
            rec = None
        ok = rec is not None and hashlib.sha256(body).hexdigest() == m[2].decode()
        prev = rec.get("prev") if isinstance(rec, dict) else None
        sealed.append(_Line(no, rec, ok, m[2].decode(), prev))
    return sealed, doubts, torn


def _unsealed_why(raw: bytes) -> str:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return "not a record"
    return "carries no seal (not written by gitm-tui)"


def _write_head(path: Path, seq: int, seal: str, finished: bool) -> None:
    """Record the journal's head beside it (best effort: the journal is what is durable; a
    head one record behind it names no cut)."""
    doc = json.dumps({"seq": seq, "h": seal, "finished": finished}).ljust(_HEAD_WIDTH) + "\n"
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    with contextlib.suppress(OSError):  # one small write over the same bytes: never half seen
        fd = os.open(path.parent / HEAD, flags, 0o600)
        try:
            os.pwrite(fd, doc.encode(), 0)
        finally:
            os.close(fd)


#: beside the journal: the sequence number and seal of the last record appended, rewritten after
#: each append — a journal cut at a line boundary passes every seal, and only this names the cut
HEAD = "journal.head"
_HEAD_WIDTH = 127  # every head written the same length: the one before is wholly overwritten


def _recorded_head(path: Path) -> tuple[int, str, bool] | None:
    """(seq, seal, finished) the journal's head file records, or None (none, or unreadable)."""
    try:
        doc = json.loads((path.parent / HEAD).read_text(encoding="utf-8"))
        return int(doc["seq"]), str(doc["h"]), bool(doc.get("finished"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check(path: Path) -> tuple[list[dict[str, Any]], Integrity]:
    """A journal's believed records and its ``Integrity``, the chain followed by its links:
    from the genesis, the next record believed is the next sealed line whose ``prev`` is the
    seal of the last one believed, its own seal matching its content. A line off the chain —
    edited, forged, inserted, a stray copy — casts doubt on itself, never on the genuine line
    it fails to follow (one appended stray line once cast doubt on the record before it and
    cancelled a crash rollback). Records after the run's ``run_finished`` are not believed. A
    journal shorter than its head file (``HEAD``) says so: its end was cut."""
    sealed, doubts, torn = _parse(path)
    out: list[tuple[int, dict[str, Any]]] = []  # (line number, record) believed
    finished = False
    head, seq = GENESIS, 0
    seen = {GENESIS}  # every seal a line before this one carries
    recorded = _recorded_head(path)
    for ln in sealed:
        rec_seq = ln.rec.get("seq") if isinstance(ln.rec, dict) else None
        if ln.prev != head:
            if ln.prev in seen:  # it names an earlier line: a copy or an insertion, it alone
                doubts.append((ln.no, "it does not follow the line before it on the chain "
                                      "(a copy, or inserted)"))  # fmt: skip
                continue
            if not ln.seal_ok:  # off the chain and not even sealed right: forged or damaged,
                # it alone — it is no evidence against the line before it
                doubts.append((ln.no, "it does not follow the line before it and its content "
                                      "does not match its seal (forged or damaged)"))  # fmt: skip
                continue
            # it names a seal no line carries: the line it follows was rewritten (the
            # sequence runs on), or a record before it is gone (a gap) — neither can be told
            # from the other for certain, so the last believed line is doubted too when the
            # sequence runs on, unless the head file vouches for it (the run recorded that
            # line's seal as its last); the chain goes on from this line's seal
            vouched = recorded is not None and recorded[:2] == (seq, head)
            if out and isinstance(rec_seq, int) and rec_seq == seq + 1 and not vouched:
                no, _ = out.pop()
                doubts.append((no, "the line after it names another seal (it was rewritten)"))
            doubts.append((ln.no, "it does not follow the line before it (a line before it "
                                  "was rewritten or deleted)"))  # fmt: skip
            head = ln.seal
            seen.add(ln.seal)
            continue
        head = ln.seal  # the seal it carries is what the next link names, edited or not
        seen.add(ln.seal)
        why = ""
        if not ln.seal_ok:
            why = "its content does not match its seal (edited)"
        elif finished:
            why = "written after the run finished"
        elif (
            recorded is not None and isinstance(rec_seq, int) and rec_seq > recorded[0] + 1
        ):  # past the head the run last recorded (one past it: a death between the writes)
            why = "written after the last record the run recorded (not the run's)"
        if why:
            doubts.append((ln.no, why))
            continue
        if _valid(ln.rec):
            out.append((ln.no, ln.rec))
            seq = max(seq, int(ln.rec.get("seq") or 0))
            finished = finished or ln.rec.get("type") == "run_finished"
    last = max(
        (int(ln.rec["seq"]) for ln in sealed if isinstance(ln.rec, dict)
         and isinstance(ln.rec.get("seq"), int)),
        default=0,
    )  # fmt: skip
    if recorded is not None and recorded[0] > last:  # (doubted lines are there, not cut)
        after = sealed[-1].no + 1 if sealed else 1
        doubts.append(
            (
                after,
                f"the journal ends at record {last}, its head file at record {recorded[0]}: "
                f"{recorded[0] - last} record(s) lost from its end (cut)",
            )
        )
    records = [r for _, r in out]
    doubts.sort()
    return records, Integrity(len(records), tuple(doubts), head, torn)


def head_says_finished(path: Path) -> bool:
    """Whether the journal's head file says its run finished (its run_finished record may
    have been cut from the journal: a completed run is then never recovered as a dead one)."""
    recorded = _recorded_head(path)
    return recorded is not None and recorded[2]


def read(path: Path) -> list[dict[str, Any]]:
    """Return a journal's believed records (``check``): a torn last line (the process died
    mid-write), a line that is not JSON, nests too deep, holds fields of the wrong type, or
    breaks the hash chain is skipped."""
    return check(path)[0]


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
    #: the journal's check when it is not intact ('' when it is)
    broken: str = ""
    #: the run died before its first journal record (its folder had only its lock)
    unstarted: bool = False


def recover(runs_dir: Path) -> list[Recovered]:
    """Roll back every intervention a dead run left in APPLYING/APPLIED (DESIGN §6).

    A run counts as dead only when its lock can be taken; recovery holds that lock while it
    works, so two starts never recover the same run at once."""
    out: list[Recovered] = []
    if not runs_dir.is_dir():
        return out
    # a run's folder: one with a journal, or one named like a run that holds only its lock
    # (killed before its first record: it gets a journal and a report that say so)
    folders = {j.parent for j in runs_dir.glob(f"*/{JOURNAL}")}
    folders |= {k.parent for k in runs_dir.glob(f"*/{LOCK}") if RUN_ID.fullmatch(k.parent.name)}
    for run in sorted(folders):
        if run.is_symlink():
            continue  # the store never makes a link: not a run of ours
        jpath = run / JOURNAL
        lock = RunLock(jpath.parent)
        try:
            if not lock.acquire():
                continue  # alive: another process is running it
        except OSError as e:  # cannot even open the lock file: leave the run alone
            out.append(Recovered(jpath.parent, error=f"{type(e).__name__}: {e}"))
            continue
        try:
            ended = end_orphans(jpath.parent)  # a SIGKILLed run's program, still running
            rec = _recover_run(jpath) if jpath.exists() else _recover_unstarted(jpath)
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
    must be a regular file (not a link) inside this run's folder, named by the journal, and
    hold the bytes whose sha256 the APPLYING record sealed (an edited saved state was once
    restored silently)."""
    applying: dict[str, Any] = next(
        (
            r
            for r in reversed(recs)
            if r.get("type") == "transition" and r["id"] == iid and r["to"] == State.APPLYING.value
        ),
        {},
    )
    before = applying.get("state_before")
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
    sealed = applying.get("state_before_sha256")
    if isinstance(sealed, str) and _file_sha256(src) != sealed:
        return None, (
            f"the saved state {before!r} changed since it was saved (its sha256 is not the one "
            "the APPLYING record sealed)"
        )
    return src, ""


#: what a line not believed may claim of an APPROVED intervention that means it may be applied
_WENT_ON = {State.APPLYING.value, State.APPLIED.value, State.VERIFIED.value}


def _doubted_claims(jpath: Path, integrity: Integrity) -> dict[str, dict[str, Any]]:
    """The last transition each line not believed claims, by intervention (a line that is not
    JSON claims nothing)."""
    if integrity.intact:
        return {}
    try:
        lines = jpath.read_bytes().split(b"\n")
    except OSError:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for no, _why in integrity.doubts:
        if not 0 < no <= len(lines):
            continue
        raw = lines[no - 1].removesuffix(b"\r")
        try:
            r = json.loads(raw)
        except (ValueError, RecursionError):
            r = None
        if isinstance(r, dict) and r.get("type") == "transition" and isinstance(r.get("id"), str):
            out[r["id"]] = r
    return out


def _recover_unstarted(jpath: Path) -> Recovered:
    """A dead run with no journal (killed before its first record): journal that it died."""
    sweep_temp_files(jpath.parent)
    j = Journal(jpath)
    j.append({"type": "run_started", "run_id": jpath.parent.name})
    j.append(
        {
            "type": "run_finished",
            "status": "interrupted",
            "note": "died before its first journal record: nothing was measured or applied",
        }
    )
    return Recovered(jpath.parent, unstarted=True)


def _recover_run(jpath: Path) -> Recovered | None:
    """Recover one dead run's journal (None when the run had finished)."""
    recs, integrity = check(jpath)
    if any(r.get("type") == "run_finished" for r in recs):
        return None
    started = next((r for r in recs if r.get("type") == "run_started"), None)
    own = started.get("run_id") if started is not None else None
    if isinstance(own, str) and own != jpath.parent.name:  # a copy (a backup) or a moved run
        return Recovered(
            jpath.parent,
            error=f"its journal is run {own[:64]!r}'s, not this folder's: a copy or a moved "
            "run, left alone (recovery acts on a run in its own folder)",
        )
    if head_says_finished(jpath):  # finished, then its journal was cut: never undo its result
        return Recovered(
            jpath.parent,
            error=f"the run had finished ({HEAD} says so) but its journal is not whole: "
            f"{integrity.line()}; nothing undone, its report.md untouched",
            broken=integrity.line(),
        )
    sweep_temp_files(jpath.parent)
    j = Journal(jpath)
    pending = [iid for iid, st in j.states.items() if st in UNFINISHED]
    rec = Recovered(jpath.parent, broken="" if integrity.intact else integrity.line())
    # the believed records leave an intervention APPROVED while a line not believed says it
    # went further (its APPLYING edited, a tail that cannot be told): it may have been applied
    claimed: dict[str, list[dict[str, Any]]] = {}
    for iid, claim in _doubted_claims(jpath, integrity).items():
        if j.states.get(iid) != State.APPROVED or claim.get("to") not in _WENT_ON:
            continue
        claim = {**claim, "to": State.APPLYING.value}  # (its saved state is the APPLYING's)
        src, why = _saved_state(jpath, [claim], iid)
        if src is None:
            why = (
                "whether it was applied cannot be told (the line saying it went on is not "
                f"believed) and {why}"
            )
            j.append({"type": "not_restored", "id": iid, "reason": why})
            rec.unrestored[iid] = why
            continue
        # the saved state matches the seal that line names: restored, as a rollback would
        j.transition(
            iid, State.APPLYING, state_before=claim["state_before"],
            note="recovery: its APPLYING line is not believed; the saved state it names "
            "matches the seal it carries",
        )  # fmt: skip
        claimed[iid] = [claim]
        pending.append(iid)
    for iid in pending:
        src, why = _saved_state(jpath, claimed.get(iid, recs), iid)
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
