"""Issue 47 item 4: a kernel's FLOP bound is the rate of the units it runs on. On CDNA the
datasheet gives FP32/FP64 matrix (MFMA) rates apart from the vector rates (MI250X: FP32 matrix
2x vector); a GEMM, convolution or attention kernel of such a dtype is judged against the
matrix rate, every other kernel against the vector rate (engine/manifest.py dtype_peak_table).
NVIDIA's FP32 has no tensor-core path: one rate for every class."""

from __future__ import annotations

import numpy as np
import pytest

from engine.eesm.pipeline import EesmModel, _at_dtype_peaks
from engine.manifest import dtype_peak_table
from engine.planner.catalogue import by_id, catalogue, estimate, identify
from engine.planner.graph import row_peaks
from engine.trace.read import read_trace
from engine.trace.segments import DTYPE_CODE, Kind, Klass, Segments
from tests.paths import TRACES

FP32, FP64, BF16 = DTYPE_CODE["fp32"], DTYPE_CODE["fp64"], DTYPE_CODE["bf16"]


def _peak(gpu: str, klass: Klass, dtype: int) -> float:
    return float(row_peaks(np.array([klass]), np.array([dtype]), by_id(gpu))[0])


def test_fp32_gemm_on_mi250x_is_judged_by_the_matrix_peak_an_elementwise_by_the_vector():
    """MI250X per GCD: FP32 matrix 47.85 TF (95.7 TF per card), FP32 vector 23.95 TF (47.9)."""
    assert _peak("mi250x", Klass.GEMM, FP32) == pytest.approx(47.85e12)
    assert _peak("mi250x", Klass.CONV, FP32) == pytest.approx(47.85e12)
    assert _peak("mi250x", Klass.ELEMENTWISE, FP32) == pytest.approx(23.95e12)
    assert _peak("mi250x", Klass.REDUCTION, FP64) == pytest.approx(23.95e12)
    assert _peak("mi250x", Klass.GEMM, FP64) == pytest.approx(47.85e12)
    # the same on the MI250 GCD / MI210 entry (ROCm MI250 table: 90.5 / 45.3 TF per OAM)
    assert _peak("mi250-gcd", Klass.GEMM, FP32) == pytest.approx(45.25e12)
    assert _peak("mi250-gcd", Klass.ELEMENTWISE, FP32) == pytest.approx(22.65e12)


def test_mi300x_fp64_gemm_at_the_matrix_rate_fp32_one_rate_and_fp8_listed():
    """MI300X (ROCm MI300 table): FP64 matrix 163.4 vs vector 81.7 TF; FP32 matrix = vector =
    163.4; FP8 and INT8 2,614.9 dense, now in the entry."""
    assert _peak("mi300x", Klass.GEMM, FP64) == pytest.approx(163.4e12)
    assert _peak("mi300x", Klass.ELEMENTWISE, FP64) == pytest.approx(81.7e12)
    assert _peak("mi300x", Klass.GEMM, FP32) == _peak("mi300x", Klass.NORM, FP32)
    g = by_id("mi300x")
    assert g.peak_flops["fp8"] == pytest.approx(2614.9e12)
    assert g.peak_flops["int8"] == pytest.approx(2614.9e12)


def test_nvidia_fp32_is_one_rate_for_every_class():
    """H100: FP32 67 TF whatever the class (TF32 is its own dtype); no NVIDIA entry lists a
    matrix rate."""
    assert _peak("h100-sxm", Klass.GEMM, FP32) == _peak("h100-sxm", Klass.ELEMENTWISE, FP32)
    assert _peak("h100-sxm", Klass.GEMM, FP32) == pytest.approx(67e12)
    assert all(not g.matrix_peak_flops for g in catalogue() if g.vendor == "nvidia")


def test_an_unknown_dtype_falls_back_to_the_class_peak():
    """A row with no dtype (code 0) keeps the class bound: BF16 for a GEMM, FP32 vector for an
    elementwise kernel."""
    assert _peak("mi250x", Klass.GEMM, 0) == pytest.approx(191.5e12)
    assert _peak("mi250x", Klass.ELEMENTWISE, 0) == pytest.approx(23.95e12)


