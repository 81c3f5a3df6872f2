"""The Kineto reader's scan and field extraction in plain Python, for a first run: numba takes
~7 s to compile the scanner (engine.trace.kineto.json_scan), longer than this takes to read a
trace of 100k events. It returns exactly what ``json_scan`` returns for the events it keeps (a
test holds them equal, field for field, on every trace in the repository and on generated
variations), and declines — returns None, and the compiled reader reads the file — whenever it
could not be sure of that:

* the file decompresses to more than ``MAX_BYTES`` (past it, compiling is the faster way);
* a kept event holds a backslash (escapes: the compiled reader hashes and compares raw bytes),
  a duplicate key, a NaN / Infinity, or is not strict JSON (the compiled reader then names the
  error and its offset);
* any element of traceEvents is not JSON, or something stands between them that is not a comma
  (the compiled scanner delimits elements without validating the ones it drops);
* a limit of engine.trace.limits could be reached (an element's size or depth, the metadata's
  size), or 65 blanks stand in a row (the scanner refuses a "cat" key with that many around its
  colon);
* the top-level object is not plain: a key with a backslash, no traceEvents array, more
  brackets around the array than GITM_MAX_JSON_DEPTH;
* a megabyte without an event holds brackets or quotes denser than any trace (a bracket per
  24 bytes, a quote per 5): json builds each element as objects, ~20x its bytes for a run of
  tiny arrays;
* reading the file meets a limit or a broken gzip stream (the compiled reader reports what it
  meets first, which may be a bad event before it).

Numbers are read from their own text (json's parse hooks hand it over), by the same rules as the
compiled parsers (_parse_us_to_ns, _number_end, _parse_int, _parse_float, _int_array_product).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from engine.trace.errors import TraceImportError
from engine.trace.import_memory import gc_paused
from engine.trace.inflate import chunks
from engine.trace.kineto import json_scan as js
from engine.trace.kineto.chrome_stream import READ_CHUNK
from engine.trace.limits import MAX_TIME_NS, ReadLimits

#: decompressed bytes past which the twin declines (a trace of 100k events is ~35 MB; reading
#: it here takes ~1 s, and the interpreter's time and memory grow with the file while
#: compiling's do not)
MAX_BYTES = 64 << 20
#: bytes without an event's "cat" past which the twin checks what is there (see _read)
_QUIET = 1 << 20

_MISSING, _NO_TIME, _OUT = js.MISSING, js.NO_TIME, js.OUT_OF_RANGE
_MAX_WHOLE_US = MAX_TIME_NS // 1000
_CODE = js.CATEGORY_CODES  # every spelling kept (today's and 2021's) → its code
_ARG_COL = {k.decode(): int(c) for k, c in zip(js.ARG_KEYS, js._ARG_COLUMN, strict=True)}
_OCC = js.ARG_KEYS[js._ARG_OCCUPANCY].decode()
_GRIDS = (js.F_GRID, js.F_BLOCK)
_FLOP_PRE, _FLOP_SUF = js.FLOP_PREFIX.decode(), js.FLOP_SUFFIX.decode()
_WS = re.compile(r"[ \t\n\r]*")
_PLAIN_DEC = re.compile(r"(-?)([0-9]+)\.([0-9]+)")
_COLON = re.compile(r'[ \t\n\r]*:[ \t\n\r]*"')
_NAN = float("nan")
_M64 = (1 << 64) - 1


def _skip(text: str, i: int) -> int:
    """Past the blanks at i."""
    m = _WS.match(text, i)
    return m.end() if m else i


class _Decline(Exception):
    """The twin cannot vouch for this file: the compiled reader reads it."""


class _Int(str):
    """A JSON integer's text."""

    __slots__ = ()


class _Float(str):
    """A JSON number's text with a fraction or an exponent."""

    __slots__ = ()


def _refuse(_text: str) -> Any:
    raise _Decline("NaN or Infinity")


class _Dup:
    """object_pairs_hook: a dict, or _Decline on a duplicate key."""

    @staticmethod
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(pairs)
        if len(d) != len(pairs):
            raise _Decline("duplicate key")
        return d


