"""κ gate: condition number of the pressure covariance over a trailing window, per stream.

κ(Σ) = λ_max / λ_min of (Σ + ridge·I), Σ the (biased) covariance of a trailing window of P on
the same stream. A stream's rows are cut into blocks of ``stride`` rows (the last one may be
short); at the end of each block κ is evaluated over the last ``window // stride`` blocks —
``window`` rows once the stream is long enough, fewer for the short last block — and every row
of the block gets that κ. Rows whose window holds fewer than ``min_count`` rows get NaN
(undetermined).
κ ≤ K_max → M_id (identifiable); κ > K_max → M_deg: the pressures have collapsed onto a line
or plane (e.g. memory pinned at 1 by HBM saturation) and labels there are low-confidence.
Diagnostic, not causal (DESIGN §4). The ridge bounds κ ≤ (λ_max + ridge)/ridge.

The numba kernels sum each block once (nine products per row, no ring of past rows, and no
rounding drift however long the stream: every window is summed afresh from its blocks) and
solve the 3×3 symmetric eigenproblem in closed form (trigonometric method); the reference uses
np.cov and numpy.linalg.eigvalsh on the same rows.
"""

from __future__ import annotations

import math

import numpy as np

from engine.jit import jit


@jit
def _sym3_cond(a00: float, a01: float, a02: float, a11: float, a12: float, a22: float) -> float:
    p1 = a01 * a01 + a02 * a02 + a12 * a12
    if p1 == 0.0:
        lo = min(a00, min(a11, a22))
        hi = max(a00, max(a11, a22))
        return hi / lo
    q = (a00 + a11 + a22) / 3.0
    p2 = (a00 - q) ** 2 + (a11 - q) ** 2 + (a22 - q) ** 2 + 2.0 * p1
    p = math.sqrt(p2 / 6.0)
    b00, b11, b22 = (a00 - q) / p, (a11 - q) / p, (a22 - q) / p
    b01, b02, b12 = a01 / p, a02 / p, a12 / p
    r = 0.5 * (
        b00 * (b11 * b22 - b12 * b12)
        - b01 * (b01 * b22 - b12 * b02)
        + b02 * (b01 * b12 - b11 * b02)
    )
    r = min(1.0, max(-1.0, r))
    ph = math.acos(r) / 3.0
    e1 = q + 2.0 * p * math.cos(ph)
    e3 = q + 2.0 * p * math.cos(ph + 2.0 * math.pi / 3.0)
    return e1 / e3


@jit
def cond_from_sums(
    s0: float,
    s1: float,
    s2: float,
    s00: float,
    s01: float,
    s02: float,
    s11: float,
    s12: float,
    s22: float,
    cnt: int,
    min_count: int,
    ridge: float,
) -> float:
    """κ of (Σ + ridge·I) from running sums over ``cnt`` rows; NaN below ``min_count`` rows."""
    if cnt < min_count:
        return np.nan
    m0, m1, m2 = s0 / cnt, s1 / cnt, s2 / cnt
    return _sym3_cond(
        s00 / cnt - m0 * m0 + ridge,
        s01 / cnt - m0 * m1,
        s02 / cnt - m0 * m2,
        s11 / cnt - m1 * m1 + ridge,
        s12 / cnt - m1 * m2,
        s22 / cnt - m2 * m2 + ridge,
    )


@jit
def block_window_cond(
    blk: np.ndarray, g: int, q: int, nb: int, rows: int, min_count: int, ridge: float
) -> float:
    """κ of the window ending with stream g's block q: blocks max(0, q − nb + 1) … q of ``blk``.

    ``blk[g, q % nb]`` holds block q's nine sums (Σx, Σy, Σz, Σx², Σxy, Σxz, Σy², Σyz, Σz²),
    each accumulated from zero in row order; the window's sums add them oldest block first.
    Both the fused pass and ``kappa_groups`` call this, so their κ are bit-identical.
    """
    s0 = s1 = s2 = s00 = s01 = s02 = s11 = s12 = s22 = 0.0
    for b in range(max(0, q - nb + 1), q + 1):
        k = b % nb
        s0 += blk[g, k, 0]
        s1 += blk[g, k, 1]
        s2 += blk[g, k, 2]
        s00 += blk[g, k, 3]
        s01 += blk[g, k, 4]
        s02 += blk[g, k, 5]
        s11 += blk[g, k, 6]
        s12 += blk[g, k, 7]
        s22 += blk[g, k, 8]
    return cond_from_sums(s0, s1, s2, s00, s01, s02, s11, s12, s22, rows, min_count, ridge)


