"""What a lever is (DESIGN §6): spec from manifests/levers.json + applicability, replay
transform, apply; rollback restores the state journaled before the apply."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, ConfigDict

from engine.manifest import LeverPrior as Prior
from engine.planner.catalogue import GpuPeaks
from engine.schedule.causes import Cause
from engine.schedule.dag import ReplayDag, Schedule
from engine.telemetry.sample import TelemetrySample


class Safety(str, Enum):
    """Who may approve a lever: SAFE levers can be auto-approved; the others need a person."""

    SAFE = "SAFE"
    NUMERICS = "NUMERICS"
    PRIVILEGED = "PRIVILEGED"


class Requires(BaseModel):
    """What the device must have for a lever to act (manifests/levers.json ``requires``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: the tensor / matrix cores take at least one of these types
    matrix_dtypes_any: tuple[str, ...] = ()
    #: the catalogue lists every one of these features
    features: tuple[str, ...] = ()
    #: what that is, in words ("BF16 tensor cores")
    needs: str


class LeverSpec(BaseModel):
    """One entry of manifests/levers.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    title: str
    safety: Safety
    causes: tuple[str, ...]
    what: str
    effect: str
    requires: Requires | None = None
    #: what applying it can change besides time — the reason for its safety class, in words
    #: ("results can change: host code that reads device data after a removed sync …"); every
    #: lever that is not SAFE says it (``lever_specs`` refuses one that does not)
    changes: str = ""

    def cause_set(self) -> tuple[Cause, ...]:
        """Return the causes as enum members."""
        return tuple(Cause[c] for c in self.causes)


@lru_cache(maxsize=1)
def lever_specs() -> dict[str, LeverSpec]:
    """Return the lever manifest by id (validated; every cause must exist)."""
    data = json.loads(resources.files("manifests").joinpath("levers.json").read_text())
    specs = {d["id"]: LeverSpec.model_validate(d) for d in data["levers"]}
    for s in specs.values():
        s.cause_set()  # KeyError on a cause that does not exist
        if s.safety != Safety.SAFE and not s.changes:
            raise ValueError(f"lever {s.id} is {s.safety.value}: its 'changes' must say why")
    return specs


@dataclass
class Observation:
    """What profiling the current state showed: the replay graph, its baseline schedule, the
    telemetry and the hardware entry the replay may read. ``priors`` overrides named priors by
    ``Prior.name`` (the analysis replays at the ends of their ranges; the loop never sets it)."""

    dag: ReplayDag
    baseline: Schedule
    telemetry: list[TelemetrySample]
    hw: GpuPeaks
    samples_per_iteration: int = 1
    priors: dict[str, float] = field(default_factory=dict)

    def prior(self, p: Prior) -> float:
        """The value of prior ``p`` for this replay (its stated value unless overridden)."""
        return self.priors.get(p.name, p.value)

    def per_sample_ns(self, schedule: Schedule, sample_factor: float = 1.0) -> float:
        """Replayed time per sample."""
        return schedule.makespan_ns / (
            self.dag.iterations * self.samples_per_iteration * sample_factor
        )


@dataclass
class Edit:
    """A replay transform's result: the edited graph and what it touched."""

    dag: ReplayDag
    rows: int  # device/host rows changed
    what: str  # one line: what the transform did, in the trace's terms
    prior_based: bool = False
    sample_factor: float = 1.0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Applicability:
    """Whether a lever applies, and why (or why not)."""

    ok: bool
    reason: str
