"""Many ranks on Dask: `gitm-tui analyze DIR` on a local cluster vs Holistic Trace Analysis
loading the same directory, side by side, as ratios, for 16, 32 and 64 ranks.

    python benchmarks/bench_ranks.py [--ranks 16,32,64] [--events 200000] [--workers 2]

Inputs are SYNTHETIC (engine/analyze/ranks/synth_ranks.py: the simulator's hft-lob kernels, NCCL
all-reduces, a ring exchange, a planted straggler and slow link), ~``--events`` events per rank,
generated once and cached under benchmarks/.cache/ranks-64x<events>/ (the 16- and 32-rank
directories link to its first files). Each tool runs in a fresh process, timed from before its
imports to its last result:

* gitm = what `analyze DIR --no-write` runs: the files listed, a LocalCluster of ``--workers``
  worker processes started, each rank analysed in full where a worker is (import, regimes,
  invariants, every lever's replay) and its summary sent back, then the cross-rank analysis
  (stragglers, waits, links) in the client. Peak memory: the client's own, and each worker's
  (read on the worker at the end);
* HTA = ``TraceAnalysis(trace_dir=DIR)`` (it parses the ranks in a process pool and holds every
  rank's DataFrame in the parent). Peak memory: its largest process.

A run that does not finish within ``--timeout`` seconds or fails is reported as such, not
dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
import datasets  # noqa: E402  (benchmarks/datasets.py: the pinned inputs)

GITM_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
from engine.analyze.cluster import _peak_mib, analyze_on_cluster
from engine.analyze.ranks.ranks import cross_rank
from engine.analyze.options import AnalyzeOptions
from engine.analyze.run import expand
files, errors = expand([sys.argv[1]])
peaks = {}
options = AnalyzeOptions(cluster="local", workers=int(sys.argv[2]))
outs = analyze_on_cluster(files, options, worker_peaks=peaks)
c = cross_rank([o.summary for o in outs if o.summary is not None])
dt = time.perf_counter() - t0
bad = [o.error for o in outs if o.error]
steps = {s.straggler for s in c.steps if s.straggler is not None} if c else set()
print(json.dumps({
    "seconds": dt,
    "client_mib": _peak_mib(),
    "worker_mib": sorted(peaks.values()),
    "errors": len(bad) + len(errors),
    "stragglers": sorted(steps),
    "slow_links": [ln.link for ln in c.links if ln.slow] if c else [],
}))
"""

HTA_SCRIPT = """
import json, logging, sys, time, warnings
t0 = time.perf_counter()
logging.disable(logging.WARNING)
warnings.simplefilter("ignore")
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
n = len(ta.t.traces)
dt = time.perf_counter() - t0
own = [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")][0]
print(json.dumps({"seconds": dt, "client_mib": own / 1024, "ranks": n}))
"""


def rank_params(ranks: int, events: int) -> dict:
    """write_ranks's arguments for ``ranks`` ranks of ~``events`` events (the pinned input's
    parameters, benchmarks/datasets.json)."""
    from engine.analyze.ranks.synth_ranks import iteration_kernels

    steps, buckets = 20, 4
    # events per rank ≈ 2 × steps × (kernels + buckets + 2)
    kernels = max(len(iteration_kernels("hft-lob")), events // (2 * steps) - buckets - 2)
    return {
        "ranks": ranks, "steps": steps, "kernels_per_step": kernels, "buckets": buckets,
        "straggler": 5, "slow_link": [2, 3], "seed": 1,
    }  # fmt: skip


def _data(ranks: int, events: int) -> Path:
    """The cached 64-rank (or larger) directory, and a directory of links to its first ranks;
    each file checked against its pin before it is read."""
    from engine.analyze.ranks.synth_ranks import write_ranks

    top = max(64, ranks)
    full = HERE / ".cache" / f"ranks-{top}x{events}"
    if not (full / "done").exists():
        print(f"generating {top} SYNTHETIC ranks of ~{events:,} events in {full} …", flush=True)
        kw = rank_params(top, events)
        write_ranks(full, **{**kw, "slow_link": tuple(kw["slow_link"])})
        (full / "done").write_text("")
    name = datasets.ranks_name(top, events)
    datasets.verify(name, at=full)
    if ranks == top:
        return full
    sub = first_links(full, HERE / ".cache" / f"ranks-{ranks}of{top}x{events}", ranks)
    datasets.verify(name, at=sub)
    return sub


def first_links(full: Path, sub: Path, ranks: int) -> Path:
    """``sub``: links to the first ``ranks`` rank files of ``full``."""
    sub.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        link = sub / f"rank{r:04d}.json.gz"
        if not link.exists():
            link.symlink_to(full / f"rank{r:04d}.json.gz")
    return sub


def _tree(root: int) -> dict[int, int]:
    """RSS (KiB) of ``root`` and every process below it (/proc)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out: dict[int, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/statm") as f:
                out[pid] = int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
        except (OSError, IndexError, ValueError):
            continue
        todo += [c for c, p in parent.items() if p == pid]
    return out


def _run(script: str, args: list[str], timeout: float) -> dict:
    """Run a measurement child; sample its process tree's memory every 0.2 s meanwhile."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    peak_total, peak_other = 0, 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_total, peak_other
        while not stop.wait(0.2):
            rss = _tree(p.pid)
            peak_total = max(peak_total, sum(rss.values()))
            peak_other = max([peak_other, *(v for k, v in rss.items() if k != p.pid)])

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return {"failed": f"did not finish in {timeout:.0f} s"}
    finally:
        stop.set()
        th.join()
    if p.returncode != 0:
        tail = (err.strip().splitlines() or ["?"])[-1][:200]
        return {"failed": f"exit {p.returncode} after {time.perf_counter() - t:.0f} s: {tail}"}
    r = json.loads(out.strip().splitlines()[-1])
    r["tree_total_mib"] = peak_total / 1024  # sampled: a peak shorter than 0.2 s may be missed
    r["largest_child_mib"] = peak_other / 1024
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="16,32,64")
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ns = ap.parse_args()
    sizes = [int(x) for x in ns.ranks.split(",")]
    dirs = {n: _data(n, ns.events) for n in sizes}
    size_mib = {
        n: sum(f.stat().st_size for f in d.glob("rank*.json.gz")) / 2**20 for n, d in dirs.items()
    }
    # numba's cache warmed outside the timing (a first run ever compiles; issue 17 measures it)
    _run(GITM_SCRIPT, [str(dirs[sizes[0]]), str(ns.workers)], ns.timeout)
    rows = []
    for n in sizes:
        print(f"{n} ranks: gitm …", flush=True)
        g = _run(GITM_SCRIPT, [str(dirs[n]), str(ns.workers)], ns.timeout)
        print(f"  {g}", flush=True)
        h: dict = {"failed": "not run (--no-hta)"}
        if not ns.no_hta:
            print(f"{n} ranks: HTA …", flush=True)
            h = _run(HTA_SCRIPT, [str(dirs[n])], ns.timeout)
            print(f"  {h}", flush=True)
        rows.append((n, g, h))
    write(ns, rows, size_mib)


