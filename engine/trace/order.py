"""The stable order of a column that is nearly in order already, in int32.

A trace's rows come nearly in time order (host calls: 775 ascending runs in the 2 M-event
trace's 444k rows, 43 in the real trace's 24.7k; each stream's device rows: tens of runs).
numpy's stable argsort returns 8-byte indices and sorts with a timsort buffer of 4 bytes a row
more; ``stable_order`` merges the runs into 4-byte indices with a buffer of 2 — 13 MiB less at
the idle-call merge of a 10 M-event trace, whose peak it was."""

from __future__ import annotations

import numpy as np

from engine.jit import interpreting, jit

#: keys count as nearly in order (merged by the kernel) with fewer than one descent in this
#: many; keys in no order are sorted by numpy (~2x faster there: it sorts short runs first)
NEARLY = 64
#: shorter keys are sorted by numpy (nothing to save; no kernel to run interpreted)
SHORT = 1 << 12


def stable_order(key: np.ndarray) -> np.ndarray:
    """``np.argsort(key, kind="stable")``, as int32 where ``key`` has fewer than 2**31 rows."""
    n = len(key)
    if n >= 2**31:
        return np.argsort(key, kind="stable")
    if n < SHORT or interpreting() or NEARLY * np.count_nonzero(key[1:] < key[:-1]) >= n:
        return np.argsort(key, kind="stable").astype(np.int32)
    order = np.empty(n, np.int32)
    _stable_order(np.ascontiguousarray(key), order, np.empty(n // 2 + 1, np.int32))
    return order


@jit
def _stable_order(key: np.ndarray, order: np.ndarray, buf: np.ndarray) -> None:
    """``order`` := the stable order of ``key`` (np.argsort's, kind="stable"), merging its
    ascending runs pairwise; ``buf`` holds the shorter side of each merge (len(key) // 2 + 1).

    Few passes for keys nearly in order (a few hundred runs in 444k rows)."""
    n = key.shape[0]
    for i in range(n):
        order[i] = i
    runs = 1
    for i in range(1, n):
        if key[i] < key[i - 1]:
            runs += 1
    bnd = np.empty(runs + 1, np.int64)  # each run's first row, then n
    bnd[0] = 0
    j = 1
    for i in range(1, n):
        if key[i] < key[i - 1]:
            bnd[j] = i
            j += 1
    bnd[runs] = n
    while runs > 1:
        w = 0
        r = 0
        while r + 1 < runs:
            lo, mid, hi = bnd[r], bnd[r + 1], bnd[r + 2]
            bnd[w] = lo
            w += 1
            r += 2
            # rows already in place stay (timsort's trim): the left run's rows up to the
            # right run's first key, the right run's rows from the left run's last key on
            x = key[order[mid]]
            a, b = lo, mid
            while a < b:
                c = (a + b) // 2
                if key[order[c]] <= x:
                    a = c + 1
                else:
                    b = c
            lo = a
            x = key[order[mid - 1]]
            a, b = mid, hi
            while a < b:
                c = (a + b) // 2
                if key[order[c]] < x:
                    a = c + 1
                else:
                    b = c
            hi = a
            if lo == mid or mid == hi:
                continue
            if mid - lo <= hi - mid:  # the left run into buf; merge forward
                for t in range(mid - lo):
                    buf[t] = order[lo + t]
                a, na, b, k = 0, mid - lo, mid, lo
                while a < na and b < hi:
                    if key[order[b]] < key[buf[a]]:  # ties: the left (earlier) row first
                        order[k] = order[b]
                        b += 1
                    else:
                        order[k] = buf[a]
                        a += 1
                    k += 1
                while a < na:
                    order[k] = buf[a]
                    a += 1
                    k += 1
            else:  # the right run into buf; merge backward
                for t in range(hi - mid):
                    buf[t] = order[mid + t]
                a, b, k = mid - 1, hi - mid - 1, hi - 1
                while a >= lo and b >= 0:
                    if key[buf[b]] < key[order[a]]:  # ties: the right (later) row last
                        order[k] = order[a]
                        a -= 1
                    else:
                        order[k] = buf[b]
                        b -= 1
                    k -= 1
                while b >= 0:
                    order[k] = buf[b]
                    b -= 1
                    k -= 1
        if r < runs:  # an odd run out: merged in the next pass
            bnd[w] = bnd[r]
            w += 1
        bnd[w] = n
        runs = w
