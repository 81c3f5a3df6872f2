"""The workload fingerprint: what a program *is*, per step — so that two captures can be told the
same workload or not (a trial credited only for the program the baseline ran; ranks of one job;
``gitm-tui diff``'s verdict).

A ``Fingerprint`` holds, per step (so a longer capture of the same program still matches):

* the **kernel mix** by name and by class (calls and device time per step) — on a GPU trace;
  on a CPU-only PyTorch trace the **operator mix** (``aten::…`` calls and self time per step)
  and no kernels, said so in its notes;
* the **shapes** where the profile recorded them (``record_shapes=True``: each distinct op,
  ``Input Dims`` and ``Input type``, calls per step; engine.trace.kineto.op_shapes);
* **launches, graph launches, syncs, copies, memsets and collectives** per step;
* the **arithmetic types** (kernels per step by dtype; on the CPU the ops' tensor input types);
* the **step structure**: how many steps and how they were found — ``ProfilerStep`` ranges, a
  repeating kernel (operator) sequence, or unknown (then every figure is per capture);
* the **device** (the hardware catalogue's name where it knows the trace's device, else the
  name the trace reports) and the **process groups** (rank, world size, each named group's
  size where Kineto's ``distributedInfo`` and the NCCL kernels' args say them).

``distance(a, b)`` is a value in [0, 1] with a threshold from manifests/fingerprint.json: a
different device, world size or kind of trace is 1 outright; otherwise the weighted mean of the
structural parts both sides can judge (kernels, operators, shapes, dtypes, activity, classes;
counts per step by weighted Jaccard: 1 − Σmin/Σmax), plus at most ``time_weight`` for the time
per step. **Counts, names and shapes weigh above times** because times move with machine load
— the same program on a busy machine is slower, not another program — while a changed batch
size, model or dtype changes shapes, names or counts whatever the load. A part one side cannot
judge (no shapes recorded, no launches in a CPU trace) is left out and named ``unknown``, never
guessed.

``credit_trial(baseline, trial, allowed)`` compares a trial with its baseline leaving out what
the lever is meant to change (``AllowedChange``, per lever id in manifests/fingerprint.json;
``allowed_change_for``): the trial is credited only when the rest is the same workload and
what was allowed moved the way it may (fewer launches for CUDA graphs …).

Names are kept as the trace wrote them (cut to ``_NAME_MAX`` characters with a hash of the
whole, so identity survives the cut); the ``reasons`` lines clean every name they quote
(engine.text.clean) and may be shown as they are.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from engine.text import clean
from engine.trace.kineto.op_shapes import OpShapes
from engine.trace.segments import DTYPES, Kind, Klass
from engine.trace.trace import ApiKind, Trace

__all__ = [
    "FORMAT_VERSION",
    "Activity",
    "AllowedChange",
    "Fingerprint",
    "FingerprintDistance",
    "FingerprintParams",
    "MixRow",
    "OperatorCalls",
    "ProcessGroups",
    "ShapeRow",
    "StepStructure",
    "TrialCredit",
    "allowed_change_for",
    "credit_trial",
    "distance",
    "fingerprint_of_cpu",
    "fingerprint_of_trace",
    "load_params",
]

FORMAT_VERSION = 1
#: the longest name kept whole; a longer one keeps its head and a hash of the whole
_NAME_MAX = 512

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
            parts.append(f"{len(self.kernels):,} kernel names in {len(self.classes)} classes")
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


# ------------------------------------------------------------------------------ building
def _name(s: str) -> str:
    if len(s) <= _NAME_MAX:
        return s
    return s[: _NAME_MAX - 14] + "…#" + hashlib.sha1(s.encode("utf-8", "replace")).hexdigest()[:12]


def _merged_spans(spans: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end] spans, as sorted disjoint arrays."""
    if not spans:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    arr = np.array(sorted((int(a), int(b)) for a, b in spans), np.int64)
    s, e = arr[:, 0], np.maximum.accumulate(arr[:, 1])
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > e[:-1]
    idx = np.flatnonzero(new)
    last = np.append(idx[1:] - 1, len(s) - 1)
    return s[idx], e[last]


