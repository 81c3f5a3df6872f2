"""Gains you can trust on a busy machine (issue 34): the optimize loop on real PyTorch programs
while a background process loads the CPU, on and off, as other work on a shared machine does.

    python benchmarks/bench_loaded_machine.py [--tree DIR] [--label NAME] [--runs 3] [--only train|models]

Starts the load (one busy process: 20 s on, 10 s off, for the whole benchmark; ``--load
constant`` keeps it on, ``--load none`` measures a quiet machine), then runs

- ``gitm-tui --no-ui --workload torch --budget 3m --target 10% --approve auto -- python
  benchmarks/programs/train_cnn.py`` ``--runs`` times (an unmodified script: small CNN,
  DataLoader, Adam);
- ``gitm-tui --no-ui --workload kitti|af2 --device cpu --budget 90s --approve auto`` once each
  (the built-in real models on the CPU);

and prints one line per run: the verdict, the gain and its interval, what was kept, the A/A,
and the seconds the run took. ``--tree`` runs another checkout's code (an earlier commit, to
compare before and after) with this same Python. Results go to
benchmarks/results/loaded_machine_<label>.json. Nothing is asserted: this is a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRAIN = HERE / "programs" / "train_cnn.py"
import datasets  # noqa: E402  (benchmarks/datasets.py: the pinned inputs)

#: one busy process; "cycle": 20 s on, 10 s off (load that changes mid-run); "constant": on
LOAD = {
    "cycle": (
        "import time\n"
        "while True:\n"
        "    t = time.monotonic()\n"
        "    while time.monotonic() - t < 20:\n"
        "        sum(i * i for i in range(10000))\n"
        "    time.sleep(10)\n"
    ),
    "constant": "while True:\n    sum(i * i for i in range(10000))\n",
}


def run(tree: Path, args: list[str], scratch: Path) -> dict:
    env = {**os.environ, "GITM_SCRATCH": str(scratch), "PYTHONPATH": str(tree)}
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "gitm_tui", "--no-ui", *args],
        capture_output=True, text=True, cwd=tree, env=env, timeout=900,
    )  # fmt: skip
    wall = time.monotonic() - t0
    fin = {}
    for line in p.stdout.splitlines():
        if line.startswith("{") and '"run_finished"' in line:
            fin = json.loads(line)
    summary = next(
        (x for x in p.stderr.splitlines() if x.startswith("gitm-tui: target ")), ""
    ).removeprefix("gitm-tui: ")
    aa = next((x for x in p.stderr.splitlines() if "baseline " in x and "A/A" in x), "")
    return {
        "args": args,
        "exit": p.returncode,
        "wall_s": round(wall, 1),
        "summary": summary,
        "baseline_and_aa": aa.removeprefix("gitm-tui: info: "),
        "verdict": fin.get("verdict"),
        "gain": fin.get("gain"),
        "gain_low": fin.get("gain_low"),
        "gain_high": fin.get("gain_high"),
        "target_met": fin.get("target_met"),
        "stderr_tail": p.stderr[-600:] if p.returncode else "",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose code runs")
    ap.add_argument("--label", default="after")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", choices=("train", "models", "all"), default="all")
    ap.add_argument("--load", choices=("cycle", "constant", "none"), default="cycle")
    a = ap.parse_args()
    datasets.verify(TRAIN)  # the unmodified script, checked against its pin (exit 3 if it differs)
    load = None if a.load == "none" else subprocess.Popen([sys.executable, "-c", LOAD[a.load]])
    out = []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            jobs: list[list[str]] = []
            if a.only in ("train", "all"):
                train = ["--workload", "torch", "--budget", "3m", "--target", "10%",
                         "--approve", "auto", "--", sys.executable, str(TRAIN)]  # fmt: skip
                jobs += [train] * a.runs
            if a.only in ("models", "all"):
                for m in ("kitti", "af2"):
                    jobs.append(["--workload", m, "--device", "cpu", "--budget", "90s",
                                 "--approve", "auto"])  # fmt: skip
            for i, job in enumerate(jobs):
                r = run(a.tree.resolve(), job, Path(scratch) / str(i))
                out.append(r)
                what = "train_cnn.py" if "--" in job else job[1]
                print(f"[{a.label}] {what}: {r['wall_s']:.0f} s, exit {r['exit']}", flush=True)
                print(f"    {r['baseline_and_aa']}", flush=True)
                print(f"    {r['summary']}", flush=True)
    finally:
        if load is not None:
            load.kill()
    dest = HERE / "results" / f"loaded_machine_{a.label}.json"
    dest.write_text(json.dumps(out, indent=1) + "\n")
    inputs = datasets.write_inputs(HERE / "results", f"loaded_machine_{a.label}")
    print(f"results: {dest.relative_to(ROOT)}, inputs: {inputs.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
