"""The arithmetic type a kernel computes in, from the evidence the trace has, best first:

1. the launching operator's recorded input type (the ``dtype`` column: the Kineto importer
   reads the op's ``Input type``; a float32 op's kernel is TF32 or FP32 by its name, which
   the name decides when it says which);
2. the type tokens of the kernel's name, read as tokens with each library's convention:
   CUTLASS 2/3 and cuBLAS (``cutlass_80_tensorop_bf16_s16816gemm_bf16`` is BF16: ``s16816``
   is the accumulator letter and the MMA instruction shape, never a type; ``tensorop`` with an
   ``s`` accumulator and no element type is FP32 data on tensor cores, TF32;
   ``cutlass3x_sm90_tensorop_s64x128x8tf32gemm_f32_…`` is TF32), xmma (``bf16bf16_bf16f32``),
   SIMT (``sgemm``, ``scudnn``), cuBLASLt ``nvjet_<types>_…`` (t BF16, h FP16, s FP32, q FP8;
   ``_tf32`` TF32), Tensile/hipBLASLt ``Cijk_A…_B…_<DataType>…`` (its first letters: B BF16,
   H FP16, S FP32, D FP64, X XF32, F8/B8 FP8, I8 INT8), C++ template types (``float``,
   ``c10::BFloat16``, ``cutlass::half_t``, ``__nv_fp8_e4m3``), CK's mangled template
   arguments (``DF16b``, and ``t``: CK's ``bhalf_t`` is an unsigned short), TensorRT-LLM
   ``bmm_<A>_…``. Several types in one name: the narrowest operand type (a BF16 x MXFP4
   weight-only GEMM computes in BF16: a 4-bit type counts only when nothing wider is named);
3. otherwise unknown — never guessed.

``precision`` is the one function "already in use" (engine.analyze.breakdown.in_use) and the precision
levers (engine.levers.kernels) read, so a report cannot say a kernel already runs in BF16 and
propose BF16 for it; each says which evidence it used (``Basis``).
"""

from __future__ import annotations

import re
from enum import Enum
from functools import lru_cache

import numpy as np

from engine.trace.segments import DTYPES
from engine.trace.taxonomy import demangle_identifiers, tokens

#: precisions below FP32 (what "already in use" counts as reduced)
REDUCED = frozenset({"tf32", "bf16", "fp16", "fp8", "fp4", "int8", "int4"})
#: narrowest first: the operand type a kernel computes in when its name lists several
_RANK = {"fp4": 0, "int4": 0, "fp8": 1, "int8": 1, "fp16": 2, "bf16": 2, "tf32": 3, "fp32": 4}
_RANK["fp64"] = 5
_WEIGHT_ONLY = ("fp4", "int4")


def at_or_below(target: str) -> frozenset[str]:
    """The precisions as narrow as ``target`` or narrower ("tf32": every REDUCED one; "bf16":
    those of 16 bits or fewer): what a lever moving matmuls to ``target`` leaves alone."""
    return frozenset(p for p, r in _RANK.items() if r <= _RANK[target])


class Basis(str, Enum):
    """Which evidence a precision came from."""

    RECORDED = "the launching op's recorded input type"
    RECORDED_AND_NAME = "the launching op's recorded float32 input and the kernel name"
    NAME = "the kernel name's type tokens"
    UNKNOWN = "unknown (no recorded input type, no type in the name)"


