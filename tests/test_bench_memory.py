"""benchmarks/bench_memory.py: every stage it names is run by `analyze` (a renamed stage would
drop out of its table unseen), and each boundary reads a peak at least what stayed resident."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

bench_memory = pytest.importorskip("bench_memory")

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="reads /proc (Linux)"
)


def test_every_stage_is_measured_on_a_real_trace():
    r = bench_memory.measure(ROOT / "tests/data/traces/kineto/a100_alexnet_2streams.json.gz")
    stages = [row["stage"] for row in r["rows"]]
    assert stages[0] == "imports" and stages[-1] == "after the last stage: the report"
    for _, fn, _ in bench_memory.STAGES:
        assert fn in stages
    for row in r["rows"]:
        assert row["peak"] >= row["rss"] - 1  # MiB, read a moment apart
        assert abs(row["anon"] + row["file"] - row["rss"]) < 8  # (+ shared memory)
    table = bench_memory._table([("alexnet", 79, r)])
    assert table[-1].startswith("| **peak of the run** | **")


def test_a_stage_that_is_not_run_is_an_error(monkeypatch):
    # the trace names its GPU (an A100): the decode never needs this fallback
    unused = ("engine.analyze.compute", "_without_hardware_evidence", "hardware unknown")
    monkeypatch.setattr(bench_memory, "STAGES", (*bench_memory.STAGES, unused))
    with pytest.raises(SystemExit, match=r"stages not run on .*: _without_hardware_evidence"):
        bench_memory.measure(ROOT / "tests/data/traces/kineto/a100_alexnet_2streams.json.gz")
