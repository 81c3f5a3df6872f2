"""The fixed cost of one small analysis: where the time of `gitm-tui analyze` on a small real
trace goes, against `gitm-tui --help` (the floor of starting the command at all).

    python benchmarks/bench_fixed_cost.py [--repeats 7] [--out benchmarks/results]

Inputs: three small real traces in tests/data/traces (a one-kernel Kineto trace, a 4,000-row
Kineto trace, a small Nsight Systems export), and for the table of a small file analysed
without numba five more of growing size, each checked against its pin. Each figure is the
median of ``--repeats`` fresh processes, the commands interleaved (help, analyze, …) so a drift
of the machine's speed weighs on all of them alike; kernels are in numba's disk cache (one
untimed run first).

The breakdown reads ``python -X importtime``: the self time of every module imported, summed by
top-level package, and the cumulative time of the engine modules that pull in the most; the
rest of the wall time is Python's start, reading, analysing and printing.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import datasets  # noqa: E402  (benchmarks/datasets.py: the pinned inputs)
from bench_analyze import _timed  # noqa: E402  (a fresh child, its peak RSS)
from dataset_pins import LEAN_LADDER, SMALL_TRACES  # noqa: E402

#: (label, path) of each small real trace, pinned in benchmarks/datasets.json
TRACES = tuple((name, ROOT / "tests/data/traces" / rel) for name, rel, _ in SMALL_TRACES)
#: the lean table's traces: the small ones, then the ladder of growing size
LADDER = TRACES + tuple((name, ROOT / "tests/data/traces" / rel) for name, rel, _ in LEAN_LADDER)

#: `analyze FILE --no-write` with the lean path (engine.analyze.run.lean) forced on or off
LEAN_DRIVER = (
    "import sys\n"
    "import engine.analyze.run as run\n"
    "if sys.argv[1] == 'numba':\n"
    "    run.LEAN_MAX_BYTES = -1\n"
    "else:\n"
    "    run.LEAN_MAX_BYTES = run.LEAN_MAX_ROWS = 10**12\n"
    "from gitm_tui.cli import main\n"
    "sys.argv = ['gitm-tui', 'analyze', sys.argv[2], '--no-write']\n"
    "sys.exit(main())\n"
)


def imports(argv: list[str]) -> tuple[float, dict[str, float], list[tuple[str, float]]]:
    """(total import seconds, self seconds by top-level package, the engine/gitm_tui modules
    with the largest cumulative import time) of one run of ``argv`` under -X importtime."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        capture_output=True,
        text=True,
        cwd=HERE,
    )
    by_pkg: dict[str, float] = defaultdict(float)
    cumulative: list[tuple[str, float]] = []
    total = 0.0
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, raw = line[len("import time:") :].split("|")
        mod = raw.strip()
        depth = (len(raw) - len(raw.lstrip()) - 1) // 2  # "| a", "|   a.b": two spaces a level
        by_pkg[mod.split(".", 1)[0]] += int(self_us.strip()) / 1e6
        if depth == 0:
            total += int(cum_us.strip()) / 1e6
        if mod.split(".", 1)[0] in ("engine", "gitm_tui"):
            cumulative.append((mod, int(cum_us.strip()) / 1e6))
    cumulative.sort(key=lambda x: -x[1])
    return total, dict(by_pkg), cumulative[:12]


