"""SYNTHETIC multi-rank traces for tests and benchmarks: N Kineto JSON files of one data-parallel
job, written by this code, never recorded (the files say so: ``"synthetic": true``).

Each rank runs the kernels of one iteration of a workload *as the simulator runs it*
(engine.device.simulator: names, durations, launch geometry of the built-in workload, e.g.
``hft-lob``, DeepLOB training), repeated to the size asked, with per-rank noise. Between
gradient buckets an NCCL all-reduce of all ranks runs on a communication stream and overlaps the
next bucket's compute; at the end of each step every rank sends a message to the next rank and
receives one from the previous (a ring exchange, as context-parallel attention does). Host
clocks differ per rank (ranks on different hosts).

Planted, for the analysis to find:
* a **straggler** — one rank's compute takes ``straggler_slowdown`` times longer, so every other
  rank waits for it at each collective;
* a **slow link** — transfers on one direction ``(src, dst)`` of the ring take
  ``slow_link_factor`` times longer; the ring all-reduce, bounded by its slowest link, is slowed
  for everyone (which on its own cannot say *which* link).

With ``metadata`` the collective kernels carry the args recent PyTorch profilers copy onto them
(process group name and ranks, Seq, message sizes, dtype, Src/Dst Rank); without it they carry
only their name, as older traces do.
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

#: the ring exchange's transfer and the all-reduce's base times (µs) on healthy links
P2P_US = 60.0
ALLREDUCE_US = 150.0
_AR_JSON = json.dumps(
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
)
_P2P_JSON = json.dumps("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)")
_COMPUTE, _AR_STREAM, _SEND_STREAM, _RECV_STREAM = 7, 21, 23, 25


@lru_cache(maxsize=4)
def iteration_kernels(workload: str, seed: int = 0) -> tuple[tuple[str, float, int, int], ...]:
    """One iteration's kernels as the simulator runs ``workload``: (name, µs, grid, block)."""
    from engine.device.simulator import simulate
    from engine.trace.segments import Kind

    batch, names = simulate(workload, 3, seed=seed)
    seg = batch.segments
    k = np.flatnonzero(seg.kind == Kind.KERNEL)
    k = k[np.argsort(seg.start_ns[k], kind="stable")]
    per = len(k) // max(1, batch.iterations)
    mid = k[per : 2 * per] if per else k  # the second iteration: warmed up, not the last
    return tuple(
        (
            names[int(seg.name[i])],
            float(seg.end_ns[i] - seg.start_ns[i]) / 1e3,
            int(seg.grid[i]),
            int(seg.block[i]),
        )
        for i in mid
    )


