"""The first run after an install (an empty numba cache): the analysis kernels compile in a
child process while this one reads the trace, the stages are said, and the result is the one a
warm run gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.paths import ROOT, TRACES

SCRIPT = """
import json, sys
from engine.analyze.run import analyze_paths
from engine.analyze.warm import kernels
from engine.jit import cold
before = cold(kernels("analysis")), cold(kernels("import"))
stages = []
(out,) = analyze_paths([sys.argv[1]], stage=stages.append)
print(json.dumps({"cold_before": before, "stages": stages,
                  "after": [cold(kernels("analysis")), cold(kernels("import"))],
                  "analysis": out.analysis.model_dump(mode="json")}))
"""


@pytest.mark.slow
def test_a_first_run_compiles_in_a_child_says_so_and_answers_as_a_warm_run(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    trace = str(TRACES / "kineto" / "a100_triton_one_kernel.json.gz")

    def run():
        p = subprocess.run(
            [sys.executable, "-c", SCRIPT, trace], env=env, capture_output=True, text=True,
            timeout=600, cwd=ROOT,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    first = run()
    assert first["cold_before"] == [True, True]
    assert "first run: compiling the reader" in first["stages"][0]
    assert any("waiting for the analysis kernels" in s for s in first["stages"])
    assert first["after"] == [False, False]  # the child's cache is this process's cache
    second = run()
    assert second["cold_before"] == [False, False]
    assert not any("first run" in s for s in second["stages"])
    assert first["analysis"] == second["analysis"]
