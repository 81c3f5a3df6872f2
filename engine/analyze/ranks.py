"""Many ranks of one job (issue 16, first part): a compact summary per rank — never its events —
and the cross-rank analysis a distributed-training engineer needs.

``summarize(trace)`` keeps, per rank, what crossing ranks needs: the collectives (NCCL/RCCL
kernels: op, ordinal, start, end), the profiler steps, and compute / communication time and
their overlap. A summary is a few kB whatever the trace's size, so the summaries of thousands of
ranks fit in one process (the per-rank work can run anywhere; engine.analyze.run, Dask later).

``cross_rank(summaries)``:

* **matching** — the i-th collective of one op on one rank is the i-th of that op on every
  other (NCCL runs a communicator's collectives in the same order on all its ranks). Kineto
  kernels carry no communicator id, so two communicators running the same op interleaved
  differently on different ranks would be mismatched: the result says the rule it used;
* **clocks** — ranks on different hosts do not share a clock. A collective ends at (nearly) the
  same instant on all its ranks, so each rank's offset is the median difference of its
  collective *ends* from the reference rank's (the lowest rank); arrivals are compared on the
  aligned clocks, and the offsets are reported;
* per collective the **arrival skew** (last aligned start − first) and the rank that arrived
  last; per rank the time it **waited** for the last arrival, in all and per step of the
  reference rank; the **straggler** of each step is the rank everyone else waited for most;
* **outliers** — per rank (step time, time waited, communication share), a robust rule:
  outside median ± k·MAD (k = 3.5 on the MAD scaled to σ, 1.4826·MAD), said so in the output.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from engine.trace.segments import Kind, Klass
from engine.trace.trace import Trace

#: the robust outlier rule: |x − median| > K_MAD · 1.4826 · MAD
K_MAD = 3.5
_OP = re.compile(
    r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv|AllToAll|"
    r"all_reduce|all_gather|reduce_scatter|broadcast|all_to_all)",
    re.IGNORECASE,
)


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RankSummary(_M):
    """What one rank's trace says that crossing ranks needs (a few kB)."""

    source: str
    rank: int | None
    world_size: int | None = None
    steps: list[tuple[int, int]] = Field(description="ProfilerStep (start, end) ns, own clock")
    ops: list[str] = Field(description="per collective kernel, in start order: its op")
    ordinals: list[int] = Field(description="its index among this rank's kernels of that op")
    starts: list[int]
    ends: list[int]
    compute_ns: int = Field(description="kernel time outside collectives (union over streams)")
    comm_ns: int = Field(description="collective kernel time (union over streams)")
    overlap_ns: int = Field(description="time a collective and a compute kernel both ran")
    span_ns: int


def collective_op(name: str) -> str:
    """The op of a collective kernel's name ('ncclDevKernel_AllReduce_Sum_f32…' → AllReduce)."""
    m = _OP.search(name)
    if not m:
        return "collective"
    op = m.group(1)
    canon = {
        "all_reduce": "AllReduce",
        "all_gather": "AllGather",
        "reduce_scatter": "ReduceScatter",
        "broadcast": "Broadcast",
        "all_to_all": "AllToAll",
    }
    return canon.get(op.lower(), op[0].upper() + op[1:])


def _union(start: np.ndarray, end: np.ndarray) -> list[tuple[int, int]]:
    if not len(start):
        return []
    o = np.argsort(start, kind="stable")
    out: list[tuple[int, int]] = []
    cs, ce = int(start[o[0]]), int(end[o[0]])
    for s, e in zip(start[o[1:]].tolist(), end[o[1:]].tolist(), strict=True):
        if s > ce:
            out.append((cs, ce))
            cs, ce = s, e
        else:
            ce = max(ce, e)
    out.append((cs, ce))
    return out


def _length(spans: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in spans)