def write_ranks(
    out: Path,
    ranks: int = 8,
    steps: int = 4,
    kernels_per_step: int | None = None,
    buckets: int = 4,
    straggler: int | None = 5,
    straggler_slowdown: float = 1.3,
    slow_link: tuple[int, int] | None = None,
    slow_link_factor: float = 4.0,
    metadata: bool = True,
    workload: str = "hft-lob",
    seed: int = 0,
    gz: bool = True,
) -> list[Path]:
    """Write ``ranks`` trace files under ``out``; return their paths. Events per rank ≈
    2 × steps × (kernels_per_step + buckets + 2); ``kernels_per_step`` defaults to one
    iteration of ``workload`` (repeated when larger). The job's schedule (arrivals, collective
    ends) is computed first for all ranks from per-rank noise arrays; then each rank's events
    are written one rank at a time, so memory holds one rank, not the job."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    template = iteration_kernels(workload)
    n = kernels_per_step or len(template)
    kernels = [template[i % len(template)] for i in range(n)]
    base = np.array([k[1] for k in kernels])
    offsets = rng.uniform(-5e4, 5e4, ranks)  # host clocks differ (µs)
    ring_slow = slow_link_factor if slow_link is not None else 1.0
    buckets = max(1, min(buckets, n))  # a bucket holds one kernel at least
    per_bucket = max(1, n // buckets)
    bounds = [
        (b * per_bucket, n if b == buckets - 1 else (b + 1) * per_bucket) for b in range(buckets)
    ]

    def durations(r: int) -> np.ndarray:
        """Rank r's kernel durations (µs), steps × kernels: the workload's, with noise."""
        noise = np.random.default_rng([seed, r]).uniform(0.98, 1.02, (steps, n))
        return base * noise * (straggler_slowdown if r == straggler else 1.0)

    # the schedule: per step and bucket each rank's arrival and the all-reduce's end; per step
    # the ring's transfers (src arrival, dst arrival, end)
    bucket_time = np.zeros((ranks, steps, buckets))
    for r in range(ranks):
        d = durations(r) + 2.0
        for b, (lo, hi) in enumerate(bounds):
            bucket_time[r, :, b] = d[:, lo:hi].sum(axis=1)
    arrive = np.zeros((steps, buckets, ranks))
    ar_end = np.zeros((steps, buckets))
    ring = np.zeros((steps, ranks, 3))  # src's arrival, dst's arrival, end — for src → src+1
    step_span = np.zeros((steps, 2))
    t_job = 1_000_000.0  # µs, job clock
    for step in range(steps):
        t = np.full(ranks, t_job)
        for b in range(buckets):
            t = t + bucket_time[:, step, b]
            arrive[step, b] = t
            # a collective's kernel starts when its rank arrives and ends after the last one
            ar_end[step, b] = t.max() + ALLREDUCE_US * ring_slow * rng.uniform(1.0, 1.2)
            t = np.maximum(t, ar_end[step, b] - ALLREDUCE_US * 0.5)  # the next bucket overlaps
        done = t.copy()
        for src in range(ranks if ranks > 1 else 0):
            dst = (src + 1) % ranks
            factor = slow_link_factor if slow_link == (src, dst) else 1.0
            end = max(t[src], t[dst]) + P2P_US * factor * rng.uniform(0.97, 1.03)
            ring[step, src] = (t[src], t[dst], end)
            done[src], done[dst] = max(done[src], end), max(done[dst], end)
        step_span[step] = (t_job, done.max())
        t_job = done.max() + 50.0
    every = f"[{', '.join(map(str, range(ranks)))}]"
    names = [json.dumps(k[0]) for k in kernels]
    paths = []
    for r in range(ranks):
        w = _RankWriter(r, float(offsets[r]))
        d = durations(r)
        for step in range(steps):
            t0 = step_span[step, 0]
            for b, (lo, hi) in enumerate(bounds):
                ts = t0 + np.concatenate(([0.0], np.cumsum(d[step, lo:hi] + 2.0)[:-1]))
                for k in range(lo, hi):
                    _, _, grid, block = kernels[k]
                    w.kernel(names[k], _COMPUTE, ts[k - lo], d[step, k], grid, block, None)
                t0 = arrive[step, b, r]
                seq = step * buckets + b
                args = _args(metadata, "allreduce", 1 << 22, every, ranks, seq=seq)
                w.kernel(_AR_JSON, _AR_STREAM, t0, ar_end[step, b] - t0, 24, 256, args)
                t0 = max(t0, ar_end[step, b] - ALLREDUCE_US * 0.5)
            if ranks > 1:
                src, prev = r, (r - 1) % ranks
                a_src, _, end = ring[step, src]
                send = _args(metadata, "send", 1 << 20, every, ranks, dst=(r + 1) % ranks)
                w.kernel(_P2P_JSON, _SEND_STREAM, a_src, end - a_src, 8, 256, send)
                _, a_dst, end = ring[step, prev]
                recv = _args(metadata, "recv", 1 << 20, every, ranks, src=prev)
                w.kernel(_P2P_JSON, _RECV_STREAM, a_dst, end - a_dst, 8, 256, recv)
            w.step(step, step_span[step, 0], step_span[step, 1] - step_span[step, 0])
        p = out / (f"rank{r:04d}.json.gz" if gz else f"rank{r:04d}.json")
        w.write(p, ranks, gz)
        paths.append(p)
    return paths


class _RankWriter:
    """One rank's events as JSON text (its clock offset added), written at the end."""

    def __init__(self, rank: int, offset_us: float) -> None:
        self.rank, self.offset = rank, offset_us
        self.parts: list[str] = []
        self.corr = 1

    def kernel(
        self, name: str, stream: int, ts: float, dur: float, grid: int, block: int,
        extra: dict | None,
    ) -> None:  # fmt: skip
        c, self.corr = self.corr, self.corr + 1
        t = ts + self.offset
        more = "" if not extra else ", " + json.dumps(extra)[1:-1]
        self.parts.append(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": '
            f'{100 + self.rank}, "tid": 1, "ts": {t - 6.0:.3f}, "dur": 4.0, '
            f'"args": {{"correlation": {c}}}}}'
        )
        self.parts.append(
            f'{{"ph": "X", "cat": "kernel", "name": {name}, "pid": 0, "tid": {stream}, '
            f'"ts": {t:.3f}, "dur": {dur:.3f}, "args": {{"device": 0, "stream": {stream}, '
            f'"correlation": {c}, "grid": [{grid}, 1, 1], "block": [{block}, 1, 1]{more}}}}}'
        )

    def step(self, step: int, ts: float, dur: float) -> None:
        self.parts.append(
            f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": '
            f'{100 + self.rank}, "tid": 1, "ts": {ts + self.offset:.3f}, "dur": {dur:.3f}}}'
        )

    def write(self, path: Path, world: int, gz: bool, devices: list[dict] | None = None) -> None:
        meta: dict = {
            "schemaVersion": 1,
            "synthetic": True,
            "generator": "engine/analyze/ranks/synth_ranks.py",
            "distributedInfo": {"backend": "nccl", "rank": self.rank, "world_size": world},
        }
        if devices:
            meta["deviceProperties"] = devices
        head = json.dumps(meta)[:-1]
        data = (head + ', "traceEvents": [\n' + ",\n".join(self.parts) + "\n]}\n").encode()
        path.write_bytes(gzip.compress(data, 1) if gz else data)


