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

What is read and what is written follows the op's form, which Kineto's op name does not carry
(``aten::add`` is every overload): the ``out=`` form records its output as one argument more
than the functional form (``_ARITY``): that tensor is written, not read, and written once; an
in-place op (``add_``) reads its first argument and writes it back (``copy_``, ``fill_`` and
``zero_`` only write it); the functional form writes a new tensor of the broadcast shape.

Bytes are the tensors' logical sizes, each read once and written once. They are not DRAM bytes:
a tensor the previous kernel left in L2 (40-80 MB on an A100/H100) is read without touching
DRAM, and a multi-pass kernel (a norm's statistics then its output) reads its input more than
once. A kernel whose derived bytes imply more than the HBM bandwidth is therefore evidence that
the count is not its DRAM traffic (engine.planner.graph.trace_roofline), not a kernel faster than
the hardware. Ops not listed here return None: their kernels keep the class prior.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from engine.jit import jit

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
    "long": ("", 8),
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


class _Tensor(NamedTuple):
    shape: list[int]
    dtype: str  # DTYPES name, "" for a non-float type
    size: int  # bytes per element
    numel: int


#: the most elements a recorded tensor may have (2**48: a pebibyte at four bytes each): a
#: trace is input from outside, and a larger shape is not a tensor that ran; it is refused,
#: not multiplied into FLOPs that overflow a float
MAX_NUMEL = 1 << 48
#: the largest stride, padding or dilation of a convolution taken from Concrete Inputs
_MAX_CONV_PARAM = 1 << 31


def _numel(dims: Any) -> int | None:
    if not isinstance(dims, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_NUMEL for d in dims
    ):
        return None
    n = math.prod(dims) if dims else 1
    return n if n <= MAX_NUMEL else None


def _tensors(dims: Sequence[Any], types: Sequence[Any]) -> list[_Tensor]:
    """The tensor inputs: every non-empty, well-formed shape of a known type."""
    out = []
    for d, t in zip(dims, types, strict=False):
        n = _numel(d) if isinstance(d, list) and d else None
        if n is not None and isinstance(t, str):
            name, size = _TYPES.get(t, ("", 0))
            if size:
                out.append(_Tensor(d, name, size, n))
    return out


def _conv_out(x: list[int], w: list[int], concrete: Sequence[Any] | None) -> list[int] | None:
    """Output shape of a forward convolution from Concrete Inputs (stride, padding, dilation)."""
    if not concrete or len(x) < 3 or len(w) != len(x):
        return None
    nsp = len(x) - 2
    vals: list[list[int]] = []
    for c in concrete[3:6]:  # input, weight, bias, stride, padding, dilation, …
        if not isinstance(c, str) or not c.startswith("["):
            return None
        try:
            nums = [int(v) for v in c.strip("[]").split(",") if v.strip()]
        except ValueError:
            return None
        if len(nums) == 1:
            nums = nums * nsp
        if len(nums) != nsp:
            return None
        vals.append(nums)
    if len(vals) != 3:
        return None
    stride, pad, dil = vals
    if not all(0 < v <= _MAX_CONV_PARAM for v in (*stride, *dil)) or not all(
        0 <= v <= _MAX_CONV_PARAM for v in pad
    ):
        return None  # a stride or dilation of 0 (or a negative padding) is no convolution
    spatial = [
        (x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(nsp)
    ]
    if any(s <= 0 for s in spatial):
        return None
    return [x[0], w[0], *spatial]


def _conv_flops(out: list[int], x: list[int], w: list[int]) -> float:
    """2 · output elements · input channels per group · kernel window."""
    groups = max(1, x[1] // max(1, w[1]))
    return 2.0 * math.prod(out) * (x[1] // groups) * math.prod(w[2:])


_ATTENTION = re.compile(
    r"^aten::_scaled_dot_product_(flash|efficient|cudnn)_attention(_backward)?$"
)


def op_work(
    name: str, dims: Sequence[Any], types: Sequence[Any], concrete: Sequence[Any] | None = None
) -> OpWork | None:
    """Return the work of op ``name`` from its recorded inputs, or None when it cannot be
    derived (unknown family, shapes missing or inconsistent)."""
    out_t = _out_argument(name, dims, types)
    if out_t is not None:  # the out= form: its last argument is written, not read
        dims, types = list(dims)[:-1], list(types)[:-1]
    ts = _tensors(dims, types)
    if not ts:
        return None
    dt = next((t.dtype for t in ts if t.dtype and t.dtype != "int8"), "")
    moved = float(sum(t.numel * t.size for t in ts))  # every input read once
    out_size = ts[-1].size if out_t is None else out_t.size
    if name in _MATMULS:
        rank = 2 if name.endswith("mm") and "bmm" not in name else 3
        mats = [t.shape for t in ts if len(t.shape) == rank]
        if len(mats) < 2:
            return None
        a, b = mats[-2], mats[-1]
        if a[-1] != b[-2] or (rank == 3 and a[0] != b[0]):
            return None
        nb = a[0] if rank == 3 else 1
        m, k, n = a[-2], a[-1], b[-1]
        return OpWork(2.0 * nb * m * n * k, moved + nb * m * n * out_size, dt, "matmul")
    if name == "aten::convolution_backward":
        if len(ts) < 3:
            return None
        go, x, w = ts[0].shape, ts[1].shape, ts[2].shape
        if len(x) < 3 or len(go) != len(x) or len(w) != len(x) or go[1] != w[0]:
            return None
        # grad input and grad weight: each a convolution of the forward's size
        written = (ts[1].numel + ts[2].numel) * ts[1].size
        return OpWork(2 * _conv_flops(go, x, w), moved + written, dt, "conv")
    # forward: aten::convolution / aten::_convolution (input, weight, bias, stride, padding,
    # dilation, …), whose Concrete Inputs give the output size; the cudnn_/miopen_ ops inside
    # them order their arguments differently and are covered by their parent (innermost_known
    # walks out to the nearest op whose work is known)
    if name in ("aten::convolution", "aten::_convolution"):
        if len(ts) < 2:
            return None
        x, w = ts[0].shape, ts[1].shape
        out = _conv_out(x, w, concrete)
        if out is None:
            return None
        return OpWork(_conv_flops(out, x, w), moved + math.prod(out) * ts[0].size, dt, "conv")
    att = _ATTENTION.match(name)
    if att:
        if len(ts) < 2 or len(ts[0].shape) != 4 or len(ts[1].shape) != 4:
            return None
        batch, heads, lq, e = ts[0].shape
        fwd = 4.0 * batch * heads * lq * ts[1].shape[2] * e
        scale = 2.5 if att.group(2) else 1.0
        return OpWork(fwd * scale, moved + ts[0].numel * ts[0].size, dt, "attention")
    largest = max(t.numel for t in ts)
    if _NORM.match(name):
        flops = float(_NORM_FLOPS_PER_ELEMENT * largest)
        return OpWork(flops, moved + largest * ts[0].size, dt, "norm")
    if _ELEMENTWISE.match(name):
        if out_t is not None:  # out=: the inputs read, the out tensor written once
            return OpWork(float(out_t.numel), moved + out_t.numel * out_t.size, dt, "elementwise")
        if name.endswith("_"):  # in place: the first argument is the output
            first = _tensors(dims[:1], types[:1])
            if not first:  # (its type unknown: what it writes is unknown)
                return None
            self_bytes = first[0].numel * first[0].size
            if name in _OVERWRITE:  # its old values are never read
                moved -= self_bytes
            return OpWork(float(first[0].numel), moved + self_bytes, dt, "elementwise")
        return OpWork(float(largest), moved + largest * _result_size(name, ts), dt, "elementwise")
    return None


#: the matmul ops whose FLOPs follow from their operands' shapes
_MATMULS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")

#: arguments the profiler records for the functional form of an op (scalars and optional
#: arguments included, as ``Input Dims`` lists them: native_functions.yaml's signatures); the
#: ``out=`` form records one more, its output tensor, last. An op not listed is read as
#: functional (its output counted as a new tensor of the broadcast shape)
_ARITY: dict[str, int] = {
    **dict.fromkeys(("mm", "bmm"), 2),
    **dict.fromkeys(("addmm", "baddbmm"), 5),  # (self, mat1, mat2, beta, alpha)
    **dict.fromkeys(("addcmul", "addcdiv"), 4),
    **dict.fromkeys(("add", "sub", "clamp", "where", "masked_fill", "lerp",
                     "threshold_backward", "gelu_backward", "native_dropout", "dropout"), 3),
    **dict.fromkeys(("mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "gt", "le",
                     "ge", "silu_backward", "sigmoid_backward", "tanh_backward", "gelu"), 2),
    **dict.fromkeys(("relu", "silu", "sigmoid", "tanh", "neg", "exp", "log", "sqrt", "rsqrt",
                     "abs"), 1),
}  # fmt: skip

#: in-place ops that overwrite their first argument without reading it
_OVERWRITE = ("aten::copy_", "aten::fill_", "aten::zero_")

#: comparisons: their result is bool (one byte an element) whatever their inputs
_COMPARISONS = ("aten::eq", "aten::ne", "aten::lt", "aten::gt", "aten::le", "aten::ge")


def _out_argument(name: str, dims: Sequence[Any], types: Sequence[Any]) -> _Tensor | None:
    """The output tensor of an ``out=`` call of ``name``: one argument more than its functional
    form records (``_ARITY``), that argument a tensor. None for the functional and in-place
    forms and for ops whose form is not known."""
    arity = _ARITY.get(name.removeprefix("aten::"))
    if arity is None or len(dims) != arity + 1 or len(types) != arity + 1:
        return None
    last = _tensors(dims[-1:], types[-1:])
    return last[0] if last else None


def _result_size(name: str, ts: list[_Tensor]) -> int:
    """Bytes per element of a functional elementwise op's result: bool for a comparison, else
    the widest non-bool input of the broadcast (largest) size (type promotion's result)."""
    if name in _COMPARISONS:
        return 1
    largest = max(t.numel for t in ts)
    sizes = [t.size for t in ts if t.numel == largest and (t.dtype or t.size > 1)]  # no bools
    return max(sizes) if sizes else ts[0].size


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


class OpsInOrder(NamedTuple):
    """The ops of known work, by thread, then (start, -end): what innermost_in sweeps."""

    starts: np.ndarray  # int64
    ends: np.ndarray  # int64
    idx: np.ndarray  # int64: each one's index in the ops given to ops_in_order
    tids: np.ndarray


class QueriesInOrder(NamedTuple):
    """The queries on threads that have a known op, by thread, then time (queries_in_order)."""

    idx: np.ndarray  # int64: each one's index in the queries given
    ts: np.ndarray  # int64
    tids: np.ndarray
    n: int  # how many queries were given


def innermost_known(
    op_tid: Any,
    op_start: Any,
    op_end: Any,
    op_work_idx: Any,
    q_tid: Any,
    q_ts: Any,
    compiled: bool = False,
) -> np.ndarray:
    """For each query (a launch call on thread q_tid at time q_ts) the index into the ops of the
    innermost op on that thread whose interval contains it *and whose work is known*
    (op_work_idx >= 0), walking outward through the enclosing ops; -1 where none.

    Ops on one thread nest (the profiler records a call stack), so a sweep in time order with a
    stack of open ops finds them in O(n log n). Linking by time on the launching thread works
    for every Kineto version; older ones write the launch's own correlation as "External id".

    In three steps, each the caller may run alone so that it drops each step's inputs before
    the next (engine.trace.kineto.derive: the import's peak): ops_in_order, queries_in_order,
    innermost_in. ``compiled``: the sweep runs as the kernel ``_sweep`` (the compiled reader's
    path; 70 ms of a 2 M-event import in Python), else in Python (the twin reader's first run,
    which compiles nothing)."""
    ops = ops_in_order(op_tid, op_start, op_end, op_work_idx)
    return innermost_in(ops, queries_in_order(q_tid, q_ts, ops), compiled)


def ops_in_order(op_tid: Any, op_start: Any, op_end: Any, op_work_idx: Any) -> OpsInOrder:
    """The ops of known work (op_work_idx >= 0) sorted for the sweep: only they can be the
    answer, and a subset of nested intervals still nests — the innermost *known* op around a
    launch is the innermost op of the known ones (a trace of 2 M events has ~730k ops, a few of
    them known). Sorted copies of those columns, no Python lists (lists of every op's times
    took ~150 MB on a 10 M-event trace)."""
    known = np.flatnonzero(np.asarray(op_work_idx) >= 0)
    pick = slice(None) if known.size == len(op_work_idx) else known  # a slice: no copies
    o_tid = np.asarray(op_tid)[pick]
    o_start = np.asarray(op_start, np.int64)[pick]
    o_end = np.asarray(op_end, np.int64)[pick]
    # by thread, then (start, -end); ties keep index order (a stable sort, as list.sort was)
    order = np.lexsort((-o_end, o_start, o_tid))
    idx = np.ascontiguousarray(known[order], np.int64)
    del known
    starts, ends = o_start[order], o_end[order]
    del o_start, o_end
    return OpsInOrder(starts, ends, idx, o_tid[order])


def queries_in_order(q_tid: Any, q_ts: Any, ops: OpsInOrder) -> QueriesInOrder:
    """The queries sorted for the sweep: only those on threads with a known op can find one
    (the others stay -1)."""
    q_tid_a = np.asarray(q_tid)
    q_ts_a = np.asarray(q_ts, np.int64)
    nq = len(q_ts_a)
    on = np.isin(q_tid_a, ops.tids)
    if on.all():  # (no subset: the columns sorted as they are, no gathered copies to sort)
        del on
        q_order = np.lexsort((q_ts_a, q_tid_a))
    else:
        q_order = np.flatnonzero(on)
        del on
        q_order = q_order[np.lexsort((q_ts_a[q_order], q_tid_a[q_order]))]
    return QueriesInOrder(
        np.ascontiguousarray(q_order, np.int64), q_ts_a[q_order], q_tid_a[q_order], nq
    )


def innermost_in(ops: OpsInOrder, queries: QueriesInOrder, compiled: bool = False) -> np.ndarray:
    """innermost_known's answer from its sorted ops and queries (see there)."""
    found = np.full(queries.n, -1, np.int64)
    if not len(ops.idx) or not len(queries.idx):
        return found
    starts, ends, ops_idx, ops_tid = ops
    qs_idx, qts, q_tid_sorted, _ = queries
    # each thread's slice of the sorted ops and queries
    tids = np.intersect1d(ops_tid, q_tid_sorted)
    o_lo, o_hi = np.searchsorted(ops_tid, tids, "left"), np.searchsorted(ops_tid, tids, "right")
    q_lo = np.searchsorted(q_tid_sorted, tids, "left")
    q_hi = np.searchsorted(q_tid_sorted, tids, "right")
    if compiled:
        o_lo, o_hi, q_lo, q_hi = (np.asarray(x, np.int64) for x in (o_lo, o_hi, q_lo, q_hi))
        _sweep(starts, ends, ops_idx, qts, qs_idx, o_lo, o_hi, q_lo, q_hi, found)
        return found
    # in Python: the arrays' items read as Python ints (memoryviews, no copy)
    out, st, en, idx, qt, qi = (_ints(v) for v in (found, starts, ends, ops_idx, qts, qs_idx))
    for a, b, qa, qb in zip(
        o_lo.tolist(), o_hi.tolist(), q_lo.tolist(), q_hi.tolist(), strict=True
    ):
        stack: list[int] = []  # positions in the sorted ops
        k = a
        for p in range(qa, qb):
            tq = qt[p]
            while k < b and st[k] <= tq:
                while stack and en[stack[-1]] < st[k]:
                    stack.pop()
                stack.append(k)
                k += 1
            while stack and en[stack[-1]] < tq:
                stack.pop()
            for i in reversed(stack):
                if en[i] >= tq:
                    out[qi[p]] = idx[i]
                    break
    return found


@jit
def _sweep(
    starts: np.ndarray,
    ends: np.ndarray,
    ops_idx: np.ndarray,
    qts: np.ndarray,
    qs_idx: np.ndarray,
    o_lo: np.ndarray,
    o_hi: np.ndarray,
    q_lo: np.ndarray,
    q_hi: np.ndarray,
    out: np.ndarray,
) -> None:
    """innermost_known's sweep, thread by thread: ops[o_lo[t]:o_hi[t]] and queries
    [q_lo[t]:q_hi[t]] of thread t, each sorted by time; out[qs_idx[p]] = the innermost op around
    query p (its ops_idx), as the Python loop above finds it."""
    stack = np.empty(starts.shape[0], np.int64)  # positions in the sorted ops
    for t in range(o_lo.shape[0]):
        a, b = o_lo[t], o_hi[t]
        top = 0
        k = a
        for p in range(q_lo[t], q_hi[t]):
            tq = qts[p]
            while k < b and starts[k] <= tq:
                while top and ends[stack[top - 1]] < starts[k]:
                    top -= 1
                stack[top] = k
                top += 1
                k += 1
            while top and ends[stack[top - 1]] < tq:
                top -= 1
            for j in range(top - 1, -1, -1):
                if ends[stack[j]] >= tq:
                    out[qs_idx[p]] = ops_idx[stack[j]]
                    break


def _ints(a: np.ndarray) -> memoryview:
    """An int64 array's items as Python ints, read and written in place (no copy when ``a`` is
    already contiguous int64)."""
    return np.ascontiguousarray(a, np.int64).data
