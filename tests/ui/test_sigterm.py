"""SIGTERM ends a command as Ctrl-C does (issue 51: `analyze DIR` killed with SIGTERM ended 143,
silently; README's exit-code table says 130)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.paths import ROOT


def test_analyze_of_many_ranks_on_sigterm_says_so_and_exits_130(tmp_path):
    from engine.analyze.ranks.synth_ranks import write_ranks

    write_ranks(tmp_path, ranks=8, steps=40)
    p = subprocess.Popen(
        [sys.executable, "-m", "gitm_tui", "analyze", str(tmp_path), "--no-write"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    time.sleep(1.5)  # importing, starting the cluster or reading the ranks
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err[-2000:])
    assert err.strip().endswith("gitm-tui: interrupted"), err[-500:]
    assert "Traceback" not in err
