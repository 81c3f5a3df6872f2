"""The journal's seal and hash chain (issue 36 item 4): an appended, edited, inserted, deleted
or post-finish line is named and not believed — by the report, by recovery, by `approve`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from engine.optimizer.report import from_journal, rewrite_recovered
from engine.store.journal import GENESIS, Journal, State, check, read, recover


def _finished_run(run: Path) -> list[bytes]:
    """A run that proposed I1, rejected it, and finished: its journal's lines."""
    j = Journal(run / "journal.jsonl")
    j.append({"type": "run_started", "run_id": run.name, "workload": "hft-lob"})
    j.transition("I1", State.PROPOSED, lever="pinned_memory", safety="SAFE")
    j.transition("I1", State.REJECTED, by="alice")
    j.append({"type": "run_finished", "status": "completed"})
    return (run / "journal.jsonl").read_bytes().splitlines(keepends=True)


def _sealed(rec: dict) -> bytes:
    """A line sealed as gitm-tui seals it (what a forger who read the code would write)."""
    body = json.dumps(rec, separators=(",", ":")).encode()
    return body[:-1] + b',"h":"' + hashlib.sha256(body).hexdigest().encode() + b'"}\n'


def _forged_power_policy(prev: str) -> list[dict]:
    base = {"type": "transition", "id": "I9", "lever": "power_policy", "safety": "PRIVILEGED"}
    steps = [(None, "PROPOSED"), ("PROPOSED", "APPROVED"), ("APPROVED", "APPLYING")]
    steps += [("APPLYING", "APPLIED"), ("APPLIED", "VERIFIED")]
    return [
        {"seq": 90 + i, **base, "from": f, "to": t, "prev": prev} for i, (f, t) in enumerate(steps)
    ]


def test_an_intact_chain_is_believed_whole(tmp_path):
    lines = _finished_run(tmp_path)
    recs, integrity = check(tmp_path / "journal.jsonl")
    assert integrity.intact and integrity.believed == len(lines) == 4
    assert recs[0]["prev"] == GENESIS
    assert "intact (4 records)" in integrity.line()


def test_appended_lines_are_named_and_not_believed(tmp_path):
    """The issue's probe: lines appended to a finished run's journal made report.md claim a
    PRIVILEGED power_policy VERIFIED. Unsealed, sealed with a wrong ``prev``, or chained right
    but after run_finished: none is believed, each is named by its line number."""
    path = tmp_path / "journal.jsonl"
    lines = _finished_run(tmp_path)
    seal_of_last = json.loads(lines[-1])["h"]
    forged = _forged_power_policy(GENESIS)
    for attempt, how in (
        ([json.dumps(r).encode() + b"\n" for r in forged], "carries no seal"),
        ([_sealed(r) for r in forged], "does not follow the line before it"),
        ([_sealed({**forged[0], "prev": seal_of_last})], "written after the run finished"),
    ):
        path.write_bytes(b"".join(lines + attempt))
        recs, integrity = check(path)
        assert not integrity.intact and integrity.believed == 4
        assert integrity.doubts[0][0] == 5 and how in integrity.doubts[0][1]
        assert not any(r.get("id") == "I9" for r in recs)
        assert [c["id"] for c in from_journal(path)] == ["I1"]
        report = rewrite_recovered(tmp_path, []).read_text()
        assert "power_policy" not in report and "VERIFIED" not in report
        assert "Journal not intact" in report and "line 5" in report


def test_an_edited_line_is_caught_at_the_line_itself(tmp_path):
    """REJECTED edited to read APPROVED: its seal no longer matches; the lines around it are
    still believed (the next line names the seal the edited one carries)."""
    path = tmp_path / "journal.jsonl"
    lines = _finished_run(tmp_path)
    edited = lines[2].replace(b'"to":"REJECTED"', b'"to":"APPROVED"')
    assert edited != lines[2]
    path.write_bytes(b"".join([*lines[:2], edited, *lines[3:]]))
    recs, integrity = check(path)
    assert integrity.doubts == ((3, "its content does not match its seal (edited)"),)
    assert [r.get("to") for r in recs if r["type"] == "transition"] == ["PROPOSED"]
    assert "line 3: its content does not match its seal" in integrity.line()


