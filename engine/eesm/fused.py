"""The full EESM pipeline as single compiled passes (the throughput path of ``decode_fused``).

Two kernels, both bit-identical to the layered pipeline (tested):

* ``fused_sticky4`` — the design's case (four regimes, sticky chain): a counting sort groups
  rows by stream (O(n), stable), then each stream is decoded in one loop whose Viterbi state,
  κ running sums and emissions live in registers.
* ``fused_general`` — any number of states and any transition matrix: one pass in row order
  with per-stream state arrays.

Both return ok=False when a stream's rows are not in start order; the caller then sorts once.
"""

from __future__ import annotations

import numpy as np

from engine.eesm import embed, kappa, viterbi
from engine.eesm._jit import jit


def work_arrays(n: int) -> tuple[np.ndarray, ...]:
    """Return fused_sticky4's n-row arrays: perm (int32: half the traffic of int64; n < 2**31),
    labels, κ, estimated flags (zeroed) and backpointers packed 2 bits per state (one byte)."""
    return (
        np.empty(n, np.int32),
        np.empty(n, np.uint8),
        np.empty(n, np.float32),
        np.zeros(n, np.uint8),
        np.empty(n, np.uint8),
    )


def fast_path_applies(logA: np.ndarray) -> bool:
    """Return whether ``fused_sticky4`` can decode with this transition matrix."""
    return logA.shape == (4, 4) and bool(viterbi._sticky(logA))


@jit
def _group_ids(stream: np.ndarray) -> tuple[np.ndarray, int]:
    """Map stream ids to dense group ids in order of first appearance (O(n), no sort)."""
    n = stream.shape[0]
    gid = np.empty(n, np.int32)
    if n == 0:
        return gid, 0
    lo, hi = stream.min(), stream.max()
    G = 0
    if hi - lo < 1 << 20:  # stream ids are small integers in practice: a direct table
        table = np.full(hi - lo + 1, -1, np.int32)
        for i in range(n):
            k = stream[i] - lo
            if table[k] < 0:
                table[k] = G
                G += 1
            gid[i] = table[k]
    else:
        d = {}
        for i in range(n):
            s = stream[i]
            if s not in d:
                d[s] = G
                G += 1
            gid[i] = d[s]
    return gid, G


