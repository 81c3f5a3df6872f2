"""Our critical path beside HTA's (`TraceAnalysis.critical_path_analysis`, HTA 0.5.0) on every
real Kineto trace in tests/data, in HTA's categories (``bound_by``): writes
tests/data/hta_critical_path.json, which tests/schedule/test_critical_path_hta.py holds us to.

HTA 0.5.0's critical path fails under pandas 3 (``DataFrame.drop(axis=..., columns=...)``), so
HTA runs in an interpreter of its own with pandas < 2.3, given by ``--hta-python``:

    python3 -m venv /tmp/htavenv && /tmp/htavenv/bin/pip install HolisticTraceAnalysis==0.5.0 'pandas<2.3'
    .venv/bin/python benchmarks/critical_path_vs_hta.py --hta-python /tmp/htavenv/bin/python

Each trace: HTA with annotation "" (the whole trace, as ours), its path's total and its
duration per bound_by; ours: ``Analysis.critical_path.hta_bound_by_ns``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "tests" / "data" / "traces" / "kineto"
OUT = ROOT / "tests" / "data" / "hta_critical_path.json"

_HTA = r"""
import json, logging, os, shutil, sys, tempfile
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
d = tempfile.mkdtemp()
shutil.copy(sys.argv[1], d)
ta = TraceAnalysis(trace_dir=d)
rank = next(iter(ta.t.traces))
g, ok = ta.critical_path_analysis(rank=rank, annotation="", instance_id=None)
edf = g.get_critical_path_breakdown()
by = {k: int(v) for k, v in edf.groupby("bound_by").duration.sum().items() if k}
print(json.dumps({"ok": bool(ok), "total_us": int(edf.duration.sum()), "by_us": by}))
"""


def ours(path: Path) -> dict[str, object] | None:
    from engine.analyze.compute import analyze_trace
    from engine.trace.read import read_trace

    cp = analyze_trace(read_trace(path)).analysis.critical_path
    if cp is None:
        return None
    return {"total_ns": cp.total_ns, "by_ns": cp.hta_bound_by_ns}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hta-python", required=True, help="an interpreter with HTA 0.5.0")
    args = ap.parse_args(argv)
    rows = []
    for path in sorted(TRACES.glob("*.json.gz")):
        mine = ours(path)
        if mine is None:
            continue
        run = subprocess.run(
            [args.hta_python, "-c", _HTA, str(path)], capture_output=True, text=True, timeout=900
        )
        if run.returncode != 0:
            print(f"{path.name}: HTA failed: {run.stderr.strip().splitlines()[-1:]}")
            continue
        hta = json.loads(run.stdout.strip().splitlines()[-1])
        rows.append({"trace": path.name, "ours": mine, "hta": hta})
        print(path.name, json.dumps(rows[-1]))
    OUT.write_text(json.dumps({"hta": "HolisticTraceAnalysis 0.5.0", "traces": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
