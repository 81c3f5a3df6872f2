"""A first run's warm-up (engine.analyze.warm) compiles the reader's and the analysis's kernels
side by side, a process each, where cores allow — and in turn, in one process, where they do
not or where a part fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import engine.analyze.warm as warm
import engine.jit as jit
from tests.paths import ROOT


@pytest.fixture
def calls(monkeypatch, tmp_path):
    """What main() runs: the warmers here, and whether it went side by side."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # (the lock is per cache directory)
    got: list[str] = []
    monkeypatch.setattr(warm, "warm_import", lambda: got.append("import here"))
    monkeypatch.setattr(warm, "warm_analysis", lambda: got.append("analysis here"))
    monkeypatch.setattr(os, "nice", lambda _n: 0)
    return got


@pytest.mark.parametrize("cores", [1, 2])
def test_on_two_cores_or_fewer_the_kinds_compile_in_turn_here(monkeypatch, calls, cores):
    monkeypatch.setattr(jit, "usable_cores", lambda: cores)
    assert not warm.side_by_side_here()
    monkeypatch.setattr(warm, "_side_by_side", lambda k: calls.append("side by side") or True)
    assert warm.main(["analysis", "import"]) == 0
    assert calls == ["analysis here", "import here"]


def test_on_more_cores_each_kind_compiles_in_a_process_of_its_own(monkeypatch, calls):
    monkeypatch.setattr(jit, "usable_cores", lambda: 4)
    monkeypatch.setattr(warm, "_side_by_side", lambda k: calls.append(f"side by side {k}") or True)
    assert warm.main(["analysis", "import"]) == 0
    assert calls == ["side by side ['analysis', 'import']"]
    calls.clear()
    assert warm.main(["import"]) == 0  # one kind: nothing to put beside it
    assert calls == ["import here"]


def test_a_part_that_fails_leaves_its_kind_to_this_process(monkeypatch, calls):
    monkeypatch.setattr(jit, "usable_cores", lambda: 4)
    monkeypatch.setattr(warm, "_side_by_side", lambda k: False)
    assert warm.main(["analysis", "import"]) == 0
    assert calls == ["analysis here", "import here"]


def test_a_part_names_one_kind():
    assert warm.main(["--part"]) == 2
    assert warm.main(["--part", "analysis", "import"]) == 2
    assert warm.main(["--part", "nonsense"]) == 2


CHECK = """
import json
from engine.analyze.warm import kernels
from engine.jit import cold
print(json.dumps([cold(kernels("analysis")), cold(kernels("import"))]))
"""


@pytest.mark.slow
def test_a_part_compiles_its_kind_and_only_it(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    assert warm._side_by_side(["analysis"])  # a real child process, as main() starts them
    p = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == [False, True]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_part_ends_when_the_warm_up_that_started_it_is_killed(tmp_path):
    """A run that gives up on its warm-up kills it (engine.jit.wait_compiled) and the lock goes
    with it: a part left compiling would compile beside the next run's warm-up."""
    import signal
    import time

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    parent = subprocess.Popen(
        ["sh", "-c", f"{sys.executable} -m engine.analyze.warm --part analysis & echo $!; wait"],
        stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert parent.stdout is not None
    part = int(parent.stdout.readline())
    time.sleep(2.0)  # it has started compiling (a whole part takes ~8 s or more)
    assert os.path.exists(f"/proc/{part}")
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    end = time.monotonic() + 3.0
    while time.monotonic() < end and _running(part):
        time.sleep(0.05)
    gone = not _running(part)
    if not gone:
        os.kill(part, signal.SIGKILL)
    assert gone


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class _Child:
    """A compile child as FirstRun sees it: running until ``ends`` is set, then ``code``."""

    def __init__(self, ends, code: int = 0) -> None:
        self.ends, self.code = ends, code

    def poll(self):
        return self.code if self.ends.is_set() else None


def test_a_large_first_trace_waits_for_the_childs_reader_only_where_it_has_its_own_process(
    monkeypatch,
):
    """A file the scanner's twin leaves to the compiled reader compiled the reader in the run
    itself — beside the child's process compiling the same kernels, where the warm-up goes side
    by side. There it waits for the child's reader; on 2 cores (the child compiles the
    analysis kernels first) and when the child stops without it, it compiles it itself."""
    import threading

    from engine.analyze import run

    compiled = threading.Event()
    monkeypatch.setattr(run, "cold", lambda _kernels: not compiled.is_set())
    monkeypatch.setattr(run, "compiling_since", lambda _kind: None)
    child = _Child(compiled)
    monkeypatch.setattr(run, "compile_elsewhere", lambda *_a: child)
    said: list[str] = []

    monkeypatch.setattr(run, "side_by_side_here", lambda: False)
    assert not run.FirstRun().wait_reader(said.append, "waiting") and said == []

    monkeypatch.setattr(run, "side_by_side_here", lambda: True)
    first = run.FirstRun()
    threading.Timer(0.3, compiled.set).start()
    assert first.wait_reader(said.append, "waiting") and said == ["waiting"]

    compiled.clear()
    gone = threading.Event()
    gone.set()  # a child that has stopped, the reader not compiled
    monkeypatch.setattr(run, "compile_elsewhere", lambda *_a: _Child(gone, code=1))
    assert not run.FirstRun().wait_reader(said.append, "waiting")
