"""What an op's recorded shapes say it reads and writes: out= forms, in-place forms, and which
of a math op's kernels take its work (issue 35: counts that put rows above the device's peak)."""

from __future__ import annotations

import numpy as np

from engine.trace.kineto.derive import _does_the_math
from engine.trace.kineto.shapes import OpWork, op_work
from engine.trace.segments import Klass, NameTable

F = "float"


def test_out_form_writes_its_output_once_and_does_not_read_it():
    n = 1705 * 512 * 4
    functional = op_work("aten::mul", [[1705, 512], [1705, 512]], [F, F])
    out_form = op_work("aten::mul", [[1705, 512], [], [1705, 512]], [F, "double", F])
    assert functional is not None and out_form is not None
    assert functional.bytes == 3 * n  # two read, one written
    assert out_form.bytes == 2 * n  # self read (the scalar is no tensor), out written


def test_add_with_alpha_is_not_taken_for_an_out_form():
    w = op_work("aten::add", [[8, 8], [8, 8], []], [F, F, "Scalar"])
    assert w is not None and w.bytes == 3 * 64 * 4
    o = op_work("aten::add", [[8, 8], [8, 8], [], [8, 8]], [F, F, "Scalar", F])
    assert o is not None and o.bytes == 3 * 64 * 4  # out written once, not read and written


def test_in_place_reads_and_writes_its_first_argument():
    w = op_work("aten::add_", [[100], [100], []], [F, F, "Scalar"])
    assert w is not None and w.bytes == 3 * 400  # self read, other read, self written
    b = op_work("aten::add_", [[64, 15], [15], []], [F, F, "Scalar"])
    assert b is not None and b.bytes == 2 * 64 * 15 * 4 + 15 * 4


def test_overwriting_in_place_ops_do_not_read_their_target():
    c = op_work("aten::copy_", [[10, 10], [10, 10], []], ["long", "int", "Scalar"])
    assert c is not None and c.bytes == 100 * 8 + 100 * 4
    f = op_work("aten::fill_", [[10, 10], []], [F, "Scalar"])
    assert f is not None and f.bytes == 100 * 4


def test_matmul_out_form_keeps_its_operands():
    plain = op_work("aten::mm", [[4, 8], [8, 16]], [F, F])
    out = op_work("aten::mm", [[4, 8], [8, 16], [4, 16]], [F, F, F])
    assert plain == out and plain is not None and plain.flops == 2 * 4 * 8 * 16
    addmm_out = op_work(
        "aten::addmm",
        [[16], [4, 8], [8, 16], [], [], [4, 16]],
        [F, F, F, "Scalar", "Scalar", F],
    )
    assert addmm_out is not None and addmm_out.flops == 2 * 4 * 8 * 16
    assert addmm_out.bytes == (16 + 32 + 128 + 64) * 4


def test_comparison_writes_bools_and_where_writes_its_values_type():
    eq = op_work("aten::eq", [[1024], [1024]], [F, F])
    assert eq is not None and eq.bytes == 2 * 4096 + 1024
    wh = op_work("aten::where", [[1024], [1024], [1024]], ["bool", "long", "long"])
    assert wh is not None and wh.bytes == 1024 + 2 * 8192 + 8192


def test_a_gemm_ops_work_goes_to_its_math_kernels_only():
    names = NameTable()
    gemm = names.intern("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn>")
    red = names.intern("void splitKreduce_kernel<float, float, float, float, true, false>")
    epi = names.intern("void epilogue::impl::globalKernel<float, float, float, true, true>")
    copy = names.intern("void at::native::elementwise_kernel<128, 2, copy>")
    ew = names.intern("void at::native::vectorized_elementwise_kernel<4, add>")
    work = [OpWork(1e9, 1e6, "fp32", "matmul"), OpWork(1e3, 1e4, "fp32", "elementwise")]
    widx = np.array([0, 0, 0, 0, 1])
    klass = np.array([Klass.GEMM, Klass.GEMM, Klass.GEMM, Klass.COPY, Klass.ELEMENTWISE], np.uint8)
    name = np.array([gemm, red, epi, copy, ew], np.int32)
    assert _does_the_math(widx, work, klass, name, names).tolist() == [
        True, False, False, False, True
    ]  # fmt: skip
