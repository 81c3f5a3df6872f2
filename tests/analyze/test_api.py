"""The analysis's one front door (engine.analyze.api.analyze): one trace, several, or a
directory of one job's ranks in, with AnalyzeOptions; each file's outcome and the ranks crossed
out — the cross-rank outputs written, the refusal of files that are not one job's said — so
the command, its screens and a program's capture only render what it returns."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from engine.analyze.api import AnalysisFailed, AnalyzeOptions, Hooks, analyze, list_files
from engine.analyze.compute import analyze_trace
from engine.analyze.output.export import analysis_dict
from engine.analyze.ranks.synth_ranks import write_ranks
from engine.analyze.run import load_trace
from tests.paths import ROOT, TRACES

TRACE = TRACES / "kineto" / "a100_event_sync_multistream.json.gz"


def test_one_trace_gives_its_analysis_and_its_arrays():
    stages: list[str] = []
    got = analyze(
        [str(TRACE)],
        AnalyzeOptions(first_run=False, ranks=False, keep_arrays=True),
        Hooks(stage=stages.append),
    )
    (o,) = got.outcomes
    assert o.error is None and o.summary is None and got.crossed is None and not got.failed
    res = got.one()
    assert res.analysis is o.analysis and len(res.rows) == o.analysis.segments
    assert stages[0].startswith(f"reading {TRACE.name}")
    # what a program's capture used to compute itself: the same analysis, field for field
    alone = analyze_trace(load_trace(str(TRACE))).analysis
    assert analysis_dict(alone) == analysis_dict(o.analysis)


def test_one_file_that_cannot_be_analysed_is_its_line(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    got = analyze([str(bad)], AnalyzeOptions(first_run=False, keep_arrays=True))
    assert got.failed and len(got.errors) == 1 and str(bad) in got.errors[0]
    with pytest.raises(AnalysisFailed) as e:
        got.one()
    assert str(e.value) == got.errors[0]
    missing = analyze([str(tmp_path / "nope.json")], AnalyzeOptions(first_run=False))
    assert missing.errors == [f"{tmp_path / 'nope.json'}: no such file or directory"]
    files, errors = list_files([str(tmp_path / "nope.json"), str(bad)])
    assert files == [str(bad)] and errors == missing.errors


def test_a_bad_counting_mode_is_the_callers_error():
    with pytest.raises(ValueError, match="unknown counting mode 'all'"):
        AnalyzeOptions(counting="all")


def test_a_rank_directory_is_crossed_and_the_cross_rank_outputs_written(tmp_path):
    write_ranks(tmp_path / "ranks", ranks=3, steps=2, straggler=1)
    seen: list[tuple[int, int]] = []
    got = analyze(
        [str(tmp_path / "ranks")],
        AnalyzeOptions(workers=1, out_root=str(tmp_path / "out")),
        Hooks(progress=lambda d, n, _p: seen.append((d, n))),
    )
    assert [o.error for o in got.outcomes] == [None] * 3 and seen[-1] == (3, 3)
    assert got.one_job_claimed and got.not_one_job is None and got.refused is None
    assert got.crossed is not None and got.straggler == 1 and got.judged
    names = {p.name for p in got.cross_written}
    assert {"cross_rank.json", "cross_rank.md"} <= names and got.cross_failed is None
    assert all((tmp_path / "out" / n).exists() for n in names) and not got.failed
    # --json's options: each file analysed, nothing crossed nor written for the ranks
    plain = analyze([str(tmp_path / "ranks")], AnalyzeOptions(workers=1, ranks=False))
    assert plain.crossed is None and plain.summaries == [] and len(plain.analyses) == 3


def test_files_of_different_jobs_are_refused_in_a_directory_not_one_by_one(tmp_path):
    (rank0, _) = write_ranks(tmp_path / "job", ranks=2, steps=2, straggler=None)
    dup = tmp_path / "dup"
    dup.mkdir()
    for i in range(2):  # two files of rank 0: not the ranks of one job
        shutil.copy(rank0, dup / f"copy{i}.json.gz")
    got = analyze([str(dup)], AnalyzeOptions(workers=1))
    assert got.crossed is None and got.refused is not None and "not one job" in got.refused
    assert got.failed and got.errors == []
    files = [str(p) for p in sorted(dup.iterdir())]
    named = analyze(files, AnalyzeOptions(workers=1))
    assert named.not_one_job == got.not_one_job and named.refused is None and not named.failed


def test_a_single_file_never_imports_the_cross_rank_module():
    """engine.analyze.ranks.ranks is for crossing ranks: a file analysed alone does not load it."""
    script = (
        "import sys\n"
        "from engine.analyze.api import AnalyzeOptions, analyze\n"
        f"got = analyze([{str(TRACE)!r}], AnalyzeOptions(first_run=False))\n"
        "assert got.outcomes[0].analysis is not None, got.errors\n"
        "print('engine.analyze.ranks.ranks' in sys.modules)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "False"
