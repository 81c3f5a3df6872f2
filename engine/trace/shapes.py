"""FLOPs, bytes and arithmetic type of an operator from its recorded shapes (the DERIVED tier).

The PyTorch profiler with ``record_shapes=True`` writes each CPU op's ``Input Dims`` (a list of
shapes, ``[]`` for a scalar or None) and ``Input type`` (C++ type names). For the op families
that dominate GPU time the work follows from them:

* matmul: ``aten::mm`` [M,K]·[K,N] → 2MNK FLOPs; ``aten::addmm`` (bias, A, B) the same plus the
  bias add; ``aten::bmm`` / ``aten::baddbmm`` batched → 2BMNK;
* convolution, where the output shape is recorded or can be computed: ``convolution_backward``
  (grad_output, input, weight) → the output is grad_output; forward convolutions with
  ``Concrete Inputs`` (stride, padding, dilation, groups) → output size by the usual formula.
  Without them the output size is unknown and the op stays at the PRIOR tier (never guessed);
* attention: ``_scaled_dot_product_{flash,efficient,cudnn}_attention`` (q [B,H,L,E], k [B,H,S,E],
  v) → 4·B·H·L·S·E FLOPs forward (QKᵀ and PV), 2.5x that backward (five matmuls of that size);
* layer/batch/group norm, softmax and elementwise ops → bytes = the tensors read and written
  (FLOPs a small multiple of the elements: they are bandwidth-bound by construction).

Bytes are the tensors' logical sizes read once and written once: a lower bound on DRAM traffic
(caches can only remove re-reads that this count does not include, spills can only add). Ops not
listed here return None: their kernels keep the class prior.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: C++ type names in ``Input type`` → (DTYPES name or "" for non-float, bytes per element)
_TYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "long int": ("", 8),
    "int": ("", 4),
    "short int": ("", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("", 1),
    "bool": ("", 1),
}

#: elementwise / normalisation families: name → FLOPs per output element (an order of magnitude
#: only: these ops are bandwidth-bound, their regime follows from the bytes)
_ELEMENTWISE = re.compile(
    r"^aten::(add|sub|mul|div|relu|gelu|silu|sigmoid|tanh|threshold_backward|gelu_backward|"
    r"silu_backward|sigmoid_backward|tanh_backward|neg|exp|log|sqrt|rsqrt|pow|clamp|where|"
    r"masked_fill|copy|fill|zero|abs|native_dropout|dropout|mul_|add_|addcmul|addcdiv|lerp|"
    r"maximum|minimum|eq|ne|lt|gt|le|ge|_foreach_\w+)_?$"
)
_NORM = re.compile(
    r"^aten::(native_layer_norm|native_layer_norm_backward|native_batch_norm|"
    r"native_batch_norm_backward|cudnn_batch_norm|cudnn_batch_norm_backward|"
    r"native_group_norm|native_group_norm_backward|_fused_rms_norm|_softmax|"
    r"_softmax_backward_data|_log_softmax|_log_softmax_backward_data)$"
)
_NORM_FLOPS_PER_ELEMENT = 8  # mean, variance, normalise, scale, shift: ~5-10 per element


@dataclass(frozen=True)
class OpWork:
    """What one op computes: FLOPs, bytes moved (lower bound), DTYPES name ('' unknown)."""

    flops: float
    bytes: float
    dtype: str
    family: str


def _numel(dims: Any) -> int | None:
    if not isinstance(dims, list) or not all(isinstance(d, int) and d >= 0 for d in dims):
        return None
    return math.prod(dims) if dims else 1


def _tensors(dims: Sequence[Any], types: Sequence[Any]) -> list[tuple[list[int], str, int]]:
    """The tensor inputs: (shape, dtype name, element size) of every non-empty shape."""
    out = []
    for d, t in zip(dims, types, strict=False):
        if isinstance(d, list) and d and _numel(d) is not None and isinstance(t, str):
            name, size = _TYPES.get(t, ("", 0))
            if size:
                out.append((d, name, size))
    return out


def _float_dtype(ts: list[tuple[list[int], str, int]]) -> str:
    for _, name, _ in ts:
        if name and name != "int8":
            return name
    return ""


def _conv_out(
    x: list[int], w: list[int], concrete: Sequence[Any] | None
) -> list[int] | None:
    """Output shape of a forward convolution from Concrete Inputs (stride, padding, dilation)."""
    if not concrete or len(x) < 3 or len(w) != len(x):
        return None
    nsp = len(x) - 2
    vals = []
    for c in concrete[3:6]:  # input, weight, bias, stride, padding, dilation, …
        if not isinstance(c, str) or not c.startswith("["):
            return None
        try:
            nums = [int(v) for v in c.strip("[]").split(",") if v.strip()]
        except ValueError:
            return None
        vals.append(nums if len(nums) == nsp else nums * nsp if len(nums) == 1 else None)
    if any(v is None for v in vals):
        return None
    stride, pad, dil = vals
    spatial = [
        (x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(nsp)
    ]
    if any(s <= 0 for s in spatial):
        return None
    return [x[0], w[0], *spatial]


def op_work(
    name: str, dims: Sequence[Any], types: Sequence[Any], concrete: Sequence[Any] | None = None
) -> OpWork | None:
    """Return the work of op ``name`` from its recorded inputs, or None when it cannot be
    derived (unknown family, shapes missing or inconsistent)."""
    ts = _tensors(dims, types)
    if not ts:
        return None
    dt = _float_dtype(ts)
    moved = float(sum(_numel(d) * s for d, _, s in ts))  # type: ignore[operator]
    if name in ("aten::mm", "aten::addmm"):
        mats = [d for d, _, _ in ts if len(d) == 2]
        if len(mats) < 2:
            return None
        a, b = mats[-2], mats[-1]
        if a[1] != b[0]:
            return None
        m, k, n = a[0], a[1], b[1]
        size = ts[-1][2]
        return OpWork(2.0 * m * n * k, moved + m * n * size, dt, "matmul")
    if name in ("aten::bmm", "aten::baddbmm"):
        mats = [d for d, _, _ in ts if len(d) == 3]
        if len(mats) < 2:
            return None
        a, b = mats[-2], mats[-1]
        if a[0] != b[0] or a[2] != b[1]:
            return None
        bt, m, k, n = a[0], a[1], a[2], b[2]
        return OpWork(2.0 * bt * m * n * k, moved + bt * m * n * ts[-1][2], dt, "matmul")
    if name == "aten::convolution_backward":
        if len(ts) < 3:
            return None
        go, x, w = ts[0][0], ts[1][0], ts[2][0]
        if len(go) != len(x) or len(w) != len(x) or go[1] != w[0]:
            return None
        groups = max(1, x[1] // max(1, w[1]))
        per = 2.0 * _numel(go) * (x[1] // groups) * math.prod(w[2:])  # type: ignore[operator]
        # grad input and grad weight: each a convolution of the forward's size
        return OpWork(2 * per, moved + (_numel(x) + _numel(w)) * ts[1][2], dt, "conv")  # type: ignore[operator]
    # forward: aten::convolution / aten::_convolution (input, weight, bias, stride, padding,
    # dilation, …), whose Concrete Inputs give the output size; the cudnn_/miopen_ ops inside
    # them order their arguments differently and are covered by their parent (derive_ops walks
    # out to the nearest op whose work is known)
    if name in ("aten::convolution", "aten::_convolution"):
        if len(ts) < 2:
            return None
        x, w = ts[0][0], ts[1][0]
        out = _conv_out(x, w, concrete)
        if out is None:
            return None
        groups = max(1, x[1] // max(1, w[1]))
        flops = 2.0 * _numel(out) * (x[1] // groups) * math.prod(w[2:])  # type: ignore[operator]
        return OpWork(flops, moved + _numel(out) * ts[0][2], dt, "conv")  # type: ignore[operator]
    m_att = re.match(r"^aten::_scaled_dot_product_(flash|efficient|cudnn)_attention(_backward)?$", name)
    if m_att:
        q, k = ts[0][0], ts[1][0] if len(ts) > 1 else None
        if k is None or len(q) != 4 or len(k) != 4:
            return None
        b, h, lq, e = q
        s = k[2]
        fwd = 4.0 * b * h * lq * s * e
        return OpWork(fwd * (2.5 if m_att.group(2) else 1.0), moved + _numel(q) * ts[0][2], dt, "attention")  # type: ignore[operator]
    if _NORM.match(name):
        n = max(_numel(d) for d, _, _ in ts)  # type: ignore[type-var]
        return OpWork(float(_NORM_FLOPS_PER_ELEMENT * n), moved + n * ts[0][2], dt, "norm")  # type: ignore[operator]
    if _ELEMENTWISE.match(name):
        n = max(_numel(d) for d, _, _ in ts)  # type: ignore[type-var]
        # in-place ops (a trailing _) write into their first input: nothing extra written
        written = 0 if name.endswith("_") else n * ts[0][2]  # type: ignore[operator]
        return OpWork(float(n), moved + written, dt, "elementwise")
    return None


#: kernel-name marks of tensor-core TF32 math (cuBLAS/CUTLASS "s1688"/"s16816" tensorop, xmma
#: "tf32"): a float32 matmul or convolution that ran on tensor cores
_TF32 = re.compile(r"tf32|tensorop_s|s1688|s16816|sm80_xmma.*f32f32|_s16x8x8")


def kernel_dtype(op_dtype: str, family: str, kernel_name: str) -> str:
    """The arithmetic a kernel of op family ``family`` ran in: float32 matmuls and convolutions
    run in TF32 where the kernel's name says tensor-core TF32, else at the FP32 rate."""
    if op_dtype == "fp32" and family in ("matmul", "conv", "attention"):
        return "tf32" if _TF32.search(kernel_name.lower()) else "fp32"
    return op_dtype


