"""Kernel class from the kernel name (and the launching operator, where the trace records it),
by the ordered token rules of manifests/kernel_taxonomy.json; the library a name comes from.

A name is read as lowercase tokens (``tokens``): an Itanium-mangled name gives the identifiers
it spells out, every non-alphanumeric character and every camel-case boundary separates tokens,
and the spellings of a few types are made one token first (``c10::BFloat16`` -> ``bf16``,
``cutlass::float_e4m3_t`` -> ``e4m3``). Every pattern of the manifest must start and end on a
token boundary, so a rule cannot match inside another word: ``conv`` is not in
``NumericArrayConverter`` or ``_typeConvert``, ``gemm`` is not in ``fbgemm``.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

import numpy as np
from pydantic import BaseModel, ConfigDict

from engine.trace.segments import Klass, NameTable


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    klass: str
    why: str = ""
    patterns: list[str]


class _OpRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    klass: str
    pattern: str


class _Library(BaseModel):
    model_config = ConfigDict(extra="forbid")
    library: str
    patterns: list[str]


class Taxonomy(BaseModel):
    """manifests/kernel_taxonomy.json, validated."""

    model_config = ConfigDict(extra="forbid")
    doc: str = ""
    rules: list[_Rule]
    ops: list[_OpRule]
    op_decides: list[str]
    libraries: list[_Library]


#: type spellings made one token before a name is split (their parts would split apart:
#: ``BFloat16`` -> ``b float16``); the precision reader (engine.trace.precision) reads them
_SPELLINGS = (
    (re.compile(r"(?i)bfloat16"), " bf16 "),
    (re.compile(r"(?i)tfloat32"), " tf32 "),
    (re.compile(r"(?i)float8?_?(e[245]m[123](?:fnuz|fn)?)"), r" \1 "),
    (re.compile(r"(?i)float_?ue8m0"), " ue8m0 "),
)
#: a camel-case word: a capital before an FP8/FP4 format (Q|E4m3, O|E4m3), an acronym before
#: a capitalised word (RMS|Norm), a capitalised or lowercase word with its digits (Conv2d,
#: s1688gemm), a capital with digits (E4m3, H64), an acronym with digits (MT160x256x64), a
#: number with its letters (32x32)
_WORD = re.compile(
    r"[A-Z](?=[Ee][2-5][Mm][0-3])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z][a-z0-9]*|[A-Z][0-9][0-9a-z]*"
    r"|[A-Z]+[0-9][0-9a-z]*"
    r"|[A-Z]+|[0-9][0-9a-z]*"
)
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
#: digits in a mangled name that are no identifier's length: a literal (Li64E), a builtin
#: (DF16b, DB8_), a substitution (S0_, T1_)
_NOT_A_LENGTH = re.compile(r"(?:D[FBU]|L[a-z]|[ST])$")


def demangle_identifiers(name: str) -> tuple[list[str], str]:
    """(identifiers, residue) of an Itanium-mangled name: the length-prefixed identifiers it
    spells out, and what is left between them (type codes, template brackets), each
    identifier's place a space. Not a demangler: enough to read names and builtin types."""
    out: list[str] = []
    rest: list[str] = []
    i, n, after_ident = 0, len(name), False
    while i < n:
        if name[i].isdigit():
            j = i
            while j < n and name[j].isdigit():
                j += 1
            length = int(name[i:j])
            is_length = after_ident or not _NOT_A_LENGTH.search(name[:i])
            if is_length and 0 < length <= n - j and (name[j].isalpha() or name[j] == "_"):
                out.append(name[j : j + length])
                rest.append(" ")
                i, after_ident = j + length, True
                continue
            rest.append(name[i:j])
            i, after_ident = j, False
            continue
        rest.append(name[i])
        i, after_ident = i + 1, False
    return out, "".join(rest)


def _words(text: str) -> list[str]:
    for rx, sub in _SPELLINGS:
        text = rx.sub(sub, text)
    out: list[str] = []
    for piece in _SPLIT.split(text):
        if piece:
            out.extend(w.lower() for w in _WORD.findall(piece))
    return out


@lru_cache(maxsize=65536)
def tokens(name: str) -> str:
    """The name as one string of lowercase tokens separated by single spaces (what the
    manifest's patterns read)."""
    if name.startswith("_Z"):
        idents, _ = demangle_identifiers(name)
        return " ".join(w for ident in idents for w in _words(ident))
    return " ".join(_words(name))


