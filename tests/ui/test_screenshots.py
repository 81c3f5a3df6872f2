"""The pictures README and docs show are what the code draws (issue 50: screenshots/analysis.svg
and ranks.svg were stale). Each is held, character by character, to the snapshot that
tests/ui/test_snapshots.py verifies of the same screen on the same inputs: regenerate with
`python screenshots/make_screenshots.py analysis.svg ranks.svg` when a snapshot changes."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests.paths import ROOT

SNAPSHOTS = ROOT / "tests" / "ui" / "__snapshots__" / "test_snapshots"
_TEXT = re.compile(r'<text[^>]*?x="([0-9.]+)" y="([0-9.]+)"[^>]*>([^<]*)</text>')


def screen_text(svg: Path) -> list[str]:
    """The characters of a Textual SVG screenshot, line by line, at their columns (the two
    exports style and split the runs of text differently; the characters are the same)."""
    src = svg.read_text(encoding="utf-8")
    cell = 12.2  # Textual's SVG cell width (px)
    rows: dict[float, dict[int, str]] = {}
    for x, y, text in _TEXT.findall(src):
        row = rows.setdefault(float(y), {})
        col = round(float(x) / cell)
        for i, ch in enumerate(html.unescape(text).replace("\xa0", " ")):
            row[col + i] = ch
    return [
        "".join(r.get(i, " ") for i in range(max(r) + 1 if r else 0)).rstrip()
        for _, r in sorted(rows.items())
    ]


@pytest.mark.parametrize("name", ["analysis", "ranks"])
def test_the_screenshot_is_what_the_code_draws(name: str):
    shown = screen_text(ROOT / "screenshots" / f"{name}.svg")
    verified = screen_text(SNAPSHOTS / f"test_snapshot_{name}.svg")
    assert len(shown) > 30  # a whole screen, not an empty parse
    diff = [(i, a, b) for i, (a, b) in enumerate(zip(shown, verified, strict=True)) if a != b]
    assert not diff, f"screenshots/{name}.svg is stale: first differing line {diff[0]}"
