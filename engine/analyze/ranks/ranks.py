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

from collections import defaultdict
from itertools import pairwise

import numpy as np

from engine.analyze.advice.peers import PeerBounds
from engine.analyze.ranks.groups import (
    _subset_reason,
    _whole,
    job_groups,
    not_one_job,
    workload_groups,
)
from engine.analyze.ranks.matching import (
    COMM_SHARE_FLOOR,
    LINK_FLOOR,
    STEP_FLOOR,
    _align_all,
    _Alignment,
    _bus_bw,
    _col,
    _complete,
    _Instance,
    _instances,
    _links,
    _outliers,
)
from engine.analyze.ranks.model import (
    CollectiveSkew,
    CrossRank,
    Outlier,
    RankStats,
    StepStraggler,
    UnmatchedOp,
    most_waited_for,
)
from engine.analyze.ranks.summary import (
    END_FLOOR_NS,
    K_MAD,
    MIN_AGREE,
    STRAGGLER_SHARE,
    RankSummary,
    collective_op,
    rank_fingerprint,
    rank_ranges,
    summarize,
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


#: what the rest of the tool takes from here (the parts live in summary, model, matching, groups)
__all__ = [
    "K_MAD",
    "STRAGGLER_SHARE",
    "CrossRank",
    "RankStats",
    "RankSummary",
    "collective_op",
    "cross_rank",
    "job_groups",
    "most_waited_for",
    "not_one_job",
    "peer_bounds",
    "rank_fingerprint",
    "rank_ranges",
    "summarize",
    "workload_groups",
]
