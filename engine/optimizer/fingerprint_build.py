"""Fingerprints of what the engine holds: a device ``Trace`` (any importer's, a live capture's)
and a CPU-only trace's operator calls (see engine.optimizer.fingerprint)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.optimizer.fingerprint_model import (
    NAME_MAX,
    Activity,
    Fingerprint,
    MixRow,
    OperatorCalls,
    ProcessGroups,
    ShapeRow,
    StepStructure,
    load_params,
)
from engine.trace.framework import framework_of
from engine.trace.kineto.op_shapes import OpShapes
from engine.trace.segments import DTYPES, Kind, Klass
from engine.trace.trace import ApiKind, Trace


def _name(s: str) -> str:
    if len(s) <= NAME_MAX:
        return s
    return s[: NAME_MAX - 14] + "…#" + hashlib.sha1(s.encode("utf-8", "replace")).hexdigest()[:12]


def repeating_period(
    seq: npt.NDArray[np.integer], min_match: float, min_steps: int
) -> tuple[int, int, int]:
    """Where a name sequence repeats: (period p, first, end) such that in seq[first:end] at
    least ``min_match`` of each window of p positions hold the name found p later, and the
    stretch holds ``min_steps`` periods or more; (0, 0, 0) when nothing repeats.

    Candidate periods are the commonest gaps between a name's consecutive occurrences (a name
    called once a step recurs one period later), so the search costs a few vector passes, not
    one per possible period. Of the candidates, the one whose stretch covers most of the
    sequence wins, the shortest among those within 5 % of it: a layer repeated within a step
    (a sub-period) covers only the forward pass, a multiple of the step no more than the step."""
    n = len(seq)
    if n < 2 * min_steps:
        return 0, 0, 0
    order = np.argsort(seq, kind="stable")
    same = seq[order][1:] == seq[order][:-1]
    gaps = (order[1:] - order[:-1])[same]
    if not len(gaps):
        return 0, 0, 0
    vals, freq = np.unique(gaps, return_counts=True)
    cands = vals[np.argsort(-freq, kind="stable")[:16]]
    best: list[tuple[int, int, int]] = []
    for p in sorted(int(c) for c in cands if 0 < c <= n // min_steps):
        eq = (seq[p:] == seq[:-p]).astype(np.int64)
        if len(eq) < p:
            continue
        c = np.concatenate(([0], np.cumsum(eq)))
        good = (c[p:] - c[:-p]) >= min_match * p  # window i: eq[i : i + p]
        if not good.any():
            continue
        # the longest run of good windows
        edges = np.diff(np.concatenate(([0], good.astype(np.int8), [0])))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        k = int(np.argmax(ends - starts))
        first, last = int(starts[k]), int(ends[k]) - 1 + 2 * p  # seq[first:last] repeats
        steps = (min(last, n) - first) // p
        if steps >= min_steps:
            best.append((p, first, first + steps * p))
    if not best:
        return 0, 0, 0
    top = max(e - f for _, f, e in best)
    return min((b for b in best if b[2] - b[1] >= 0.95 * top), key=lambda b: b[0])


@dataclass(frozen=True)
class _Steps:
    """Where each step starts and ends (ns, one clock), the steps found and how."""

    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    structure: StepStructure

    @property
    def n(self) -> int:
        return len(self.starts)

    def of(self, t: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each time's step (0..n-1), -1 outside every step."""
        k = np.searchsorted(self.starts, t, side="right") - 1
        ok = (k >= 0) & (t <= self.ends[np.maximum(k, 0)])
        return np.where(ok, k, -1)

    @classmethod
    def whole(cls, t: npt.NDArray[np.int64]) -> _Steps:
        """No steps found: the capture is one 'step' (figures per capture)."""
        lo, hi = (int(t.min()), int(t.max())) if len(t) else (0, 0)
        return cls(np.array([lo]), np.array([hi]), StepStructure(1, "unknown"))


#: a steps x names table larger than this is summarised by the mean, not the median (each cell
#: 8 bytes: 32 MiB)
_MEDIAN_CELLS = 1 << 22


