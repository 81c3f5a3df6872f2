"""S_markov: Viterbi decoding per stream, in batch and online fixed-lag forms.

Transition matrix: sticky — p_stay on the diagonal, (1 − p_stay)/(S − 1) elsewhere
(manifests/eesm.json). Scores are log-domain; at every step δ is shifted so that its max is 0,
which keeps magnitudes bounded on 10⁷-row streams and does not change any argmax. Ties go to
the lowest state index in every implementation, so batch, fixed-lag and reference agree exactly.

Fixed-lag (live data): the label of row t − L is final once row t has arrived. It is read by
tracing back L steps from argmax δ_t. When the tracebacks from *all* states meet at t − L the
label is provably the batch label (every later path passes through one of them); rows where
they do not meet are flagged not-exact. ``fixed_lag`` in the manifest is L.
"""

from __future__ import annotations

import numpy as np

from engine.jit import jit


def sticky_log_transitions(n_states: int, p_stay: float) -> np.ndarray:
    """Return log A for a sticky chain (S, S)."""
    off = (1.0 - p_stay) / (n_states - 1)
    A = np.full((n_states, n_states), off)
    np.fill_diagonal(A, p_stay)
    return np.log(A)


# The helpers below take a 2-D array plus a row index instead of a 1-D view: a numba view costs
# an atomic reference-count increment and decrement, which on a 4-state step is most of the work.
@jit
def _step(
    delta: np.ndarray,
    g: int,
    logA: np.ndarray,
    E: np.ndarray,
    r: int,
    new: np.ndarray,
    bp: np.ndarray,
    j: int,
) -> None:
    """δ[g] ← max_i(δ[g, i] + log A[i, s]) + E[r, s], shifted to max 0; bp[j, s] ← argmax i."""
    S = delta.shape[1]
    top = -np.inf
    for s in range(S):
        best = delta[g, 0] + logA[0, s]
        arg = 0
        for i in range(1, S):
            v = delta[g, i] + logA[i, s]
            if v > best:
                best = v
                arg = i
        new[s] = best + E[r, s]
        bp[j, s] = arg
        if new[s] > top:
            top = new[s]
    for s in range(S):
        delta[g, s] = new[s] - top


@jit
def _step_sticky(
    delta: np.ndarray,
    g: int,
    top_of: np.ndarray,
    ls: float,
    lsw: float,
    E: np.ndarray,
    r: int,
    new: np.ndarray,
    bp: np.ndarray,
    j: int,
) -> None:
    """``_step`` for a sticky chain, bit-identical to it (tested), in one comparison per state.

    δ[g] is normalised, so its first maximum m = top_of[g] is exactly 0. Then the best
    predecessor of m is m (ls > lsw + anything ≤ 0), and of any other state s it is s if
    δ[g, s] + ls beats lsw (= the switch from m), else m; on an exact tie the lower index,
    as in ``_step``.
    """
    S = delta.shape[1]
    m = top_of[g]
    top = -np.inf
    arg_top = 0
    for s in range(S):
        if s == m:
            v, arg = ls, m
        else:
            a = delta[g, s] + ls
            if a > lsw:
                v, arg = a, s
            elif a < lsw:
                v, arg = lsw, m
            else:
                v, arg = a, min(s, m)
        new[s] = v + E[r, s]
        bp[j, s] = arg
        if new[s] > top:
            top = new[s]
            arg_top = s
    for s in range(S):
        delta[g, s] = new[s] - top
    top_of[g] = arg_top


@jit
def _pred4(d: float, s: int, m: int, ls: float, lsw: float) -> tuple[float, int]:
    # best predecessor score and index of state s; see _step_sticky
    if s == m:
        return ls, m
    a = d + ls
    if a > lsw:
        return a, s
    if a < lsw:
        return lsw, m
    return a, min(s, m)


