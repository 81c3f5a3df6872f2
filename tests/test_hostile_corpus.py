"""The hostile corpus in CI (issue 36 item 6): every case in tests/hostile_corpus.py, run as the
real program, holds to one rule — no traceback, no hang, its documented exit code with one
clear error line, no raw escape byte in what it prints, nothing written outside the run store."""

from __future__ import annotations

import subprocess

import pytest

from tests.hostile_corpus import CASES, OK, Case, run


@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_input_gets_its_exit_code_and_one_line(case: Case, tmp_path):
    try:
        o = run(case, tmp_path, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case.name}: no answer in 120 s (a hang)")
    both = o.stdout + o.stderr
    assert o.code == case.code, f"{case.name}: exit {o.code}, want {case.code}\n{o.stderr[-2000:]}"
    assert "Traceback" not in both and "internal error" not in both
    assert "\x1b" not in both and "\x07" not in both, "a raw escape byte reached the output"
    assert not o.outside, f"written outside the run store: {o.outside}"
    assert not list((tmp_path / "scratch").glob("crashes/*")), "a crash file was saved"
    errors = [ln for ln in o.stderr.splitlines() if ln.startswith("gitm-tui: error:")]
    if case.code == OK:
        assert not errors, errors
        shown = o.stdout + o.stderr  # (a warning line: stderr)
    else:
        assert len(errors) == 1, errors
        shown = errors[0]
    for word in case.words:
        assert word in shown, f"{case.name}: {word!r} not in {shown[:300]!r}"
    case.after(tmp_path / "scratch" / "runs")  # nothing the user had is lost


def test_the_corpus_covers_every_surface():
    """A case list that lost a surface would pass vacuously: it must keep all of them."""
    firsts = {c.args[0] for c in CASES}
    assert {"analyze", "audit", "--no-ui", "approve"} <= firsts
    assert len({c.name for c in CASES}) == len(CASES) >= 25