def test_the_eesm_reads_an_fp32_gemm_against_the_matrix_rate():
    """SYNTHETIC rows on MI250X: an FP32 GEMM and an FP32 elementwise kernel each running 20 TF
    for 1 ms. The embedding's rescaled FLOPs (flops x class peak / dtype peak) put the GEMM at
    20/47.85 of its matrix peak and the elementwise at 20/23.95 of its vector peak."""
    hw = by_id("mi250x")
    m = EesmModel.build(hw)
    n = 2
    seg = Segments.from_columns(
        start_ns=np.array([0, 2_000_000]),
        end_ns=np.array([1_000_000, 3_000_000]),
        kind=np.full(n, Kind.KERNEL, np.uint8),
        name=np.arange(n, dtype=np.int32),
        klass=np.array([Klass.GEMM, Klass.ELEMENTWISE], np.uint8),
        flops=np.array([20e9, 20e9]),
        dram_bytes=np.array([1e6, 1e6]),
        dtype=np.array([FP32, FP32], np.uint8),
    )
    got = _at_dtype_peaks(seg, m)
    frac = got.flops / 1e-3 / m.class_peak[seg.klass]
    assert frac == pytest.approx([20e12 / 47.85e12, 20e12 / 23.95e12])


def test_the_table_has_a_row_per_class_and_a_column_per_dtype():
    t = dtype_peak_table(by_id("mi250x"))
    assert t.shape == (len(Klass), len(DTYPE_CODE) + 1)
    assert np.isnan(t[Klass.GEMM, DTYPE_CODE["fp8"]])  # CDNA 2 has no FP8: no peak, not a guess


def test_an_estimate_scales_the_matrix_rates_with_the_cus():
    """A gfx90a device in no entry (SYNTHETIC properties: 55 CUs, as one half of an MI250X GCD)
    is estimated from the nearest gfx90a entry; its matrix rates scale as its vector ones."""
    dev = {"name": "", "gfx": "gfx90a", "numSms": 55, "totalGlobalMem": 32 * 2**30}
    found = estimate(dev)
    assert found is not None
    g, ref = found[0], by_id("mi250-gcd")  # the gfx90a entry nearest 55 CUs (104, not 110)
    assert "'mi250-gcd'" in found[1]
    assert g.matrix_peak_flops["fp32"] == pytest.approx(ref.matrix_peak_flops["fp32"] * 55 / 104)
    assert g.peak_flops["fp32"] == pytest.approx(ref.peak_flops["fp32"] * 55 / 104)


def test_the_real_mi350x_trace_is_named_by_the_catalogue():
    """tests/data/traces/rocprof/tracelens_mi350x (rocprofv3, TraceLens test data): 'AMD
    Instinct MI350X', gfx950, 256 CUs → the MI350X entry, not an estimate."""
    t = read_trace(TRACES / "rocprof" / "tracelens_mi350x" / "908_results.json.gz")
    dev = t.device_properties["devices"][0]
    found = identify(dev)
    assert found.kind == "catalogue", found.why
    assert found.entry is not None and found.entry.id == "mi350x"
    assert found.entry.peak_flops["bf16"] == pytest.approx(2306.9e12)


@pytest.mark.parametrize(
    ("dev", "want"),
    [
        ({"name": "AMD Instinct MI355X", "gfx": "gfx950", "numSms": 256}, "mi355x"),
        ({"name": "NVIDIA H100 NVL", "numSms": 132, "totalGlobalMem": 95830 * 2**20}, "h100-nvl"),
        (
            {"name": "NVIDIA H100 80GB HBM3", "numSms": 132, "totalGlobalMem": 81559 * 2**20},
            "h100-sxm",
        ),
        ({"name": "NVIDIA GB200", "numSms": 152, "totalGlobalMem": 189471 * 2**20}, "gb200"),
        ({"name": "NVIDIA B200", "numSms": 148, "totalGlobalMem": 183359 * 2**20}, "b200"),
        ({"name": "NVIDIA L4", "numSms": 58, "totalGlobalMem": 22 * 2**30}, "l4"),
    ],
)
def test_current_gpus_are_named(dev, want):
    """Device properties as drivers report them (nvidia-smi memory totals quoted in the
    entries' sources; the H100 NVL's 94 GB as 95830 MiB is SYNTHETIC): each names one entry."""
    found = identify(dev)
    assert found.kind == "catalogue", found.why
    assert found.entry is not None and found.entry.id == want
