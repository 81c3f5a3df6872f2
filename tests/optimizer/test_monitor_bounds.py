"""The kernel-time invariant's bounds (issue 35): a row that shared the device is judged on
its time alone, a derived count above peak is the count's fault, not a violation, and a
derived count's bound is wider than a counted one's."""

from __future__ import annotations

import numpy as np

from engine.optimizer.monitor import kernel_time
from engine.planner.graph import planner_priors


def _one(observed, expected, ideal, **kw):
    return kernel_time(
        np.zeros(1, np.intp),
        ["k"],
        np.zeros(1, np.int64),
        np.array([observed], float),
        np.array([expected], float),
        np.array([ideal], float),
        "test",
        **kw,
    )


def test_a_row_slower_than_its_bound_is_flagged_with_observed_and_bound():
    tol = float(planner_priors()["tolerance"])
    r = _one(10_000.0, 4_000.0, 1_000.0)
    assert r.checked == 1 and len(r.violations) == 1
    v = r.violations[0]
    assert v.observed == 10_000.0 and v.predicted == 4_000.0 * tol
    assert "10000 ns observed" in v.message and f"{4_000 * tol:.0f} ns allowed" in v.message
    assert not _one(4_000.0 * tol - 1, 4_000.0, 1_000.0).violations


def test_only_the_time_alone_on_the_device_counts_against_a_row():
    assert _one(10_000.0, 4_000.0, 1_000.0, shared=np.array([0.0])).violations
    # half of it beside another kernel: 5 µs alone, under the 6 µs bound
    assert not _one(10_000.0, 4_000.0, 1_000.0, shared=np.array([0.5])).violations


def test_the_trace_resolution_is_allowed_for():
    tol = float(planner_priors()["tolerance"])
    obs = 4_000.0 * tol + 500
    assert _one(obs, 4_000.0, 1_000.0).violations
    assert not _one(obs, 4_000.0, 1_000.0, resolution_ns=1000.0).violations


def test_derived_work_gets_the_uncertainty_of_its_count():
    pri = planner_priors()
    tol, unc = float(pri["tolerance"]), float(pri["derived_uncertainty"])
    obs = 4_000.0 * tol * (1 + unc) / 2  # between the counted and the derived bound
    assert _one(obs, 4_000.0, 1_000.0, measured=np.array([True])).violations
    assert not _one(obs, 4_000.0, 1_000.0, measured=np.array([False])).violations


def test_derived_work_above_peak_is_not_judged_and_is_counted():
    r = _one(500.0, 4_000.0, 1_000.0, measured=np.array([False]))
    assert not r.violations and r.checked == 0 and r.above_peak == 1
    assert r.as_dict()["above_peak"] == 1


def test_counted_work_faster_than_peak_is_a_violation():
    r = _one(500.0, 4_000.0, 1_000.0, measured=np.array([True]))
    assert r.checked == 1 and r.above_peak == 0 and len(r.violations) == 1
    assert "faster than the hardware" in r.violations[0].message
