"""SIGTERM ends a command as Ctrl-C does (issue 51: `analyze DIR` killed with SIGTERM ended 143,
silently; README's exit-code table says 130)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import ROOT


def _children(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                out.append(int(d.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc")
def test_analyze_of_many_ranks_on_sigterm_says_so_and_exits_130(tmp_path):
    from engine.analyze.ranks.synth_ranks import write_ranks

    write_ranks(tmp_path, ranks=8, steps=200)
    p = subprocess.Popen(
        [sys.executable, "-m", "gitm_tui", "analyze", str(tmp_path), "--no-write"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    # SIGTERM once the local cluster's workers are there (forked from it: its children), while
    # the ranks are being read — a fixed sleep came after the end once the job got fast
    deadline = time.monotonic() + 60
    while p.poll() is None and len(_children(p.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert p.poll() is None, "the job ended before its workers were seen"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err[-2000:])
    assert err.strip().endswith("gitm-tui: interrupted"), err[-500:]
    assert "Traceback" not in err
