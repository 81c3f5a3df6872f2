"""Ten analyses in a row right after an install: each one's time and peak memory, the
background compile's memory beside them, and the same ten once the cache is warm (issue 49).

    python benchmarks/bench_first_runs.py [--runs 10] [--out benchmarks/results]

What an install leaves: pip compiles Python's bytecode, not numba's kernels, so the first
`gitm-tui analyze` finds numba's disk cache empty. Here a fresh, empty NUMBA_CACHE_DIR stands for
it (the user's own cache is left alone), and the runs follow one another at once, as a user
types them: the default command, `gitm-tui analyze TRACE --out DIR`, on the real 109k-event A100
trace (pinned in datasets.json). A first run starts one compile child (`python -m
engine.analyze.warm`, niced) and answers without waiting for it (engine.analyze.run.FirstRun);
the runs after it that find it still compiling start none and say so on their progress line.

Each run: wall seconds from its start to its exit, its peak RSS (``os.wait4``), whether a compile
child was running when it started, and — sampled every 50 ms from /proc — the compile child's
largest RSS during the run and the largest sum of the two. Then ``--runs`` more with the cache the
first ten left (warm), the baseline a run after the window is compared with.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import datasets  # noqa: E402  (benchmarks/datasets.py: the pinned inputs)
from bench_analyze import install_kind  # noqa: E402
from bench_import import REAL  # noqa: E402

CHILD = "engine.analyze.warm"


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _compilers() -> list[int]:
    """Pids of every compile child running now (their command line names CHILD)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                if CHILD.encode() in f.read():
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def one_run(argv: list[str], env: dict[str, str]) -> dict[str, float | bool]:
    """Run ``argv`` to its end; its seconds and peak, and the compile child's memory beside it."""
    child_at_start = bool(_compilers())
    worst = {"child": 0.0, "sum": 0.0}
    done = threading.Event()
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def sample() -> None:
        while not done.is_set():
            child = sum(_rss_mib(pid) for pid in _compilers())
            worst["child"] = max(worst["child"], child)
            worst["sum"] = max(worst["sum"], child + _rss_mib(p.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    done.set()
    sampler.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed: exit {p.returncode}")
    return {
        "seconds": seconds,
        "peak_mib": usage.ru_maxrss / 1024,
        "child_at_start": child_at_start,
        "child_mib": worst["child"],
        "sum_mib": max(worst["sum"], usage.ru_maxrss / 1024),
    }


def _wait_compilers(limit_s: float = 300.0) -> None:
    end = time.monotonic() + limit_s
    while _compilers() and time.monotonic() < end:
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ns = ap.parse_args()
    datasets.verify(REAL)
    gitm = [str(Path(sys.executable).parent / "gitm-tui")]
    if not Path(gitm[0]).exists():
        gitm = [sys.executable, "-m", "gitm_tui"]
    if _compilers():
        raise SystemExit("a compile child is running already: run this on a quiet machine")
    cold: list[dict[str, float | bool]] = []
    warm: list[dict[str, float | bool]] = []
    with tempfile.TemporaryDirectory(prefix="gitm-first-") as scratch:
        env = dict(os.environ, NUMBA_CACHE_DIR=str(Path(scratch) / "numba"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an install runs: bytecode cached
        for series in (cold, warm):
            for i in range(ns.runs):
                out = Path(scratch) / f"out{len(cold) + len(warm)}"
                series.append(one_run([*gitm, "analyze", str(REAL), "--out", str(out)], env))
                r = series[-1]
                print(
                    f"{'first' if series is cold else 'warm'} {i + 1}: {r['seconds']:.2f} s, "
                    f"{r['peak_mib']:.0f} MiB; compile child {r['child_mib']:.0f} MiB",
                    file=sys.stderr,
                )
            _wait_compilers()  # the warm series starts with every kernel cached
    steady = statistics.median(float(r["seconds"]) for r in warm)
    steady_mib = statistics.median(float(r["peak_mib"]) for r in warm)
    lines = [
        "# Ten analyses in a row right after an install",
        "",
        f"Generated by `python benchmarks/bench_first_runs.py --runs {ns.runs}` on "
        f"{time.strftime('%Y-%m-%d')}: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; {install_kind()}. Trace: the real A100 training trace "
        f"({REAL.name}, 109,123 events, pinned). Command: `gitm-tui analyze TRACE --out DIR` "
        "(the default: text and every output written), run after run with nothing between, "
        "numba's cache empty before the first (a fresh NUMBA_CACHE_DIR, as an install leaves "
        "it). The compile child is the one background process a first run starts "
        "(`python -m engine.analyze.warm`, niced); its memory is sampled every 50 ms.",
        "",
        "| run | s | × warm median | peak MiB | compile child running at start | child's "
        "largest MiB during the run | run + child, largest MiB |",
        "|---:|---:|---:|---:|---|---:|---:|",
    ]
    for i, r in enumerate(cold, 1):
        lines.append(
            f"| {i} | {r['seconds']:.2f} | {float(r['seconds']) / steady:.1f}× | "
            f"{r['peak_mib']:.0f} | {'yes' if r['child_at_start'] else 'no'} | "
            f"{r['child_mib']:.0f} | {r['sum_mib']:.0f} |"
        )
    secs = sorted(float(r["seconds"]) for r in warm)
    lines += [
        "",
        f"The same command {ns.runs} times more with the cache those runs left: median "
        f"**{steady:.2f} s** ({secs[0]:.2f}–{secs[-1]:.2f}), peak {steady_mib:.0f} MiB.",
        *datasets.markdown("first_runs"),
        "",
    ]
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "first_runs.md").write_text("\n".join(lines))
    datasets.write_inputs(ns.out, "first_runs")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
