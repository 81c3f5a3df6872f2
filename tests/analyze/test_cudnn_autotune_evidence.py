"""cudnn_autotune reads the program's evidence (issue 47, item 5): it acts only on convolutions
cuDNN (or MIOpen) chose an algorithm for; where none ran — a standalone CUTLASS program, a
TensorRT engine — it is not applicable and says why; a kernel that only names a conversion
(NumericArrayConverter, vLLM's _typeConvert) is no convolution. The traces here are SYNTHETIC
(built by code), their kernel names real (tests/data/kernel_names.tsv gives each one's source)."""

from __future__ import annotations

import numpy as np

from engine.analyze.advice.levers import replay_levers
from engine.planner.catalogue import by_id
from engine.regimes import Regime
from engine.trace.segments import Kind, NameTable, Segments
from engine.trace.taxonomy import classify
from engine.trace.trace import HostEvents, Trace

ATEN_ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)"
)
TRT = [
    "trt_turing_cutlass_image_network_first_layer_hmma_fprop_f16f16f32_nhwc_nhwc_k64r7s7c4_stride2x2",
    "sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize256x64x32_stage3_"
    "warpsize4x1x1_g1_tensor16x8x16_t1r3s3_aACCESS",
    "ampere_h16816cudnn_128x128_ldg8_relu_exp_stages_64x3_large_nhwc_tn_v1",
]
CUDNN = [
    "cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_"
    "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer",
]
CUTLASS_CONV = ["cutlass_tensorop_s16816fprop_optimized_f16_128x128_64x4_nhwc"]
NUMERIC_ARRAY_CONVERTER_GEMM = (
    "void Kernel<GemmGrouped<MmaPipelined<GemmShape<128, 128, 8>, float, RowMajor, "
    "NumericArrayConverter<float, float, 4, 2, Identity>, NumericArrayConverter<float, float, 4, "
    "2, Identity>, bool>, Epilogue<GemmShape<128, 128, 8>, LinearCombination<float, 1, float, "
    "float, 0, 2, float>>>>(Params)"
)
TYPE_CONVERT_NORM = (
    "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
    "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, "
    "long, c10::BFloat16 const*, float, int, int)"
)


def _trace(names: list[str]) -> Trace:
    """SYNTHETIC: each name launched four times back to back on one stream, classes by the
    taxonomy, 40 µs each."""
    table = NameTable()
    rows = [n for n in names for _ in range(4)]
    n = len(rows)
    t0 = np.arange(n, dtype=np.int64) * 50_000
    seg = Segments.from_columns(
        start_ns=t0 + 5_000,
        end_ns=t0 + 45_000,
        stream=np.full(n, 7, np.int32),
        kind=np.full(n, Kind.KERNEL, np.uint8),
        klass=np.array([classify(r) for r in rows], np.uint8),
        name=np.array([table.intern(r) for r in rows], np.int32),
        correlation=np.arange(1, n + 1, dtype=np.int64),
        grid=np.full(n, 1024, np.int32),
        block=np.full(n, 256, np.int32),
    )
    host = HostEvents(
        correlation=np.arange(1, n + 1, dtype=np.int64),
        stream=np.full(n, 7, np.int32),
        api_start_ns=t0,
        api_end_ns=t0 + 4_000,
    )
    return Trace(seg, table, host, device_properties={"format": "kineto"})


def _autotune(names: list[str]):
    tr = _trace(names)
    regimes = np.full(len(tr.segments), Regime.COMPUTE, np.uint8)
    est = replay_levers(tr, by_id("a100-80gb"), regimes, threads=1).estimates
    return next((e for e in est if e.lever == "cudnn_autotune"), None)


def test_a_tensorrt_engine_is_not_tuned_by_cudnn_benchmark():
    e = _autotune(TRT)
    assert e is not None and e.status == "not_applicable", e
    assert "TensorRT engine" in e.basis and "tactics were chosen" in e.basis
    assert e.rows == 12 and e.predicted_gain is None and e.gain_high is None


def test_a_standalone_cutlass_convolution_is_not_cudnn():
    e = _autotune([*CUTLASS_CONV, NUMERIC_ARRAY_CONVERTER_GEMM])
    assert e is not None and e.status == "not_applicable", e
    assert "no cuDNN (or MIOpen) convolution ran" in e.basis and "4 cutlass" in e.basis


def test_names_that_only_say_convert_are_no_convolution():
    """The issue's two cases: a standalone CUTLASS GEMM (NumericArrayConverter in its epilogue)
    and vLLM's fused_add_rms_norm (_typeConvert): no convolution, so no cudnn_autotune at all."""
    assert _autotune([NUMERIC_ARRAY_CONVERTER_GEMM, TYPE_CONVERT_NORM]) is None


def test_cudnn_convolutions_in_a_pytorch_program_are_tuned():
    e = _autotune([*CUDNN, ATEN_ADD])
    assert e is not None and e.status == "predicted", e
    assert e.rows == 8 and "cuDNN/MIOpen conv rows" in e.what


def test_only_the_cudnn_convolutions_of_a_mixed_program_are_tuned():
    """A PyTorch program that also runs a TensorRT engine's kernels (torch-tensorrt): the
    cuDNN-named convolutions are tuned, the TensorRT-named tactics are not."""
    e = _autotune([CUDNN[0], TRT[0], ATEN_ADD])
    assert e is not None and e.status == "predicted" and e.rows == 4, e
