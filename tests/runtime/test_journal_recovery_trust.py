"""A chain recovery can trust (issue 51). Each of the issue's journal damages, on a run killed
right after I1 went APPLYING (its saved state on disk): a stray copy of an old line appended, a
forged line, a CRLF conversion, a lost final newline — recovery still believes the genuine
APPLYING and rolls I1 back to its saved state, naming what it did not believe; a completed run
cut at a line boundary is named as cut and never undone."""

from __future__ import annotations

import json
from pathlib import Path

from engine.store.journal import HEAD, check, read, recover
from tests.runtime.journals import REPORT, approved_run, completed_run, dead_run


def _dead_run(runs: Path) -> Path:
    return dead_run(runs)


def _recovered(runs: Path, run: Path) -> None:
    (out,) = recover(runs)
    assert out.error is None, out.error
    assert out.interventions == ["I1"], out
    assert json.loads((run / "state.json").read_text()) == {"before": True}
    recs = read(run / "journal.jsonl")
    assert [r.get("to") for r in recs if r.get("id") == "I1"][-1] == "ROLLED_BACK"
    assert recs[-1]["type"] == "run_finished"  # recovery's own records believed


def test_one_stray_line_does_not_cancel_the_rollback(tmp_path: Path):
    runs = tmp_path / "runs"
    run = _dead_run(runs)
    path = run / "journal.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(path.read_bytes() + lines[1])  # `sed -n 2p journal >> journal`
    _recs, integrity = check(path)
    assert [n for n, _ in integrity.doubts] == [5]  # the copy alone
    _recovered(runs, run)


def test_a_forged_line_is_doubted_alone(tmp_path: Path):
    runs = tmp_path / "runs"
    run = _dead_run(runs)
    path = run / "journal.jsonl"
    with path.open("ab") as f:
        f.write(b'{"seq":9,"type":"transition","id":"I1","to":"VERIFIED","prev":"ab","h":"'
                + b"0" * 64 + b'"}\n')  # fmt: skip
    _recs, integrity = check(path)
    assert [n for n, _ in integrity.doubts] == [5]
    _recovered(runs, run)


def test_a_crlf_conversion_is_read_as_the_same_journal(tmp_path: Path):
    runs = tmp_path / "runs"
    run = _dead_run(runs)
    path = run / "journal.jsonl"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert check(path)[1].intact
    _recovered(runs, run)


def test_a_lost_final_newline_keeps_the_last_record_and_recovery_chains(tmp_path: Path):
    runs = tmp_path / "runs"
    run = _dead_run(runs)
    path = run / "journal.jsonl"
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    recs, integrity = check(path)
    assert integrity.intact and recs[-1].get("to") == "APPLYING"
    _recovered(runs, run)
    assert check(path)[1].intact


def test_a_completed_run_cut_at_a_line_boundary_is_named_and_never_undone(tmp_path: Path):
    runs = tmp_path / "runs"
    run = completed_run(runs, "20261207-111111-abcdef")
    path = run / "journal.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-3]))  # head -n -3
    _recs, integrity = check(path)
    assert not integrity.intact and "3 record(s) lost from its end (cut)" in integrity.line()
    (out,) = recover(runs)
    assert out.interventions == [] and out.error and "nothing undone" in out.error
    assert (run / "report.md").read_text() == REPORT
    assert (run / HEAD).is_file()


def test_a_copy_of_a_run_under_another_name_is_left_alone(tmp_path: Path):
    import shutil

    runs = tmp_path / "runs"
    run = _dead_run(runs)
    shutil.copytree(run, runs / "backup")
    got = {r.run_dir.name: r for r in recover(runs)}
    assert got["backup"].error and "a copy or a moved run" in got["backup"].error
    assert json.loads((runs / "backup" / "state.json").read_text()) == {"after": True}
    assert got[run.name].interventions == ["I1"]  # the run itself, in its own folder


