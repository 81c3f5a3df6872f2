"""What the program already does, seen in the trace, so that no lever takes credit for it:
kernels launched from CUDA graphs, kernels a compiler already fused, matmuls already in a
reduced-precision type. Each finding names its evidence and the levers that leave that share
alone (their transforms target only the rest: eager launches, unfused elementwise kernels,
FP32 matmuls).

Precision is read by the one function the precision levers read (engine.trace.precision:
the launching op's recorded input type first, then the kernel name's type tokens, else
unknown), so "already in use" and ``tf32_matmul`` / ``bf16_autocast`` cannot disagree: a row
counted here as TF32 or below is never a source of ``tf32_matmul``, a row at 16 bits or below
never one of ``bf16_autocast``."""

from __future__ import annotations

import functools
import re
from collections import Counter

import numpy as np

from engine.analyze.breakdown.model import InUse
from engine.levers.library import LEVERS
from engine.schedule.dag import ReplayDag
from engine.trace.precision import REDUCED, Basis, at_or_below, row_precisions
from engine.trace.segments import Kind, Klass
from engine.trace.trace import ApiKind, Trace

#: kernels a compiler generated already fused: TorchInductor's Triton kernels
#: (triton_poi_fused_…, triton_red_fused_…, triton_per_fused_…), other Triton kernels, and
#: kernels whose name says fused (apex / fused optimizers, fused layer norms)
FUSED = re.compile(r"^triton_|triton__|\bfused|_fused|Fused", re.IGNORECASE)
#: the classes whose kernels the precision levers act on or leave alone
MATH = (Klass.GEMM, Klass.CONV, Klass.ATTENTION)
#: 16 bits or below: what BF16 autocast leaves alone
HALF_OR_BELOW = REDUCED - {"tf32"}
_SHORT = {
    Basis.RECORDED: "the launching op's recorded input type",
    Basis.RECORDED_AND_NAME: "the launching op's recorded input type",
    Basis.NAME: "the kernel name",
}


@functools.lru_cache(maxsize=65536)
def _fused(name: str) -> bool:
    return FUSED.search(name) is not None


def _by_evidence(bases: list[Basis]) -> str:
    """'N by the launching op's recorded input type, M by the kernel name'."""
    n = Counter(_SHORT[b] for b in bases if b in _SHORT)
    return ", ".join(f"{c:,} by {what}" for what, c in n.most_common())


def _types(precisions: list[str]) -> str:
    n = Counter(precisions)
    return ", ".join(f"{c:,} {p.upper()}" for p, c in n.most_common())


def in_use(trace: Trace) -> list[InUse]:
    """Findings on the whole trace's kernels (not only a replayed window's)."""
    seg, host = trace.segments, trace.host
    kern = seg.kind == Kind.KERNEL
    dur = seg.duration_ns.astype(np.float64)
    total = float(dur[kern].sum())
    if total <= 0:
        return []
    out: list[InUse] = []
    # CUDA graphs: kernels whose launch is a cudaGraphLaunch (or one of its nodes)
    graph_calls = np.isin(host.api, (ApiKind.GRAPH_LAUNCH, ApiKind.GRAPH_NODE))
    corr = host.correlation[graph_calls]
    in_graph = kern & np.isin(seg.correlation, corr[corr > 0])
    if in_graph.any():
        launches = int((host.api == ApiKind.GRAPH_LAUNCH).sum())
        t = float(dur[in_graph].sum())
        out.append(
            InUse(
                what="cuda_graphs",
                share=round(t / total, 6),
                rows=int(in_graph.sum()),
                of_rows=int(kern.sum()),
                evidence=f"{int(in_graph.sum()):,} of {int(kern.sum()):,} kernels "
                f"({t / total:.0%} of kernel time) were launched from {launches:,} "
                "cudaGraphLaunch calls",
                levers=[lv.id for lv in LEVERS if "cuda_graphs" in lv.in_use_as],
            )
        )
    # by name, once per distinct name
    ids = np.unique(seg.name[kern])
    names = [trace.names[int(i)] for i in ids.tolist()]
    fused_ids = ids[np.fromiter(map(_fused, names), np.bool_, len(names))]
    fused = kern & np.isin(seg.name, fused_ids)
    if fused.any():
        t = float(dur[fused].sum())
        triton_ids = ids[np.fromiter(("triton" in n.lower() for n in names), np.bool_, len(names))]
        triton = int((fused & np.isin(seg.name, triton_ids)).sum())
        out.append(
            InUse(
                what="fused_kernels",
                share=round(t / total, 6),
                rows=int(fused.sum()),
                of_rows=int(kern.sum()),
                evidence=f"{int(fused.sum()):,} kernels ({t / total:.0%} of kernel time) are "
                f"already fused ({triton:,} of them Triton/Inductor kernels, the rest named "
                "'fused')",
                levers=[lv.id for lv in LEVERS if "fused_kernels" in lv.in_use_as],
            )
        )
    # matmuls already in a reduced-precision type (engine.trace.precision)
    out.extend(_reduced_precision(trace, kern, dur))
    return out


