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

Names are kept as the trace wrote them (cut to ``NAME_MAX`` characters with a hash of the
whole, so identity survives the cut); the ``reasons`` lines clean every name they quote
(engine.text.clean) and may be shown as they are.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.optimizer.fingerprint_build import (
    fingerprint_of_cpu,
    fingerprint_of_trace,
    repeating_period,
)
from engine.optimizer.fingerprint_model import (
    FORMAT_VERSION,
    Activity,
    AllowedSpec,
    Direction,
    Fingerprint,
    FingerprintParams,
    MixRow,
    OperatorCalls,
    ProcessGroups,
    ShapeRow,
    StepStructure,
    load_params,
)
from engine.text import clean

__all__ = [
    "FORMAT_VERSION",
    "Activity",
    "AllowedChange",
    "AllowedSpec",
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
    "repeating_period",
]


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


#: ops whose shapes say most about a model: an example of a change is taken from these first
_TELLING = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear",
            "aten::convolution", "aten::_convolution", "aten::baddbmm",
            "aten::scaled_dot_product_attention")  # fmt: skip


def _dims(text: str) -> list[int] | None:
    """Every size of an Input Dims text, flattened (None: not a list of int lists)."""
    try:
        v = json.loads(text)
    except ValueError:
        return None
    out: list[int] = []
    for d in v if isinstance(v, list) else [None]:
        if not isinstance(d, list) or not all(isinstance(x, int) for x in d):
            return None
        out.extend(d)
    return out


def _shape_reason(a: Sequence[ShapeRow], b: Sequence[ShapeRow]) -> str:
    """What changed in the shapes, one line: an op's dims (or input types) before → after, and
    the one size that changed throughout where that is what happened ("one size 32 → 64 in 44
    ops": a batch size or a width — which, the shapes alone cannot say)."""
    ka = {(r.op, r.dims, r.types): r.per_step for r in a}
    kb = {(r.op, r.dims, r.types): r.per_step for r in b}
    gone = sorted((k for k in ka if k not in kb), key=lambda k: (-ka[k], k))
    new: dict[str, list[tuple[str, str, str]]] = {}
    for k in sorted((k for k in kb if k not in ka), key=lambda k: (-kb[k], k)):
        new.setdefault(k[0], []).append(k)
    pairs = []
    for k in gone:
        cands = new.get(k[0])
        if cands:  # the same op's new shape that differs from it in the fewest sizes
            xa = _dims(k[1])

            def apart(c: tuple[str, str, str], xa: list[int] | None = xa, ta: str = k[2]) -> int:
                xc = _dims(c[1])
                if xa is None or xc is None or len(xa) != len(xc):
                    return 1 << 30
                return sum(x != y for x, y in zip(xa, xc, strict=True)) + (c[2] != ta)

            c = min(cands, key=apart)
            cands.remove(c)
            pairs.append((k, c))
    if not pairs:
        return f"shapes: {len(gone)} recorded op shapes gone, {sum(map(len, new.values()))} new"
    sizes: dict[tuple[int, int], int] = {}
    for (_, da, _), (_, db, _) in pairs:
        xa, xb = _dims(da), _dims(db)
        if xa is not None and xb is not None and len(xa) == len(xb):
            for x, y in zip(xa, xb, strict=True):
                if x != y:
                    sizes[(x, y)] = sizes.get((x, y), 0) + 1
    # one size changed throughout: that change is 80 % of the sizes that differ or more (a
    # changed op paired with another call of the op, of other shapes, adds stray pairs)
    top = max(sizes, key=lambda k: (sizes[k], k)) if sizes else None
    one = top if top is not None and sizes[top] >= 0.8 * sum(sizes.values()) else None
    pick = sorted(pairs, key=lambda q: (q[0][0] not in _TELLING, -ka[q[0]]))[0]
    (op, da, ta), (_, db, tb) = pick
    more = f" ({len(pairs)} ops changed)" if len(pairs) > 1 else ""
    if da == db and ta != tb:
        return f"dtype: {clean(op, 40)} input type {clean(ta, 80)} → {clean(tb, 80)}{more}"
    body = f"{clean(op, 40)} input dims {clean(da, 80)} → {clean(db, 80)}"
    if ta != tb:
        body += f", types {clean(ta, 60)} → {clean(tb, 60)}"
    if one is not None:
        x, y = one
        return (
            f"shapes: size {x} → {y} throughout ({len(pairs)} ops changed; a batch size or a "
            f"width — the shapes alone cannot say which): {body}"
        )
    return f"shapes: {body}{more}"


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
        part("shapes", d, _shape_reason(a.shapes, b.shapes) if d else None)
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
    # each part is evidence on its own: 1 − Π(1 − d)^w — a part that changed is not outvoted
    # by the parts that did not (a changed batch size leaves the operator names alone)
    judged = {k: v for k, v in parts.items() if v is not None and k != "time"}
    kept = math.prod((1.0 - min(v, 1.0)) ** w.get(k, 1.0) for k, v in judged.items())
    value = min(1.0, 1.0 - kept + p.time_weight * (dt or 0.0))
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


#: the parts that say what runs, with the label their reason lines start with
_PART = {
    "kernels": "kernel mix",
    "operators": "operator mix",
    "classes": "class mix",
    "dtypes": "dtype mix",
}


def credit_trial(
    baseline: Fingerprint, trial: Fingerprint, allowed: AllowedChange | None = None
) -> TrialCredit:
    """Credit ``trial`` only when it ran ``baseline``'s workload: the distance with the lever's
    allowed change left out within the threshold, and what it allows moved only the way it may
    (``allowed`` None: nothing may change but times)."""
    allowed = allowed or AllowedChange("none", AllowedSpec(what="nothing but times"))
    d = _compare(baseline, trial, allowed.spec)
    lever = clean(allowed.lever, 40)
    # what runs — kernel, operator and class mix, arithmetic types — must hold still in a
    # trial beyond what the lever changes: a part past trial_part_max fails the trial even when
    # the whole stays within the threshold (renaming a fifth of the kernels is 0.13 overall)
    limit = load_params().trial_part_max
    moved = [
        f"{_PART[k]} moved {v:.2f} (a trial may move what its lever does not change by "
        f"{limit:g} at most)"
        for k, v in d.parts.items()
        if k in _PART and v is not None and v > limit
    ]
    credited = d.same and not moved
    if credited:
        reason = (
            f"same workload ({lever}: {allowed.what}): distance {d.value:.3f} ≤ {d.threshold:g}"
        )
    else:
        why = moved + [r for r in d.reasons if not d.same or r.split(":")[0] in _PART.values()]
        reason = f"not the baseline's workload ({lever} allows {allowed.what}): " + "; ".join(
            why[:3] or (f"distance {d.value:.3f} > {d.threshold:g}",)
        )
    if moved:
        d = dataclasses.replace(d, same=False, reasons=(*moved, *d.reasons))
    return TrialCredit(credited, d, allowed, reason)
