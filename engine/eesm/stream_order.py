"""T_stream: order segments by (stream, start) as a partial order — one sequence per stream.

Never one global timeline: two streams' kernels are not ordered relative to each other. The
result is a permutation plus group offsets (rows perm[offsets[g]:offsets[g+1]] are stream g in
start order).
"""

from __future__ import annotations

import numpy as np


def stream_order(
    stream: np.ndarray, start_ns: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (perm int64 (n,), offsets int64 (G+1,), stream ids int32 (G,) ascending).

    numpy, not a compiled kernel: a stable sort by stream (rows of one stream keep their order),
    then, where a stream's rows are not already in start order, a stable sort of the whole by
    (stream, start). As fast as the compiled kernel it replaced (0.11 s for 2 M rows of five
    streams, both) without its 4.8 s of compilation on the first run."""
    stream = np.asarray(stream)
    start_ns = np.asarray(start_ns)
    perm = np.argsort(stream, kind="stable").astype(np.int64)
    s = stream[perm]
    new = np.flatnonzero(s[1:] != s[:-1]) + 1
    offsets = (
        np.concatenate([[0], new, [len(s)]]).astype(np.int64) if len(s) else np.zeros(1, np.int64)
    )
    st = start_ns[perm]
    back = st[1:] < st[:-1]
    if back.any():
        back[new - 1] = False  # a stream's first row may start before the previous one's last
        if back.any():
            perm = np.lexsort((start_ns, stream)).astype(np.int64)
    return perm, offsets, s[offsets[:-1]].astype(np.int32)


def stream_order_ref(
    stream: np.ndarray, start_ns: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain-numpy T_stream (stable lexsort on (stream, start))."""
    perm = np.lexsort((start_ns, stream)).astype(np.int64)
    keys, counts = np.unique(stream, return_counts=True)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return perm, offsets, keys.astype(np.int32)


def global_order(start_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ablation Abl_1 / raw baseline ordering: one global timeline by start time."""
    perm = np.argsort(start_ns, kind="stable").astype(np.int64)
    return perm, np.array([0, len(start_ns)], dtype=np.int64)