#: kept events: numbers as their text, duplicate keys declined
_DECODE = json.JSONDecoder(
    parse_int=_Int, parse_float=_Float, parse_constant=_refuse, object_pairs_hook=_Dup.hook
).raw_decode
#: other elements: only whether they are JSON (json's fast path)
_VALID = json.JSONDecoder(parse_constant=_refuse).raw_decode
#: what follows a "cat" string: blanks, a colon, blanks, and a plain string (its value)
_CAT_VALUE = re.compile(r'[ \t\n\r]{0,64}:[ \t\n\r]{0,64}"([^"\\]{0,64})"')
_ODD_CAT = re.compile(r"[ \t\n\r]{65}|[ \t\n\r]*:[ \t\n\r]{65}")


# ------------------------------------------------------------------- numbers, by the kernels' rules
def _int_of(v: Any) -> int:
    """An int column's value (json_scan: _number_end's integer part, or _parse_int of a string)."""
    t = type(v)
    if t is _Int:
        neg = v[0] == "-"
        return _MISSING if len(v) - neg > 18 else int(v)
    if t is _Float:
        cut = len(v)
        for ch in ".eE":
            k = v.find(ch)
            if 0 <= k < cut:
                cut = k
        head = v[:cut]
        return _MISSING if len(head) - (head[0] == "-") > 18 else int(head)
    if t is str:
        return _parse_int_text(v)
    return _MISSING


def _parse_int_text(s: str) -> int:
    """_parse_int of a quoted string's content: an optional '-', then 0x-hex or decimal digits
    up to the first other character; MISSING without digits or past 18."""
    k, n = 0, len(s)
    neg = n > 0 and s[0] == "-"
    k += neg
    v = digits = 0
    if k + 1 < n and s[k] == "0" and s[k + 1] in "xX":
        k += 2
        while k < n and s[k] in "0123456789abcdefABCDEF":
            v = v * 16 + int(s[k], 16)
            digits += 1
            k += 1
    else:
        while k < n and "0" <= s[k] <= "9":
            v = v * 10 + ord(s[k]) - 48
            digits += 1
            k += 1
    if digits == 0 or digits > 18:
        return _MISSING
    return -v if neg else v


def _us_to_ns(v: Any) -> int:
    """_parse_us_to_ns of a ts / dur value: exact ns, NO_TIME if not a number, OUT_OF_RANGE."""
    t = type(v)
    if t is _Int:
        neg = v[0] == "-"
        whole = int(v[neg:])
        if whole > _MAX_WHOLE_US:
            return _OUT
        ns = whole * 1000
        if ns >= MAX_TIME_NS:
            return _OUT
        return -ns if neg else ns
    if t is not _Float:
        return _NO_TIME
    m = _PLAIN_DEC.fullmatch(v)
    if m is None:  # an exponent: the kernel's own steps
        return _us_to_ns_slow(v)
    whole = int(m.group(2))
    if whole > _MAX_WHOLE_US:
        return _OUT
    f = m.group(3)
    ns = whole * 1000 + int((f + "00")[:3]) + (1 if len(f) > 3 and f[3] >= "5" else 0)
    if ns >= MAX_TIME_NS:
        return _OUT
    return -ns if m.group(1) else ns


def _us_to_ns_slow(s: str) -> int:
    """_parse_us_to_ns, step by step (numbers with an exponent)."""
    k, e = 0, len(s)
    neg = s[0] == "-"
    k += neg
    whole = digits = 0
    while k < e and "0" <= s[k] <= "9":
        if whole <= _MAX_WHOLE_US:
            whole = whole * 10 + ord(s[k]) - 48
        k += 1
        digits += 1
    frac = nfrac = 0
    round_up = False
    if k < e and s[k] == ".":
        k += 1
        while k < e and "0" <= s[k] <= "9":
            if nfrac < 3:
                frac = frac * 10 + ord(s[k]) - 48
            elif nfrac == 3:
                round_up = s[k] >= "5"
            nfrac += 1
            k += 1
    while nfrac < 3:
        frac *= 10
        nfrac += 1
    if k < e and s[k] in "eE":
        ex = _exponent(s, k + 1, 1000)  # 10**±1000 is already inf / 0 as a float
        if whole > _MAX_WHOLE_US:
            f = abs(_parse_float_text(s)) * 1000.0
        else:
            f = float(whole * 1000 + frac + (1 if round_up else 0)) * _pow10(ex)
        if not f < MAX_TIME_NS:
            return _OUT
        ns = round(f)
    else:
        if whole > _MAX_WHOLE_US:
            return _OUT
        ns = whole * 1000 + frac + (1 if round_up else 0)
        if ns >= MAX_TIME_NS:
            return _OUT
    return -ns if neg else ns


