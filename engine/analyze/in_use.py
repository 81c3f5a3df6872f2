"""What the program already does, seen in the trace, so that no lever takes credit for it:
kernels launched from CUDA graphs, kernels a compiler already fused, matmuls already in a
reduced-precision type. Each finding names its evidence and the levers that leave that share
alone (their transforms target only the rest: eager launches, unfused elementwise kernels,
FP32 matmuls)."""

from __future__ import annotations

import functools
import re

import numpy as np

from engine.analyze.model import InUse
from engine.levers.base import precision_of
from engine.schedule.dag import ReplayDag
from engine.trace.segments import DTYPES, Kind, Klass
from engine.trace.trace import ApiKind

#: kernels a compiler generated already fused: TorchInductor's Triton kernels
#: (triton_poi_fused_…, triton_red_fused_…, triton_per_fused_…), other Triton kernels, and
#: kernels whose name says fused (apex / fused optimizers, fused layer norms)
FUSED = re.compile(r"^triton_|triton__|\bfused|_fused|Fused", re.IGNORECASE)
#: tensor-core matmul kernels by the type their name gives (cuBLAS / CUTLASS / cuDNN names)
_REDUCED = re.compile(
    r"bf16|fp16|f16|half|h884|h1688|h16816|hmma|s16816|s1688|tf32|i8816|fp8|e4m3|e5m2",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=65536)
def _fused(name: str) -> bool:
    return FUSED.search(name) is not None


@functools.lru_cache(maxsize=65536)
def _reduced(name: str) -> bool:
    p = precision_of(name)
    return p == "tf32" or (p is None and _REDUCED.search(name) is not None)


def in_use(dag: ReplayDag) -> list[InUse]:
    """Findings on the replayed window's device rows (kernels only)."""
    kern = dag.d_live & (dag.d_kind == Kind.KERNEL)
    total = float(dag.d_dur[kern].sum())
    if total <= 0:
        return []
    out: list[InUse] = []
    # CUDA graphs: kernels whose launch is a cudaGraphLaunch (or one of its nodes)
    off, flat = dag.launch_lists()
    graph_rows = np.flatnonzero(np.isin(dag.api, (ApiKind.GRAPH_LAUNCH, ApiKind.GRAPH_NODE)))
    in_graph = np.zeros(len(dag.d_stream), bool)
    for r in graph_rows.tolist():
        in_graph[flat[off[r] : off[r + 1]]] = True
    in_graph &= kern
    if in_graph.any():
        launches = int((dag.api == ApiKind.GRAPH_LAUNCH).sum())
        t = float(dag.d_dur[in_graph].sum())
        out.append(
            InUse(
                what="cuda_graphs",
                share=round(t / total, 6),
                rows=int(in_graph.sum()),
                of_rows=int(kern.sum()),
                evidence=f"{int(in_graph.sum()):,} of {int(kern.sum()):,} kernels "
                f"({t / total:.0%} of kernel time) were launched from {launches:,} "
                "cudaGraphLaunch calls",
                levers=["cuda_graphs"],
            )
        )
    # already fused (compiler-generated or fused by name)
    names = dag.d_name
    fused = already_fused(dag) & kern
    if fused.any():
        t = float(dag.d_dur[fused].sum())
        triton = sum(1 for i in np.flatnonzero(fused).tolist() if "triton" in names[i].lower())
        out.append(
            InUse(
                what="fused_kernels",
                share=round(t / total, 6),
                rows=int(fused.sum()),
                of_rows=int(kern.sum()),
                evidence=f"{int(fused.sum()):,} kernels ({t / total:.0%} of kernel time) are "
                f"already fused ({triton:,} of them Triton/Inductor kernels, the rest named "
                "'fused')",
                levers=["elementwise_fusion", "fused_optimizer"],
            )
        )
    # matmuls already in a reduced-precision type (kernel name or the op's input type)
    mm = kern & np.isin(dag.d_klass, (Klass.GEMM, Klass.CONV, Klass.ATTENTION))
    mm_t = float(dag.d_dur[mm].sum())
    if mm_t > 0:
        dt = dag.d_dtype if dag.d_dtype is not None else np.zeros(len(names), np.uint8)
        reduced = np.zeros(len(names), bool)
        low = {DTYPES.index(t) for t in ("tf32", "bf16", "fp16", "fp8", "int8")}
        for i in np.flatnonzero(mm).tolist():
            reduced[i] = int(dt[i]) in low or _reduced(names[i])
        if reduced.any():
            t = float(dag.d_dur[reduced].sum())
            out.append(
                InUse(
                    what="reduced_precision",
                    share=round(t / mm_t, 6),
                    rows=int(reduced.sum()),
                    of_rows=int(mm.sum()),
                    evidence=f"{int(reduced.sum()):,} of {int(mm.sum()):,} matmul/conv/attention "
                    f"kernels ({t / mm_t:.0%} of their time) already run in TF32/BF16/FP16/FP8/"
                    "INT8 (kernel name or the op's input type)",
                    levers=["tf32_matmul", "bf16_autocast"],
                )
            )
    return out


def already_fused(dag: ReplayDag) -> np.ndarray:
    """Per device row: a kernel already fused (``FUSED``): fusion levers leave it alone."""
    return np.fromiter(map(_fused, dag.d_name), np.bool_, len(dag.d_name))


__all__ = ["FUSED", "already_fused", "in_use"]