def _args(
    metadata: bool,
    name: str,
    nelems: int,
    group_ranks: str,
    size: int,
    seq: int | None = None,
    src: int | None = None,
    dst: int | None = None,
) -> dict | None:
    """A collective kernel's args as recent PyTorch profilers write them (None: an older one)."""
    if not metadata:
        return None
    a: dict = {
        "Collective name": name,
        "dtype": "BFloat16",
        "In msg nelems": nelems,
        "Out msg nelems": nelems,
        "Group size": size,
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": group_ranks,
    }
    if seq is not None:
        a["Seq"] = seq
    if src is not None:
        a["Src Rank"] = src
    if dst is not None:
        a["Dst Rank"] = dst
    return a


#: the all-to-all job's kernels (names as NCCL 2.x and cuBLAS write them)
_A2A_JSON = json.dumps(
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
)
_GEMM_JSON = json.dumps(
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
)
_NCCL_STREAM = 13
#: the order of one step's collectives: five all-to-all exchanges ("x") and three all-reduces
#: ("a"), compute before each
STEP_PLAN = "xaxxaxax"
#: a deviceProperties entry the hardware catalogue knows (H100 SXM: NVLink 450 GB/s a way)
_H100 = {
    "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_045_346_304,
    "computeMajor": 9, "computeMinor": 0, "numSms": 132,
}  # fmt: skip


