"""Outside text made safe to show: the one sanitiser for every string that came from a trace, a
program's output or a file before it reaches a terminal, a Markdown file or a markup renderer.

Kernel names, device names, file names, SQLite error messages and a command workload's output are
written by someone else. Printed raw, an ESC or OSC sequence in one of them clears the screen or
retitles the terminal, a bidi override reorders what the reader sees, a lone surrogate (a JSON
``"\\ud800"`` escape) cannot even be encoded, and an 8 MB name stalls any widget that lays it
out. :func:`clean` handles all of these in one pass. JSON files keep the strings as they were, but
written safely: :func:`valid_unicode` replaces what UTF-8 cannot hold, :func:`escape_json_text`
escapes what the JSON encoder left raw.

Rich/Textual *markup* is not this module's business (the engine never imports rich): the UI puts
a cleaned string into a ``rich.text.Text`` (or escapes it), never into a markup string.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

#: what the tail of a cut string is replaced by (one character)
ELLIPSIS = "…"

#: ASCII whitespace that breaks or jumps a line, and Unicode's line and paragraph separators:
#: every cleaned string is one line, so each of these becomes one space (not collapsed, so the
#: rest of a name stays where it was)
_SPACE = frozenset(map(ord, "\t\n\v\f\r\u2028\u2029"))
#: every code point clean() rewrites, as inclusive ranges: C0 controls, DEL and C1 controls
#: (U+009B alone is a CSI on many terminals), the bidi controls of Unicode TR9 (ALM, LRM/RLM,
#: embeddings, overrides, isolates: the "Trojan Source" characters that reorder what a reader
#: sees; U+2028/U+2029 lie between them), and surrogates — a str holds one only when it is
#: unpaired (a JSON "\ud800" escape), and then it cannot be encoded as UTF-8
_UNSAFE_RANGES = (
    (0x00, 0x1F),
    (0x7F, 0x9F),
    (0x061C, 0x061C),
    (0x200E, 0x200F),
    (0x2028, 0x202E),
    (0x2066, 0x2069),
    (0xD800, 0xDFFF),
)
_UNSAFE = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _UNSAFE_RANGES) + "]")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: what a JSON encoder leaves raw in a string although a terminal showing the file may act on
#: it (it escapes C0 controls itself; surrogates are valid_unicode's)
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _visible(code: int) -> str:
    if code in _SPACE:
        return " "
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"  # what a UTF-8 decoder shows for bytes it cannot read
    # Python's own escape syntax, ASCII only: says exactly which character was there
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: the str.translate table of every unsafe code point: one C-level pass over a string
_REPLACE = {c: _visible(c) for lo, hi in _UNSAFE_RANGES for c in range(lo, hi + 1)}


def clean(text: str, limit: int | None = None) -> str:
    """Return ``text`` safe for a terminal, a Markdown line and a markup renderer's plain-text
    path, on one line: tab, newline and the other line breaks become a space; every other C0
    control, DEL, C1 control and bidi control becomes its visible escape (ESC → the four
    characters ``\\x1b``, U+202E → ``\\u202e``); a lone surrogate becomes U+FFFD. Printable
    Unicode (CJK, accents, ``<>[]{}`` of C++ templates) is kept as is. With ``limit``, the result
    has at most ``limit`` characters, the last one ``…`` when something was cut."""
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        # cut first, so an 8 MB name costs only what is shown: each character cleans to one or
        # more, so limit + 1 of them tell whether anything is cut
        text = text[: limit + 1]
    if _UNSAFE.search(text) is not None:
        text = text.translate(_REPLACE)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + ELLIPSIS
    return text


def valid_unicode(text: str) -> str:
    """Return ``text`` with each lone surrogate replaced by U+FFFD and nothing else changed: for
    JSON files (analysis.json, perfetto.json), whose encoder escapes control characters itself
    but cannot write a surrogate as UTF-8 (and a strict reader rejects a ``\\ud800`` escape)."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def escape_json_text(json_text: str) -> str:
    """Return JSON text with its raw DEL, C1 and bidi controls and line separators written as
    ``\\uXXXX`` escapes: the same values to any JSON reader, inert on a terminal that shows the
    file. A plain text substitution is exact, since these characters occur only inside strings
    (JSON's own syntax and whitespace are ASCII)."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


def map_strings(data: Any, fn: Callable[[str], str]) -> Any:
    """Return a copy of JSON-like ``data`` (dicts, lists, tuples, scalars) with ``fn`` applied
    to every string in it, dict keys included: how a whole model dump goes through one of the
    functions above."""
    if isinstance(data, str):
        return fn(data)
    if isinstance(data, dict):
        return {map_strings(k, fn): map_strings(v, fn) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(map_strings(x, fn) for x in data)
    return data


#: characters that make outside text active in Markdown (CommonMark/GFM) or HTML: a tag or an
#: autolink (``<``, ``>``), a link or an image — a remote fetch when the report is rendered —
#: (``[``, ``]``), a table cell's end (``|``), a code span (a backtick), and the escape itself.
#: Escaped with a backslash by :func:`md_escape`; the rest (emphasis, parentheses) is left as
#: written: it cannot fetch or run anything, and a raw report stays readable
_MD_SPECIAL = re.compile(r"([\\`\[\]<>|])")


def md_escape(text: str) -> str:
    """Outside text (already :func:`clean`-ed) as Markdown prose or a table cell: every markup
    character backslash-escaped (a ``<script>`` stays text, ``![x](url)`` is no image)."""
    return _MD_SPECIAL.sub(r"\\\1", text)


#: the most characters of one outside string in report.md (a kernel name in a table is cut
#: shorter, see md_code): about one screen of text; an 8 MB name is not a report
REPORT_CHARS = 2000


def md_code(name: str, width: int = 80) -> str:
    """A name for a Markdown code span in a table: cleaned (``clean``), at most ``width``
    characters, no pipe or backtick."""
    return clean(name, width).replace("|", "\\|").replace("`", "'")


def md_text(text: str) -> str:
    """Outside text as prose on one Markdown line or in a table cell: cleaned, its markup
    characters escaped (``md_escape``)."""
    return md_escape(clean(text, REPORT_CHARS))


def us_text(ns: int) -> str:
    """Exact decimal microseconds for Chrome-trace JSON 'ts'/'dur' fields (no float rounding)."""
    sign = "-" if ns < 0 else ""
    ns = abs(int(ns))
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def us_texts(ns: Any) -> list[str]:
    """``us_text`` of every integer nanosecond count in ``ns`` (an array): the same strings, the
    divisions done by numpy (a Perfetto export writes two per row)."""
    import numpy as np

    a = np.asarray(ns, dtype=np.int64)
    q, r = np.divmod(np.abs(a), 1000)
    f = _FRACTIONS  # ".000" … ".999": a list lookup, not a format, for the three digits
    if not (a < 0).any():
        return [f"{x}{f[y]}" for x, y in zip(q.tolist(), r.tolist(), strict=True)]
    signs = np.where(a < 0, "-", "").tolist()
    return [f"{s}{x}{f[y]}" for s, x, y in zip(signs, q.tolist(), r.tolist(), strict=True)]


_FRACTIONS = [f".{i:03d}" for i in range(1000)]
