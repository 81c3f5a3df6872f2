"""Numba scanner for Chrome-trace JSON: follows the top-level object to its own ``traceEvents``
key (``find_top_key``), finds each element of that array in a byte buffer, 64 bytes at a time
(byte-class masks: see ``bytemask``), with each event's ``cat`` — buffer after buffer, its state
carried so each byte is scanned once (``scan_stream``), nesting bounded; then parses the events
we keep strictly, reading the fields we use into columns — ``ts`` and ``dur`` *exactly* (decimal
µs → int64 ns, no float64 rounding; beyond ±MAX_TIME_NS, OUT_OF_RANGE rather than an overflow).

One module (~1,300 lines) on purpose: numba compiles each kernel with the helpers it calls and
caches the result keyed on the *calling* kernel's source file, so a helper moved to a file of its
own could be edited while the cached scanners kept its old code (bytemask.py, the one exception,
says so at its top).

Why not a JSON library alone: a 2 M-event trace is ~0.5 GB of text; decoding it whole costs
over a gigabyte of objects, and float64 ``ts`` values of epoch-µs lose the nanoseconds. Scanning
bytes in chunks keeps memory flat, and only the GPU/runtime events (a fraction of a trace) are
parsed field by field.
"""

from __future__ import annotations

import numpy as np

from engine.jit import jit
from engine.trace.kineto.bytemask import ctz, eq64, escaped, load64, masks64, prefix_xor
from engine.trace.limits import MAX_TIME_NS

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
    b"cpu_op",  # framework ops: their recorded shapes give the DERIVED tier (trace/shapes.py)
    b"user_annotation",  # ProfilerStep#N ranges: the step boundaries
    b"mtia_ccp_events",  # MTIA device activity (its command processor's rows, per stream)
    b"mtia_runtime",  # MTIA runtime calls: with a correlation id, the device rows' launches
)
CAT_KERNEL, CAT_MEMCPY, CAT_MEMSET, CAT_RUNTIME, CAT_DRIVER, CAT_SYNC, CAT_PROFILER = range(7)
CAT_CPU_OP, CAT_ANNOTATION, CAT_MTIA, CAT_MTIA_RUNTIME = 7, 8, 9, 10
#: the same categories as Kineto spelled them in 2021 (the profiler of PyTorch's releases of
#: those dates), read as the code of today's spelling. libkineto's output_json.cpp wrote them
#: as literals: "Kernel", "Memcpy", "Memset" from its first commit to 1679e50e (2022-04-08;
#: since, the activity type's name: "kernel", "gpu_memcpy", "gpu_memset"), "Runtime" to
#: bc4eaef5 (2021-11-18; then "cuda_runtime"), "Operator" for every CPU activity to 6f9c0eef
#: (2021-06-08; then "cpu_op" / "user_annotation"), so that a ProfilerStep#N range of that era
#: is an "Operator" too (the readers take a CPU op so named for a step: kineto._framework,
#: cpu_events). Its other categories are not kept, as today's are not: "Trace" (the profiler's
#: window, still written so), "User" (GPU-side user ranges: gpu_user_annotation), "async"
#: (launch flows: the link is args.correlation)
CATEGORY_ALIASES = (
    (b"Kernel", CAT_KERNEL),
    (b"Memcpy", CAT_MEMCPY),
    (b"Memset", CAT_MEMSET),
    (b"Runtime", CAT_RUNTIME),
    (b"Operator", CAT_CPU_OP),
)
#: every spelling the scanner matches (the table's rows), and the code each row is read as
SPELLINGS = CATEGORIES + tuple(s for s, _ in CATEGORY_ALIASES)
_CODE_OF_ROW = np.array([*range(len(CATEGORIES)), *(c for _, c in CATEGORY_ALIASES)], np.int64)
#: the same, for Python (json_twin, the tests): spelling → code
CATEGORY_CODES = {s.decode(): int(c) for s, c in zip(SPELLINGS, _CODE_OF_ROW, strict=True)}
NO_TIME = np.iinfo(np.int64).min
#: a ts/dur that is a number but not a time int64 nanoseconds can hold with headroom
OUT_OF_RANGE = NO_TIME + 1
_MAX_WHOLE_US = MAX_TIME_NS // 1000
MALFORMED = -2  # scan_stream's closed_at when the array is not valid JSON
TOO_DEEP = -3  # scan_stream's closed_at when an element nests deeper than max_depth
ODD_CAT = -4  # scan_stream's closed_at: more than CAT_BLANKS blanks around a "cat" key's colon


def category_table() -> tuple[np.ndarray, np.ndarray]:
    """Return the kept categories' spellings (SPELLINGS) as a padded (n, maxlen) uint8 table and
    their lengths: ``_cat_value`` reads row i as the code ``_CODE_OF_ROW[i]``."""
    return key_table(SPELLINGS)


@jit
def _is_ws(c: int) -> bool:
    return c == 32 or c == 10 or c == 13 or c == 9


