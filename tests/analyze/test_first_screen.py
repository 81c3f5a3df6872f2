"""`gitm-tui analyze`'s first screen, taken in at a glance (issue 38 item 5): labelled spans,
one line of counting rules (the paragraph behind --explain), a title that says what the table
holds, memsets apart from copies, one line of basis per lever (the rest in report.md)."""

from __future__ import annotations

from gitm_tui.analyze_view import BASIS_CHARS
from gitm_tui.cli import main
from tests.paths import ROOT

TRACE = ROOT / "tests" / "data" / "traces" / "kineto" / "a100_training_3streams.json.gz"


def _screen(capsys, *flags: str) -> str:
    assert main(["analyze", str(TRACE), "--no-write", *flags]) == 0
    return capsys.readouterr().out


def test_the_first_screen_says_what_each_figure_is(capsys):
    out = _screen(capsys)
    assert "GPU busy 501.57 ms, summed over 4 stream(s)" in out
    assert "wall span 464.59 ms (first to last GPU row)" in out
    (counting,) = [ln for ln in out.splitlines() if ln.startswith("counting:")]
    assert counting.endswith("(--explain: the whole rule)")
    assert "Holistic Trace Analysis" not in out  # the paragraph is behind --explain
    assert "top 10 kernels by GPU time" in out
    assert "memsets: 654 in 1.26 ms" in out and "copies memset" not in out
    assert "κ gate (can each label be told apart?): identifiable" in out
    rows = out.split("what would help", 1)[1].split("basis: its first clause", 1)[0]
    for line in rows.splitlines()[2:]:  # one line per lever, the basis cut with …
        assert line.count("+") >= 1 and len(line.split("%", 2)[-1].strip()) <= BASIS_CHARS + 12
    assert "report.md" in out


def test_explain_prints_the_whole_counting_rule(capsys):
    out = _screen(capsys, "--explain")
    assert "Holistic Trace Analysis's default load counts less" in out