def _exponent(s: str, k: int, cap: int) -> int:
    """The signed exponent whose sign or first digit is s[k], its magnitude accumulated only
    while below ``cap`` (as both kernels bound it)."""
    sign = 1
    if k < len(s) and s[k] in "+-":
        sign = -1 if s[k] == "-" else 1
        k += 1
    ex = 0
    while k < len(s) and "0" <= s[k] <= "9":
        if ex < cap:
            ex = ex * 10 + ord(s[k]) - 48
        k += 1
    return sign * ex


def _pow10(x: int) -> float:
    """10.0 ** x as numba computes a float to an int power — square and multiply, 1 / r for a
    negative power, math.pow past 65536 — not as Python does (they differ from |x| = 23 on:
    found by a review, 1e23 read as 1.0000000000000001e+23)."""
    if abs(x) > 0x10000:
        try:
            return math.pow(10.0, float(x))
        except OverflowError:
            return float("inf")
    e = -x if x < 0 else x
    r, a = 1.0, 10.0
    while e:
        if e & 1:
            r *= a
        e >>= 1
        a *= a
    return 1.0 / r if x < 0 else r


def _parse_float_text(s: str) -> float:
    """_parse_float of a number's text: digit by digit, as the kernel adds them."""
    k, e = 0, len(s)
    neg = e > 0 and s[0] == "-"
    k += neg
    v = 0.0
    digits = 0
    while k < e and "0" <= s[k] <= "9":
        v = v * 10.0 + (ord(s[k]) - 48)
        digits += 1
        k += 1
    if k < e and s[k] == ".":
        k += 1
        scale = 0.1
        while k < e and "0" <= s[k] <= "9":
            v += (ord(s[k]) - 48) * scale
            scale *= 0.1
            digits += 1
            k += 1
    if digits == 0:
        return float("nan")
    if k < e and s[k] in "eE":
        ex = _exponent(s, k + 1, 400)
        v = v * _pow10(max(-308, min(ex, 308)))
    return -v if neg else v


def _float_of(v: Any) -> float:
    """A float field (occupancy, a FLOP counter): NaN unless the value is a number."""
    return _parse_float_text(v) if type(v) is _Int or type(v) is _Float else float("nan")


def _product(v: Any) -> int:
    """_int_array_product of a grid / block value: the product of a list of integers."""
    if not isinstance(v, list):
        return _MISSING
    p = 1
    for x in v:
        if type(x) is not _Int:  # the kernel reads such arrays its own way
            raise _Decline("grid or block with other than integers")
        if len(x) - (x[0] == "-") > 18:
            return _MISSING
        p *= int(x)
    if not v:
        return _MISSING
    if not -(1 << 63) <= p < 1 << 63:  # the kernel's int64 would wrap
        raise _Decline("grid or block product past int64")
    return p


def _flop_weight(key: str) -> int:
    lp, ls = len(_FLOP_PRE), len(_FLOP_SUF)
    if len(key) != lp + 4 + ls or not key.startswith(_FLOP_PRE) or not key.endswith(_FLOP_SUF):
        return 0
    p0, op = key[lp], key[lp + 1 : lp + 4]
    if p0 not in "hfd":
        return 0
    return 2 if op == "fma" else 1 if op in ("add", "mul") else 0


_FNV_OFFSET, _FNV_PRIME = 14695981039346656037, 1099511628211
_MIX = 0x9E3779B97F4A7C15


def _mix(h: int) -> int:
    h = (h * _MIX) & _M64
    return h ^ (h >> 29)


def name_hash(raw: bytes) -> int:
    """json_scan._name_hash of a name's bytes (no backslash in them), as a Python int."""
    h0, h1 = _FNV_OFFSET, _FNV_OFFSET ^ _MIX
    n, q = len(raw), 0
    while q + 16 <= n:
        h0 = _mix(h0 ^ int.from_bytes(raw[q : q + 8], "little"))
        h1 = _mix(h1 ^ int.from_bytes(raw[q + 8 : q + 16], "little"))
        q += 16
    while q < n:
        h0 = ((h0 ^ raw[q]) * _FNV_PRIME) & _M64
        q += 1
    h = _mix(_FNV_OFFSET ^ n)
    h = _mix(h ^ h0)
    return _mix(h ^ h1)