@jit
def _parse_us_to_ns(buf: np.ndarray, k: int, e: int) -> int:
    """Parse the JSON number at k (microseconds) exactly into int64 nanoseconds: NO_TIME if
    there is none, OUT_OF_RANGE if its magnitude is MAX_TIME_NS or more (never an overflow)."""
    k0 = k
    neg = False
    if k < e and buf[k] == 45:  # '-'
        neg = True
        k += 1
    whole = 0
    digits = 0
    while k < e and 48 <= buf[k] <= 57:
        if whole <= _MAX_WHOLE_US:  # past it the value is out of range: stop before overflow
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
    if k < e and (buf[k] == 101 or buf[k] == 69):  # exponent: rare; scaled as a float
        k += 1
        esign = 1
        if k < e and buf[k] == 45:
            esign = -1
            k += 1
        elif k < e and buf[k] == 43:
            k += 1
        ex = 0
        while k < e and 48 <= buf[k] <= 57:
            if ex < 1000:  # 10**±1000 is already inf / 0 as a float
                ex = ex * 10 + (buf[k] - 48)
            k += 1
        if whole > _MAX_WHOLE_US:  # a long mantissa: only its float value can be scaled
            f = abs(_parse_float(buf, k0, e)) * 1000.0
        else:
            f = float(whole * 1000 + frac + (1 if round_up else 0)) * 10.0 ** (esign * ex)
        if not f < MAX_TIME_NS:  # NaN and inf too
            return OUT_OF_RANGE
        ns = int(round(f))
    else:
        if whole > _MAX_WHOLE_US:
            return OUT_OF_RANGE
        ns = whole * 1000 + frac + (1 if round_up else 0)
        if ns >= MAX_TIME_NS:
            return OUT_OF_RANGE
    return -ns if neg else ns


@jit
def _grown(a: np.ndarray, cap: int) -> np.ndarray:
    out = np.empty(cap, a.dtype)
    for i in range(a.shape[0]):  # a loop, not out[:n] = a: the slice assignment's shape check
        out[i] = a[i]  # alone took 2.5 s of numba compilation on a first run
    return out


#: blanks allowed on each side of a "cat" key's colon (writers put 0 or 1): bounding them bounds
#: how far past a block the scanner reads, so a chunk can be scanned up to LOOKAHEAD from its end
CAT_BLANKS = 64
#: bytes past a block's start that scanning the block may read: the block, a "cat" key starting
#: in it, its colon and blanks, and the longest kept category value with its quotes
LOOKAHEAD = 256
assert 64 + 5 + 2 * CAT_BLANKS + 3 + max(map(len, SPELLINGS)) <= LOOKAHEAD


@jit
def _cat_value(buf: np.ndarray, k: int, cats: np.ndarray, catlens: np.ndarray) -> int:
    """At k, just past a top-level "cat" string: its category code if it is the key of a
    string we keep (any of SPELLINGS: the code its row stands for); -1 for a value we do not
    keep; -2 if it is not a key (a "cat" value); -3 if more than CAT_BLANKS blanks stand on a
    side of the colon (reads at most LOOKAHEAD - 64 bytes from k - 5)."""
    n = buf.shape[0]
    stop = min(n, k + CAT_BLANKS + 1)
    while k < stop and _is_ws(buf[k]):
        k += 1
    if k >= n:
        return -1
    if k == stop:
        return -3
    if buf[k] != _COLON:
        return -2
    k += 1
    stop = min(n, k + CAT_BLANKS + 1)
    while k < stop and _is_ws(buf[k]):
        k += 1
    if k >= n:
        return -1
    if k == stop:
        return -3
    if buf[k] != _QUOTE:
        return -1
    j = k + 1
    stop = min(n, j + cats.shape[1] + 1)  # a longer value is not one of ours
    while j < stop and buf[j] != _QUOTE and buf[j] != _BSLASH:
        j += 1
    if j >= stop or buf[j] != _QUOTE:
        return -1  # escapes in a category name: not one of ours (compared raw, as bytes)
    row = _match(buf, k + 1, j - k - 1, cats, catlens)
    return _CODE_OF_ROW[row] if row >= 0 else -1


# the scan state carried from one buffer to the next (int64 array, updated in place)
S_DEPTH, S_EL_START, S_EL_CODE, S_IN_STR, S_ESC = range(5)


def new_scan_state() -> np.ndarray:
    """The scan state at the start of the array: between two elements, outside any string.
    Plain numpy where Python calls it (a kernel's load from the cache costs ~3 ms, this a few
    µs); ``_new_scan_state`` is the same, for kernels."""
    state = np.zeros(5, np.int64)
    state[S_EL_CODE] = -2
    return state


_new_scan_state = jit(new_scan_state)


