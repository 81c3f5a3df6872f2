"""Byte-class masks of 64 bytes at a time for the JSON scanner (the idea simdjson is built on).

``masks64(buf, i)`` compares the 64 bytes at ``buf[i:i + 64]`` with each byte class at once and
returns one 64-bit mask per class: bit k is set when byte ``i + k`` is in the class. numba has no
vector compare, so it is a numba intrinsic that emits the LLVM IR itself — load ``<64 x i8>``,
``icmp`` against a splat, bitcast ``<64 x i1>`` to ``i64`` — which LLVM lowers to what the CPU
has (AVX-512BW: one compare per class; AVX2/SSE2: compare + ``pmovmskb``; other targets: a
generic sequence). Correct on every target, fast where there are vectors.

The caller guarantees ``i + 64 <= len(buf)``: the load is not bounds-checked.

Only compiled code calls these: each intrinsic is made when numba is first needed
(engine.jit.deferred), so importing this module imports neither numba nor llvmlite.

Editing this file: numba's on-disk cache is keyed on the *calling* kernel's source file, so
also touch ``json_scan.py`` (or delete ``engine/trace/kineto/__pycache__/*.nbi``) or its cached
kernels keep the old code.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.jit import deferred, jit

if TYPE_CHECKING:
    from llvmlite import ir

_ONE = np.uint64(1)
_TOP = np.uint64(1) << np.uint64(63)


class _IR:
    """The LLVM types and constants the codegen uses (llvmlite imported when numba compiles)."""

    def __init__(self) -> None:
        from llvmlite import ir

        self.ir = ir
        self.I8 = ir.IntType(8)
        self.V = ir.VectorType(self.I8, 64)
        self.I64 = ir.IntType(64)
        self.LANE0 = ir.Constant(ir.VectorType(ir.IntType(32), 64), [0] * 64)  # lane 0 everywhere


@functools.cache
def _llvm() -> _IR:
    return _IR()


def _intrinsic(typer: Any) -> Any:
    """numba's ``intrinsic(typer)``, made when numba is first needed."""

    def make() -> Any:
        from numba.extending import intrinsic

        return intrinsic(typer)

    return deferred(make)


def _splat(b: int) -> ir.Constant:
    L = _llvm()
    return L.ir.Constant(L.V, [b] * 64)


def _at(context, builder, sig, args):  # type: ignore[no-untyped-def]
    """Codegen: the address of buf[i] for an intrinsic called as (buf, i, ...)."""
    from numba import types

    arr = context.make_array(sig.args[0])(context, builder, args[0])
    idx = context.cast(builder, args[1], sig.args[1], types.intp)
    return builder.gep(arr.data, [idx])


def _masks64(typingctx, buf, i):  # type: ignore[no-untyped-def]
    """(quote, backslash, open, close, control) masks of the 64 bytes at buf[i]: ``"``,
    ``\\``, ``{`` or ``[``, ``}`` or ``]``, bytes below 0x20."""
    from numba import types

    L = _llvm()
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.ndim == 1):
        return None
    sig = types.UniTuple(types.uint64, 5)(buf, i)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        ptr = builder.bitcast(_at(context, builder, sig, args), L.V.as_pointer())
        v = builder.load(ptr, align=1)

        def eq(x: ir.Value, b: int) -> ir.Value:
            return builder.icmp_unsigned("==", x, _splat(b))

        def bits(m: ir.Value) -> ir.Value:
            return builder.bitcast(m, L.I64)

        low = builder.or_(v, _splat(0x20))  # '[' | 0x20 == '{', ']' | 0x20 == '}'
        out = [
            bits(eq(v, 34)),
            bits(eq(v, 92)),
            bits(eq(low, 0x7B)),
            bits(eq(low, 0x7D)),
            bits(builder.icmp_unsigned("<", v, _splat(0x20))),
        ]
        return context.make_tuple(builder, sig.return_type, out)

    return sig, codegen


masks64: Any = _intrinsic(_masks64)


def _eq64(typingctx, buf, i, byte):  # type: ignore[no-untyped-def]
    """Mask of the bytes equal to ``byte`` among the 64 at buf[i]: a compile-time constant, or
    a value known only when it runs (its low 8 bits, broadcast to the 64 lanes)."""
    from numba import types

    L = _llvm()
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.ndim == 1):
        return None
    if not isinstance(byte, types.Integer):
        return None
    value = byte.literal_value if isinstance(byte, types.IntegerLiteral) else None
    sig = types.uint64(buf, i, byte)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        ptr = builder.bitcast(_at(context, builder, sig, args), L.V.as_pointer())
        v = builder.load(ptr, align=1)
        if value is not None:
            want = _splat(value)
        else:
            lane = builder.insert_element(
                L.ir.Constant(L.V, L.ir.Undefined),
                builder.trunc(args[2], L.I8),
                L.ir.Constant(L.I64, 0),
            )
            want = builder.shuffle_vector(lane, L.ir.Constant(L.V, L.ir.Undefined), L.LANE0)
        return builder.bitcast(builder.icmp_unsigned("==", v, want), L.I64)

    return sig, codegen


eq64: Any = _intrinsic(_eq64)


def _load64(typingctx, buf, i):  # type: ignore[no-untyped-def]
    """The 8 bytes at buf[i] as a little-endian uint64 (an unaligned load; i + 8 <= len)."""
    from numba import types

    L = _llvm()
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.ndim == 1):
        return None
    sig = types.uint64(buf, i)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        ptr = builder.bitcast(_at(context, builder, sig, args), L.I64.as_pointer())
        return builder.load(ptr, align=1)

    return sig, codegen


load64: Any = _intrinsic(_load64)


def _ctz(typingctx, x):  # type: ignore[no-untyped-def]
    """Index of the lowest set bit of a uint64 (64 when it is zero)."""
    from numba import types

    L = _llvm()
    if x != types.uint64:
        return None

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        return builder.cttz(args[0], L.ir.Constant(L.ir.IntType(1), 0))

    return types.int64(types.uint64), codegen


ctz: Any = _intrinsic(_ctz)


@jit
def prefix_xor(x: np.uint64) -> np.uint64:
    """Bit k of the result = XOR of bits 0..k of x (quote mask → inside-a-string mask)."""
    x ^= x << np.uint64(1)
    x ^= x << np.uint64(2)
    x ^= x << np.uint64(4)
    x ^= x << np.uint64(8)
    x ^= x << np.uint64(16)
    x ^= x << np.uint64(32)
    return x


@jit
def escaped(backslash: np.uint64, carry: np.uint64) -> tuple[np.uint64, np.uint64]:
    """(mask of the bytes escaped by a backslash, carry into the next 64 bytes) given the
    block's backslash mask and whether the previous block ended in an unescaped backslash
    (carry 0 or 1). A backslash that is itself escaped escapes nothing."""
    esc = carry
    todo = backslash & ~carry
    out = np.uint64(0)
    while todo:
        t = todo & (~todo + _ONE)
        todo ^= t
        if t == _TOP:
            out = _ONE
        else:
            nxt = t << _ONE
            esc |= nxt
            todo &= ~nxt
    return esc, out
