"""Matching collectives across ranks and aligning their clocks: each collective instance by
op, group, sequence or ordinal (SendRecv kernels that name nothing: by order and ends), the
clock offsets from collective ends, and the links' transfer rates; robust outliers
(engine.analyze.ranks.ranks tells the rules)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from engine.analyze.ranks.model import LinkStats, Outlier
from engine.analyze.ranks.summary import (
    END_FLOOR_NS,
    K_MAD,
    MIN_AGREE,
    TRUST_REL,
    TRUST_SHARE,
    RankSummary,
)


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
