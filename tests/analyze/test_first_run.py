"""The first run after an install (an empty numba cache): a child compiles the kernels for the
next run while this one reads the trace with the JSON scanner's Python twin and analyses it with
interpreted kernels — or, for a trace too large to interpret, waits for the analysis kernels.
The stages are said, and the result is the one a warm run gives."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT, TRACES

SCRIPT = """
import json, sys, time
import engine.analyze.run as run
from engine.analyze.api import Hooks, analyze
from engine.analyze.warm import kernels
from engine.jit import cold
if sys.argv[2] == "large":
    run.INTERPRET_MAX_ROWS = 0  # every trace is too large to interpret: wait for the child
before = cold(kernels("analysis")), cold(kernels("import"))
stages = []
(out,) = analyze([sys.argv[1]], hooks=Hooks(stage=stages.append)).outcomes
done = time.monotonic()
while (cold(kernels("analysis")) or cold(kernels("import"))) and time.monotonic() < done + 300:
    time.sleep(0.2)  # the child goes on compiling for the next run
print(json.dumps({"cold_before": before, "stages": stages,
                  "after": [cold(kernels("analysis")), cold(kernels("import"))],
                  "analysis": out.analysis.model_dump(mode="json")}))
"""


def _script(env: dict[str, str], script: str, *args: str) -> dict:
    """Run ``script`` in a fresh Python with ``env``; its last stdout line, as JSON."""
    p = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True,
        timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("size", ["small", "large"])
def test_a_first_run_answers_while_the_kernels_compile_and_as_a_warm_run(tmp_path, size):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    trace = str(TRACES / "kineto" / "a100_event_sync_multistream.json.gz")

    def run():
        return _script(env, SCRIPT, trace, size)

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


RANKS_SCRIPT = """
import json, sys, time
from engine.analyze.api import AnalyzeOptions, Hooks, analyze
from engine.analyze.ranks.synth_ranks import write_ranks
from engine.analyze.warm import kernels
from engine.jit import cold
from pathlib import Path
paths = write_ranks(Path(sys.argv[1]), ranks=3, steps=2, straggler=None)
before = cold(kernels("analysis")), cold(kernels("import"))
stages, seen = [], []
outs = analyze([sys.argv[1]], AnalyzeOptions(cluster="local", workers=2),
               Hooks(stage=stages.append, progress=lambda d, n, p: seen.append([d, n]))).outcomes
done = time.monotonic()
while (cold(kernels("analysis")) or cold(kernels("import"))) and time.monotonic() < done + 300:
    time.sleep(0.2)  # the child goes on compiling for the next run
print(json.dumps({"cold_before": before, "stages": stages, "seen": seen,
                  "paths": [o.path for o in outs], "errors": [o.error for o in outs],
                  "analyses": [o.analysis.model_dump(mode="json") for o in outs]}))
"""


@pytest.mark.slow
def test_a_first_run_of_several_ranks_analyses_them_here_while_the_kernels_compile(tmp_path):
    """On an empty cache, ranks bound for a local Dask cluster are analysed here as a single
    file's first run is (the workers would each compile every kernel first: 26 s for 4 small
    ranks here, against 8 s); a warm run sends them to the cluster; the analyses are equal."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))

    def run():
        return _script(env, RANKS_SCRIPT, str(tmp_path / "ranks"))

    first = run()
    assert first["cold_before"] == [True, True]
    assert sum("first run, kernels compiling" in s for s in first["stages"]) >= 1
    assert first["seen"][-1] == [3, 3] and first["errors"] == [None] * 3
    second = run()
    assert second["cold_before"] == [False, False]
    assert not any("first run" in s for s in second["stages"])
    assert any("3 files on a local Dask cluster" in s for s in second["stages"])
    assert second["paths"] == first["paths"]
    assert sorted(d for d, _ in second["seen"]) == [1, 2, 3]
    assert first["analyses"] == second["analyses"]


def test_ranks_go_to_the_cluster_once_the_compile_child_is_done(tmp_path, monkeypatch):
    """The split: files are analysed here while FirstRun says the child compiles, the rest on
    the cluster — in input order, progress counted over all of them, no output folder shared.
    Each of the job's two rounds (collectives, then the analyses) splits so."""
    from engine.analyze import run
    from engine.analyze.api import AnalyzeOptions, Hooks, analyze
    from engine.analyze.ranks.synth_ranks import write_ranks

    paths = write_ranks(tmp_path / "ranks", ranks=3, steps=2, straggler=None)
    answers = itertools.cycle([True, False])  # each round: one file here, then the cluster
    monkeypatch.setattr(run.FirstRun, "compiling", lambda self: next(answers))
    stages, seen = [], []
    outs = analyze(
        [str(tmp_path / "ranks")],
        AnalyzeOptions(out_root=str(tmp_path / "out"), cluster="local", workers=2),
        Hooks(stage=stages.append, progress=lambda d, n, p: seen.append((d, n, p))),
    ).outcomes
    assert [o.path for o in outs] == [str(p) for p in paths]
    assert all(o.error is None and o.analysis is not None for o in outs)
    assert seen[0] == (1, 3, str(paths[0]))  # the first here
    assert sorted(d for d, _, _ in seen) == [1, 2, 3] and {n for _, n, _ in seen} == {3}
    assert any("2 files on a local Dask cluster" in s for s in stages)
    folders = {Path(x).parent for o in outs for x in o.outputs}
    assert len(folders) == 3


