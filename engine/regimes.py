"""The bottleneck regimes EESM decodes into (the 'h' of f = h ∘ S ∘ T ∘ B ∘ O)."""

from __future__ import annotations

from enum import IntEnum


class Regime(IntEnum):
    """Regime ids; the order matches ``regimes`` in manifests/eesm.json (checked at load)."""

    COMPUTE = 0
    MEMORY = 1
    STALL = 2
    IDLE = 3


#: label written for a segment that has not been decoded yet (fixed-lag window) — never a regime.
UNDECIDED = 255

N_REGIMES = len(Regime)


def regime_name(i: int) -> str:
    """Return the regime name for an id, or 'UNDECIDED'."""
    return Regime(i).name if 0 <= i < N_REGIMES else "UNDECIDED"


class Label(IntEnum):
    """What `gitm-tui analyze` calls a row: a decoded regime (values shared with Regime), or,
    where no regime applies, what the row is. Copies and collectives are not kernels competing
    for SMs: they are labelled by what they are and measured against the link they cross;
    a kernel whose class is unknown and of which nothing was measured is UNKNOWN."""

    COMPUTE = 0
    MEMORY = 1
    STALL = 2
    IDLE = 3
    UNKNOWN = 4
    COMM = 5
    COPY = 6


N_LABELS = len(Label)


def label_name(i: int) -> str:
    """Return the label name for an id, or 'UNDECIDED'."""
    return Label(i).name if 0 <= i < N_LABELS else "UNDECIDED"
