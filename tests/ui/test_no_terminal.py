"""No terminal, no hang (issue 51): `gitm-tui --budget 3s < /dev/null > out 2> err` ended its run
but never exited, and err filled with the alternate screen's escapes; `analyze --ui` and
`audit --ui` the same. The dashboard without a terminal runs headless (said in one line); a
screen asked for by --ui is one line and exit 2."""

from __future__ import annotations

import subprocess
import sys

from tests.paths import ROOT, TRACES


def _run(*args: str, tmp_path: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gitm_tui", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "GITM_SCRATCH": str(tmp_path), "HOME": str(tmp_path)},
    )  # fmt: skip


def test_the_dashboard_without_a_terminal_runs_headless_and_exits(tmp_path):
    p = _run("--budget", "3s", tmp_path=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stderr.startswith("gitm-tui: no terminal (stdin and stdout are not one): running")
    assert "\x1b[?1049h" not in p.stderr + p.stdout  # no alternate screen written anywhere
    assert '"type":"run_finished"' in p.stdout.replace(" ", "")


def test_a_screen_asked_for_without_a_terminal_is_one_line_and_exit_2(tmp_path):
    trace = str(TRACES / "kineto" / "a100_triton_one_kernel.json.gz")
    for args, what in (
        (("analyze", trace, "--ui"), "analyze --ui"),
        (("audit", "--ui", str(tmp_path / "ledger.json")), "audit --ui"),
        (("diff", trace, trace, "--ui"), "diff --ui"),
    ):
        p = _run(*args, tmp_path=tmp_path)
        assert p.returncode == 2, (args, p.stderr)
        assert (
            p.stderr == f"gitm-tui: error: {what} needs a terminal (stdin and stdout are not "
            "one): run it in a terminal, or without --ui for text\n"
        ), p.stderr
        assert p.stdout == ""
