"""What the benchmarks' inputs are, and how each is made again: the pins of
benchmarks/datasets.json, written and checked by ``python -m benchmarks.datasets --pin | --check``.

Each :class:`Spec` is one input a benchmark reads at its default parameters (the constants below
name where each default is set); ``make`` makes it afresh in a scratch folder — the generator
called with the pinned parameters and seed, or the real file read — and hashes it as
benchmarks/datasets.py's :func:`verify` does, so a pin and a check agree by construction.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets as ds


@dataclass(frozen=True)
class Spec:
    """One input the benchmarks read at their default parameters, and how to make or find it."""

    name: str
    used_by: tuple[str, ...]
    digest_of: str
    path: str | None = None
    generator: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: Any = None
    source: str = ""


#: the benchmarks' defaults the pins are made for (each named where the benchmark sets it)
TILED_EVENTS = (2_000_000, 10_000_000)  # bench_import/analyze/memory --events, --memory-events
RANKS, RANK_EVENTS = 64, 200_000  # bench_ranks --ranks 16,32,64 (links into the 64), --events
#: bench_ranks_real: --ranks 8,32,128 (links into the 128) at ×1, --tiles 2,4 at 8 ranks
REAL_RANKS = ((128, 1), (8, 2), (8, 4))
DECODE_ROWS = (1_000_000, 10_000_000)  # bench_decode --sizes 1e6 1e7
LOAD_PER = 1250  # bench_dashboard --rate 1000000 --streams 4: round(rate × 5 ms ÷ streams)
SIM_WORKLOADS = ("hft-lob", "af2", "kitti")  # bench_replay / bench_search WORKLOADS
SIM_SEEDS = 5  # bench_replay / bench_search --seeds
REPLAY_REPEATS, SEARCH_REPEATS = 3, 4  # Optimizer(repeats=…) in bench_replay.in_loop, bench_search


#: the small real traces bench_fixed_cost times (name, path under tests/data/traces, source)
SMALL_TRACES = (
    (
        "a100_triton_one_kernel",
        "kineto/a100_triton_one_kernel.json.gz",
        "PyTorch profiler, A100, one Triton kernel: Holistic Trace Analysis test data (MIT, "
        "tests/data/traces/kineto/LICENSE.HolisticTraceAnalysis)",
    ),
    (
        "mi250_rocm62_minitoy",
        "kineto/mi250_rocm62_minitoy.json.gz",
        "PyTorch profiler on ROCm 6.2, MI250: Holistic Trace Analysis test data (MIT, "
        "tests/data/traces/kineto/LICENSE.HolisticTraceAnalysis)",
    ),
    (
        "a100_cloverleaf_nsys",
        "nsys/a100_cloverleaf.sqlite",
        "Nsight Systems SQLite export, A100, CloverLeaf: pipit test data (MIT-style, "
        "tests/data/traces/nsys/LICENSE.pipit)",
    ),
)

#: (label, path under tests/data/traces, source) of the real traces of growing size on which
#: bench_fixed_cost times a small file's analysis without numba against one through numba
#: (the measurement behind engine.analyze.run.LEAN_MAX_BYTES and LEAN_MAX_ROWS)
LEAN_LADDER = (
    (
        "h100_hf_bert_small",
        "kineto/h100_hf_bert_small.json.gz",
        "PyTorch profiler, H100, HF bert-small inference: TraceLens test data (MIT, "
        "tests/data/traces/kineto/LICENSE.TraceLens)",
    ),
    (
        "mi210_gpu_only",
        "kineto/mi210_gpu_only.json.gz",
        "PyTorch profiler on ROCm, MI210, GPU activities only: TraceLens test data (MIT, "
        "tests/data/traces/kineto/LICENSE.TraceLens)",
    ),
    (
        "job128_rank0",
        "kineto/job128_two_ranks/rank-0.json.gz",
        "PyTorch profiler, rank 0 of a 128-rank job: Holistic Trace Analysis test data (MIT, "
        "tests/data/traces/kineto/LICENSE.HolisticTraceAnalysis)",
    ),
    (
        "h100_hf_qwen15_05b_chat",
        "kineto/h100_hf_qwen15_05b_chat.json.gz",
        "PyTorch profiler, H100, HF Qwen1.5-0.5B inference: TraceLens test data (MIT, "
        "tests/data/traces/kineto/LICENSE.TraceLens)",
    ),
    (
        "a100_nccl_pg_metadata",
        "kineto/a100_nccl_pg_metadata.json.gz",
        "PyTorch profiler, A100, rank 0 of 2 with NCCL: Holistic Trace Analysis test data (MIT, "
        "tests/data/traces/kineto/LICENSE.HolisticTraceAnalysis)",
    ),
)


def specs() -> list[Spec]:
    """Every input the benchmarks read at their default parameters."""
    sys.path.insert(0, str(ds.HERE))  # the benchmark scripts import each other by file name
    from bench_ranks import rank_params

    kineto = "kineto/a100_training_3streams.json.gz"
    out = [
        Spec(
            ds.REAL_TRACE,
            ("bench_analyze", "bench_first_runs", "bench_import", "bench_memory"),
            "bytes",
            path=f"../shared/traces/{kineto}",
            source="PyTorch profiler, A100, 109k events: Holistic Trace Analysis test data (MIT, "
            "../shared/traces/kineto/LICENSE.HolisticTraceAnalysis); the same bytes as "
            f"tests/data/traces/{kineto}",
        ),
        Spec(
            ds.TRAIN_CNN,
            ("bench_loaded_machine",),
            "bytes",
            path="benchmarks/programs/train_cnn.py",
            source="the unmodified PyTorch script the loaded-machine benchmark optimizes (its "
            "data: torch.manual_seed(0) tensors, made by the script)",
        ),
    ]
    for name, rel, source in SMALL_TRACES + LEAN_LADDER:
        out.append(
            Spec(
                name, ("bench_fixed_cost",), "bytes", path=f"tests/data/traces/{rel}", source=source
            )
        )
    for n in TILED_EVENTS:
        out.append(
            Spec(
                ds.tiled_name(n),
                ("bench_analyze", "bench_import", "bench_memory"),
                "gunzip",
                path=f"benchmarks/.cache/synthetic_{n}/synthetic_rank0.json.gz",
                generator="benchmarks.bench_import:generate",
                params={"n_events": n, "source": ds.REAL_TRACE},
                seed=None,  # tiling in time draws no random numbers
                source="SYNTHETIC: the real A100 trace tiled in time",
            )
        )
    out.append(
        Spec(
            ds.ranks_name(RANKS, RANK_EVENTS),
            ("bench_ranks",),
            "files",
            path=f"benchmarks/.cache/ranks-{RANKS}x{RANK_EVENTS}",
            generator="engine.analyze.ranks.synth_ranks:write_ranks",
            params=rank_params(RANKS, RANK_EVENTS),
            seed=rank_params(RANKS, RANK_EVENTS)["seed"],
            source="SYNTHETIC rank traces: the simulator's hft-lob kernels, NCCL all-reduces, a "
            "ring exchange, a planted straggler and slow link",
        )
    )
    for n, tile in REAL_RANKS:
        out.append(
            Spec(
                ds.real_ranks_name(n, tile),
                ("bench_ranks_real",),
                "files",
                path=f"benchmarks/.cache/{ds.real_ranks_name(n, tile)}",
                generator="benchmarks.bench_ranks_real:make_ranks",
                params={"ranks": n, "tile": tile, "straggler": 1, "late_us": 400.0},
                seed=0,  # the ranks' clock offsets: numpy's default_rng(0)
                source=f"SYNTHETIC ranks made from a REAL trace: the A100 rank ({kineto}, "
                f"HTA test data, MIT) ×{tile} in time, one copy per rank with its own rank number "
                "and clock offset, a planted straggler (rank 1: the others' NCCL kernels start "
                "400 µs earlier)",
            )
        )
    for n in DECODE_ROWS:
        out.append(
            Spec(
                ds.segments_name(n),
                ("bench_decode",),
                "columns",
                generator="benchmarks.bench_decode:make_segments",
                params={"n": n},
                seed=[11, 12, 13],  # simulate(workload, 150, seed=11 + i) in make_segments
                source="SYNTHETIC: the simulated H100 running hft-lob, af2, kitti, tiled in time",
            )
        )
    out.append(
        Spec(
            ds.load_name(LOAD_PER),
            ("bench_dashboard",),
            "columns",
            generator="benchmarks.bench_dashboard:load_batches",
            params={"per": LOAD_PER},
            seed=0,
            source="SYNTHETIC load: regime labels drawn by numpy's default_rng(0), kernel names",
        )
    )
    for seed in range(SIM_SEEDS):
        for w in SIM_WORKLOADS:
            s = seed * 100 + 1  # bench_replay.one_at_a_time
            out.append(
                Spec(
                    ds.measure_name(w, seed, s),
                    ("bench_replay",),
                    "columns",
                    generator="engine.workloads.sim:SimWorkload.measure",
                    params={"workload": w, "machine_seed": seed, "state": "base"},
                    seed=s,
                    source="simulated H100 (manifests/): the workload's unchanged state",
                )
            )
    for repeats, used in ((REPLAY_REPEATS, "bench_replay"), (SEARCH_REPEATS, "bench_search")):
        for seed in range(SIM_SEEDS):
            for w in SIM_WORKLOADS:
                out.append(
                    Spec(
                        ds.profile_name(w, seed, repeats),
                        (used,),
                        "columns",
                        generator="engine.optimizer.loop:Optimizer.profile",
                        params={"workload": w, "repeats": repeats},
                        seed=seed,
                        source="simulated H100 (manifests/): the optimize loop's A/A "
                        "measurements of the unchanged workload",
                    )
                )
    return out


def _make(spec: Spec, scratch: Path) -> dict[str, Any]:
    """Make (or read) ``spec``'s input afresh in ``scratch``; return its digest fields."""
    p = dict(spec.params)
    if spec.generator is None:
        assert spec.path is not None
        sha, size, _, _ = ds._memo(spec.digest_of, ds.ROOT / spec.path)
        return {"sha256": sha, "size": size}
    sys.path.insert(0, str(ds.HERE))
    if spec.generator == "benchmarks.bench_import:generate":
        from bench_import import generate

        dest = scratch / "synthetic_rank0.json.gz"
        generate(int(p["n_events"]), dest)
        sha, size = ds._gunzip_digest(dest)
        return {"sha256": sha, "size": size}
    if spec.generator == "engine.analyze.ranks.synth_ranks:write_ranks":
        from engine.analyze.ranks.synth_ranks import write_ranks

        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in p.items()}
        write_ranks(scratch / "ranks", **kw)
        sha, size, per = ds._files_digest(scratch / "ranks")
        return {"sha256": sha, "size": size, "files": per}
    if spec.generator == "benchmarks.bench_ranks_real:make_ranks":
        from bench_ranks_real import make_ranks

        make_ranks(scratch / "ranks", int(p["ranks"]), int(p["tile"]), int(p["straggler"]),
                   float(p["late_us"]))  # fmt: skip
        sha, size, per = ds._files_digest(scratch / "ranks")
        return {"sha256": sha, "size": size, "files": per}
    chunks: Iterable[Any]
    if spec.generator == "benchmarks.bench_decode:make_segments":
        from bench_decode import make_segments

        chunks = ds.column_chunks(make_segments(int(p["n"])))
    elif spec.generator == "benchmarks.bench_dashboard:load_batches":
        from bench_dashboard import load_batches

        labels, names = load_batches(int(p["per"]), seed=int(spec.seed))
        chunks = ds.array_chunks(labels=labels, names=names)
    elif spec.generator == "engine.workloads.sim:SimWorkload.measure":
        from engine.workloads.sim import SimWorkload

        wl = SimWorkload(p["workload"], machine_seed=int(p["machine_seed"]))
        chunks = ds.trace_chunks(wl.measure(wl.base, seed=int(spec.seed)).trace)
    elif spec.generator == "engine.optimizer.loop:Optimizer.profile":
        from engine.optimizer.loop import Optimizer

        opt = Optimizer(p["workload"], scratch, seed=int(spec.seed), repeats=int(p["repeats"]))
        opt.profile()
        chunks = ds.trace_chunks(*(m.trace for m in opt.current))
    else:
        raise ValueError(f"no maker for generator {spec.generator!r}")
    sha, size = ds._data_digest(chunks)
    return {"sha256": sha, "size": size}