@jit
def fused_general(
    start: np.ndarray,
    end: np.ndarray,
    stream: np.ndarray,
    klass: np.ndarray,
    flops: np.ndarray,
    dram: np.ndarray,
    issue: np.ndarray,
    stall: np.ndarray,
    occ: np.ndarray,
    class_peak: np.ndarray,
    prior: np.ndarray,
    hbm: float,
    short_ns: float,
    floor: float,
    W: np.ndarray,
    c: np.ndarray,
    logA: np.ndarray,
    logpi: np.ndarray,
    window: int,
    stride: int,
    min_count: int,
    ridge: float,
) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """Any chain: one pass in row order with per-stream state; ok=False if a stream is out of order.

    Per-stream Viterbi recursions, κ running sums and a ring of the last ``window`` pressures
    make T_stream implicit: no sort and no permutation when each stream is in start order (the
    usual case for device traces). Operation order matches the layered kernels exactly.
    """
    n = start.shape[0]
    S = W.shape[0]
    gid, G = _group_ids(stream)
    labels = np.empty(n, np.uint8)
    kap = np.empty(n, np.float32)
    est = np.zeros(n, np.uint8)
    bp = np.empty((n, S), np.int8)
    prev = np.empty(n, np.int64)
    delta = np.zeros((G, S))
    top_of = np.zeros(G, np.int64)  # index of δ[g]'s (first) maximum, kept by _init/_step_sticky
    last = np.full(G, -1, np.int64)
    count = np.zeros(G, np.int64)
    sums = np.zeros((G, 9))
    ring = np.zeros((G, window, 3))
    pend = np.empty((G, stride), np.int64)
    npend = np.zeros(G, np.int64)
    slot_of = np.zeros(G, np.int64)  # ring position, kept by increment: no % on the hot path
    e = np.empty((1, S))
    new = np.empty(S)
    sticky = viterbi._sticky(logA)
    s4 = sticky and S == 4
    ls, lsw = logA[0, 0], logA[min(1, S - 1), 0]
    for i in range(n):
        g = gid[i]
        if last[g] >= 0 and start[i] < start[last[g]]:
            return False, labels, kap, est
        x, y, z, flag = embed._observe_row(
            float(end[i] - start[i]),
            klass[i],
            flops[i],
            dram[i],
            issue[i],
            stall[i],
            occ[i],
            class_peak,
            prior,
            hbm,
            short_ns,
        )
        x = embed._bound(x, floor)
        y = embed._bound(y, floor)
        z = embed._bound(z, floor)
        est[i] = 1 if flag else 0
        if s4 and count[g] > 0:  # the hot path: four regimes, sticky chain
            viterbi._step_sticky4(
                delta,
                g,
                top_of,
                ls,
                lsw,
                c[0] + x * W[0, 0] + y * W[0, 1] + z * W[0, 2],
                c[1] + x * W[1, 0] + y * W[1, 1] + z * W[1, 2],
                c[2] + x * W[2, 0] + y * W[2, 1] + z * W[2, 2],
                c[3] + x * W[3, 0] + y * W[3, 1] + z * W[3, 2],
                bp,
                i,
            )
        else:
            for s in range(S):
                e[0, s] = c[s] + x * W[s, 0] + y * W[s, 1] + z * W[s, 2]
            if count[g] == 0:
                viterbi._init(delta, g, logpi, e, 0, top_of)
            elif sticky:
                viterbi._step_sticky(delta, g, top_of, ls, lsw, e, 0, new, bp, i)
            else:
                viterbi._step(delta, g, logA, e, 0, new, bp, i)
        prev[i] = last[g]
        last[g] = i
        # κ: one update per running sum with (new − leaving) terms, as kappa.kappa_groups;
        # the ring starts at zeros, so the first `window` rows subtract nothing
        slot = slot_of[g]
        slot_of[g] = 0 if slot + 1 == window else slot + 1
        ox, oy, oz = ring[g, slot, 0], ring[g, slot, 1], ring[g, slot, 2]
        sums[g, 0] += x - ox
        sums[g, 1] += y - oy
        sums[g, 2] += z - oz
        sums[g, 3] += x * x - ox * ox
        sums[g, 4] += x * y - ox * oy
        sums[g, 5] += x * z - ox * oz
        sums[g, 6] += y * y - oy * oy
        sums[g, 7] += y * z - oy * oz
        sums[g, 8] += z * z - oz * oz
        ring[g, slot, 0] = x
        ring[g, slot, 1] = y
        ring[g, slot, 2] = z
        count[g] += 1
        pend[g, npend[g]] = i
        npend[g] += 1
        if npend[g] == stride:  # the stride's evaluation point: count is a multiple of stride
            k = _kappa_from_sums(sums, g, min(count[g], window), min_count, ridge)
            for q in range(npend[g]):
                kap[pend[g, q]] = k
            npend[g] = 0
    for g in range(G):
        if npend[g]:
            k = _kappa_from_sums(sums, g, min(count[g], window), min_count, ridge)
            for q in range(npend[g]):
                kap[pend[g, q]] = k
        i = last[g]
        if i < 0:
            continue
        s = viterbi._argmax(delta, g)
        labels[i] = s
        while prev[i] >= 0:
            s = bp[i, s]
            i = prev[i]
            labels[i] = s
    return True, labels, kap, est


@jit
def _kappa_from_sums(sm: np.ndarray, g: int, cnt: int, min_count: int, ridge: float) -> float:
    return kappa.cond_from_sums(
        sm[g, 0],
        sm[g, 1],
        sm[g, 2],
        sm[g, 3],
        sm[g, 4],
        sm[g, 5],
        sm[g, 6],
        sm[g, 7],
        sm[g, 8],
        cnt,
        min_count,
        ridge,
    )


