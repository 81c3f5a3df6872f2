"""The local cluster's workers are forked on Linux (issue 49): each spawned worker imported Dask,
the analysis and numba again before its first file (~1 s of CPU a worker on 2 cores). Only a
process with no other thread forks: one with other threads (this test runner's) spawns, as a
fork there can deadlock the child (a LocalCluster start hung 300 s in the suite)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import dask
import pytest

from engine.analyze.cluster import _forked_workers
from tests.paths import ROOT

KEY = "distributed.worker.multiprocessing-method"

#: a command-like process (one thread): a job of two ranks on a two-worker local cluster,
#: then what each worker has — a module only this process imported before the cluster started
_JOB = """
import json, os, sys, types
from pathlib import Path
from engine.analyze.api import AnalyzeOptions
from engine.analyze.cluster import Workers
from engine.analyze.ranks.synth_ranks import write_ranks

def main():
    paths = [str(p) for p in write_ranks(Path(sys.argv[1]), ranks=2, steps=1, straggler=None)]
    sys.modules["marker_of_the_command"] = types.ModuleType("marker_of_the_command")
    opts = AnalyzeOptions(out_root=None, workers=2)
    with Workers(opts, files=2) as pool:
        got = pool.analyze(paths, opts)
        seen = pool._start().run(lambda: "marker_of_the_command" in sys.modules)
    print(json.dumps({"marked": list(seen.values()),
                      "ranks": sorted(o.analysis.rank for o in got if o.analysis)}))

if __name__ == "__main__":
    main()
"""


@pytest.mark.skipif(sys.platform != "linux", reason="fork is chosen on Linux only")
def test_dask_default_becomes_fork_and_a_users_choice_stands():
    def alone() -> str:
        with dask.config.set({KEY: "spawn"}), _forked_workers():
            return str(dask.config.get(KEY))

    # this test runner may have other threads: then it spawns; a one-thread process forks
    assert alone() == ("fork" if threading.active_count() == 1 else "spawn")
    with dask.config.set({KEY: "forkserver"}), _forked_workers():
        assert dask.config.get(KEY) == "forkserver"  # the user's setting is theirs


def test_a_process_with_another_thread_spawns():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        with dask.config.set({KEY: "spawn"}), _forked_workers():
            assert dask.config.get(KEY) == "spawn"
    finally:
        stop.set()


@pytest.mark.skipif(sys.platform != "linux", reason="fork is chosen on Linux only")
def test_a_commands_local_workers_are_forked_from_it(tmp_path):
    """A forked worker has what the command imported before the cluster started (a spawned
    one starts bare), and its analyses come back as a spawned worker's would."""
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "ranks")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"marked": [True, True], "ranks": [0, 1]}
