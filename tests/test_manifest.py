"""Manifests validate, cite their numbers, and reject what they should."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine.manifest import (
    HardwareSpec,
    ManifestError,
    WorkloadSpec,
    flatten_ops,
    load_eesm,
    load_hardware,
    load_workload,
    workload_names,
)


def test_every_hardware_number_has_a_citation():
    hw = load_hardware()
    cited = set(hw.citations)
    for field in (
        "sm_count",
        "sm_clock_max_mhz",
        "hbm_bandwidth_Bps",
        "memory_bytes",
        "tdp_w",
        "launch_api_ns",
        "kernel_floor_ns",
        "h2d_pinned_Bps",
        "class_efficiency",
    ):
        assert field in cited, field
    for dtype in ("fp32", "tf32", "bf16"):
        assert f"peak_flops.{dtype}" in cited
    # the datasheet's dense BF16 figure is 4 tensor cores × 1024 FLOP/clk × SMs × 1.83 GHz
    assert (
        abs(hw.peak_flops["bf16"] - hw.sm_count * 4 * 1024 * 1.83e9) / hw.peak_flops["bf16"] < 1e-3
    )


def test_three_workloads_with_documented_mix():
    assert workload_names() == ["af2", "hft-lob", "kitti"]
    for name in workload_names():
        w = load_workload(name)
        assert w.regime_mix and w.description and len(w.streams) >= 2
        assert len(flatten_ops(w.iteration)) > 10


def test_unknown_workload_names_the_known_ones():
    with pytest.raises(ManifestError, match="known: af2, hft-lob, kitti"):
        load_workload("resnet")


def test_workload_spec_rejects_undeclared_stream_and_unrecorded_event():
    base = {
        "name": "x",
        "title": "x",
        "description": "x",
        "regime_mix": "x",
        "streams": [1],
        "memory_used_bytes": 1,
        "framework_ns": 0,
    }
    kernel = {
        "op": "kernel",
        "name": "k",
        "klass": "GEMM",
        "stream": 2,
        "flops": 1,
        "bytes": 1,
        "grid": 1,
        "block": 32,
    }
    with pytest.raises(ValidationError, match="not declared"):
        WorkloadSpec.model_validate({**base, "iteration": [kernel]})
    with pytest.raises(ValidationError, match="never recorded"):
        WorkloadSpec.model_validate(
            {**base, "iteration": [{"op": "wait", "stream": 1, "event": "e"}]}
        )
    with pytest.raises(ValidationError, match="unknown kernel class"):
        WorkloadSpec.model_validate(
            {**base, "iteration": [{**kernel, "stream": 1, "klass": "FFT"}]}
        )


def test_loops_unroll_in_program_order():
    w = load_workload("hft-lob")
    names = [getattr(o, "name", o.op) for o in flatten_ops(w.iteration)]
    lstm = [n for n in names if "lstm" in n]
    assert len(lstm) == 32 and lstm[0].startswith("cutlass") and lstm[1] == "lstm_gates_pointwise"


def test_eesm_params_shape():
    p = load_eesm()
    assert p.centroid_matrix().shape == (4, 3)
    assert p.prior_matrix().shape == (9, 3)
    assert 0 < p.p_stay < 1 and p.fixed_lag >= 1


def test_hardware_spec_requires_all_classes(hw):
    data = hw.model_dump()
    del data["class_efficiency"]["GEMM"]
    with pytest.raises(ValidationError, match="GEMM"):
        HardwareSpec.model_validate(data)


def test_kappa_window_must_be_whole_blocks():
    from engine.manifest import KappaParams

    ok = {"window": 256, "stride": 32, "min_count": 32, "ridge": 1e-4, "k_max": 200.0}
    assert KappaParams(**ok).window == 256
    with pytest.raises(ValidationError, match=r"multiple of kappa\.stride"):
        KappaParams(**{**ok, "window": 250})


def test_the_simulated_device_is_its_catalogue_entry():
    """One model of each GPU: the simulator, the planner and `analyze` read the same peaks."""
    from engine.manifest import CATALOGUE_FIELDS
    from engine.planner.catalogue import by_id

    hw = load_hardware()
    entry = by_id(hw.id)
    for field in CATALOGUE_FIELDS:
        assert getattr(hw, field) == getattr(entry, field), field
    assert hw.memory_bytes == entry.memory_gb * 2**30


def test_a_telemetry_manifest_restating_a_peak_is_rejected(monkeypatch):
    import engine.manifest as manifest

    real = manifest._read

    def fake(rel):
        if rel == "fake.json":
            return dict(real("h100_telemetry.json"), hbm_bandwidth_Bps=4e12)
        return real(rel)

    monkeypatch.setattr(manifest, "_read", fake)
    with pytest.raises(ManifestError, match="restates hbm_bandwidth_Bps"):
        manifest.load_hardware("fake")


def test_lever_priors_are_one_manifest_with_ranges_and_sources():
    """Every effect-model prior the levers scale by comes from manifests/lever_priors.json with
    its stated range and source; a value outside its own range is refused."""
    import json

    from engine.levers import priors
    from engine.manifest import LeverPriors, load_lever_priors
    from tests.paths import ROOT

    m = load_lever_priors()
    for key, p in m.priors.items():
        assert getattr(priors, key) is p and p.source.strip()
        assert p.low <= p.value <= p.high
    assert m.priors["ALLOC"].value == priors.ALLOC_FACTOR
    doc = json.loads((ROOT / "manifests" / "lever_priors.json").read_text())
    doc["priors"]["FLASH"]["value"] = 0.95  # outside its stated 0.5-0.75
    with pytest.raises(ValidationError, match="outside"):
        LeverPriors.model_validate(doc)
