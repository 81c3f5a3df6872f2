"""A small file is read and analysed without numba (engine.analyze.run.lean): numba is never
imported — ~0.25 s of a small analysis — and the answer is the compiled one, to the bit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.analyze import run
from engine.analyze.options import AnalyzeOptions
from tests.paths import ROOT, TRACES

CLI = """
import sys
import engine.analyze.run as run
if sys.argv[2] == "compiled":
    run.LEAN_MAX_BYTES = -1  # every file through numba, as before
from gitm_tui.cli import main
sys.argv = ["gitm-tui", "analyze", sys.argv[1], "--no-write", "--json"]
rc = main()
loaded = sorted(m for m in ("numba", "llvmlite") if m in sys.modules)
print("\\n" + ",".join(loaded) + "|" + str(rc))
"""


def _cli(trace: Path, mode: str) -> tuple[dict, str, str]:
    """(the analyses as JSON, the numba packages loaded, the exit code) of one fresh process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-c", CLI, str(trace), mode], env=env, capture_output=True, text=True,
        timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    body, _, tail = p.stdout.rstrip().rpartition("\n")
    loaded, _, rc = tail.partition("|")
    return json.loads(body), loaded, rc


@pytest.mark.parametrize(
    "rel", ["kineto/a100_triton_one_kernel.json.gz", "rocprof/sdk_0.5.0/kernel_trace.csv"]
)
def test_a_small_file_is_analysed_without_importing_numba_and_as_compiled(rel):
    trace = TRACES / rel
    assert trace.stat().st_size <= run.LEAN_MAX_BYTES
    lean, lean_loaded, lean_rc = _cli(trace, "lean")
    compiled, compiled_loaded, compiled_rc = _cli(trace, "compiled")
    assert lean_loaded == "" and compiled_loaded == "llvmlite,numba"
    assert lean_rc == compiled_rc == "0"
    assert lean == compiled


def _small_traces() -> list[Path]:
    """Every real trace in tests/data small enough for the lean path, in any format."""
    kinds = (".json", ".json.gz", ".csv", ".sqlite", ".db", ".pftrace")
    return [
        p
        for p in sorted(TRACES.rglob("*"))
        if p.is_file()
        and "checklists" not in p.parts
        and p.name.endswith(kinds)
        and p.stat().st_size <= run.LEAN_MAX_BYTES
    ]


def _outcome(path: Path, lean: bool, monkeypatch) -> str:
    monkeypatch.setattr(run, "lean", lambda _p: lean)
    out = run.analyze_file(str(path), AnalyzeOptions(out_root=None))
    if out.error is not None:
        return "error: " + out.error
    if out.cpu is not None:
        return "cpu: " + repr(out.cpu)
    assert out.analysis is not None
    return out.analysis.model_dump_json()


def test_every_small_real_trace_reads_and_analyses_the_same_without_numba(monkeypatch):
    """Read with the scanner's Python twin and every kernel interpreted (a file of more than
    LEAN_MAX_ROWS GPU rows then analysed compiled): the outcome — analysis, CPU summary or
    error line — equals the compiled one, on every small real trace in the repository."""
    traces = _small_traces()
    assert len(traces) >= 15
    analysed = 0
    for path in traces:
        compiled = _outcome(path, False, monkeypatch)
        assert _outcome(path, True, monkeypatch) == compiled, path
        analysed += not compiled.startswith(("error", "cpu"))
    assert analysed >= 10


def _interpreted_analyses(monkeypatch) -> list[bool]:
    """Every file taken as small enough for the lean path; the list returned fills, per
    analysis, with whether it ran interpreted."""
    seen: list[bool] = []
    real = run.analyze_trace

    def spy(*args, **kwargs):
        from engine.jit import interpreting

        seen.append(interpreting())
        return real(*args, **kwargs)

    monkeypatch.setattr(run, "analyze_trace", spy)
    monkeypatch.setattr(run, "lean", lambda _p: True)
    return seen


def test_a_file_with_more_rows_than_the_lean_limit_is_analysed_compiled(monkeypatch):
    """The rows are known only once read: past LEAN_MAX_ROWS the analysis runs compiled (the
    replays of a few thousand rows interpreted would cost more than numba's start)."""
    path = TRACES / "kineto" / "a100_event_sync_multistream.json.gz"
    seen = _interpreted_analyses(monkeypatch)
    monkeypatch.setattr(run, "LEAN_MAX_ROWS", 0)
    run.read_and_analyse(str(path), AnalyzeOptions(out_root=None))
    monkeypatch.setattr(run, "LEAN_MAX_ROWS", 10**9)
    run.read_and_analyse(str(path), AnalyzeOptions(out_root=None))
    assert seen == [False, True]


def test_a_programs_own_capture_is_never_analysed_interpreted(monkeypatch):
    """first_run=False (the torch loop analysing its program's capture, whose other threads
    may run kernels meanwhile): compiled, however small the file."""
    path = TRACES / "kineto" / "a100_triton_one_kernel.json.gz"
    seen = _interpreted_analyses(monkeypatch)
    run.read_and_analyse(str(path), AnalyzeOptions(out_root=None, first_run=False))
    run.read_and_analyse(str(path), AnalyzeOptions(out_root=None))
    assert seen == [False, True]
