"""Emission scores from a Bregman divergence between pressures and regime centroids.

The divergence is the β-divergence (a Bregman divergence with generator φ_β): β = 2 is half the
squared Euclidean distance, β = 1 the generalised Kullback–Leibler divergence, β = 0
Itakura–Saito. Score of state s for row p:  e_s(p) = −λ · Σ_d D_β(p_d ‖ μ_sd).

Every Bregman divergence splits as D(p‖μ) = φ(p) + c(μ) + w(μ)·p with c = φ'(μ)μ − φ(μ) and
w = −φ'(μ). φ(p) is the same for every state, so it never changes an argmax or a Viterbi path:
the fast kernels use the affine part only (3 multiply-adds per state instead of logs), and the
tests check the two forms differ by a per-row constant.
"""

from __future__ import annotations

import numpy as np

from engine.jit import jit


def phi(x: np.ndarray, beta: float) -> np.ndarray:
    """Return the β-divergence generator φ_β(x), x > 0."""
    if beta == 1.0:
        return x * np.log(x) - x
    if beta == 0.0:
        return -np.log(x)
    return x**beta / (beta * (beta - 1.0))


def dphi(x: np.ndarray, beta: float) -> np.ndarray:
    """Return φ_β'(x), x > 0."""
    if beta == 1.0:
        return np.log(x)
    if beta == 0.0:
        return -1.0 / x
    return x ** (beta - 1.0) / (beta - 1.0)


def beta_divergence(p: np.ndarray, mu: np.ndarray, beta: float) -> np.ndarray:
    """Return D_β(p‖μ) elementwise (broadcasting), for p, μ > 0."""
    return phi(p, beta) - phi(mu, beta) - dphi(mu, beta) * (p - mu)


def affine_coefficients(
    centroids: np.ndarray, beta: float, scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """Return (W (S,3), c (S,)) so that emissions = −scale·(c + P·Wᵀ) up to a per-row constant."""
    mu = np.asarray(centroids, dtype=np.float64)
    w = -dphi(mu, beta)
    c = (dphi(mu, beta) * mu - phi(mu, beta)).sum(axis=1)
    return -scale * w, -scale * c


def emissions_ref(P: np.ndarray, centroids: np.ndarray, beta: float, scale: float) -> np.ndarray:
    """Full emission scores (n, S): −scale · Σ_d D_β(P_d ‖ μ_sd). The specification."""
    mu = np.asarray(centroids, dtype=np.float64)
    return -scale * beta_divergence(P[:, None, :], mu[None, :, :], beta).sum(axis=2)


@jit
def emissions_affine(P: np.ndarray, W: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Affine emission scores (n, S) = c + P·Wᵀ (W, c from :func:`affine_coefficients`)."""
    n, S = P.shape[0], W.shape[0]
    out = np.empty((n, S), np.float64)
    for i in range(n):
        for s in range(S):
            out[i, s] = c[s] + P[i, 0] * W[s, 0] + P[i, 1] * W[s, 1] + P[i, 2] * W[s, 2]
    return out


@jit
def emissions_in_place(PE: np.ndarray, W: np.ndarray, c: np.ndarray) -> None:
    """``emissions_affine`` over its input: ``PE`` (n, S), S >= 3, holds each row's pressures in
    its first three columns and, after, the row's S scores — the same arithmetic in the same
    order, so the same bits (each row's pressures are read before its scores are written).
    The decode of a 10 M-event trace held the pressures and the scores at once: 20 MiB more."""
    n, S = PE.shape[0], W.shape[0]
    for i in range(n):
        x, y, z = PE[i, 0], PE[i, 1], PE[i, 2]
        for s in range(S):
            PE[i, s] = c[s] + x * W[s, 0] + y * W[s, 1] + z * W[s, 2]


def emissions_affine_ref(P: np.ndarray, W: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Plain-numpy affine emission scores."""
    return c[None, :] + P @ W.T
