"""Many ranks of one job (issue 16): a compact summary per rank — never its events — and the
cross-rank analysis a distributed-training engineer needs.

``summarize(trace)`` keeps, per rank, what crossing ranks needs: the collectives (NCCL/RCCL
kernels: op, start, end, the ProfilerStep#N their launch call fell in, and what the kernels'
args say of their communicator — engine.trace.kineto.collectives), the profiler steps, and
compute / communication time and their overlap. A summary is a few kB whatever the trace's size,
so the summaries of thousands of ranks fit in one process; the per-rank work runs anywhere (Dask:
engine.analyze.cluster).

``cross_rank(summaries)``:

* **matching** — a Send/Recv by (source, destination, its ordinal on that direction); a
  collective of a named process group by (group, op, Seq) — or its ordinal in the group where
  the trace has no Seq or repeats one; otherwise the i-th collective of an op on one rank is the
  i-th on every rank (NCCL runs a communicator's collectives in one order on all its ranks).
  Ordinals count within each ProfilerStep#N where every rank names its steps. The result says
  the rule it used;
* **clocks** — ranks on different hosts do not share a clock. A collective ends at (nearly) the
  same instant on all its ranks, so each rank's offset is the median difference of collective
  *ends*, chained from the reference rank (the lowest) through the collectives ranks share;
  the alignment is checked (``trusted``), and nothing that rests on it is given when it fails;
* per collective the **arrival skew** (last aligned start − first) and the rank that arrived
  last; per rank the time it **waited** for the last arrivals; per step the **straggler** — the
  rank the others waited for most (each wait is blamed on the rank that arrived last) — named
  only when the others' mean wait for it is at least STRAGGLER_SHARE of the step;
* **slow links** — each point-to-point direction and process group's transfer time against
  its peers' (``_links``);
* **outliers** — per rank (step time, time waited, communication share): outside median ±
  3.5·1.4826·MAD and beyond a floor, said so in the output.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections import defaultdict
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from engine.analyze.intervals import intersection as _intersection
from engine.analyze.intervals import interval_union
from engine.analyze.intervals import length as _length
from engine.optimizer.fingerprint import Fingerprint, distance, fingerprint_of_trace, load_params
from engine.text import clean
from engine.trace.import_memory import give_back
from engine.trace.segments import Kind, Klass
from engine.trace.trace import Trace

#: the robust outlier rule: |x − median| > K_MAD · 1.4826 · MAD
K_MAD = 3.5
#: a step's straggler is named only when the others waited for it this share of the step or more
STRAGGLER_SHARE = 0.01
#: how many of a rank's busiest compute kernels fingerprint its workload
KERNEL_PRINT = 32
#: the least deviation of aligned collective ends assumed (ns): NCCL's completion on different
#: ranks of one collective is never simultaneous to better than this
END_FLOOR_NS = 1_000
#: the alignment is trusted when at least MIN_AGREE and TRUST_SHARE of the matched collectives
#: end within the tolerance, and the tolerance is at most TRUST_REL of a typical collective
MIN_AGREE = 2
TRUST_SHARE = 0.8
TRUST_REL = 0.25
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
    step_ids: list[int] = Field(
        default=[], description="each step's N (ProfilerStep#N), -1 where not said"
    )
    ops: list[str] = Field(description="per collective kernel, in start order: its op")
    ordinals: list[int] = Field(description="its index among this rank's kernels of that op")
    starts: list[int]
    ends: list[int]
    groups: list[str] = Field(
        default=[], description="its process group's name ('' when the kernel does not say)"
    )
    peers: list[int] = Field(
        default=[], description="a Send's destination or a Recv's source rank (-1: none)"
    )
    nbytes: list[int] = Field(default=[], description="its message bytes (-1: not said)")
    seqs: list[int] = Field(default=[], description="its process group's sequence no. (-1)")
    coll_steps: list[int] = Field(
        default=[],
        description="the N of the ProfilerStep#N its launch call fell in (the kernel's start "
        "where the launch is unknown); -1 outside every step",
    )
    group_ranks: dict[str, list[tuple[int, int, int]]] = Field(
        default={},
        description="the ranks of each process group where the trace lists them, as ranges "
        "(start, stop, step): a group of 4,096 consecutive ranks is one range, not 4,096 ints",
    )
    group_size: dict[str, int] = Field(
        default={}, description="each process group's size where the trace says it"
    )
    group_desc: dict[str, str] = Field(
        default={}, description="each process group's description where the trace says it"
    )
    nelems: list[int] = Field(
        default=[], description="its message elements, the larger of in and out (-1: not said)"
    )
    kernels: list[str] = Field(
        default=[],
        description="the workload's fingerprint: a short hash of each of the KERNEL_PRINT "
        "compute kernel names that took the most device time (never the names themselves)",
    )
    fingerprint: Fingerprint | None = Field(
        default=None,
        description="the rank's workload fingerprint (engine.optimizer.fingerprint), names "
        "hashed and shapes left out: ranks of one job may hold different shards",
    )
    first_ns: int = Field(default=0, description="the trace's earliest time, own clock")
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


def _name_hash(name: str) -> str:
    return hashlib.blake2b(name.encode("utf-8", "replace"), digest_size=6).hexdigest()


def rank_ranges(ranks: tuple[int, ...] | list[int]) -> list[tuple[int, int, int]]:
    """Ranks as arithmetic runs (start, stop, step), in their order: [0..4095] → [(0, 4096, 1)]."""
    out: list[tuple[int, int, int]] = []
    i, n = 0, len(ranks)
    while i < n:
        if i + 1 == n:
            out.append((ranks[i], ranks[i] + 1, 1))
            break
        step = ranks[i + 1] - ranks[i]
        if step <= 0:
            out.append((ranks[i], ranks[i] + 1, 1))
            i += 1
            continue
        j = i + 1
        while j + 1 < n and ranks[j + 1] - ranks[j] == step:
            j += 1
        out.append((ranks[i], ranks[j] + 1, step))
        i = j + 1
    return out


def rank_fingerprint(trace: Trace) -> Fingerprint:
    """The fingerprint a rank's summary carries: names hashed (a summary holds no text from the
    trace), shapes left out (not compared across ranks: ``distance(across_ranks=True)``) — a
    few kB whatever the trace."""
    fp = fingerprint_of_trace(trace).hashed()
    return replace(fp, shapes=(), shapes_recorded=False, notes=())


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
    props = trace.device_properties
    # what the kernels' args say of their communicator (engine.trace.kineto.collectives)
    facts = {(a, b): m for a, b, m in props.get("collectives", []) or []}
    groups, peers, nbytes, seqs, nelems = [], [], [], [], []
    group_ranks: dict[str, list[tuple[int, int, int]]] = {}
    group_size: dict[str, int] = {}
    group_desc: dict[str, str] = {}
    for n, i in enumerate(idx.tolist()):
        m = facts.get((int(seg.start_ns[i]), int(seg.stream[i]))) or {}
        g = m.get("group") or ""
        groups.append(g)
        if g and m.get("group_ranks") and g not in group_ranks:
            group_ranks[g] = rank_ranges(m["group_ranks"])
        if g and m.get("group_size") and g not in group_size:
            group_size[g] = int(m["group_size"])
        if g and m.get("desc") and g not in group_desc:
            group_desc[g] = str(m["desc"])
        if m.get("op"):  # "Collective name": what it is where the kernel's name does not say
            ops[n] = str(m["op"])
        nelems.append(int(m["nelems"]) if m.get("nelems") else -1)
        peer = -1
        if ops[n] in ("SendRecv", "Send", "Recv", "collective"):
            if m.get("dst") is not None:
                ops[n], peer = "Send", int(m["dst"])
            elif m.get("src") is not None:
                ops[n], peer = "Recv", int(m["src"])
        peers.append(peer)
        nbytes.append(int(m["nbytes"]) if m.get("nbytes") else -1)
        seqs.append(int(m["seq"]) if m.get("seq") is not None else -1)
    # the step of a collective is the step its launch call fell in: a GPU running behind the
    # CPU runs a step's last kernels after the host's ProfilerStep window has closed
    when = seg.start_ns[idx].astype(np.int64)
    hrow = trace.host.rows_of(seg.correlation[idx]) if len(trace.host) else np.full(len(idx), -1)
    launched = hrow >= 0
    when[launched] = trace.host.api_start_ns[hrow[launched]]
    sids = [int(x) for x in props.get("profiler_step_ids", []) or []]
    spans = [(int(a), int(b)) for a, b in props.get("profiler_steps", []) or []]
    coll_steps = [-1] * len(idx)
    if spans and len(sids) == len(spans):
        starts_s = [a for a, _ in spans]
        for n, t in enumerate(when.tolist()):
            k = bisect.bisect_right(starts_s, t) - 1
            if k >= 0 and t <= spans[k][1]:
                coll_steps[n] = sids[k]
    seen: dict[str, int] = defaultdict(int)
    ordinals = []
    for op in ops:
        ordinals.append(seen[op])
        seen[op] += 1
    cu = interval_union(seg.start_ns, seg.end_ns, np.flatnonzero(comm))
    ku = interval_union(seg.start_ns, seg.end_ns, np.flatnonzero(kern))
    both = _intersection(ku, cu)  # time a collective and a compute kernel both ran
    give_back()  # the unions' sorted copies, freed: their pages back (see give_back)
    steps = [(int(a), int(b)) for a, b in props.get("profiler_steps", []) or []]
    ids = [int(x) for x in props.get("profiler_step_ids", []) or []]
    span = int(seg.end_ns.max() - seg.start_ns.min()) if len(seg) else 0
    ws = props.get("world_size")
    # the workload's fingerprint: the compute kernels that took the most time, hashed
    kernels: list[str] = []
    kidx = np.flatnonzero(kern)
    if len(kidx):
        nid = seg.name[kidx].astype(np.int64)
        tot = np.bincount(nid, weights=(seg.end_ns[kidx] - seg.start_ns[kidx]).astype(float))
        used = np.flatnonzero(tot > 0)
        top = used[np.argsort(-tot[used], kind="stable")[:KERNEL_PRINT]]
        kernels = sorted(_name_hash(names[int(k)]) for k in top)
    return RankSummary(
        source=trace.source,
        rank=props.get("rank"),
        world_size=ws if isinstance(ws, int) and not isinstance(ws, bool) else None,
        steps=steps,
        step_ids=ids if len(ids) == len(steps) else [-1] * len(steps),
        ops=ops,
        ordinals=ordinals,
        starts=[int(x) for x in seg.start_ns[idx]],
        ends=[int(x) for x in seg.end_ns[idx]],
        groups=groups,
        peers=peers,
        nbytes=nbytes,
        seqs=seqs,
        coll_steps=coll_steps,
        group_ranks=group_ranks,
        group_size=group_size,
        group_desc=group_desc,
        nelems=nelems,
        kernels=kernels,
        fingerprint=rank_fingerprint(trace),
        first_ns=int(seg.start_ns.min()) if len(seg) else 0,
        compute_ns=_length(ku) - both,
        comm_ns=_length(cu),
        overlap_ns=both,
        span_ns=span,
    )


# ---------------------------------------------------------------------- across ranks
class CollectiveSkew(_M):
    op: str
    ordinal: int
    group: str = Field(
        default="", description="its process group, or 'src→dst' of a point-to-point transfer"
    )
    ranks: int
    skew_ns: int = Field(description="last aligned arrival − first")
    last_rank: int = Field(description="the rank that arrived last (the others waited for it)")


class StepStraggler(_M):
    step: int = Field(
        description="the profiled iteration (N of ProfilerStep#N) where every rank names its "
        "steps; otherwise the index of the reference rank's step"
    )
    straggler: int | None = Field(
        description="the rank the others waited for most in this step; None when their mean "
        "wait is under STRAGGLER_SHARE of the step (no rank held the step up measurably)"
    )
    waited_ns: dict[int, int] = Field(description="per rank: time spent waiting in collectives")
    step_ns: int = Field(
        default=0,
        description="the step's length (median over the ranks where every rank names its "
        "steps; else the reference rank's)",
    )
    others_waited_ns: float = Field(
        default=0.0,
        description="the others' mean wait for the rank they waited for most (the straggler, "
        "when named): each collective's waits are blamed on the rank that arrived last",
    )


class RankStats(_M):
    rank: int
    clock_offset_ns: int = Field(description="added to this rank's times to align them")
    waited_ns: int | None = Field(
        description="None when the clocks cannot be trusted or no collective's ranks are all here"
    )
    last_arrivals: int | None = Field(description="collectives this rank arrived at last")
    comm_share: float = Field(description="collective time / (compute + collective time)")
    overlap_share: float = Field(description="collective time overlapped by compute")
    step_ns: float | None = Field(description="median profiler-step time, own clock")


class Outlier(_M):
    rank: int
    metric: str
    value: float
    median: float
    mad: float


class LinkStats(_M):
    """One point-to-point direction (src→dst) or one process group, and how fast it moved data."""

    link: str = Field(
        description="'2→3' (point to point) or 'group NAME' (the name from the trace)"
    )
    kind: str = Field(default="group", description="'p2p' (src → dst) or 'group'")
    src: int | None = Field(default=None, description="p2p: the sending rank")
    dst: int | None = Field(default=None, description="p2p: the receiving rank")
    ranks: list[int]
    op: str
    transfers: int
    transfer_ns: float = Field(
        description="median time a transfer took once every rank had arrived: the shortest of "
        "its kernels (the last rank to arrive waits for nobody)"
    )
    ns_per_byte: float | None = Field(description="median transfer time per message byte")
    slow: bool = Field(description="slower than its peers by the robust rule (links)")
    times_median: float | None = Field(description="its rate ÷ the median of its peers' rates")


class CrossRank(_M):
    ranks: list[int]
    trusted: bool = Field(
        description="collective ends coincide after alignment: at least MIN_AGREE and "
        "TRUST_SHARE of the matched collectives end within the tolerance, and the tolerance is "
        "at most TRUST_REL of a typical collective — arrivals, waits and stragglers can be read"
    )
    straggler: str = Field(
        default="",
        description="the verdict in one sentence: 'rank N, …', 'none — …', or 'cannot tell — "
        "<why>' (clocks or matching not trusted; or no collective whose every rank was given)",
    )
    tolerance_ns: float | None = Field(
        default=None,
        description="how far a matched collective's aligned ends may lie from their median: "
        "K_MAD × the robust deviation of the aligned ends (at least END_FLOOR_NS); a straggler "
        "is named only when the others waited for it longer than this",
    )
    judged: int = Field(
        default=0,
        description="matched collectives whose every rank is among the files (their group "
        "wholly here): the only ones waits, skews and stragglers are taken from",
    )
    matched: int = Field(description="collectives found on every rank that takes part")
    unmatched: int = Field(description="collectives missing on some rank (not compared)")
    inconsistent: int = Field(
        default=0,
        description="matched collectives whose aligned ends do not coincide (a wrong match or a "
        "clock step): left out of waits, stragglers and links",
    )
    matching: str
    clocks: str
    rule: str
    collectives: list[CollectiveSkew] = Field(description="the worst skews first (at most 50)")
    steps: list[StepStraggler]
    per_rank: list[RankStats]
    outliers: list[Outlier]
    links: list[LinkStats] = Field(
        default=[], description="point-to-point directions and process groups, slowest first"
    )
    slow_links: list[str] = Field(default=[], description="the links found slow, as sentences")
    ranks_lost: list[int] = Field(
        default=[], description="ranks sharing no collective with the others: clocks not aligned"
    )
    link_rule: str = ""
    notes: list[str]


def most_waited_for(c: CrossRank | None) -> int | None:
    """The rank named straggler in most steps (None: none named)."""
    votes = [s.straggler for s in (c.steps if c else []) if s.straggler is not None]
    return max(set(votes), key=votes.count) if votes else None


def _outliers(values: dict[int, float], metric: str, floor: float) -> list[Outlier]:
    """Ranks whose ``metric`` is off the median by more than K_MAD · 1.4826 · MAD and by more
    than ``floor`` (a difference too small to matter is never an outlier, even when the other
    ranks agree exactly and the MAD is 0)."""
    xs = np.array(list(values.values()), float)
    if len(xs) < 3:
        return []
    med = float(np.median(xs))
    mad = float(np.median(np.abs(xs - med)))
    bar = max(K_MAD * 1.4826 * mad, floor)
    return [
        Outlier(rank=r, metric=metric, value=v, median=med, mad=mad)
        for r, v in values.items()
        if abs(v - med) > bar
    ]


#: a link is slow when its rate exceeds its peers' median by K_MAD × max(1.4826·MAD, this share
#: of the median): transfer rates of healthy links differ by a few per cent, never zero
LINK_FLOOR = 0.10
#: outliers below these are not reported: comm share (absolute), step time (share of the median)
COMM_SHARE_FLOOR = 0.02
STEP_FLOOR = 0.02

_Key = tuple[object, ...]


class _Instance:
    """One collective (or transfer) as every taking-part rank recorded it."""

    __slots__ = (
        "expected", "group", "gsize", "members", "op", "ordinal", "p2p", "seen", "sizes", "step",
        "twice",
    )  # fmt: skip

    def __init__(
        self,
        op: str,
        ordinal: int,
        group: str,
        expected: frozenset[int] | None,
        p2p: tuple[int, int] | None,
        step: int | None,
        members: frozenset[int] | None = None,
        gsize: int | None = None,
    ) -> None:
        self.op, self.ordinal, self.group, self.expected = op, ordinal, group, expected
        self.p2p, self.step = p2p, step
        self.members, self.gsize = members, gsize  # the whole group, where the trace says it
        self.seen: dict[int, tuple[int, int, int]] = {}  # rank → (start, end, nbytes)
        self.sizes: set[int] = set()  # message elements (or bytes) the ranks recorded
        self.twice = False  # one rank had two collectives under this key: not compared


#: ops whose message sizes legitimately differ between their ranks (uneven splits, a root):
#: matched by op and ordinal, never by size
SIZE_VARIES = frozenset({"AllToAll", "Gather", "Scatter", "SendRecv", "collective"})


def _instances(
    by_rank: dict[int, RankSummary], by_step: bool, blind: dict[int, int]
) -> dict[_Key, _Instance]:
    """Every collective keyed so that the same one has the same key on every rank: a Send/Recv
    by (src, dst, its ordinal on that direction); a collective of a named process group by
    (group, op, Seq — or its ordinal in that group when the trace has no Seq or repeats one);
    otherwise by (op, message size, its ordinal among those), as NCCL runs a communicator's
    collectives in one order on all its ranks — by (op, ordinal) where the size is not said or
    may differ between ranks (SIZE_VARIES). A SendRecv kernel that names neither its peer nor
    its collective is not matched (counted per rank in ``blind``). With ``by_step`` (every rank names its
    ProfilerSteps) ordinals count within the step, so ranks whose profiler windows start at
    different iterations still match."""
    ranks = frozenset(by_rank)
    # a Seq repeated on any rank cannot key anything: that group's collectives go by ordinal
    repeated: set[tuple[str, str]] = set()
    for s in by_rank.values():
        seen_seq: set[tuple[str, str, int]] = set()
        n = len(s.ops)
        groups = s.groups if len(s.groups) == n else [""] * n
        seqs = s.seqs if len(s.seqs) == n else [-1] * n
        for op, g, q in zip(s.ops, groups, seqs, strict=True):
            if g and q >= 0:
                if (g, op, q) in seen_seq:
                    repeated.add((g, op))
                seen_seq.add((g, op, q))
    out: dict[_Key, _Instance] = {}
    for r, s in by_rank.items():
        n = len(s.ops)
        groups = s.groups if len(s.groups) == n else [""] * n
        peers = s.peers if len(s.peers) == n else [-1] * n
        sizes = s.nbytes if len(s.nbytes) == n else [-1] * n
        elems = s.nelems if len(s.nelems) == n else [-1] * n
        seqs = s.seqs if len(s.seqs) == n else [-1] * n
        steps_of = s.coll_steps if len(s.coll_steps) == n else [-1] * n
        count: dict[_Key, int] = defaultdict(int)
        for i, op in enumerate(s.ops):
            key: _Key
            expected: frozenset[int] | None
            members: frozenset[int] | None = None
            gsize: int | None = None
            p2p: tuple[int, int] | None = None
            step = steps_of[i] if by_step and steps_of[i] >= 0 else None
            size = elems[i] if elems[i] > 0 else sizes[i]
            if op in ("Send", "Recv") and peers[i] >= 0:
                src, dst = (r, peers[i]) if op == "Send" else (peers[i], r)
                base: _Key = ("p2p", src, dst, step)
                label, expected, p2p = f"{src}→{dst}", frozenset((src, dst)) & ranks, (src, dst)
                members, op = frozenset((src, dst)), "SendRecv"
            elif groups[i]:
                g = groups[i]
                base = ("pg", g, op, step)
                label = f"group {g}"
                spans = s.group_ranks.get(g)
                members = (
                    frozenset(x for a, b, c in spans for x in range(a, b, c)) if spans else None
                )
                expected = members & ranks if members is not None else None
                gsize = s.group_size.get(g)
            elif op == "SendRecv":
                # a SendRecv kernel naming neither its peer nor its collective: a point-to-point
                # transfer between two unknown ranks, or any collective NCCL ran in that kernel —
                # nothing to match it by (the i-th on two ranks is not one transfer)
                blind[r] = blind.get(r, 0) + 1
                continue
            else:
                known = size > 0 and op not in SIZE_VARIES
                base, label, expected = ("op", op, size if known else -1, step), "", None
            if seqs[i] >= 0 and base[0] == "pg" and (base[1], base[2]) not in repeated:
                key, k = ("pg", base[1], base[2], "seq", seqs[i]), seqs[i]
            else:
                k = count[base]
                count[base] += 1
                key = (*base, k)
            inst = out.get(key)
            if inst is None:
                inst = out[key] = _Instance(op, k, label, expected, p2p, step, members, gsize)
            if r in inst.seen:
                inst.twice = True
            inst.seen[r] = (s.starts[i], s.ends[i], sizes[i])
            if size > 0 and op not in SIZE_VARIES:
                inst.sizes.add(size)
    return out


def _offsets(ranks: list[int], complete: list[_Instance]) -> tuple[dict[int, int], list[int]]:
    """Each rank's clock offset to the lowest rank: collectives end together on all their ranks,
    so the median difference of ends, rank by rank along the collectives they share (a rank
    reached only through another is chained). Returns the offsets and the ranks not reached."""
    diffs: dict[tuple[int, int], list[int]] = defaultdict(list)
    for inst in complete:
        rs = sorted(inst.seen)
        a = rs[0]
        for b in rs[1:]:
            diffs[(a, b)].append(inst.seen[a][1] - inst.seen[b][1])
    edges: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (a, b), d in diffs.items():
        m = int(np.median(d))
        edges[a].append((b, m))  # offset[b] = offset[a] + m
        edges[b].append((a, -m))
    offset = {ranks[0]: 0}
    todo = [ranks[0]]
    while todo:
        a = todo.pop()
        for b, m in edges[a]:
            if b not in offset:
                offset[b] = offset[a] + m
                todo.append(b)
    lost = [r for r in ranks if r not in offset]
    for r in lost:
        offset[r] = 0
    return offset, lost


def _links(complete: list[_Instance]) -> tuple[list[LinkStats], list[str], list[str]]:
    """Per point-to-point direction and per process group, the median time a transfer took once
    everyone had arrived (clock-free: the shortest kernel of it), and the links slower than
    their peers: directions compared with directions, groups with groups of the same op and
    size, by rate per byte where every message size is known."""
    by_link: dict[tuple[object, str], list[_Instance]] = defaultdict(list)
    for inst in complete:
        if inst.p2p is not None:
            by_link[(inst.p2p, inst.op)].append(inst)
        elif inst.group:
            by_link[(inst.group, inst.op)].append(inst)
    stats: list[LinkStats] = []
    for (_, op), insts in by_link.items():
        times = [min(e - s for s, e, _ in i.seen.values()) for i in insts]
        sizes = [max(b for _, _, b in i.seen.values()) for i in insts]
        per_byte = (
            float(np.median([t / b for t, b in zip(times, sizes, strict=True)]))
            if all(b > 0 for b in sizes)
            else None
        )
        p2p = insts[0].p2p
        stats.append(
            LinkStats(
                link=insts[0].group,
                kind="p2p" if p2p else "group",
                src=p2p[0] if p2p else None,
                dst=p2p[1] if p2p else None,
                ranks=sorted(set().union(*(i.seen for i in insts))),
                op=op,
                transfers=len(insts),
                transfer_ns=float(np.median(times)),
                ns_per_byte=per_byte,
                slow=False,
                times_median=None,
            )
        )
    notes: list[str] = []
    classes: dict[tuple[str, str, int], list[LinkStats]] = defaultdict(list)
    for ln in stats:
        classes[(ln.op, ln.kind, 2 if ln.kind == "p2p" else len(ln.ranks))].append(ln)
    compared = 0
    for (op, _, _), peers in classes.items():
        if len(peers) < 3:
            continue
        compared += len(peers)
        by_bytes = all(p.ns_per_byte is not None for p in peers)
        rate = {id(p): (p.ns_per_byte if by_bytes else p.transfer_ns) or 0.0 for p in peers}
        xs = np.array(list(rate.values()))
        med = float(np.median(xs))
        scale = max(1.4826 * float(np.median(np.abs(xs - med))), LINK_FLOOR * med)
        for p in peers:
            p.times_median = rate[id(p)] / med if med > 0 else None
            if med > 0 and rate[id(p)] - med > K_MAD * scale:
                p.slow = True
        if not by_bytes:
            notes.append(
                f"{op} links compared by transfer time: not every message size is in the trace, "
                "so equal sizes are assumed"
            )
    if stats and not compared:
        notes.append(
            "links: none compared — a link is judged against at least two peers of its kind "
            "(point-to-point directions, or process groups of one op and size), and this job "
            "has fewer"
        )
    sentences: list[str] = []
    slow = [p for p in stats if p.slow]
    both = {(p.src, p.dst) for p in slow if p.kind == "p2p"}
    for p in slow:
        what, name = "process", p.link
        if p.kind == "p2p":
            what = "link"
            if (p.dst, p.src) in both:  # both directions: said once, as a↔b
                if (p.src or 0) > (p.dst or 0):
                    continue
                name = f"{p.src}↔{p.dst}"
        sentences.append(
            f"slow {what} {name}: {p.op} transfers take {p.times_median:.2f}× the median of its "
            f"peers ({p.transfer_ns / 1e6:,.3f} ms each, {p.transfers} transfers)"
        )
    stats.sort(key=lambda p: -(p.times_median or 0.0))
    return stats, sentences, notes


#: times after this (ns since 1970: 2001) are wall-clock times, comparable across hosts
EPOCH_NS = 10**18
#: ranks of one job profiled further apart than this (wall clock) are not one profile
APART_NS = 3_600 * 10**9


#: what each fingerprint part is called in a line
_PARTS = {
    "kernels": "kernel mix",
    "classes": "class mix",
    "dtypes": "dtype mix",
    "activity": "launches/copies/collectives per step",
    "operators": "operator mix",
}


def workload_groups(summaries: list[RankSummary]) -> list[list[int]]:
    """The summaries (indices) grouped by workload: each joins the first group whose first
    member's fingerprint is within ``ranks_threshold`` of its own (distance across ranks:
    manifests/fingerprint.json), else starts one; largest group first. Summaries without a
    fingerprint join the largest. O(files × groups) comparisons, not every pair."""
    thr = load_params().ranks_threshold
    groups: list[list[int]] = []
    loose: list[int] = []
    for k, s in enumerate(summaries):
        fp = s.fingerprint
        if fp is None:
            loose.append(k)
            continue
        for g in groups:
            ref = summaries[g[0]].fingerprint
            if ref is not None and distance(ref, fp, across_ranks=True).value <= thr:
                g.append(k)
                break
        else:
            groups.append([k])
    groups.sort(key=lambda g: (-len(g), g[0]))
    if loose:
        if groups:
            groups[0] = sorted(groups[0] + loose)
        else:
            groups = [loose]
    return groups


def job_groups(summaries: list[RankSummary]) -> list[list[RankSummary]]:
    """The files split into the jobs they can be: by workload (``workload_groups``), then by
    world size; largest first. Each group with two distinct ranks or more can be crossed
    (``cross_rank``) on its own: files of two jobs in one run are kept apart, not merged."""
    out: list[list[RankSummary]] = []
    for g in workload_groups(summaries):
        by_world: dict[int | None, list[RankSummary]] = defaultdict(list)
        for k in g:
            by_world[summaries[k].world_size].append(summaries[k])
        out += by_world.values()
    out.sort(key=lambda g: -len(g))
    return out


def _other_workloads(ss: list[RankSummary]) -> dict[int, str]:
    """Why each file that is not of the main workload group is another workload (its distance
    from the group's first file, the parts that differ); with no single largest group, every
    file of every group."""
    groups = workload_groups(ss)
    if len(groups) < 2:
        return {}
    thr = load_params().ranks_threshold
    tie = len(groups[0]) == len(groups[1])
    out: dict[int, str] = {}
    for gi, g in enumerate(groups):
        if gi == 0 and not tie:
            continue
        ref = groups[1][0] if gi == 0 else groups[0][0]
        a, b = ss[ref].fingerprint, ss[g[0]].fingerprint
        if a is None or b is None:
            continue
        d = distance(a, b, across_ranks=True)
        hard = [r for r in d.reasons if r.startswith(("device ", "kind of trace"))]
        moved = sorted(
            ((v, _PARTS[k]) for k, v in d.parts.items() if k in _PARTS and v),
            reverse=True,
        )
        what = ", ".join([*hard, *(f"{label} {v:.2f}" for v, label in moved[:3])])
        line = (
            f"another workload (fingerprint distance {d.value:.2f} from "
            f"{clean(Path(ss[ref].source).name, 40)}'s, above {thr:g}: {what})"
        )
        for k in g:
            out[k] = line
    return out


def not_one_job(summaries: list[RankSummary]) -> str | None:
    """One line naming the files that are not of one job with the others — another world size,
    a rank twice, a process group recorded differently, another workload (its fingerprint:
    ``workload_groups``), or profiled hours apart — or None when nothing says so. The odd ones are the minority;
    with no majority, every file is named with what it says."""
    ss = [s for s in summaries if s.rank is not None]
    if len(ss) < 2:
        return None
    odd: dict[int, list[str]] = defaultdict(list)

    def minority(values: dict[int, object], what: str) -> None:
        counts: dict[object, int] = defaultdict(int)
        for v in values.values():
            counts[v] += 1
        if len(counts) < 2:
            return
        top = max(counts.values())
        major = [v for v, n in counts.items() if n == top]
        ref = major[0] if len(major) == 1 else None
        for k, v in values.items():
            if v != ref:
                others = sorted({str(x) for x in values.values() if x != v})
                odd[k].append(f"{what} {v} (the others: {', '.join(others[:3])})")

    minority({k: s.world_size for k, s in enumerate(ss) if s.world_size}, "world size")
    for k, s in enumerate(ss):
        if s.world_size and s.rank is not None and s.rank >= s.world_size:
            odd[k].append(f"rank {s.rank} in a world of {s.world_size}")
    by_rank: dict[int, list[int]] = defaultdict(list)
    for k, s in enumerate(ss):
        by_rank[int(s.rank or 0)].append(k)
    for r, ks in by_rank.items():
        if len(ks) > 1:
            for k in ks:
                odd[k].append(f"rank {r} is in {len(ks)} files")
    names = sorted({g for s in ss for g in (*s.group_ranks, *s.group_size, *s.group_desc)})
    for g in names[:64]:
        label = f"process group {clean(g, 24)!r}"
        members = {
            k: tuple(x for a, b, c in s.group_ranks[g] for x in range(a, b, c))
            for k, s in enumerate(ss)
            if g in s.group_ranks
        }
        minority({k: _short(m) for k, m in members.items()}, label + " of ranks")
        minority(
            {k: s.group_size[g] for k, s in enumerate(ss) if g in s.group_size}, label + " of size"
        )
        minority(
            {k: clean(s.group_desc[g], 24) for k, s in enumerate(ss) if g in s.group_desc}, label
        )
        for k, m in members.items():
            if ss[k].rank not in m:
                odd[k].append(f"{label} without its own rank {ss[k].rank}")
    for k, why in _other_workloads(ss).items():
        odd[k].append(why)
    wall = {k: s.first_ns for k, s in enumerate(ss) if s.first_ns >= EPOCH_NS}
    if len(wall) >= 2:
        mid = float(np.median(list(wall.values())))
        for k, t in wall.items():
            if abs(t - mid) > APART_NS:
                odd[k].append(f"profiled {abs(t - mid) / 3.6e12:,.1f} h from the others")
    if not odd:
        return None
    parts = [
        f"{clean(Path(ss[k].source).name, 60)} (rank {ss[k].rank}: {'; '.join(odd[k])})"
        for k in sorted(odd)
    ]
    return (
        f"not one job, so the ranks are not compared — {len(odd)} of {len(ss)} file(s) differ: "
        + ", ".join(parts[:8])
        + (f", and {len(parts) - 8} more" if len(parts) > 8 else "")
    )


def _short(ranks: tuple[int, ...]) -> str:
    """A rank list as text for one line: '[0..7]' for a range, else the first few."""
    spans = rank_ranges(list(ranks))
    if len(spans) == 1 and spans[0][2] == 1:
        return f"[{spans[0][0]}..{spans[0][1] - 1}]"
    head = ", ".join(map(str, ranks[:6]))
    return f"[{head}{', …' if len(ranks) > 6 else ''}]"


def _whole(inst: _Instance, here: frozenset[int], world: int) -> bool:
    """Whether every rank of the collective is among the files: its group's ranks (or size)
    where the trace says them; a transfer's two ends; otherwise the whole job (its world size),
    or — where no rank says the world size — the files are taken to be the job."""
    if inst.p2p is not None:
        return True
    if inst.members is not None:
        return inst.members <= here
    if inst.gsize is not None:
        return len(inst.seen) >= inst.gsize
    return world <= len(here)


def _subset_reason(complete: list[_Instance], here: frozenset[int], world: int) -> str:
    """Why no matched collective has all its ranks here (for the 'cannot tell' verdict)."""
    sizes = sorted(
        {
            (i.group, len(i.members) if i.members is not None else i.gsize)
            for i in complete
            if i.group and i.p2p is None
        },
        key=lambda x: (x[1] or 0, x[0]),
    )
    job = f" of the job's {world}" if world > len(here) else ""
    if not sizes:
        what = (
            "the traces name no process group for their collectives, so each may take in ranks "
            "not given"
        )
    else:
        shown = ", ".join(f"{g} of {n or 'unknown'} ranks" for g, n in sizes[:4])
        what = (
            f"{len(complete)} matched collective(s) belong to process groups with ranks not "
            f"given ({shown})"
        )
    return (
        f"{len(here)}{job} ranks are here and {what}: the rank the others waited for may be one "
        "not given"
    )


def cross_rank(summaries: list[RankSummary]) -> CrossRank | None:
    """The cross-rank analysis of one job's ranks; None when there are not two distinct ranks,
    or the files are not of one job (``not_one_job`` says why)."""
    by_rank = {s.rank: s for s in summaries if s.rank is not None}
    if len(by_rank) < 2 or len(by_rank) != len([s for s in summaries if s.rank is not None]):
        return None
    if not_one_job(summaries) is not None:
        return None
    ranks = sorted(by_rank)
    everyone = frozenset(ranks)
    # ordinals count within a ProfilerStep#N when every rank names its steps, each once (ids
    # that do not rise with time — a trace joined from several profiles repeats them — would
    # put two steps' collectives and lengths under one id)
    by_step = all(
        s.steps
        and len(s.step_ids) == len(s.steps)
        and min(s.step_ids) >= 0
        and all(a < b for a, b in pairwise(s.step_ids))
        and len(s.coll_steps) == len(s.ops)
        for s in by_rank.values()
    )
    blind: dict[int, int] = {}
    instances = _instances(by_rank, by_step, blind)
    twice = sum(1 for i in instances.values() if i.twice)
    resized = sum(1 for i in instances.values() if len(i.sizes) > 1 and not i.twice)
    complete = [
        i
        for i in instances.values()
        if not i.twice
        and len(i.sizes) <= 1
        and len(i.seen) >= 2
        and set(i.seen) >= (i.expected if i.expected is not None else everyone)
    ]
    ref = ranks[0]
    notes: list[str] = []
    if twice:
        notes.append(
            f"{twice} collective key(s) appear twice on one rank (a repeated sequence number "
            "or ordinal): those collectives are not compared"
        )
    if blind and complete:
        notes.append(
            f"{sum(blind.values())} SendRecv kernel(s) name neither their peer nor their "
            "collective (a point-to-point transfer between unknown ranks, or any collective NCCL "
            "ran in that kernel): not compared"
        )
    if resized:
        notes.append(
            f"{resized} collective(s) matched by their group's sequence number carry different "
            "message sizes on their ranks (not one collective): not compared"
        )
    offset, lost = _offsets(ranks, complete)
    if not complete:
        notes.append("no collective is on every rank that takes part: nothing to compare")
    elif lost:
        notes.append(
            f"{len(lost)} rank(s) share no collective with rank {ref} (directly or through "
            f"others): their clocks are not aligned ({', '.join(map(str, lost[:8]))})"
        )
    # the model's own check: after alignment, a collective's ends coincide on its ranks. How
    # closely is measured, not assumed: the tolerance is K_MAD robust deviations of the aligned
    # ends (at least END_FLOOR_NS), and the alignment is trusted only when nearly every matched
    # collective lies within it and the tolerance is small beside the collectives themselves
    durations = [e - s for i in complete for s, e, _ in i.seen.values()]
    typical = float(np.median(durations)) if durations else 0.0
    worst: list[float] = []
    for i in complete:
        ends = [v[1] + offset[r] for r, v in i.seen.items()]
        mid = float(np.median(ends))
        worst.append(max(abs(e - mid) for e in ends))
    spread = 1.4826 * float(np.median(worst)) if worst else 0.0
    tol = K_MAD * max(spread, END_FLOOR_NS)
    consistent = [i for i, w in zip(complete, worst, strict=True) if w <= tol]
    inconsistent = len(complete) - len(consistent)
    agree = len(consistent) / len(complete) if complete else 0.0
    trusted = (
        len(consistent) >= MIN_AGREE
        and not lost
        and agree >= TRUST_SHARE
        and tol <= TRUST_REL * typical
    )
    alignment = (
        f"aligned ends agree within ±{tol / 1e6:,.3f} ms (tolerance: {K_MAD} × the robust "
        f"deviation of the aligned ends, {spread / 1e6:,.3f} ms, floor {END_FLOOR_NS / 1e3:g} µs)"
        f"; {len(consistent)} of {len(complete)} matched collective(s) within it"
        if complete
        else "no matched collective to align on"
    )
    why_not: list[str] = []  # why no straggler can be named, for the verdict
    if not complete:
        why_not.append(
            "no collective was matched on the ranks that take part in it"
            + (
                f" ({sum(blind.values())} SendRecv kernels name neither their peer nor their "
                "collective: NCCL runs point-to-point transfers and, in some versions, any "
                "collective in that kernel, so which kernels are one collective is unknown)"
                if blind
                else ""
            )
        )
    elif lost:
        why_not.append(f"{len(lost)} rank(s) share no collective with rank {ref}")
    elif len(consistent) < MIN_AGREE and len(complete) < MIN_AGREE:
        why_not.append(
            f"only {len(complete)} collective matched: too few to check the clocks' alignment "
            f"on ({MIN_AGREE} needed)"
        )
    elif not trusted:
        off = sorted(w / 1e6 for w in worst)
        scatter = (
            f"after alignment the {len(complete)} matched collectives end {off[0]:,.3f}–"
            f"{off[-1]:,.3f} ms from their median end (tolerance ±{tol / 1e6:,.3f} ms = {K_MAD} × "
            f"the robust deviation {spread / 1e6:,.3f} ms; {inconsistent} outside it), while a "
            f"typical collective lasts {typical / 1e6:,.3f} ms"
        )
        why_not.append(
            f"{scatter}: the ranks of one collective finish together, so the matching or the "
            "clocks are not reliable"
        )
        notes.append(f"clocks not trusted: {scatter}")
    if trusted and inconsistent:
        notes.append(
            f"{inconsistent} matched collective(s) end at different aligned times on their ranks "
            "(a wrong match, or a clock that stepped): left out of waits, stragglers and links"
        )
    use = consistent if trusted else complete
    # waits, skews and stragglers only from collectives whose every rank is here: in a group
    # with ranks not given, the one the others waited for may be one of those
    world = max((s.world_size or 0 for s in by_rank.values()), default=0)
    judged = [i for i in consistent if _whole(i, everyone, world)] if trusted else []
    partial = [i for i in complete if not _whole(i, everyone, world)]
    if (complete or world > len(ranks)) and len(partial) == len(complete):
        why_not.append(_subset_reason(partial, everyone, world))
    skews: list[CollectiveSkew] = []
    waited = dict.fromkeys(ranks, 0)
    last_n = dict.fromkeys(ranks, 0)
    ref_steps = by_rank[ref].steps
    step_wait: dict[int, dict[int, int]] = defaultdict(lambda: dict.fromkeys(ranks, 0))
    blame: dict[int, dict[int, int]] = defaultdict(lambda: dict.fromkeys(ranks, 0))
    step_ends = np.array([b for _, b in ref_steps], np.int64)
    for inst in judged:
        arrive = {r: v[0] + offset[r] for r, v in inst.seen.items()}
        last = max(arrive, key=lambda r: arrive[r])
        first = min(arrive.values())
        skews.append(
            CollectiveSkew(
                op=inst.op,
                ordinal=inst.ordinal,
                group=inst.group,
                ranks=len(arrive),
                skew_ns=arrive[last] - first,
                last_rank=last,
            )
        )
        last_n[last] += 1
        if by_step:
            step = inst.step
        else:  # the reference rank's step the collective ended in
            end_ref = int(np.median([v[1] + offset[r] for r, v in inst.seen.items()]))
            k = int(np.searchsorted(step_ends, end_ref))
            step = k if k < len(ref_steps) and ref_steps[k][0] <= end_ref else None
        for r, a in arrive.items():
            w = arrive[last] - a
            waited[r] += w
            if step is not None:
                step_wait[step][r] += w
                blame[step][last] += w  # the others waited this long for the last to arrive
    lengths: dict[int, list[int]] = defaultdict(list)  # step → its length on each rank
    for s in by_rank.values():
        for n, (a, b) in enumerate(s.steps):
            sid = s.step_ids[n] if by_step else (n if s.rank == ref else None)
            if sid is not None:
                lengths[sid].append(b - a)
    steps = []
    for n in sorted(step_wait) if judged else ():
        sw = step_wait[n]
        # the straggler is who the others waited for most; named when their wait is a share of
        # the step and more than the clocks' alignment can blur
        straggler = max(ranks, key=lambda r: blame[n][r])
        mean = blame[n][straggler] / (len(ranks) - 1)
        length = int(np.median(lengths[n])) if lengths.get(n) else 0
        held = bool(length) and mean >= STRAGGLER_SHARE * length and mean > tol
        steps.append(
            StepStraggler(
                step=n,
                straggler=straggler if held else None,
                waited_ns=sw,
                step_ns=length,
                others_waited_ns=mean,
            )
        )
    per_rank = []
    for r in ranks:
        s = by_rank[r]
        busy = s.compute_ns + s.comm_ns
        durs = [b - a for a, b in s.steps]
        per_rank.append(
            RankStats(
                rank=r,
                clock_offset_ns=offset[r],
                waited_ns=waited[r] if judged else None,
                last_arrivals=last_n[r] if judged else None,
                comm_share=s.comm_ns / busy if busy else 0.0,
                overlap_share=s.overlap_ns / s.comm_ns if s.comm_ns else 0.0,
                step_ns=float(np.median(durs)) if durs else None,
            )
        )
    span = float(np.median([s.span_ns for s in by_rank.values()]))
    step_med = [p.step_ns for p in per_rank if p.step_ns is not None]
    outliers = (
        # time waited rests on the aligned clocks: judged only when they can be trusted, and
        # only a difference of 1 % of the run or more
        (
            _outliers(
                {p.rank: float(waited[p.rank]) for p in per_rank},
                "waited_ns",
                STRAGGLER_SHARE * span,
            )
            if judged
            else []
        )
        + _outliers({p.rank: p.comm_share for p in per_rank}, "comm_share", COMM_SHARE_FLOOR)
        + _outliers(
            {p.rank: p.step_ns for p in per_rank if p.step_ns is not None},
            "step_ns",
            STEP_FLOOR * float(np.median(step_med)) if step_med else 0.0,
        )
    )
    links, slow, link_notes = _links(use)
    notes += link_notes
    if complete and not any(i.group for i in complete):
        notes.append(
            "slow links: unknown — no collective kernel names its peer or process group (recent "
            "PyTorch profilers copy them onto the kernel's args; this trace's kernels have none)"
        )
    skews.sort(key=lambda c: -c.skew_ns)
    if world > len(ranks):
        notes.append(
            f"{len(ranks)} of the job's {world} ranks analysed: collectives are compared among "
            "these, and a rank not given (the straggler, perhaps) cannot be seen"
        )
    if why_not:
        verdict = "cannot tell — " + "; and ".join(why_not)
    else:
        named = [x.straggler for x in steps if x.straggler is not None]
        besides = (
            f"; {len(partial)} other matched collective(s) take in ranks not given and are not "
            "judged"
            if partial
            else ""
        )
        if named:
            top = max(set(named), key=named.count)
            verdict = (
                f"rank {top}, the rank the others waited for most in {named.count(top)} of "
                f"{len(steps)} step(s) (from {len(judged)} collective(s) whose every rank is "
                f"here{besides})"
            )
        elif partial:
            verdict = (
                f"cannot tell — no rank held up the {len(judged)} collective(s) whose every rank "
                f"is here, but {_subset_reason(partial, everyone, world)}"
            )
        else:
            verdict = (
                f"none — in no step did the others wait {STRAGGLER_SHARE:.0%} of the step or more "
                f"(and more than the alignment's ±{tol / 1e6:,.3f} ms) for one rank"
            )
    if verdict.startswith("cannot tell"):  # nothing that would read as a straggler's absence
        steps = []
        for p in per_rank:
            p.waited_ns = p.last_arrivals = None
        outliers = [o for o in outliers if o.metric != "waited_ns"]
    return CrossRank(
        ranks=ranks,
        trusted=trusted,
        straggler=verdict,
        tolerance_ns=tol if complete else None,
        judged=len(judged),
        matched=len(complete),
        unmatched=len(instances) - len(complete),
        inconsistent=inconsistent if trusted else 0,
        matching="a Send/Recv by (source, destination, its ordinal on that direction); a "
        "collective of a named process group by (group, op, Seq or its ordinal in the group); "
        "otherwise the i-th collective of an op and message size on one rank is the i-th of that "
        "op and size on every rank (of that op alone where the size is not said or may differ "
        "between ranks: all-to-all, gather, scatter); a SendRecv kernel naming neither its peer "
        "nor its collective is not matched"
        + (" — ordinals counted within each ProfilerStep#N" if by_step else ""),
        clocks=f"aligned on collective ends: each rank's median offset from rank {ref}; "
        + alignment,
        rule=f"outlier: |x − median| > {K_MAD} × 1.4826 × MAD and more than a floor (waited: 1 % "
        f"of the run; comm share: {COMM_SHARE_FLOOR:.0%} points; step: {STEP_FLOOR:.0%})",
        collectives=skews[:50],
        ranks_lost=lost,
        steps=steps,
        per_rank=per_rank,
        outliers=outliers,
        links=links[:200],
        slow_links=slow,
        link_rule=f"slow link: its transfer time (per byte where sizes are known) exceeds its "
        f"peers' median by more than {K_MAD} × max(1.4826 × MAD, {LINK_FLOOR:.0%} of the median); "
        "a transfer's time is its shortest kernel (the last rank to arrive waits for nobody)",
        notes=notes,
    )