@jit
def _scan_blocks(
    buf: np.ndarray,
    b: int,
    limit: int,
    starts: np.ndarray,
    ends: np.ndarray,
    codes: np.ndarray,
    cats: np.ndarray,
    catlens: np.ndarray,
    max_depth: int,
    count: int,
    depth: int,
    el_start: int,
    el_code: int,
    resume: int,
    in_str: np.uint64,
    esc_carry: np.uint64,
    first: np.ndarray,
) -> tuple[int, int, int, int, int, int, int, np.uint64, np.uint64]:
    """scan_stream's loop over 64-byte blocks from b while b < limit, until the array ends or
    the next block might not fit in starts/ends; returns the state to resume from: (b, count,
    depth, el_start, el_code, resume, closed_at, in_str, esc_carry). An element that began
    before this buffer (el_start -1) and ends in it is not in starts/ends: first[0] gets one
    past its end and first[1] its code. A function of its own so the arrays it writes are
    never reassigned in the loop (numba would count references on each visit of a bracket)."""
    n = buf.shape[0]
    cap = starts.shape[0]
    closed_at = -1
    tail = np.empty(128, np.uint8)
    while b < limit and count + 32 <= cap:  # a block completes at most 32 elements ("{}")
        if b + 68 <= n:
            blk = buf
            at = b
        else:  # the last block(s) of the stream: classify a padded copy
            for i in range(tail.shape[0]):  # loops: see _grown
                tail[i] = buf[b + i] if b + i < n else 32
            blk = tail
            at = 0
        quote, bslash, opens, closes, _ = masks64(blk, at)
        if bslash or esc_carry:
            esc, esc_carry = escaped(bslash, esc_carry)
            quote &= ~esc
        inside = prefix_xor(quote) ^ in_str
        in_str = np.uint64(0) - (inside >> np.uint64(63))
        brackets = (opens | closes) & ~inside
        # strings that are exactly "cat": an opening quote, then c, a, t and a quote (masks
        # of the bytes 1 to 4 further on, from loads at those offsets)
        cat = (
            (quote & inside)
            & eq64(blk, at + 1, 99)
            & eq64(blk, at + 2, 97)
            & eq64(blk, at + 3, 116)
            & eq64(blk, at + 4, 34)
        )
        todo = brackets | cat
        while todo:
            bit = todo & (~todo + np.uint64(1))
            todo ^= bit
            p = b + ctz(bit)
            if cat & bit:  # the event's top-level "cat" key gives its category
                if depth == 1 and el_code == -2:
                    el_code = _cat_value(buf, p + 5, cats, catlens)
                    if el_code == -3:
                        resume = p
                        return (
                            b,
                            count,
                            depth,
                            el_start,
                            el_code,
                            resume,
                            ODD_CAT,
                            in_str,
                            esc_carry,
                        )
                continue
            c = buf[p]
            if c == _LBRACE or c == _LBRACK:
                if depth == 0:
                    el_start = p
                    el_code = -2  # no "cat" key seen yet
                depth += 1
                if depth > max_depth:
                    resume = p
                    return b, count, depth, el_start, el_code, resume, TOO_DEEP, in_str, esc_carry
                continue
            if depth == 0:  # the array's ']', or a '}' that closes nothing (not JSON)
                closed_at = p if c == _RBRACK else MALFORMED
                resume = p
                return b, count, depth, el_start, el_code, resume, closed_at, in_str, esc_carry
            depth -= 1
            if depth == 0:
                if el_start < 0:  # began in an earlier buffer
                    first[0] = p + 1
                    first[1] = max(el_code, -1)
                elif buf[el_start] == _LBRACE:
                    starts[count] = el_start
                    ends[count] = p + 1
                    codes[count] = max(el_code, -1)
                    count += 1
                resume = p + 1
        b += 64
    return b, count, depth, el_start, el_code, resume, closed_at, in_str, esc_carry


@jit
def scan_stream(
    buf: np.ndarray,
    pos: int,
    limit: int,
    state: np.ndarray,
    cats: np.ndarray,
    catlens: np.ndarray,
    max_depth: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, int, int, int, int]:
    """Scan array elements from ``pos``, 64-byte blocks starting before ``limit``, carrying
    ``state`` (new_scan_state at the array's start; updated in place) from the previous
    buffer, so that a stream is scanned one buffer after the other, each byte once.

    The caller keeps ``limit + LOOKAHEAD <= len(buf)`` except on the stream's last buffer,
    where ``limit = len(buf)``: a block may read that far ahead (a "cat" key's value).

    Returns (starts, ends, codes, count, stop, resume, closed_at, first_end, first_code): the
    object elements begun and completed in this buffer (ends one past their '}') with their
    category codes; ``stop`` = where scanning stopped (the next buffer begins its scan there);
    ``resume`` = where the last complete element ended (or the open one began: the state's
    S_EL_START, -1 if before this buffer); ``closed_at`` = index of the array's ']' if it
    was reached, -1 if not, ``MALFORMED`` when a stray '}' makes the array invalid JSON,
    ``TOO_DEEP`` when an element nests deeper than ``max_depth`` (counted from the element),
    ``ODD_CAT`` for a "cat" key with more than CAT_BLANKS blanks at its colon (``resume`` =
    where, for those three); ``first_end`` = one past the end of the element that was open
    when this buffer began, if it ends here (else -1), ``first_code`` its category code.
    Non-object elements are skipped.

    64 bytes at a time: byte-class masks give the quotes (less escaped ones), hence which bytes
    are inside strings, hence the brackets that count; only those are visited one by one, to
    follow the nesting depth. Elements are delimited, not validated: the kept ones are parsed
    strictly by ``extract_fields``.
    """
    n = buf.shape[0]
    cap = max(0, min(limit, n) - pos) // 128 + 64  # real events are 150-400 bytes
    starts = np.empty(cap, np.int64)
    ends = np.empty(cap, np.int64)
    codes = np.empty(cap, np.int64)
    first = np.full(2, -1, np.int64)
    # count is 0 * cap, not the literal 0: numba would compile _scan_blocks for Literal[int](0)
    # as well as for int64 (0.9 s more on a first run)
    b, count, resume = pos, 0 * cap, pos
    depth = state[S_DEPTH]
    el_start = -1 if depth > 0 else pos
    el_code = state[S_EL_CODE]
    in_str = np.uint64(0) - np.uint64(state[S_IN_STR])  # all ones inside a string
    esc_carry = np.uint64(state[S_ESC])  # 1 after a backslash that escapes the next byte
    while True:
        b, count, depth, el_start, el_code, resume, closed_at, in_str, esc_carry = _scan_blocks(
            buf,
            b,
            limit,
            starts,
            ends,
            codes,
            cats,
            catlens,
            max_depth,
            count,
            depth,
            el_start,
            el_code,
            resume,
            in_str,
            esc_carry,
            first,
        )
        if b >= limit or closed_at != -1:
            break
        cap *= 2
        starts = _grown(starts, cap)
        ends = _grown(ends, cap)
        codes = _grown(codes, cap)
    if closed_at == -1 and depth > 0:
        resume = el_start
    state[S_DEPTH] = depth
    state[S_EL_START] = el_start
    state[S_EL_CODE] = el_code
    state[S_IN_STR] = 1 if in_str else 0
    state[S_ESC] = int(esc_carry)
    return (
        starts[:count], ends[:count], codes[:count], count, b, resume, closed_at,
        first[0], first[1],
    )  # fmt: skip


