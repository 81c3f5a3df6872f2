"""One rank's summary (engine.analyze.ranks.ranks has the whole story): what crossing ranks
needs of a trace — its collectives, steps, compute and communication time — in a few kB, made
where the rank is read (``summarize``), and the rules the crossing shares (K_MAD, the
tolerances)."""

from __future__ import annotations

import bisect
import hashlib
import re
from collections import defaultdict
from dataclasses import replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from engine.analyze.breakdown.intervals import intersection as _intersection
from engine.analyze.breakdown.intervals import interval_union
from engine.analyze.breakdown.intervals import length as _length
from engine.manifest import Link
from engine.optimizer.fingerprint import Fingerprint, fingerprint_of_trace
from engine.planner.devices import main_device
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
