"""A job's ranks analysed together: each rank's replay held to its peers (issue 46 item 3).

One rank's trace alone cannot say when its peers arrived at a collective, so its first
analysis replays every collective as if they all arrived with it — and a lever that moves the
rank's work earlier "finishes" its collectives earlier, where in reality the rank would wait
longer. Once the ranks are crossed (engine.analyze.ranks.ranks) and their clocks trusted, each
rank's collectives have a last peer's arrival and a transfer time (``peer_bounds``); this
second pass analyses each such rank again with its collectives held to them
(engine.analyze.advice.peers, ``replay_levers(peers=...)``): its levers' gains become what they take
off the rank's span with its peers as observed (a rank that is never last gains nothing beyond
the time after its last collective), and its critical path shows the waits for its peers.

The job runs in two rounds on the same workers (engine.analyze.api): the first reads each rank
for its summary alone (a few kB: its collectives, steps and span), the ranks are crossed, and
the second reads and analyses each rank once, held to its peers where they are known — each
rank's analysis is made once, never thrown away and made again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.analyze.advice.peers import PeerBounds
from engine.analyze.ranks.ranks import CrossRank, peer_bounds
from engine.analyze.run import FileOutcome


def peers_by_file(first: list[FileOutcome], crossed: CrossRank) -> dict[str, PeerBounds]:
    """Per file of the job's first round (``summary`` kept), the bounds its collectives are
    held to in its analysis: each rank whose collectives were matched, with clocks trusted
    (none otherwise)."""
    summaries = [o.summary for o in first if o.summary is not None]
    bounds = peer_bounds(summaries, crossed)
    return {
        o.path: b
        for o in first
        if o.summary is not None
        and o.summary.rank is not None
        and (b := bounds.get(o.summary.rank)) is not None
        and len(b)
    }


def held_note(outcomes: list[FileOutcome], crossed: CrossRank, peers: dict[str, PeerBounds]) -> str:
    """The line saying how the ranks' levers were replayed (``peers``: what each file's was held
    to), the job's critical path set on ``crossed`` where the ranks were held."""
    if not peers:
        why = "clocks not trusted" if not crossed.trusted else "no collective matched"
        return f"levers replayed rank by rank, peers unknown ({why})"
    held = sum(1 for o in outcomes if o.path in peers and o.analysis is not None)
    bounds = {
        o.summary.rank: peers[o.path]
        for o in outcomes
        if o.path in peers and o.summary is not None and o.summary.rank is not None
    }
    spans = {
        o.summary.rank: (o.summary.first_ns, o.summary.first_ns + o.summary.span_ns)
        for o in outcomes
        if o.summary is not None and o.summary.rank is not None
    }
    path = job_path(bounds, spans)
    if path is not None:
        crossed.job_path = path.headline()
    return f"levers of {held} rank(s) replayed with their collectives held to their peers"


@dataclass(frozen=True)
class JobPath:
    """The job's critical path between its collectives, as one rank saw them: before each
    collective, the work of the rank that arrived last (everyone waited for it); then the
    transfer once all were there; after the last, the longest tail of any rank."""

    reference: int  # the rank whose collectives (and clock) the path is read on
    total_ns: float
    work_ns: dict[int, float]  # per rank: its work on the path (it was the last to arrive)
    transfer_ns: float
    tail_ns: float
    tail_rank: int | None
    collectives: int

    def headline(self) -> str:
        """'the job waits on rank 5's work 62% …; transfers 20%; …'."""
        if self.total_ns <= 0:
            return "the job's critical path is unknown (no collective matched)"
        ranked = sorted(self.work_ns.items(), key=lambda kv: -kv[1])
        parts = [f"rank {r}'s work {v / self.total_ns:.0%}" for r, v in ranked[:3] if v > 0]
        parts.append(f"transfers {self.transfer_ns / self.total_ns:.0%}")
        if self.tail_ns > 0 and self.tail_rank is not None:
            parts.append(f"rank {self.tail_rank}'s tail {self.tail_ns / self.total_ns:.0%}")
        return (
            f"the job's critical path over its {self.collectives} matched collective(s) "
            f"(rank {self.reference}'s view, {self.total_ns / 1e6:,.2f} ms): " + "; ".join(parts)
        )


def job_path(bounds: dict[int, PeerBounds], spans: dict[int, tuple[int, int]]) -> JobPath | None:
    """The job's path read on the rank with most matched collectives (``bounds``), each rank's
    window (first, last row, own clock) in ``spans``. Before collective k: the last arriver's
    work since collective k−1 ended (the window's start for the first); then its transfer; after
    the last: the longest of the ranks' own tails. Collectives of a subgroup that leaves the
    reference rank out are not on this view (the path is the reference's)."""
    if not bounds:
        return None
    ref = max(bounds, key=lambda r: (len(bounds[r]), -r))
    b = bounds[ref]
    if not len(b) or ref not in spans:
        return None
    order = np.argsort(b.start_ns, kind="stable")
    ready = np.maximum(b.start_ns, b.peer_ready_ns)[order]  # everyone there (own clock)
    transfer = b.transfer_ns[order].astype(np.float64)
    last = b.last_rank[order]
    work: dict[int, float] = {}
    prev = float(spans[ref][0])
    for t, x, r in zip(ready.tolist(), transfer.tolist(), last.tolist(), strict=True):
        work[int(r)] = work.get(int(r), 0.0) + max(0.0, t - prev)
        prev = max(prev, t + x)
    transfers = float(transfer.sum())
    # after the last collective: each rank's own time to the end of its window
    tails = {r: float(spans[r][1]) - _last_end(bounds[r]) for r in bounds if r in spans}
    tail_rank = max(tails, key=lambda r: tails[r]) if tails else None
    tail = max(0.0, tails[tail_rank]) if tail_rank is not None else 0.0
    total = sum(work.values()) + transfers + tail
    return JobPath(ref, total, work, transfers, tail, tail_rank, len(b))


def _last_end(b: PeerBounds) -> float:
    end = np.maximum(b.start_ns, b.peer_ready_ns) + b.transfer_ns
    return float(end.max()) if len(end) else 0.0
