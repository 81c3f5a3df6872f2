"""What one rank's collectives waited for on its peers: the seam between the cross-rank match
(engine.analyze.ranks) and the replay of one rank (engine.analyze.levers, engine.schedule).

A collective cannot end before its last rank arrives; once everyone is there it takes its
transfer time. A rank replayed alone does not know its peers, so its replay lets every
collective "finish" as soon as this rank arrives — moving a collective earlier looks like a
gain, where in reality the rank would wait longer for its peers. ``PeerBounds`` carries, per
collective kernel of one rank (matched on the rank's own clock by the kernel's observed start),
when its last peer arrived and how long the transfer took once everyone had arrived, so the
replay can hold the collective to both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt


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