#: op names whose work op_work may know (the rest are not worth parsing the event for)
_FAMILIES = re.compile(
    r"^aten::(mm|addmm|bmm|baddbmm|convolution_backward|_?convolution|"
    r"_scaled_dot_product_\w+_attention(_backward)?)$"
)


def may_derive(name: str) -> bool:
    """Whether op_work may know op ``name`` (so its event's shapes are worth reading)."""
    return bool(_FAMILIES.match(name) or _NORM.match(name) or _ELEMENTWISE.match(name))


def innermost_known(
    op_tid: Any, op_start: Any, op_end: Any, op_work_idx: Any, q_tid: Any, q_ts: Any
) -> list[int]:
    """For each query (a launch call on thread q_tid at time q_ts) the index into the ops of the
    innermost op on that thread whose interval contains it *and whose work is known*
    (op_work_idx >= 0), walking outward through the enclosing ops; -1 where none.

    Ops on one thread nest (the profiler records a call stack), so a sweep in time order with a
    stack of open ops finds them in O(n log n). Linking by time on the launching thread works
    for every Kineto version; older ones write the launch's own correlation as "External id"."""
    out = [-1] * len(q_ts)
    by_tid: dict[int, list[int]] = {}
    for i, t in enumerate(op_tid.tolist()):
        by_tid.setdefault(t, []).append(i)
    q_by_tid: dict[int, list[int]] = {}
    for j, t in enumerate(q_tid.tolist()):
        q_by_tid.setdefault(t, []).append(j)
    starts, ends, work = op_start.tolist(), op_end.tolist(), op_work_idx.tolist()
    qts = q_ts.tolist()
    for t, qs in q_by_tid.items():
        ops = by_tid.get(t)
        if not ops:
            continue
        ops.sort(key=lambda i: (starts[i], -ends[i]))
        qs.sort(key=lambda j: qts[j])
        stack: list[int] = []
        k = 0
        for j in qs:
            tq = qts[j]
            while k < len(ops) and starts[ops[k]] <= tq:
                i = ops[k]
                while stack and ends[stack[-1]] < starts[i]:
                    stack.pop()
                stack.append(i)
                k += 1
            while stack and ends[stack[-1]] < tq:
                stack.pop()
            for i in reversed(stack):
                if work[i] >= 0 and ends[i] >= tq:
                    out[j] = i
                    break
    return out
