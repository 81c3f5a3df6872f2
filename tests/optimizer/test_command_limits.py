"""A ``--workload command`` program is bounded: by the run's budget, by a stop signal (its whole
process group ends, no new repeat starts), and in memory however much it prints (issue 13
items 3 and 15)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from engine.workloads.command import CommandSpec, CommandWorkload
from tests.paths import ROOT

CLI = [sys.executable, "-m", "gitm_tui"]


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "GITM_SCRATCH": str(tmp / "scratch"), "PYTHONPATH": str(ROOT)}


def _hanger(starts: Path) -> list[str]:
    """A program that records each start, starts a child that also hangs, and hangs."""
    code = (
        "import subprocess, sys, time\n"
        f"open({str(starts)!r}, 'a').write('start\\n')\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "time.sleep(600)\n"
        "print('t=1')\n"
    )
    return [sys.executable, "-c", code]


def _alive(pattern: str) -> bool:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return bool(out.stdout.strip())


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_a_hanging_program_ends_with_the_budget(tmp_path):
    starts = tmp_path / "starts.txt"
    r = subprocess.run(
        [
            *CLI,
            "--no-ui",
            "--workload",
            "command",
            "--budget",
            "4s",
            "--metric",
            r"t=([0-9.]+)",
            "--lever",
            "a=env:A=1,2",
            "--",
            *_hanger(starts),
        ],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=90,  # before the fix: 300 s per repeat, 4 repeats
    )
    assert "Traceback" not in r.stderr
    assert "budget" in r.stderr, r.stderr
    assert starts.read_text().count("start") == 1  # no repeat started once the budget ended


@pytest.mark.timeout(120)
def test_sigterm_ends_the_program_and_its_children_and_starts_no_repeat(tmp_path):
    if not _which("pgrep"):
        pytest.skip("pgrep is not installed")
    starts = tmp_path / "starts.txt"
    p = subprocess.Popen(
        [
            *CLI,
            "--no-ui",
            "--workload",
            "command",
            "--budget",
            "10m",
            "--metric",
            r"t=([0-9.]+)",
            "--lever",
            "a=env:A=1,2",
            "--",
            *_hanger(starts),
        ],
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        t = time.monotonic()
        while not (starts.exists() and starts.read_text()) and time.monotonic() - t < 60:
            time.sleep(0.1)
        time.sleep(0.5)  # the hanging child is started
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err  # INTERRUPTED
    assert "Traceback" not in err
    assert starts.read_text().count("start") == 1
    assert not _alive(str(starts))  # the program is gone
    assert not _alive("import time; time.sleep(600)")  # and so is its child


def _which(name: str) -> bool:
    import shutil

    return shutil.which(name) is not None


def test_output_is_scanned_as_it_streams_not_kept(tmp_path):
    """64 MB of output then the metric: before, the whole output was held twice (bytes and
    text); now a few hundred characters are kept, whatever the program prints."""
    code = (
        "import sys\n"
        "line = 'x' * 1023 + '\\n'\n"
        "for _ in range(64 * 1024): sys.stdout.write(line)\n"
        "sys.stdout.write('a line longer than the scan window: ' + 'y' * 200000 + '\\n')\n"
        "print('t=2.5')\n"
    )
    wl = CommandWorkload(CommandSpec(argv=(sys.executable, "-c", code), metric=r"t=([0-9.]+)"))
    tracemalloc.start()
    try:
        run = wl.run_once(wl.base)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.ok and run.value == 2.5
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    assert len(run.output_tail) <= 400 and run.output_tail.rstrip().endswith("t=2.5")


def test_metric_and_check_read_across_stdout_and_stderr(tmp_path):
    code = "import sys\nprint('t=3')\nsys.stderr.write('checksum=42\\n')\n"
    wl = CommandWorkload(
        CommandSpec(argv=(sys.executable, "-c", code), metric=r"t=([0-9.]+)", check="checksum=42")
    )
    run = wl.run_once(wl.base)
    assert run.ok and run.value == 3.0


def test_a_cancelled_workload_starts_nothing(tmp_path):
    wl = CommandWorkload(CommandSpec(argv=(sys.executable, "-c", "print('t=1')"), metric=r"t=(\d)"))
    wl.cancel()
    m = wl.measure(wl.base, 4)
    assert len(m.runs) == 1 and not m.runs[0].ok and "stopped" in m.runs[0].reason