def lean_table(repeats: int) -> list[str]:
    """Each ladder trace analysed without numba (read by the scanner's twin, every kernel
    interpreted) and through numba (warm cache): the medians of ``repeats`` interleaved pairs
    of fresh processes, with the file's size and GPU rows."""
    from engine.trace.read import read_trace

    rows = ["| trace | bytes | GPU rows | without numba s | through numba s | ratio |"]
    rows.append("|---|---:|---:|---:|---:|---:|")
    for label, path in LADDER:
        datasets.verify(path)
        argv = {m: [sys.executable, "-c", LEAN_DRIVER, m, str(path)] for m in ("lean", "numba")}
        for a in argv.values():
            _timed(a)
        got: dict[str, list[float]] = {"lean": [], "numba": []}
        for _ in range(repeats):
            for m, a in argv.items():
                got[m].append(_timed(a)["seconds"])
        lean, numba = statistics.median(got["lean"]), statistics.median(got["numba"])
        n = len(read_trace(path).segments)
        rows.append(
            f"| {label} | {path.stat().st_size:,} | {n:,} | {lean:.3f} | {numba:.3f} | "
            f"{lean / numba:.2f} |"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ns = ap.parse_args()
    for _label, path in TRACES:
        datasets.verify(path)
    gitm = [sys.executable, "-m", "gitm_tui"]
    commands: dict[str, list[str]] = {"gitm-tui --help": [*gitm, "--help"]}
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in TRACES:
            commands[f"analyze {label} --no-write"] = [*gitm, "analyze", str(path), "--no-write"]
            out = str(Path(tmp) / label)
            commands[f"analyze {label} (writes its outputs)"] = [
                *gitm, "analyze", str(path), "--out", out,
            ]  # fmt: skip
        for argv in commands.values():  # kernels into numba's cache, outputs' folders made
            _timed(argv)
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in commands}
        for _ in range(ns.repeats):
            for k, argv in commands.items():
                runs[k].append(_timed(argv))
        first = commands[f"analyze {TRACES[0][0]} --no-write"]
        total, by_pkg, cumulative = imports(first[1:] if first[0] == sys.executable else first)
    help_s = statistics.median(r["seconds"] for r in runs["gitm-tui --help"])
    lines = [
        "# The fixed cost of one small analysis",
        "",
        f"Generated by `python benchmarks/bench_fixed_cost.py --repeats {ns.repeats}` on "
        f"{time.strftime('%Y-%m-%d')}: {platform.machine()}, {_cores()} cores, Python "
        f"{platform.python_version()}. Each figure is the median of {ns.repeats} fresh "
        "processes, the commands interleaved; numba's disk cache warm.",
        "",
        "| command | median s | min … max s | × `--help` | peak MiB |",
        "|---|---:|---:|---:|---:|",
    ]
    for k, rs in runs.items():
        secs = sorted(r["seconds"] for r in rs)
        med = statistics.median(secs)
        peak = statistics.median(r["peak_mib"] for r in rs)
        lines.append(
            f"| `{k}` | {med:.3f} | {secs[0]:.3f} … {secs[-1]:.3f} | {med / help_s:.1f}× | "
            f"{peak:.0f} |"
        )
    lines += [
        "",
        f"Imports of `analyze {TRACES[0][0]} --no-write` (one run under `-X importtime`, which "
        f"adds its own overhead): **{total:.3f} s** in all. Self time by top-level package:",
        "",
        "| package | self s |",
        "|---|---:|",
    ]
    for pkg, s in sorted(by_pkg.items(), key=lambda x: -x[1])[:12]:
        lines.append(f"| {pkg} | {s:.3f} |")
    lines += ["", "The engine and UI modules with the largest cumulative import time:", ""]
    lines += ["| module | cumulative s |", "|---|---:|"]
    lines += [f"| `{m}` | {s:.3f} |" for m, s in cumulative]
    from engine.analyze.run import LEAN_MAX_BYTES, LEAN_MAX_ROWS

    lines += [
        "",
        "A small file without numba (`engine.analyze.run.lean`: read by the JSON scanner's "
        "Python twin, every kernel interpreted, numba never imported) against the same file "
        f"through numba, {ns.repeats} interleaved pairs each. The command takes the first path "
        f"for files up to {LEAN_MAX_BYTES:,} bytes and {LEAN_MAX_ROWS:,} GPU rows:",
        "",
        *lean_table(ns.repeats),
        "",
        *datasets.markdown("fixed_cost_run"),
    ]
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "fixed_cost_run.md").write_text("\n".join(lines) + "\n")
    datasets.write_inputs(ns.out, "fixed_cost_run")
    print("\n".join(lines))


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    main()
