"""A ``--workload command`` program that lies (issue 36): a metric of nan, inf, 0 or below is a
failed measurement — never a gain, never a crash, never NaN/Infinity in the JSON lines — and a
``--metric``/``--check`` regex that backtracks catastrophically is refused up front (exit 2,
one line) instead of hanging the run past its budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.workloads.command import LINE_S, CommandError, CommandSpec, CommandWorkload
from tests.paths import ROOT

CLI = [sys.executable, "-m", "gitm_tui"]
#: prints time=$V: the lever sets what the candidate configuration reports
PRINT_V = [sys.executable, "-c", "import os; print('time=' + os.environ['V'])"]
BACKTRACKING = r"^(?:a+)+b|time=([0-9]+)"


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "GITM_SCRATCH": str(tmp / "scratch"), "PYTHONPATH": str(ROOT)}


def _cli(tmp: Path, metric: str, lever: str, argv: list[str]) -> subprocess.CompletedProcess:
    args = ["--no-ui", "--workload", "command", "--metric", metric, "--lever", lever]
    args += ["--approve", "auto", "--budget", "6s", "--", *argv]
    # the timeout only proves the run ends; nothing here measures time
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=_env(tmp), timeout=120, cwd=tmp
    )


def _strict_lines(stdout: str) -> list[dict]:
    """Every JSON line, parsed with NaN/Infinity refused (they are not JSON)."""

    def refuse(tok: str) -> None:
        raise AssertionError(f"{tok} in the JSON lines")

    return [json.loads(ln, parse_constant=refuse) for ln in stdout.splitlines() if ln.strip()]


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "1e999", "0", "0.0", "-3"])
def test_a_metric_that_is_not_finite_and_positive_is_a_failed_run(text):
    wl = CommandWorkload(
        CommandSpec(argv=(sys.executable, "-c", f"print('t={text}')"), metric=r"t=(\S+)")
    )
    r = wl.run_once(wl.base)
    assert not r.ok
    assert r.value is None
    assert r.reason == f"metric {text!r} is not a finite positive number (a failed measurement)"


def test_a_finite_positive_metric_still_counts():
    wl = CommandWorkload(
        CommandSpec(argv=(sys.executable, "-c", "print('t=2.5')"), metric=r"t=(\S+)")
    )
    r = wl.run_once(wl.base)
    assert r.ok and r.value == 2.5


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("bad", ["nan", "inf", "0"])
def test_a_candidate_reporting_nan_inf_or_zero_is_rolled_back(tmp_path, bad):
    r = _cli(tmp_path, r"time=(\S+)", f"v=env:V=1.0,{bad}", PRINT_V)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    events = _strict_lines(r.stdout)
    final = [e for e in events if e.get("type") == "intervention" and e["id"] == "I1"][-1]
    assert final["state"] == "ROLLED_BACK"
    assert "not a finite positive number" in final["note"]
    assert final["measured_gain"] is None
    assert not any(e.get("state") == "VERIFIED" for e in events)
    done = [e for e in events if e.get("type") == "run_finished"][-1]
    assert done["gain"] == 0.0 and done["target_met"] is False


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_baseline_metric_of_zero_is_one_line_and_exit_3(tmp_path):
    r = _cli(tmp_path, r"time=(\S+)", "v=env:V=1,2", [sys.executable, "-c", "print('time=0')"])
    assert r.returncode == 3, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "ZeroDivision" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("gitm-tui: error:")]
    assert errors == [
        "gitm-tui: error: the program's baseline run failed: metric '0' is not a finite "
        "positive number (a failed measurement) (last output line: time=0)"
    ]
    _strict_lines(r.stdout)


#: patterns that backtrack on the line they are given (Python's re: minutes to hours each)
SLOW = [
    (r"(?:a|aa)+b=([0-9]+)", "a" * 60),
    (r"t=([0-9]+)(?:a|aa)*c", "t=1" + "a" * 60),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("pattern", "line"), SLOW)
def test_a_backtracking_metric_fails_the_run_at_its_time_limit(pattern, line):
    """Issue 36: a backtracking --metric ran past the budget and SIGTERM then gave 143 and no
    report. The matcher stops itself after LINE_S on a line: the run fails and says why."""
    code = f"print({line!r}); print('t=5')"
    wl = CommandWorkload(CommandSpec(argv=(sys.executable, "-c", code), metric=pattern))
    r = wl.run_once(wl.base)
    assert not r.ok and r.value is None
    assert r.reason.startswith(f"the --metric pattern ran over {LINE_S:g} s on one line")
    assert "backtracks" in r.reason


@pytest.mark.timeout(120)
def test_a_backtracking_check_is_named_as_the_check():
    pattern, line = SLOW[0]
    code = f"print({line!r}); print('t=5')"
    spec = CommandSpec(argv=(sys.executable, "-c", code), metric=r"t=(\d+)", check=pattern)
    wl = CommandWorkload(spec)
    r = wl.run_once(wl.base)
    assert not r.ok and r.reason.startswith("the --check pattern ran over")


@pytest.mark.parametrize(
    "pattern",
    [
        BACKTRACKING,
        r"time_s=([0-9.]+)",
        r"t=([0-9]+(?:\.[0-9]+)?)",
        r"version ((?:\d+\.)+\d+)",  # a repeat around a repeat that cannot blow up
        r"(?:\d|\.)+ t=(\d+)",
        r"^(?:a++)+b|time=([0-9]+)",
        r"^(?:(?>a+))+b|time=([0-9]+)",
    ],
)
def test_patterns_are_accepted_and_only_a_bad_regex_is_refused(pattern):
    CommandSpec(argv=("true",), metric=pattern)
    with pytest.raises(CommandError, match=r"bad --metric '\(unclosed'"):
        CommandSpec(argv=("true",), metric="(unclosed")


@pytest.mark.timeout(180)
def test_the_backtracking_metric_from_issue_36_reads_the_metric(tmp_path):
    """The probe's own pattern on its own 34 a's: the matcher finishes it at once now."""
    code = "print('a' * 34); print('time=5')"
    r = _cli(tmp_path, BACKTRACKING, "v=env:V=1,2", [sys.executable, "-c", code])
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert "baseline 5" in r.stderr