@jit
def scan_events(
    buf: np.ndarray, pos: int, cats: np.ndarray, catlens: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, int]:
    """Scan a whole buffer from ``pos`` (inside ``traceEvents``, between two elements): the
    one-buffer form of scan_stream, without a depth limit.

    Returns (starts, ends, codes, count, resume, closed_at): the complete object elements
    found with their category codes; ``resume`` = where an unfinished element (or the unread
    rest) begins; ``closed_at`` as scan_stream's (never TOO_DEEP here)."""
    out = scan_stream(buf, pos, buf.shape[0], _new_scan_state(), cats, catlens, 1 << 62)
    return out[0], out[1], out[2], out[3], out[5], out[6]


# ------------------------------------------------------------------ the top-level object
#: find_top_key's results
FIND_MORE, FIND_KEY, FIND_END, FIND_NOT_OBJECT, FIND_TOO_DEEP = range(5)
# its state (int64 array, updated in place): nesting depth, inside a string, after a backslash,
# what comes next in the top-level object, how much of "traceEvents" the key read so far
# matches (-1: not it), file offset of that key's opening quote, whether the object began
F_DEPTH, F_IN_STR, F_ESC, F_MODE, F_MATCH, F_KEY_AT, F_BEGUN = range(7)
_M_KEY, _M_COLON, _M_VALUE, _M_AFTER = range(4)  # a key (or '}'), ':', a value, ',' or '}'
_TRACE_EVENTS = np.frombuffer(b"traceEvents", np.uint8).copy()
_N_TE = len(b"traceEvents")


def new_find_state(after_array: bool) -> np.ndarray:
    """find_top_key's state at the file's start, or just after the traceEvents array (plain
    numpy: see new_scan_state)."""
    state = np.zeros(7, np.int64)
    state[F_MATCH] = -1
    state[F_KEY_AT] = -1
    if after_array:
        state[F_DEPTH] = 1
        state[F_MODE] = _M_AFTER
        state[F_BEGUN] = 1
    return state


@jit
def find_top_key(
    buf: np.ndarray, pos: int, base: int, state: np.ndarray, max_depth: int
) -> tuple[int, int]:
    """Follow the file's top-level object from buf[pos] (``buf[0]`` at file offset ``base``),
    ``state`` carried from the previous buffer, to the value of its own "traceEvents" key —
    a key spelled so in a nested object is not it. Returns (what, index): FIND_KEY and the
    index of that value's first byte (state[F_KEY_AT] = the key's file offset); FIND_MORE
    (the buffer ended first); FIND_END and the index of the object's closing brace;
    FIND_NOT_OBJECT and the index of a first byte that is not '{'; FIND_TOO_DEEP and the
    index of the bracket that nests deeper than ``max_depth``. Byte by byte: the metadata
    around the event array is a few KB."""
    n = buf.shape[0]
    depth = state[F_DEPTH]
    in_str = state[F_IN_STR]
    esc = state[F_ESC]
    mode = state[F_MODE]
    match = state[F_MATCH]
    begun = state[F_BEGUN]
    what = FIND_MORE
    i = pos
    while i < n:
        c = buf[i]
        key = depth == 1 and mode == _M_KEY  # inside a key of the top-level object
        if in_str:
            if esc:
                esc = 0
                match = -1 if key else match  # an escape in the key: not spelled so
            elif c == _BSLASH:
                esc = 1
                match = -1 if key else match
            elif c == _QUOTE:
                in_str = 0
                if key:
                    mode = _M_COLON
                    if match != _N_TE:
                        match = -1
            elif key and match >= 0:
                match = match + 1 if match < _N_TE and c == _TRACE_EVENTS[match] else -1
            i += 1
            continue
        if _is_ws(c):
            i += 1
            continue
        if not begun:
            if c != _LBRACE:
                what = FIND_NOT_OBJECT
                break
            begun = 1
        if depth == 1 and mode == _M_VALUE and match == _N_TE:
            what = FIND_KEY  # the value of the top-level traceEvents key starts here
            break
        if c == _QUOTE:
            in_str = 1
            if depth == 1:
                if mode == _M_KEY:
                    match = 0
                    state[F_KEY_AT] = base + i
                else:
                    mode = _M_AFTER
        elif c == _LBRACE or c == _LBRACK:
            if depth == 1:
                mode = _M_AFTER
            depth += 1
            if depth > max_depth:
                what = FIND_TOO_DEEP
                break
            if depth == 1:
                mode = _M_KEY
        elif c == _RBRACE or c == _RBRACK:
            depth -= 1
            if depth <= 0:
                what = FIND_END
                break
        elif depth == 1:
            if c == _COLON and mode == _M_COLON:
                mode = _M_VALUE
            elif c == _COMMA:
                mode = _M_KEY
                match = -1
            elif mode == _M_VALUE:
                mode = _M_AFTER  # a number or literal
        i += 1
    state[F_DEPTH] = depth
    state[F_IN_STR] = in_str
    state[F_ESC] = esc
    state[F_MODE] = mode
    state[F_MATCH] = match
    state[F_BEGUN] = begun
    return what, i


