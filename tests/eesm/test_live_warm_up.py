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


EARLY = """
import json, time
from engine.eesm import live
from engine.jit import cold
live.compile_early()  # as the dashboard does before Textual starts
time.sleep(1.0)  # the app's start-up
seconds = live.warm_up_elsewhere()
loaded = all(k.stats.cache_hits and not k.stats.cache_misses for k in live.LIVE_KERNELS)
print(json.dumps({"seconds": seconds, "loaded": loaded, "after": cold(live.LIVE_KERNELS)}))
"""


@pytest.mark.slow
def test_an_early_compile_is_the_one_the_warm_up_waits_for(tmp_path):
    """compile_early's child is the warm-up's: the kernels load here, and the seconds the header
    shows count from that child's start, not from the warm-up thread's."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-c", EARLY], env=env, capture_output=True, text=True, timeout=600,
        cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["loaded"] is True and r["after"] is False and r["seconds"] >= 1.0


LIFECYCLE = """
import json, time
from engine.eesm import live
live.compile_early()
first = live._child[0]
live.compile_early()  # a second engine while the first child compiles: no second child
same = live._child[0] is first
first.wait()
time.sleep(1.0)  # an engine that never warmed up; another one, later, does
seconds = live.warm_up_elsewhere()
print(json.dumps({"same": same, "seconds": seconds}))
"""


@pytest.mark.slow
def test_one_child_compiles_and_a_finished_one_is_not_counted(tmp_path):
    """A second compile_early while the first child compiles starts none; a warm-up after the
    child has finished counts its own seconds (loading), not those since that child started."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-c", LIFECYCLE], env=env, capture_output=True, text=True,
        timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["same"] is True and r["seconds"] < 1.0


def test_only_a_run_that_decodes_compiles_early(monkeypatch):
    """A simulated run decodes (its live kernels compile early); a command run measures a
    program and decodes nothing, so nothing competes with it for the CPU."""
    from engine.runtime import Engine, RunConfig
    from engine.runtime import engine as engine_mod

    started = []
    monkeypatch.setattr(engine_mod, "compile_early", lambda: started.append(True))
    Engine(RunConfig(workload="hft-lob", budget_s=5)).compile_early()
    assert started == [True]
    command = RunConfig(
        workload="command", budget_s=5, command=("true",), metric=r"t=(\d+)",
        levers=("block=arg:--block=16,128",),
    )  # fmt: skip
    Engine(command).compile_early()
    assert started == [True]
