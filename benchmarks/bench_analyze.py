"""End-to-end trace analysis: `gitm-tui analyze` vs Holistic Trace Analysis, side by side, as ratios.

    python benchmarks/bench_analyze.py [--events 2000000] [--repeats 3] [--out benchmarks/results]

Same inputs as bench_import.py (the real 109k-event A100 trace from ../shared/traces and the
*synthetic* tiled trace it generates and caches). Each tool runs in a fresh process and is timed
from before its imports to its last result:

* gitm = ``gitm-tui analyze FILE --json --no-write``, and beside it the default command
  (``gitm-tui analyze FILE --out DIR``: the text and every output written);
  the first of them (gunzip, import, regime decoding, GPU time
  by class and regime, idle-time split, top kernels, invariants, κ, launch statistics and the
  replay of every lever), as a subprocess;
* HTA = ``TraceAnalysis`` load + ``get_gpu_kernel_breakdown`` + ``get_idle_time_breakdown`` +
  ``get_temporal_breakdown`` (the analyses whose figures gitm also reports).

Peak RSS is the child's maximum resident set (``resource.getrusage(RUSAGE_CHILDREN)``, one child
per measurement process).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import datasets  # noqa: E402  (benchmarks/datasets.py: the pinned inputs)
from bench_import import REAL, traces  # noqa: E402  (each input checked against its pin)

from engine.analyze.run import INTERPRET_MAX_ROWS  # noqa: E402
from engine.trace.kineto.json_twin import MAX_BYTES as TWIN_MAX_BYTES  # noqa: E402

HTA_SCRIPT = """
import logging, sys, warnings
logging.disable(logging.WARNING)
warnings.simplefilter("ignore")
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
ranks = list(ta.t.traces)
ta.get_gpu_kernel_breakdown(visualize=False)
ta.get_idle_time_breakdown(ranks=ranks, visualize=False)
ta.get_temporal_breakdown(visualize=False)
"""


def _timed(argv: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Run argv in a fresh child (via a wrapper that reports the child's peak RSS)."""
    wrapper = (
        "import resource, subprocess, sys, time, json\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
        "dt = time.perf_counter() - t\n"
        "r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "print(json.dumps({'seconds': dt, 'peak_mib': r, 'rc': p.returncode,"
        " 'err': p.stderr.decode()[-300:]}))\n"
    )
    # cwd: `python -c` imports from its directory first; in benchmarks/, gitm's install
    out = subprocess.run(
        [sys.executable, "-c", wrapper, *argv],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=HERE,
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if r["rc"] != 0:
        raise SystemExit(f"{argv[0]} failed: {r['err']}")
    return r


def install_kind() -> str:
    """Where the gitm-tui these runs measure comes from: a copy installed as README's quick start
    installs it (`pip install .`), or this source tree (an editable install, `pip install -e`,
    whose import hook each run pays: ~20 ms of the 109k-event analyze, measured side by side)."""
    spec = importlib.util.find_spec("gitm_tui")
    origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    if origin is not None and origin.is_relative_to(ROOT):
        return "gitm-tui run from this source tree (an editable install)"
    return "gitm-tui installed as README's quick start installs it (`pip install .`)"


def _runs(
    argv: list[str], n: int, cold: bool = False, env: dict[str, str] | None = None
) -> dict[str, float]:
    """``_timed`` ``n`` times: the median seconds and peak, and the seconds' range (this VM's
    timings vary by up to 2x between runs). ``cold``: each run with an empty numba cache, the
    first run's background compile finished before the next starts."""
    got = []
    for _ in range(n):
        if not cold:
            got.append(_timed(argv, env=env))
            continue
        with tempfile.TemporaryDirectory() as cache:
            got.append(_timed(argv, env=dict(os.environ, NUMBA_CACHE_DIR=cache)))
            _background_compile_done()  # it goes on after gitm answers: not into the next
    secs = sorted(r["seconds"] for r in got)
    return {
        "seconds": statistics.median(secs),
        "peak_mib": statistics.median(r["peak_mib"] for r in got),
        "min": secs[0],
        "max": secs[-1],
    }


#: the least any process that runs a numba kernel pays: Python, numpy, numba, and one cached
#: kernel's first call, loaded as gitm loads its own (engine.jit: numba's runtime set up, not
#: its compiler's registries — numba's own loading sets those up too, 0.3 s more)
FLOOR_NUMBA = """
import gc

gc.disable()  # the imports as gitm-tui analyze makes them (commands.common.loading_modules)

import numpy as np

from engine.jit import jit

gc.freeze()
gc.enable()


@jit
def total(a):
    s = 0.0
    for x in a:
        s += x
    return s


total(np.ones(3))
gc.freeze()  # as gitm-tui does before it ends (gitm_tui.cli._ending)
"""

#: the least any reader of a gzip trace pays: inflating it (ISA-L, as gitm's reader does)
FLOOR_INFLATE = """
import sys
from isal import isal_zlib
d = isal_zlib.decompressobj(31)
with open(sys.argv[1], "rb") as f:
    while b := f.read(1 << 20):
        d.decompress(b)
"""

#: gitm's own reader alone (engine.trace.kineto.kineto.read_kineto), nothing analysed
FLOOR_READ = (
    "import gc, sys\ngc.disable()\n"  # the imports as gitm-tui analyze makes them
    "from engine.trace.kineto.kineto import read_kineto\ngc.freeze()\ngc.enable()\n"
    "read_kineto(sys.argv[1])\n"
    "gc.freeze()\n"  # as gitm-tui does before it ends
)


def _s(seconds: float) -> str:
    """Seconds as the table prints them: two decimals under 10 s (a 0.66 s run is not 0.7)."""
    return f"{seconds:.2f}" if seconds < 10 else f"{seconds:.1f}"


def _floors(inputs: list[tuple[str, Path, int]], k: int, scratch: Path) -> dict[str, dict]:
    """The floors under gitm's figures, each in fresh processes like the tools: the numba
    process (its kernel's cache warmed first), and per trace its inflate and gitm's reader."""
    script = scratch / "floor_numba.py"
    script.write_text(FLOOR_NUMBA)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(scratch / "cache"))
    if importlib.util.find_spec("engine") is None:  # the same engine as the gitm measured
        env["PYTHONPATH"] = str(ROOT)
    subprocess.run([sys.executable, str(script)], check=True, env=env)  # the cache, warm
    out = {"numba": _runs([sys.executable, str(script)], k, env=env)}
    for label, path, _ in inputs:
        out[f"inflate {label}"] = _runs([sys.executable, "-c", FLOOR_INFLATE, str(path)], k)
        out[f"read {label}"] = _runs([sys.executable, "-c", FLOOR_READ, str(path)], k)
    return out


def _background_compile_done(limit_s: float = 300.0) -> None:
    """Wait for a first run's background compile (python -m engine.analyze.warm) to end."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        p = subprocess.run(["pgrep", "-f", "engine.analyze.warm"], capture_output=True)
        if p.returncode != 0:
            return
        time.sleep(0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument(
        "--memory-events", type=int, default=10_000_000,
        help="a larger synthetic trace gitm alone analyses, for how its peak grows (0: none)",
    )  # fmt: skip
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure (the median)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ns = ap.parse_args()
    gitm = [str(Path(sys.executable).parent / "gitm-tui")]
    if not Path(gitm[0]).exists():
        gitm = [sys.executable, "-m", "gitm_tui"]
    inputs = traces(ns.events)
    # compile / cache gitm's kernels outside the timing (a first run ever compiles them)
    subprocess.run(
        [*gitm, "analyze", str(REAL), "--json", "--no-write"], check=True, stdout=subprocess.DEVNULL
    )
    rows: list[tuple[str, int, dict, dict, dict | None]] = []
    k = ns.repeats
    for label, path, n in inputs:
        argv = [*gitm, "analyze", str(path), "--json", "--no-write"]
        # the first run after an install: numba's cache empty (a fresh NUMBA_CACHE_DIR; the
        # user's own cache is left alone), kernels compiled in a child while this run answers
        cold = _runs(argv, k, cold=True)
        g = _runs(argv, k)
        with tempfile.TemporaryDirectory() as d:  # what a user runs: the text and every output
            full = _runs([*gitm, "analyze", str(path), "--out", d], k)
        with tempfile.TemporaryDirectory() as d:  # HTA reads a directory of rank traces
            shutil.copy(path, d)
            h = _runs([sys.executable, "-c", HTA_SCRIPT, d], k)
        rows.append((f"{label}, first run (empty numba cache)", n, cold, h, None))
        rows.append((label, n, g, h, full))
        print(
            f"{label}: gitm first run {cold['seconds']:.1f} s, then {g['seconds']:.1f} s "
            f"(the default command, outputs written: {full['seconds']:.1f} s); "
            f"HTA {h['seconds']:.1f} s",
            file=sys.stderr,
        )
    with tempfile.TemporaryDirectory() as d:
        floors = _floors(inputs, k, Path(d))
    growth = ""
    if ns.memory_events:
        (_, big, n_big) = traces(ns.memory_events)[1]
        g = _runs([*gitm, "analyze", str(big), "--json", "--no-write"], k)
        base = rows[-1][2]  # the synthetic trace of --events
        print(
            f"{n_big:,} events: gitm {g['seconds']:.1f} s, {g['peak_mib']:.0f} MiB", file=sys.stderr
        )
        growth = (
            f"Memory as the trace grows: a SYNTHETIC trace of {n_big:,} events (the same "
            f"generator) took gitm {g['seconds']:.1f} s and peaked at {g['peak_mib']:.0f} MiB, "
            f"{g['peak_mib'] / base['peak_mib']:.2f}× its peak on {rows[-1][1]:,} events "
            f"({base['peak_mib']:.0f} MiB); HTA was not run on it (its peak on the smaller one "
            f"was {rows[-1][3]['peak_mib']:,.0f} MiB)."
        )
    lines = [
        "# Trace analysis end to end: gitm-tui analyze vs Holistic Trace Analysis",
        "",
        "Generated by `python benchmarks/bench_analyze.py` — each tool in a fresh process, timed "
        "from its start (imports included) to its last result. gitm = `gitm-tui analyze FILE "
        "--json --no-write` (import, regime decoding, breakdowns, invariants, κ, launch "
        "statistics and every lever's replay); HTA = `TraceAnalysis` load + "
        "`get_gpu_kernel_breakdown` + `get_idle_time_breakdown` + `get_temporal_breakdown`.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}; {install_kind()}. Every "
        f"figure is the median of {k} runs (`--repeats`), each in a fresh process; the seconds' "
        "range beside it.",
        "",
        "| trace | events | gitm s (range) | gitm peak MiB | HTA s (range) | HTA peak MiB "
        "| speed ratio | memory ratio | default command s (range) | its peak MiB | HTA ÷ "
        "default |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, n, g, h, whole in rows:
        default = (
            f"{_s(whole['seconds'])} ({_s(whole['min'])}–{_s(whole['max'])}) | "
            f"{whole['peak_mib']:.0f} | {h['seconds'] / whole['seconds']:.1f}×"
            if whole is not None
            else "— | — | —"
        )
        lines.append(
            f"| {label} | {n:,} | {_s(g['seconds'])} ({_s(g['min'])}–{_s(g['max'])}) | "
            f"{g['peak_mib']:.0f} | {_s(h['seconds'])} ({_s(h['min'])}–{_s(h['max'])}) | "
            f"{h['peak_mib']:.0f} | {h['seconds'] / g['seconds']:.1f}× | "
            f"{g['peak_mib'] / h['peak_mib']:.2f} | {default} |"
        )
    lines += [
        "",
        "Floors under these figures, measured in the same run, each the median of "
        f"{k} fresh processes: what any process pays before gitm's own analysis (the numba "
        "and reader processes import and end as gitm-tui does: the cyclic GC paused over the "
        "imports, their objects frozen after, and everything frozen at the end so that "
        "Python's finalisation does not collect it: gitm_tui.commands.common.loading_modules, "
        "gitm_tui.cli._ending). "
        "HTA ÷ floor is the ratio gitm would reach if everything above the floor took no time.",
        "",
        "| floor | trace | s (range) | peak MiB | HTA ÷ floor |",
        "|---|---|---:|---:|---:|",
    ]
    hta = {label: h for label, _, _, h, _ in rows[1::2]}  # the warm rows
    num = floors["numba"]
    for label in hta:
        lines.append(
            f"| Python + numpy + numba + one cached kernel's first call, loaded as gitm loads | {label} | "
            f"{num['seconds']:.2f} ({num['min']:.2f}–{num['max']:.2f}) | {num['peak_mib']:.0f} | "
            f"{hta[label]['seconds'] / num['seconds']:.1f}× |"
        )
        for what, key in (
            ("inflating the file alone (ISA-L, as gitm does)", "inflate"),
            ("gitm's reader alone (read_kineto: inflate, scan, columns)", "read"),
        ):
            f = floors[f"{key} {label}"]
            lines.append(
                f"| {what} | {label} | {f['seconds']:.2f} ({f['min']:.2f}–{f['max']:.2f}) | "
                f"{f['peak_mib']:.0f} | {hta[label]['seconds'] / f['seconds']:.1f}× |"
            )
    lines += [
        "",
        "speed ratio = HTA seconds ÷ gitm seconds; memory ratio = gitm peak ÷ HTA peak. The "
        "default command = `gitm-tui analyze FILE --out DIR`, what a user runs: the terminal "
        "text and every output (analysis.json, report.md, perfetto.json, fingerprint.json). A "
        "first-run row empties numba's cache (a fresh NUMBA_CACHE_DIR) for gitm, and is set "
        "against the same HTA runs as the row below it (HTA compiles nothing). On a trace up to "
        f"{TWIN_MAX_BYTES >> 20} MiB decompressed the answer comes from the JSON scanner's "
        f"Python twin and, up to {INTERPRET_MAX_ROWS:,} GPU rows, interpreted kernels, while "
        "a child process compiles every kernel for "
        "the next run (engine.analyze.run.FirstRun); a larger trace compiles the reader in the "
        "process and waits for the child's analysis kernels, saying so on its progress line. "
        "The time is until gitm answers; the peak is the gitm process's, not the child's; each "
        "next run starts after the child has finished.",
        "",
        growth,
        "",
        *datasets.markdown("analyze_end_to_end"),
    ]
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "analyze_end_to_end.md").write_text("\n".join(lines))
    datasets.write_inputs(ns.out, "analyze_end_to_end")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