def _bounded(patterns: list[str]) -> re.Pattern[str]:
    """One expression for ``patterns``, each starting and ending on a token boundary of the
    token string padded with a space each side (``^`` / ``$``: at its first / last token). A
    leading space rather than a look-behind lets the matcher jump from space to space (~10x
    faster on a long name)."""
    out = []
    for p in patterns:
        start, end = p.startswith("^"), p.endswith("$") and not p.endswith("\\$")
        core = p[1 if start else 0 : -1 if end else None]
        out.append(("^ " if start else " ") + f"(?:{core})" + ("(?= $)" if end else "(?= )"))
    return re.compile("|".join(out))


@lru_cache(maxsize=1)
def taxonomy() -> Taxonomy:
    """The manifest, validated."""
    raw = json.loads(resources.files("manifests").joinpath("kernel_taxonomy.json").read_text())
    raw["doc"] = raw.pop("_doc", "")
    return Taxonomy.model_validate(raw)


@lru_cache(maxsize=1)
def _rules() -> tuple[tuple[Klass, re.Pattern[str]], ...]:
    return tuple((Klass[r.klass], _bounded(r.patterns)) for r in taxonomy().rules)


@lru_cache(maxsize=1)
def _op_rules() -> tuple[tuple[Klass, re.Pattern[str]], ...]:
    return tuple((Klass[r.klass], re.compile(r.pattern)) for r in taxonomy().ops)


@lru_cache(maxsize=1)
def _libraries() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((lib.library, _bounded(lib.patterns)) for lib in taxonomy().libraries)


@lru_cache(maxsize=1)
def _op_decides() -> frozenset[Klass]:
    return frozenset(Klass[k] for k in taxonomy().op_decides)


@lru_cache(maxsize=65536)
def klass_of_name(name: str) -> Klass:
    """The class the name alone gives; OTHER when no rule matches."""
    toks = f" {tokens(name)} "
    for klass, rx in _rules():
        if rx.search(toks):
            return klass
    return Klass.OTHER


@lru_cache(maxsize=4096)
def klass_of_op(op: str) -> Klass | None:
    """The class an operator's kernels have (``aten::mm`` -> GEMM, ``aten::convolution`` ->
    CONV, ``aten::_scaled_dot_product_*`` -> ATTENTION); None for any other operator."""
    for klass, rx in _op_rules():
        if rx.match(op):
            return klass
    return None


def classify(name: str, op: str | None = None) -> Klass:
    """Return the kernel class of a kernel (or copy) name; OTHER when no rule matches.
    ``op``: the operator that launched it, where the trace records one — it decides the class
    of a kernel whose name gives a math class or none (manifest ``op_decides``); a kernel
    whose name says it is a copy, a reduction, a norm … keeps that class (a split-K reduction
    or a layout transform an ``aten::mm`` or ``aten::convolution`` launches)."""
    by_name = klass_of_name(name)
    if op:
        by_op = klass_of_op(op)
        if by_op is not None and by_name in _op_decides():
            return by_op
    return by_name


#: the class of the kernels of an op family the Kineto importer derives work for
#: (engine.trace.kineto.shapes.OpWork.family)
FAMILY_KLASS = {"matmul": Klass.GEMM, "conv": Klass.CONV, "attention": Klass.ATTENTION}


def decide_by_op(klass: np.ndarray, op_klass: np.ndarray) -> np.ndarray:
    """``classify``'s rule for whole columns: each row's class by name (``klass``) replaced by
    its launching op's class (``op_klass``; 255 where the op is unknown or decides nothing)
    where the name's class is one the op decides (manifest ``op_decides``). For an importer
    that knows each kernel's op (e.g. the op family of ``FAMILY_KLASS``)."""
    decides = np.isin(klass, np.array(sorted(_op_decides()), np.uint8))
    return np.where(decides & (op_klass != 255), op_klass, klass).astype(np.uint8)


@lru_cache(maxsize=65536)
def library(name: str) -> str:
    """The library a kernel name comes from (manifest ``libraries``: ``cudnn``, ``miopen``,
    ``tensorrt``, ``cublaslt``, ``tensile`` …); "" when the name does not say."""
    toks = f" {tokens(name)} "
    for lib, rx in _libraries():
        if rx.search(toks):
            return lib
    return ""


def classify_table(names: NameTable) -> np.ndarray:
    """Return the class of every interned name (uint8, indexed like the name table)."""
    return np.array([klass_of_name(n) for n in names.names()], dtype=np.uint8)


__all__ = [
    "FAMILY_KLASS",
    "Taxonomy",
    "classify",
    "classify_table",
    "decide_by_op",
    "demangle_identifiers",
    "klass_of_name",
    "klass_of_op",
    "library",
    "taxonomy",
    "tokens",
]