# ----------------------------------------------------------------------------- field extraction
#: top-level keys read from each kept event, and the keys read inside its "args" object
TOP_KEYS = (b"name", b"pid", b"tid", b"args", b"ts", b"dur")
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
    b"size",  # an MTIA dma_request's bytes
)
#: CUPTI-profiler SASS counters: <prefix>{h,f,d}{add,mul,fma}<suffix>; FMA counts two FLOPs
FLOP_PREFIX = b"smsp__sass_thread_inst_executed_op_"
FLOP_SUFFIX = b"_pred_on.sum"
MISSING = np.iinfo(np.int64).min + 1  # an integer field the event did not carry
#: pid, tid, correlation, stream, device, grid, block, regs, smem, bytes, the cuda_sync
#: rows' wait_on_stream, wait_on_cuda_event_record_corr_id, wait_on_cuda_event_id, and size
_N_INT = 14
F_PID, F_TID, F_CORR, F_STREAM, F_DEVICE, F_GRID, F_BLOCK, F_REGS, F_SMEM, F_BYTES = range(10)
F_WAIT_STREAM, F_WAIT_RECORD, F_WAIT_EVENT, F_SIZE = 10, 11, 12, 13
#: the ints column each ARG_KEYS entry is read into (-1: occupancy, a float of its own)
_ARG_COLUMN = np.array(
    [F_CORR, F_STREAM, F_DEVICE, F_GRID, F_BLOCK, F_REGS, F_SMEM, -1, F_BYTES,
     F_WAIT_STREAM, F_WAIT_RECORD, F_WAIT_EVENT, F_SIZE], np.int64,
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
_ST_VALUE, _ST_VALUE_OR_END, _ST_KEY, _ST_KEY_OR_END, _ST_AFTER = range(5)


@jit
def _strict_string_end(buf: np.ndarray, i: int, e: int) -> int:
    """Index of the closing quote of the JSON string opening at i, or -1 if the string is not
    valid JSON (a raw control character, an unknown escape, a bad \\u escape) or not closed.
    Skips 64 bytes at a time to the next quote, backslash or control character."""
    j = i + 1
    size = buf.shape[0]
    while True:
        if j + 64 <= size:
            quote, bslash, _, _, ctrl = masks64(buf, j)
            m = quote | bslash | ctrl
            if not m:
                j += 64
                if j >= e:
                    return -1
                continue
            j += ctz(m)
        else:
            while j < e and buf[j] != _QUOTE and buf[j] != _BSLASH and buf[j] >= 32:
                j += 1
        if j >= e:
            return -1
        c = buf[j]
        if c == _QUOTE:
            return j
        if c != _BSLASH:  # a raw control character
            return -1
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
        elif (
            d == 34 or d == 92 or d == 47 or d == 98 or d == 102 or d == 110 or d == 114 or d == 116
        ):  # \" \\ \/ \b \f \n \r \t
            j += 2
        else:
            return -1


@jit
def _number_end(buf: np.ndarray, i: int, e: int) -> tuple[int, int]:
    """(one past the JSON number at i, its integer part) for -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?;
    (-1, MISSING) if it is not one. The integer part (fraction and exponent dropped, like
    _parse_int) is MISSING beyond 18 digits."""
    j = i
    neg = j < e and buf[j] == 45
    if neg:
        j += 1
    if j >= e:
        return -1, MISSING
    c = buf[j]
    v = 0
    if c == 48:
        j += 1
        if j < e and 48 <= buf[j] <= 57:  # a leading zero
            return -1, MISSING
    elif 49 <= c <= 57:
        while j < e and 48 <= buf[j] <= 57:
            v = v * 10 + (buf[j] - 48)
            j += 1
    else:
        return -1, MISSING
    if j - i - neg > 18:
        v = MISSING
    elif neg:
        v = -v
    if j < e and buf[j] == 46:
        j += 1
        if j >= e or not (48 <= buf[j] <= 57):
            return -1, MISSING
        while j < e and 48 <= buf[j] <= 57:
            j += 1
    if j < e and (buf[j] == 101 or buf[j] == 69):
        j += 1
        if j < e and (buf[j] == 43 or buf[j] == 45):
            j += 1
        if j >= e or not (48 <= buf[j] <= 57):
            return -1, MISSING
        while j < e and 48 <= buf[j] <= 57:
            j += 1
    return j, v


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
_MIX = np.uint64(0x9E3779B97F4A7C15)
_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_BSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)


