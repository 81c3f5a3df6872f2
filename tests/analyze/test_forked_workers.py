"""The local cluster's workers are forked on Linux (issue 49): each spawned worker imported Dask,
the analysis and numba again before its first file (~1 s of CPU a worker on 2 cores)."""

from __future__ import annotations

import os
import sys

import dask
import pytest

from engine.analyze.cluster import _forked_workers

KEY = "distributed.worker.multiprocessing-method"


@pytest.mark.skipif(sys.platform != "linux", reason="fork is chosen on Linux only")
def test_dask_default_becomes_fork_and_a_users_choice_stands():
    with dask.config.set({KEY: "spawn"}), _forked_workers():
        assert dask.config.get(KEY) == "fork"
    with dask.config.set({KEY: "forkserver"}), _forked_workers():
        assert dask.config.get(KEY) == "forkserver"  # the user's setting is theirs


@pytest.mark.skipif(sys.platform != "linux", reason="fork is chosen on Linux only")
def test_a_local_workers_process_is_forked_from_the_command(tmp_path):
    """A forked worker has what this process imported before the cluster started (a spawned
    one starts bare), and its analyses come back as a spawned worker's would."""
    from engine.analyze.api import AnalyzeOptions
    from engine.analyze.cluster import Workers
    from engine.analyze.ranks.synth_ranks import write_ranks

    paths = [str(p) for p in write_ranks(tmp_path / "ranks", ranks=2, steps=1, straggler=None)]
    sys.modules["tests._marker_of_the_client"] = sys.modules[__name__]  # only this process has it
    try:
        with Workers(AnalyzeOptions(out_root=None, workers=2), files=2) as pool:
            got = pool.analyze(paths, AnalyzeOptions(out_root=None, workers=2))
            client = pool._start()
            seen = client.run(lambda: ("tests._marker_of_the_client" in sys.modules, os.getpid()))
    finally:
        del sys.modules["tests._marker_of_the_client"]
    assert len(seen) == 2 and all(marked for marked, _pid in seen.values())
    assert all(o.analysis is not None for o in got)
    assert sorted(o.analysis.rank for o in got if o.analysis is not None) == [0, 1]
