"""Numba scanner for Chrome-trace JSON: finds each event of the ``traceEvents`` array in a byte
buffer, reads its ``cat`` and its ``ts``/``dur`` *exactly* (decimal µs → int64 ns, no float64
rounding); then parses the events we keep strictly, reading their fields into columns.

Why not a JSON library alone: a 2 M-event trace is ~0.5 GB of text; decoding it whole costs
over a gigabyte of objects, and float64 ``ts`` values of epoch-µs lose the nanoseconds. Scanning
bytes in chunks keeps memory flat, and only the GPU/runtime events (a fraction of a trace) are
parsed field by field.
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
#: the ints column each ARG_KEYS entry is read into (-1: occupancy, a float of its own)
_ARG_COLUMN = np.array(
    [F_CORR, F_STREAM, F_DEVICE, F_GRID, F_BLOCK, F_REGS, F_SMEM, -1, F_BYTES,
     F_WAIT_STREAM, F_WAIT_RECORD, F_WAIT_EVENT], np.int64,
)  # fmt: skip
_ARG_OCCUPANCY = ARG_KEYS.index(b"est. achieved occupancy %")


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


# ------------------------------------------------------------------- strict JSON, fields read
#: why extract_fields rejected an event (index = code); the event is not valid JSON (RFC 8259)
BAD_REASONS = (
    "",
    "invalid string",
    "invalid number",
    "invalid literal",
    "expected ':' after a key",
    "expected ',' or a closing bracket",
    "expected a key string",
    "expected a value",
    "nested more than 4096 deep",
    "bytes after the event's closing brace",
)
_OBJ, _ARR = 1, 2
_MAX_DEPTH = 4096  # deeper than the json module parses (its recursion limit)
# parser states: what may come next
_ST_VALUE, _ST_VALUE_OR_END, _ST_KEY, _ST_KEY_OR_END, _ST_COLON, _ST_AFTER = range(6)


@jit
def _strict_string_end(buf: np.ndarray, i: int, e: int) -> int:
    """Index of the closing quote of the JSON string opening at i, or -1 if the string is not
    valid JSON (a raw control character, an unknown escape, a bad \\u escape) or not closed."""
    j = i + 1
    while j < e:
        c = buf[j]
        if c == _QUOTE:
            return j
        if c == _BSLASH:
            if j + 1 >= e:
                return -1
            d = buf[j + 1]
            if d == 117:  # \uXXXX
                if j + 5 >= e:
                    return -1
                for q in range(j + 2, j + 6):
                    h = buf[q]
                    if not ((48 <= h <= 57) or (65 <= h <= 70) or (97 <= h <= 102)):
                        return -1
                j += 6
                continue
            # \" \\ \/ \b \f \n \r \t
            if (
                d == 34
                or d == 92
                or d == 47
                or d == 98
                or d == 102
                or d == 110
                or d == 114
                or d == 116
            ):
                j += 2
                continue
            return -1
        if c < 32:
            return -1
        j += 1
    return -1


@jit
def _number_end(buf: np.ndarray, i: int, e: int) -> int:
    """One past the JSON number at i (-?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?), or -1."""
    j = i
    if j < e and buf[j] == 45:
        j += 1
    if j >= e:
        return -1
    c = buf[j]
    if c == 48:
        j += 1
        if j < e and 48 <= buf[j] <= 57:  # a leading zero
            return -1
    elif 49 <= c <= 57:
        j += 1
        while j < e and 48 <= buf[j] <= 57:
            j += 1
    else:
        return -1
    if j < e and buf[j] == 46:
        j += 1
        if j >= e or not (48 <= buf[j] <= 57):
            return -1
        while j < e and 48 <= buf[j] <= 57:
            j += 1
    if j < e and (buf[j] == 101 or buf[j] == 69):
        j += 1
        if j < e and (buf[j] == 43 or buf[j] == 45):
            j += 1
        if j >= e or not (48 <= buf[j] <= 57):
            return -1
        while j < e and 48 <= buf[j] <= 57:
            j += 1
    return j


@jit
def _literal_end(buf: np.ndarray, i: int, e: int) -> int:
    """One past the literal true / false / null at i, or -1."""
    c = buf[i]
    if c == 116 and i + 4 <= e and buf[i + 1] == 114 and buf[i + 2] == 117 and buf[i + 3] == 101:
        return i + 4  # true
    if c == 110 and i + 4 <= e and buf[i + 1] == 117 and buf[i + 2] == 108 and buf[i + 3] == 108:
        return i + 4  # null
    if (
        c == 102
        and i + 5 <= e
        and buf[i + 1] == 97
        and buf[i + 2] == 108
        and buf[i + 3] == 115
        and buf[i + 4] == 101
    ):
        return i + 5  # false
    return -1


_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@jit
def _name_hash(buf: np.ndarray, s: int, e: int) -> tuple[np.uint64, bool]:
    """(hash of the bytes s..e, whether they hold a backslash). FNV-1a over four interleaved
    lanes (byte q feeds lane q % 4), folded together with the length: four independent
    multiply chains run ~3x faster than one over names hundreds of bytes long."""
    h0 = _FNV_OFFSET
    h1 = _FNV_OFFSET ^ np.uint64(1)
    h2 = _FNV_OFFSET ^ np.uint64(2)
    h3 = _FNV_OFFSET ^ np.uint64(3)
    esc = False
    q = s
    while q + 4 <= e:
        b0, b1, b2, b3 = buf[q], buf[q + 1], buf[q + 2], buf[q + 3]
        h0 = (h0 ^ np.uint64(b0)) * _FNV_PRIME
        h1 = (h1 ^ np.uint64(b1)) * _FNV_PRIME
        h2 = (h2 ^ np.uint64(b2)) * _FNV_PRIME
        h3 = (h3 ^ np.uint64(b3)) * _FNV_PRIME
        esc = esc or b0 == _BSLASH or b1 == _BSLASH or b2 == _BSLASH or b3 == _BSLASH
        q += 4
    while q < e:
        h0 = (h0 ^ np.uint64(buf[q])) * _FNV_PRIME
        esc = esc or buf[q] == _BSLASH
        q += 1
    h = (_FNV_OFFSET ^ np.uint64(e - s)) * _FNV_PRIME
    h = (h ^ h0) * _FNV_PRIME
    h = (h ^ h1) * _FNV_PRIME
    h = (h ^ h2) * _FNV_PRIME
    h = (h ^ h3) * _FNV_PRIME
    return h, esc


@jit
def extract_fields(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    top: np.ndarray,
    toplens: np.ndarray,
    argk: np.ndarray,
    arglens: np.ndarray,
    prefix: np.ndarray,
    suffix: np.ndarray,
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int
]:
    """Check each kept event (the spans starts[r]..ends[r]) is valid JSON and read the fields we
    use, in one pass, straight into arrays.

    The parser is strict (RFC 8259 grammar: strings, escapes, numbers, literals, commas and
    colons; UTF-8 is not checked here — names are decoded with replacement): a trace whose kept
    events are not JSON is rejected rather than half-read.

    Returns (ints (m, 13) int64 [MISSING where absent], occupancy (m,) float64, flops (m,)
    float64 [NaN if no counter], name_start, name_end (m,) int64 [-1 if no name], name_escaped
    (m,) bool, name_hash (m,) uint64 [_name_hash of the raw name bytes], bad_row, bad_at): bad_row
    is the first row that is not valid JSON (-1 if none; rows from it on are not read) and
    bad_at encodes where and why: byte offset * 16 + reason code (BAD_REASONS).
    """
    m = starts.shape[0]
    ints = np.full((m, _N_INT), MISSING, np.int64)
    occ = np.full(m, np.nan)
    flops = np.full(m, np.nan)
    ns = np.full(m, -1, np.int64)
    ne = np.full(m, -1, np.int64)
    nesc = np.zeros(m, np.bool_)
    nhash = np.zeros(m, np.uint64)
    stack = np.zeros(_MAX_DEPTH + 1, np.uint8)
    for r in range(m):
        s, e = starts[r], ends[r]
        depth = 0
        state = _ST_VALUE
        in_args = False  # inside the event's top-level "args" object (depth 2)
        args_next = False  # the value about to open is that object
        ks = 0  # the key of the value being read (object members only)
        kn = 0
        fsum = 0.0
        fseen = False
        bad = 0
        i = s
        while i < e:
            c = buf[i]
            if c == 32 or c == 10 or c == 13 or c == 9:
                i += 1
                continue
            if state == _ST_AFTER or (
                (state == _ST_KEY_OR_END and c == _RBRACE)
                or (state == _ST_VALUE_OR_END and c == _RBRACK)
            ):
                if c == _COMMA and state == _ST_AFTER:
                    state = _ST_KEY if stack[depth] == _OBJ else _ST_VALUE
                    i += 1
                    continue
                if (c == _RBRACE and stack[depth] == _OBJ) or (
                    c == _RBRACK and stack[depth] == _ARR
                ):
                    if depth == 2:
                        in_args = False
                    depth -= 1
                    state = _ST_AFTER
                    i += 1
                    if depth == 0:
                        break
                    continue
                bad = 5
                break
            if state == _ST_COLON:
                if c != _COLON:
                    bad = 4
                    break
                state = _ST_VALUE
                i += 1
                continue
            if state == _ST_KEY or state == _ST_KEY_OR_END:
                if c != _QUOTE:
                    bad = 6
                    break
                j = _strict_string_end(buf, i, e)
                if j < 0:
                    bad = 1
                    break
                ks, kn = i + 1, j - i - 1
                state = _ST_COLON
                i = j + 1
                continue
            # a value starts at i (state _ST_VALUE / _ST_VALUE_OR_END)
            keyed = depth > 0 and stack[depth] == _OBJ
            if keyed and depth == 1:
                which = _match(buf, ks, kn, top, toplens)
                if which == 0 and c == _QUOTE:  # name
                    j = _strict_string_end(buf, i, e)
                    if j < 0:
                        bad = 1
                        break
                    ns[r], ne[r] = i + 1, j
                    nhash[r], nesc[r] = _name_hash(buf, i + 1, j)
                    state = _ST_AFTER
                    i = j + 1
                    continue
                if which == 1:
                    ints[r, F_PID] = _parse_int(buf, i, e)
                elif which == 2:
                    ints[r, F_TID] = _parse_int(buf, i, e)
                elif which == 3 and c == _LBRACE:
                    args_next = True
            elif keyed and depth == 2 and in_args:
                which = _match(buf, ks, kn, argk, arglens)
                col = _ARG_COLUMN[which] if which >= 0 else -1
                if col == F_GRID or col == F_BLOCK:
                    ints[r, col] = _int_array_product(buf, i, e)
                elif col >= 0:
                    ints[r, col] = _parse_int(buf, i, e)
                elif which == _ARG_OCCUPANCY:
                    occ[r] = _parse_float(buf, i, e)
                else:
                    fw = _flop_weight(buf, ks, kn, prefix, suffix)
                    if fw:
                        v = _parse_float(buf, i, e)
                        if v == v:
                            fsum += fw * v
                            fseen = True
            if c == _LBRACE or c == _LBRACK:
                if depth == _MAX_DEPTH:
                    bad = 8
                    break
                depth += 1
                if c == _LBRACE:
                    stack[depth] = _OBJ
                    state = _ST_KEY_OR_END
                    if args_next and depth == 2:
                        in_args = True
                else:
                    stack[depth] = _ARR
                    state = _ST_VALUE_OR_END
                args_next = False
                i += 1
                continue
            if depth == 0:  # the span opens with '{' (the scanner's guarantee)
                bad = 7
                break
            if c == _QUOTE:
                j = _strict_string_end(buf, i, e)
                if j < 0:
                    bad = 1
                    break
                i = j + 1
            elif c == 45 or 48 <= c <= 57:
                j = _number_end(buf, i, e)
                if j < 0:
                    bad = 2
                    break
                i = j
            elif c == 116 or c == 102 or c == 110:
                j = _literal_end(buf, i, e)
                if j < 0:
                    bad = 3
                    break
                i = j
            else:
                bad = 7
                break
            state = _ST_AFTER
        if bad == 0 and depth != 0:  # the scanner's '}' closed something else (e.g. a '[')
            bad = 5
        if bad == 0 and i != e:
            bad = 9
        if bad:
            return ints, occ, flops, ns, ne, nesc, nhash, r, i * 16 + bad
        if fseen:
            flops[r] = fsum
    return ints, occ, flops, ns, ne, nesc, nhash, -1, 0