def exchange_job(
    out: Path,
    ranks: int = 8,
    steps: int = 3,
    straggler: int = 5,
    late_us: tuple[float, ...] = (3_800.0, 900.0, 0.0, 600.0, 400.0),
    reduce_straggler: int = 2,
    reduce_late_us: float = 120.0,
    lost: dict[int, tuple[int, ...]] | None = None,
    plan: str = STEP_PLAN,
    seed: int = 0,
) -> list[Path]:
    """Write a SYNTHETIC job like issue 46's 8-rank trace: per step five all-to-all exchanges
    that run as ``ncclKernel_SendRecv`` kernels naming neither their peer nor their collective
    (no args, as older profilers write them), and three small AllReduces with their process
    group's metadata (group, ranks, Seq, sizes). Rank ``straggler`` arrives ``late_us[k]`` late
    at exchange k (last at every exchange with a lateness above 0); rank ``reduce_straggler``
    arrives ``reduce_late_us`` late at every AllReduce. A collective's kernel starts when its
    rank arrives and ends on every rank within 2 µs of the same instant, after the last arrival
    and its transfer; host clocks differ per rank (±50 ms). ``lost`` drops, per rank, the
    exchanges (their index in the step) whose kernels that rank's trace lacks — a profiler
    that lost them — so those exchanges cannot be matched. ``plan`` orders a step's exchanges
    ("x") and AllReduces ("a"). Returns the files' paths.

    The waits it plants, per step (others' total, summed over the ranks): at exchange k,
    (ranks − 1) × late_us[k] for rank ``straggler``; at each AllReduce, (ranks − 1) ×
    reduce_late_us for rank ``reduce_straggler`` (``planted_waits`` computes them)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    offsets = rng.uniform(-5e4, 5e4, ranks)  # host clocks differ (µs)
    lost = lost or {}
    every = f"[{', '.join(map(str, range(ranks)))}]"
    writers = [_RankWriter(r, float(offsets[r])) for r in range(ranks)]
    t_job = 1_000_000.0  # µs, job clock
    seq = 0
    for step in range(steps):
        t = np.full(ranks, t_job)
        x = 0
        for kind in plan:
            # the compute before the collective (µs): the late rank's takes longer
            compute = 900.0 * rng.uniform(0.995, 1.005, ranks)
            if kind == "x":
                compute[straggler] += late_us[x % len(late_us)]
            else:
                compute[reduce_straggler] += reduce_late_us
            for r in range(ranks):
                writers[r].kernel(_GEMM_JSON, 7, t[r], compute[r], 132, 256, None)
            arrive = t + compute + 2.0
            transfer = (180.0 if kind == "x" else 40.0) * rng.uniform(0.98, 1.02)
            end = arrive.max() + transfer + rng.uniform(0.0, 2.0, ranks)  # ends agree to 2 µs
            for r in range(ranks):
                if kind == "x" and x in lost.get(r, ()):
                    continue  # this rank's trace lost that exchange's kernel
                if kind == "x":
                    name, args = _A2A_JSON, None
                else:
                    name = _AR_JSON
                    args = _args(True, "allreduce", 1 << 16, every, ranks, seq=seq)
                writers[r].kernel(name, _NCCL_STREAM, arrive[r], end[r] - arrive[r], 32, 512, args)
            x += kind == "x"
            seq += kind == "a"
            t = end + 3.0
        span = float(t.max()) - t_job
        for r in range(ranks):
            writers[r].step(step, t_job - 10.0, span + 10.0)
        t_job = float(t.max()) + 50.0
    paths = []
    for r, w in enumerate(writers):
        p = out / f"rank{r:04d}.json.gz"
        w.write(p, ranks, True, devices=[_H100])
        paths.append(p)
    return paths


def planted_waits(
    ranks: int = 8,
    steps: int = 3,
    straggler: int = 5,
    late_us: tuple[float, ...] = (3_800.0, 900.0, 0.0, 600.0, 400.0),
    reduce_straggler: int = 2,
    reduce_late_us: float = 120.0,
    plan: str = STEP_PLAN,
) -> dict[int, float]:
    """The others' wait ``exchange_job`` plants for each late rank (ns, summed over the ranks
    and steps): what a correct blame finds, to within the compute noise (±0.5 % of 900 µs)."""
    x, a = plan.count("x"), plan.count("a")
    on_x = sum(late_us[k % len(late_us)] for k in range(x))
    return {
        straggler: (ranks - 1) * on_x * steps * 1e3,
        reduce_straggler: (ranks - 1) * a * reduce_late_us * steps * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m engine.analyze.ranks.synth_ranks OUT [--ranks N] [--events E] …``: write SYNTHETIC
    rank traces (sizes from the arguments) for a try of `gitm-tui analyze OUT`."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m engine.analyze.ranks.synth_ranks", description=main.__doc__
    )
    ap.add_argument("out", type=Path)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--events", type=int, default=None, help="about this many events per rank")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--straggler", type=int, default=5, help="-1: none")
    ap.add_argument("--slow-link", default="2,3", help="SRC,DST of the ring, or 'none'")
    ap.add_argument("--no-metadata", action="store_true", help="kernels without comm args")
    ap.add_argument("--workload", default="hft-lob")
    ap.add_argument("--seed", type=int, default=0)
    ns = ap.parse_args(argv)
    if ns.ranks < 1 or ns.steps < 1:
        ap.error("--ranks and --steps must be >= 1")
    link = None
    if ns.slow_link != "none":
        try:
            a, b = (int(x) for x in ns.slow_link.split(","))
        except ValueError:
            ap.error("--slow-link: SRC,DST (two ranks) or 'none'")
        link = (a, b)
    kernels = None if ns.events is None else max(1, ns.events // (2 * ns.steps) - 6)
    paths = write_ranks(
        ns.out, ranks=ns.ranks, steps=ns.steps, kernels_per_step=kernels,
        straggler=None if ns.straggler < 0 else ns.straggler, slow_link=link,
        metadata=not ns.no_metadata, workload=ns.workload, seed=ns.seed,
    )  # fmt: skip
    print(f"wrote {len(paths)} SYNTHETIC rank traces to {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def second_rank(
    src: Path, out: Path, clock_offset_us: float = 0.0, late_us: float = 0.0, every: int = 1
) -> Path:
    """Write a SYNTHETIC rank 1 made from a real rank-0 Kineto trace of a world of 2 (e.g. HTA's
    a100_nccl_pg_metadata.json.gz, whose NCCL kernels carry process-group metadata): the same
    events, rank 1 in ``distributedInfo``, every time moved by ``clock_offset_us`` (another
    host's clock), and every ``every``-th NCCL kernel starting ``late_us`` earlier but ending
    when rank 0's does (rank 1 arrived first and waited: rank 0 is the planted straggler). The
    file says it is synthetic: ``"synthetic": true`` and the generator."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    info = doc.get("distributedInfo") or {}
    if info.get("rank") != 0 or info.get("world_size") != 2:
        raise ValueError(f"{src}: not rank 0 of a world of 2")
    doc["distributedInfo"] = {**info, "rank": 1}
    doc["synthetic"] = True
    doc["generator"] = "engine/analyze/ranks/synth_ranks.py:second_rank"
    n = 0
    for e in doc.get("traceEvents", []):
        if not isinstance(e, dict) or not isinstance(e.get("ts"), (int, float)):
            continue
        if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl"):
            if n % every == 0 and late_us > 0:
                e["ts"] -= late_us
                e["dur"] = float(e.get("dur", 0)) + late_us
            n += 1
        e["ts"] = e["ts"] + clock_offset_us
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
    return out


def real_ranks(
    src: Path,
    out_dir: Path,
    ranks: int,
    straggler: int | None = 1,
    late_us: float = 400.0,
    seed: int = 0,
) -> list[Path]:
    """Write ``ranks`` SYNTHETIC rank traces made from one real Kineto trace (e.g. HTA's A100
    rank, a100_training_3streams.json.gz): each is the real rank's events with its own rank
    number in ``distributedInfo`` (world size ``ranks``), every time moved by a clock offset of
    its own (another host's clock, up to ±50 ms, drawn from ``seed``), and — on every rank but
    ``straggler`` — every NCCL kernel starting ``late_us`` earlier but ending when the
    straggler's does (those ranks arrived first and waited). What a real job's ranks differ by
    beyond that (their own kernels' times) is not made up: the compute is the real rank's on
    every rank. Each file says it is synthetic (``"synthetic": true`` and the generator).
    Returns the paths, rank order (``rank0000.json.gz`` …)."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = [e for e in doc.get("traceEvents", []) if isinstance(e, dict)]
    doc["traceEvents"] = events
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    ts0 = [float(e["ts"]) for e in timed]
    dur0 = [e.get("dur") for e in timed]
    comm = [e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl") for e in timed]
    info = doc.get("distributedInfo") or {}
    doc["synthetic"] = True
    doc["generator"] = "engine/analyze/ranks/synth_ranks.py:real_ranks"
    offsets = np.random.default_rng(seed).uniform(-50_000.0, 50_000.0, ranks)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(ranks):
        doc["distributedInfo"] = {**info, "rank": r, "world_size": ranks}
        shift, waits = float(offsets[r]), r != straggler and late_us > 0
        for e, t, d, c in zip(timed, ts0, dur0, comm, strict=True):
            if c and waits:
                e["ts"] = round(t - late_us + shift, 3)
                e["dur"] = float(d or 0) + late_us
            else:
                e["ts"] = round(t + shift, 3)
                if d is not None:
                    e["dur"] = d
        path = out_dir / f"rank{r:04d}.json.gz"
        path.write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
        paths.append(path)
    return paths
