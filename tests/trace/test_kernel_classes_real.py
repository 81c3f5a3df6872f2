"""Kernel classes and precisions of real kernel names (tests/data/kernel_names.tsv, whose
kernel_names.md says where each name comes from and how it was labelled): the taxonomy's token
rules and the launching op (manifests/kernel_taxonomy.json), the precision reader's evidence
order (engine/trace/precision.py)."""

from __future__ import annotations

import csv
from dataclasses import dataclass

import numpy as np
import pytest

from engine.trace.segments import Klass
from engine.trace.taxonomy import classify, decide_by_op, klass_of_name, klass_of_op, library
from tests.paths import DATA

NAMES = DATA / "kernel_names.tsv"


@dataclass(frozen=True)
class Row:
    name: str
    library: str
    klass: str
    precision: str
    op: str
    recorded: str
    source: str


def _rows() -> list[Row]:
    with NAMES.open(newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    reader = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    return [
        Row(
            r["name"], r["library"], r["class"], r["precision"], r["op"], r["recorded"], r["source"]
        )
        for r in reader
    ]


ROWS = _rows()
MATH = ("GEMM", "CONV", "ATTENTION")


def _id(i: int) -> str:
    r = ROWS[i]
    return f"{i}-{r.library}-{r.name[:40]}"


def test_the_list_is_large_and_wide():
    assert len(ROWS) >= 300
    assert len({r.library for r in ROWS}) >= 8
    assert all(r.source for r in ROWS)
    assert {r.klass for r in ROWS} <= {k.name for k in Klass}


@pytest.mark.parametrize(
    "needle",
    [
        "nvjet_",
        "NumericArrayConverter",
        "_typeConvert",
        "Cijk_Alik_Bljk_BBS_BH_",
        "cutlass_75_tensorop_bf16_s1688gemm_bf16",
        "cutlass3x_sm90",
        "flash_fwd_",
        "flash_bwd_",
        "fused_add_rms_norm",
        "rms_norm_kernel",
        "paged_attention",
        "act_and_mul",
        "triton_poi_",
        "triton_red_",
        "triton_per_",
        "multimem_all_reduce",
        "igemm_",
        "_ZN2ck",
        "aiter",
    ],
)
def test_the_adversarial_names_are_in_it(needle):
    assert any(needle in r.name for r in ROWS), needle
    assert any(r.library == "TensorRT" for r in ROWS)


@pytest.mark.parametrize("i", range(len(ROWS)), ids=_id)
def test_class(i):
    r = ROWS[i]
    got = classify(r.name, None if r.op == "-" else r.op)
    assert got.name == r.klass, (r.name, r.op, r.source)


@pytest.mark.parametrize("i", [i for i, r in enumerate(ROWS) if r.precision != "-"], ids=_id)
def test_precision_from_the_name(i):
    from engine.trace.precision import name_precision

    r = ROWS[i]
    want = "" if r.precision == "unknown" else r.precision
    assert name_precision(r.name) == want, (r.name, r.source)


@pytest.mark.parametrize(
    "i", [i for i, r in enumerate(ROWS) if r.recorded != "-" and r.klass in MATH], ids=_id
)
def test_the_recorded_input_type_decides(i):
    """Evidence first: the launching op's recorded type is the kernel's, whatever the name
    says; a float32 op's kernel is TF32 where its name says so (tensor-core TF32 math)."""
    from engine.trace.precision import Basis, precision

    r = ROWS[i]
    got, basis = precision(r.recorded, r.name)
    if r.recorded == "fp32" and r.precision in ("tf32", "fp32"):
        assert (got, basis) == (r.precision, Basis.RECORDED_AND_NAME), r.name
    else:
        assert (got, basis) == (r.recorded, Basis.RECORDED), r.name


def test_the_launching_op_decides_only_math_and_unknown_names():
    """A GEMM kernel a convolution launched is a convolution (MIOpen's Tensile 1x1 convs, cuDNN's
    cuBLAS-style kernels); a layout transform or a split-K reduction it launched keeps its
    class; an op that is no matmul/conv/attention decides nothing."""
    decided = [r for r in ROWS if r.op != "-" and klass_of_name(r.name).name != r.klass]
    assert decided and all(r.klass in MATH for r in decided)
    tensile = "Cijk_Ailk_Bljk_BBS_BH_MT64x64x64_MI16x16x16x1"
    assert classify(tensile) == Klass.GEMM
    assert classify(tensile, "aten::miopen_convolution") == Klass.CONV
    assert classify("transpose_NCHW2CNHW_V2_2D_WG_off64", "aten::miopen_convolution") == Klass.COPY
    assert classify("mystery_kernel", "aten::mm") == Klass.GEMM
    assert classify("mystery_kernel", "aten::add") == Klass.OTHER
    assert classify("void splitKreduce_kernel<float>(x)", "aten::mm") == Klass.REDUCTION


def test_the_column_rule_is_the_row_rule():
    """decide_by_op (for an importer that knows each kernel's op) gives classify's answers."""
    rows = [r for r in ROWS if r.op != "-"]
    by_name = np.array([klass_of_name(r.name) for r in rows], np.uint8)
    ops = [klass_of_op(r.op) for r in rows]
    by_op = np.array([255 if k is None else int(k) for k in ops], np.uint8)
    want = [classify(r.name, r.op) for r in rows]
    assert decide_by_op(by_name, by_op).tolist() == [int(k) for k in want]
    assert decide_by_op(np.array([Klass.OTHER], np.uint8), np.array([Klass.GEMM], np.uint8)) == [
        Klass.GEMM
    ]


@pytest.mark.parametrize(
    "name,not_klass",
    [
        ("void Kernel<GemmGrouped<MmaPipelined<NumericArrayConverter<float, float, 4>>>>", "CONV"),
        ("vllm::_typeConvert<c10::BFloat16>::exists vllm::fused_add_rms_norm_kernel", "CONV"),
        ("fbgemm_gpu::permute_2D_data_kernel<int>", "GEMM"),
        ("triton_poi_fused__scaled_dot_product_flash_attention_cat_transpose_view_10", "ATTENTION"),
        ("triton_poi_fused__unsafe_view_add_addmm_clone_convolution_mul_view_7", "CONV"),
        ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>", "ATTENTION"),
        ("void moe::dev::finalize::finalizeKernelVecLoad<cutlass::bfloat16_t>", "GEMM"),
        ("MIOpenBatchNormFwdTrainSpatial", "CONV"),
    ],
)
def test_no_pattern_matches_inside_another_word(name, not_klass):
    assert classify(name).name != not_klass


@pytest.mark.parametrize(
    "name,lib",
    [
        ("trt_ampere_h16816gemm_128x64_ldg8_nn_v1", "tensorrt"),
        ("sm80_xmma_gemm_f16f16_f16f16_f16_tn_n_tilesize32x32x64_execute_kernel_trt", "tensorrt"),
        ("trt_turing_cutlass_image_network_first_layer_hmma_fprop_f16f16f32_nhwc", "tensorrt"),
        ("cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "cudnn"),
        (
            "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16>",
            "cudnn",
        ),
        ("void tensorrt_llm::kernels::quantize_with_block_size<2, __nv_bfloat16>", "tensorrt-llm"),
        ("igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32", "miopen"),
        ("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "cublaslt"),
        ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x256", "tensile"),
        (
            "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn>",
            "cutlass",
        ),
    ],
)
def test_library_of_a_name(name, lib):
    assert library(name) == lib