def kappa_groups(
    P: np.ndarray,
    perm: np.ndarray,
    offsets: np.ndarray,
    window: int,
    stride: int,
    min_count: int,
    ridge: float,
) -> np.ndarray:
    """Return κ per row (row order), NaN where the window holds fewer than min_count rows.

    numpy allocates, the kernel fills: each array numba allocates (a dtype and shape of its
    own) adds ~0.1-0.2 s to the first compile, which the dashboard waits for."""
    nb = max(1, window // stride)
    out = np.full(len(P), np.nan, np.float32)
    _kappa_groups(P, perm, offsets, stride, nb, min_count, ridge, out, np.empty((1, nb, 9)))
    return out


@jit
def _kappa_groups(
    P: np.ndarray,
    perm: np.ndarray,
    offsets: np.ndarray,
    stride: int,
    nb: int,
    min_count: int,
    ridge: float,
    out: np.ndarray,
    blk: np.ndarray,
) -> None:
    """``kappa_groups`` into ``out`` (float32, NaN-filled); ``blk`` (1, nb, 9): scratch."""
    for g in range(offsets.shape[0] - 1):
        a, b = offsets[g], offsets[g + 1]
        p0 = p1 = p2 = p00 = p01 = p02 = p11 = p12 = p22 = 0.0
        q = nb - nb  # 0 as an int64 variable: a literal 0 compiles block_window_cond twice
        first = a
        for j in range(a, b):
            r = perm[j]
            x, y, z = P[r, 0], P[r, 1], P[r, 2]
            # block sums from zero, in row order: the fused pass does the same arithmetic
            p0 += x
            p1 += y
            p2 += z
            p00 += x * x
            p01 += x * y
            p02 += x * z
            p11 += y * y
            p12 += y * z
            p22 += z * z
            if j + 1 - first == stride or j == b - 1:  # block q is complete (or the stream ends)
                k = q % nb
                blk[0, k, 0], blk[0, k, 1], blk[0, k, 2] = p0, p1, p2
                blk[0, k, 3], blk[0, k, 4], blk[0, k, 5] = p00, p01, p02
                blk[0, k, 6], blk[0, k, 7], blk[0, k, 8] = p11, p12, p22
                rows = j + 1 - a - max(0, q - nb + 1) * stride
                kq = block_window_cond(blk, 0, q, nb, rows, min_count, ridge)
                for t in range(first, j + 1):
                    out[perm[t]] = kq
                first = j + 1
                q += 1
                p0 = p1 = p2 = p00 = p01 = p02 = p11 = p12 = p22 = 0.0


def kappa_groups_ref(
    P: np.ndarray,
    perm: np.ndarray,
    offsets: np.ndarray,
    window: int,
    stride: int,
    min_count: int,
    ridge: float,
) -> np.ndarray:
    """Plain-numpy κ (np.cov + eigvalsh over each evaluation point's blocks)."""
    out = np.full(len(P), np.nan, np.float32)
    nb = max(1, window // stride)
    for g in range(len(offsets) - 1):
        rows = perm[offsets[g] : offsets[g + 1]]
        m = len(rows)
        last = 0
        for j in range(m):
            if (j + 1) % stride == 0 or j == m - 1:
                lo = max(0, (j // stride - nb + 1) * stride)
                w = P[rows[lo : j + 1]]
                k = np.nan
                if len(w) >= min_count:
                    cov = np.cov(w, rowvar=False, bias=True) + ridge * np.eye(3)
                    ev = np.linalg.eigvalsh(cov)
                    k = ev[-1] / ev[0]
                out[rows[last : j + 1]] = k
                last = j + 1
    return out


# ----------------------------------------------------------------------------- the partition
#: the κ gate's three sets, in the order ``partition_counts`` counts them
PARTITION = ("M_id", "M_deg", "undetermined")


def partition_counts(kappa: np.ndarray, degenerate: np.ndarray) -> np.ndarray:
    """Rows in M_id (κ ≤ K_max), M_deg (κ > K_max) and undetermined (κ NaN: the window is not
    full yet), as an int64 array in ``PARTITION`` order."""
    und = np.isnan(kappa)
    deg = np.asarray(degenerate, np.bool_)
    return np.array([int((~und & ~deg).sum()), int(deg.sum()), int(und.sum())], np.int64)


def partition_shares(counts: np.ndarray) -> dict[str, float]:
    """The partition as shares of its rows (all 0 when there are none) — the one place the
    dashboard, the run summary and `analyze` compute it."""
    n = max(1, int(counts.sum()))
    return {name: float(c) / n for name, c in zip(PARTITION, counts.tolist(), strict=True)}
