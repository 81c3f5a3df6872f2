"""Where `gitm-tui analyze`'s memory goes: the peak resident set of each stage, per trace size.

    python benchmarks/bench_memory.py [--events 2000000] [--memory-events 10000000]
                                      [--out benchmarks/results]

Each trace (the real 109k-event A100 trace, and the SYNTHETIC traces bench_import.py generates)
is analysed once in a fresh process, as ``gitm-tui analyze FILE --json --no-write`` runs it. At
every stage boundary the child reads its peak resident set since the last boundary (VmHWM),
then resets it (``/proc/self/clear_refs``, "5"): each row is the highest the process stood
while that stage ran. Linux only.

The resident set counts two kinds of pages: anonymous memory (what the process allocated) and
file-backed pages of the libraries it maps (numpy's, numba's LLVM: code, shared with every
process that maps them). How many of the latter are mapped depends on the page cache, not on
gitm: on this machine, one day, a process that had imported llvmlite.binding held 118 MiB, and
54 MiB once the page cache was dropped (``echo 1 > /proc/sys/vm/drop_caches``). Each row gives both at the stage's end, so a reader can tell a
change of gitm's memory from a change of the page cache.

bench_analyze.py measures the same command's peak from outside (the child's ru_maxrss); this
script says which stage sets it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import datasets  # noqa: E402  (benchmarks/datasets.py: the pinned inputs)
from bench_import import traces  # noqa: E402  (each input checked against its pin)

#: the stages timed, in the order analyze runs them (module: function); a boundary is a call's
#: start and its end, and what runs between two stages is a row of its own
STAGES = (
    ("engine.trace.kineto.kineto", "_build", "join the columns, derive kernels' work from shapes"),
    ("engine.analyze.compute", "_label", "decode regimes (embedding, Viterbi, κ)"),
    ("engine.analyze.compute", "launch_times", "each row's launch call"),
    ("engine.analyze.compute", "_roofline", "roofline bounds"),
    ("engine.analyze.compute", "copy_stats", "copies"),
    ("engine.analyze.compute", "_communication", "collectives' overlap"),
    ("engine.analyze.compute", "_invariants", "invariants"),
    ("engine.analyze.compute", "_levers", "every lever's replay"),
)

CHILD = r"""
import contextlib, functools, importlib, io, json, sys

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) / 1024
    return out

def reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

rows = []
def mark(label):
    s = status()
    rows.append({"stage": label, "peak": s["VmHWM"], "rss": s["VmRSS"],
                 "anon": s["RssAnon"], "file": s["RssFile"]})
    reset()

def llvm_mapped():
    mib, lib = 0.0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            if "-" in line.split(" ", 1)[0] and ":" not in line.split(" ", 1)[0]:
                lib = line.rstrip().endswith("libllvmlite.so")
            elif lib and line.startswith("Rss:"):
                mib += int(line.split()[1]) / 1024
    return mib

stages = json.loads(sys.argv[2])
reset()
from gitm_tui.commands.common import loading_modules
with loading_modules():  # what `gitm-tui analyze` imports before it reads (commands/analyze.py)
    from engine.analyze.advice import levers  # noqa: F401
    from engine.analyze.breakdown import steady  # noqa: F401
    from engine.analyze.api import analyze  # noqa: F401
    from engine.analyze.run import analyze_files  # noqa: F401
    from engine.planner.catalogue import catalogue  # noqa: F401
mark("imports")
llvm = llvm_mapped()
prev = ["read the file (streaming)"]
for mod, fn, _ in stages:
    m = importlib.import_module(mod)
    f = getattr(m, fn)
    def wrapped(*a, __f=f, __fn=fn, **k):
        mark(prev[0])
        r = __f(*a, **k)
        mark(__fn)
        prev[0] = f"after {__fn}, before the next stage"
        return r
    functools.update_wrapper(wrapped, f)
    setattr(m, fn, wrapped)