# ----------------------------------------------------------------------------------- the file
def read(path: Path, limits: ReadLimits) -> tuple[bytes, tuple[Any, ...], bytes, bytes] | None:
    """(the decompressed file, (starts, ends, codes) of the kept events followed by
    ``json_scan.extract_fields``' columns for them, the metadata's prefix and suffix) — or None
    when the twin declines (module docstring), a file that cannot be read or passes a limit
    included: the compiled reader then says what is wrong, as far as it reads."""
    parts: list[bytes] = []
    total = 0
    try:
        for part in chunks(path, limits, READ_CHUNK):
            total += len(part)
            if total > MAX_BYTES:
                return None
            parts.append(part)
    except TraceImportError:  # the compiled reader reads as far as it can, and says first
        return None  # what it meets first (a bad event before the gzip's truncation…)
    data = b"".join(parts)
    del parts
    try:
        with gc_paused():
            return _read(data, limits)
    except Exception:  # _Decline, not JSON (ValueError), truncated (IndexError), too deep…:
        return None  # the compiled reader reads it and names any error


def _read(data: bytes, limits: ReadLimits) -> tuple[bytes, tuple[Any, ...], bytes, bytes]:
    text = data.decode("latin-1")  # one character per byte: offsets are byte offsets
    i = 3 if text.startswith("\xef\xbb\xbf") else 0
    i = _skip(text, i)
    if text[i] != "{":
        raise _Decline("not an object")
    i = _skip(text, i + 1)
    key_at = -1
    while text[i] != "}":  # the top-level members before traceEvents
        if text[i] != '"':
            raise _Decline("not a key")
        key, j = _DECODE(text, i)
        if "\\" in text[i:j]:
            raise _Decline("an escaped top-level key")
        j = _skip(text, j)
        if text[j] != ":":
            raise _Decline("no colon")
        j = _skip(text, j + 1)
        if key == "traceEvents":
            if text[j] != "[":
                raise _Decline("traceEvents is not an array")
            key_at = i
            i = j + 1
            break
        _, j = _DECODE(text, j)
        i = _skip(text, j)
        if text[i] == ",":
            i = _skip(text, i + 1)
        elif text[i] != "}":
            raise _Decline("no comma between members")
    if key_at < 0:
        raise _Decline("no traceEvents")
    rows = _Rows(text)
    max_el, max_depth = limits.max_element_bytes, limits.max_json_depth - 2
    i = _skip(text, i)
    find, valid, decode, cat_value = text.find, _VALID, _DECODE, _CAT_VALUE.match
    find_count = str.count
    nxt = find('"cat"', i)  # the next "cat" string: read ahead, as elements are decoded
    checked = 0  # text before this offset was checked for dense elements
    while text[i] != "]":
        if text[i] == ",":
            raise _Decline("an empty element")
        if 0 <= nxt < i:
            nxt = find('"cat"', i)
        # json builds an element as objects, a few times its bytes for an event but ~20x for
        # a long run of tiny arrays or strings (32 MB of "[]," took 946 MiB): a megabyte with
        # no event's "cat" in it may hold one large element, read by the twin only if it is
        # no denser than a trace (a bracket per 24 bytes, a quote per 5; traces: 50-130, 8-9)
        end = nxt if nxt >= 0 else len(text)
        if end - i > _QUIET and i >= checked:
            checked = end
            n = end - i
            if (find_count(text, "[", i, end) + find_count(text, "{", i, end)) * 24 > n or (
                find_count(text, '"', i, end) * 5 > n
            ):
                raise _Decline("a large element denser than any trace")
        # the category, from the element's only "cat" string (the compiled scanner reads the
        # first "cat" key of the top level: one such string leaves no doubt), read ahead so
        # that only kept events are decoded slowly
        got = cat_value(text, nxt + 5) if nxt >= 0 else None
        code = _CODE.get(got.group(1), -1) if got else -1
        ev, j = (decode if code >= 0 else valid)(text, i)
        if not 0 <= nxt < j:  # no "cat" string in this element
            code = -1
        else:
            if _ODD_CAT.match(text, nxt + 5):
                raise _Decline("65 blanks by a cat key")
            if find('"cat"', nxt + 5, j) >= 0:
                raise _Decline("two cat strings in an element")
            if code >= 0 and (type(ev) is not dict or ev.get("cat") != got.group(1)):  # type: ignore[union-attr]
                raise _Decline("a category the read-ahead got wrong")
        if j - i > max_el:
            raise _Decline("an element past GITM_MAX_ELEMENT_BYTES")
        if j - i >= max_depth and text.count("{", i, j) + text.count("[", i, j) >= max_depth:
            raise _Decline("an element that may be past GITM_MAX_JSON_DEPTH")
        if code < 0 and type(ev) is dict and type(ev.get("cat")) is str and ev["cat"] in _CODE:
            raise _Decline("a kept category the read-ahead missed")
        if code >= 0:
            if find("\\", i, j) >= 0:
                raise _Decline("a kept event with a backslash")
            rows.add(ev, i, j, code)
        i = _skip(text, j)
        if text[i] == ",":
            i = _skip(text, i + 1)
        elif text[i] != "]":
            raise _Decline("no comma between elements")
    suffix_at = i + 1
    if key_at + len(data) - suffix_at > limits.max_element_bytes:
        raise _Decline("metadata past GITM_MAX_ELEMENT_BYTES")
    if text.find("\\", 0, key_at) >= 0:  # the compiled reader follows raw keys only
        raise _Decline("a backslash in the metadata")
    around = (text, 0, key_at), (text, suffix_at, len(text))
    if sum(t.count("[", a, b) + t.count("{", a, b) for t, a, b in around) >= limits.max_json_depth:
        raise _Decline("metadata that may nest past GITM_MAX_JSON_DEPTH")
    return data, rows.columns(), data[:key_at], data[suffix_at:]


