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

from engine.analyze.advice.peers import PeerBounds
from engine.analyze.breakdown.intervals import intersection as _intersection
from engine.analyze.breakdown.intervals import interval_union
from engine.analyze.breakdown.intervals import length as _length
from engine.manifest import Link
from engine.optimizer.fingerprint import Fingerprint, distance, fingerprint_of_trace, load_params
from engine.planner.devices import main_device
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
    streams: list[int] = Field(
        default=[],
        description="its stream: kernels that name nothing are matched across ranks by their "
        "order on a stream (NCCL runs a communicator's kernels on one stream, in one order)",
    )
    peer_link: str = Field(
        default="", description="the GPU-to-GPU link the hardware catalogue gives ('': none)"
    )
    peer_link_Bps: float | None = Field(
        default=None, description="that link's rate per direction (B/s; None: none known)"
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


def _peer_link(trace: Trace) -> Link | None:
    """The GPU-to-GPU link of the device the rank's rows ran on (most GPU time: the choice the
    analysis makes, engine.planner.devices) where the hardware catalogue knows the device (never
    a guess: an estimated or unknown device has no link), for the collectives' bus bandwidth."""
    dev = main_device(trace)
    found = dev.found if dev is not None else None
    if found is None or found.kind != "catalogue" or found.entry is None:
        return None
    return found.entry.peer_link


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
    link = _peer_link(trace)
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
        streams=[int(x) for x in seg.stream[idx]],
        peer_link=link.label if link is not None else "",
        peer_link_Bps=link.Bps_per_direction if link is not None else None,
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
    """One matched collective whose every rank is here: when its ranks arrived, how long the
    others waited for the last, and how long it took once everyone was there."""

    op: str
    ordinal: int
    group: str = Field(
        default="", description="its process group, or 'src→dst' of a point-to-point transfer"
    )
    matched_by: str = Field(
        default="",
        description="how its kernels were found on every rank: 'seq' (its group's sequence "
        "number), 'group order', 'op order', 'p2p' (source, destination, order), or 'order and "
        "ends' (a SendRecv kernel naming nothing: its order on the stream, accepted because its "
        "aligned ends agree)",
    )
    ranks: int
    step: int | None = Field(default=None, description="the step it is counted in (None: none)")
    skew_ns: int = Field(description="last aligned arrival − first")
    last_rank: int = Field(description="the rank that arrived last (the others waited for it)")
    waited_ns: int = Field(
        default=0, description="the others' wait for the last arrival, summed over the ranks"
    )
    waits_ns: dict[int, int] = Field(
        default={},
        description="each rank's wait (last aligned arrival − its own); the WAITS_MAX longest "
        "where more ranks took part",
    )
    transfer_ns: int = Field(
        default=0,
        description="the time it took once every rank had arrived: its median aligned end − "
        "the last arrival, at least its shortest kernel (the last rank waits for nobody)",
    )
    nbytes: int | None = Field(
        default=None, description="its message bytes, the larger of in and out (None: not said)"
    )
    bus_bw_Bps: float | None = Field(
        default=None,
        description="its effective bus bandwidth (B/s): bytes ÷ transfer time × NCCL's busBw "
        "factor for the op (AllReduce 2(n−1)/n; AllGather, ReduceScatter, AllToAll (n−1)/n; "
        "Broadcast, Reduce, point to point 1); None where the bytes are not said",
    )
    link_share: float | None = Field(
        default=None, description="bus bandwidth ÷ the peer link's rate (None: no link known)"
    )


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
    caused_ns: int | None = Field(
        default=None,
        description="the others' wait blamed on this rank (it arrived last), summed over the "
        "judged collectives and the ranks that waited; None where waits are not given",
    )
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
    bus_bw_Bps: float | None = Field(
        default=None,
        description="median effective bus bandwidth of its transfers (NCCL's busBw, as "
        "CollectiveSkew's), from the clock-free transfer time; None where bytes are not said",
    )
    slow: bool = Field(description="slower than its peers by the robust rule (links)")
    times_median: float | None = Field(description="its rate ÷ the median of its peers' rates")


class UnmatchedOp(_M):
    """Collective kernels of one op that no wait is taken from, and why."""

    op: str
    why: str = Field(
        description="'unmatched' (not found on every rank that takes part), 'inconsistent' "
        "(matched, but its aligned ends do not coincide), 'ranks not given' (its group takes "
        "in ranks whose files are not here), 'clocks not trusted', or 'step not on every rank' "
        "(a ProfilerStep some rank did not record: outside the job's common window, so not "
        "counted against the verdict)"
    )
    kernels: int = Field(description="kernels, over all ranks")
    time_ns: int = Field(description="their kernel time, summed over the ranks")
    share: float = Field(description="of all collective kernel time, summed over the ranks")


class CrossRank(_M):
    ranks: list[int]
    trusted: bool = Field(
        description="collective ends coincide after alignment: at least MIN_AGREE and "
        "TRUST_SHARE of the matched collectives end within the tolerance, and the tolerance is "
        "at most TRUST_REL of a typical collective — arrivals, waits and stragglers can be read"
    )
    straggler: str = Field(
        default="",
        description="the verdict in one sentence with its basis: 'rank N, …' (the rank whose "
        "late arrivals the others waited for most, over every judged collective), 'none — …', "
        "or 'cannot tell — <why>' (clocks or matching not trusted; no collective whose every "
        "rank was given; or collective time that could not be judged exceeds the margin "
        "between the first two ranks)",
    )
    straggler_rank: int | None = Field(
        default=None, description="the rank the verdict names (None: none, or cannot tell)"
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
    unmatched: int = Field(
        description="collectives missing on some rank (not compared); SendRecv kernels that "
        "name nothing and matched no kernel of the reference rank count one each"
    )
    inconsistent: int = Field(
        default=0,
        description="matched collectives whose aligned ends do not coincide (a wrong match or a "
        "clock step): left out of waits, stragglers and links",
    )
    unmatched_ops: list[UnmatchedOp] = Field(
        default=[],
        description="per op and reason, the collective kernels no wait is taken from, with "
        "their share of collective time",
    )
    unjudged_share: float = Field(
        default=0.0,
        description="the share of collective kernel time (summed over the ranks) no wait is "
        "taken from: unmatched, inconsistent, or of groups with ranks not given",
    )
    caused_ns: dict[int, int] = Field(
        default={},
        description="per rank (those with any): the others' wait blamed on it, summed over the "
        "judged collectives and the ranks that waited — the straggler has the most",
    )
    wait_ns: int = Field(
        default=0, description="all waiting in the judged collectives, summed over the ranks"
    )
    transfer_ns: int = Field(
        default=0,
        description="the judged collectives' transfer time, summed over their ranks (with "
        "wait_ns: their kernel time)",
    )
    peer_link: str = Field(
        default="", description="the GPU-to-GPU link bus bandwidths are read against ('': none)"
    )
    peer_link_Bps: float | None = Field(default=None, description="its rate per direction")
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
    job_path: str = Field(
        default="",
        description="the job's critical path between its collectives in one line (who the job "
        "waited for, the transfers, the longest tail; engine.analyze.job); '' where the peers "
        "could not be held",
    )
    notes: list[str]


def most_waited_for(c: CrossRank | None) -> int | None:
    """The rank the verdict names: the one whose late arrivals the others waited for most over
    every judged collective (None: none named, or cannot tell)."""
    return c.straggler_rank if c is not None else None


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
        "expected", "group", "gsize", "how", "idx", "members", "op", "ordinal", "p2p", "seen",
        "sizes", "step", "twice",
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
        how: str = "op order",
    ) -> None:
        self.op, self.ordinal, self.group, self.expected = op, ordinal, group, expected
        self.p2p, self.step, self.how = p2p, step, how
        self.members, self.gsize = members, gsize  # the whole group, where the trace says it
        self.seen: dict[int, tuple[int, int, int]] = {}  # rank → (start, end, nbytes)
        self.idx: dict[int, int] = {}  # rank → the kernel's index in that rank's summary
        self.sizes: set[int] = set()  # message elements (or bytes) the ranks recorded
        self.twice = False  # one rank had two collectives under this key: not compared

    def add(self, rank: int, s: RankSummary, i: int) -> None:
        """Rank ``rank``'s kernel ``i`` (of its summary ``s``) is this collective's."""
        if rank in self.seen:
            self.twice = True
        nbytes = s.nbytes[i] if len(s.nbytes) == len(s.ops) else -1
        self.seen[rank] = (s.starts[i], s.ends[i], nbytes)
        self.idx[rank] = i


#: ops whose message sizes legitimately differ between their ranks (uneven splits, a root):
#: matched by op and ordinal, never by size
SIZE_VARIES = frozenset({"AllToAll", "Gather", "Scatter", "SendRecv", "collective"})
#: how a SendRecv kernel naming nothing is matched (CollectiveSkew.matched_by)
BY_ORDER = "order and ends"


def _col(s: RankSummary, values: list[int]) -> list[int]:
    """A per-collective column of the summary, or -1s where the summary does not have it."""
    return values if len(values) == len(s.ops) else [-1] * len(s.ops)


def _repeated_seqs(by_rank: dict[int, RankSummary]) -> set[tuple[str, str]]:
    """The (group, op) whose Seq repeats on some rank: a repeated Seq cannot key anything, so
    that group's collectives go by ordinal."""
    repeated: set[tuple[str, str]] = set()
    for s in by_rank.values():
        seen_seq: set[tuple[str, str, int]] = set()
        groups = s.groups if len(s.groups) == len(s.ops) else [""] * len(s.ops)
        for op, g, q in zip(s.ops, groups, _col(s, s.seqs), strict=True):
            if g and q >= 0:
                if (g, op, q) in seen_seq:
                    repeated.add((g, op))
                seen_seq.add((g, op, q))
    return repeated


def _instances(
    by_rank: dict[int, RankSummary], by_step: bool, blind: dict[int, list[int]]
) -> dict[_Key, _Instance]:
    """Every collective keyed so that the same one has the same key on every rank: a Send/Recv
    by (src, dst, its ordinal on that direction); a collective of a named process group by
    (group, op, Seq — or its ordinal in that group when the trace has no Seq or repeats one);
    otherwise by (op, message size, its ordinal among those), as NCCL runs a communicator's
    collectives in one order on all its ranks — by (op, ordinal) where the size is not said or
    may differ between ranks (SIZE_VARIES). A SendRecv kernel that names neither its peer nor
    its collective has no key: its index is put in ``blind`` (per rank) for ``_match_blind``.
    With ``by_step`` (every rank names its ProfilerSteps) ordinals count within the step, so
    ranks whose profiler windows start at different iterations still match."""
    ranks = frozenset(by_rank)
    repeated = _repeated_seqs(by_rank)
    out: dict[_Key, _Instance] = {}
    for r, s in by_rank.items():
        n = len(s.ops)
        groups = s.groups if len(s.groups) == n else [""] * n
        peers, sizes, elems = _col(s, s.peers), _col(s, s.nbytes), _col(s, s.nelems)
        seqs, steps_of = _col(s, s.seqs), _col(s, s.coll_steps)
        count: dict[_Key, int] = defaultdict(int)
        for i, op in enumerate(s.ops):
            key: _Key
            expected: frozenset[int] | None
            members: frozenset[int] | None = None
            gsize: int | None = None
            p2p: tuple[int, int] | None = None
            step = steps_of[i] if by_step and steps_of[i] >= 0 else None
            size = elems[i] if elems[i] > 0 else sizes[i]
            how = "op order"
            if op in ("Send", "Recv") and peers[i] >= 0:
                src, dst = (r, peers[i]) if op == "Send" else (peers[i], r)
                base: _Key = ("p2p", src, dst, step)
                label, expected, p2p = f"{src}→{dst}", frozenset((src, dst)) & ranks, (src, dst)
                members, op, how = frozenset((src, dst)), "SendRecv", "p2p"
            elif groups[i]:
                g = groups[i]
                base, label, how = ("pg", g, op, step), f"group {g}", "group order"
                spans = s.group_ranks.get(g)
                members = (
                    frozenset(x for a, b, c in spans for x in range(a, b, c)) if spans else None
                )
                expected = members & ranks if members is not None else None
                gsize = s.group_size.get(g)
            elif op == "SendRecv":
                # a SendRecv kernel naming neither its peer nor its collective: a point-to-point
                # transfer between two unknown ranks, or any collective NCCL ran in that kernel —
                # nothing keys it; it is matched by its order and its end (_match_blind)
                blind.setdefault(r, []).append(i)
                continue
            else:
                known = size > 0 and op not in SIZE_VARIES
                base, label, expected = ("op", op, size if known else -1, step), "", None
            if seqs[i] >= 0 and base[0] == "pg" and (base[1], base[2]) not in repeated:
                key, k, how = ("pg", base[1], base[2], "seq", seqs[i]), seqs[i], "seq"
            else:
                k = count[base]
                count[base] += 1
                key = (*base, k)
            inst = out.get(key)
            if inst is None:
                inst = _Instance(op, k, label, expected, p2p, step, members, gsize, how)
                out[key] = inst
            inst.add(r, s, i)
            if size > 0 and op not in SIZE_VARIES:
                inst.sizes.add(size)
    return out


def _complete(inst: _Instance, everyone: frozenset[int]) -> bool:
    """Found once on every rank here that takes part (all of them where the trace does not say
    which), with one message size."""
    want = inst.expected if inst.expected is not None else everyone
    return (
        not inst.twice and len(inst.sizes) <= 1 and len(inst.seen) >= 2 and set(inst.seen) >= want
    )


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


# ------------------------------------------------- SendRecv kernels that name nothing
#: how many positions apart in their runs two ranks' SendRecv kernels may be and still be
#: compared when a clock offset is sought from them alone: a rank may run a few transfers the
#: other does not (with ranks not given), never a whole run's worth
ORDER_BAND = 16

_Runs = dict[int, dict[tuple[int, int], list[int]]]


def _blind_runs(
    by_rank: dict[int, RankSummary], blind: dict[int, list[int]], by_step: bool
) -> _Runs:
    """Per rank, its SendRecv kernels that name nothing, in runs that are in one order on every
    rank — per ProfilerStep#N where the ranks name their steps, and per stream where every rank
    ran them on the same streams (NCCL runs a communicator's kernels on one stream of each rank,
    in the order the program issued them) — each run in order of end."""
    streams = {
        r: frozenset(_col(by_rank[r], by_rank[r].streams)[i] for i in ix) for r, ix in blind.items()
    }
    per_stream = len(blind) == len(by_rank) and len(set(streams.values())) == 1
    out: _Runs = {}
    for r, ix in blind.items():
        s = by_rank[r]
        st, steps = _col(s, s.streams), _col(s, s.coll_steps)
        runs: dict[tuple[int, int], list[int]] = defaultdict(list)
        for i in ix:
            runs[(steps[i] if by_step else -1, st[i] if per_stream else -1)].append(i)
        for v in runs.values():
            v.sort(key=lambda i: s.ends[i])
        out[r] = dict(runs)
    return out


def _densest(d: np.ndarray, window: float) -> int | None:
    """The offset most of the sorted differences ``d`` agree on within ``window``: the median
    of the largest group of them spanning at most ``window`` (None: fewer than MIN_AGREE)."""
    if len(d) < MIN_AGREE:
        return None
    hi = np.searchsorted(d, d + window, side="right")
    n = hi - np.arange(len(d))
    k = int(np.argmax(n))
    return int(np.median(d[k : hi[k]])) if n[k] >= MIN_AGREE else None


def _blind_offsets(
    by_rank: dict[int, RankSummary], runs: _Runs, ranks: list[int], window: float
) -> tuple[dict[int, int], list[int]]:
    """Each rank's clock offset to the lowest rank from SendRecv kernels alone, where nothing
    else can align the clocks. The ends of one collective coincide on its ranks, those of two
    different ones do not: of the differences between the reference rank's kernel ends and this
    rank's, a run at a time and within ORDER_BAND positions, the offset most of them agree on
    within ``window``. A rank with fewer than MIN_AGREE agreeing is lost (offset 0)."""
    ref = ranks[0]
    offset, lost = {ref: 0}, []
    mine = runs.get(ref, {})
    for r in ranks[1:]:
        diffs = []
        for key, ix in runs.get(r, {}).items():
            a = np.array([by_rank[ref].ends[i] for i in mine.get(key, [])], np.int64)
            b = np.array([by_rank[r].ends[i] for i in ix], np.int64)
            # the pairs (i, i + k), |k| ≤ ORDER_BAND: O(run × band), never run × run
            for k in range(-min(ORDER_BAND, len(a) - 1), min(ORDER_BAND, len(b) - 1) + 1):
                lo, hi = max(0, -k), min(len(a), len(b) - k)
                if lo < hi:
                    diffs.append(a[lo:hi] - b[lo + k : hi + k])
        found = _densest(np.sort(np.concatenate(diffs)), window) if diffs else None
        if found is None:
            lost.append(r)
        offset[r] = found or 0
    return offset, lost


def _pair_in_order(a: list[int], b: list[int], window: float) -> list[tuple[int, int]]:
    """Pairs (i, j) of two ascending lists of aligned ends that lie within ``window`` of each
    other, neither order crossed, as many as there can be: the earlier of the two heads is
    passed over when the other lies beyond its reach (two-pointer; with a window of equal width
    for every end, taking the first pair within reach never loses a pair)."""
    i = j = 0
    out: list[tuple[int, int]] = []
    while i < len(a) and j < len(b):
        d = a[i] - b[j]
        if abs(d) <= window:
            out.append((i, j))
            i, j = i + 1, j + 1
        elif d < 0:
            i += 1
        else:
            j += 1
    return out


def _match_blind(
    by_rank: dict[int, RankSummary],
    runs: _Runs,
    ranks: list[int],
    offset: dict[int, int],
    window: float,
) -> list[_Instance]:
    """The SendRecv kernels that name nothing as collectives: each kernel of the reference rank
    (the lowest) with the kernel of each other rank in the same run, in order, whose aligned end
    lies within ``window`` of its own — a collective ends together on all its ranks; the i-th
    kernel of a run on two ranks alone need not be one collective (a rank of a 128-rank job
    exchanges with ranks the other does not). A kernel left without a partner stays unmatched."""
    ref = ranks[0]
    out: list[_Instance] = []
    s0 = by_rank[ref]
    for key, ix in runs.get(ref, {}).items():
        step = key[0] if key[0] >= 0 else None
        insts = [
            _Instance("SendRecv", k, "", None, None, step, how=BY_ORDER) for k in range(len(ix))
        ]
        for inst, i in zip(insts, ix, strict=True):
            inst.add(ref, s0, i)
        a = [s0.ends[i] + offset[ref] for i in ix]
        for r in ranks[1:]:
            s = by_rank[r]
            other = runs.get(r, {}).get(key, [])
            b = [s.ends[j] + offset[r] for j in other]
            for p, q in _pair_in_order(a, b, window):
                insts[p].add(r, s, other[q])
        out += insts
    return out


class _Alignment:
    """How well the matched collectives' aligned ends coincide, and whether that is trusted."""

    def __init__(self, complete: list[_Instance], offset: dict[int, int], lost: list[int]) -> None:
        # the model's own check: after alignment, a collective's ends coincide on its ranks. How
        # closely is measured, not assumed: the tolerance is K_MAD robust deviations of the
        # aligned ends (at least END_FLOOR_NS), and the alignment is trusted only when nearly
        # every matched collective lies within it and it is small beside the collectives
        self.complete, self.offset, self.lost = complete, offset, lost
        durations = [e - s for i in complete for s, e, _ in i.seen.values()]
        self.typical = float(np.median(durations)) if durations else 0.0
        self.worst: list[float] = []
        for i in complete:
            ends = [v[1] + offset[r] for r, v in i.seen.items()]
            mid = float(np.median(ends))
            self.worst.append(max(abs(e - mid) for e in ends))
        self.spread = 1.4826 * float(np.median(self.worst)) if self.worst else 0.0
        self.tol = K_MAD * max(self.spread, END_FLOOR_NS)
        self.consistent = [i for i, w in zip(complete, self.worst, strict=True) if w <= self.tol]
        agree = len(self.consistent) / len(complete) if complete else 0.0
        self.trusted = (
            len(self.consistent) >= MIN_AGREE
            and not lost
            and agree >= TRUST_SHARE
            and self.tol <= TRUST_REL * self.typical
        )

    @property
    def inconsistent(self) -> int:
        return len(self.complete) - len(self.consistent)


def _align_all(
    by_rank: dict[int, RankSummary],
    keyed: list[_Instance],
    blind: dict[int, list[int]],
    by_step: bool,
) -> tuple[_Alignment, list[_Instance], str]:
    """The clocks' alignment with every collective that can be matched, the SendRecv kernels
    that name nothing included, and what the clocks were aligned on. The keyed collectives
    (group, Seq, peers, op order) align the clocks first; the SendRecv kernels are then matched
    against that alignment (their aligned ends within twice its tolerance: each end lies within
    it of their median). Where the keyed ones cannot be trusted or there are none, the SendRecv
    kernels align the clocks on their own (``_blind_offsets``) and are matched on that. The
    first alignment that is trusted is kept; else the one with the most collectives agreeing."""
    ranks = sorted(by_rank)
    everyone = frozenset(ranks)
    offset, lost = _offsets(ranks, keyed)
    first = _Alignment(keyed, offset, lost)
    if not blind:
        return first, [], "the matched collectives"
    runs = _blind_runs(by_rank, blind, by_step)
    durs = [by_rank[r].ends[i] - by_rank[r].starts[i] for r, ix in blind.items() for i in ix]
    wide = TRUST_REL * float(np.median(durs))

    def attempt(
        off: dict[int, int], lo: list[int], window: float, basis: str
    ) -> tuple[_Alignment, list[_Instance], str]:
        found = _match_blind(by_rank, runs, ranks, off, window)
        return (
            _Alignment(keyed + [i for i in found if _complete(i, everyone)], off, lo),
            found,
            basis,
        )

    best = None
    if keyed and not lost:
        window = 2 * first.tol if first.trusted else wide
        best = attempt(offset, lost, window, "the collectives matched by what their kernels say")
        if best[0].trusted:
            return best
    b_off, b_lost = _blind_offsets(by_rank, runs, ranks, wide)
    alone = attempt(b_off, b_lost, wide, "the ends of SendRecv kernels that name nothing")
    if best is None or alone[0].trusted or len(alone[0].consistent) > len(best[0].consistent):
        return alone
    return best


#: NCCL's bus-bandwidth factor per op (nccl-tests' PERFORMANCE.md): the share of the message
#: each rank must move over its links, so that busBw is comparable with the link's rate
def _bus_factor(op: str, n: int) -> float:
    """busBw ÷ algBw for ``op`` over ``n`` ranks: AllReduce 2(n−1)/n; AllGather, ReduceScatter
    and AllToAll (n−1)/n; Broadcast, Reduce and point-to-point transfers 1."""
    if n < 2:
        return 1.0
    if op == "AllReduce":
        return 2 * (n - 1) / n
    if op in ("AllGather", "ReduceScatter", "AllToAll"):
        return (n - 1) / n
    return 1.0


def _bus_bw(op: str, n: int, nbytes: int, transfer_ns: float) -> float | None:
    """The effective bus bandwidth (B/s) of a collective of ``nbytes`` (the larger of in and
    out, as nccl-tests size them) that took ``transfer_ns`` once everyone had arrived."""
    if nbytes <= 0 or transfer_ns <= 0:
        return None
    return nbytes / (transfer_ns * 1e-9) * _bus_factor(op, n)


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
        known = all(b > 0 for b in sizes)
        per_byte = (
            float(np.median([t / b for t, b in zip(times, sizes, strict=True)])) if known else None
        )
        bws = [_bus_bw(op, len(i.seen), b, t) for i, b, t in zip(insts, sizes, times, strict=True)]
        bus = float(np.median([x for x in bws if x is not None])) if known and any(bws) else None
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
                bus_bw_Bps=bus,
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


# ------------------------------------------------------------------ judging the ranks
#: per collective, the most ranks whose waits are listed (the longest; CollectiveSkew.waits_ns)
WAITS_MAX = 64


class _Record:
    """One judged collective on the aligned clocks: when each rank arrived, the last, each
    rank's wait for it, and the transfer once everyone was there."""

    __slots__ = ("arrive", "end", "inst", "last", "shortest", "step", "transfer", "waits")

    def __init__(self, inst: _Instance, offset: dict[int, int], step: int | None) -> None:
        self.inst, self.step = inst, step
        self.arrive = {r: v[0] + offset[r] for r, v in inst.seen.items()}
        self.last = max(self.arrive, key=lambda r: self.arrive[r])
        self.end = int(np.median([v[1] + offset[r] for r, v in inst.seen.items()]))
        # the last rank waits for nobody: its kernel is the transfer, clock-free — a lower
        # bound where the aligned end lies a little before the last arrival
        self.shortest = min(e - s for s, e, _ in inst.seen.values())
        self.transfer = max(self.end - self.arrive[self.last], self.shortest)
        top = self.arrive[self.last]
        self.waits = {r: top - a for r, a in self.arrive.items()}

    @property
    def waited(self) -> int:
        """The others' wait for the last arrival, summed over the ranks."""
        return sum(self.waits.values())

    @property
    def skew(self) -> int:
        return self.arrive[self.last] - min(self.arrive.values())

    def nbytes(self) -> int | None:
        b = max(x for _, _, x in self.inst.seen.values())
        return b if b > 0 else None


def _by_step(by_rank: dict[int, RankSummary]) -> bool:
    """Whether ordinals count within a ProfilerStep#N: every rank names its steps, each once
    (ids that do not rise with time — a trace joined from several profiles repeats them — would
    put two steps' collectives and lengths under one id)."""
    return all(
        s.steps
        and len(s.step_ids) == len(s.steps)
        and min(s.step_ids) >= 0
        and all(a < b for a, b in pairwise(s.step_ids))
        and len(s.coll_steps) == len(s.ops)
        for s in by_rank.values()
    )


def _one_job(summaries: list[RankSummary]) -> dict[int, RankSummary] | None:
    """The summaries by rank; None when there are not two distinct ranks, or the files are not
    of one job (``not_one_job`` says why)."""
    by_rank = {s.rank: s for s in summaries if s.rank is not None}
    if len(by_rank) < 2 or len(by_rank) != len([s for s in summaries if s.rank is not None]):
        return None
    if not_one_job(summaries) is not None:
        return None
    return by_rank


class _Crossing:
    """The ranks' collectives matched, their clocks aligned, and the collectives judged: what
    the verdict (``cross_rank``) and the replay's bounds (``peer_bounds``) both rest on."""

    def __init__(self, by_rank: dict[int, RankSummary]) -> None:
        self.by_rank = by_rank
        self.ranks = sorted(by_rank)
        self.everyone = frozenset(self.ranks)
        self.by_step = _by_step(by_rank)
        self.blind: dict[int, list[int]] = {}
        self.instances = _instances(by_rank, self.by_step, self.blind)
        keyed = [i for i in self.instances.values() if _complete(i, self.everyone)]
        self.align, self.found, self.basis = _align_all(by_rank, keyed, self.blind, self.by_step)
        self.offset, self.lost = self.align.offset, self.align.lost
        self.complete = self.align.complete
        self.world = max((s.world_size or 0 for s in by_rank.values()), default=0)
        # waits, skews and stragglers only from collectives whose every rank is here: in a group
        # with ranks not given, the one the others waited for may be one of those
        self.judged = (
            [i for i in self.align.consistent if _whole(i, self.everyone, self.world)]
            if self.align.trusted
            else []
        )
        self.partial = [i for i in self.complete if not _whole(i, self.everyone, self.world)]
        ref = by_rank[self.ranks[0]]
        ends = np.array([b for _, b in ref.steps], np.int64)
        self.records = [_Record(i, self.offset, self._step(i, ref, ends)) for i in self.judged]

    def _step(self, inst: _Instance, ref: RankSummary, step_ends: np.ndarray) -> int | None:
        """The step a collective is counted in: its ProfilerStep#N where every rank names its
        steps, else the reference rank's step its median aligned end fell in."""
        if self.by_step:
            return inst.step
        end = int(np.median([v[1] + self.offset[r] for r, v in inst.seen.items()]))
        k = int(np.searchsorted(step_ends, end))
        return k if k < len(ref.steps) and ref.steps[k][0] <= end else None

    @property
    def blind_total(self) -> int:
        return sum(len(ix) for ix in self.blind.values())

    @property
    def unmatched(self) -> int:
        """Collectives missing on some rank: keyed ones, the reference rank's SendRecv kernels
        that found no partner on every rank, and other ranks' that found none at all."""
        keyed = sum(1 for i in self.instances.values() if not _complete(i, self.everyone))
        blind = sum(1 for i in self.found if not _complete(i, self.everyone))
        alone = self.blind_total - sum(len(i.idx) for i in self.found)
        return keyed + blind + alone


#: why a collective kernel is not compared: its step is not on every rank
OUTSIDE = "step not on every rank"


def _unjudged(c: _Crossing) -> tuple[list[UnmatchedOp], int, int]:
    """Per op and reason, the collective kernels no wait is taken from (their kernel time
    summed over the ranks: an upper bound on the wait they could hold), the time in all of them,
    and all collective kernel time."""
    why: dict[tuple[int, int], str] = {}
    judged = {id(i) for i in c.judged}
    consistent = {id(i) for i in c.align.consistent}
    partial = {id(i) for i in c.partial}
    for inst in c.complete:
        if id(inst) in judged:
            reason = ""
        elif not c.align.trusted:
            reason = "clocks not trusted"
        elif id(inst) not in consistent:
            reason = "inconsistent"
        elif id(inst) in partial:
            reason = "ranks not given"
        else:
            reason = "unmatched"
        for r, i in inst.idx.items():
            why[(r, i)] = reason
    # a step some rank did not record (profiler windows a step apart) is outside the job's
    # common window: its collectives are not unmatched, they are not compared at all
    common = (
        set.intersection(*(set(s.step_ids) for s in c.by_rank.values())) if c.by_step else set()
    )
    time: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    total = 0
    for r, s in c.by_rank.items():
        steps = _col(s, s.coll_steps)
        for i, (a, b) in enumerate(zip(s.starts, s.ends, strict=True)):
            total += b - a
            reason = why.get((r, i), "unmatched")
            if reason == "unmatched" and c.by_step and steps[i] >= 0 and steps[i] not in common:
                reason = OUTSIDE
            if reason:
                op = "SendRecv" if s.ops[i] in ("Send", "Recv") else s.ops[i]
                t = time[(op, reason)]
                t[0] += 1
                t[1] += b - a
    out = [
        UnmatchedOp(op=op, why=w, kernels=n, time_ns=t, share=t / total if total else 0.0)
        for (op, w), (n, t) in sorted(time.items(), key=lambda kv: -kv[1][1])
    ]
    return out, sum(u.time_ns for u in out if u.why != OUTSIDE), total


class _Blame:
    """Each judged collective's waits blamed on the rank that arrived last, summed over all of
    them: who the others waited for, and at which ops."""

    def __init__(self, records: list[_Record], ranks: list[int], tol: float) -> None:
        self.caused = dict.fromkeys(ranks, 0)
        self.waited = dict.fromkeys(ranks, 0)
        self.last_n = dict.fromkeys(ranks, 0)
        self.ops: dict[str, int] = defaultdict(int)  # op → judged collectives
        # rank → op → collectives it held up: last by more than the alignment can blur
        self.held: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.by_op: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for rec in records:
            op = rec.inst.op
            self.ops[op] += 1
            self.last_n[rec.last] += 1
            self.caused[rec.last] += rec.waited
            self.by_op[rec.last][op] += rec.waited
            if rec.skew > tol:
                self.held[rec.last][op] += 1
            for r, w in rec.waits.items():
                self.waited[r] += w
        self.wait = sum(self.caused.values())
        self.order = sorted(ranks, key=lambda r: (-self.caused[r], r))

    def basis(self, r: int) -> str:
        """Where rank ``r`` held the others up: 'last at 16 of 20 SendRecv, 0 of 12 AllReduce'
        (ops by the wait it caused there, at most three)."""
        ops = sorted(self.ops, key=lambda op: (-self.by_op[r].get(op, 0), op))[:3]
        return "last at " + ", ".join(
            f"{self.held[r].get(op, 0)} of {self.ops[op]} {op}" for op in ops
        )


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _per_step(c: _Crossing) -> tuple[int, float, str]:
    """How many steps the waits are spread over, a step's typical length, and the word for it:
    the judged steps where the ranks name them, else the whole run ('over the run', its span)."""
    steps = {r.step for r in c.records if r.step is not None}
    lengths = [b - a for s in c.by_rank.values() for a, b in s.steps]
    if steps and lengths:
        return len(steps), float(np.median(lengths)), "per step"
    return 1, float(np.median([s.span_ns for s in c.by_rank.values()])), "over the run"


def _verdict(
    c: _Crossing, blame: _Blame, unjudged_ns: int, total_ns: int, why_not: list[str]
) -> tuple[str, int | None]:
    """The straggler verdict and the rank it names: the rank whose late arrivals the others
    waited for most over every judged collective, named when their mean wait for it is at least
    STRAGGLER_SHARE of a step and more than the alignment's tolerance — unless the collective
    time no wait could be taken from is larger than its margin over the next rank (that time
    could hold more wait for another rank)."""
    share = unjudged_ns / total_ns if total_ns else 0.0
    lost_time = (
        f"{share:.0%} of collective time ({_ms(unjudged_ns)} over the ranks) could not be judged"
    )
    if why_not:
        return "cannot tell — " + "; and ".join(why_not) + (
            f"; {lost_time}" if unjudged_ns else ""
        ), None
    n, length, per = _per_step(c)
    others = max(1, len(c.ranks) - 1)
    top, second = blame.order[0], blame.order[1]
    mean = blame.caused[top] / others / n
    margin = blame.caused[top] - blame.caused[second]
    bar = max(STRAGGLER_SHARE * length, c.align.tol)
    of_all = blame.caused[top] / blame.wait if blame.wait else 0.0
    head = (
        f"the others waited {_ms(mean)} {per} for rank {top} ({of_all:.0%} of all wait), "
        f"rank {second} next ({_ms(blame.caused[second] / others / n)})"
    )
    if mean >= bar and unjudged_ns > margin:
        return (
            f"cannot tell — {head}, but {lost_time}, more than the margin between them "
            f"({_ms(margin)} over the ranks): it could hold more wait for another rank",
            None,
        )
    if mean < bar:
        could = unjudged_ns / others / n >= bar
        return _not_held(c, mean, top, could, lost_time if unjudged_ns else ""), None
    besides = (
        f"; {len(c.partial)} other matched collective(s) take in ranks not given and are not judged"
        if c.partial
        else ""
    )
    rest = f"; {lost_time}, less than its margin" if unjudged_ns else ""
    return (
        f"rank {top}, the others waited {_ms(mean)} {per} for it ({of_all:.0%} of all wait), "
        f"{blame.basis(top)}; rank {second} next ({_ms(blame.caused[second] / others / n)}) — "
        f"from {len(c.judged)} collective(s) whose every rank is here{besides}{rest}",
        top,
    )


def _not_held(c: _Crossing, mean: float, top: int, could: bool, lost_time: str) -> str:
    """The verdict where no rank held the judged collectives up by STRAGGLER_SHARE of a step:
    'none', unless a rank not given, or the time that could not be judged (``could``: enough
    to hold that much), may hide one. ``lost_time`` says that time ('': there is none)."""
    if c.partial:  # a rank not given may be the one the others waited for
        return (
            f"cannot tell — no rank held up the {len(c.judged)} collective(s) whose every rank "
            f"is here, but {_subset_reason(c.partial, c.everyone, c.world)}"
        )
    if could:
        return (
            f"cannot tell — no rank held the {len(c.judged)} judged collective(s) up by "
            f"{STRAGGLER_SHARE:.0%} of a step, but {lost_time}, enough to hold that much"
        )
    per = _per_step(c)[2]
    rest = f"; {lost_time}, too little to hold that much" if lost_time else ""
    return (
        f"none — the others waited at most {_ms(mean)} {per} for one rank (rank {top}), under "
        f"{STRAGGLER_SHARE:.0%} of the step or the alignment's ±{_ms(c.align.tol)}{rest}"
    )


def _why_not(c: _Crossing, notes: list[str]) -> list[str]:
    """Why no straggler can be named from the clocks and the matching (empty: it can), with
    the notes that say so."""
    al, ref = c.align, c.ranks[0]
    why: list[str] = []
    if not c.complete:
        why.append(
            "no collective was matched on the ranks that take part in it"
            + (
                f" ({c.blind_total} SendRecv kernels name neither their peer nor their "
                "collective, and no order of them ends together across the ranks: NCCL runs "
                "point-to-point transfers and, in some versions, any collective in that kernel)"
                if c.blind
                else ""
            )
        )
    elif c.lost:
        why.append(f"{len(c.lost)} rank(s) share no collective with rank {ref}")
    elif len(al.consistent) < MIN_AGREE and len(c.complete) < MIN_AGREE:
        why.append(
            f"only {len(c.complete)} collective matched: too few to check the clocks' alignment "
            f"on ({MIN_AGREE} needed)"
        )
    elif not al.trusted:
        off = sorted(w / 1e6 for w in al.worst)
        scatter = (
            f"after alignment the {len(c.complete)} matched collectives end {off[0]:,.3f}–"
            f"{off[-1]:,.3f} ms from their median end (tolerance ±{al.tol / 1e6:,.3f} ms = "
            f"{K_MAD} × the robust deviation {al.spread / 1e6:,.3f} ms; {al.inconsistent} outside "
            f"it), while a typical collective lasts {al.typical / 1e6:,.3f} ms"
        )
        why.append(
            f"{scatter}: the ranks of one collective finish together, so the matching or the "
            "clocks are not reliable"
        )
        notes.append(f"clocks not trusted: {scatter}")
    if (c.complete or c.world > len(c.ranks)) and len(c.partial) == len(c.complete):
        why.append(_subset_reason(c.partial, c.everyone, c.world))
    return why


def _match_notes(c: _Crossing) -> list[str]:
    """What the matching could not do, as notes."""
    notes: list[str] = []
    twice = sum(1 for i in c.instances.values() if i.twice)
    resized = sum(1 for i in c.instances.values() if len(i.sizes) > 1 and not i.twice)
    if twice:
        notes.append(
            f"{twice} collective key(s) appear twice on one rank (a repeated sequence number "
            "or ordinal): those collectives are not compared"
        )
    if c.blind:
        done = [i for i in c.found if _complete(i, c.everyone)]
        within = {id(i) for i in c.align.consistent}
        kept = sum(1 for i in done if id(i) in within)
        notes.append(
            f"{c.blind_total} SendRecv kernel(s) name neither their peer nor their collective: "
            f"matched by their order on the stream{' within each step' if c.by_step else ''}, "
            f"accepted where their aligned ends agree — {len(done)} collective(s) found on every "
            f"rank ({kept} within the tolerance), the rest counted unmatched"
        )
    if resized:
        notes.append(
            f"{resized} collective(s) matched by their group's sequence number carry different "
            "message sizes on their ranks (not one collective): not compared"
        )
    if not c.complete:
        notes.append("no collective is on every rank that takes part: nothing to compare")
    elif c.lost:
        notes.append(
            f"{len(c.lost)} rank(s) share no collective with rank {c.ranks[0]} (directly or "
            f"through others): their clocks are not aligned ({', '.join(map(str, c.lost[:8]))})"
        )
    if c.align.trusted and c.align.inconsistent:
        notes.append(
            f"{c.align.inconsistent} matched collective(s) end at different aligned times on their "
            "ranks (a wrong match, or a clock that stepped): left out of waits, stragglers and links"
        )
    return notes


def _job_link(summaries: list[RankSummary]) -> tuple[str, float | None]:
    """The peer link every rank's hardware names (the slowest where they differ)."""
    links = [(s.peer_link_Bps, s.peer_link) for s in summaries if s.peer_link_Bps]
    if not links or len(links) < len(summaries):
        return "", None
    bps, label = min(links)
    return label, bps


def _skews(c: _Crossing, link_Bps: float | None) -> list[CollectiveSkew]:
    """Each judged collective split into arrival skew and transfer, with its bus bandwidth."""
    out = []
    for rec in c.records:
        nbytes = rec.nbytes()
        n = len(rec.arrive)
        bw = _bus_bw(rec.inst.op, n, nbytes or 0, rec.transfer)
        waits = dict(sorted(rec.waits.items(), key=lambda kv: -kv[1])[:WAITS_MAX])
        out.append(
            CollectiveSkew(
                op=rec.inst.op, ordinal=rec.inst.ordinal, group=rec.inst.group,
                matched_by=rec.inst.how, ranks=n, step=rec.step, skew_ns=rec.skew,
                last_rank=rec.last, waited_ns=rec.waited, waits_ns=dict(sorted(waits.items())),
                transfer_ns=rec.transfer, nbytes=nbytes, bus_bw_Bps=bw,
                link_share=bw / link_Bps if bw is not None and link_Bps else None,
            )
        )  # fmt: skip
    out.sort(key=lambda k: -k.skew_ns)
    return out


def _step_stragglers(c: _Crossing) -> list[StepStraggler]:
    """Per step, the rank the others waited for most; named when their mean wait for it is a
    share of the step and more than the clocks' alignment can blur."""
    step_wait: dict[int, dict[int, int]] = defaultdict(lambda: dict.fromkeys(c.ranks, 0))
    blame: dict[int, dict[int, int]] = defaultdict(lambda: dict.fromkeys(c.ranks, 0))
    for rec in c.records:
        if rec.step is None:
            continue
        for r, w in rec.waits.items():
            step_wait[rec.step][r] += w
        blame[rec.step][rec.last] += rec.waited  # the others waited this long for the last
    ref = c.ranks[0]
    lengths: dict[int, list[int]] = defaultdict(list)  # step → its length on each rank
    for s in c.by_rank.values():
        for n, (a, b) in enumerate(s.steps):
            sid = s.step_ids[n] if c.by_step else (n if s.rank == ref else None)
            if sid is not None:
                lengths[sid].append(b - a)
    steps = []
    for n in sorted(step_wait):
        straggler = max(c.ranks, key=lambda r: blame[n][r])
        mean = blame[n][straggler] / (len(c.ranks) - 1)
        length = int(np.median(lengths[n])) if lengths.get(n) else 0
        held = bool(length) and mean >= STRAGGLER_SHARE * length and mean > c.align.tol
        steps.append(
            StepStraggler(
                step=n, straggler=straggler if held else None, waited_ns=step_wait[n],
                step_ns=length, others_waited_ns=mean,
            )
        )  # fmt: skip
    return steps


def _rank_stats(c: _Crossing, blame: _Blame) -> list[RankStats]:
    out = []
    for r in c.ranks:
        s = c.by_rank[r]
        busy = s.compute_ns + s.comm_ns
        durs = [b - a for a, b in s.steps]
        out.append(
            RankStats(
                rank=r,
                clock_offset_ns=c.offset[r],
                waited_ns=blame.waited[r] if c.judged else None,
                last_arrivals=blame.last_n[r] if c.judged else None,
                caused_ns=blame.caused[r] if c.judged else None,
                comm_share=s.comm_ns / busy if busy else 0.0,
                overlap_share=s.overlap_ns / s.comm_ns if s.comm_ns else 0.0,
                step_ns=float(np.median(durs)) if durs else None,
            )
        )
    return out


def _rank_outliers(c: _Crossing, per_rank: list[RankStats], blame: _Blame) -> list[Outlier]:
    span = float(np.median([s.span_ns for s in c.by_rank.values()]))
    step_med = [p.step_ns for p in per_rank if p.step_ns is not None]
    # time waited rests on the aligned clocks: judged only when they can be trusted, and only
    # a difference of 1 % of the run or more
    waited = (
        _outliers(
            {r: float(w) for r, w in blame.waited.items()}, "waited_ns", STRAGGLER_SHARE * span
        )
        if c.judged
        else []
    )
    return (
        waited
        + _outliers({p.rank: p.comm_share for p in per_rank}, "comm_share", COMM_SHARE_FLOOR)
        + _outliers(
            {p.rank: p.step_ns for p in per_rank if p.step_ns is not None},
            "step_ns",
            STEP_FLOOR * float(np.median(step_med)) if step_med else 0.0,
        )
    )


def _split_note(c: _Crossing, skews: list[CollectiveSkew], link: str) -> str | None:
    """One line: how the judged collectives' time splits into waiting and transfer, and their
    bus bandwidth against the peer link."""
    if not c.records:
        return None
    wait = sum(r.waited for r in c.records)
    transfer = sum(r.transfer * len(r.arrive) for r in c.records)
    line = (
        f"the {len(c.records)} judged collective(s): {_ms(wait)} waiting for the last arrival "
        f"and {_ms(transfer)} transferring, summed over the ranks "
        f"({wait / (wait + transfer) if wait + transfer else 0.0:.0%} waiting)"
    )
    bws: dict[str, list[float]] = defaultdict(list)
    for k in skews:
        if k.bus_bw_Bps is not None:
            bws[k.op].append(k.bus_bw_Bps)
    if bws:
        parts = [f"{op} {float(np.median(v)) / 1e9:,.1f} GB/s" for op, v in sorted(bws.items())]
        line += "; median bus bandwidth " + ", ".join(parts)
        line += f" against {link}" if link else " (no peer link known for this hardware)"
    return line


MATCHING = (
    "a Send/Recv by (source, destination, its ordinal on that direction); a collective of a "
    "named process group by (group, op, Seq or its ordinal in the group); otherwise the i-th "
    "collective of an op and message size on one rank is the i-th of that op and size on every "
    "rank (of that op alone where the size is not said or may differ between ranks: all-to-all, "
    "gather, scatter); a SendRecv kernel naming neither its peer nor its collective by its order "
    "on its stream, accepted only where its aligned end agrees with the reference rank's"
)


def cross_rank(summaries: list[RankSummary]) -> CrossRank | None:
    """The cross-rank analysis of one job's ranks; None when there are not two distinct ranks,
    or the files are not of one job (``not_one_job`` says why)."""
    by_rank = _one_job(summaries)
    if by_rank is None:
        return None
    c = _Crossing(by_rank)
    al, ranks = c.align, c.ranks
    notes = _match_notes(c)
    why_not = _why_not(c, notes)
    blame = _Blame(c.records, ranks, al.tol)
    unjudged, unjudged_ns, total_ns = _unjudged(c)
    verdict, named = _verdict(c, blame, unjudged_ns, total_ns, why_not)
    link, link_Bps = _job_link(list(by_rank.values()))
    skews = _skews(c, link_Bps)
    steps = _step_stragglers(c)
    per_rank = _rank_stats(c, blame)
    outliers = _rank_outliers(c, per_rank, blame)
    links, slow, link_notes = _links(al.consistent if al.trusted else c.complete)
    notes += link_notes
    if c.complete and not any(i.group for i in c.complete):
        notes.append(
            "slow links: unknown — no collective kernel names its peer or process group (recent "
            "PyTorch profilers copy them onto the kernel's args; this trace's kernels have none)"
        )
    if c.world > len(ranks):
        notes.append(
            f"{len(ranks)} of the job's {c.world} ranks analysed: collectives are compared among "
            "these, and a rank not given (the straggler, perhaps) cannot be seen"
        )
    if unjudged:
        notes.append(
            "no wait taken from: "
            + "; ".join(
                f"{u.op} {u.kernels} kernel(s) {u.why}, {_ms(u.time_ns)} ({u.share:.1%} of "
                "collective time)"
                for u in unjudged[:6]
            )
        )
    split = _split_note(
        c, skews, f"{link}, {link_Bps / 1e9:,.0f} GB/s per direction" if link_Bps else ""
    )
    if split:
        notes.append(split)
    # nothing that would read as a straggler's absence; each judged collective's own split
    # (skew, waits, transfer) is a measurement and stays
    if verdict.startswith("cannot tell"):
        steps = []
        for p in per_rank:
            p.waited_ns = p.last_arrivals = p.caused_ns = None
        outliers = [o for o in outliers if o.metric != "waited_ns"]
    judged_any = bool(c.judged) and not verdict.startswith("cannot tell")
    return CrossRank(
        ranks=ranks,
        trusted=al.trusted,
        straggler=verdict,
        straggler_rank=named,
        tolerance_ns=al.tol if c.complete else None,
        judged=len(c.judged),
        matched=len(c.complete),
        unmatched=c.unmatched,
        inconsistent=al.inconsistent if al.trusted else 0,
        unmatched_ops=unjudged,
        unjudged_share=unjudged_ns / total_ns if total_ns else 0.0,
        caused_ns={r: v for r, v in blame.caused.items() if v} if judged_any else {},
        wait_ns=blame.wait,
        transfer_ns=sum(r.transfer * len(r.arrive) for r in c.records),
        peer_link=link,
        peer_link_Bps=link_Bps,
        matching=MATCHING + (" — ordinals counted within each ProfilerStep#N" if c.by_step else ""),
        clocks=f"aligned on collective ends ({c.basis}): each rank's median offset from rank "
        f"{ranks[0]}; " + _alignment_line(al),
        rule=f"outlier: |x − median| > {K_MAD} × 1.4826 × MAD and more than a floor (waited: 1 % "
        f"of the run; comm share: {COMM_SHARE_FLOOR:.0%} points; step: {STEP_FLOOR:.0%})",
        collectives=skews[:50],
        ranks_lost=c.lost,
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


def _alignment_line(al: _Alignment) -> str:
    if not al.complete:
        return "no matched collective to align on"
    return (
        f"aligned ends agree within ±{al.tol / 1e6:,.3f} ms (tolerance: {K_MAD} × the robust "
        f"deviation of the aligned ends, {al.spread / 1e6:,.3f} ms, floor "
        f"{END_FLOOR_NS / 1e3:g} µs); {len(al.consistent)} of {len(al.complete)} matched "
        "collective(s) within it"
    )


def peer_bounds(
    summaries: list[RankSummary], cross: CrossRank | None = None
) -> dict[int, PeerBounds]:
    """Per rank, what each of its judged collectives waited for on its peers, on the rank's own
    clock — the seam to the replay (engine.analyze.advice.peers): the kernel's observed start (the
    COMM row's start_ns in the rank's Segments: ``RankSummary.starts``), when the last *other*
    rank arrived (its aligned arrival moved onto this rank's clock), the transfer once everyone
    was there, the rank that was last and the op; and how many of the rank's collectives are
    not among them (unmatched, inconsistent, or of a group with ranks not given). Only where the
    clocks are trusted (``cross.trusted`` when given): else {} — a bound from untrusted clocks
    would hold the replay to a wrong time."""
    if cross is not None and not cross.trusted:
        return {}
    by_rank = _one_job(summaries)
    if by_rank is None:
        return {}
    c = _Crossing(by_rank)
    if not c.align.trusted:
        return {}
    rows: dict[int, list[tuple[int, int, int, int, str]]] = {r: [] for r in c.ranks}
    for rec in c.records:
        for r, i in rec.inst.idx.items():
            own = c.offset[r]
            others = max(a for q, a in rec.arrive.items() if q != r)
            end = c.by_rank[r].ends[i]
            transfer = max(end - (rec.arrive[rec.last] - own), rec.shortest)
            rows[r].append((c.by_rank[r].starts[i], others - own, transfer, rec.last, rec.inst.op))
    out = {}
    for r, got in rows.items():
        got.sort()
        out[r] = PeerBounds(
            rank=r,
            start_ns=np.array([g[0] for g in got], np.int64),
            peer_ready_ns=np.array([g[1] for g in got], np.int64),
            transfer_ns=np.array([g[2] for g in got], np.int64),
            last_rank=np.array([g[3] for g in got], np.int64),
            op=[g[4] for g in got],
            unmatched=len(c.by_rank[r].ops) - len(got),
        )
    return out
