"""NVML, AMD SMI and pyrsmi backends against fakes raising the libraries' own errors: a field
unsupported, a GPU lost mid-run, the library missing — nothing crashes, nothing is invented."""

from __future__ import annotations

import pytest

from engine.telemetry.backends import (
    AmdSmiBackend,
    BackendUnavailable,
    NvmlBackend,
    PyrsmiBackend,
    open_backend,
)
from engine.telemetry.sample import TelemetrySample
from tests.fakes import (
    LIBRARY_NOT_FOUND,
    NO_PERMISSION,
    NOT_SUPPORTED,
    FakeAmdSmi,
    FakeNvml,
    FakeRocml,
    raises,
)


def test_nvml_reads_every_field_it_can():
    b = NvmlBackend(FakeNvml(n=2))
    assert [d.name for d in b.devices] == ["NVIDIA H100 80GB HBM3"] * 2
    s = b.sample()
    assert len(s) == 2
    a = s[0]
    assert a.source == "nvml" and a.gpu_util == 87 and a.mem_util == 41
    assert a.power_w == 512.0 and a.power_limit_w == 700.0 and a.sm_clock_mhz == 1755
    assert a.memory_used_bytes == 40 * 2**30 and a.clock_event_reasons == 0x4
    assert a.pcie_tx_Bps == 1200 * 1024 and a.processes == 1 and a.ecc_uncorrected == 0
    assert a.nvlink_tx_Bps is None and a.gpm is None  # unsupported on this fake: absent


def test_an_unsupported_field_is_absent_and_the_rest_flows():
    fake = FakeNvml(n=1)
    fake.fields[0].update(
        power=raises(NOT_SUPPORTED), temp=raises(NO_PERMISSION), reasons=raises(NOT_SUPPORTED)
    )
    (s,) = NvmlBackend(fake).sample()
    assert s.power_w is None and s.temperature_c is None and s.clock_event_reasons is None
    assert s.gpu_util == 87 and s.sm_clock_mhz == 1755  # not zeros, not guesses: the real rest


def test_everything_unsupported_invents_nothing():
    fake = FakeNvml(n=1)
    for k in list(fake.fields[0]):
        if k not in ("name", "uuid", "mem"):
            fake.fields[0][k] = raises(NOT_SUPPORTED)
    (s,) = NvmlBackend(fake).sample()
    d = s.to_dict()
    for k in (
        "gpu_util",
        "mem_util",
        "power_w",
        "power_limit_w",
        "sm_clock_mhz",
        "temperature_c",
        "clock_event_reasons",
        "pcie_tx_Bps",
        "ecc_uncorrected",
        "processes",
        "gpm",
    ):
        assert d[k] is None, k


def test_a_gpu_lost_mid_run_is_reported_and_the_others_go_on():
    fake = FakeNvml(n=3)
    fake.lose_after[1] = 2  # device 1 dies on its third sample (an Xid)
    b = NvmlBackend(fake)
    assert len(b.sample()) == 3 and len(b.sample()) == 3
    third = b.sample()
    assert [x.device for x in third] == [0, 2]
    assert "lost" in b.lost[1]
    assert [x.device for x in b.sample()] == [0, 2]  # not asked again, no crash
    assert "2×" in b.label


@pytest.mark.parametrize(
    ("code", "words"),
    [(LIBRARY_NOT_FOUND, "not found"), (NO_PERMISSION, "permission"), (9, "driver")],
)
def test_nvml_that_cannot_start_says_why_and_how_to_fix(code, words):
    with pytest.raises(BackendUnavailable) as e:
        NvmlBackend(FakeNvml(init_error=code))
    assert words in e.value.reason and e.value.remedy


def test_amdsmi_backend_and_its_errors():
    b = AmdSmiBackend(FakeAmdSmi(n=2, fail={"temp"}))
    s = b.sample()
    assert [x.device for x in s] == [0, 1] and s[0].source == "amdsmi"
    assert s[0].gpu_util == 73 and s[0].power_w == 410 and s[0].sm_clock_mhz == 2100
    assert s[0].memory_total_bytes == 196592 * 2**20 and s[0].temperature_c is None
    with pytest.raises(BackendUnavailable, match="amdsmi failed to start"):
        AmdSmiBackend(FakeAmdSmi(init_fails=True))
    gone = AmdSmiBackend(FakeAmdSmi(n=1, fail={"activity", "vram", "power", "clock", "temp"}))
    assert gone.sample() == [] and gone.lost  # a reset device: reported, no crash


def test_pyrsmi_fallback_treats_minus_one_as_absent():
    (s,) = PyrsmiBackend(FakeRocml(unsupported={"power"})).sample()
    assert s.source == "pyrsmi" and s.gpu_util == 55 and s.power_w is None


def test_auto_falls_back_to_the_simulator_and_says_why():
    try:
        real, _ = open_backend("nvidia")
    except BackendUnavailable:
        real = None
    if real is not None:  # a GPU machine: auto must pick the real GPU
        auto = open_backend("auto")[0]
        assert auto is not None and auto.name == "nvidia"
        return
    b, notes = open_backend("auto")
    assert b is None  # no real GPU: the caller runs the simulator
    assert any(n.startswith("nvidia:") for n in notes) and any(n.startswith("amd:") for n in notes)
    with pytest.raises(ValueError, match="unknown device"):
        open_backend("tpu")


def test_samples_round_trip_through_json():
    import json

    (s,) = NvmlBackend(FakeNvml(n=1)).sample()
    back = TelemetrySample.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
