"""The cuda_graphs ceiling from the critical path: on a host-bound eager trace (SYNTHETIC,
written by the test) it counts the host time between the launches it captures."""

from __future__ import annotations

import numpy as np

from engine.analyze.compute import analyze_trace
from engine.trace.read import read_trace
from tests.schedule.test_critical_path import _Host, _kineto


def test_host_bound_eager_ceiling_counts_the_gaps_between_launches(tmp_path):
    h = _Host()
    for i in range(200):  # 60 µs of Python between 4 µs launches of 6 µs kernels: host-bound
        h.launch(60.0, f"at::native::vectorized_elementwise_kernel<{i % 4}>", 6.0)
    res = analyze_trace(read_trace(_kineto(tmp_path, h.ev)))
    a = res.analysis
    cg = next(e for e in a.interventions if e.lever == "cuda_graphs")
    assert a.critical_path is not None
    host = next(p for p in a.critical_path.parts if p.part == "host")
    assert host.share > 0.8  # the premise: the path is the host's
    # the gaps between captured launches (all but the first of each region) are on the path
    # and the ceiling counts them: far above the launch-API time alone (4 µs of every 64)
    assert cg.ceiling is not None and cg.ceiling > 0.7
    assert "between the captured launches on the critical path" in cg.ceiling_basis
    # the prediction keeps that host time: it stays under its ceiling, uncapped
    assert cg.predicted_gain is not None and cg.predicted_gain < 0.1
    assert not cg.capped


def test_device_bound_trace_gets_no_host_ceiling(tmp_path):
    """The same launches with 300 µs kernels: the device is busy, the path is its kernels, and
    the ceiling counts no host time between launches (none is on the path)."""
    h = _Host()
    for i in range(200):
        h.launch(6.0, f"at::native::vectorized_elementwise_kernel<{i % 4}>", 300.0,
                 at=10.0 + 300.0 * i)  # fmt: skip
    res = analyze_trace(read_trace(_kineto(tmp_path, h.ev)))
    cg = next((e for e in res.analysis.interventions if e.lever == "cuda_graphs"), None)
    assert cg is None or (cg.ceiling or 0.0) < 0.01
    assert np.isfinite(res.analysis.span_ns)