def test_an_edit_that_recomputes_its_seal_is_caught_by_the_next_line(tmp_path):
    path = tmp_path / "journal.jsonl"
    lines = _finished_run(tmp_path)
    rec = json.loads(lines[2])
    rec.pop("h")
    rec["to"] = "APPROVED"
    path.write_bytes(b"".join([*lines[:2], _sealed(rec), *lines[3:]]))
    recs, integrity = check(path)
    assert [n for n, _ in integrity.doubts] == [3, 4]  # the resealed line and the one after
    assert "rewritten" in integrity.doubts[0][1] and "does not follow" in integrity.doubts[1][1]
    assert not any(r.get("to") == "APPROVED" for r in recs)


def test_a_deleted_or_reordered_line_is_caught(tmp_path):
    path = tmp_path / "journal.jsonl"
    lines = _finished_run(tmp_path)
    path.write_bytes(b"".join([lines[0], *lines[2:]]))  # the proposal deleted
    assert not check(path)[1].intact
    path.write_bytes(b"".join([lines[0], lines[2], lines[1], lines[3]]))
    assert not check(path)[1].intact
    path.write_bytes(b"".join(lines[1:]))  # the first line deleted: the next claims a prev
    assert check(path)[1].doubts[0][0] == 1


def test_recovery_acts_only_on_believed_records_and_chains_after_a_torn_line(tmp_path):
    """A forged APPLYING (pointing at a planted 'saved state') is not rolled back; the run's
    own torn last line is ended before recovery's records, which chain and are believed."""
    runs = tmp_path / "runs"
    run = runs / "old"
    j = Journal(run / "journal.jsonl")
    j.append({"type": "run_started", "run_id": "old"})
    j.transition("I1", State.PROPOSED, lever="pinned_memory", safety="SAFE")
    (run / "planted.json").write_text('{"evil": true}')
    with (run / "journal.jsonl").open("ab") as f:
        forged = {"seq": 3, "type": "transition", "id": "I1", "from": "PROPOSED"}
        f.write(json.dumps({**forged, "to": "APPLYING", "state_before": "planted.json"}).encode())
        f.write(b"\n" + b'{"seq": 4, "type": "transi')  # and the run's death mid-write
    (out,) = recover(runs)
    assert out.interventions == [] and out.restored_state is None
    assert "BROKEN" in out.broken and "line 3" in out.broken
    assert not (run / "state.json").exists()
    recs = read(run / "journal.jsonl")
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "interrupted"
    assert recover(runs) == []  # its run_finished is believed: recovered once, not every start


def test_a_run_killed_before_its_first_record_gets_a_journal_and_a_report(tmp_path):
    runs = tmp_path / "runs"
    run = runs / "20261204-101010-abcdef"
    run.mkdir(parents=True)
    (run / "run.lock").write_text('{"pid": 1}')  # what acquire() leaves, the holder long gone
    (out,) = recover(runs)
    assert out.unstarted
    recs = read(run / "journal.jsonl")
    assert [r["type"] for r in recs] == ["run_started", "run_finished"]
    assert "before its first journal record" in recs[-1]["note"]
    report = rewrite_recovered(run, [], died=True).read_text()
    assert "This run did not finish" in report
    # what the journal did not keep is not printed as 0 (issue 51: "at least 0 interleaved
    # pairs", "budget 0 s" in rebuilt reports)
    head = next(line for line in report.splitlines() if line.startswith("Run `"))
    assert "at least 0" not in head and "budget 0 s" not in head and "target 0%" not in head
    assert "budget not recorded" in head
    assert recover(runs) == []
    # a folder that is not named like a run, or holds no lock, is not ours to mark
    (runs / "notes").mkdir()
    (runs / "notes" / "run.lock").write_text("")
    (runs / "20261204-101011-abcdef").mkdir()
    assert recover(runs) == []
    assert not (runs / "notes" / "journal.jsonl").exists()
