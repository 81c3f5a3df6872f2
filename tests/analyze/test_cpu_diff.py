"""`gitm-tui diff` of two CPU-only traces (issue 50: it refused them — "diff compares GPU rows" —
so a CPU user could not compare two runs). The before trace is the tests' real CPU-only
torch.profiler trace; the after one is that trace edited here (SYNTHETIC): aten::sqrt removed,
aten::div renamed, so what changed is known."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

CPU = ROOT / "tests" / "data" / "traces" / "cpu" / "cpu_only_train_small.json.gz"


def _edited(tmp: Path) -> Path:
    doc = json.loads(gzip.decompress(CPU.read_bytes()))
    events = []
    for e in doc["traceEvents"]:
        if e.get("name") == "aten::sqrt":
            continue
        if e.get("name") == "aten::div":
            e = {**e, "name": "aten::true_divide"}
        events.append(e)
    doc["traceEvents"] = events
    out = tmp / "after.json.gz"
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def _diff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gitm_tui", "diff", *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip


def test_two_cpu_only_traces_are_compared_operator_by_operator(tmp_path: Path):
    after = _edited(tmp_path)
    p = _diff(str(CPU), str(after), "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["kind"] == "cpu_only" and d["per"] == "step"
    assert d["before"]["steps"] == d["after"]["steps"] == 8
    ops = {o["name"]: o for o in d["operators"]}
    assert ops["aten::sqrt"]["status"] == "disappeared" and ops["aten::sqrt"]["calls_after"] == 0
    assert ops["aten::true_divide"]["status"] == "appeared"
    assert ops["aten::div"]["status"] == "disappeared"
    same = ops["aten::mm"]
    assert same["status"] == "changed" and same["delta_ns"] == 0 and same["calls_before"] == 40
    text = _diff(str(CPU), str(after))
    assert text.returncode == 0 and "CPU-only traces (no GPU rows)" in text.stdout
    assert "aten::sqrt" in text.stdout and "(gone)" in text.stdout and "(new)" in text.stdout


def test_a_cpu_only_trace_against_a_gpu_trace_is_one_line(tmp_path: Path):
    gpu = ROOT / "tests" / "data" / "traces" / "kineto" / "a100_triton_one_kernel.json.gz"
    p = _diff(str(CPU), str(gpu))
    assert p.returncode == 3 and "nothing alike to compare" in p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
