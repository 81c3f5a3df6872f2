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
from engine.trace.trace import ApiKind, Trace

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
                levers=["cuda_graphs"],
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
                levers=["elementwise_fusion", "fused_optimizer"],
            )
        )
    # matmuls already in a reduced-precision type (kernel name or the op's input type)
    mm = kern & np.isin(seg.klass, (Klass.GEMM, Klass.CONV, Klass.ATTENTION))
    mm_t = float(dur[mm].sum())
    if mm_t > 0:
        low = [DTYPES.index(t) for t in ("tf32", "bf16", "fp16", "fp8", "int8")]
        reduced_ids = ids[np.fromiter(map(_reduced, names), np.bool_, len(names))]
        reduced = mm & (np.isin(seg.dtype, low) | np.isin(seg.name, reduced_ids))
        if reduced.any():
            t = float(dur[reduced].sum())
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
