"""Many ranks made from a real rank: `gitm-tui analyze DIR` — the default command, outputs
written, and ``--no-write`` — beside Holistic Trace Analysis on the same directory, for 8, 32
and 128 ranks and for 8 ranks of 2× and 4× the events, as ratios; and one rank alone.

    python benchmarks/bench_ranks_real.py [--ranks 8,32,128] [--tiles 1,2,4] [--repeats 2]

Inputs are SYNTHETIC, made from a REAL trace (engine.analyze.ranks.synth_ranks.real_ranks): HTA's
A100 rank (a100_training_3streams.json.gz, 109k events, rank 3 of 8 of a real job), once per
rank, each with its own rank number, a clock offset of its own, and every NCCL kernel but the
straggler's (rank 1) starting 400 µs earlier (it waited); ``--tiles`` t > 1: the real trace tiled
t times in time first (benchmarks.bench_import.generate). Made once under
benchmarks/.cache/real-ranks-<N>x<t>/ (8 and 32 ranks link to the 128's first files), each file
checked against its pin (benchmarks/datasets.json) before it is read.

Each run is a fresh process, timed from its start to its exit, its process tree's resident
memory sampled every 0.1 s and summed (the client, the scheduler, every worker: what the machine
holds), pairs interleaved:

* gitm = ``gitm-tui analyze DIR --out TMP`` (every rank's analysis.json, report.md,
  perfetto.json, fingerprint.json; cross_rank.json/.md and ranks.perfetto.json.gz) and
  ``gitm-tui analyze DIR --no-write``, on the default local cluster (one worker per core);
* HTA = ``TraceAnalysis`` load + ``get_gpu_kernel_breakdown`` + ``get_idle_time_breakdown`` +
  ``get_temporal_breakdown`` (benchmarks/bench_analyze.py's HTA_SCRIPT);
* one rank alone: ``gitm-tui analyze DIR/rank0000.json.gz --out TMP`` (issue 49: 8 ranks in no
  more than ~4 of these).

numba's cache is warmed before the timings (a first run ever compiles; bench_fixed_cost.py
measures that window).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import datasets  # noqa: E402  (benchmarks/datasets.py: the pinned inputs)
from bench_analyze import HTA_SCRIPT  # noqa: E402
from bench_ranks import _tree, first_links  # noqa: E402

#: the largest directory made (the smaller ones link to its first files)
TOP = 128
STRAGGLER, LATE_US = 1, 400.0


def make_ranks(dest: Path, ranks: int, tile: int, straggler: int, late_us: float) -> list[Path]:
    """``ranks`` SYNTHETIC ranks made from the real A100 rank (tiled ``tile`` times) in
    ``dest`` (the pinned generator: benchmarks/dataset_pins.py)."""
    from engine.analyze.ranks.synth_ranks import real_ranks

    real = datasets.ROOT / "../shared/traces/kineto/a100_training_3streams.json.gz"
    with tempfile.TemporaryDirectory() as scratch:
        src = real
        if tile > 1:
            from bench_import import generate

            src = Path(scratch) / "tiled.json.gz"
            generate(109_123 * tile, src)
        return real_ranks(src, dest, ranks, straggler=straggler, late_us=late_us, seed=0)


def data(ranks: int, tile: int) -> Path:
    """The pinned directory of ``ranks`` ranks (links into the largest one made for ``tile``)."""
    top = TOP if tile == 1 else ranks
    name = datasets.real_ranks_name(top, tile)
    full = HERE / ".cache" / name
    if not (full / "done").exists():
        print(f"making {top} SYNTHETIC ranks from the real A100 rank ×{tile} in {full} …")
        make_ranks(full, top, tile, STRAGGLER, LATE_US)
        (full / "done").write_text("")
    datasets.verify(name, at=full)
    if ranks == top:
        return full
    sub = first_links(full, HERE / ".cache" / f"{name}-first{ranks}", ranks)
    datasets.verify(name, at=sub)
    return sub


def measure(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run ``argv`` (stdout discarded); its seconds and its process tree's summed peak RSS."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    p = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=HERE, env=env
    )
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.1):
            peak = max(peak, sum(_tree(p.pid).values()))

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return {"failed": f"did not finish in {timeout:.0f} s"}
    finally:
        stop.set()
        th.join()
    dt = time.perf_counter() - t
    if p.returncode not in (0,):
        tail = (err.strip().splitlines() or ["?"])[-1][:200]
        return {"failed": f"exit {p.returncode} after {dt:.0f} s: {tail}"}
    return {"seconds": dt, "tree_mib": peak / 1024}


def _gitm(args: list[str], timeout: float, write: bool) -> dict[str, Any]:
    exe = str(Path(sys.executable).with_name("gitm-tui"))
    if not write:
        return measure([exe, "analyze", *args, "--no-write"], timeout)
    out = tempfile.mkdtemp(prefix="gitm-bench-ranks-")
    try:
        return measure([exe, "analyze", *args, "--out", out], timeout)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in runs if "failed" not in r]
    if not good:
        return runs[-1]
    return {
        "seconds": min(r["seconds"] for r in good),
        "seconds_max": max(r["seconds"] for r in good),
        "tree_mib": max(r["tree_mib"] for r in good),
        "runs": len(good),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="8,32,128")
    ap.add_argument("--tiles", default="1,2,4", help="events per rank: the real rank × t (8 ranks)")
    ap.add_argument("--repeats", type=int, default=2, help="per case up to 32 ranks; 1 above")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ns = ap.parse_args()
    cases = [(int(n), 1) for n in ns.ranks.split(",")]
    cases += [(8, int(t)) for t in ns.tiles.split(",") if int(t) > 1]
    dirs = {c: data(*c) for c in cases}
    _gitm([str(dirs[cases[0]])], ns.timeout, write=True)  # numba's cache warm
    rows = []
    for (n, tile), d in dirs.items():
        reps = ns.repeats if n <= 32 else 1
        one, full, bare, hta = [], [], [], []
        for _ in range(reps):
            print(f"{n} ranks ×{tile}: gitm …", flush=True)
            full.append(_gitm([str(d)], ns.timeout, write=True))
            bare.append(_gitm([str(d)], ns.timeout, write=False))
            one.append(_gitm([str(d / "rank0000.json.gz")], ns.timeout, write=True))
            if not ns.no_hta:
                print(f"{n} ranks ×{tile}: HTA …", flush=True)
                hta.append(measure([sys.executable, "-c", HTA_SCRIPT, str(d)], ns.timeout))
            print(f"  gitm {full[-1]}  --no-write {bare[-1]}  one {one[-1]}", flush=True)
            print(f"  HTA {hta[-1] if hta else 'not run'}", flush=True)
        size = sum(f.stat().st_size for f in d.glob("rank*.json.gz")) / 2**20
        rows.append({
            "ranks": n, "tile": tile, "events_per_rank": 109_123 * tile, "input_mib": size,
            "gitm": _best(full), "gitm_no_write": _best(bare), "one_rank": _best(one),
            "hta": _best(hta) if hta else {"failed": "not run (--no-hta)"},
        })  # fmt: skip
    write(ns, rows)


def _s(r: dict[str, Any]) -> str:
    if "failed" in r:
        return str(r["failed"])
    spread = f"–{r['seconds_max']:.1f}" if r.get("runs", 1) > 1 else ""
    return f"{r['seconds']:.1f}{spread}"


def _ratio(a: dict[str, Any], b: dict[str, Any]) -> str:
    if "failed" in a or "failed" in b:
        return "—"
    return f"{a['seconds'] / b['seconds']:.1f}×"


def _mib(r: dict[str, Any]) -> str:
    return "—" if "failed" in r else f"{r['tree_mib']:,.0f}"


def write(ns: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    lines = [
        "# Many ranks made from a real rank: gitm-tui analyze vs Holistic Trace Analysis",
        "",
        f"Machine: {platform.node()} · {os.cpu_count()} cores · Python "
        f"{platform.python_version()} · {time.strftime('%Y-%m-%d')}. Generated by `python "
        f"benchmarks/bench_ranks_real.py --ranks {ns.ranks} --tiles {ns.tiles} --repeats "
        f"{ns.repeats}` (best of the runs, the range beside it).",
        "",
        "Inputs: SYNTHETIC ranks made from a REAL trace — HTA's A100 rank (109k events), one copy "
        "per rank with its own rank number and clock offset, every NCCL kernel but rank 1's "
        "starting 400 µs earlier (rank 1 is the straggler); ×t: the real trace tiled t times "
        "in time first. gitm = `gitm-tui analyze DIR` (every output written) and `--no-write`, "
        "local cluster, one worker per core; HTA = load + kernel, idle-time and temporal "
        "breakdowns. Memory: the whole process tree's resident memory, summed, sampled every "
        "0.1 s (a shorter peak may be missed).",
        "",
        "| ranks | events per rank | input MiB (gz) | gitm s | gitm --no-write s | HTA s | "
        "HTA ÷ gitm | HTA ÷ --no-write | one rank alone s | gitm ÷ one rank | gitm MiB (all "
        "processes) | --no-write MiB | HTA MiB (all processes) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        g, b, h, one = r["gitm"], r["gitm_no_write"], r["hta"], r["one_rank"]
        lines.append(
            f"| {r['ranks']} | {r['events_per_rank']:,} | {r['input_mib']:,.0f} | {_s(g)} | "
            f"{_s(b)} | {_s(h)} | {_ratio(h, g)} | {_ratio(h, b)} | {_s(one)} | "
            f"{_ratio(g, one)} | {_mib(g)} | {_mib(b)} | {_mib(h)} |"
        )
    lines += ["", *datasets.markdown("ranks_real")]
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "ranks_real.md").write_text("\n".join(lines) + "\n")
    datasets.write_inputs(ns.out, "ranks_real")
    (ns.out / "ranks_real.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
