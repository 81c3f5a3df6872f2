"""Numba scanner for Chrome-trace JSON: finds each event of the ``traceEvents`` array in a byte
buffer, reads its ``cat`` and its ``ts``/``dur`` *exactly* (decimal µs → int64 ns, no float64
rounding), and copies the events we keep into one buffer for a typed decoder.

Why not a JSON library alone: a 2 M-event trace is ~0.5 GB of text; decoding it whole costs
over a gigabyte of objects, and float64 ``ts`` values of epoch-µs lose the nanoseconds. Scanning
bytes in chunks keeps memory flat, and only the GPU/runtime events (a fraction of a trace) reach
the typed decoder (msgspec).
"""

from __future__ import annotations

import numpy as np

from engine.eesm._jit import jit

_QUOTE, _BSLASH = 34, 92
_LBRACE, _RBRACE, _LBRACK, _RBRACK = 123, 125, 91, 93
_COMMA, _COLON = 44, 58

#: event categories the importer keeps, in code order (index = code)
CATEGORIES = (
    b"kernel",
    b"gpu_memcpy",
    b"gpu_memset",
    b"cuda_runtime",
    b"cuda_driver",
    b"cuda_sync",
    b"cuda_profiler_range",
)
CAT_KERNEL, CAT_MEMCPY, CAT_MEMSET, CAT_RUNTIME, CAT_DRIVER, CAT_SYNC, CAT_PROFILER = range(7)
NO_TIME = np.iinfo(np.int64).min
MALFORMED = -2  # scan_events' closed_at when the array is not valid JSON


def category_table() -> tuple[np.ndarray, np.ndarray]:
    """Return the kept categories as a padded (n, maxlen) uint8 table and their lengths."""
    width = max(len(c) for c in CATEGORIES)
    table = np.zeros((len(CATEGORIES), width), np.uint8)
    lens = np.zeros(len(CATEGORIES), np.int64)
    for i, c in enumerate(CATEGORIES):
        table[i, : len(c)] = np.frombuffer(c, np.uint8)
        lens[i] = len(c)
    return table, lens


@jit
def _is_ws(c: int) -> bool:
    return c == 32 or c == 10 or c == 13 or c == 9


@jit
def _string_end(buf: np.ndarray, i: int, n: int) -> int:
    """Index of the closing quote of the string whose opening quote is at i, or -1."""
    j = i + 1
    while j < n:
        c = buf[j]
        if c == _BSLASH:
            j += 2
            continue
        if c == _QUOTE:
            return j
        j += 1
    return -1


@jit
def _object_end(buf: np.ndarray, i: int, n: int) -> int:
    """Index one past the '}' closing the object opened at i, or -1 if the buffer ends first."""
    depth = 0
    j = i
    while j < n:
        c = buf[j]
        if c == _QUOTE:
            j = _string_end(buf, j, n)
            if j < 0:
                return -1
        elif c == _LBRACE or c == _LBRACK:
            depth += 1
        elif c == _RBRACE or c == _RBRACK:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return -1


@jit
def _parse_us_to_ns(buf: np.ndarray, k: int, e: int) -> int:
    """Parse the JSON number at k (microseconds) exactly into int64 nanoseconds."""
    neg = False
    if k < e and buf[k] == 45:  # '-'
        neg = True
        k += 1
    whole = 0
    digits = 0
    while k < e and 48 <= buf[k] <= 57:
        whole = whole * 10 + (buf[k] - 48)
        k += 1
        digits += 1
    if digits == 0:
        return NO_TIME
    frac = 0
    nfrac = 0
    round_up = False
    if k < e and buf[k] == 46:  # '.'
        k += 1
        while k < e and 48 <= buf[k] <= 57:
            if nfrac < 3:
                frac = frac * 10 + (buf[k] - 48)
            elif nfrac == 3:
                round_up = buf[k] >= 53  # round half up at the 4th decimal (sub-ns)
            nfrac += 1
            k += 1
    while nfrac < 3:
        frac *= 10
        nfrac += 1
    ns = whole * 1000 + frac + (1 if round_up else 0)
    if k < e and (buf[k] == 101 or buf[k] == 69):  # exponent: rare; fall back to float
        k += 1
        esign = 1
        if k < e and buf[k] == 45:
            esign = -1
            k += 1
        elif k < e and buf[k] == 43:
            k += 1
        ex = 0
        while k < e and 48 <= buf[k] <= 57:
            ex = ex * 10 + (buf[k] - 48)
            k += 1
        if ex > 9:  # beyond ±1e9 µs of scaling a timestamp is garbage, not a time
            return NO_TIME
        ns = int(round(ns * 10.0 ** (esign * ex)))
    return -ns if neg else ns


