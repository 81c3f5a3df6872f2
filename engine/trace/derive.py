"""The DERIVED evidence tier of a Kineto trace: each kernel gets the work (FLOPs, bytes, arithmetic
type) of the innermost framework op around its launch, as the op's recorded shapes give it
(engine.trace.shapes)."""

from __future__ import annotations

import numpy as np

from engine.trace.evidence import Tier, tiers
from engine.trace.segments import DTYPE_CODE, Kind, NameTable, Provenance, Segments
from engine.trace.shapes import OpWork, innermost_known, kernel_dtype
from engine.trace.trace import HostEvents


def derive_work(
    seg: Segments,
    names: NameTable,
    host_tid: np.ndarray,
    host: HostEvents,
    op_parts: list[dict[str, np.ndarray]],
    work: list[OpWork],
) -> Segments:
    """Give each kernel the work of the innermost framework op around its launch call (the
    DERIVED tier): the op's FLOPs and bytes split over its kernels in proportion to their
    durations, and the arithmetic type of its inputs. Kernels with measured counters keep
    theirs."""
    if not op_parts or not work or not len(host) or not len(seg):
        return seg
    # the blocks' arrays are dropped as they are joined (they are the reader's, used once)
    ops = {k: np.concatenate([o.pop(k) for o in op_parts]) for k in list(op_parts[0])}
    row = host.rows_of(seg.correlation)
    # kernels with measured counters keep theirs
    kern = np.flatnonzero((seg.kind == Kind.KERNEL) & (row >= 0) & (tiers(seg) != Tier.MEASURED))
    hrow = row[kern]
    which = np.asarray(
        innermost_known(
            ops["tid"],
            ops["start"],
            ops["end"],
            ops["work"],
            host_tid[hrow],
            host.api_start_ns[hrow],
        ),
        np.int64,
    )
    ok = which >= 0
    kern, which = kern[ok], which[ok]
    if not kern.size:
        return seg
    dur = np.maximum(seg.duration_ns[kern].astype(np.float64), 1.0)
    share = dur / np.bincount(which, weights=dur, minlength=len(ops["work"]))[which]
    widx = ops["work"][which]
    work_flops = np.fromiter((w.flops for w in work), np.float64, len(work))
    work_bytes = np.fromiter((w.bytes for w in work), np.float64, len(work))
    # the arithmetic type depends on the op's inputs and (TF32 or not) the kernel's name: once
    # per distinct (op work, kernel name), in numpy (lists of every kernel's pair took ~100 MB
    # on a 10 M-event trace)
    # ops of the same shapes share one OpWork (the reader's memo): pairs by that one
    first_of: dict[int, int] = {}
    same = np.fromiter((first_of.setdefault(id(w), i) for i, w in enumerate(work)), np.int64,
                       len(work))  # fmt: skip
    nm_k = seg.name[kern].astype(np.int64)
    stride = len(names) + 1
    pair, inv = np.unique(same[widx] * stride + nm_k, return_inverse=True)
    codes = np.zeros(len(pair), np.uint8)
    for u, (wi, nm) in enumerate(zip((pair // stride).tolist(), (pair % stride).tolist(),
                                     strict=True)):  # fmt: skip
        w = work[wi]
        codes[u] = DTYPE_CODE.get(kernel_dtype(w.dtype, w.family, names[nm]), 0)
    out = seg.columns()
    out["flops"] = out["flops"].copy()
    out["dram_bytes"] = out["dram_bytes"].copy()
    out["dtype"] = out["dtype"].copy()
    out["provenance"] = out["provenance"].copy()
    out["flops"][kern] = work_flops[widx] * share
    out["dram_bytes"][kern] = work_bytes[widx] * share
    out["dtype"][kern] = codes[inv.reshape(-1)]
    out["provenance"][kern] |= np.uint8(Provenance.DERIVED)
    return Segments(**out)
