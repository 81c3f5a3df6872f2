"""The first run after an install (an empty numba cache): a child compiles the kernels for the
next run while this one reads the trace with the JSON scanner's Python twin and analyses it with
interpreted kernels — or, for a trace too large to interpret, waits for the analysis kernels.
The stages are said, and the result is the one a warm run gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.paths import ROOT, TRACES

SCRIPT = """
import json, sys, time
import engine.analyze.run as run
from engine.analyze.warm import kernels
from engine.jit import cold
if sys.argv[2] == "large":
    run.INTERPRET_MAX_ROWS = 0  # every trace is too large to interpret: wait for the child
before = cold(kernels("analysis")), cold(kernels("import"))
stages = []
(out,) = run.analyze_paths([sys.argv[1]], stage=stages.append)
done = time.monotonic()
while (cold(kernels("analysis")) or cold(kernels("import"))) and time.monotonic() < done + 300:
    time.sleep(0.2)  # the child goes on compiling for the next run
print(json.dumps({"cold_before": before, "stages": stages,
                  "after": [cold(kernels("analysis")), cold(kernels("import"))],
                  "analysis": out.analysis.model_dump(mode="json")}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("size", ["small", "large"])
def test_a_first_run_answers_while_the_kernels_compile_and_as_a_warm_run(tmp_path, size):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    trace = str(TRACES / "kineto" / "a100_event_sync_multistream.json.gz")

    def run():
        p = subprocess.run(
            [sys.executable, "-c", SCRIPT, trace, size], env=env, capture_output=True,
            text=True, timeout=600, cwd=ROOT,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    first = run()
    assert first["cold_before"] == [True, True]
    assert "first run, kernels compiling in the background" in first["stages"][0]
    waited = any("waiting for the analysis kernels" in s for s in first["stages"])
    interpreted = any("(first run: interpreted)" in s for s in first["stages"])
    assert (waited, interpreted) == ((True, False) if size == "large" else (False, True))
    assert first["after"] == [False, False]  # the child's cache is this process's cache
    second = run()
    assert second["cold_before"] == [False, False]
    assert not any("first run" in s for s in second["stages"])
    assert first["analysis"] == second["analysis"]