def _inside(t: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """Which times fall in one of the disjoint spans [ws, we]."""
    if not len(ws):
        return np.zeros(len(t), bool)
    k = np.searchsorted(ws, t, side="right") - 1
    return (k >= 0) & (t <= we[np.maximum(k, 0)])


def repeating_period(seq: npt.NDArray[np.integer], min_match: float, min_steps: int) -> int:
    """The shortest period p of a name sequence such that at least ``min_match`` of its
    positions hold the name found p later and it repeats ``min_steps`` times or more; 0 when
    none does. Candidates are len/c for the count c of each name seen at least ``min_steps``
    times (a name launched once a step occurs once per period), so the search costs a few
    vector comparisons, not one per possible period."""
    n = len(seq)
    if n < 2 * min_steps:
        return 0
    _, counts = np.unique(seq, return_counts=True)
    cands = sorted({n // int(c) for c in np.unique(counts) if c >= min_steps and n // int(c) >= 1})
    for p in cands:
        if n // p < min_steps:
            continue
        match = float(np.mean(seq[p:] == seq[:-p]))
        if match >= min_match:
            return p
    return 0


def _mix(
    ids: np.ndarray, dur: np.ndarray, names: Sequence[str], steps: int, limit: int
) -> tuple[list[tuple[int, float, float]], int]:
    """(name id, calls per step, time per step) per name, most calls first, at most ``limit``;
    and how many names were cut."""
    if not len(ids):
        return [], 0
    uniq, inv = np.unique(ids, return_inverse=True)
    calls = np.bincount(inv.reshape(-1), minlength=len(uniq))
    time = np.bincount(inv.reshape(-1), weights=dur.astype(np.float64), minlength=len(uniq))
    order = np.lexsort((np.array([names[int(u)] for u in uniq], dtype=object), -calls))
    rows = [(int(uniq[i]), float(calls[i]) / steps, float(time[i]) / steps) for i in order[:limit]]
    return rows, max(0, len(uniq) - limit)


def _device(props: Mapping[str, Any]) -> str:
    devices = props.get("devices") or []
    dev = devices[0] if devices and isinstance(devices[0], dict) else {}
    reported = str(dev.get("name") or "")
    if not reported:
        return ""
    from engine.planner.catalogue import detect

    found = detect([dev])
    return found.name if found is not None else reported


def _process(props: Mapping[str, Any]) -> ProcessGroups:
    rank, world = props.get("rank"), props.get("world_size")
    groups: dict[str, int] = {}
    for item in props.get("collectives") or []:
        meta = item[2] if isinstance(item, (tuple, list)) and len(item) == 3 else None
        if not isinstance(meta, dict):
            continue
        g = meta.get("group")
        size = meta.get("group_size")
        if isinstance(g, str) and g and g not in groups:
            ranks = meta.get("group_ranks")
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                groups[g] = size
            elif isinstance(ranks, (list, tuple)) and ranks:
                groups[g] = len(ranks)
    return ProcessGroups(
        rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
        world if isinstance(world, int) and not isinstance(world, bool) else None,
        tuple(sorted((_name(g), n) for g, n in groups.items())[:64]),
    )


def _shape_rows(
    shapes: OpShapes | None, ws: np.ndarray, we: np.ndarray, steps: int, limit: int
) -> tuple[tuple[ShapeRow, ...], bool, list[tuple[str, float]], list[str]]:
    """The shape rows (calls per step; only calls within the steps where steps are known), whether
    shapes were recorded, the CPU dtype mix from their input types, and notes."""
    notes: list[str] = []
    if shapes is None or not shapes.recorded:
        return (), False, [], notes
    keep = _inside(shapes.start_ns, ws, we) if len(ws) else np.ones(len(shapes.group), bool)
    g = shapes.group[keep]
    if not len(g):
        return (), True, [], notes
    counts = np.bincount(g, minlength=len(shapes.ops))
    used = np.flatnonzero(counts)
    order = used[np.lexsort((np.array([shapes.ops[i] for i in used], dtype=object), -counts[used]))]
    rows = tuple(
        ShapeRow(
            _name(shapes.ops[i]),
            _name(shapes.dims[i]),
            _name(shapes.types[i]),
            float(counts[i]) / steps,
        )
        for i in order[:limit].tolist()
    )
    if len(order) > limit:
        notes.append(f"{len(order) - limit:,} rarer recorded shapes left out (max_rows {limit})")
    if shapes.dropped:
        notes.append(
            f"{shapes.dropped:,} op calls with shapes past the reader's distinct-group cap"
        )
    types: dict[str, float] = {}
    for i in used.tolist():
        try:
            tl = json.loads(shapes.types[i])
        except ValueError:
            continue
        for t in tl if isinstance(tl, list) else ():
            if isinstance(t, str) and t in _CPP_TYPES:
                types[_CPP_TYPES[t]] = types.get(_CPP_TYPES[t], 0.0) + float(counts[i]) / steps
    return rows, True, sorted(types.items()), notes


#: C++ tensor type names (``Input type``) → the DTYPES names the GPU's kernels are typed by
_CPP_TYPES = {
    "float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "signed char": "int8",
    "long int": "int64",
    "int": "int32",
}


def fingerprint_of_trace(trace: Trace, shapes: OpShapes | None = None) -> Fingerprint:
    """The fingerprint of a device trace (any importer's or a live capture's ``Trace``).
    ``shapes``: the op shapes recorded with it (engine.trace.kineto.op_shapes.read_op_shapes
    of the same file; None: shapes unknown, said so)."""
    p = load_params()
    seg, props = trace.segments, trace.device_properties
    names = trace.names.names()
    notes: list[str] = []
    host = trace.host
    # each device row's time on the host clock (its launch call), where linked
    when = seg.start_ns.astype(np.int64, copy=True)
    hrow = host.rows_of(seg.correlation) if len(host) and len(seg) else np.full(len(seg), -1)
    linked = hrow >= 0
    when[linked] = host.api_start_ns[hrow[linked]]
    spans = [(int(a), int(b)) for a, b in props.get("profiler_steps") or []]
    ws, we = _merged_spans(spans)
    kern = seg.kind == Kind.KERNEL
    rows = np.ones(len(seg), bool)
    host_rows = np.ones(len(host), bool)
    period = 0
    if spans and _inside(when, ws, we).any():
        steps = StepStructure(len(spans), "ProfilerStep")
        rows = _inside(when, ws, we)
        host_rows = _inside(host.api_start_ns, ws, we)
    else:
        if spans:
            notes.append("ProfilerStep ranges hold no device row: steps from the kernel sequence")
        ws, we = np.zeros(0, np.int64), np.zeros(0, np.int64)
        ki = np.flatnonzero(kern)
        seq = seg.name[ki[np.argsort(seg.start_ns[ki], kind="stable")]]
        period = repeating_period(seq, p.period_min_match, p.period_min_steps)
        if period:
            steps = StepStructure(len(seq) // period, "repeating sequence", period)
        else:
            steps = StepStructure(1, "unknown")
            notes.append(
                "no steps found (no ProfilerStep, no repeating kernel sequence): "
                "every figure is per capture"
            )
    n = max(steps.count, 1)
    dur = seg.duration_ns
    krows = np.flatnonzero(rows & kern)
    mix, cut = _mix(seg.name[krows], dur[krows], names, n, p.max_rows)
    if cut:
        notes.append(f"{cut:,} rarer kernel names left out (max_rows {p.max_rows})")
    klass_of = {
        int(i): Klass(int(k)).name for i, k in zip(seg.name[krows], seg.klass[krows], strict=True)
    }
    kernels = tuple(MixRow(_name(names[i]), c, t, klass_of.get(i, "")) for i, c, t in mix)
    cmix, _ = _mix(
        seg.klass[krows].astype(np.int64), dur[krows], [k.name for k in Klass], n, len(Klass)
    )
    classes = tuple(MixRow(Klass(i).name, c, t) for i, c, t in cmix)
    comm = rows & ((seg.kind == Kind.COMM) | (kern & (seg.klass == Klass.COMM)))
    api = host.api[host_rows] if len(host) else np.zeros(0, np.uint8)
    has_host = bool(len(host))
    activity = Activity(
        launches=float(np.isin(api, (ApiKind.LAUNCH, ApiKind.GRAPH_NODE)).sum()) / n
        if has_host
        else None,
        graph_launches=float((api == ApiKind.GRAPH_LAUNCH).sum()) / n if has_host else None,
        syncs=float((api == ApiKind.SYNC).sum()) / n if has_host else None,
        copies=float((rows & (seg.kind == Kind.MEMCPY)).sum()) / n,
        memsets=float((rows & (seg.kind == Kind.MEMSET)).sum()) / n,
        collectives=float(comm.sum()) / n,
    )
    if not has_host:
        notes.append("no host rows: launches, graph launches and syncs per step unknown")
    codes = seg.dtype[krows]
    known = codes[codes > 0]
    dtypes = tuple(
        (DTYPES[int(c)], float(k) / n)
        for c, k in zip(*np.unique(known, return_counts=True), strict=True)
    )
    if not len(known) and len(krows):
        notes.append("no kernel's arithmetic type is known (no recorded shapes): dtype mix unknown")
    shape_rows, recorded, _cpu_types, shape_notes = _shape_rows(shapes, ws, we, n, p.max_rows)
    notes += shape_notes
    if not recorded:
        notes.append(
            "shapes unknown: not recorded (torch.profiler(record_shapes=True)) or not read"
        )
    return Fingerprint(
        kind="gpu",
        source=trace.source,
        device=_device(props),
        steps=steps,
        kernels=kernels,
        classes=classes,
        shapes=shape_rows,
        shapes_recorded=recorded,
        activity=activity,
        dtypes=dtypes,
        process=_process(props),
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class OperatorCalls:
    """What a CPU-only trace's reader hands over (engine.analyze.cpu_trace's events, adapted by
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


def fingerprint_of_cpu(ops: OperatorCalls, shapes: OpShapes | None = None) -> Fingerprint:
    """The fingerprint of a CPU-only PyTorch trace: the operator mix (calls and self time per
    step), shapes and input types where recorded; no kernels (said so)."""
    p = load_params()
    notes = ["a CPU-only trace: the mix is by operator (aten::…), no kernels"]
    order = np.argsort(ops.start_ns, kind="stable")
    name, start, self_ns = ops.name[order], ops.start_ns[order], ops.self_ns[order]
    ws, we = _merged_spans(list(ops.steps))
    if len(ops.steps) and _inside(start, ws, we).any():
        steps = StepStructure(len(ops.steps), "ProfilerStep")
        keep = _inside(start, ws, we)
        name, self_ns = name[keep], self_ns[keep]
    else:
        ws, we = np.zeros(0, np.int64), np.zeros(0, np.int64)
        period = repeating_period(name, p.period_min_match, p.period_min_steps)
        if period:
            steps = StepStructure(len(name) // period, "repeating sequence", period)
        else:
            steps = StepStructure(1, "unknown")
            notes.append(
                "no steps found (no ProfilerStep, no repeating operator sequence): "
                "every figure is per capture"
            )
    n = max(steps.count, 1)
    mix, cut = _mix(name, self_ns, ops.names, n, p.max_rows)
    if cut:
        notes.append(f"{cut:,} rarer operator names left out (max_rows {p.max_rows})")
    shape_rows, recorded, types, shape_notes = _shape_rows(shapes, ws, we, n, p.max_rows)
    notes += shape_notes
    if not recorded:
        notes.append(
            "shapes unknown: not recorded (torch.profiler(record_shapes=True)) or not read"
        )
    return Fingerprint(
        kind="cpu",
        source=ops.source,
        device="",
        steps=steps,
        operators=tuple(MixRow(_name(ops.names[i]), c, t) for i, c, t in mix),
        shapes=shape_rows,
        shapes_recorded=recorded,
        activity=Activity(),
        dtypes=tuple(types),
        process=ProcessGroups(ops.rank, ops.world_size),
        notes=tuple(notes),
    )


# ------------------------------------------------------------------------------ distance
@dataclass(frozen=True)
class FingerprintDistance:
    """How far two fingerprints are apart, and why."""

    value: float
    threshold: float
    same: bool
    #: what differs, most telling first, one line each (names cleaned)
    reasons: tuple[str, ...]
    #: each part's dissimilarity in [0,1]; None: not judged (one side cannot say)
    parts: dict[str, float | None]
    #: what could not be judged, and why
    unknown: tuple[str, ...] = ()

    def line(self) -> str:
        """The verdict in one line."""
        verdict = "same workload" if self.same else "another workload"
        why = f": {'; '.join(self.reasons[:3])}" if self.reasons and not self.same else ""
        return f"distance {self.value:.3f} (threshold {self.threshold:g}): {verdict}{why}"


def _wjac(a: Mapping[Any, float], b: Mapping[Any, float]) -> float:
    """1 − Σmin/Σmax over the union of keys (0: equal, 1: disjoint)."""
    keys = set(a) | set(b)
    hi = sum(max(a.get(k, 0.0), b.get(k, 0.0)) for k in keys)
    if hi <= 0:
        return 0.0
    lo = sum(min(a.get(k, 0.0), b.get(k, 0.0)) for k in keys)
    return 1.0 - lo / hi


def _num(x: float) -> str:
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"


def _mix_reasons(
    label: str, a: Mapping[str, float], b: Mapping[str, float], what: str, most: int = 3
) -> str:
    """'kernel mix: 12.0 ampere_sgemm… per step → 0; …' for the names that moved most."""
    keys = sorted(set(a) | set(b), key=lambda k: (-abs(a.get(k, 0.0) - b.get(k, 0.0)), k))
    moved = [k for k in keys if abs(a.get(k, 0.0) - b.get(k, 0.0)) > 1e-9]
    bits = [
        f"{_num(a.get(k, 0.0))} {clean(k, 90)} {what} → {_num(b.get(k, 0.0))}" for k in moved[:most]
    ]
    more = f" (and {len(moved) - most} more)" if len(moved) > most else ""
    return f"{label}: " + "; ".join(bits) + more


def _shape_reason(a: Sequence[ShapeRow], b: Sequence[ShapeRow], types_only: bool) -> str:
    """What changed in the shapes: per op the dims (types) before → after, called 'batch size'
    when every changed op differs in the first dimension of its first tensor only."""
    ka = {(r.op, r.dims, r.types): r.per_step for r in a}
    kb = {(r.op, r.dims, r.types): r.per_step for r in b}
    gone = [k for k in ka if k not in kb]
    new = [k for k in kb if k not in ka]
    by_op_new: dict[str, list[tuple[str, str, str]]] = {}
    for k in new:
        by_op_new.setdefault(k[0], []).append(k)
    pairs = []
    for k in sorted(gone, key=lambda k: -ka[k]):
        cands = by_op_new.get(k[0])
        if cands:
            pairs.append((k, cands.pop(0)))
    if not pairs:
        n_gone, n_new = len(gone), len(new)
        return f"shapes: {n_gone} recorded op shapes gone, {n_new} new"

    def lead_only(x: str, y: str) -> bool:
        try:
            dx, dy = json.loads(x), json.loads(y)
        except ValueError:
            return False
        if not (isinstance(dx, list) and isinstance(dy, list)) or len(dx) != len(dy) or not dx:
            return False
        tx = [d for d in dx if isinstance(d, list) and d]
        ty = [d for d in dy if isinstance(d, list) and d]
        if len(tx) != len(ty) or not tx or len(tx[0]) != len(ty[0]):
            return False
        return tx[0][0] != ty[0][0] and tx[0][1:] == ty[0][1:] and tx[1:] == ty[1:]

    (oa, da, ta), (_, db, tb) = pairs[0]
    if ta != tb and da == db:
        label = "dtype"
        body = f"{clean(oa, 40)} input type {clean(ta, 80)} → {clean(tb, 80)}"
    elif all(p[0][1] != p[1][1] and lead_only(p[0][1], p[1][1]) for p in pairs):
        label = "batch size"
        body = f"{clean(oa, 40)} input dims {clean(da, 80)} → {clean(db, 80)}"
    else:
        label = "shapes"
        body = f"{clean(oa, 40)} input dims {clean(da, 80)} → {clean(db, 80)}"
        if ta != tb:
            body += f", types {clean(ta, 60)} → {clean(tb, 60)}"
    more = f" ({len(pairs)} ops changed)" if len(pairs) > 1 else ""
    return f"{label}: {body}{more}"


def _pct(x: float | None) -> str:
    return "unknown" if x is None else _num(x)


def _compare(
    a: Fingerprint, b: Fingerprint, allowed: AllowedSpec | None, ranks: bool = False
) -> FingerprintDistance:
    p = load_params()
    w = p.weights
    parts: dict[str, float | None] = {}
    reasons: list[tuple[float, str]] = []
    unknown: list[str] = []
    hard: list[str] = []
    if a.kind != b.kind:
        hard.append(f"kind of trace: {a.kind} → {b.kind} (kernels against operators)")
    if a.device and b.device and a.device != b.device:
        hard.append(f"device {clean(a.device, 60)} → {clean(b.device, 60)}")
    elif not (a.device and b.device) and a.kind == b.kind == "gpu":
        unknown.append(
            "device: not said by " + ("both" if not (a.device or b.device) else "one side")
        )
    pa, pb = a.process, b.process
    if pa.world_size and pb.world_size and pa.world_size != pb.world_size:
        hard.append(f"world size {pa.world_size} → {pb.world_size}")
    ga, gb = dict(pa.groups), dict(pb.groups)
    for g in sorted(set(ga) & set(gb)):
        if ga[g] != gb[g]:
            hard.append(f"process group {clean(g, 24)!r} of size {ga[g]} → {gb[g]}")
            break
    free = set(allowed.classes) if allowed else set()

    def part(key: str, d: float | None, line: str | None) -> None:
        parts[key] = d
        if d is not None and line and d >= p.reason_floor:
            reasons.append((w.get(key, 1.0) * d, line))

    # kernels: by name, leaving out the classes a lever may change
    if a.kind == b.kind == "gpu":
        ka = {r.name: r.per_step for r in a.kernels if r.klass not in free}
        kb = {r.name: r.per_step for r in b.kernels if r.klass not in free}
        d = _wjac(ka, kb) if (ka or kb) else None
        part("kernels", d, _mix_reasons("kernel mix", ka, kb, "per step") if d else None)
        ca = {r.name: r.per_step for r in a.classes if r.name not in free}
        cb = {r.name: r.per_step for r in b.classes if r.name not in free}
        d = _wjac(ca, cb) if (ca or cb) else None
        part("classes", d, _mix_reasons("class mix", ca, cb, "kernels per step") if d else None)
    if a.kind == b.kind == "cpu" or (a.operators and b.operators):
        if allowed and allowed.operators:
            parts["operators"] = None
        else:
            oa = {r.name: r.per_step for r in a.operators}
            ob = {r.name: r.per_step for r in b.operators}
            d = _wjac(oa, ob) if (oa or ob) else None
            part(
                "operators",
                d,
                _mix_reasons("operator mix", oa, ob, "calls per step") if d else None,
            )
    # shapes
    rule = allowed.shapes if allowed else "same"
    if rule == "any" or ranks:
        parts["shapes"] = None
    elif a.shapes_recorded and b.shapes_recorded:
        if rule == "types":
            sa = _shape_map(a.shapes, with_types=False)
            sb = _shape_map(b.shapes, with_types=False)
        else:
            sa, sb = _shape_map(a.shapes, True), _shape_map(b.shapes, True)
        d = _wjac(sa, sb) if (sa or sb) else 0.0
        part("shapes", d, _shape_reason(a.shapes, b.shapes, rule == "types") if d else None)
    else:
        parts["shapes"] = None
        side = (
            "either"
            if not (a.shapes_recorded or b.shapes_recorded)
            else ("before" if not a.shapes_recorded else "after")
        )
        unknown.append(f"shapes: not recorded in {side} (torch.profiler(record_shapes=True))")
    # dtypes
    if allowed and allowed.dtypes:
        parts["dtypes"] = None
    elif a.dtypes and b.dtypes:
        da, db = dict(a.dtypes), dict(b.dtypes)
        d = _wjac(da, db)
        part("dtypes", d, _mix_reasons("dtype mix", da, db, "per step") if d else None)
    else:
        parts["dtypes"] = None
        if a.dtypes or b.dtypes:
            unknown.append("dtype mix: known on one side only")
    # activity per step, each field by the direction allowed
    diffs: list[float] = []
    act_lines: list[str] = []
    violations: list[str] = []
    for f in ("launches", "graph_launches", "syncs", "copies", "memsets", "collectives"):
        x, y = getattr(a.activity, f), getattr(b.activity, f)
        if x is None or y is None:
            continue
        rule_f: Direction = getattr(allowed, f) if allowed else "same"
        hi = max(x, y)
        rel = abs(x - y) / hi if hi > 0 else 0.0
        label = f.replace("_", " ")
        if (
            rule_f == "any"
            or (rule_f == "fewer" and y <= x * (1 + p.activity_tolerance))
            or (rule_f == "more" and y >= x * (1 - p.activity_tolerance))
        ):
            continue
        if rule_f in ("fewer", "more") and rel > p.activity_tolerance:
            violations.append(
                f"{label} per step {_num(x)} → {_num(y)}: {rule_f} allowed, not "
                f"{'more' if rule_f == 'fewer' else 'fewer'}"
            )
        diffs.append(rel)
        if rel >= p.reason_floor:
            act_lines.append(f"{label} {_num(x)}/step → {_num(y)}/step")
    d = float(np.mean(diffs)) if diffs else None
    part("activity", d, "; ".join(act_lines) if act_lines else None)
    # time per step: weighed low (load moves it), tolerance either way
    ta = sum(r.time_ns_per_step for r in (a.kernels or a.operators))
    tb = sum(r.time_ns_per_step for r in (b.kernels or b.operators))
    dt = None
    if ta > 0 and tb > 0 and a.kind == b.kind and not ranks:
        excess = abs(math.log(tb / ta)) - math.log1p(p.time_tolerance)
        dt = min(1.0, max(0.0, excess / math.log(2)))
    parts["time"] = dt
    # the value
    judged = {k: v for k, v in parts.items() if v is not None and k != "time"}
    total_w = sum(w.get(k, 1.0) for k in judged)
    soft = sum(w.get(k, 1.0) * v for k, v in judged.items()) / total_w if total_w else 0.0
    value = min(1.0, soft + p.time_weight * (dt or 0.0))
    if not judged:
        unknown.append("no structural part could be judged: the verdict rests on device and size")
    if hard:
        value = 1.0
    lines = hard + [ln for _, ln in sorted(reasons, key=lambda r: -r[0])]
    if dt:
        lines.append(
            f"time per step {ta / 1e6:,.3f} ms → {tb / 1e6:,.3f} ms (times move with load: "
            f"weighed {p.time_weight:g} at most)"
        )
    lines = violations + lines
    same = value <= p.threshold and not violations
    return FingerprintDistance(value, p.threshold, same, tuple(lines), parts, tuple(unknown))


def _shape_map(rows: Iterable[ShapeRow], with_types: bool) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for r in rows:
        k = (r.op, r.dims, r.types) if with_types else (r.op, r.dims)
        out[k] = out.get(k, 0.0) + r.per_step
    return out


def distance(a: Fingerprint, b: Fingerprint, across_ranks: bool = False) -> FingerprintDistance:
    """How far ``b`` is from ``a`` (module docstring): ``value`` in [0,1], ``same`` when it is
    at most the manifest's threshold, ``reasons`` naming what differs ("batch size: aten::mm
    input dims … → …", "kernel mix: …", "device A100 → H100", "world size 8 → 4").

    ``across_ranks``: ``a`` and ``b`` are two ranks' captures, asked whether they are one job:
    their shapes are left out (ranks of one job may hold different shards: tensor, pipeline or
    embedding parallelism — two ranks of a real 128-rank recommender job differ in a quarter of
    their op shapes) and so is their time (a straggler is slower, not another job)."""
    return _compare(a, b, None, ranks=across_ranks)


# ------------------------------------------------------------------------------ trials
@dataclass(frozen=True)
class AllowedChange:
    """What a lever is meant to change in the fingerprint (manifests/fingerprint.json)."""

    lever: str
    spec: AllowedSpec

    @property
    def what(self) -> str:
        return self.spec.what


@dataclass(frozen=True)
class TrialCredit:
    """Whether a trial ran the baseline's workload, allowing the lever's own change."""

    credited: bool
    #: the distance with the allowed change left out
    distance: FingerprintDistance
    allowed: AllowedChange
    #: one line: why credited or not
    reason: str


def allowed_change_for(lever: str | Any) -> AllowedChange:
    """What lever ``lever`` (an id, or an object with ``.id``: a library or torch lever) may
    change; a lever the manifest does not list may change nothing but times."""
    lever_id = lever if isinstance(lever, str) else str(getattr(lever, "id", lever))
    spec = load_params().allowed.get(lever_id)
    if spec is None:
        spec = AllowedSpec(what="a lever not in the fingerprint manifest: only times may change")
    return AllowedChange(lever_id, spec)


def credit_trial(
    baseline: Fingerprint, trial: Fingerprint, allowed: AllowedChange | None = None
) -> TrialCredit:
    """Credit ``trial`` only when it ran ``baseline``'s workload: the distance with the lever's
    allowed change left out within the threshold, and what it allows moved only the way it may
    (``allowed`` None: nothing may change but times)."""
    allowed = allowed or AllowedChange("none", AllowedSpec(what="nothing but times"))
    d = _compare(baseline, trial, allowed.spec)
    lever = clean(allowed.lever, 40)
    if d.same:
        reason = (
            f"same workload ({lever}: {allowed.what}): distance {d.value:.3f} ≤ {d.threshold:g}"
        )
    else:
        reason = f"not the baseline's workload ({lever} allows {allowed.what}): " + "; ".join(
            d.reasons[:3] or (f"distance {d.value:.3f} > {d.threshold:g}",)
        )
    return TrialCredit(d.same, d, allowed, reason)