from gitm_tui.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["analyze", sys.argv[1], "--json", "--no-write"])
mark("after the last stage: the report")
print(json.dumps({"rc": rc, "rows": rows, "llvm": llvm}))
"""


def measure(path: Path) -> dict:
    """One analysis of ``path`` in a fresh child (cwd: benchmarks/, as bench_analyze runs it)."""
    stages = json.dumps([list(s) for s in STAGES])
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path.resolve()), stages],
        capture_output=True,
        text=True,
        cwd=HERE,
    )
    if out.returncode != 0:
        raise SystemExit(f"analyze {path.name} failed: {out.stderr[-500:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if r["rc"] != 0:
        raise SystemExit(f"analyze {path.name} exited {r['rc']}")
    seen = {row["stage"] for row in r["rows"]}
    missing = [fn for _, fn, _ in STAGES if fn not in seen]
    if missing:  # a stage renamed or no longer run: the table would silently lose it
        raise SystemExit(f"stages not run on {path.name}: {', '.join(missing)}")
    return r


def _table(results: list[tuple[str, int, dict]]) -> list[str]:
    what = {fn: w for _, fn, w in STAGES}
    labels: list[str] = []
    for _, _, r in results:  # stage rows in the order they ran (the first trace's order)
        for row in r["rows"]:
            if row["stage"] not in labels:
                labels.append(row["stage"])
    head = "| stage | " + " | ".join(f"{label} ({n:,} events)" for label, n, _ in results) + " |"
    out = [head, "|---|" + "---:|" * len(results)]
    for lab in labels:
        cells = []
        for _, _, r in results:
            got = [row for row in r["rows"] if row["stage"] == lab]
            if not got:
                cells.append("—")
                continue
            row = max(got, key=lambda x: x["peak"])
            cells.append(
                f"**{row['peak']:.0f}** (after: {row['anon']:.0f} anon + {row['file']:.0f} file)"
            )
        name = f"`{lab}`: {what[lab]}" if lab in what else lab
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    peaks = []
    for _, _, r in results:
        top = max(r["rows"], key=lambda x: x["peak"])
        peaks.append(f"**{top['peak']:.0f}** ({top['stage']})")
    out.append("| **peak of the run** | " + " | ".join(peaks) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--memory-events", type=int, default=10_000_000)
    ap.add_argument(
        "--repeats", type=int, default=3,
        help="runs per trace; the table shows the run whose peak is the median",
    )  # fmt: skip
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ns = ap.parse_args()
    if not Path("/proc/self/clear_refs").exists():
        raise SystemExit("this benchmark reads /proc (Linux)")
    inputs = traces(ns.events)
    if ns.memory_events:
        inputs.append(traces(ns.memory_events)[1])
    # a first run compiles the kernels in a child: warm the cache outside the measurement
    subprocess.run(
        [sys.executable, "-m", "gitm_tui", "analyze", str(inputs[0][1]), "--json", "--no-write"],
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=HERE,
    )
    time.sleep(0.5)
    while (
        subprocess.run(["pgrep", "-f", "engine.analyze.warm"], capture_output=True).returncode == 0
    ):
        time.sleep(0.5)
    results = []
    for label, path, n in inputs:
        runs = [measure(path) for _ in range(max(1, ns.repeats))]
        peaks = [max(x["peak"] for x in r["rows"]) for r in runs]
        r = runs[sorted(range(len(runs)), key=peaks.__getitem__)[len(runs) // 2]]
        r["run_peaks"] = peaks
        results.append((label, n, r))
        top = max(r["rows"], key=lambda x: x["peak"])
        print(f"{label}: peaks {peaks} MiB; median run's in {top['stage']}", file=sys.stderr)
    base = results[0][2]["rows"][0]
    llvm = results[0][2]["llvm"]
    growth = ""
    if len(results) >= 3:
        p2 = max(x["peak"] for x in results[1][2]["rows"])
        p10 = max(x["peak"] for x in results[2][2]["rows"])
        growth = (
            f"The median run's peak grows {p10 / p2:.2f}× from {results[1][1]:,} to "
            f"{results[2][1]:,} events ({p2:.0f} → {p10:.0f} MiB; the issue's goal: 1.5×)."
        )
    every = "; ".join(
        f"{label}: {', '.join(f'{p:.0f}' for p in r['run_peaks'])}" for label, _, r in results
    )
    lines = [
        "# Memory by stage: `gitm-tui analyze`",
        "",
        "Generated by `python benchmarks/bench_memory.py` on "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}. One fresh process per trace, as `gitm-tui analyze FILE "
        "--json --no-write` runs it; at each stage boundary the peak resident set since the last "
        "boundary (VmHWM, then reset through /proc/self/clear_refs). MiB. Beside each peak, "
        "what stayed resident at the stage's end: anonymous memory (allocated by the process) "
        f"and file-backed pages (the libraries' mapped code and data). {ns.repeats} runs per "
        "trace: the table is the run whose peak is the median; every run's peak (MiB): "
        f"{every}. The runs of one trace differ mostly by what the threaded read leaves on the "
        "heap, which every later stage stands on.",
        "",
        *_table(results),
        "",
        f"Before reading a byte, the process that has imported what `analyze` imports holds "
        f"{base['rss']:.0f} MiB: {base['anon']:.0f} MiB anonymous (Python's and the libraries' "
        f"objects, numba's loaded runtime, pydantic's models) and {base['file']:.0f} MiB of "
        f"mapped library files, {llvm:.0f} MiB of them numba's LLVM (libllvmlite.so). The "
        "file-backed part depends on the page cache (on this machine, a process that had imported "
        "llvmlite.binding held 118 MiB, and 54 MiB once the page cache was dropped), so compare "
        "runs by their anonymous "
        "memory as well as by their peaks. " + growth,
        "",
        *datasets.markdown("memory_stages"),
    ]
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "memory_stages.md").write_text("\n".join(lines))
    datasets.write_inputs(ns.out, "memory_stages")
    (ns.out / "memory_stages.json").write_text(
        json.dumps([{"trace": lab, "events": n, **r} for lab, n, r in results], indent=1)
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