def _reduced_precision(trace: Trace, kern: np.ndarray, dur: np.ndarray) -> list[InUse]:
    """Matmul/conv/attention kernels already at TF32 or below (``reduced_precision``: the
    levers that leave them alone are ``tf32_matmul``, and ``bf16_autocast`` too where none is
    TF32); where some are TF32 and some at 16 bits or below, the latter again as
    ``half_precision``, the share ``bf16_autocast`` leaves alone."""
    seg = trace.segments
    mm = np.flatnonzero(kern & np.isin(seg.klass, MATH))
    mm_t = float(dur[mm].sum())
    if mm_t <= 0:
        return []
    # once per distinct (recorded type, name): a long trace has few of them
    stride = len(trace.names) + 1
    pairs, inv = np.unique(
        seg.dtype[mm].astype(np.int64) * stride + seg.name[mm], return_inverse=True
    )
    u_prec, u_basis = row_precisions(
        (pairs // stride).astype(np.uint8), [trace.names[int(i)] for i in (pairs % stride).tolist()]
    )
    prec = [u_prec[j] for j in inv.reshape(-1).tolist()]
    basis = [u_basis[j] for j in inv.reshape(-1).tolist()]
    unknown = sum(1 for p in prec if not p)
    tail = (
        f"; {unknown:,} of unknown precision (no recorded input type, no type in the name)"
        if unknown
        else ""
    )
    out: list[InUse] = []
    named: set[str] = set()
    for what, kinds in (("reduced_precision", REDUCED), ("half_precision", HALF_OR_BELOW)):
        pick = [i for i, p in enumerate(prec) if p in kinds]
        if not pick:
            continue
        held = {prec[i] for i in pick}
        if what != "reduced_precision" and len(pick) == sum(1 for p in prec if p in REDUCED):
            continue  # (no TF32 row: reduced_precision says it all)
        # the precision levers that leave every one of these rows alone: those whose target
        # they are at or below (once each: the half-precision line names only what the
        # reduced-precision line did not)
        levers = [
            lv.id
            for lv in LEVERS
            if lv.precision_target
            and held <= at_or_below(lv.precision_target)
            and lv.id not in named
        ]
        named.update(levers)
        t = float(dur[mm[pick]].sum())
        out.append(
            InUse(
                what=what,
                share=round(t / mm_t, 6),
                rows=len(pick),
                of_rows=len(mm),
                evidence=f"{len(pick):,} of {len(mm):,} matmul/conv/attention kernels "
                f"({t / mm_t:.0%} of their time) already run in "
                f"{_types([prec[i] for i in pick])} ({_by_evidence([basis[i] for i in pick])})"
                + tail,
                levers=levers,
            )
        )
    return out


def already_fused(dag: ReplayDag) -> np.ndarray:
    """Per device row: a kernel already fused (``FUSED``): fusion levers leave it alone."""
    return np.fromiter(map(_fused, dag.d_name), np.bool_, len(dag.d_name))


__all__ = ["FUSED", "HALF_OR_BELOW", "MATH", "already_fused", "in_use"]