_ATOM = {
    **dict.fromkeys(("bf16",), "bf16"),
    **dict.fromkeys(("tf32", "xf32"), "tf32"),
    **dict.fromkeys(("fp16", "f16", "float16", "half"), "fp16"),
    **dict.fromkeys(("fp32", "f32", "float32", "float"), "fp32"),
    **dict.fromkeys(("fp64", "f64", "float64", "double"), "fp64"),
    **dict.fromkeys(
        ("fp8", "f8", "mxfp8", "e4m3", "e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz"), "fp8"
    ),
    **dict.fromkeys(("fp4", "mxfp4", "nvfp4", "e2m1"), "fp4"),
    **dict.fromkeys(("int8", "i8"), "int8"),
    **dict.fromkeys(("int4", "i4"), "int4"),
    #: the accumulator of an integer GEMM (i8i8_i8i32): no operand type
    **dict.fromkeys(("i32", "s32", "int32"), ""),
}
#: types that are operand types only beside another type in one token (s8s8, s4s4): alone,
#: ``s8`` is as often a stage count
_COMPOUND_ONLY = {"s8": "int8", "u8": "int8", "s4": "int4", "u4": "int4"}
_ATOM_RX = "|".join(
    sorted((re.escape(a) for a in (*_ATOM, *_COMPOUND_ONLY)), key=len, reverse=True)
)
_TYPE_TOKEN = re.compile(rf"(?:{_ATOM_RX})(?:x?(?:{_ATOM_RX}))*(?:x\d+)?")
_ATOMS_IN = re.compile(_ATOM_RX)
#: CUTLASS/cuBLAS/cuDNN core names: accumulator letter, MMA instruction shape, the MMA-facing
#: type where it differs (s1688tf32gemm), the operation (s16816gemm, h884gemm, s1688fprop,
#: h16816cudnn, s64x128x16gemm)
_CORE = re.compile(
    r"([shdicz])(\d{3,6}|\d+x\d+x\d+)(tf32|f32|bf16|f16)?(gemm|fprop|dgrad|wgrad|cudnn|conv)"
)
#: SIMT core names: sgemm, dgemm, hgemm, cgemm (gc: Gaussian complex), scudnn, sfprop
_SIMT = re.compile(r"(s|d|h|c|z|gc)(?:gemm|cudnn|fprop|dgrad|wgrad)")
_ACCUMULATOR = {"s": "fp32", "d": "fp64", "h": "fp16", "i": "int8", "c": "fp32", "z": "fp64"}
_ACCUMULATOR["gc"] = "fp32"
#: cuBLASLt nvjet kernels: the first letter of the type string is the A/B type
_NVJET = {"t": "bf16", "h": "fp16", "s": "fp32", "q": "fp8", "d": "fp64"}
#: Tensile/hipBLASLt DataType characters (Tensile's DataType.toChar), the longest first
_TENSILE = (
    ("4xi8", "int8"),
    ("f8b8", "fp8"),
    ("b8f8", "fp8"),
    ("f8", "fp8"),
    ("b8", "fp8"),
    ("i8", "int8"),
    ("s", "fp32"),
    ("d", "fp64"),
    ("c", "fp32"),
    ("z", "fp64"),
    ("h", "fp16"),
    ("b", "bf16"),
    ("x", "tf32"),
)
#: builtin types in a mangled template argument list: _Float16, __bf16, float, double,
#: signed char, _BitInt(8) (CK's f8_t) — and, in CK, unsigned short (its bhalf_t)
_MANGLED = re.compile(r"DF16_|DF16b|DB8_|DU8_|[tfda]")
_MANGLED_TYPE = {"DF16_": "fp16", "DF16b": "bf16", "DB8_": "fp8", "DU8_": "fp8", "f": "fp32"}
_MANGLED_TYPE.update({"d": "fp64", "a": "int8"})
#: a run of template arguments: after the opening I or after a substitution (S7_), literals
#: (Li64E) skipped, builtin codes kept (a run stops at a nested name, N…)
_TEMPLATE_ARGS = re.compile(r"(?:I|S[0-9A-Z]*_)((?:L[a-z]\d+E|DF16_|DF16b|DB8_|DU8_|[tfdah])+)")
#: an enum in vLLM's kernel names that names FP8 whatever the cache type is
#: (``(vllm::Fp8KVCacheDataType)0`` is the model's own type)
_NOT_A_TYPE = re.compile(r"fp8 kv cache data type(?: \d+)?")


def _combine(found: list[str]) -> str:
    """The operand type a kernel computes in among the types its name lists: the narrowest,
    a 4-bit weight-only type only when nothing wider is named."""
    found = [p for p in found if p]
    if not found:
        return ""
    wider = [p for p in found if p not in _WEIGHT_ONLY]
    pool = wider if wider else found
    return min(pool, key=lambda p: _RANK[p])


def _nvjet(toks: list[str]) -> str:
    if "nvjet" not in toks:
        return ""
    i = toks.index("nvjet") + 1
    if i < len(toks) and re.fullmatch(r"sm\d+", toks[i]):
        i += 1
    if i >= len(toks) or not re.fullmatch(r"[a-z]{3,6}", toks[i]):
        return ""
    kind = _NVJET.get(toks[i][0], "")
    return "tf32" if kind == "fp32" and "tf32" in toks else kind