def pin_of(spec: Spec, scratch: Path) -> dict[str, Any]:
    """The JSON pin of ``spec``: its description and the digest of its input made afresh."""
    entry: dict[str, Any] = {
        "kind": "generated" if spec.generator else "file",
        "digest_of": spec.digest_of,
    }
    if spec.path:
        entry["path"] = spec.path
    if spec.generator:
        entry.update(generator=spec.generator, params=dict(spec.params), seed=spec.seed)
    entry.update(_make(spec, scratch))
    entry.update(used_by=list(spec.used_by), source=spec.source)
    return entry


ABOUT = (
    "Pinned benchmark inputs: written by `python -m benchmarks.datasets --pin`, checked by "
    "benchmarks/datasets.py:verify before each benchmark reads them. digest_of: bytes = the "
    "file's bytes; gunzip = the decompressed bytes of a gzip (its header holds the time it was "
    "written); files = sha256 of the sorted 'sha256  name' lines of a directory's gzip files, "
    "each decompressed; columns = each numpy column's name, dtype, length and bytes."
)


#: a JSON array or object of scalars only, as json.dumps(indent=1) lays it out (the strings in
#: datasets.json hold no brackets, braces or newlines: names, hex digests, module paths)
_FLAT = re.compile(r"([\[{])\n\s*([^\[\]{}]*?)\n\s*([\]}])")


