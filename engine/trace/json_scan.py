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
    return key_table(CATEGORIES)


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
def _skip_to_end(buf: np.ndarray, i: int, n: int, depth: int) -> int:
    """From i inside an object nested ``depth`` deep, return one past the '}' that closes the
    event (depth 0), or -1 when the buffer ends first. Strings and brackets only: the fast path
    once an event's fields are known (or it is a category we do not keep)."""
    while i < n:
        c = buf[i]
        if c == _QUOTE:
            i = _string_end(buf, i, n)
            if i < 0:
                return -1
        elif c == _LBRACE or c == _LBRACK:
            depth += 1
        elif c == _RBRACE or c == _RBRACK:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


@jit
def _event_scan(
    buf: np.ndarray, s: int, n: int, cats: np.ndarray, catlens: np.ndarray
) -> tuple[int, int, int, int]:
    """One pass over the event object opening at s: return (end, category code or -1, ts ns,
    dur ns), end = one past its '}', or -1 when the buffer ends first (event incomplete).

    Once the category is known to be one we do not keep, or cat, ts and dur are all read, the
    rest of the event is skipped with the lighter ``_skip_to_end``."""
    code = -1
    ts = NO_TIME
    dur = NO_TIME
    seen_cat = False
    depth = 0
    expect_key = False
    i = s
    while i < n:
        c = buf[i]
        if c == _QUOTE:
            j = _string_end(buf, i, n)
            if j < 0:
                return -1, code, ts, dur
            if depth == 1 and expect_key:
                klen = j - i - 1
                k = j + 1
                while k < n and (_is_ws(buf[k]) or buf[k] == _COLON):
                    k += 1
                if klen == 3 and buf[i + 1] == 99 and buf[i + 2] == 97 and buf[i + 3] == 116:
                    if k < n and buf[k] == _QUOTE:  # "cat": "<string>"
                        v_end = _string_end(buf, k, n)
                        if v_end < 0:
                            return -1, code, ts, dur
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
                        seen_cat = True
                        if code < 0:  # not a category we keep: no field of it matters
                            return _skip_to_end(buf, v_end + 1, n, depth), code, ts, dur
                elif klen == 2 and buf[i + 1] == 116 and buf[i + 2] == 115:  # "ts"
                    ts = _parse_us_to_ns(buf, k, n)
                elif klen == 3 and buf[i + 1] == 100 and buf[i + 2] == 117 and buf[i + 3] == 114:
                    dur = _parse_us_to_ns(buf, k, n)
                expect_key = False
                if seen_cat and ts != NO_TIME and dur != NO_TIME:
                    return _skip_to_end(buf, k, n, depth), code, ts, dur
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
            if depth == 0:
                return i + 1, code, ts, dur
        elif c == _COMMA and depth == 1:
            expect_key = True
        i += 1
    return -1, code, ts, dur


@jit
def _grown(a: np.ndarray, cap: int) -> np.ndarray:
    out = np.empty(cap, a.dtype)
    out[: a.shape[0]] = a
    return out


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
    cap = n // 128 + 16  # real events are 150-400 bytes; tiny ones make the arrays grow
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
            j, code, ts, dur = _event_scan(buf, i, n, cats, catlens)
            if j < 0:
                return starts, ends, codes, tss, durs, count, i, -1
            if count == cap:  # numba does not bounds-check: grow before writing
                cap *= 2
                starts = _grown(starts, cap)
                ends = _grown(ends, cap)
                codes = _grown(codes, cap)
                tss = _grown(tss, cap)
                durs = _grown(durs, cap)
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


# ----------------------------------------------------------------------------- field extraction
#: top-level keys read from each kept event, and the keys read inside its "args" object
TOP_KEYS = (b"name", b"pid", b"tid", b"args")
ARG_KEYS = (
    b"correlation",
    b"stream",
    b"device",
    b"grid",
    b"block",
    b"registers per thread",
    b"shared memory",
    b"est. achieved occupancy %",
    b"bytes",
    b"wait_on_stream",
    b"wait_on_cuda_event_record_corr_id",
    b"wait_on_cuda_event_id",
)
#: CUPTI-profiler SASS counters: <prefix>{h,f,d}{add,mul,fma}<suffix>; FMA counts two FLOPs
FLOP_PREFIX = b"smsp__sass_thread_inst_executed_op_"
FLOP_SUFFIX = b"_pred_on.sum"
MISSING = np.iinfo(np.int64).min + 1  # an integer field the event did not carry
#: pid, tid, correlation, stream, device, grid, block, regs, smem, bytes, and the cuda_sync
#: rows' wait_on_stream, wait_on_cuda_event_record_corr_id, wait_on_cuda_event_id
_N_INT = 13
F_PID, F_TID, F_CORR, F_STREAM, F_DEVICE, F_GRID, F_BLOCK, F_REGS, F_SMEM, F_BYTES = range(10)
F_WAIT_STREAM, F_WAIT_RECORD, F_WAIT_EVENT = 10, 11, 12