@jit
def _step_sticky4(
    delta: np.ndarray,
    g: int,
    top_of: np.ndarray,
    ls: float,
    lsw: float,
    e0: float,
    e1: float,
    e2: float,
    e3: float,
    bp: np.ndarray,
    j: int,
) -> None:
    """``_step_sticky`` unrolled for the four regimes, emissions passed as scalars.

    Four is the design's regime count (engine.regimes); unrolled, the step keeps everything in
    registers and measured ~1.5x faster in the fused pass than the loop form (tested equal).
    """
    m = top_of[g]
    n0, b0 = _pred4(delta[g, 0], 0, m, ls, lsw)
    n1, b1 = _pred4(delta[g, 1], 1, m, ls, lsw)
    n2, b2 = _pred4(delta[g, 2], 2, m, ls, lsw)
    n3, b3 = _pred4(delta[g, 3], 3, m, ls, lsw)
    n0 += e0
    n1 += e1
    n2 += e2
    n3 += e3
    bp[j, 0] = b0
    bp[j, 1] = b1
    bp[j, 2] = b2
    bp[j, 3] = b3
    top, at = n0, 0
    if n1 > top:
        top, at = n1, 1
    if n2 > top:
        top, at = n2, 2
    if n3 > top:
        top, at = n3, 3
    delta[g, 0] = n0 - top
    delta[g, 1] = n1 - top
    delta[g, 2] = n2 - top
    delta[g, 3] = n3 - top
    top_of[g] = at


@jit
def _sticky(logA: np.ndarray) -> bool:
    """Return whether logA has one diagonal value, one smaller off-diagonal value.

    The fast steps rely on staying being likelier than switching (ls > lsw); a chain with
    p_stay below 1/S is not 'sticky' and takes the general step.
    """
    S = logA.shape[0]
    if S < 2 or not logA[0, 0] > logA[1, 0]:
        return False
    for i in range(S):
        for j in range(S):
            if logA[i, j] != (logA[0, 0] if i == j else logA[1, 0]):
                return False
    return True


@jit
def _init(
    delta: np.ndarray, g: int, logpi: np.ndarray, E: np.ndarray, r: int, top_of: np.ndarray
) -> None:
    """δ[g] ← log π + E[r], shifted to max 0; top_of[g] ← index of that (first) maximum."""
    S = delta.shape[1]
    top = -np.inf
    arg_top = 0
    for s in range(S):
        delta[g, s] = logpi[s] + E[r, s]
        if delta[g, s] > top:
            top = delta[g, s]
            arg_top = s
    for s in range(S):
        delta[g, s] -= top
    top_of[g] = arg_top


@jit
def _argmax(x: np.ndarray, g: int) -> int:
    arg = 0
    for s in range(1, x.shape[1]):
        if x[g, s] > x[g, arg]:
            arg = s
    return arg


@jit
def viterbi_groups(
    E: np.ndarray, perm: np.ndarray, offsets: np.ndarray, logA: np.ndarray, logpi: np.ndarray
) -> np.ndarray:
    """Batch Viterbi over each group of rows perm[offsets[g]:offsets[g+1]]; labels in row order."""
    n, S = E.shape
    out = np.empty(n, np.uint8)
    bp = np.empty((n, S), np.int8)
    delta = np.empty((1, S))
    top_of = np.zeros(1, np.int64)
    new = np.empty(S)
    sticky = _sticky(logA)
    ls, lsw = logA[0, 0], logA[min(1, S - 1), 0]
    for g in range(offsets.shape[0] - 1):
        a, b = offsets[g], offsets[g + 1]
        if b <= a:
            continue
        _init(delta, 0, logpi, E, perm[a], top_of)
        for j in range(a + 1, b):
            r = perm[j]
            if sticky and S == 4:
                _step_sticky4(delta, 0, top_of, ls, lsw, E[r, 0], E[r, 1], E[r, 2], E[r, 3], bp, j)
            elif sticky:
                _step_sticky(delta, 0, top_of, ls, lsw, E, r, new, bp, j)
            else:
                _step(delta, 0, logA, E, r, new, bp, j)
        s = _argmax(delta, 0)
        out[perm[b - 1]] = s
        for j in range(b - 1, a, -1):
            s = bp[j, s]
            out[perm[j - 1]] = s
    return out


def viterbi_ref(E: np.ndarray, logA: np.ndarray, logpi: np.ndarray) -> np.ndarray:
    """Plain-numpy Viterbi of one sequence (n, S) → labels (n,). The specification."""
    n, S = E.shape
    out = np.empty(n, np.uint8)
    if n == 0:
        return out
    bp = np.zeros((n, S), np.int64)
    delta = logpi + E[0]
    delta = delta - delta.max()
    for t in range(1, n):
        scores = delta[:, None] + logA  # (from, to)
        bp[t] = scores.argmax(axis=0)  # first max on ties, as the kernel
        delta = scores.max(axis=0) + E[t]
        delta = delta - delta.max()
    s = int(delta.argmax())
    out[-1] = s
    for t in range(n - 1, 0, -1):
        s = int(bp[t, s])
        out[t - 1] = s
    return out


