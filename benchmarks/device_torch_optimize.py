"""The replay's error on real hardware (issue 15, must-show 4): the three built-in workloads'
real PyTorch models run through ``engine.optimize()`` on a CUDA device, with the attribute
phase's torch.profiler capture feeding the replay; per lever, the predicted gain (and its
interval) beside the measured one.

    python benchmarks/device_torch_optimize.py [--budget 150s] [--out benchmarks/results]

Needs a CUDA device and torch (the device machine's image has both). About 3 × the budget
(default 150 s each: under 10 minutes in all). Every lever is approved (``approve="all"``) so
NUMERICS ones are measured too; each is kept or rolled back by the same gate as any run.
Writes ``torch_device_replay.md`` and ``.json`` under --out, with the machine and date. On a
machine without CUDA it says so in one line and writes nothing (exit 2).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", default="150s")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--workloads", default="hft-lob,af2,kitti")
    ns = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("device_torch_optimize: no CUDA device here: nothing measured", file=sys.stderr)
        return 2
    from engine import optimize
    from engine.workloads.models import job

    gpu = torch.cuda.get_device_name(0)
    rows: list[dict[str, object]] = []
    for name in ns.workloads.split(","):
        t0 = time.monotonic()
        res = optimize(job(name, "cuda"), budget=ns.budget, target=0.5, approve="all", repeats=3)
        for iv in res.interventions.values():
            rows.append(
                {
                    "workload": name,
                    "lever": iv["lever"],
                    "safety": iv["safety"],
                    "state": iv["state"],
                    "predicted": iv["predicted_gain"],
                    "measured": iv["measured_gain"],
                    "evidence": iv["evidence"],
                    "note": iv["note"],
                }
            )
        print(f"{name}: {res.status}, gain {res.gain}, {time.monotonic() - t0:.0f} s", flush=True)

    def pct(x: object) -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:+.1%}"

    lines = [
        "# The replay's error on real hardware (torch levers, real models)",
        "",
        f"{time.strftime('%Y-%m-%d')}, {gpu}, torch {torch.__version__}, Python "
        f"{platform.python_version()}; `python benchmarks/device_torch_optimize.py "
        f"--budget {ns.budget}`. Models and inputs are the built-in SYNTHETIC ones "
        "(engine/workloads/models/). Predicted: the replay of the captured trace (— = measured "
        "only: the trace shows no target, or the lever has no replay); error = measured − "
        "predicted.",
        "",
        "| workload | lever | safety | predicted | measured | error | final state |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        p, m = r["predicted"], r["measured"]
        err = (
            f"{m - p:+.1%}"
            if isinstance(p, float) and isinstance(m, float) and not math.isnan(p)
            else "—"
        )
        lines.append(
            f"| {r['workload']} | {r['lever']} | {r['safety']} | {pct(p)} | {pct(m)} | {err} "
            f"| {r['state']} |"
        )
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "torch_device_replay.md").write_text("\n".join(lines) + "\n")
    (out / "torch_device_replay.json").write_text(json.dumps(rows, indent=1, default=str))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