def _tensile(toks: list[str]) -> str:
    if "cijk" not in toks:
        return ""
    i = toks.index("cijk")
    if i + 3 >= len(toks) or toks[i + 1][:1] != "a" or toks[i + 2][:1] != "b":
        return ""
    code = toks[i + 3]
    return next((p for prefix, p in _TENSILE if code.startswith(prefix)), "")


def _mangled(name: str, toks: list[str]) -> str:
    """The first typed template argument of a CK / ck_tile / aiter mangled name."""
    if not name.startswith("_Z") or not ({"ck", "aiter"} & set(toks)):
        return ""
    _, rest = demangle_identifiers(name)
    for run in _TEMPLATE_ARGS.findall(rest):
        run = re.sub(r"L[a-z]\d+E", "", run)
        for code in _MANGLED.findall(run):
            kind = "bf16" if code == "t" else _MANGLED_TYPE.get(code, "")
            if kind:
                return kind
    return ""


def _atoms(tok: str) -> list[str]:
    if not _TYPE_TOKEN.fullmatch(tok):
        return []
    parts = _ATOMS_IN.findall(re.sub(r"x\d+$", "", tok))
    if len(parts) == 1 and parts[0] in _COMPOUND_ONLY:
        return []
    return [_ATOM.get(p, _COMPOUND_ONLY.get(p, "")) for p in parts]


@lru_cache(maxsize=65536)
def name_precision(name: str) -> str:
    """The type a kernel computes in by its name alone (module docstring, 2.): a DTYPES-style
    name ("bf16", "tf32", "fp32", "fp8", …, and "fp4"/"int4"), "" when the name does not say."""
    toks = _NOT_A_TYPE.sub(" ", tokens(name)).split()
    for special in (_nvjet(toks), _tensile(toks), _mangled(name, toks)):
        if special:
            return special
    if toks and toks[0] == "bmm":  # TensorRT-LLM bmm_<A>_<B>…: the A operand's type
        first = next((a for t in toks[1:] for a in _atoms(t) if a), "")
        if first:
            return first
    found: list[str] = []
    accumulator = simt = ""
    for tok in toks:
        found.extend(_atoms(tok))
        core = _CORE.fullmatch(tok)
        if core:
            accumulator = accumulator or core.group(1)
            if core.group(3):
                found.extend(_atoms(core.group(3)))
            continue
        m = _SIMT.fullmatch(tok)
        if m and not simt:
            simt = _ACCUMULATOR[m.group(1)]
    best = _combine(found)
    if best:
        return best
    if simt:
        return simt
    if accumulator == "s":
        # FP32 data on tensor cores (no element type named: CUTLASS names the element only
        # where it differs from the accumulator) is TF32 math
        return "tf32" if ("tensorop" in toks or "wmma" in toks) else "fp32"
    return _ACCUMULATOR.get(accumulator, "")


@lru_cache(maxsize=65536)
def precision(recorded: str, name: str) -> tuple[str, Basis]:
    """(precision, basis) of a kernel: ``recorded`` is the launching op's recorded type (a
    DTYPES name, "" where none), ``name`` the kernel's name (module docstring)."""
    by_name = name_precision(name)
    if recorded in ("fp32", "tf32"):
        if by_name in ("fp32", "tf32"):
            return by_name, Basis.RECORDED_AND_NAME
        return recorded, Basis.RECORDED
    if recorded:
        return recorded, Basis.RECORDED
    if by_name:
        return by_name, Basis.NAME
    return "", Basis.UNKNOWN


def row_precision(code: int, name: str) -> tuple[str, Basis]:
    """``precision`` for a row of a Segments table / replay graph: ``code`` its ``dtype``
    column (engine.trace.segments.DTYPES; 0 unknown)."""
    return precision(DTYPES[code] if 0 <= code < len(DTYPES) else "", name)


def row_precisions(codes: np.ndarray, names: list[str]) -> tuple[list[str], list[Basis]]:
    """(precision, basis) of each row, from its ``dtype`` code and name
    (engine.trace.precision.row_precision, once per distinct pair)."""
    memo: dict[tuple[int, str], tuple[str, Basis]] = {}
    out_p: list[str] = []
    out_b: list[Basis] = []
    for code, name in zip(codes.tolist(), names, strict=True):
        key = (code, name)
        got = memo.get(key)
        if got is None:
            got = memo[key] = row_precision(code, name)
        out_p.append(got[0])
        out_b.append(got[1])
    return out_p, out_b


__all__ = ["REDUCED", "Basis", "name_precision", "precision", "row_precision", "row_precisions"]
