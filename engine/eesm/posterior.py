"""Label confidence: posterior state probabilities from a forward–backward pass per stream.

The Viterbi path (viterbi.py) is the most likely *sequence* of regimes; how sure the model is of
one row's label is the posterior marginal P(state_t = label_t | every row of its stream), from
the same emissions, transitions and initial distribution. That is the confidence `gitm-tui
analyze` prints beside each label: a number the model computes, not a constant per tier.

Emissions here are log-domain scores known up to a per-row constant (the affine form of the
Bregman divergence, emission.py): a per-row constant multiplies every state's likelihood at that
row alike, so it cancels in the marginals.
"""

from __future__ import annotations

import math

import numpy as np

from engine.jit import jit


@jit
def _likelihood(E: np.ndarray, r: int, out: np.ndarray) -> None:
    """out[s] = exp(E[r, s] − max_s E[r, s]): the row's likelihoods up to its constant."""
    S = out.shape[0]
    m = E[r, 0]
    for s in range(1, S):
        if E[r, s] > m:
            m = E[r, s]
    for s in range(S):
        out[s] = math.exp(E[r, s] - m)  # math, not np: the interpreted kernel gives the same


#: rows whose forward variables (α) are held at once (posterior_groups)
_BLOCK = 4096


@jit
def _forward(
    E: np.ndarray,
    r: int,
    A: np.ndarray,
    lik: np.ndarray,
    prev: np.ndarray,
    out: np.ndarray,
    tmp: np.ndarray,
) -> None:
    """One forward step: out = α of row ``r`` from ``prev`` (the row before it), renormalised
    to sum 1 (``out`` may be ``prev``: the sums go to ``tmp`` first)."""
    S = lik.shape[0]
    _likelihood(E, r, lik)
    z = 0.0
    for s in range(S):
        acc = 0.0
        for i in range(S):
            acc += prev[i] * A[i, s]
        tmp[s] = acc * lik[s]
        z += tmp[s]
    for s in range(S):
        out[s] = tmp[s] / z


@jit
def posterior_groups(
    E: np.ndarray,
    perm: np.ndarray,
    offsets: np.ndarray,
    logA: np.ndarray,
    logpi: np.ndarray,
    labels: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Forward–backward over each group perm[offsets[g]:offsets[g+1]] (a stream, in time order).

    Returns (confidence (n,) float32 = posterior probability of ``labels[row]``, map (n,) uint8
    = the state of highest posterior probability), both in row order.

    Scaled (Rabiner) form: α and β are renormalised to sum 1 at every step, so the passes run
    in linear space — S exponentials per row instead of S² log-sum-exps, and no underflow
    (the likelihoods are shifted so the best state's is 1)."""
    n, S = E.shape
    conf = np.empty(n, np.float32)
    best = np.empty(n, np.uint8)
    A = np.empty_like(logA)  # libm's exp, elementwise: interpreted runs get the same bits
    for i in range(S):
        for j in range(S):
            A[i, j] = math.exp(logA[i, j])
    pi = np.empty(S)
    for s in range(S):
        pi[s] = math.exp(logpi[s])
    longest = 0
    for g in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[g + 1] - offsets[g])
    # α at the first row of every block of _BLOCK rows (the forward pass keeps only these); the
    # backward pass recomputes one block's α from its first, the same operations in the same
    # order, so the same bits: α of every row at once was 32 bytes a decoded row (the decode's
    # peak on a 10 M-event trace)
    first = np.empty(((longest + _BLOCK - 1) // _BLOCK, S))
    block = np.empty((_BLOCK, S))
    cur = np.empty(S)
    beta = np.empty(S)
    nxt = np.empty(S)
    lik = np.empty(S)
    for g in range(offsets.shape[0] - 1):
        a, b = offsets[g], offsets[g + 1]
        if b <= a:
            continue
        _likelihood(E, perm[a], lik)
        z = 0.0
        for s in range(S):
            cur[s] = pi[s] * lik[s]
            z += cur[s]
        for s in range(S):
            cur[s] /= z
            first[0, s] = cur[s]
        for j in range(a + 1, b):
            _forward(E, perm[j], A, lik, cur, cur, nxt)
            if (j - a) % _BLOCK == 0:
                for s in range(S):
                    first[(j - a) // _BLOCK, s] = cur[s]
        for s in range(S):
            beta[s] = 1.0
        for k in range((b - a - 1) // _BLOCK, -1, -1):
            lo = a + k * _BLOCK
            hi = min(b, lo + _BLOCK)
            for s in range(S):
                block[0, s] = first[k, s]
            for j in range(lo + 1, hi):
                _forward(E, perm[j], A, lik, block[j - lo - 1], block[j - lo], nxt)
            for j in range(hi - 1, lo - 1, -1):
                r = perm[j]
                z = 0.0
                top = 0
                for s in range(S):
                    nxt[s] = block[j - lo, s] * beta[s]
                    z += nxt[s]
                    if nxt[s] > nxt[top]:
                        top = s
                best[r] = top
                conf[r] = nxt[labels[r]] / z
                if j > a:  # β_{j-1}(i) = Σ_s A[i,s] · lik_j(s) · β_j(s), renormalised
                    _likelihood(E, r, lik)
                    z = 0.0
                    for i in range(S):
                        acc = 0.0
                        for s in range(S):
                            acc += A[i, s] * lik[s] * beta[s]
                        nxt[i] = acc
                        z += acc
                    for i in range(S):
                        beta[i] = nxt[i] / z
    return conf, best


def posterior_ref(E: np.ndarray, logA: np.ndarray, logpi: np.ndarray) -> np.ndarray:
    """Plain-numpy posterior marginals (n, S) of one sequence. The specification."""
    n, S = E.shape
    if n == 0:
        return np.zeros((0, S))
    la = np.empty((n, S))
    la[0] = logpi + E[0]
    for t in range(1, n):
        la[t] = np.logaddexp.reduce(la[t - 1][:, None] + logA, axis=0) + E[t]
    lb = np.zeros((n, S))
    for t in range(n - 2, -1, -1):
        lb[t] = np.logaddexp.reduce(logA + (E[t + 1] + lb[t + 1])[None, :], axis=1)
    post = la + lb
    post -= np.logaddexp.reduce(post, axis=1)[:, None]
    return np.exp(post)