@jit
def _event_fields(
    buf: np.ndarray, s: int, e: int, cats: np.ndarray, catlens: np.ndarray
) -> tuple[int, int, int]:
    """Return (category code or -1, ts ns, dur ns) of the event object buf[s:e]."""
    code = -1
    ts = NO_TIME
    dur = NO_TIME
    depth = 0
    expect_key = False
    i = s
    while i < e:
        c = buf[i]
        if c == _QUOTE:
            j = _string_end(buf, i, e)
            if j < 0:
                return code, ts, dur
            if depth == 1 and expect_key:
                klen = j - i - 1
                k = j + 1
                while k < e and (_is_ws(buf[k]) or buf[k] == _COLON):
                    k += 1
                if klen == 3 and buf[i + 1] == 99 and buf[i + 2] == 97 and buf[i + 3] == 116:
                    if k < e and buf[k] == _QUOTE:  # "cat": "<string>"
                        v_end = _string_end(buf, k, e)
                        vlen = v_end - k - 1
                        for ci in range(cats.shape[0]):
                            if catlens[ci] == vlen:
                                same = True
                                for q in range(vlen):
                                    if buf[k + 1 + q] != cats[ci, q]:
                                        same = False
                                        break
                                if same:
                                    code = ci
                                    break
                elif klen == 2 and buf[i + 1] == 116 and buf[i + 2] == 115:  # "ts"
                    ts = _parse_us_to_ns(buf, k, e)
                elif klen == 3 and buf[i + 1] == 100 and buf[i + 2] == 117 and buf[i + 3] == 114:
                    dur = _parse_us_to_ns(buf, k, e)
                expect_key = False
                i = k
                continue
            i = j + 1
            continue
        if c == _LBRACE or c == _LBRACK:
            depth += 1
            if depth == 1:
                expect_key = True
        elif c == _RBRACE or c == _RBRACK:
            depth -= 1
        elif c == _COMMA and depth == 1:
            expect_key = True
        i += 1
    return code, ts, dur


@jit
def scan_events(
    buf: np.ndarray, pos: int, cats: np.ndarray, catlens: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int, int]:
    """Scan array elements from ``pos`` (inside ``traceEvents``).

    Returns (starts, ends, codes, ts_ns, dur_ns, count, resume, closed_at):
    the complete events found; ``resume`` = where an unfinished event (or the unread rest)
    begins; ``closed_at`` = index of the array's ']' if it was reached, -1 if not yet, or
    ``MALFORMED`` when a stray closing brace makes the array invalid JSON (``resume`` = where).
    Non-object elements are skipped.
    """
    n = buf.shape[0]
    cap = n // 8 + 16
    starts = np.empty(cap, np.int64)
    ends = np.empty(cap, np.int64)
    codes = np.empty(cap, np.int64)
    tss = np.empty(cap, np.int64)
    durs = np.empty(cap, np.int64)
    count = 0
    i = pos
    while i < n:
        c = buf[i]
        if _is_ws(c) or c == _COMMA:
            i += 1
            continue
        if c == _RBRACK:
            return starts, ends, codes, tss, durs, count, i, i
        if c == _LBRACE:
            j = _object_end(buf, i, n)
            if j < 0:
                return starts, ends, codes, tss, durs, count, i, -1
            code, ts, dur = _event_fields(buf, i, j, cats, catlens)
            starts[count] = i
            ends[count] = j
            codes[count] = code
            tss[count] = ts
            durs[count] = dur
            count += 1
            i = j
            continue
        if c == _RBRACE:  # a '}' with no object open: not JSON (and no progress possible)
            return starts, ends, codes, tss, durs, count, i, MALFORMED
        # a non-object element (number, string, array): skip to the next top-level comma
        j = i
        depth = 0
        while j < n:
            d = buf[j]
            if d == _QUOTE:
                j = _string_end(buf, j, n)
                if j < 0:
                    return starts, ends, codes, tss, durs, count, i, -1
            elif d == _LBRACE or d == _LBRACK:
                depth += 1
            elif d == _RBRACE or d == _RBRACK:
                if depth == 0:
                    break
                depth -= 1
            elif d == _COMMA and depth == 0:
                break
            j += 1
        if j >= n:
            return starts, ends, codes, tss, durs, count, i, -1
        i = j
    return starts, ends, codes, tss, durs, count, i, -1


@jit
def gather(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Copy the kept spans into one JSON array: b'[' span ',' span ... ']'."""
    total = 2
    for k in range(keep.shape[0]):
        total += ends[keep[k]] - starts[keep[k]] + 1
    out = np.empty(total, np.uint8)
    out[0] = _LBRACK
    p = 1
    for k in range(keep.shape[0]):
        s, e = starts[keep[k]], ends[keep[k]]
        if k:
            out[p] = _COMMA
            p += 1
        out[p : p + (e - s)] = buf[s:e]
        p += e - s
    out[p] = _RBRACK
    return out[: p + 1]
