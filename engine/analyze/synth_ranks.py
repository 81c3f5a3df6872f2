"""SYNTHETIC multi-rank traces for tests and benchmarks: N Kineto JSON files of one data-parallel
job, with compute kernels, an NCCL all-reduce per bucket on a communication stream, profiler
steps, per-rank clock offsets (ranks on different hosts), and a planted straggler (one rank's
compute takes longer, so every other rank waits for it at each collective). Written by this
code, never recorded: the files say so in their metadata (``"synthetic": true``).
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path


def write_ranks(
    out: Path,
    ranks: int = 8,
    steps: int = 4,
    kernels_per_step: int = 40,
    buckets: int = 4,
    straggler: int | None = 5,
    straggler_slowdown: float = 1.3,
    seed: int = 0,
    gz: bool = True,
) -> list[Path]:
    """Write ``ranks`` trace files under ``out``; return their paths. Sizes scale with
    ``steps × kernels_per_step`` (about 2 events per kernel)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    compute_us = [rng.uniform(20, 200) for _ in range(kernels_per_step)]
    offsets = {r: rng.uniform(-5e4, 5e4) for r in range(ranks)}  # host clocks differ (µs)
    paths = []
    # a collective starts when its rank gets there and ends when the last rank has arrived
    t_job = 1_000_000.0  # µs, job clock
    events: dict[int, list[dict]] = {r: [] for r in range(ranks)}
    corr = dict.fromkeys(range(ranks), 1)
    for step in range(steps):
        arrive_base = {r: t_job for r in range(ranks)}
        step_start = t_job
        per_bucket = kernels_per_step // buckets
        t = dict(arrive_base)
        step_end = t_job
        for b in range(buckets):
            for r in range(ranks):
                slow = straggler_slowdown if r == straggler else 1.0
                for k in range(b * per_bucket, (b + 1) * per_bucket):
                    d = compute_us[k] * slow * rng.uniform(0.98, 1.02)
                    _kernel(events[r], corr, r, f"sm80_xmma_gemm_bf16_layer{k}", 7, t[r], d)
                    t[r] += d + 2.0
            last = max(t.values())
            ar_dur = 150.0 + 30.0 * rng.random()
            for r in range(ranks):
                # the kernel is launched when this rank arrives and ends after the last one
                end = last + ar_dur
                _kernel(
                    events[r],
                    corr,
                    r,
                    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                    21,
                    t[r],
                    end - t[r],
                )
                t[r] = max(t[r], end - ar_dur * 0.5)  # compute of the next bucket overlaps
            step_end = max(step_end, last + ar_dur)
        for r in range(ranks):
            events[r].append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{step}",
                    "pid": 100 + r,
                    "tid": 1,
                    "ts": round(step_start + offsets[r], 3),
                    "dur": round(step_end - step_start, 3),
                }
            )
        t_job = step_end + 50.0
    for r in range(ranks):
        for e in events[r]:
            if e["cat"] != "user_annotation":
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


def _kernel(
    ev: list[dict], corr: dict[int, int], rank: int, name: str, stream: int, ts: float, dur: float
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
            "ts": round(ts - 6.0, 3),
            "dur": 4.0,
            "args": {"correlation": c},
        }
    )
    ev.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": stream,
            "ts": round(ts, 3),
            "dur": round(dur, 3),
            "args": {
                "device": 0,
                "stream": stream,
                "correlation": c,
                "grid": [108, 1, 1],
                "block": [256, 1, 1],
            },
        }
    )
