"""Attribution: Granger and AIPW find a planted cause and claim nothing without one; on the
simulator, a planted power cap is claimed and disappears when the cap is lifted."""

from __future__ import annotations

import numpy as np
import pytest

from engine.eesm.pipeline import decode_fused
from engine.levers.library import by_id as lever
from engine.manifest import WorkloadSpec
from engine.optimizer.attribution import aipw, attribute, granger, holm
from engine.optimizer.monitor import residuals
from engine.planner import predict_graph
from engine.planner.catalogue import by_id
from engine.schedule.causes import Cause
from engine.schedule.dag import build_dag, schedule
from engine.workloads.sim import SimState, SimWorkload

H100 = by_id("h100-sxm")


def test_granger_finds_a_lagged_driver_and_not_an_independent_series():
    rng = np.random.default_rng(0)
    n = 600
    x = rng.normal(size=n)
    y = np.zeros(n)
    for t in range(2, n):
        y[t] = 0.3 * y[t - 1] + 0.8 * x[t - 1] + rng.normal(scale=0.5)
    F, p = granger(y, x)
    assert p < 1e-6 and F > 10
    z = rng.normal(size=n)
    assert granger(y, z)[1] > 0.01


def test_granger_null_false_positive_rate_is_near_alpha():
    rng = np.random.default_rng(1)
    ps = [granger(rng.normal(size=300), rng.normal(size=300))[1] for _ in range(200)]
    assert 0.01 <= np.mean(np.array(ps) < 0.05) <= 0.10


def test_aipw_recovers_a_confounded_effect():
    rng = np.random.default_rng(2)
    n = 3000
    X = rng.normal(size=(n, 2))
    t = (rng.random(n) < 1 / (1 + np.exp(-1.5 * X[:, 0]))).astype(float)  # confounded by X0
    y = 0.5 * t + 1.0 * X[:, 0] + 0.3 * X[:, 1] + rng.normal(scale=0.5, size=n)
    naive = y[t == 1].mean() - y[t == 0].mean()
    ate, se, p = aipw(y, t, X)
    assert abs(naive - 0.5) > 0.5  # the naive difference is badly biased
    assert abs(ate - 0.5) < 3 * se and p < 1e-6
    _ate0, _, p0 = aipw(1.0 * X[:, 0] + rng.normal(scale=0.5, size=n), t, X)
    assert p0 > 0.01


def test_holm_is_monotone_and_conservative():
    adj = holm([0.01, 0.04, 0.03, 0.5])
    assert adj[0] == pytest.approx(0.04) and all(
        a >= p for a, p in zip(adj, [0.01, 0.04, 0.03, 0.5], strict=True)
    )


def _attribute(wl: SimWorkload, state: SimState, model):
    m = wl.measure(state, seed=1)
    dec = decode_fused(m.trace.segments, model)
    dag = build_dag(m.trace, H100, m.iterations, regimes=dec.labels, window=m.window)
    g = predict_graph(state.spec, H100)
    return attribute(
        residuals(m.trace, g),
        g,
        dag=dag,
        schedule=schedule(dag),
        telemetry=m.telemetry,
        clock_max_mhz=H100.sm_clock_max_mhz,
    )


def test_planted_power_cap_is_claimed_and_lifting_it_removes_the_claim(model):
    wl = SimWorkload("af2")
    capped = _attribute(wl, wl.base, model)
    h = capped.get(Cause.POWER_CAP)
    assert h is not None and h.claimed and h.impact > 0.01
    lifted = _attribute(wl, lever("power_policy").apply(wl.base), model)
    assert not (lifted.get(Cause.POWER_CAP) and lifted.get(Cause.POWER_CAP).claimed)


def test_each_workload_claims_the_causes_planted_in_it(model):
    claims = {
        w: {h.cause for h in _attribute(SimWorkload(w), SimWorkload(w).base, model).claimed}
        for w in ("hft-lob", "af2", "kitti")
    }
    assert {Cause.LAUNCH_OVERHEAD, Cause.PAGEABLE_COPY, Cause.UNFUSED_ELEMENTWISE} <= claims[
        "hft-lob"
    ]
    assert {Cause.UNFUSED_ATTENTION, Cause.FP32_MATMUL, Cause.ALLOCATOR_CHURN} <= claims["af2"]
    assert {Cause.DATA_LOADING, Cause.CONV_ALGO, Cause.LAYOUT_TRANSFORM} <= claims["kitti"]


def test_a_clean_workload_claims_nothing(model):
    """Big back-to-back GEMMs on one stream, pinned data, one step-end sync: nothing to blame."""
    k = {
        "op": "kernel",
        "klass": "GEMM",
        "stream": 1,
        "flops": 6e11,
        "bytes": 2e8,
        "grid": 1056,
        "block": 256,
        "regs": 64,
    }
    spec = WorkloadSpec.model_validate(
        {
            "name": "clean",
            "title": "clean",
            "description": "synthetic: generated in this test",
            "regime_mix": "COMPUTE",
            "streams": [1],
            "memory_used_bytes": 1 << 30,
            "framework_ns": 3000,
            "iteration": [{**k, "name": f"sm90_xmma_gemm_bf16_{i}"} for i in range(8)]
            + [{"op": "sync"}],
        }
    )
    wl = SimWorkload("hft-lob")
    wl.base = SimState(spec=spec)
    ranked = _attribute(wl, wl.base, model)
    assert ranked.claimed == [], [(h.cause.name, h.impact, h.confidence) for h in ranked.claimed]


def test_seed_interface_attribute_residuals_graph():
    """DESIGN §9: hypotheses = attribute(residuals, graph) — the replay graph built inside."""
    wl = SimWorkload("kitti")
    m = wl.measure(wl.base, seed=2)
    g = predict_graph(wl.base.spec, H100)
    ranked = attribute(residuals(m.trace, g), g)
    assert Cause.DATA_LOADING in {h.cause for h in ranked.claimed}
