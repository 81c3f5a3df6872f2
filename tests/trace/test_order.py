"""engine.trace.order: the stable order of nearly ordered columns, in int32."""

from __future__ import annotations

import numpy as np
import pytest

from engine.jit import interpreted
from engine.trace import order


def _keys(n: int) -> list[np.ndarray]:
    """Keys with ties, in order, reversed, in no order and nearly in order (a few rows
    swapped; and blocks that overlap in time, as a file's threads write them)."""
    rng = np.random.default_rng(n)
    near = np.sort(rng.integers(0, 10**6, n))
    if n > 2:
        i, j = rng.integers(0, n, 2)
        near[i], near[j] = near[j], near[i]
    blocks = np.concatenate(
        [np.sort(rng.integers(k * 100, k * 100 + 300, n // 4 + 1)) for k in range(4)]
    )[:n]
    cases = [
        rng.integers(0, 5, n),
        np.sort(rng.integers(0, 50, n)),
        np.sort(rng.integers(0, 50, n))[::-1],
        rng.integers(0, 10**12, n),
        near,
        blocks,
    ]
    return [np.ascontiguousarray(k, np.int64) for k in cases]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 64, 1000, 5000])
def test_the_run_merging_kernel_is_numpys_stable_argsort(n):
    for key in _keys(n):
        got = np.empty(n, np.int32)
        order._stable_order(key, got, np.empty(n // 2 + 1, np.int32))
        np.testing.assert_array_equal(got, np.argsort(key, kind="stable"))


@pytest.mark.parametrize("n", [0, 5, 5000, 20_000])
def test_stable_order_is_numpys_in_int32_whichever_sort_it_picks(monkeypatch, n):
    # as set; every key merged by the kernel; every key but a sorted one sorted by numpy
    for short, nearly in ((order.SHORT, order.NEARLY), (0, 0), (0, 10**9)):
        monkeypatch.setattr(order, "SHORT", short)
        monkeypatch.setattr(order, "NEARLY", nearly)
        for key in _keys(n):
            got = order.stable_order(key)
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, np.argsort(key, kind="stable"))


def test_nothing_runs_as_python_loops_while_interpreted(monkeypatch):
    """A first run's interpreted analysis sorts with numpy (the kernel would run as Python)."""
    monkeypatch.setattr(order, "SHORT", 0)
    monkeypatch.setattr(order, "NEARLY", 0)  # (any key: the kernel, when not interpreted)
    key = np.arange(10_000, dtype=np.int64)[::-1].copy()
    called: list[tuple] = []
    monkeypatch.setattr(order, "_stable_order", lambda *a: called.append(a))
    with interpreted():
        got = order.stable_order(key)
    assert not called and got.dtype == np.int32 and got[0] == 9_999
    order.stable_order(key)  # (not interpreted: the kernel)
    assert len(called) == 1
