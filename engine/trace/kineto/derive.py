"""The DERIVED evidence tier of a Kineto trace: each kernel gets the work (FLOPs, bytes, arithmetic
type) of the innermost framework op around its launch, as the op's recorded shapes give it
(engine.trace.kineto.shapes), and that op's family decides its class where the name leaves it
open (taxonomy.decide_by_op)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from engine.trace.evidence import Tier, tiers
from engine.trace.import_memory import give_back
from engine.trace.kineto.shapes import (
    OpWork,
    innermost_in,
    kernel_dtype,
    ops_in_order,
    queries_in_order,
)
from engine.trace.segments import DTYPE_CODE, Kind, Klass, NameTable, Provenance, Segments
from engine.trace.taxonomy import FAMILY_KLASS, decide_by_op
from engine.trace.trace import HostEvents


@dataclass(frozen=True)
class ClassByOp:
    """How many kernels' class is their launching op's family's (``decided``: set by the op, or
    the name's agreeing with it), and of those how many the op moved from what the name alone
    says (``changed``)."""

    decided: int = 0
    changed: int = 0


def derive_work(
    seg: Segments,
    names: NameTable,
    host_parts: list[dict[str, np.ndarray]],
    host: HostEvents,
    op_parts: list[dict[str, np.ndarray]],
    work: list[OpWork],
    compiled: bool = False,
) -> tuple[Segments, ClassByOp]:
    """Give each kernel the work of the innermost framework op around its launch call (the
    DERIVED tier): the op's FLOPs and bytes split over its kernels in proportion to their
    durations, and the arithmetic type of its inputs. A matmul, convolution or attention op's
    work goes to its math kernels only (``_does_the_math``). Kernels with measured counters keep
    theirs. ``seg``'s flops, dram_bytes, dtype and provenance columns are written in place
    (the reader's own: a copy of them was 16 MiB of a 10 M-event import's peak); it is returned.

    ``host_parts`` and ``op_parts`` are the reader's blocks: each host block's "tid" (the
    thread of each host row) and the op blocks' columns are popped as they are joined, and each
    joined array is dropped once read — the import's peak is here. ``compiled``: the sweep that
    finds each launch's op may run as a kernel (engine.trace.kineto.shapes.innermost_known).
    Also returns how many kernels' class their launching op decided (``ClassByOp``)."""
    if not op_parts or not work or not len(host) or not len(seg):
        return seg, ClassByOp()
    ops = {k: np.concatenate([o.pop(k) for o in op_parts]) for k in list(op_parts[0])}
    start = ops.pop("start")
    tid = np.concatenate([p.pop("tid") for p in host_parts])
    row = host.rows_of(seg.correlation)
    # kernels with measured counters keep theirs
    kern = np.flatnonzero((seg.kind == Kind.KERNEL) & (row >= 0) & (tiers(seg) != Tier.MEASURED))
    hrow = row[kern]
    del row
    give_back()  # the lookup's sort, freed: its pages back before the sweep (the import's peak)
    # innermost_known in its three steps, each step's inputs dropped before the next (held
    # through one call, the ops' and the launches' columns and their sorted copies were the
    # import's peak: 52 MiB over the columns of a 10 M-event trace)
    end = ops.pop("dur").astype(np.int64)  # (the reader's blocks hold durations, narrowed)
    end += start
    sorted_ops = ops_in_order(ops.pop("tid"), start, end, ops["work"])
    del start, end
    queries = queries_in_order(tid[hrow], host.api_start_ns[hrow], sorted_ops)
    del tid, hrow
    which = innermost_in(sorted_ops, queries, compiled)
    del sorted_ops, queries
    give_back()  # the sweep's sorted copies, freed
    ok = which >= 0
    kern, which = kern[ok], which[ok]
    # the launching op decides the class of a kernel whose name says a math class or nothing
    # (taxonomy.decide_by_op: an aten::mm's `Cijk_…` or `nvjet_…` is a GEMM, an
    # aten::convolution's xmma kernel a CONV); its auxiliary kernels keep theirs
    before = seg.klass[kern]
    after, decided = _class_by_op(ops["work"][which], work, before, seg.name[kern], names)
    by_op = ClassByOp(int(decided.sum()), int((after != before).sum()))
    seg.klass[kern] = after
    del before, after, decided
    # a matmul, convolution or attention op's work is done by its math kernels; the others it
    # launches (a split-K reduction, an epilogue, a bias copy, a layout transform) do a part of
    # it the shapes do not give: they keep their class prior
    ok = _does_the_math(ops["work"][which], work, seg.klass[kern], seg.name[kern], names)
    kern, which = kern[ok], which[ok]
    del ok
    if not kern.size:
        return seg, by_op
    dur = np.maximum(seg.duration_ns[kern].astype(np.float64), 1.0)
    share = dur / np.bincount(which, weights=dur, minlength=len(ops["work"]))[which]
    del dur
    widx = ops.pop("work")[which]
    del which
    work_flops = np.fromiter((w.flops for w in work), np.float64, len(work))
    work_bytes = np.fromiter((w.bytes for w in work), np.float64, len(work))
    # the arithmetic type depends on the op's inputs and (TF32 or not) the kernel's name: once
    # per distinct (op work, kernel name), in numpy (lists of every kernel's pair took ~100 MB
    # on a 10 M-event trace)
    # ops of the same shapes share one OpWork (the reader's memo): pairs by that one
    first_of: dict[int, int] = {}
    same = np.fromiter((first_of.setdefault(id(w), i) for i, w in enumerate(work)), np.int64,
                       len(work))  # fmt: skip
    stride = len(names) + 1
    pair, inv = np.unique(same[widx] * stride + seg.name[kern], return_inverse=True)
    del same
    codes = np.zeros(len(pair), np.uint8)
    for u, (wi, nm) in enumerate(zip((pair // stride).tolist(), (pair % stride).tolist(),
                                     strict=True)):  # fmt: skip
        w = work[wi]
        codes[u] = DTYPE_CODE.get(kernel_dtype(w.dtype, w.family, names[nm]), 0)
    seg.flops[kern] = work_flops[widx] * share
    seg.dram_bytes[kern] = work_bytes[widx] * share
    seg.dtype[kern] = codes[inv.reshape(-1)]
    seg.provenance[kern] |= np.uint8(Provenance.DERIVED)
    return seg, by_op


#: op families whose work is math done by kernels of the math classes
_MATH_FAMILIES = ("matmul", "conv", "attention")
_MATH_CLASSES = (Klass.GEMM, Klass.CONV, Klass.ATTENTION)
#: kernels of a math class that do not do the op's math: cuBLAS's split-K reduction and
#: epilogue kernels (splitKreduce_kernel, epilogue::impl::globalKernel), cuDNN's layout
#: transforms and reductions (nchwToNhwcKernel, …); their names say so
_AUXILIARY = re.compile(
    r"splitkreduce|split_k_reduce|splitk_reduce|epilogue::|reduce_kernel|nchwtonhwc|"
    r"nhwctonchw|transpose|convert",
    re.IGNORECASE,
)


def _class_by_op(
    widx: np.ndarray, work: list[OpWork], klass: np.ndarray, name: np.ndarray, names: NameTable
) -> tuple[np.ndarray, np.ndarray]:
    """Each kernel's class with its launching op's family deciding (``FAMILY_KLASS``: matmul →
    GEMM, conv → CONV, attention → ATTENTION) where the name's class is one the op decides
    (manifest ``op_decides``) and the name is not an auxiliary kernel's (``_AUXILIARY``: a
    split-K reduction, an epilogue, a layout transform keep their own class). Returns the
    classes and which kernels' class is their op's (set by it, or the name's and the op's
    agreeing)."""
    fam = np.fromiter((FAMILY_KLASS.get(w.family, 255) for w in work), np.uint8, len(work))
    op_klass = fam[widx]
    if (op_klass == 255).all():
        return klass, np.zeros(len(klass), bool)
    ids, inv = np.unique(name, return_inverse=True)
    aux = np.fromiter((bool(_AUXILIARY.search(names[int(i)])) for i in ids), bool, len(ids))
    op_klass = np.where(aux[inv.reshape(-1)], np.uint8(255), op_klass)
    out = decide_by_op(klass, op_klass)
    return out, (op_klass != 255) & (out == op_klass)


def _does_the_math(
    widx: np.ndarray, work: list[OpWork], klass: np.ndarray, name: np.ndarray, names: NameTable
) -> np.ndarray:
    """Which kernels take their op's work: every kernel of an elementwise or norm op; of a
    matmul, convolution or attention op only those of a math class whose name is not an
    auxiliary kernel's (``_AUXILIARY``). A GEMM's FLOPs shared with its split-K reduction by
    duration put GEMM FLOPs on a kernel that sums partials (a GEMM "rate" on a reduction)."""
    math_op = np.fromiter((w.family in _MATH_FAMILIES for w in work), bool, len(work))[widx]
    if not math_op.any():
        return np.ones(len(widx), bool)
    ids, inv = np.unique(name, return_inverse=True)
    aux = np.fromiter((bool(_AUXILIARY.search(names[int(i)])) for i in ids), bool, len(ids))
    does = np.isin(klass, np.array(_MATH_CLASSES, np.uint8)) & ~aux[inv.reshape(-1)]
    return ~math_op | does