def _dump(pins: Mapping[str, Any]) -> str:
    """datasets.json's text: indented, each array or object of scalars on one line (a rank
    file's [sha256, size], a pin's params), so that a re-pin's diff is one line per change."""
    text = json.dumps({"about": ABOUT, "datasets": dict(pins)}, indent=1)
    return _FLAT.sub(lambda m: m[1] + re.sub(r",\n\s*", ", ", m[2]) + m[3], text) + "\n"


def main(argv: list[str] | None = None, make: Callable[[Spec, Path], dict] = pin_of) -> int:
    """``python -m benchmarks.datasets``: --list, --check or --pin; the exit code."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.datasets", description=__doc__.splitlines()[0]
    )
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--pin",
        action="store_true",
        help="make each input afresh, update datasets.json, show the diff",
    )
    mode.add_argument(
        "--check",
        action="store_true",
        help="make each input afresh, compare with its pin (exit 3 on a difference)",
    )
    mode.add_argument(
        "--list", action="store_true", help="the pins and the benchmarks that read them"
    )
    ap.add_argument("names", nargs="*", help="only these pins (default: every input)")
    ap.add_argument("--pins", type=Path, default=ds.PINS, help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    pins = ds.load_pins(ns.pins)
    if ns.list:
        try:
            for name, pin in pins.items():
                print(f"{name}  {pin['sha256']}  {pin['size']:>14,}  {', '.join(pin['used_by'])}")
            sys.stdout.flush()
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    todo = specs()
    unknown = sorted(set(ns.names) - {s.name for s in todo})
    if unknown:
        print(
            f"benchmarks.datasets: error: no input named {ds._show(unknown[0])} (--list)",
            file=sys.stderr,
        )
        return 2
    if ns.names:
        todo = [s for s in todo if s.name in ns.names]
    fresh: dict[str, Any] = {}
    for s in todo:
        print(f"{'pinning' if ns.pin else 'checking'} {s.name} …", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="gitm-pin-") as d:
            fresh[s.name] = make(s, Path(d))
    if ns.check:
        bad = [n for n, e in fresh.items() if pins.get(n, {}).get("sha256") != e["sha256"]]
        for n in bad:
            old = pins.get(n, {}).get("sha256", "(not pinned)")
            print(
                f"benchmarks: input {n}: pinned sha256 {old}, made now {fresh[n]['sha256']}",
                file=sys.stderr,
            )
        print(f"{len(fresh) - len(bad)} of {len(fresh)} inputs match their pins")
        return ds.EXIT_INPUT if bad else 0
    new = dict(pins) if ns.names else {}
    new.update(fresh)
    order = [s.name for s in specs()]
    new = {
        n: new[n] for n in sorted(new, key=lambda n: order.index(n) if n in order else len(order))
    }
    before, after = _dump(pins) if pins else "", _dump(new)
    diff = list(
        difflib.unified_diff(
            before.splitlines(True),
            after.splitlines(True),
            "datasets.json (before)",
            "datasets.json (after)",
        )
    )
    sys.stdout.writelines(diff or ["datasets.json: no change\n"])
    tmp = ns.pins.with_name(ns.pins.name + ".tmp")
    tmp.write_text(after, encoding="utf-8")
    os.replace(tmp, ns.pins)
    return 0