def key_table(keys: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Return keys as a padded uint8 table and their lengths (for the numba matcher)."""
    width = max(len(k) for k in keys)
    table = np.zeros((len(keys), width), np.uint8)
    lens = np.zeros(len(keys), np.int64)
    for i, k in enumerate(keys):
        table[i, : len(k)] = np.frombuffer(k, np.uint8)
        lens[i] = len(k)
    return table, lens


@jit
def _match(buf: np.ndarray, s: int, n: int, table: np.ndarray, lens: np.ndarray) -> int:
    for i in range(table.shape[0]):
        if lens[i] == n:
            same = True
            for q in range(n):
                if buf[s + q] != table[i, q]:
                    same = False
                    break
            if same:
                return i
    return -1


@jit
def _parse_int(buf: np.ndarray, k: int, e: int) -> int:
    """Integer value at k: a JSON number (fraction dropped) or a quoted decimal/0x-hex string."""
    quoted = k < e and buf[k] == _QUOTE
    if quoted:
        k += 1
    neg = False
    if k < e and buf[k] == 45:
        neg = True
        k += 1
    v = 0
    digits = 0
    if quoted and k + 1 < e and buf[k] == 48 and (buf[k + 1] == 120 or buf[k + 1] == 88):
        k += 2
        while k < e:
            c = buf[k]
            if 48 <= c <= 57:
                d = c - 48
            elif 97 <= c <= 102:
                d = c - 87
            elif 65 <= c <= 70:
                d = c - 55
            else:
                break
            v = v * 16 + d
            digits += 1
            k += 1
    else:
        while k < e and 48 <= buf[k] <= 57:
            v = v * 10 + (buf[k] - 48)
            digits += 1
            k += 1
    if digits == 0 or digits > 18:
        return MISSING
    return -v if neg else v


@jit
def _parse_float(buf: np.ndarray, k: int, e: int) -> float:
    """Float value of the JSON number at k (NaN if there is none)."""
    neg = False
    if k < e and buf[k] == 45:
        neg = True
        k += 1
    v = 0.0
    digits = 0
    while k < e and 48 <= buf[k] <= 57:
        v = v * 10.0 + (buf[k] - 48)
        digits += 1
        k += 1
    if k < e and buf[k] == 46:
        k += 1
        scale = 0.1
        while k < e and 48 <= buf[k] <= 57:
            v += (buf[k] - 48) * scale
            scale *= 0.1
            digits += 1
            k += 1
    if digits == 0:
        return np.nan
    if k < e and (buf[k] == 101 or buf[k] == 69):
        k += 1
        esign = 1
        if k < e and buf[k] == 45:
            esign = -1
            k += 1
        elif k < e and buf[k] == 43:
            k += 1
        ex = 0
        while k < e and 48 <= buf[k] <= 57 and ex < 400:
            ex = ex * 10 + (buf[k] - 48)
            k += 1
        v = v * 10.0 ** (esign * min(ex, 308))
    return -v if neg else v


@jit
def _int_array_product(buf: np.ndarray, k: int, e: int) -> int:
    """Product of the integers of the JSON array at k ([8, 16, 5] → 640); MISSING if not one."""
    if k >= e or buf[k] != _LBRACK:
        return MISSING
    k += 1
    p = 1
    any_ = False
    while k < e and buf[k] != _RBRACK:
        c = buf[k]
        if 48 <= c <= 57 or c == 45:
            v = _parse_int(buf, k, e)
            if v == MISSING:
                return MISSING
            p *= v
            any_ = True
            while k < e and buf[k] != _COMMA and buf[k] != _RBRACK:
                k += 1
            continue
        k += 1
    return p if any_ else MISSING


@jit
def _flop_weight(buf: np.ndarray, s: int, n: int, prefix: np.ndarray, suffix: np.ndarray) -> int:
    """2 for an FMA counter key, 1 for add/mul, 0 for any other key."""
    lp, ls = prefix.shape[0], suffix.shape[0]
    if n != lp + 4 + ls:
        return 0
    for q in range(lp):
        if buf[s + q] != prefix[q]:
            return 0
    for q in range(ls):
        if buf[s + lp + 4 + q] != suffix[q]:
            return 0
    p0, a, b, c = buf[s + lp], buf[s + lp + 1], buf[s + lp + 2], buf[s + lp + 3]
    if p0 != 104 and p0 != 102 and p0 != 100:  # h f d
        return 0
    if a == 102 and b == 109 and c == 97:  # fma
        return 2
    if (a == 97 and b == 100 and c == 100) or (a == 109 and b == 117 and c == 108):  # add mul
        return 1
    return 0


@jit
def extract_fields(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    keep: np.ndarray,
    top: np.ndarray,
    toplens: np.ndarray,
    argk: np.ndarray,
    arglens: np.ndarray,
    prefix: np.ndarray,
    suffix: np.ndarray,
    want_name: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read the fields we use from each kept event, straight into arrays; an event's name is
    read (and hashed) only where ``want_name[r]`` — host API rows never use theirs.

    Returns (ints (m, 13) int64 [MISSING where absent], occupancy (m,) float64, flops (m,)
    float64 [NaN if no counter], name_start, name_end (m,) int64 [-1 if no name], name_escaped
    (m,) bool, name_hash (m,) uint64 [FNV-1a of the raw name bytes]).
    """
    m = keep.shape[0]
    ints = np.full((m, _N_INT), MISSING, np.int64)
    occ = np.full(m, np.nan)
    flops = np.full(m, np.nan)
    ns = np.full(m, -1, np.int64)
    ne = np.full(m, -1, np.int64)
    nesc = np.zeros(m, np.bool_)
    nhash = np.zeros(m, np.uint64)
    for r in range(m):
        s, e = starts[keep[r]], ends[keep[r]]
        depth = 0
        expect = False
        in_args = False
        fsum = 0.0
        fseen = False
        i = s
        while i < e:
            c = buf[i]
            if c == _QUOTE:
                j = _string_end(buf, i, e)
                if j < 0:
                    break
                is_key = expect and (depth == 1 or (depth == 2 and in_args))
                if not is_key:
                    i = j + 1
                    continue
                expect = False
                ks, kn = i + 1, j - i - 1
                k = j + 1
                while k < e and (_is_ws(buf[k]) or buf[k] == _COLON):
                    k += 1
                if depth == 1:
                    which = _match(buf, ks, kn, top, toplens)
                    if which == 0 and want_name[r] and k < e and buf[k] == _QUOTE:  # name
                        v_end = _string_end(buf, k, e)
                        if v_end > k:
                            ns[r], ne[r] = k + 1, v_end
                            h = np.uint64(14695981039346656037)
                            for q in range(k + 1, v_end):
                                h = (h ^ np.uint64(buf[q])) * np.uint64(1099511628211)
                                if buf[q] == _BSLASH:
                                    nesc[r] = True
                            nhash[r] = h
                    elif which == 1:
                        ints[r, F_PID] = _parse_int(buf, k, e)
                    elif which == 2:
                        ints[r, F_TID] = _parse_int(buf, k, e)
                    elif which == 3 and k < e and buf[k] == _LBRACE:
                        in_args = True
                else:
                    which = _match(buf, ks, kn, argk, arglens)
                    if which == 0:
                        ints[r, F_CORR] = _parse_int(buf, k, e)
                    elif which == 1:
                        ints[r, F_STREAM] = _parse_int(buf, k, e)
                    elif which == 2:
                        ints[r, F_DEVICE] = _parse_int(buf, k, e)
                    elif which == 3:
                        ints[r, F_GRID] = _int_array_product(buf, k, e)
                    elif which == 4:
                        ints[r, F_BLOCK] = _int_array_product(buf, k, e)
                    elif which == 5:
                        ints[r, F_REGS] = _parse_int(buf, k, e)
                    elif which == 6:
                        ints[r, F_SMEM] = _parse_int(buf, k, e)
                    elif which == 7:
                        occ[r] = _parse_float(buf, k, e)
                    elif which == 8:
                        ints[r, F_BYTES] = _parse_int(buf, k, e)
                    elif which == 9:
                        ints[r, F_WAIT_STREAM] = _parse_int(buf, k, e)
                    elif which == 10:
                        ints[r, F_WAIT_RECORD] = _parse_int(buf, k, e)
                    elif which == 11:
                        ints[r, F_WAIT_EVENT] = _parse_int(buf, k, e)
                    else:
                        w = _flop_weight(buf, ks, kn, prefix, suffix)
                        if w:
                            v = _parse_float(buf, k, e)
                            if v == v:
                                fsum += w * v
                                fseen = True
                i = k
                continue
            if c == _LBRACE or c == _LBRACK:
                depth += 1
                if depth == 1 or (depth == 2 and in_args and c == _LBRACE):
                    expect = c == _LBRACE
            elif c == _RBRACE or c == _RBRACK:
                depth -= 1
                if depth <= 1:
                    in_args = False
            elif c == _COMMA and (depth == 1 or (depth == 2 and in_args)):
                expect = True
            i += 1
        if fseen:
            flops[r] = fsum
    return ints, occ, flops, ns, ne, nesc, nhash
