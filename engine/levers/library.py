"""The lever library: 16 levers, each with its sites in a simulated workload, a replay transform
on the trace's dependency graph, and a mechanistic apply (the edited program is re-simulated).

Reading guide: every lever is a small class with three methods —

* ``sites(state)``: can this workload be changed this way (and where)? The reason says why not.
* ``transform(obs)``: the counterfactual, on the *trace's* replay graph only (engine.optimizer
  .dag): which rows it edits and how, using measured durations, counters, decoded regimes,
  telemetry and the hardware catalogue. Effect-model constants are named priors (levers.json).
* ``apply(state)``: the program/config edit the simulator then runs. Rollback is restoring the
  previous state, which the journal holds.
"""

from __future__ import annotations

from engine.levers.base import Lever
from engine.levers.data import (
    BatchSize,
    CopyOverlap,
    ExpandableSegments,
    PinnedMemory,
    PrefetchDepth,
)
from engine.levers.kernels import (
    Bf16Autocast,
    ChannelsLast,
    CudnnAutotune,
    ElementwiseFusion,
    SdpaFlash,
    Tf32Matmul,
)
from engine.levers.launch import CudaGraphs, FusedOptimizer, LaunchConfig, SyncRemoval
from engine.levers.power import PowerPolicy

LEVERS: tuple[Lever, ...] = (
    CudaGraphs(),
    ElementwiseFusion(),
    Tf32Matmul(),
    Bf16Autocast(),
    ChannelsLast(),
    CudnnAutotune(),
    LaunchConfig(),
    CopyOverlap(),
    PinnedMemory(),
    BatchSize(),
    ExpandableSegments(),
    SyncRemoval(),
    FusedOptimizer(),
    SdpaFlash(),
    PrefetchDepth(),
    PowerPolicy(),
)


def having(**capabilities: object) -> tuple[Lever, ...]:
    """The levers whose declared capabilities (engine.levers.base.Lever's attributes) have
    these values, in library order: ``having(moves_copies=True)``."""
    return tuple(lv for lv in LEVERS if all(getattr(lv, k) == v for k, v in capabilities.items()))


def answering(what: str) -> list[str]:
    """The ids of the levers that answer a critical-path opportunity (``Lever.answers``)."""
    return [lv.id for lv in LEVERS if what in lv.answers]


def by_id(lever_id: str) -> Lever:
    """Return the lever ``lever_id``; KeyError names the known ones."""
    for lv in LEVERS:
        if lv.id == lever_id:
            return lv
    raise KeyError(f"unknown lever {lever_id!r}; known: {', '.join(lv.id for lv in LEVERS)}")