def per_step(
    ids: npt.NDArray[np.integer],
    step: npt.NDArray[np.int64],
    n_steps: int,
    weights: npt.NDArray[np.floating] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(keys, calls per step, weight per step) of the rows in a step (``step`` >= 0): the
    **median over the steps** of each key's count and summed weight. The median, not the
    mean: a capture's first step often carries one-off work (optimizer state, autotuning) and
    its last one loses the kernels still running when the profiler stopped, and neither says
    what the program does per step — a longer capture of the same program then still matches."""
    inside = step >= 0
    ids, step = ids[inside], step[inside]
    w = (weights[inside] if weights is not None else np.ones(len(ids))).astype(np.float64)
    if not len(ids):
        z = np.zeros(0)
        return np.zeros(0, np.int64), z, z
    if ids.min() >= 0 and ids.max() < max(1 << 16, 2 * len(ids)):  # (small ids: no sort)
        present = np.bincount(ids) > 0
        keys = np.flatnonzero(present)
        inv = (np.cumsum(present) - 1)[ids]
    else:
        keys, inv = np.unique(ids, return_inverse=True)
        inv = inv.reshape(-1)
    k = len(keys)
    if n_steps * k > _MEDIAN_CELLS or n_steps <= 2:  # two steps: the median is the mean
        calls = np.bincount(inv, minlength=k) / n_steps
        time = np.bincount(inv, weights=w, minlength=k) / n_steps
        return keys.astype(np.int64), calls.astype(np.float64), time
    cell = step * k + inv
    table = np.bincount(cell, minlength=n_steps * k).reshape(n_steps, k)
    spent = np.bincount(cell, weights=w, minlength=n_steps * k).reshape(n_steps, k)
    return keys.astype(np.int64), np.median(table, axis=0), np.median(spent, axis=0)


def _count(mask: npt.NDArray[np.bool_], step: npt.NDArray[np.int64], n: int) -> float:
    """The median count per step of the rows ``mask`` selects."""
    _, c, _ = per_step(np.zeros(int(mask.sum()), np.int64), step[mask], n)
    return float(c[0]) if len(c) else 0.0


def _mix(
    ids: np.ndarray,
    step: np.ndarray,
    n: int,
    weights: np.ndarray,
    names: Sequence[str],
    limit: int,
) -> tuple[list[tuple[int, float, float]], int]:
    """(name id, calls per step, time per step) per name present in a typical step, most calls
    first, at most ``limit``; and how many names were cut."""
    keys, calls, time = per_step(ids, step, n, weights)
    used = np.flatnonzero(calls > 0)
    order = used[
        np.lexsort((np.array([names[int(keys[u])] for u in used], dtype=object), -calls[used]))
    ]
    rows = [(int(keys[i]), float(calls[i]), float(time[i])) for i in order[:limit]]
    return rows, max(0, len(order) - limit)


def _device(trace: Trace) -> str:
    """The device the rows ran on (most GPU time: the analysis's choice, engine.planner.devices)
    by its catalogue name, else as the trace reports it; '' unknown."""
    from engine.planner.devices import main_device

    dev = main_device(trace)
    if dev is None or dev.props is None:
        return ""
    reported = str(dev.props.get("name") or "")
    if not reported:
        return ""
    found = dev.found
    return found.entry.name if found and found.kind == "catalogue" and found.entry else reported


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
    shapes: OpShapes | None, steps: _Steps, limit: int
) -> tuple[tuple[ShapeRow, ...], bool, list[tuple[str, float]], list[str]]:
    """The shape rows (calls per step, by the median over the steps), whether shapes were
    recorded, the tensor input types per step (the CPU's dtype mix), and notes."""
    notes: list[str] = []
    if shapes is None or not shapes.recorded:
        return (), False, [], notes
    keys, calls, _ = per_step(shapes.group, steps.of(shapes.start_ns), steps.n)
    used = np.flatnonzero(calls > 0)
    order = used[
        np.lexsort((np.array([shapes.ops[int(keys[u])] for u in used], dtype=object), -calls[used]))
    ]
    rows = tuple(
        ShapeRow(
            _name(shapes.ops[g]), _name(shapes.dims[g]), _name(shapes.types[g]), float(calls[i])
        )
        for i, g in ((i, int(keys[i])) for i in order[:limit].tolist())
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
            tl = json.loads(shapes.types[int(keys[i])])
        except ValueError:
            continue
        for t in tl if isinstance(tl, list) else ():
            if isinstance(t, str) and t in _CPP_TYPES:
                types[_CPP_TYPES[t]] = types.get(_CPP_TYPES[t], 0.0) + float(calls[i])
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


_NO_SHAPES = "shapes unknown: not recorded (torch.profiler(record_shapes=True)) or not read"
_NO_SHAPES_OTHER = "shapes unknown: this trace records no operator shapes"


def _spans(spans: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    arr = np.array(sorted((int(a), int(b)) for a, b in spans), np.int64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def _steps_of(
    spans: Sequence[tuple[int, int]],
    t: npt.NDArray[np.int64],
    seq_t: npt.NDArray[np.int64],
    seq: npt.NDArray[np.integer],
    what: str,
    notes: list[str],
) -> _Steps:
    """The steps: the ProfilerStep spans when rows ``t`` fall in them; else where the name
    sequence ``seq`` (at times ``seq_t``, in order) repeats; else the whole capture."""
    p = load_params()
    if spans:
        starts, ends = _spans(spans)
        st = _Steps(starts, ends, StepStructure(len(starts), "ProfilerStep"))
        if (st.of(t) >= 0).any():
            return st
        notes.append(f"the ProfilerStep ranges hold no {what}: steps from the {what} sequence")
    period, first, end = repeating_period(seq, p.period_min_match, p.period_min_steps)
    if period:
        starts = seq_t[first:end:period].astype(np.int64)
        ends = np.append(starts[1:] - 1, seq_t[end - 1]).astype(np.int64)
        return _Steps(starts, ends, StepStructure(len(starts), "repeating sequence", period))
    notes.append(
        f"no steps found (no ProfilerStep, no repeating {what} sequence): every figure is per "
        "capture"
    )
    return _Steps.whole(t)


def fingerprint_of_trace(trace: Trace, shapes: OpShapes | None = None) -> Fingerprint:
    """The fingerprint of a device trace (any importer's or a live capture's ``Trace``).
    ``shapes``: the op shapes recorded with it; None: those the Kineto importer kept
    (``device_properties["op_shapes"]``: the ops whose work it derives), else unknown (said
    so: an Nsight export or a CUPTI capture records none)."""
    p = load_params()
    seg, props, host = trace.segments, trace.device_properties, trace.host
    if shapes is None and isinstance(props.get("op_shapes"), OpShapes):
        shapes = props["op_shapes"]
    names = trace.names.names()
    notes: list[str] = []
    # each device row's time on the host clock (its launch call) where linked: a GPU running
    # behind the CPU runs a step's last kernels after the host's step has closed
    when = seg.start_ns.astype(np.int64, copy=True)
    hrow = host.rows_of(seg.correlation) if len(host) and len(seg) else np.full(len(seg), -1)
    linked = hrow >= 0
    when[linked] = host.api_start_ns[hrow[linked]]
    # device rows running when the capture began, launched before it (the GPU runs behind the
    # host): no launch call of theirs is in the trace, and their correlation ids — which CUPTI
    # hands out in increasing order — come before every host row's. They belong to no step
    early = np.zeros(len(seg), bool)
    hc = host.correlation[host.correlation > 0] if len(host) else host.correlation
    if len(hc):
        early = ~linked & (seg.correlation > 0) & (seg.correlation < hc.min())
        if early.any():
            notes.append(
                f"{int(early.sum()):,} device rows launched before the capture began (running "
                "when it started): not counted"
            )
    kern = seg.kind == Kind.KERNEL
    ki = np.flatnonzero(kern)
    ki = ki[np.argsort(when[ki], kind="stable")]
    spans = [(int(a), int(b)) for a, b in props.get("profiler_steps") or []]
    steps = _steps_of(spans, when, when[ki], seg.name[ki], "kernel", notes)
    n = steps.n
    step = np.where(early, -1, steps.of(when))
    dur = seg.duration_ns
    kstep = step[ki]
    mix, cut = _mix(seg.name[ki], kstep, n, dur[ki], names, p.max_rows)
    if cut:
        notes.append(f"{cut:,} rarer kernel names left out (max_rows {p.max_rows})")
    klass_of = np.zeros(len(names) + 1, np.uint8)
    klass_of[seg.name[ki]] = seg.klass[ki]
    kernels = tuple(MixRow(_name(names[i]), c, t, Klass(klass_of[i]).name) for i, c, t in mix)
    cmix, _ = _mix(seg.klass[ki], kstep, n, dur[ki], [k.name for k in Klass], len(Klass))
    classes = tuple(MixRow(Klass(i).name, c, t) for i, c, t in cmix)
    comm = (seg.kind == Kind.COMM) | (kern & (seg.klass == Klass.COMM))
    has_host = bool(len(host))
    hstep = steps.of(host.api_start_ns) if has_host else np.zeros(0, np.int64)
    api = host.api

    def host_count(mask: np.ndarray) -> float | None:
        return _count(mask, hstep, n) if has_host else None

    activity = Activity(
        launches=host_count(np.isin(api, (ApiKind.LAUNCH, ApiKind.GRAPH_NODE))),
        graph_launches=host_count(api == ApiKind.GRAPH_LAUNCH),
        syncs=host_count(api == ApiKind.SYNC),
        copies=_count(seg.kind == Kind.MEMCPY, step, n),
        memsets=_count(seg.kind == Kind.MEMSET, step, n),
        collectives=_count(comm, step, n),
    )
    if not has_host:
        notes.append("no host rows: launches, graph launches and syncs per step unknown")
    codes = seg.dtype[ki]
    typed = codes > 0
    dkeys, dcalls, _ = per_step(codes[typed], kstep[typed], n)
    dtypes = tuple((DTYPES[int(c)], float(x)) for c, x in zip(dkeys, dcalls, strict=True) if x)
    if not typed.any() and len(ki):
        notes.append(
            "no kernel's arithmetic type is known (derived from recorded matmul, convolution "
            "and elementwise shapes): dtype mix unknown"
        )
    shape_rows, recorded, _types, shape_notes = _shape_rows(shapes, steps, p.max_rows)
    if not recorded:  # where to get them: PyTorch's profiler records them, a C/MPI program's
        pytorch = framework_of(trace) == "PyTorch"  # Nsight export has none to record
        notes += [*shape_notes, _NO_SHAPES if pytorch else _NO_SHAPES_OTHER]
    else:
        notes += shape_notes
    return Fingerprint(
        kind="gpu",
        source=trace.source,
        device=_device(trace),
        steps=steps.structure,
        kernels=kernels,
        classes=classes,
        shapes=shape_rows,
        shapes_recorded=recorded,
        activity=activity,
        dtypes=dtypes,
        process=_process(props),
        notes=tuple(notes),
    )


def fingerprint_of_cpu(ops: OperatorCalls, shapes: OpShapes | None = None) -> Fingerprint:
    """The fingerprint of a CPU-only PyTorch trace: the operator mix (calls and self time per
    step), shapes and input types where recorded; no kernels (said so)."""
    p = load_params()
    notes = ["a CPU-only trace: the mix is by operator (aten::…), no kernels"]
    order = np.argsort(ops.start_ns, kind="stable")
    name, start, self_ns = ops.name[order], ops.start_ns[order], ops.self_ns[order]
    steps = _steps_of(list(ops.steps), start, start, name, "operator", notes)
    mix, cut = _mix(name, steps.of(start), steps.n, self_ns, ops.names, p.max_rows)
    if cut:
        notes.append(f"{cut:,} rarer operator names left out (max_rows {p.max_rows})")
    shape_rows, recorded, types, shape_notes = _shape_rows(shapes, steps, p.max_rows)
    notes += shape_notes if recorded else [*shape_notes, _NO_SHAPES]
    return Fingerprint(
        kind="cpu",
        source=ops.source,
        device="",
        steps=steps.structure,
        operators=tuple(MixRow(_name(ops.names[i]), c, t) for i, c, t in mix),
        shapes=shape_rows,
        shapes_recorded=recorded,
        activity=Activity(),
        dtypes=tuple(types),
        process=ProcessGroups(ops.rank, ops.world_size),
        notes=tuple(notes),
    )
