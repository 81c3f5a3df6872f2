"""What one rank's collectives waited for on its peers: the seam between the cross-rank match
(engine.analyze.ranks.ranks) and the replay of one rank (engine.analyze.advice.levers, engine.schedule).

A collective cannot end before its last rank arrives; once everyone is there it takes its
transfer time. A rank replayed alone does not know its peers, so its replay lets every
collective "finish" as soon as this rank arrives — moving a collective earlier looks like a
gain, where in reality the rank would wait longer for its peers. ``PeerBounds`` carries, per
collective kernel of one rank (matched on the rank's own clock by the kernel's observed start),
when its last peer arrived and how long the transfer took once everyone had arrived, so the
replay can hold the collective to both.

``hold`` does that to a rank's replay graph (``ReplayDag.d_not_before``, fitted so the unedited
replay still reproduces the rank's own trace); a lever's gain is then what it takes off the
rank's span with its peers arriving as observed — for a rank never last, at most what runs after
its last collective. ``held_line`` / ``alone_line`` say in one line what bounded a prediction:
the peers (whom the rank waits for, where), or, without them, which collectives were replayed as
if every peer arrived with this rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from engine.text import clean
from engine.trace.segments import Kind, Klass

if TYPE_CHECKING:  # (annotations only: the seam stays free of the replay's numba kernels)
    from engine.schedule.dag import ReplayDag


@dataclass(frozen=True)
class PeerBounds:
    """One rank's matched collectives, all times on this rank's own clock (ns).

    ``start_ns[i]`` is the observed start of the collective kernel (the key into the rank's
    Segments: a COMM row with this start), ``peer_ready_ns[i]`` when the last of its *other*
    ranks arrived (aligned to this clock: the clock offset already applied), ``transfer_ns[i]``
    the time it took once every rank had arrived (its observed end − the last arrival, at least
    the shortest kernel of that collective over its ranks), ``last_rank[i]`` the rank that
    arrived last (this rank where it was last itself) and ``op[i]`` its op."""

    rank: int
    start_ns: npt.NDArray[np.int64]
    peer_ready_ns: npt.NDArray[np.int64]
    transfer_ns: npt.NDArray[np.int64]
    last_rank: npt.NDArray[np.int64]
    op: list[str] = field(default_factory=list)
    #: collectives of this rank with no match (not held by their peers in the replay)
    unmatched: int = 0

    def __len__(self) -> int:
        return len(self.start_ns)

    def waited_ns(self) -> npt.NDArray[np.int64]:
        """Per collective: how long this rank waited for its peers (0 where it was last)."""
        return np.maximum(self.peer_ready_ns - self.start_ns, 0)


#: arrivals this close are a tie in what the lines say (Kineto timestamps are whole µs, and
#: aligned clocks agree within a few µs: issue 46's 8-rank job, 4 µs)
TIE_NS = 2_000


@dataclass(frozen=True)
class Held:
    """What ``hold`` did to one rank's graph: which device rows it held to which entries of the
    ``PeerBounds``, the earliest the replayed span can then end, and what it could not hold."""

    #: device rows held, and the PeerBounds entry each is held to
    rows: npt.NDArray[np.int64]
    index: npt.NDArray[np.int64]
    #: observed end of the last held collective (ns from t0; NaN: none held)
    last_end_ns: float
    #: the earliest any lever's replay can end the span (ns from t0): the latest of the held
    #: collectives' (last peer's arrival + transfer), which no change on this rank moves
    floor_ns: float
    #: collectives of the window with no entry (replayed as if every peer arrived with this
    #: rank), and their observed time
    free_rows: int
    free_ns: float


def collectives(dag: ReplayDag) -> npt.NDArray[np.int64]:
    """The live collective rows of a graph: Kind.COMM, or a kernel of class COMM (how the
    Kineto reader files an NCCL kernel), as engine.analyze.ranks.ranks.summarize counts them."""
    comm = (dag.d_kind == Kind.COMM) | ((dag.d_kind == Kind.KERNEL) & (dag.d_klass == Klass.COMM))
    return np.flatnonzero(dag.d_live & comm)


def hold(dag: ReplayDag, peers: PeerBounds) -> tuple[ReplayDag, Held]:
    """A copy of ``dag`` whose matched collectives wait for their peers (module docstring).

    An entry's row is the live collective row (``collectives``) whose observed start is
    ``peers.start_ns[i]`` (the Segments row ``dag.d_row`` names: ``d_start_obs`` is its start;
    where several entries share a start, the one whose peer arrived last). The row may begin its transfer no earlier than
    its last peer arrived (``ReplayDag.d_not_before``) and then takes its transfer time
    (``d_dur``): so it ends at max(own arrival, peer arrival) + transfer. Both are fitted to
    this rank's own trace, so the unedited replay still ends the row at its observed end: the
    transfer is at least ``transfer_ns`` and at most the kernel's own time, and an aligned peer
    arrival later than the observed end − that transfer (a clock offset's error, µs) is moved
    back to it."""
    comm = collectives(dag)
    entry = _entry_at(dag.d_start_obs[comm], peers)
    hit = entry >= 0
    rows, idx = comm[hit], entry[hit]
    start = dag.d_start_obs[rows].astype(np.float64) - dag.t0_ns
    end = start + dag.d_dur[rows]
    least = np.clip(peers.transfer_ns[idx].astype(np.float64), 0.0, end - start)
    ready = np.minimum(peers.peer_ready_ns[idx].astype(np.float64) - dag.t0_ns, end - least)
    out = dag.copy()
    nb = np.full(len(out.d_stream), np.nan) if out.d_not_before is None else out.d_not_before
    nb[rows] = ready
    out.d_not_before = nb
    out.d_dur[rows] = end - np.maximum(start, ready)
    free = comm[~hit]
    return out, Held(
        rows=rows,
        index=idx,
        last_end_ns=float(end.max()) if len(rows) else np.nan,
        floor_ns=float((ready + out.d_dur[rows]).max()) if len(rows) else np.nan,
        free_rows=len(free),
        free_ns=float(dag.d_dur[free].sum()),
    )


def _entry_at(starts: npt.NDArray[np.int64], peers: PeerBounds) -> npt.NDArray[np.int64]:
    """Per observed start: the PeerBounds entry with that start (the latest peer's where
    several share it), -1 where none."""
    out = np.full(len(starts), -1, np.int64)
    if not len(peers) or not len(starts):
        return out
    order = np.lexsort((peers.peer_ready_ns, peers.start_ns))
    key = peers.start_ns[order]
    last = np.ones(len(key), bool)  # the last of each run of one start: its latest peer
    last[:-1] = key[1:] != key[:-1]
    key, order = key[last], order[last]
    at = np.minimum(np.searchsorted(key, starts), len(key) - 1)
    found = key[at] == starts
    out[found] = order[at[found]]
    return out


# ------------------------------------------------------------------ one line each
def alone_line(dag: ReplayDag) -> str | None:
    """What bounds a rank replayed without its peers: its collectives (None: it has none)."""
    comm = collectives(dag)
    if not len(comm):
        return None
    return (
        f"peers unknown: {_n(len(comm))} ({_ms(float(dag.d_dur[comm].sum()))}) are "
        "replayed as if every peer arrived with this rank; a later peer would take gain back"
    )


def held_line(peers: PeerBounds, held: Held, span_ns: float, steps: int) -> str:
    """What bounds a rank held to its peers, in one line: the most the job can gain from a
    change on this rank (the span past ``Held.floor_ns``), whom it waits for and where, and
    whether it is the rank the others wait for. Waits are per step where ``steps`` > 0."""
    i = held.index
    k, per = (steps, "per step") if steps > 0 else (1, "in the window")
    room = max(0.0, span_ns - held.floor_ns)
    tail = max(0.0, span_ns - held.last_end_ns)
    share = f"{room / span_ns:.1%} of the span" if span_ns > 0 else "the span"
    if room > tail + 0.5:  # last at its last collective: the others wait that long for it
        line = (
            f"no gain for the job beyond {_ms(room)} ({share}: the post-collective tail "
            f"{_ms(tail)}, and {_ms(room - tail)} by which it is last at its last collective)"
        )
    else:
        line = f"no gain for the job beyond the post-collective tail ({_ms(room)}, {share})"
    # last where it arrived after every peer (within TIE_NS it is a tie: nobody waited there)
    lead = (peers.start_ns[i] - peers.peer_ready_ns[i]).astype(np.float64)
    last = lead > TIE_NS
    parts = []
    if last.any():
        parts.append(
            f"rank {peers.rank} is last at {int(last.sum())} of {_n(len(i))}, the "
            f"next-latest rank waits {_ms(float(lead[last].sum()) / k)} {per} for it there"
        )
    if (lead < -TIE_NS).any() or not parts:
        parts.append(_wait_text(peers, i, k, per))
    if held.free_rows:
        parts.append(
            f"{_n(held.free_rows)} ({_ms(held.free_ns)}) with no matched peers are "
            "replayed as if every peer arrived with this rank"
        )
    return line + ": " + "; ".join(parts)


def _wait_text(peers: PeerBounds, i: npt.NDArray[np.int64], k: int, per: str) -> str:
    """'rank 0 waits 3.1 ms per step for rank 7 at SendRecv': the rank it waited for most and
    the op where it waited most for that rank."""
    waited = peers.waited_ns()[i].astype(np.float64)
    by_rank: dict[int, float] = {}
    for r, w in zip(peers.last_rank[i].tolist(), waited.tolist(), strict=True):
        if r != peers.rank and w > 0:
            by_rank[r] = by_rank.get(r, 0.0) + w
    if not by_rank:
        return f"rank {peers.rank} waits for none of its peers"
    top = max(by_rank, key=lambda r: by_rank[r])
    ops = peers.op if len(peers.op) == len(peers) else []
    by_op: dict[str, float] = {}
    for j, r, w in zip(i.tolist(), peers.last_rank[i].tolist(), waited.tolist(), strict=True):
        if r == top and ops:
            by_op[ops[j]] = by_op.get(ops[j], 0.0) + w
    at = f" at {clean(max(by_op, key=lambda o: by_op[o]), 40)}" if by_op else ""
    total = sum(by_rank.values())
    if len(by_rank) == 1:
        return f"rank {peers.rank} waits {_ms(total / k)} {per} for rank {top}{at}"
    return (
        f"rank {peers.rank} waits {_ms(total / k)} {per} for its peers, "
        f"{_ms(by_rank[top] / k)} of it for rank {top}{at}"
    )


def _n(count: int) -> str:
    return f"{count:,} collective" + ("" if count == 1 else "s")


def _ms(ns: float) -> str:
    """As engine.analyze.advice.levers writes a time."""
    ms = ns / 1e6
    if ms == 0:
        return "0 ms"
    return f"{ms:,.1f} ms" if ms >= 10 else f"{ms:.2f} ms" if ms >= 0.1 else f"{ms:.3f} ms"