def _intersection(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def summarize(trace: Trace) -> RankSummary:
    """The rank's summary: its collectives, steps, and compute/communication time."""
    seg = trace.segments
    names = trace.names
    # NCCL/RCCL kernels: kernel rows of the COMM class (or COMM rows where a format says so)
    comm = (seg.kind == Kind.COMM) | ((seg.kind == Kind.KERNEL) & (seg.klass == Klass.COMM))
    kern = (seg.kind == Kind.KERNEL) & (seg.klass != Klass.COMM)
    idx = np.flatnonzero(comm)
    idx = idx[np.argsort(seg.start_ns[idx], kind="stable")]
    ops = [collective_op(names[int(seg.name[i])]) for i in idx]
    seen: dict[str, int] = defaultdict(int)
    ordinals = []
    for op in ops:
        ordinals.append(seen[op])
        seen[op] += 1
    cu = _union(seg.start_ns[comm], seg.end_ns[comm])
    ku = _union(seg.start_ns[kern], seg.end_ns[kern])
    props = trace.device_properties
    steps = [(int(a), int(b)) for a, b in props.get("profiler_steps", []) or []]
    span = int(seg.end_ns.max() - seg.start_ns.min()) if len(seg) else 0
    ws = props.get("world_size")
    return RankSummary(
        source=trace.source,
        rank=props.get("rank"),
        world_size=ws if isinstance(ws, int) and not isinstance(ws, bool) else None,
        steps=steps,
        ops=ops,
        ordinals=ordinals,
        starts=[int(x) for x in seg.start_ns[idx]],
        ends=[int(x) for x in seg.end_ns[idx]],
        compute_ns=_length(ku) - _intersection(ku, cu),
        comm_ns=_length(cu),
        overlap_ns=_intersection(ku, cu),
        span_ns=span,
    )


# ---------------------------------------------------------------------- across ranks
class CollectiveSkew(_M):
    op: str
    ordinal: int
    ranks: int
    skew_ns: int = Field(description="last aligned arrival − first")
    last_rank: int = Field(description="the rank that arrived last (the others waited for it)")


class StepStraggler(_M):
    step: int
    straggler: int = Field(description="the rank the others waited for most in this step")
    waited_ns: dict[int, int] = Field(description="per rank: time spent waiting in collectives")


class RankStats(_M):
    rank: int
    clock_offset_ns: int = Field(description="added to this rank's times to align them")
    waited_ns: int
    last_arrivals: int = Field(description="collectives this rank arrived at last")
    comm_share: float = Field(description="collective time / (compute + collective time)")
    overlap_share: float = Field(description="collective time overlapped by compute")
    step_ns: float | None = Field(description="median profiler-step time, own clock")


class Outlier(_M):
    rank: int
    metric: str
    value: float
    median: float
    mad: float


class CrossRank(_M):
    ranks: list[int]
    trusted: bool = Field(
        description="collective ends coincide after alignment (within half a typical "
        "collective): arrivals, waits and stragglers can be read"
    )
    matched: int = Field(description="collectives found on every rank")
    unmatched: int = Field(description="collectives missing on some rank (not compared)")
    matching: str
    clocks: str
    rule: str
    collectives: list[CollectiveSkew] = Field(description="the worst skews first (at most 50)")
    steps: list[StepStraggler]
    per_rank: list[RankStats]
    outliers: list[Outlier]
    notes: list[str]


def _outliers(values: dict[int, float], metric: str) -> list[Outlier]:
    xs = np.array(list(values.values()), float)
    if len(xs) < 3:
        return []
    med = float(np.median(xs))
    mad = float(np.median(np.abs(xs - med)))
    scale = 1.4826 * mad
    out = []
    for r, v in values.items():
        if scale > 0 and abs(v - med) > K_MAD * scale:
            out.append(Outlier(rank=r, metric=metric, value=v, median=med, mad=mad))
        elif scale == 0 and v != med and abs(v - med) > 1e-9 * max(1.0, abs(med)):
            out.append(Outlier(rank=r, metric=metric, value=v, median=med, mad=0.0))
    return out


def cross_rank(summaries: list[RankSummary]) -> CrossRank | None:
    """The cross-rank analysis of one job's ranks; None when there are not two distinct ranks."""
    by_rank = {s.rank: s for s in summaries if s.rank is not None}
    if len(by_rank) < 2 or len(by_rank) != len([s for s in summaries if s.rank is not None]):
        return None
    ranks = sorted(by_rank)
    keyed: dict[int, dict[tuple[str, int], tuple[int, int]]] = {
        r: {
            (op, k): (a, b) for op, k, a, b in zip(s.ops, s.ordinals, s.starts, s.ends, strict=True)
        }
        for r, s in by_rank.items()
    }
    common = set.intersection(*(set(k) for k in keyed.values()))
    every = set.union(*(set(k) for k in keyed.values()))
    ref = ranks[0]
    keys = sorted(common, key=lambda k: keyed[ref][k][0])
    notes: list[str] = []
    # clock offsets: collectives end together on all their ranks
    offset: dict[int, int] = {}
    for r in ranks:
        d = [keyed[ref][k][1] - keyed[r][k][1] for k in keys]
        offset[r] = int(np.median(d)) if d else 0
    if not keys:
        notes.append("no collective is on every rank: nothing to align or compare")
    # the model's own check: after alignment, a collective's ends coincide on every rank
    durations = [keyed[r][k][1] - keyed[r][k][0] for r in ranks for k in keys]
    typical = float(np.median(durations)) if durations else 0.0
    residual = max(
        (
            float(np.median([abs(keyed[r][k][1] + offset[r] - keyed[ref][k][1]) for k in keys]))
            for r in ranks
        ),
        default=0.0,
    )
    trusted = bool(keys) and residual <= 0.5 * typical
    if keys and not trusted:
        notes.append(
            f"collective ends do not line up across ranks after alignment (median residual "
            f"{residual / 1e6:,.3f} ms vs a typical collective of {typical / 1e6:,.3f} ms): the "
            "matching or the clocks are not reliable here, so no straggler is named from them"
        )
    skews: list[CollectiveSkew] = []
    waited = dict.fromkeys(ranks, 0)
    last_n = dict.fromkeys(ranks, 0)
    ref_steps = by_rank[ref].steps
    step_wait: dict[int, dict[int, int]] = defaultdict(lambda: dict.fromkeys(ranks, 0))
    for k in keys:
        arrive = {r: keyed[r][k][0] + offset[r] for r in ranks}
        last = max(arrive, key=lambda r: arrive[r])
        first = min(arrive.values())
        skews.append(
            CollectiveSkew(
                op=k[0],
                ordinal=k[1],
                ranks=len(ranks),
                skew_ns=arrive[last] - first,
                last_rank=last,
            )
        )
        last_n[last] += 1
        end_ref = keyed[ref][k][1]
        step = next((i for i, (a, b) in enumerate(ref_steps) if a <= end_ref <= b), None)
        for r in ranks:
            w = arrive[last] - arrive[r]
            waited[r] += w
            if step is not None:
                step_wait[step][r] += w
    steps = []
    for i in sorted(step_wait) if trusted else ():
        sw = step_wait[i]
        # the straggler is who the others waited for: the rank that waited least
        straggler = min(ranks, key=lambda r: sw[r])
        steps.append(StepStraggler(step=i, straggler=straggler, waited_ns=sw))
    per_rank = []
    for r in ranks:
        s = by_rank[r]
        busy = s.compute_ns + s.comm_ns
        durs = [b - a for a, b in s.steps]
        per_rank.append(
            RankStats(
                rank=r,
                clock_offset_ns=offset[r],
                waited_ns=waited[r],
                last_arrivals=last_n[r],
                comm_share=s.comm_ns / busy if busy else 0.0,
                overlap_share=s.overlap_ns / s.comm_ns if s.comm_ns else 0.0,
                step_ns=float(np.median(durs)) if durs else None,
            )
        )
    outliers = (
        _outliers({p.rank: float(p.waited_ns) for p in per_rank}, "waited_ns")
        + _outliers({p.rank: p.comm_share for p in per_rank}, "comm_share")
        + _outliers({p.rank: p.step_ns for p in per_rank if p.step_ns is not None}, "step_ns")
    )
    skews.sort(key=lambda c: -c.skew_ns)
    return CrossRank(
        ranks=ranks,
        trusted=trusted,
        matched=len(keys),
        unmatched=len(every) - len(keys),
        matching="the i-th collective of an op on one rank is the i-th of that op on every rank "
        "(Kineto kernels carry no communicator id)",
        clocks=f"aligned on collective ends: each rank's median offset from rank {ref}",
        rule=f"outlier: |x − median| > {K_MAD} × 1.4826 × MAD",
        collectives=skews[:50],
        steps=steps,
        per_rank=per_rank,
        outliers=outliers,
        notes=notes,
    )