def _cell(r: dict, key: str, fmt: str) -> str:
    if "failed" in r:
        return "—"
    v = r[key]
    if isinstance(v, list):
        return "/".join(format(x, fmt) for x in v) if v else "—"
    return format(v, fmt)


def write(ns: argparse.Namespace, rows: list, size_mib: dict) -> None:
    lines = [
        "# Many ranks: gitm-tui analyze on a local Dask cluster vs Holistic Trace Analysis",
        "",
        f"Machine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}"
        f" · {time.strftime('%Y-%m-%d')}. Generated by `python benchmarks/bench_ranks.py "
        f"--ranks {ns.ranks} --events {ns.events} --workers {ns.workers}`.",
        "",
        f"Inputs: SYNTHETIC Kineto traces (engine/analyze/ranks/synth_ranks.py), ~{ns.events:,} events "
        "per rank, gzip. gitm analyses every rank in full on a LocalCluster of "
        f"{ns.workers} worker processes and crosses the ranks; HTA only loads them "
        "(`TraceAnalysis(trace_dir=…)`). Fresh processes, imports and cluster start-up included.",
        "",
        "| ranks | input MiB (gz) | gitm s | HTA s | speed ratio | gitm client peak MiB | "
        "gitm worker peaks MiB | gitm all processes MiB | HTA parent peak MiB | HTA largest "
        "child MiB | HTA all processes MiB | found by gitm |",
        "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for n, g, h in rows:
        ratio = (
            f"{h['seconds'] / g['seconds']:.1f}×"
            if "failed" not in g and "failed" not in h
            else "—"
        )
        found = (
            g.get("failed")
            or f"straggler {g['stragglers']}, slow {g['slow_links']}, errors {g['errors']}"
        )
        hta = h.get("failed", "")
        lines.append(
            f"| {n} | {size_mib[n]:,.0f} | {_cell(g, 'seconds', '.1f')} | "
            f"{_cell(h, 'seconds', '.1f')} {hta} | {ratio} | {_cell(g, 'client_mib', '.0f')} | "
            f"{_cell(g, 'worker_mib', '.0f')} | {_cell(g, 'tree_total_mib', '.0f')} | "
            f"{_cell(h, 'client_mib', '.0f')} | {_cell(h, 'largest_child_mib', '.0f')} | "
            f"{_cell(h, 'tree_total_mib', '.0f')} | {found} |"
        )
    lines += [
        "",
        "speed ratio = HTA seconds ÷ gitm seconds. Peaks: the gitm client's and each worker's "
        "own VmHWM (exact); HTA's parent VmHWM (exact; it holds every rank's DataFrames); the "
        "largest child and all processes together sampled every 0.2 s from /proc (a shorter "
        "peak may be missed). The gitm client is what would grow with the number of ranks: only "
        "summaries cross the network, and each worker holds one rank's analysis at a time.",
        "",
        *datasets.markdown("ranks_dask"),
    ]
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "ranks_dask.md").write_text("\n".join(lines))
    datasets.write_inputs(ns.out, "ranks_dask")
    (ns.out / "ranks_dask.json").write_text(
        json.dumps([{"ranks": n, "gitm": g, "hta": h} for n, g, h in rows], indent=1) + "\n"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
