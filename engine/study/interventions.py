"""do-operators on Segments (issue #6): perturbations a compiler or runtime could cause, under
which a decoder's labels should stay put. Each returns the perturbed table and ``align``: for
every row of the *original* table, the row of the perturbed one it corresponds to (so labels
can be compared segment by segment). All are seeded and pure (the input is not modified).

* ``jitter(seg, scale_ns, seed)`` — δ_jit: each row's start and end shift by the same Gaussian
  offset of standard deviation ``scale_ns`` (durations kept; rows may swap order when the
  jitter exceeds their gap — that is the perturbation).
* ``reorder(seg, scale_ns, seed)`` — δ_reord: each stream's whole timeline shifts by its own
  uniform offset in [−scale, +scale] and the table's rows are shuffled: every stream keeps its
  order and gaps, the interleaving across streams changes (combinatorially, over seeds).
* ``fuse(seg, prob, seed)`` — δ_fuse: adjacent kernels of one stream and one fusable class
  (elementwise, norm) merge with probability ``prob``: start of the first, end of the last,
  FLOPs and DRAM bytes summed, issue-active / stall / occupancy averaged weighted by duration,
  provenance the intersection (a counter is measured only if it was for every part).
"""

from __future__ import annotations

import numpy as np

from engine.trace.segments import Kind, Klass, Segments

FUSABLE = (Klass.ELEMENTWISE, Klass.NORM)


def jitter(seg: Segments, scale_ns: float, seed: int) -> tuple[Segments, np.ndarray]:
    """δ_jit (module docstring)."""
    rng = np.random.default_rng(seed)
    off = np.round(rng.normal(0.0, scale_ns, len(seg))).astype(np.int64)
    cols = seg.columns()
    cols = {**cols, "start_ns": seg.start_ns + off, "end_ns": seg.end_ns + off}
    return Segments(**cols), np.arange(len(seg))


def reorder(seg: Segments, scale_ns: float, seed: int) -> tuple[Segments, np.ndarray]:
    """δ_reord (module docstring)."""
    rng = np.random.default_rng(seed)
    streams, inv = np.unique(seg.stream, return_inverse=True)
    off = np.round(rng.uniform(-scale_ns, scale_ns, len(streams))).astype(np.int64)[inv]
    shifted = Segments(
        **{**seg.columns(), "start_ns": seg.start_ns + off, "end_ns": seg.end_ns + off}
    )
    perm = rng.permutation(len(seg))  # row i of the result is row perm[i] of the input
    align = np.empty(len(seg), np.int64)
    align[perm] = np.arange(len(seg))
    return shifted.take(perm), align


def fuse(seg: Segments, prob: float, seed: int) -> tuple[Segments, np.ndarray]:
    """δ_fuse (module docstring)."""
    rng = np.random.default_rng(seed)
    n = len(seg)
    order = np.lexsort((seg.start_ns, seg.stream))
    group = np.empty(n, np.int64)  # fused-row id per original row
    g = -1
    prev = -1
    for r in order.tolist():
        join = (
            prev >= 0
            and seg.stream[r] == seg.stream[prev]
            and seg.kind[r] == Kind.KERNEL
            and seg.kind[prev] == Kind.KERNEL
            and seg.klass[r] == seg.klass[prev]
            and Klass(int(seg.klass[r])) in FUSABLE
            and rng.random() < prob
        )
        if not join:
            g += 1
        group[r] = g
        prev = r
    G = g + 1
    first = np.full(G, -1, np.int64)
    for r in order.tolist():
        if first[group[r]] < 0:
            first[group[r]] = r
    dur = (seg.end_ns - seg.start_ns).astype(np.float64)
    w = np.maximum(dur, 1.0)

    def wmean(x: np.ndarray) -> np.ndarray:
        num = np.bincount(group, weights=np.nan_to_num(x) * w, minlength=G)
        den = np.bincount(group, weights=w * ~np.isnan(x), minlength=G)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / den, np.nan)

    def gsum(x: np.ndarray) -> np.ndarray:
        s = np.bincount(group, weights=np.nan_to_num(x), minlength=G)
        anynan = np.bincount(group, weights=np.isnan(x).astype(float), minlength=G) > 0
        return np.where(anynan, np.nan, s)

    start = np.full(G, np.iinfo(np.int64).max)
    end = np.full(G, np.iinfo(np.int64).min)
    np.minimum.at(start, group, seg.start_ns)
    np.maximum.at(end, group, seg.end_ns)
    prov = np.full(G, 0xFF, np.uint8)
    np.bitwise_and.at(prov, group, seg.provenance)
    cols = {k: v[first] for k, v in seg.columns().items()}
    cols.update(
        start_ns=start,
        end_ns=end,
        flops=gsum(seg.flops),
        dram_bytes=gsum(seg.dram_bytes),
        issue_active=wmean(seg.issue_active.astype(np.float64)).astype(np.float32),
        stall_frac=wmean(seg.stall_frac.astype(np.float64)).astype(np.float32),
        occupancy=wmean(seg.occupancy.astype(np.float64)).astype(np.float32),
        provenance=prov,
    )
    return Segments(**cols), group


def truth_after_fuse(truth: np.ndarray, align: np.ndarray, n_new: int) -> np.ndarray:
    """Ground truth of fused rows: the majority regime of their parts (ties: the first)."""
    out = np.zeros(n_new, np.uint8)
    counts = np.zeros((n_new, int(truth.max()) + 1 if len(truth) else 1), np.int64)
    np.add.at(counts, (align, truth.astype(np.int64)), 1)
    out[:] = counts.argmax(axis=1)
    return out
