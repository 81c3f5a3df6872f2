"""engine.text.clean: the one sanitiser for outside strings (escapes, bidi, surrogates, length)."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from engine.text import clean, escape_json_text, map_strings, valid_unicode

#: what may never reach a terminal or a Markdown line from outside: C0 controls (tab and
#: newline included: a cleaned string is one line), DEL, C1, bidi controls, line separators and
#: surrogates
FORBIDDEN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)


def test_escape_sequences_become_visible_text():
    assert clean("\x1b[2J") == "\\x1b[2J"
    assert clean("\x1b]0;pwned\x07") == "\\x1b]0;pwned\\x07"
    assert clean("a\x00b\x7fc\x9bd") == "a\\x00b\\x7fc\\x9bd"
    assert clean("\u202egnp.exe\u202c \u2066x\u2069") == "\\u202egnp.exe\\u202c \\u2066x\\u2069"


def test_line_breaks_become_spaces_and_a_lone_surrogate_the_replacement_character():
    assert clean("one\ntwo\tthree\r\u2028four") == "one two three  four"
    assert clean("x\ud800y") == "x\ufffdy"
    clean("x\ud800y").encode("utf-8")  # encodable now


def test_printable_unicode_and_markup_are_kept_as_they_are():
    for s in (
        "void at::native::vectorized_elementwise_kernel<4, float>(int, float*)",
        "日本語のカーネル é ñ ü — …",
        "[bold red]x[/] [link=file:///etc/passwd]",
        "emoji 👩‍💻 (zero-width joiner kept)",
    ):
        assert clean(s) == s


def test_limit_cuts_with_an_ellipsis_and_costs_only_what_is_shown():
    assert clean("abcdef", 4) == "abc…" and clean("abcd", 4) == "abcd"
    assert clean("\x1b\x1b\x1b", 6) == "\\x1b\\…"
    big = "\x1b[2J" + "k" * 8_000_000
    assert clean(big, 100) == "\\x1b[2J" + "k" * 92 + "…"


def test_valid_unicode_only_replaces_surrogates():
    assert valid_unicode("a\x1b\ud800b") == "a\x1b\ufffdb"
    assert valid_unicode("plain") == "plain"


def test_escape_json_text_keeps_the_values_and_leaves_no_raw_control():
    value = {"name": "x\x7f\x9b2J\u202egnp\u2028 日本 é", "n": [1, "\x1b"]}
    raw = json.dumps(value, ensure_ascii=False)
    safe = escape_json_text(raw)
    assert json.loads(safe) == value
    assert FORBIDDEN.search(safe) is None and "日本 é" in safe


def test_map_strings_reaches_every_string_of_a_dump():
    data = {"a\x1b": ["x\x07", ("y\n", 3)], "n": None, "f": 1.5}
    assert map_strings(data, clean) == {"a\\x1b": ["x\\x07", ("y ", 3)], "n": None, "f": 1.5}


#: every code point, surrogates included (hypothesis leaves them out unless told)
ANY_CHAR = st.characters(exclude_categories=())


@given(st.text(alphabet=ANY_CHAR))
def test_nothing_forbidden_survives_and_the_result_is_utf8(s):
    out = clean(s)
    assert FORBIDDEN.search(out) is None
    out.encode("utf-8")
    assert clean(out) == out  # idempotent: cleaning twice changes nothing


@given(st.text(alphabet=ANY_CHAR), st.integers(min_value=1, max_value=50))
def test_limit_is_a_bound(s, limit):
    out = clean(s, limit)
    assert len(out) <= limit
    assert out == clean(s) or out.endswith("…")


def test_outside_text_in_markdown_is_never_markup():
    """Issue 36: a device name or $USER holding ``<script>`` or an image link reached report.md
    raw — rendered, the image is fetched from its server. md_escape leaves such text text."""
    from engine.text import md_escape

    hostile = "<script>alert(1)</script> ![x](http://evil.example/p.png) [a](b) a|b `c`"
    out = md_escape(hostile)
    # every markup character is escaped (preceded by a backslash that is not itself escaped)
    assert re.findall(r"(?<!\\)[<>\[\]|`]", out) == []
    assert out.replace("\\", "") == hostile  # the reader still sees what was written
