"""A job's ranks analysed together (engine.analyze.job): on a SYNTHETIC 8-rank job (written by
engine.analyze.ranks.synth_ranks.exchange_job) whose rank 5 arrives last at the all-to-all exchanges
and rank 2 at three small AllReduces, every other rank's levers are held to its peers — no gain
beyond its post-collective tail — and the job's critical path names rank 5's work first."""

from __future__ import annotations

import pytest

from engine.analyze.api import analyze
from engine.analyze.options import AnalyzeOptions
from engine.analyze.ranks.synth_ranks import exchange_job


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    d = tmp_path_factory.mktemp("job8")
    exchange_job(d)
    return analyze([str(d)], AnalyzeOptions(out_root=None, first_run=False))


def test_the_straggler_is_the_rank_behind_most_of_the_wait(job):
    assert job.crossed is not None and job.crossed.straggler.startswith("rank 5")


def test_a_rank_never_last_gains_nothing_beyond_its_tail(job):
    for a in job.analyses:
        if a.rank in (5, 2):
            continue
        assert a.critical_path is not None and a.critical_path.peers.startswith("peers known")
        judged = [e for e in a.interventions if e.status == "predicted"]
        assert judged
        for e in judged:
            assert e.peers is not None and "no gain for the job" in e.peers, e.peers
            # its tail after the last collective is ~0 in this job: nothing to gain alone
            assert (e.gain_high or 0.0) <= 0.01, (a.rank, e.lever, e.gain_high)
            assert e.ceiling is None or e.ceiling <= 0.01, (a.rank, e.lever, e.ceiling)


def test_the_job_path_names_the_straggler_s_work_first(job):
    line = job.crossed.job_path
    assert line.startswith("the job's critical path")
    assert line.split(": ", 1)[1].startswith("rank 5's work")
    assert any("held to their peers" in n for n in job.crossed.notes)