def test_a_file_whose_analysis_crashes_is_named_and_the_others_go_on(tmp_path, monkeypatch):
    """A bug met in one file of several (here: analyze_file raising for it) costs that file, as
    on a cluster, not the run; its traceback is saved. One file alone still raises (the
    command's crash report)."""
    from engine.analyze import run
    from engine.analyze.api import AnalyzeOptions, analyze
    from engine.analyze.ranks.synth_ranks import write_ranks

    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path / "scratch"))
    paths = write_ranks(tmp_path / "ranks", ranks=3, steps=2, straggler=None)
    real = run.analyze_file

    def flaky(f, *a, **k):
        if f == str(paths[1]):
            raise ZeroDivisionError("integer division or modulo by zero")
        return real(f, *a, **k)

    monkeypatch.setattr(run, "analyze_file", flaky)
    got = analyze([str(tmp_path / "ranks")], AnalyzeOptions(workers=1))
    outs = got.outcomes
    assert [o.path for o in outs] == [str(p) for p in paths]
    assert outs[0].analysis is not None and outs[2].analysis is not None
    err = outs[1].error or ""
    assert "internal error ZeroDivisionError" in err and "a bug in gitm-tui" in err
    (crash,) = (tmp_path / "scratch" / "crashes").iterdir()
    assert crash.name in err and "ZeroDivisionError" in crash.read_text()
    with pytest.raises(ZeroDivisionError):
        analyze([str(paths[1])])


UI_SCRIPT = """
import argparse, json, sys, time
from engine.analyze.warm import kernels
from engine.jit import cold
from gitm_tui.commands.analyze import _load_one
before = cold(kernels("analysis")), cold(kernels("import"))
stages = []
ns = argparse.Namespace(hardware=None, top=20, counting="exact")
res = _load_one(ns, sys.argv[1], stages.append)
done = time.monotonic()
while (cold(kernels("analysis")) or cold(kernels("import"))) and time.monotonic() < done + 300:
    time.sleep(0.2)
print(json.dumps({"cold_before": before, "stages": stages,
                  "analysis": res.analysis.model_dump(mode="json")}))
"""


@pytest.mark.slow
def test_the_analysis_screen_loads_a_first_run_as_the_command_does(tmp_path):
    """`analyze --ui` on an empty cache waited ~30 s for every kernel to compile, with only
    "reading…" on the screen; its loader now takes the command's first-run path, and its
    analysis is the warm run's."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    trace = str(TRACES / "kineto" / "a100_event_sync_multistream.json.gz")

    def run():
        return _script(env, UI_SCRIPT, trace)

    first = run()
    assert first["cold_before"] == [True, True]
    assert "first run, kernels compiling in the background" in first["stages"][0]
    assert any("(first run: interpreted)" in s for s in first["stages"])
    second = run()
    assert second["cold_before"] == [False, False]
    assert not any("first run" in s for s in second["stages"])
    assert first["analysis"] == second["analysis"]


def test_a_run_that_finds_an_earlier_runs_child_compiling_starts_none_and_says_so(
    tmp_path, monkeypatch
):
    """Six runs in a row after an install had six compile children (each waiting on the first's
    lock with its own memory). A run that finds one compiling starts none, says how long it has
    been compiling, and counts it as compiling; once it is gone, a run starts its own."""
    from engine.analyze import run

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))  # (the lock's key)
    monkeypatch.setattr(run, "cold", lambda _kernels: True)
    started: list[tuple[str, ...]] = []
    monkeypatch.setattr(run, "compile_elsewhere", lambda *a: started.append(a))
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom engine.jit import one_compiler\n"
         "with one_compiler('analyze'):\n    print('held', flush=True)\n    time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        first = run.FirstRun()
        assert started == [] and first.child is None and first.since is not None
        assert "still compiling in the background (an earlier run's" in first.note()
        assert first.compiling()
    finally:
        holder.kill()
        holder.wait()
    assert not first.compiling()  # its compiler is gone
    again = run.FirstRun()
    assert again.since is None and len(started) == 1  # no child compiling: this run starts one
