"""What crossing ranks says (cross_rank.json's model): collective skews, step stragglers,
per-rank figures, outliers, links, unmatched ops, and the CrossRank that holds them."""

from __future__ import annotations

from pydantic import Field

from engine.analyze.ranks.summary import _M


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