@jit
def _mix(h: np.uint64) -> np.uint64:
    h *= _MIX
    return h ^ (h >> np.uint64(29))


@jit
def _name_hash(buf: np.ndarray, s: int, e: int) -> tuple[np.uint64, bool]:
    """(64-bit hash of the bytes s..e, whether they hold a backslash). Two lanes of 8-byte
    words (multiply, xor-shift), the tail byte by byte (FNV-1a), folded with the length: names
    are hundreds of bytes long, and one multiply chain per byte was the parser's slowest loop."""
    h0 = _FNV_OFFSET
    h1 = _FNV_OFFSET ^ _MIX
    bs = np.uint64(0)
    q = s
    while q + 16 <= e:
        w0 = load64(buf, q)
        w1 = load64(buf, q + 8)
        h0 = _mix(h0 ^ w0)
        h1 = _mix(h1 ^ w1)
        x0 = w0 ^ _BSLASHES  # a zero byte where w0 has a backslash
        x1 = w1 ^ _BSLASHES
        bs |= ((x0 - _ONES) & ~x0 | (x1 - _ONES) & ~x1) & _HIGHS
        q += 16
    esc = bs != 0
    while q < e:
        h0 = (h0 ^ np.uint64(buf[q])) * _FNV_PRIME
        esc = esc or buf[q] == _BSLASH
        q += 1
    h = _mix(_FNV_OFFSET ^ np.uint64(e - s))
    h = _mix(h ^ h0)
    return _mix(h ^ h1), esc


@jit
def _punctuation(c: int, state: int, top: int) -> tuple[int, int, int]:
    """A ',' after a value, or the bracket that closes the open object or array (``top``, its
    kind): (the next state, the change of depth, bad: 0, or 5 for anything else)."""
    if c == _COMMA and state == _ST_AFTER:
        return (_ST_KEY if top == _OBJ else _ST_VALUE), 0, 0
    if (c == _RBRACE and top == _OBJ) or (c == _RBRACK and top == _ARR):
        return _ST_AFTER, -1, 0
    return state, 0, 5


@jit
def _member_key(buf: np.ndarray, i: int, e: int) -> tuple[int, int, int, int]:
    """The key opening at i and the ':' after it, blanks around it read too: (key start, key
    length, where its value starts, bad: 0, or 6 no quote / 1 not a string / 4 no colon)."""
    if buf[i] != _QUOTE:
        return i, 0, i, 6
    j = _strict_string_end(buf, i, e)
    if j < 0:
        return i, 0, i, 1
    ks, kn = i + 1, j - i - 1
    i = j + 1
    while i < e and _is_ws(buf[i]):
        i += 1
    if i < e and buf[i] != _COLON:
        return ks, kn, i, 4
    i += 1  # (past e when the span ends here: the caller's depth check says why)
    while i < e and _is_ws(buf[i]):
        i += 1
    return ks, kn, min(i, e), 0


@jit
def _scalar(buf: np.ndarray, c: int, i: int, e: int, want: bool) -> tuple[int, int, int, bool]:
    """Read past the string, number or literal at i: (one past it, bad: 0, or 1 string /
    2 number / 3 literal / 7 no value; the integer it holds when ``want`` and it has one (a
    number, or a quoted decimal or 0x-hex integer), whether it has)."""
    if c == _QUOTE:
        j = _strict_string_end(buf, i, e)
        if j < 0:
            return i, 1, MISSING, False
        return j + 1, 0, (_parse_int(buf, i, j + 1) if want else MISSING), want
    if c == 45 or 48 <= c <= 57:
        j, iv = _number_end(buf, i, e)
        return (i, 2, MISSING, False) if j < 0 else (j, 0, iv, True)
    if c == 116 or c == 102 or c == 110:
        j = _literal_end(buf, i, e)
        return (i, 3, MISSING, False) if j < 0 else (j, 0, MISSING, False)
    return i, 7, MISSING, False


@jit
def _after_value(buf: np.ndarray, i: int, e: int, in_object: bool) -> tuple[int, int]:
    """The blanks after a value, and in an object the ',' before its next member, read here
    rather than one loop turn each: (where to go on, the state there)."""
    while i < e and _is_ws(buf[i]):
        i += 1
    if i < e and buf[i] == _COMMA and in_object:
        i += 1
        while i < e and _is_ws(buf[i]):
            i += 1
        return i, _ST_KEY
    return i, _ST_AFTER


