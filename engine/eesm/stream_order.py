"""T_stream: order segments by (stream, start) as a partial order — one sequence per stream.

Never one global timeline: two streams' kernels are not ordered relative to each other. The
result is a permutation plus group offsets (rows perm[offsets[g]:offsets[g+1]] are stream g in
start order). The numba kernel is O(n) when each stream is already in start order (the common
case for device traces): a counting sort by stream, then a check and, only where needed, a
stable sort of that stream's rows.
"""

from __future__ import annotations

import numpy as np

from engine.jit import jit


@jit
def stream_order(
    stream: np.ndarray, start_ns: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (perm int64 (n,), offsets int64 (G+1,), stream ids int32 (G,) ascending)."""
    n = stream.shape[0]
    ids = {}
    for i in range(n):
        s = stream[i]
        if s not in ids:
            ids[s] = 0
        ids[s] += 1
    G = len(ids)
    keys = np.empty(G, np.int32)
    j = 0
    for s in ids:
        keys[j] = s
        j += 1  # noqa: SIM113 - numba cannot enumerate() a typed dict
    keys.sort()
    offsets = np.zeros(G + 1, np.int64)
    slot = {}
    for g in range(G):
        offsets[g + 1] = offsets[g] + ids[keys[g]]
        slot[keys[g]] = g
    fill = offsets[:-1].copy()
    perm = np.empty(n, np.int64)
    for i in range(n):
        g = slot[stream[i]]
        perm[fill[g]] = i
        fill[g] += 1
    for g in range(G):
        a, b = offsets[g], offsets[g + 1]
        ordered = True
        for j in range(a + 1, b):
            if start_ns[perm[j]] < start_ns[perm[j - 1]]:
                ordered = False
                break
        if not ordered:
            rows = perm[a:b].copy()
            local = np.argsort(start_ns[rows], kind="mergesort")
            for j in range(b - a):
                perm[a + j] = rows[local[j]]
    return perm, offsets, keys


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