#: rows per chunk of the sticky-4 kernel: a chunk's columns (~3 MB) stay in cache while each of
#: its streams is decoded, so interleaved streams do not re-read DRAM once per stream
CHUNK = 1 << 16


@jit
def fused_sticky4(
    start: np.ndarray,
    end: np.ndarray,
    stream: np.ndarray,
    klass: np.ndarray,
    flops: np.ndarray,
    dram: np.ndarray,
    issue: np.ndarray,
    stall: np.ndarray,
    occ: np.ndarray,
    class_peak: np.ndarray,
    prior: np.ndarray,
    hbm: float,
    short_ns: float,
    floor: float,
    W: np.ndarray,
    c: np.ndarray,
    logA: np.ndarray,
    logpi: np.ndarray,
    window: int,
    stride: int,
    min_count: int,
    ridge: float,
    perm: np.ndarray,
    labels: np.ndarray,
    kap: np.ndarray,
    est: np.ndarray,
    bp: np.ndarray,
) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """Four regimes, sticky chain: chunk by chunk, stream by stream, state in registers.

    The n-row work arrays come from the caller (see ``work_arrays``): numpy asks the kernel for
    transparent huge pages on large allocations and numba's allocator does not, and first-touch
    page faults were a fifth of the run at 10⁷ rows.
    """
    n = start.shape[0]
    # dense stream ids through a direct table (the caller compacts ids spanning ≥ 2**20);
    # no per-row id array: every page an array touches costs a fault on first use
    lo = stream.min() if n else 0
    table = np.full((stream.max() - lo + 1) if n else 1, -1, np.int32)
    G = 0
    for i in range(n):
        if table[stream[i] - lo] < 0:
            table[stream[i] - lo] = G
            G += 1
    nch = (n + CHUNK - 1) // CHUNK
    coff = np.zeros((nch, G + 1), np.int64)  # global perm positions of each stream per chunk
    fill = np.empty(G, np.int64)
    for ch in range(nch):  # stable counting sort inside each chunk
        r0, r1 = ch * CHUNK, min(n, (ch + 1) * CHUNK)
        coff[ch, 0] = r0
        for i in range(r0, r1):
            coff[ch, table[stream[i] - lo] + 1] += 1
        for g in range(G):
            coff[ch, g + 1] += coff[ch, g]
            fill[g] = coff[ch, g]
        for i in range(r0, r1):
            g = table[stream[i] - lo]
            perm[fill[g]] = i
            fill[g] += 1
    # per-stream state carried between chunks
    D = np.zeros((G, 4))
    top_of = np.zeros(G, np.int64)
    seen = np.zeros(G, np.int64)
    prev_start = np.zeros(G, np.int64)
    sums = np.zeros((G, 9))
    ring = np.zeros((G, window, 3))
    slot_of = np.zeros(G, np.int64)
    pend = np.empty((G, stride), np.int64)
    npend = np.zeros(G, np.int64)
    ls, lsw = logA[0, 0], logA[1, 0]
    c0, c1, c2, c3 = c[0], c[1], c[2], c[3]
    for ch in range(nch):
        for g in range(G):
            a, b = coff[ch, g], coff[ch, g + 1]
            if b == a:
                continue
            d0, d1, d2, d3 = D[g, 0], D[g, 1], D[g, 2], D[g, 3]
            m = top_of[g]
            s0, s1, s2 = sums[g, 0], sums[g, 1], sums[g, 2]
            s00, s01, s02 = sums[g, 3], sums[g, 4], sums[g, 5]
            s11, s12, s22 = sums[g, 6], sums[g, 7], sums[g, 8]
            slot = slot_of[g]
            cnt_g = seen[g]
            last_t = prev_start[g]
            for j in range(a, b):
                i = perm[j]
                if cnt_g > 0 and start[i] < last_t:
                    return False, labels, kap, est
                last_t = start[i]
                x, y, z, flag = embed._observe_row(
                    float(end[i] - start[i]),
                    klass[i],
                    flops[i],
                    dram[i],
                    issue[i],
                    stall[i],
                    occ[i],
                    class_peak,
                    prior,
                    hbm,
                    short_ns,
                )
                x = embed._bound(x, floor)
                y = embed._bound(y, floor)
                z = embed._bound(z, floor)
                if flag:
                    est[i] = 1
                e0 = c0 + x * W[0, 0] + y * W[0, 1] + z * W[0, 2]
                e1 = c1 + x * W[1, 0] + y * W[1, 1] + z * W[1, 2]
                e2 = c2 + x * W[2, 0] + y * W[2, 1] + z * W[2, 2]
                e3 = c3 + x * W[3, 0] + y * W[3, 1] + z * W[3, 2]
                if cnt_g == 0:
                    n0, n1, n2, n3 = logpi[0] + e0, logpi[1] + e1, logpi[2] + e2, logpi[3] + e3
                else:  # viterbi._step_sticky4 with the state in registers
                    n0, b0 = viterbi._pred4(d0, 0, m, ls, lsw)
                    n1, b1 = viterbi._pred4(d1, 1, m, ls, lsw)
                    n2, b2 = viterbi._pred4(d2, 2, m, ls, lsw)
                    n3, b3 = viterbi._pred4(d3, 3, m, ls, lsw)
                    n0 += e0
                    n1 += e1
                    n2 += e2
                    n3 += e3
                    bp[j] = b0 | (b1 << 2) | (b2 << 4) | (b3 << 6)
                top, m = n0, 0
                if n1 > top:
                    top, m = n1, 1
                if n2 > top:
                    top, m = n2, 2
                if n3 > top:
                    top, m = n3, 3
                d0, d1, d2, d3 = n0 - top, n1 - top, n2 - top, n3 - top
                # κ: (new − leaving) updates, as kappa.kappa_groups
                ox, oy, oz = ring[g, slot, 0], ring[g, slot, 1], ring[g, slot, 2]
                s0 += x - ox
                s1 += y - oy
                s2 += z - oz
                s00 += x * x - ox * ox
                s01 += x * y - ox * oy
                s02 += x * z - ox * oz
                s11 += y * y - oy * oy
                s12 += y * z - oy * oz
                s22 += z * z - oz * oz
                ring[g, slot, 0] = x
                ring[g, slot, 1] = y
                ring[g, slot, 2] = z
                slot = 0 if slot + 1 == window else slot + 1
                cnt_g += 1
                pend[g, npend[g]] = i
                npend[g] += 1
                if npend[g] == stride:
                    k = kappa.cond_from_sums(
                        s0,
                        s1,
                        s2,
                        s00,
                        s01,
                        s02,
                        s11,
                        s12,
                        s22,
                        min(cnt_g, window),
                        min_count,
                        ridge,
                    )
                    for q in range(stride):
                        kap[pend[g, q]] = k
                    npend[g] = 0
            D[g, 0], D[g, 1], D[g, 2], D[g, 3] = d0, d1, d2, d3
            top_of[g] = m
            sums[g, 0], sums[g, 1], sums[g, 2] = s0, s1, s2
            sums[g, 3], sums[g, 4], sums[g, 5] = s00, s01, s02
            sums[g, 6], sums[g, 7], sums[g, 8] = s11, s12, s22
            slot_of[g] = slot
            seen[g] = cnt_g
            prev_start[g] = last_t
    for g in range(G):
        if npend[g]:  # the stream's last, partial stride
            k = kappa.cond_from_sums(
                sums[g, 0],
                sums[g, 1],
                sums[g, 2],
                sums[g, 3],
                sums[g, 4],
                sums[g, 5],
                sums[g, 6],
                sums[g, 7],
                sums[g, 8],
                min(seen[g], window),
                min_count,
                ridge,
            )
            for q in range(npend[g]):
                kap[pend[g, q]] = k
        # backtrack across chunks, newest row first
        s = top_of[g]
        later = -1
        for ch in range(nch - 1, -1, -1):
            for j in range(coff[ch, g + 1] - 1, coff[ch, g] - 1, -1):
                if later >= 0:
                    s = (bp[later] >> (2 * s)) & 3
                labels[perm[j]] = s
                later = j
    return True, labels, kap, est