class _Rows:
    """json_scan.extract_fields' columns, one kept event (already decoded) at a time."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.codes: list[int] = []
        self.ints: list[list[int]] = []
        self.ts: list[int] = []
        self.dur: list[int] = []
        self.occ: list[float] = []
        self.flops: list[float] = []
        self.ns: list[int] = []
        self.ne: list[int] = []
        self.hash: list[int] = []
        self._hashes: dict[str, int] = {}  # this file's names (not kept across files)

    def add(self, ev: dict[str, Any], i: int, j: int, code: int) -> None:
        self.starts.append(i)
        self.ends.append(j)
        self.codes.append(code)
        row = [_MISSING] * js._N_INT
        self.ints.append(row)
        name = ev.get("name")
        if type(name) is str:  # where its text is: the first "name" key whose value it is
            text, at = self.text, i
            while True:
                at = text.find('"name"', at, j)
                if at < 0:
                    raise _Decline("name not found")
                at += 6
                m = _COLON.match(text, at)
                if m and text.startswith(name, m.end()) and text[m.end() + len(name)] == '"':
                    break
            h = self._hashes.get(name)
            if h is None:
                h = self._hashes[name] = name_hash(name.encode("latin-1"))
            self.ns.append(m.end())
            self.ne.append(m.end() + len(name))
            self.hash.append(h)
        else:
            self.ns.append(-1)
            self.ne.append(-1)
            self.hash.append(0)
        if "pid" in ev:
            row[js.F_PID] = _int_of(ev["pid"])
        if "tid" in ev:
            row[js.F_TID] = _int_of(ev["tid"])
        self.ts.append(_us_to_ns(ev["ts"]) if "ts" in ev else _NO_TIME)
        self.dur.append(_us_to_ns(ev["dur"]) if "dur" in ev else _NO_TIME)
        occ = flops = _NAN
        args = ev.get("args")
        if type(args) is dict:
            fsum, fseen = 0.0, False
            for k, v in args.items():
                col = _ARG_COL.get(k)
                if col is None:
                    if code == js.CAT_PROFILER:
                        fw = _flop_weight(k)
                        if fw:
                            x = _float_of(v)
                            if x == x:
                                fsum += fw * x
                                fseen = True
                elif col in _GRIDS:
                    row[col] = _product(v)
                elif col >= 0:
                    row[col] = _int_of(v)
                elif k == _OCC:
                    occ = _float_of(v)
            if fseen:
                flops = fsum
        self.occ.append(occ)
        self.flops.append(flops)

    def columns(self) -> tuple[Any, ...]:
        """(starts, ends, codes, ints, ts, dur, occupancy, flops, name_start, name_end,
        name_escaped, name_hash), as extract_fields returns them (after its bad_row, bad_at)."""
        a = np.asarray
        m = len(self.starts)
        ints = a(self.ints, np.int64).reshape(m, js._N_INT)
        return (a(self.starts, np.int64), a(self.ends, np.int64), a(self.codes, np.int64),
                ints, a(self.ts, np.int64), a(self.dur, np.int64), a(self.occ, np.float64),
                a(self.flops, np.float64), a(self.ns, np.int64), a(self.ne, np.int64),
                np.zeros(m, np.bool_), a(self.hash, np.uint64))  # fmt: skip
