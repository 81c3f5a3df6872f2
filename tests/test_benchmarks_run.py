"""Every benchmark script (and the first run's capture script in screenshots/) starts: its
imports resolve and its options parse (`--help`). A script
that no longer imports (a class moved) otherwise shows only when someone regenerates its table —
bench_sampler.py had been broken since the layers moved the simulated backend (issue 14)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [
    *sorted((ROOT / "benchmarks").glob("bench_*.py")),
    ROOT / "screenshots" / "first_run_capture.py",
]


def test_there_are_benchmarks():
    assert len(SCRIPTS) >= 9 and all(p.is_file() for p in SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_script_starts(script: Path):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage:" in r.stdout
