"""A CPU-only trace's collectives (issue 50): a gloo job's gloo:all_reduce ranges — often the
most of what its trace records — are reported with their count, time and share, in the text,
the JSON and a diff. The trace is the tests' real CPU-only trace with SYNTHETIC gloo ranges
added inside each step (their shape as PyTorch's ProcessGroupGloo records them: cpu_op,
``gloo:all_reduce``, Input Dims)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from engine.analyze.breakdown.cpu_trace import read_cpu_summary
from tests.paths import ROOT

CPU = ROOT / "tests" / "data" / "traces" / "cpu" / "cpu_only_train_small.json.gz"


def with_gloo(tmp: Path, dur_us: float = 100.0) -> Path:
    doc = json.loads(gzip.decompress(CPU.read_bytes()))
    ev = doc["traceEvents"]
    steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    for i, s in enumerate(steps):
        ev.append({
            "ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": s["pid"],
            "tid": s["tid"], "ts": s["ts"] + s["dur"] - dur_us - 5, "dur": dur_us,
            "args": {"External id": 90000 + i, "Input Dims": [[2049000]], "Input type": ["float"]},
        })  # fmt: skip
    out = tmp / "gloo.json.gz"
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def test_gloo_ranges_are_reported_as_the_jobs_collectives(tmp_path: Path):
    c = read_cpu_summary(with_gloo(tmp_path))
    assert c.collectives is not None and c.collectives.calls == 8
    assert abs(c.collectives.time_ns - 8 * 100_000) <= 8  # each 100 µs, inside its step
    assert "gloo:all_reduce ×8" in c.collectives.what
    assert read_cpu_summary(CPU).collectives is None  # none recorded: no line
    p = subprocess.run(
        [sys.executable, "-m", "gitm_tui", "analyze", str(tmp_path / "gloo.json.gz"), "--no-write"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("collectives"))
    assert "0.80 ms" in line and "(8 ranges: gloo:all_reduce ×8)" in line
    j = subprocess.run(
        [sys.executable, "-m", "gitm_tui", "analyze", str(tmp_path / "gloo.json.gz"), "--json",
         "--no-write"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    doc = json.loads(j.stdout)
    one = doc[0] if isinstance(doc, list) else doc
    assert one["collectives"]["calls"] == 8
