"""Run folders as a run leaves them, built through the journal itself (SYNTHETIC): shared by the
recovery tests and the hostile corpus (tests/hostile_corpus.py)."""

from __future__ import annotations

from pathlib import Path

from engine.store.journal import Journal, State

#: the id the dead runs here are given
DEAD = "20261207-101010-abcdef"
#: the report a completed run wrote, which recovery must never rewrite
REPORT = "# report\n\n## Result\n\nkept pinned_memory\n"


def approved_run(runs: Path, name: str = DEAD, by: str = "tui") -> Journal:
    """A run whose I1 was proposed and approved (its journal open for more)."""
    run = runs / name
    j = Journal(run / "journal.jsonl")
    j.append({"type": "run_started", "run_id": run.name})
    j.transition("I1", State.PROPOSED, lever="pinned_memory", safety="SAFE")
    j.transition("I1", State.APPROVED, by=by)
    return j


def _applying(j: Journal) -> Path:
    """I1 goes APPLYING, its saved state sealed in that record; the lever's state on disk."""
    run = j.path.parent
    (run / "states").mkdir()
    (run / "states" / "I1_before.json").write_text('{"before": true}')
    j.transition("I1", State.APPLYING, state_before="states/I1_before.json")
    (run / "state.json").write_text('{"after": true}')  # the lever applied
    return run


def dead_run(runs: Path, name: str = DEAD) -> Path:
    """A run killed right after I1 went APPLYING."""
    j = approved_run(runs, name)
    run = _applying(j)
    j.close()
    return run


def completed_run(runs: Path, name: str = DEAD) -> Path:
    """A run that finished with I1 kept and its report written."""
    j = approved_run(runs, name, by="policy:auto")
    run = _applying(j)
    j.transition("I1", State.APPLIED)
    j.transition("I1", State.VERIFIED, reason="kept")
    j.append({"type": "run_finished", "status": "completed"})
    j.close()
    (run / "report.md").write_text(REPORT)
    return run