# ----------------------------------------------------------------------------- fixed lag
@jit
def fixed_lag_push(
    E: np.ndarray,
    logA: np.ndarray,
    logpi: np.ndarray,
    delta: np.ndarray,
    ring: np.ndarray,
    t0: int,
    out_labels: np.ndarray,
    out_exact: np.ndarray,
) -> int:
    """Feed rows E (m, S) of one stream whose state (δ, ring of L backpointer rows) has seen t0 rows.

    Writes the labels that became final (rows t0−L … in order) to out_labels/out_exact and
    returns how many. ``out_*`` must hold at least m entries.
    """
    m, S = E.shape
    L = ring.shape[0]
    new = np.empty(S)  # the one array allocated here: each dtype and shape numba allocates adds
    d2 = delta.reshape((1, S))  # ~0.1-0.2 s to the first dashboard's compile
    k = 0
    for i in range(m):
        t = t0 + i
        if t == 0:  # _init's arithmetic (its top_of is for the sticky steps, not used here)
            top = -np.inf
            for s in range(S):
                d2[0, s] = logpi[s] + E[i, s]
                if d2[0, s] > top:
                    top = d2[0, s]
            for s in range(S):
                d2[0, s] -= top
        else:
            _step(d2, 0, logA, E, i, new, ring, t % L)
        if t >= L:
            # trace back L steps from every state: the label is exact when all reach one state
            exact = True
            first = 0
            for s0 in range(S):
                s = s0
                for back in range(L):
                    s = ring[(t - back) % L, s]
                if s0 == 0:
                    first = s
                elif s != first:
                    exact = False
            s = _argmax(d2, 0)
            for back in range(L):
                s = ring[(t - back) % L, s]
            out_labels[k] = s
            out_exact[k] = exact
            k += 1
    return k


@jit
def fixed_lag_flush(
    delta: np.ndarray, ring: np.ndarray, t_seen: int, out_labels: np.ndarray
) -> int:
    """Finalise the last min(L, t_seen) rows by tracing back from argmax δ (= batch tail)."""
    L = ring.shape[0]
    pending = min(L, t_seen)
    if pending == 0:
        return 0
    s = _argmax(delta.reshape((1, delta.shape[0])), 0)
    t = t_seen - 1
    out_labels[pending - 1] = s
    for j in range(pending - 1, 0, -1):
        s = ring[t % L, s]
        t -= 1
        out_labels[j - 1] = s
    return pending


def fixed_lag_push_ref(
    E: np.ndarray,
    logA: np.ndarray,
    logpi: np.ndarray,
    delta: np.ndarray,
    ring: np.ndarray,
    t0: int,
    out_labels: np.ndarray,
    out_exact: np.ndarray,
) -> int:
    """Plain-numpy fixed-lag step (same contract as :func:`fixed_lag_push`)."""
    L = ring.shape[0]
    S = E.shape[1]
    k = 0
    for i in range(E.shape[0]):
        t = t0 + i
        if t == 0:
            d = logpi + E[i]
        else:
            scores = delta[:, None] + logA
            ring[t % L] = scores.argmax(axis=0)
            d = scores.max(axis=0) + E[i]
        delta[:] = d - d.max()
        if t >= L:
            states = np.arange(S)
            for back in range(L):
                states = ring[(t - back) % L, states]
            s = int(delta.argmax())
            for back in range(L):
                s = int(ring[(t - back) % L, s])
            out_labels[k] = s
            out_exact[k] = bool((states == states[0]).all())
            k += 1
    return k


def fixed_lag_flush_ref(
    delta: np.ndarray, ring: np.ndarray, t_seen: int, out_labels: np.ndarray
) -> int:
    """Plain-numpy fixed-lag flush (same contract as :func:`fixed_lag_flush`)."""
    L = ring.shape[0]
    pending = min(L, t_seen)
    if pending == 0:
        return 0
    s = int(delta.argmax())
    t = t_seen - 1
    out_labels[pending - 1] = s
    for j in range(pending - 1, 0, -1):
        s = int(ring[t % L, s])
        t -= 1
        out_labels[j - 1] = s
    return pending
