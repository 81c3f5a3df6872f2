"""κ gate: condition number of the pressure covariance over a trailing window, per stream.

κ(Σ) = λ_max / λ_min of (Σ + ridge·I), Σ the (biased) covariance of the last ``window`` rows of
P on the same stream, evaluated every ``stride`` rows; each row gets the κ of the window that
ends at the next evaluation point of its stream (or at the stream's last row). Rows of a
stream that has fewer than ``min_count`` rows in the window get NaN (undetermined).
κ ≤ K_max → M_id (identifiable); κ > K_max → M_deg: the pressures have collapsed onto a line
or plane (e.g. memory pinned at 1 by HBM saturation) and labels there are low-confidence.
Diagnostic, not causal (DESIGN §4). The ridge bounds κ ≤ (λ_max + ridge)/ridge.

The numba kernel keeps running sums (O(1) per row) and solves the 3×3 symmetric
eigenproblem in closed form (trigonometric method); the reference uses numpy.linalg.eigvalsh.
"""

from __future__ import annotations

import math

import numpy as np

from engine.eesm._jit import jit


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
def kappa_groups(
    P: np.ndarray,
    perm: np.ndarray,
    offsets: np.ndarray,
    window: int,
    stride: int,
    min_count: int,
    ridge: float,
) -> np.ndarray:
    """Return κ per row (row order), NaN where the window holds fewer than min_count rows."""
    n = P.shape[0]
    out = np.full(n, np.nan, np.float32)
    for g in range(offsets.shape[0] - 1):
        a, b = offsets[g], offsets[g + 1]
        s0 = s1 = s2 = 0.0
        s00 = s01 = s02 = s11 = s12 = s22 = 0.0
        last = a
        for j in range(a, b):
            r = perm[j]
            x, y, z = P[r, 0], P[r, 1], P[r, 2]
            ox = oy = oz = 0.0
            if j - a >= window:
                o = perm[j - window]
                ox, oy, oz = P[o, 0], P[o, 1], P[o, 2]
            # one update per sum with (new − leaving) terms: the fused pass does the same
            # arithmetic, so both give bit-identical κ
            s0 += x - ox
            s1 += y - oy
            s2 += z - oz
            s00 += x * x - ox * ox
            s01 += x * y - ox * oy
            s02 += x * z - ox * oz
            s11 += y * y - oy * oy
            s12 += y * z - oy * oz
            s22 += z * z - oz * oz
            if (j - a + 1) % stride == 0 or j == b - 1:
                k = cond_from_sums(
                    s0,
                    s1,
                    s2,
                    s00,
                    s01,
                    s02,
                    s11,
                    s12,
                    s22,
                    min(j - a + 1, window),
                    min_count,
                    ridge,
                )
                for q in range(last, j + 1):
                    out[perm[q]] = k
                last = j + 1
    return out


def kappa_groups_ref(
    P: np.ndarray,
    perm: np.ndarray,
    offsets: np.ndarray,
    window: int,
    stride: int,
    min_count: int,
    ridge: float,
) -> np.ndarray:
    """Plain-numpy κ (np.cov + eigvalsh at each evaluation point)."""
    out = np.full(len(P), np.nan, np.float32)
    for g in range(len(offsets) - 1):
        rows = perm[offsets[g] : offsets[g + 1]]
        m = len(rows)
        last = 0
        for j in range(m):
            if (j + 1) % stride == 0 or j == m - 1:
                w = P[rows[max(0, j + 1 - window) : j + 1]]
                k = np.nan
                if len(w) >= min_count:
                    cov = np.cov(w, rowvar=False, bias=True) + ridge * np.eye(3)
                    ev = np.linalg.eigvalsh(cov)
                    k = ev[-1] / ev[0]
                out[rows[last : j + 1]] = k
                last = j + 1
    return out
