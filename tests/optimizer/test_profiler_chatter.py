"""libkineto writes start/stop probes and an init-thread complaint straight to file descriptor
2 on every capture (torch 2.13, CPU, from a worker thread): on the dashboard they painted over
the screen, headless they broke the narration. A capture keeps them off; other stderr lines
written meanwhile still come out, in order."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.paths import ROOT

SCRIPT = """
import sys, threading, tempfile, os
from engine.workloads.models import job
from engine.workloads.torch_job import Batches, capture
j = job("kitti", "cpu", "tiny")
def go():
    print("before the capture", file=sys.stderr, flush=True)
    capture(j, Batches(j), os.path.join(tempfile.mkdtemp(), "t.json"), steps=2)
    print("after the capture", file=sys.stderr, flush=True)
t = threading.Thread(target=go); t.start(); t.join()
"""


@pytest.mark.slow
def test_a_capture_in_a_worker_thread_puts_no_profiler_chatter_on_stderr():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "USDT:" not in p.stderr and "External init callback" not in p.stderr, p.stderr
    assert p.stderr.index("before the capture") < p.stderr.index("after the capture")
