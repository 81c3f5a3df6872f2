"""The workload fingerprint's data (engine.optimizer.fingerprint): the frozen records a
fingerprint is made of, their JSON round trip, and manifests/fingerprint.json's parameters."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from engine.text import clean

FORMAT_VERSION = 1
#: the longest name kept whole; a longer one keeps its head and a hash of the whole
NAME_MAX = 512

Direction = Literal["same", "fewer", "more", "any"]
ShapeRule = Literal["same", "types", "any"]


# ------------------------------------------------------------------------------ parameters
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AllowedSpec(_Strict):
    """What one lever may change (manifests/fingerprint.json ``allowed``)."""

    what: str
    classes: tuple[str, ...] = ()
    operators: bool = False
    shapes: ShapeRule = "same"
    dtypes: bool = False
    launches: Direction = "same"
    graph_launches: Direction = "same"
    syncs: Direction = "same"
    copies: Direction = "same"
    memsets: Direction = "same"
    collectives: Direction = "same"


class FingerprintParams(_Strict):
    """manifests/fingerprint.json, validated (every number's reason is beside it there)."""

    threshold: float = Field(gt=0, lt=1)
    weights: dict[str, float]
    time_weight: float = Field(ge=0, lt=1)
    time_tolerance: float = Field(ge=0)
    period_min_match: float = Field(gt=0, le=1)
    period_min_steps: int = Field(ge=2)
    reason_floor: float = Field(ge=0, lt=1)
    activity_tolerance: float = Field(ge=0, lt=1)
    max_rows: int = Field(gt=0)
    trial_part_max: float = Field(gt=0, lt=1)
    ranks_threshold: float = Field(gt=0, lt=1)
    allowed: dict[str, AllowedSpec]


@lru_cache(maxsize=1)
def load_params() -> FingerprintParams:
    """manifests/fingerprint.json as a validated model."""
    raw = json.loads(resources.files("manifests").joinpath("fingerprint.json").read_text("utf-8"))
    return FingerprintParams.model_validate(
        {k: v for k, v in raw.items() if not k.startswith("_") and not k.endswith("_why")}
    )


# ------------------------------------------------------------------------------ the model
@dataclass(frozen=True)
class MixRow:
    """One kernel (operator) name or class: calls and time (ns) per step."""

    name: str
    per_step: float
    time_ns_per_step: float
    #: the kernel's class (Klass name); "" for an operator or a class row
    klass: str = ""


@dataclass(frozen=True)
class ShapeRow:
    """One distinct recorded (op, Input Dims, Input type) and its calls per step."""

    op: str
    dims: str
    types: str
    per_step: float


@dataclass(frozen=True)
class StepStructure:
    """How many steps the capture holds and how they were found."""

    count: int
    #: "ProfilerStep" (annotations), "repeating sequence" (the kernel/operator names repeat
    #: with a period), or "unknown" (figures are then per capture, count 1)
    how: str
    #: the period, in kernels (operators), where a repeating sequence was found
    period: int = 0


@dataclass(frozen=True)
class Activity:
    """Per step: host launch calls, graph launches, syncs; device copies, memsets,
    collectives. None: this capture cannot say (no host rows, a CPU-only trace)."""

    launches: float | None = None
    graph_launches: float | None = None
    syncs: float | None = None
    copies: float | None = None
    memsets: float | None = None
    collectives: float | None = None


@dataclass(frozen=True)
class ProcessGroups:
    """This capture's place in a distributed job, where the trace says it."""

    rank: int | None = None
    world_size: int | None = None
    #: each named process group's size, where the collectives' args say it
    groups: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Fingerprint:
    """A workload's identity per step (module docstring)."""

    #: "gpu": kernels from a device trace; "cpu": operators of a CPU-only PyTorch trace
    kind: str
    source: str
    #: the device's name (catalogue name where it knows it, else as reported); "" unknown
    device: str
    steps: StepStructure
    kernels: tuple[MixRow, ...] = ()
    classes: tuple[MixRow, ...] = ()
    operators: tuple[MixRow, ...] = ()
    shapes: tuple[ShapeRow, ...] = ()
    #: whether the profile recorded shapes at all (False: ``shapes`` is unknown, not empty)
    shapes_recorded: bool = False
    activity: Activity = field(default_factory=Activity)
    #: per step, by type: kernels (GPU: the DTYPES of their math) or tensor inputs (CPU)
    dtypes: tuple[tuple[str, float], ...] = ()
    process: ProcessGroups = field(default_factory=ProcessGroups)
    notes: tuple[str, ...] = ()
    version: int = FORMAT_VERSION

    # -- identity ------------------------------------------------------------------------
    def digest(self) -> str:
        """A short hash of what identifies the workload (names, calls per step to one decimal,
        shapes, dtypes, device, world size) — never of times: equal for two captures of one
        program on one device (with the same step structure), whatever the load."""
        ident = {
            "kind": self.kind,
            "device": self.device,
            "world": self.process.world_size,
            "kernels": sorted((r.name, round(r.per_step, 1)) for r in self.kernels),
            "operators": sorted((r.name, round(r.per_step, 1)) for r in self.operators),
            "shapes": sorted((r.op, r.dims, r.types) for r in self.shapes),
            "dtypes": sorted((d, round(n, 1)) for d, n in self.dtypes),
        }
        text = json.dumps(ident, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def summary_line(self) -> str:
        """One line for a report: ``fingerprint 3f2a…: 14 kernel names, 2.0 launches/step, …``
        (the device name cleaned: it comes from the trace)."""
        parts = []
        if self.kind == "gpu":
            nc = len(self.classes)
            parts.append(
                f"{len(self.kernels):,} kernel names in {nc} class{'es' if nc != 1 else ''}"
            )
        else:
            parts.append(f"{len(self.operators):,} operators (CPU-only trace: no kernels)")
        a = self.activity
        for label, v in (("launches", a.launches), ("copies", a.copies)):
            if v is not None:
                parts.append(f"{v:,.1f} {label}/step")
        parts.append(
            f"{len(self.shapes):,} recorded shapes" if self.shapes_recorded else "shapes unknown"
        )
        st = self.steps
        parts.append(
            f"{st.count} steps ({st.how})" if st.how != "unknown" else "steps unknown (per capture)"
        )
        if self.device:
            parts.append(clean(self.device, 60))
        if self.process.world_size:
            parts.append(f"rank {self.process.rank} of {self.process.world_size}")
        return f"fingerprint {self.digest()}: " + ", ".join(parts)

    # -- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (``from_dict`` reads it back equal)."""
        d = asdict(self)
        d["digest"] = self.digest()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fingerprint:
        """The fingerprint ``to_dict`` wrote; ValueError for data of another shape or version."""
        try:
            if int(d.get("version", 0)) != FORMAT_VERSION:
                raise ValueError(f"fingerprint version {d.get('version')!r}, not {FORMAT_VERSION}")
            rows = lambda key, kind: tuple(kind(**r) for r in d.get(key) or ())  # noqa: E731
            pg = dict(d.get("process") or {})
            pg["groups"] = tuple((str(g), int(n)) for g, n in pg.get("groups") or ())
            return cls(
                kind=str(d["kind"]),
                source=str(d.get("source", "")),
                device=str(d.get("device", "")),
                steps=StepStructure(**d["steps"]),
                kernels=rows("kernels", MixRow),
                classes=rows("classes", MixRow),
                operators=rows("operators", MixRow),
                shapes=rows("shapes", ShapeRow),
                shapes_recorded=bool(d.get("shapes_recorded", False)),
                activity=Activity(**(d.get("activity") or {})),
                dtypes=tuple((str(k), float(v)) for k, v in d.get("dtypes") or ()),
                process=ProcessGroups(**pg),
                notes=tuple(str(n) for n in d.get("notes") or ()),
                version=FORMAT_VERSION,
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a fingerprint: {e}") from None

    @classmethod
    def from_json(cls, text: str) -> Fingerprint:
        return cls.from_dict(json.loads(text))

    def hashed(self) -> Fingerprint:
        """The same fingerprint with every kernel, operator and op name and every shape replaced
        by a short hash: a few kB to send between processes (many ranks), comparable with other
        hashed fingerprints as the originals are, and holding no text from the trace."""

        def h(s: str) -> str:
            return "#" + hashlib.sha1(s.encode("utf-8", "replace")).hexdigest()[:12]

        return replace(
            self,
            kernels=tuple(replace(r, name=h(r.name)) for r in self.kernels),
            operators=tuple(replace(r, name=h(r.name)) for r in self.operators),
            shapes=tuple(ShapeRow(h(r.op), h(r.dims), h(r.types), r.per_step) for r in self.shapes),
            process=replace(self.process, groups=tuple((h(g), n) for g, n in self.process.groups)),
            source="",
            device=self.device,
        )


@dataclass(frozen=True)
class OperatorCalls:
    """What a CPU-only trace's reader hands over (engine.analyze.breakdown.cpu_trace's events, adapted by
    engine.analyze.fingerprints): one row per operator call, and the ProfilerStep spans."""

    names: Sequence[str]
    name: npt.NDArray[np.int32]
    start_ns: npt.NDArray[np.int64]
    #: each call's self time (its duration less what is nested directly inside it)
    self_ns: npt.NDArray[np.int64]
    steps: Sequence[tuple[int, int]] = ()
    source: str = ""
    rank: int | None = None
    world_size: int | None = None
