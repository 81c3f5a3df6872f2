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
import random
from functools import lru_cache
from pathlib import Path

#: the ring exchange's transfer and the all-reduce's base times (µs) on healthy links
P2P_US = 60.0
ALLREDUCE_US = 150.0
_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
_P2P = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
_COMPUTE, _AR_STREAM, _SEND_STREAM, _RECV_STREAM = 7, 21, 23, 25


@lru_cache(maxsize=4)
def iteration_kernels(workload: str, seed: int = 0) -> tuple[tuple[str, float, int, int], ...]:
    """One iteration's kernels as the simulator runs ``workload``: (name, µs, grid, block)."""
    import numpy as np

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
    iteration of ``workload`` (repeated when larger)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    template = iteration_kernels(workload)
    n_kernels = kernels_per_step or len(template)
    kernels = [template[i % len(template)] for i in range(n_kernels)]
    offsets = {r: rng.uniform(-5e4, 5e4) for r in range(ranks)}  # host clocks differ (µs)
    ring_slow = slow_link_factor if slow_link is not None else 1.0
    events: dict[int, list[dict]] = {r: [] for r in range(ranks)}
    corr = dict.fromkeys(range(ranks), 1)
    every = f"[{', '.join(map(str, range(ranks)))}]"
    seq = 0
    t_job = 1_000_000.0  # µs, job clock
    for step in range(steps):
        step_start = t_job
        t = dict.fromkeys(range(ranks), t_job)
        per_bucket = max(1, n_kernels // buckets)
        for b in range(buckets):
            hi = n_kernels if b == buckets - 1 else (b + 1) * per_bucket
            for r in range(ranks):
                slow = straggler_slowdown if r == straggler else 1.0
                for name, us, grid, block in kernels[b * per_bucket : hi]:
                    d = us * slow * rng.uniform(0.98, 1.02)
                    _kernel(events[r], corr, r, name, _COMPUTE, t[r], d, grid, block, None)
                    t[r] += d + 2.0
            # a collective's kernel starts when its rank arrives and ends after the last one
            end = max(t.values()) + ALLREDUCE_US * ring_slow * rng.uniform(1.0, 1.2)
            args = _args(metadata, "allreduce", 1 << 22, every, ranks, seq=seq)
            seq += 1
            for r in range(ranks):
                _kernel(events[r], corr, r, _AR, _AR_STREAM, t[r], end - t[r], 24, 256, args)
                t[r] = max(t[r], end - ALLREDUCE_US * 0.5)  # the next bucket overlaps it
        # the ring exchange: r sends to r+1 and receives from r-1 (on two streams)
        done = dict(t)
        for src in range(ranks):
            dst = (src + 1) % ranks
            if dst == src:
                break
            factor = slow_link_factor if slow_link == (src, dst) else 1.0
            end = max(t[src], t[dst]) + P2P_US * factor * rng.uniform(0.97, 1.03)
            send = _args(metadata, "send", 1 << 20, every, ranks, dst=dst)
            recv = _args(metadata, "recv", 1 << 20, every, ranks, src=src)
            _kernel(events[src], corr, src, _P2P, _SEND_STREAM, t[src], end - t[src], 8, 256, send)
            _kernel(events[dst], corr, dst, _P2P, _RECV_STREAM, t[dst], end - t[dst], 8, 256, recv)
            done[src], done[dst] = max(done[src], end), max(done[dst], end)
        step_end = max(done.values())
        for r in range(ranks):
            events[r].append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{step}",
                    "pid": 100 + r,
                    "tid": 1,
                    "ts": step_start,
                    "dur": round(step_end - step_start, 3),
                }
            )
        t_job = step_end + 50.0
    paths = []
    for r in range(ranks):
        for e in events[r]:
            e["ts"] = round(e["ts"] + offsets[r], 3)
        doc = {
            "schemaVersion": 1,
            "synthetic": True,
            "generator": "engine/analyze/synth_ranks.py",
            "distributedInfo": {"backend": "nccl", "rank": r, "world_size": ranks},
            "traceEvents": events[r],
        }
        p = out / (f"rank{r:04d}.json.gz" if gz else f"rank{r:04d}.json")
        data = json.dumps(doc).encode()
        p.write_bytes(gzip.compress(data, 1) if gz else data)
        paths.append(p)
    return paths


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


def _kernel(
    ev: list[dict],
    corr: dict[int, int],
    rank: int,
    name: str,
    stream: int,
    ts: float,
    dur: float,
    grid: int,
    block: int,
    extra: dict | None,
) -> None:
    c = corr[rank]
    corr[rank] += 1
    ev.append(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 100 + rank,
            "tid": 1,
            "ts": ts - 6.0,
            "dur": 4.0,
            "args": {"correlation": c},
        }
    )
    args = {
        "device": 0,
        "stream": stream,
        "correlation": c,
        "grid": [grid, 1, 1],
        "block": [block, 1, 1],
    }
    if extra:
        args.update(extra)
    ev.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": stream,
            "ts": ts,
            "dur": round(dur, 3),
            "args": args,
        }
    )
