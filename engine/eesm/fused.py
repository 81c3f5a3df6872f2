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
from engine.jit import jit


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

    Per-stream Viterbi recursions and κ block sums make T_stream implicit: no sort and no permutation when each stream is in start order (the
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
    nb = max(1, window // stride)
    part = np.zeros((G, 9))  # sums of each stream's current κ block
    blk = np.zeros((G, nb, 9))  # each stream's last nb completed blocks (kappa.block_window_cond)
    nblk = np.zeros(G, np.int64)
    pend = np.empty((G, stride), np.int64)
    npend = np.zeros(G, np.int64)
    e = np.empty((1, S))
    inv_peak, inv_hbm = 1.0 / class_peak, 1.0 / hbm
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
            inv_peak,
            prior,
            inv_hbm,
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
        # κ: block sums from zero in row order, as kappa.kappa_groups
        part[g, 0] += x
        part[g, 1] += y
        part[g, 2] += z
        part[g, 3] += x * x
        part[g, 4] += x * y
        part[g, 5] += x * z
        part[g, 6] += y * y
        part[g, 7] += y * z
        part[g, 8] += z * z
        count[g] += 1
        pend[g, npend[g]] = i
        npend[g] += 1
        if npend[g] == stride:  # the block is complete
            _close_block(
                part, blk, nblk, pend, npend, kap, g, nb, count[g], stride, min_count, ridge
            )
    for g in range(G):
        if npend[g]:  # the stream's last, short block
            _close_block(
                part, blk, nblk, pend, npend, kap, g, nb, count[g], stride, min_count, ridge
            )
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
def _close_block(
    part: np.ndarray,
    blk: np.ndarray,
    nblk: np.ndarray,
    pend: np.ndarray,
    npend: np.ndarray,
    kap: np.ndarray,
    g: int,
    nb: int,
    cnt: int,
    stride: int,
    min_count: int,
    ridge: float,
) -> None:
    """Store stream g's current block, give its rows the window's κ, start a new block."""
    q = nblk[g]
    b = q % nb
    for t in range(9):
        blk[g, b, t] = part[g, t]
        part[g, t] = 0.0
    rows = cnt - max(0, q - nb + 1) * stride
    k = kappa.block_window_cond(blk, g, q, nb, rows, min_count, ridge)
    for t in range(npend[g]):
        kap[pend[g, t]] = k
    npend[g] = 0
    nblk[g] = q + 1


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
    # one κ per block of `stride` rows of a stream (kappa.py), given to its rows at backtrack
    cnt = np.zeros(G, np.int64)
    for ch in range(nch):
        for g in range(G):
            cnt[g] += coff[ch, g + 1] - coff[ch, g]
    kvoff = np.zeros(G + 1, np.int64)
    for g in range(G):
        kvoff[g + 1] = kvoff[g] + (cnt[g] + stride - 1) // stride
    kv = np.empty(kvoff[G], np.float32)
    nb = max(1, window // stride)
    blk = np.zeros((G, nb, 9))
    # per-stream state carried between chunks
    D = np.zeros((G, 4))
    top_of = np.zeros(G, np.int64)
    seen = np.zeros(G, np.int64)
    prev_start = np.zeros(G, np.int64)
    part = np.zeros((G, 9))
    nblk = np.zeros(G, np.int64)
    ls, lsw = logA[0, 0], logA[1, 0]
    c0, c1, c2, c3 = c[0], c[1], c[2], c[3]
    inv_peak, inv_hbm = 1.0 / class_peak, 1.0 / hbm
    for ch in range(nch):
        for g in range(G):
            a, b = coff[ch, g], coff[ch, g + 1]
            if b == a:
                continue
            d0, d1, d2, d3 = D[g, 0], D[g, 1], D[g, 2], D[g, 3]
            m = top_of[g]
            p0, p1, p2 = part[g, 0], part[g, 1], part[g, 2]
            p00, p01, p02 = part[g, 3], part[g, 4], part[g, 5]
            p11, p12, p22 = part[g, 6], part[g, 7], part[g, 8]
            q = nblk[g]
            cnt_g = seen[g]
            left = stride - cnt_g % stride  # rows still missing from block q
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
                    inv_peak,
                    prior,
                    inv_hbm,
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
                # κ: block sums from zero in row order, as kappa.kappa_groups
                p0 += x
                p1 += y
                p2 += z
                p00 += x * x
                p01 += x * y
                p02 += x * z
                p11 += y * y
                p12 += y * z
                p22 += z * z
                cnt_g += 1
                left -= 1
                if left == 0:  # block q is complete
                    kb = q % nb
                    blk[g, kb, 0], blk[g, kb, 1], blk[g, kb, 2] = p0, p1, p2
                    blk[g, kb, 3], blk[g, kb, 4], blk[g, kb, 5] = p00, p01, p02
                    blk[g, kb, 6], blk[g, kb, 7], blk[g, kb, 8] = p11, p12, p22
                    rows = cnt_g - max(0, q - nb + 1) * stride
                    kv[kvoff[g] + q] = kappa.block_window_cond(
                        blk, g, q, nb, rows, min_count, ridge
                    )
                    q += 1
                    left = stride
                    p0 = p1 = p2 = p00 = p01 = p02 = p11 = p12 = p22 = 0.0
            D[g, 0], D[g, 1], D[g, 2], D[g, 3] = d0, d1, d2, d3
            top_of[g] = m
            part[g, 0], part[g, 1], part[g, 2] = p0, p1, p2
            part[g, 3], part[g, 4], part[g, 5] = p00, p01, p02
            part[g, 6], part[g, 7], part[g, 8] = p11, p12, p22
            nblk[g] = q
            seen[g] = cnt_g
            prev_start[g] = last_t
    for g in range(G):
        q = nblk[g]
        if cnt[g] % stride:  # the stream's last, short block
            kb = q % nb
            for t in range(9):
                blk[g, kb, t] = part[g, t]
            rows = cnt[g] - max(0, q - nb + 1) * stride
            kv[kvoff[g] + q] = kappa.block_window_cond(blk, g, q, nb, rows, min_count, ridge)
        # backtrack across chunks, newest row first; each row also gets its block's κ
        s = top_of[g]
        later = -1
        kq = kvoff[g] + (cnt[g] - 1) // stride
        left = (cnt[g] - 1) % stride
        k = kv[kq] if cnt[g] else np.float32(0)
        for ch in range(nch - 1, -1, -1):
            for j in range(coff[ch, g + 1] - 1, coff[ch, g] - 1, -1):
                if later >= 0:
                    s = (bp[later] >> (2 * s)) & 3
                i = perm[j]
                labels[i] = s
                kap[i] = k
                later = j
                if left == 0:
                    left = stride
                    kq -= 1
                    if kq >= kvoff[g]:
                        k = kv[kq]
                left -= 1
    return True, labels, kap, est