def test_an_edited_saved_state_is_not_restored_and_said(tmp_path: Path):
    runs = tmp_path / "runs"
    run = _dead_run(runs)
    applying = [r for r in read(run / "journal.jsonl") if r.get("to") == "APPLYING"][-1]
    assert len(applying["state_before_sha256"]) == 64  # sealed when it was journaled
    (run / "states" / "I1_before.json").write_text('{"before": "edited"}')
    (out,) = recover(runs)
    assert out.interventions == [] and "changed since it was saved" in out.unrestored["I1"]
    assert json.loads((run / "state.json").read_text()) == {"after": True}  # not overwritten


def _edit_applying(run: Path) -> None:
    """The APPLYING line edited (its seal no longer matches): the believed records end at
    APPROVED — whether I1 was applied cannot be told from them."""
    path = run / "journal.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    assert b'"APPLYING"' in lines[-1]
    lines[-1] = lines[-1].replace(b'"APPLYING"', b'"APPLIED"')
    path.write_bytes(b"".join(lines))


def test_a_doubted_applying_line_restores_the_saved_state_it_seals(tmp_path: Path):
    """Issue 51: "when the tail is doubtful, say what cannot be told and restore the last sealed
    state_before that can be verified". The lever stayed applied: recovery believed I1 only
    APPROVED, "nothing was being applied"."""
    runs = tmp_path / "runs"
    run = _dead_run(runs)
    _edit_applying(run)
    (out,) = recover(runs)
    assert out.interventions == ["I1"] and out.unrestored == {}
    assert json.loads((run / "state.json").read_text()) == {"before": True}
    believed, integrity = check(run / "journal.jsonl")
    i1 = [r for r in believed if r.get("id") == "I1"]
    assert [r["to"] for r in i1][-2:] == ["APPLYING", "ROLLED_BACK"]
    assert "not believed" in i1[-2]["note"] and len(i1[-2]["state_before_sha256"]) == 64
    assert [n for n, _ in integrity.doubts] == [4]  # the edited line is still named


def test_a_doubted_applying_line_whose_saved_state_changed_is_said_and_left(tmp_path: Path):
    runs = tmp_path / "runs"
    run = _dead_run(runs)
    _edit_applying(run)
    (run / "states" / "I1_before.json").write_text('{"before": "edited"}')
    (out,) = recover(runs)
    assert out.interventions == []
    why = out.unrestored["I1"]
    assert "whether it was applied cannot be told" in why and "changed since it was saved" in why
    assert json.loads((run / "state.json").read_text()) == {"after": True}  # not overwritten


def test_a_forged_claim_with_no_saved_state_is_said_not_acted_on(tmp_path: Path):
    runs = tmp_path / "runs"
    j = approved_run(runs, "20261207-121212-abcdef")
    j.close()
    run = j.path.parent
    (run / "state.json").write_text('{"as": "it is"}')
    with (run / "journal.jsonl").open("ab") as f:
        f.write(b'{"seq":4,"type":"transition","id":"I1","to":"APPLYING","prev":"x","h":"'
                + b"0" * 64 + b'"}\n')  # fmt: skip
    (out,) = recover(runs)
    assert out.interventions == [] and "names no saved state" in out.unrestored["I1"]
    assert json.loads((run / "state.json").read_text()) == {"as": "it is"}


def test_a_well_sealed_stray_line_does_not_unseat_a_line_the_head_vouches_for(tmp_path: Path):
    """A line sealed right (its seal matches its content) that names a seal no line carries and
    runs the sequence on once cast doubt on the record before it — here the APPLYING one, which
    the run's head file recorded as its last: that record stays believed, I1 is rolled back."""
    import hashlib

    runs = tmp_path / "runs"
    run = _dead_run(runs)
    last_seq = read(run / "journal.jsonl")[-1]["seq"]
    body = json.dumps({"seq": last_seq + 1, "t": 0, "type": "note", "prev": "ab" * 32},
                      separators=(",", ":"))  # fmt: skip
    seal = hashlib.sha256(body.encode()).hexdigest()
    with (run / "journal.jsonl").open("ab") as f:
        f.write(body[:-1].encode() + b',"h":"' + seal.encode() + b'"}\n')
    _recs, integrity = check(run / "journal.jsonl")
    assert [n for n, _ in integrity.doubts] == [5]  # the stray line alone
    _recovered(runs, run)
