"""The dashboard's first run: the live decoder's kernels compile in a child process, and the
warm-up thread then loads them from numba's cache (engine.eesm.live.warm_up_elsewhere)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.paths import ROOT

SCRIPT = """
import json
from engine.eesm.live import LIVE_KERNELS, warm_up_elsewhere
from engine.jit import cold
before = cold(LIVE_KERNELS)
seconds = warm_up_elsewhere()
# loaded here, not compiled here: the child wrote them; this process only read the cache
loaded = all(k.stats.cache_hits and not k.stats.cache_misses for k in LIVE_KERNELS)
print(json.dumps({"before": before, "after": cold(LIVE_KERNELS), "seconds": seconds,
                  "loaded": loaded}))
"""


@pytest.mark.slow
def test_the_live_kernels_compile_elsewhere_and_load_here(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))

    def run():
        p = subprocess.run(
            [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
            timeout=600, cwd=ROOT,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    first = run()
    assert first["before"] is True and first["after"] is False and first["seconds"] > 0
    assert first["loaded"] is True
    second = run()  # the child's cache is this process's: nothing left to compile
    assert second["before"] is False and second["after"] is False