@jit
def extract_fields(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    codes: np.ndarray,
    top: np.ndarray,
    toplens: np.ndarray,
    argk: np.ndarray,
    arglens: np.ndarray,
    prefix: np.ndarray,
    suffix: np.ndarray,
) -> tuple[
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    int,
    int,
]:
    """Check each kept event (the spans starts[r]..ends[r], of category codes[r]) is valid JSON
    and read the fields we use, in one pass, straight into arrays.

    The parser is strict (RFC 8259 grammar: strings, escapes, numbers, literals, commas and
    colons; UTF-8 is not checked here — names are decoded with replacement): a trace whose kept
    events are not JSON is rejected rather than half-read.

    Returns (ints (m, 14) int64 [MISSING where absent], ts, dur (m,) int64 ns [NO_TIME where
    absent or not a number; µs read exactly, see _parse_us_to_ns], occupancy (m,) float64,
    flops (m,) float64 [NaN if no counter or not a cuda_profiler_range], name_start, name_end
    (m,) int64 [-1 if no name], name_escaped (m,) bool, name_hash (m,) uint64 [_name_hash of
    the raw name bytes], bad_row, bad_at): bad_row
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
    ts = np.full(m, NO_TIME, np.int64)
    dur = np.full(m, NO_TIME, np.int64)
    stack = np.zeros(_MAX_DEPTH + 1, np.uint8)
    for r in range(m):
        s, e = starts[r], ends[r]
        depth = 0
        state = _ST_VALUE
        in_args = False  # inside the event's top-level "args" object (depth 2)
        args_next = False  # the value about to open is that object
        # the key of the value being read (object members only); s - s, not the literal 0:
        # numba would also compile _match and _flop_weight for Literal[int](0)
        ks = s - s
        kn = s - s
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
                state, step, bad = _punctuation(c, state, stack[depth])
                if bad:
                    break
                if step and depth == 2:
                    in_args = False
                depth += step
                i += 1
                if depth == 0:
                    break
                continue
            if state == _ST_KEY or state == _ST_KEY_OR_END:
                ks, kn, i, bad = _member_key(buf, i, e)
                if bad or i >= e:
                    break
                state = _ST_VALUE
                continue
            # a value starts at i (state _ST_VALUE / _ST_VALUE_OR_END)
            icol = -1  # the ints column it is read into, if an integer (or a quoted one)
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
                    icol = F_PID
                elif which == 2:
                    icol = F_TID
                elif which == 3 and c == _LBRACE:
                    args_next = True
                elif which == 4:
                    ts[r] = _parse_us_to_ns(buf, i, e)
                elif which == 5:
                    dur[r] = _parse_us_to_ns(buf, i, e)
            elif keyed and depth == 2 and in_args:
                which = _match(buf, ks, kn, argk, arglens)
                col = _ARG_COLUMN[which] if which >= 0 else -1
                if col == F_GRID or col == F_BLOCK:
                    ints[r, col] = _int_array_product(buf, i, e)
                elif col >= 0:
                    icol = col
                elif which == _ARG_OCCUPANCY:
                    occ[r] = _parse_float(buf, i, e)
                elif codes[r] == CAT_PROFILER:  # SASS counters: only profiler ranges have them
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
            i, bad, iv, has = _scalar(buf, c, i, e, icol >= 0)
            if bad:
                break
            if has and icol >= 0:
                ints[r, icol] = iv
            i, state = _after_value(buf, i, e, stack[depth] == _OBJ)
        if bad == 0 and depth != 0:  # the scanner's '}' closed something else (e.g. a '[')
            bad = 5
        if bad == 0 and i != e:
            bad = 9
        if bad:
            return ints, ts, dur, occ, flops, ns, ne, nesc, nhash, r, i * 16 + bad
        if fseen:
            flops[r] = fsum
    return ints, ts, dur, occ, flops, ns, ne, nesc, nhash, -1, 0


# ------------------------------------------------------------------ framework ops' shapes
#: the args a framework op's work is read from (engine.trace.kineto.kineto._op_work), quoted as keys
SHAPE_KEYS = (b'"Input Dims"', b'"Input type"', b'"Concrete Inputs"')
#: arrays nested deeper than this are left to Python (whose json module may refuse them)
_SHAPE_DEPTH = 64


@jit
def _ascii(buf: np.ndarray, s: int, e: int) -> bool:
    """Whether buf[s:e] is all ASCII (8 bytes at a time)."""
    q = s
    acc = np.uint64(0)
    while q + 8 <= e:
        acc |= load64(buf, q)
        q += 8
    if acc & _HIGHS:
        return False
    while q < e:
        if buf[q] >= 128:
            return False
        q += 1
    return True


@jit
def _value_end(buf: np.ndarray, j: int, e: int) -> int:
    """One past the JSON array, object or string at j (strings skipped strictly, brackets
    counted outside them), or -1: another kind of value, nested deeper than _SHAPE_DEPTH, or
    not closed before e. Python's json module reads no byte past this end for a value that
    starts at j, valid or not (it fails at or before the bracket that closes the count)."""
    c = buf[j]
    if c == _QUOTE:
        q = _strict_string_end(buf, j, e)
        return -1 if q < 0 else q + 1
    if c != _LBRACK and c != _LBRACE:
        return -1
    depth = 0
    k = j
    while k < e:
        c = buf[k]
        if c == _QUOTE:
            q = _strict_string_end(buf, k, e)
            if q < 0:
                return -1
            k = q + 1
            continue
        if c == _LBRACK or c == _LBRACE:
            depth += 1
            if depth > _SHAPE_DEPTH:
                return -1
        elif c == _RBRACK or c == _RBRACE:
            depth -= 1
            if depth == 0:
                return k + 1
        k += 1
    return -1


@jit
def _key_at(buf: np.ndarray, j: int, e: int, keys: np.ndarray, keylens: np.ndarray, k: int) -> bool:
    """Whether keys[k] (its quotes included) lies at buf[j:e] (buf[j] is a quote)."""
    n = keylens[k]
    if j + n > e:
        return False
    for q in range(1, n):  # noqa: SIM110 - a loop: numba compiles no generator into all()
        if buf[j + q] != keys[k, q]:
            return False
    return True


@jit
def _last_keys(
    buf: np.ndarray,
    s: int,
    e: int,
    keys: np.ndarray,
    keylens: np.ndarray,
    found: np.ndarray,
    hit: np.ndarray,
) -> None:
    """found[k] = where the last occurrence of keys[k] in buf[s:e] starts (-1: none); ``hit`` is
    scratch of the same size. Blocks of 64 bytes from the end back: a candidate is a quote
    followed by one of the keys' first letters (eq64, both at once), and only candidates are
    compared with the keys — byte by byte backwards, this was 0.33 s of a 2 M-event import."""
    nk = keys.shape[0]
    found[:] = -1
    left = nk
    hi = e  # the block [lo, hi)
    one = np.uint64(1)
    while hi > s and left:
        lo = hi - 64
        if lo >= 0 and lo + 65 <= buf.shape[0]:
            m = eq64(buf, lo, _QUOTE)
            second = np.uint64(0)
            for k in range(nk):
                second |= eq64(buf, lo + 1, keys[k, 1])
            m &= second
            if lo < s:
                m &= ~((one << np.uint64(s - lo)) - one)
        else:  # the first or last bytes of the buffer: byte by byte
            lo = max(lo, s)
            m = np.uint64(0)
            for j in range(lo, hi):
                if buf[j] == _QUOTE:
                    m |= one << np.uint64(j - lo)
        hit[:] = -1
        while m:  # low to high: the last in the block wins
            j = lo + ctz(m)
            m &= m - one
            for k in range(nk):
                if found[k] < 0 and _key_at(buf, j, e, keys, keylens, k):
                    hit[k] = j
        for k in range(nk):
            if hit[k] >= 0:
                found[k] = hit[k]
                left -= 1
        hi = lo


@jit
def shape_keys(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    rows: np.ndarray,
    name_hash: np.ndarray,
    keys: np.ndarray,
    keylens: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What decides each framework op's work, found as kineto._op_work finds it, without
    decoding: for each event rows[i], the span of each SHAPE_KEYS value (its key's last
    occurrence in the event, the first ':' after it, blanks skipped, one JSON value), and a
    64-bit hash of its name hash and those spans' bytes — so ops with the same name and shapes
    (a training loop repeats them every step) can share one decode.

    Returns (spans (m, 6) int64: start, end of each value, -1 where its key is absent; hashes
    (m,) uint64; sure (m,) bool). ``sure`` is False where this kernel leaves the op to Python:
    a non-ASCII byte anywhere in the event (Python decodes it as UTF-8 first), a value that is
    not an array, object or string, or a key with no value after it."""
    m = rows.shape[0]
    spans = np.full((m, 6), -1, np.int64)
    hashes = np.zeros(m, np.uint64)
    sure = np.zeros(m, np.bool_)
    found = np.empty(3, np.int64)
    hit = np.empty(3, np.int64)
    for i in range(m):
        r = rows[i]
        s, e = starts[r], ends[r]
        if not _ascii(buf, s, e):
            continue
        _last_keys(buf, s, e, keys, keylens, found, hit)
        h = _mix(_FNV_OFFSET ^ np.uint64(name_hash[r]))
        ok = True
        for k in range(3):
            a = found[k]
            h = _mix(h ^ np.uint64(k + 1))
            if a < 0:
                continue
            j = a + keylens[k]
            while j < e and buf[j] != _COLON:
                j += 1
            j += 1
            while j < e and (buf[j] == 32 or buf[j] == 9 or buf[j] == 13 or buf[j] == 10):
                j += 1
            if j >= e:
                ok = False
                break
            v = _value_end(buf, j, e)
            if v < 0:
                ok = False
                break
            spans[i, 2 * k] = j
            spans[i, 2 * k + 1] = v
            vh, _ = _name_hash(buf, j, v)
            h = _mix(h ^ vh)
        if ok:
            sure[i] = True
            hashes[i] = h
    return spans, hashes, sure


@jit
def same_shapes(
    buf: np.ndarray, spans: np.ndarray, name_hash: np.ndarray, rep: np.ndarray
) -> np.ndarray:
    """For each op i: whether op rep[i] has the same name hash and the same bytes in every
    span of shape_keys (a hash collision is caught here, not trusted)."""
    m = rep.shape[0]
    out = np.zeros(m, np.bool_)
    for i in range(m):
        p = rep[i]
        if name_hash[i] != name_hash[p]:
            continue
        ok = True
        for k in range(3):
            a0, a1 = spans[i, 2 * k], spans[i, 2 * k + 1]
            b0, b1 = spans[p, 2 * k], spans[p, 2 * k + 1]
            if (a0 < 0) != (b0 < 0) or a1 - a0 != b1 - b0:
                ok = False
                break
            for q in range(a1 - a0 if a0 >= 0 else 0):
                if buf[a0 + q] != buf[b0 + q]:
                    ok = False
                    break
            if not ok:
                break
        out[i] = ok
    return out
