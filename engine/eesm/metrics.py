"""Decoding accuracy against ground truth: confusion matrix, per-regime recall, macro-F1."""

from __future__ import annotations

import numpy as np

from engine.regimes import N_REGIMES, Regime


def confusion(truth: np.ndarray, pred: np.ndarray, n: int = N_REGIMES) -> np.ndarray:
    """Return the (n, n) int64 matrix C[t, p] = rows with truth t decoded as p."""
    t = np.asarray(truth, dtype=np.int64)
    p = np.asarray(pred, dtype=np.int64)
    return np.bincount(t * n + p, minlength=n * n).reshape(n, n)


def recall(conf: np.ndarray) -> dict[str, float | None]:
    """Return per-regime recall (None where the regime never occurs in the truth)."""
    out: dict[str, float | None] = {}
    for r in Regime:
        support = conf[r].sum()
        out[r.name] = float(conf[r, r] / support) if support else None
    return out


def macro_f1(conf: np.ndarray) -> float:
    """Return the mean F1 over regimes present in the truth (absent regimes are skipped)."""
    scores = []
    for r in Regime:
        tp = conf[r, r]
        support = conf[r].sum()
        if not support:
            continue
        predicted = conf[:, r].sum()
        prec = tp / predicted if predicted else 0.0
        rec = tp / support
        scores.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
    return float(np.mean(scores)) if scores else float("nan")


def accuracy(conf: np.ndarray) -> float:
    """Return the share of rows decoded as their true regime."""
    total = conf.sum()
    return float(np.trace(conf) / total) if total else float("nan")
