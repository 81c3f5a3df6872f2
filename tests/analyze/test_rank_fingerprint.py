"""Ranks of one job are one workload (issue 39, item 5): each rank's summary carries its
fingerprint (engine.analyze.ranks.ranks.rank_fingerprint), files whose fingerprints disagree are named
and kept apart — never merged into one job — and real ranks of one job still merge."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from engine.analyze.api import AnalyzeOptions, analyze
from engine.analyze.ranks.ranks import (
    RankSummary,
    cross_rank,
    job_groups,
    not_one_job,
    summarize,
    workload_groups,
)
from engine.analyze.ranks.synth_ranks import second_rank
from engine.optimizer.fingerprint import distance, load_params
from engine.trace.read import read_trace
from tests.paths import TRACES

KINETO = TRACES / "kineto"
JOB128 = KINETO / "job128_two_ranks"
PG = KINETO / "a100_nccl_pg_metadata.json.gz"
ALEXNET = KINETO / "a100_alexnet_2streams.json.gz"


def _as_rank(src: Path, out: Path, rank: int, world: int) -> Path:
    """SYNTHETIC: a real trace that says it is rank ``rank`` of ``world`` (distributedInfo
    rewritten, nothing else): an unrelated program that claims a place in the job."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["distributedInfo"] = {**(doc.get("distributedInfo") or {}), "rank": rank,
                              "world_size": world}  # fmt: skip
    doc["synthetic"] = True
    out.write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
    return out


@pytest.fixture(scope="module")
def job128() -> list[RankSummary]:
    return [summarize(read_trace(JOB128 / f"rank-{r}.json.gz")) for r in (0, 1)]


def test_a_summary_carries_a_compact_fingerprint_of_no_trace_text(job128: list[RankSummary]):
    fp = job128[0].fingerprint
    assert fp is not None and fp.kernels and fp.process.world_size == 128
    assert all(r.name.startswith("#") for r in fp.kernels) and not fp.shapes
    assert len(fp.to_json()) < 32_000  # a few kB, whatever the trace


def test_real_ranks_of_one_job_merge(job128: list[RankSummary]):
    a, b = (s.fingerprint for s in job128)
    assert a is not None and b is not None
    d = distance(a, b, across_ranks=True)
    assert d.value <= load_params().ranks_threshold and d.value < 0.1
    assert workload_groups(job128) == [[0, 1]]
    assert not_one_job(job128) is None and cross_rank(job128) is not None


def test_an_unrelated_trace_that_claims_a_rank_is_named_and_kept_apart(
    job128: list[RankSummary], tmp_path: Path
):
    odd = summarize(read_trace(_as_rank(ALEXNET, tmp_path / "odd.json.gz", 2, 128)))
    sums = [*job128, odd]
    line = not_one_job(sums)
    assert line is not None and "1 of 3 file(s) differ" in line
    assert "odd.json.gz (rank 2: another workload (fingerprint distance" in line
    assert "kernel mix" in line and line.count("(rank ") == 1  # only the odd file is named
    groups = job_groups(sums)
    assert [sorted(s.rank or 0 for s in g) for g in groups] == [[0, 1], [2]]
    crossed = cross_rank(groups[0])
    assert crossed is not None and sorted(crossed.ranks) == [0, 1]


def test_a_folder_with_an_unrelated_trace(job128: list[RankSummary], tmp_path: Path):
    """Named one by one: each file analysed, the odd one named, the two real ranks still
    crossed as their own job. As a directory (it claims to be one job): refused, the odd file
    named."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for r in (0, 1):
        shutil.copy(JOB128 / f"rank-{r}.json.gz", folder / f"rank-{r}.json.gz")
    _as_rank(ALEXNET, folder / "rank-2.json.gz", 2, 128)
    files = [str(p) for p in sorted(folder.iterdir())]
    named = analyze(files, AnalyzeOptions(workers=1, first_run=False))
    assert [o.error for o in named.outcomes] == [None] * 3 and len(named.analyses) == 3
    assert named.crossed is None and named.not_one_job is not None
    assert "rank-2.json.gz (rank 2: another workload" in named.not_one_job
    assert len(named.jobs) == 1 and sorted(named.jobs[0].ranks) == [0, 1]
    claimed = analyze([str(folder)], AnalyzeOptions(workers=1, first_run=False))
    assert claimed.refused is not None and "rank-2.json.gz" in claimed.refused


def test_a_second_rank_of_the_same_program_merges(tmp_path: Path):
    """A SYNTHETIC rank 1 made from a real rank 0 (its collectives moved in time only): one
    workload, the process groups agree, the ranks are crossed."""
    r1 = second_rank(PG, tmp_path / "rank1.json.gz", clock_offset_us=5e5, late_us=300.0)
    sums = [summarize(read_trace(PG)), summarize(read_trace(r1))]
    assert not_one_job(sums) is None and cross_rank(sums) is not None
    assert len(job_groups(sums)) == 1
