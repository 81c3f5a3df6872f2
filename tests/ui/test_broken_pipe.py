"""A reader that goes away (`gitm-tui analyze … | head -1`) has read what it wanted: the
command ends with exit 0 and nothing on stderr — rich's own answer was a silent exit 1."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.paths import ROOT, TRACES

TRACE = TRACES / "kineto" / "a100_event_sync_multistream.json.gz"


@pytest.mark.parametrize("args", [[], ["--explain"]])
def test_analyze_into_a_reader_that_stops_after_one_line(args, tmp_path):
    # written outputs: the "wrote …" line comes after the summary, once the reader has gone
    cmd = [sys.executable, "-m", "gitm_tui", "analyze", str(TRACE), *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=env)
    assert p.stdout is not None and p.stderr is not None
    first = p.stdout.readline()
    p.stdout.close()  # `| head -1`
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0, err
    assert first and err == ""
