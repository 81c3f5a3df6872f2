"""Issue 35, part 6: ranks matched by what the trace records, checked against HTA.

HTA's ``get_potential_stragglers`` runs on the same files as ours; every disagreement is
explained from the traces themselves:

* two real ranks of a 128-rank job (HTA's test data): we say "cannot tell" (no kernel says
  which collective it ran, and 2 of 128 ranks are here); HTA names rank 1 by comparing two
  kernels that are not one collective — they end 134 ms apart on clocks that agree to < 1 ms;
* a real rank 0 with NCCL process-group metadata and a SYNTHETIC rank 1 made from it by
  engine.analyze.ranks.synth_ranks.second_rank (rank 0 planted as the straggler): we name rank 0;
  HTA names rank 1, the rank that waited, because its duration filter keeps the waiting rank's
  (longer) kernels, so it compares different collectives of the group.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from engine.analyze.ranks.ranks import RankSummary, cross_rank, not_one_job, summarize
from engine.analyze.ranks.synth_ranks import second_rank
from engine.trace.read import read_trace
from tests.paths import ROOT

KINETO = ROOT / "tests" / "data" / "traces" / "kineto"
JOB128 = KINETO / "job128_two_ranks"
PG = KINETO / "a100_nccl_pg_metadata.json.gz"

hta = pytest.importorskip("hta.trace_analysis")


def _hta(d: Path) -> tuple[list[int], list[tuple[int, int, int]]]:
    """HTA's straggler (one candidate) on the files in ``d``, and the kernels its metric
    compared: (rank, iteration, raw start µs)."""
    import pandas as pd
    from hta.analyzers.straggler import _compute_normalized_start_time_of_significant_comm_kernels

    logging.getLogger("hta").setLevel(logging.ERROR)
    ta = hta.TraceAnalysis(trace_dir=str(d))
    picked = [int(r) for r in ta.get_potential_stragglers(num_candidates=1)]
    t = ta.t
    ranks = list(t.get_all_traces().keys())
    df = pd.concat([t.get_trace(r) for r in ranks], keys=ranks, names=["rank", "idx"])
    df = df.reset_index()
    df = df.loc[df["iteration"].isin(ta.get_profiler_steps())]
    metric, _ = _compute_normalized_start_time_of_significant_comm_kernels(df, t.symbol_table)
    kernels = [
        (int(r), int(i), int(ts) + int(t.min_ts))
        for r, i, ts in metric[["rank", "iteration", "ts"]].itertuples(index=False)
    ]
    return picked, kernels


def _at(s: RankSummary, start_us: int) -> int:
    """The index of the rank's collective kernel that starts at ``start_us`` (HTA keeps µs)."""
    (k,) = [k for k, t in enumerate(s.starts) if abs(t / 1e3 - start_us) <= 1.0]
    return k


def test_two_ranks_of_a_128_rank_job_cannot_tell_and_hta_compares_two_collectives(tmp_path):
    sums = {r: summarize(read_trace(JOB128 / f"rank-{r}.json.gz")) for r in (0, 1)}
    c = cross_rank(list(sums.values()))
    assert c is not None and not c.steps
    assert c.straggler.startswith("cannot tell")
    assert "2 of the job's 128 ranks" in c.straggler
    assert all(p.waited_ns is None for p in c.per_rank)
    # every collective kernel is matched or counted: the SendRecv kernels name nothing, so they
    # are matched by their order and kept where their ends agree — 5 of rank 0's 10 have a
    # partner on rank 1 (one of them ends 0.33 ms apart: inconsistent); none is judged, as each
    # may take in ranks of the 126 not given
    assert c.trusted and c.matched == 5 and c.judged == 0 and c.unmatched == 10
    kinds = {u.why: u.kernels for u in c.unmatched_ops}
    assert kinds == {"unmatched": 10, "ranks not given": 8, "inconsistent": 2}
    assert sum(kinds.values()) == sum(len(s.ops) for s in sums.values())
    assert abs(sum(u.share for u in c.unmatched_ops) - 1.0) < 1e-9
    assert "100% of collective time" in c.straggler and "could not be judged" in c.straggler
    assert c.tolerance_ns is not None and c.tolerance_ns < 1e6  # well under the 40 ms kernels

    picked, kernels = _hta(JOB128)
    assert picked == [1]  # HTA: rank 1 (one step, one kernel per rank compared)
    (it,) = {i for _, i, _ in kernels}
    ends = {}
    for r, _, start in kernels:
        s = sums[r]
        ends[r] = s.ends[_at(s, start)]
    # the two kernels HTA compared end 134 ms apart: a collective ends at once on all its
    # ranks, so they are two collectives …
    assert abs(ends[0] - ends[1]) > 100e6, (it, ends)
    # … on clocks that agree: other kernels of the two ranks end within 1 ms of each other
    close = min(abs(a - b) for a in sums[0].ends for b in sums[1].ends)
    assert close < 1e6
    # (the ranks' ops, in the launching CPU ops of the raw trace: rank 0's is an all-reduce of
    # 26,955,536 floats, rank 1's of 26,258,430 — two collectives, as the ends say)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    d = tmp_path / "pg"
    d.mkdir()
    shutil.copy(PG, d / "rank0.json.gz")
    # rank 1 on a clock 50 ms ahead; it arrives 2 ms before rank 0 at every collective
    second_rank(PG, d / "rank1.json.gz", clock_offset_us=50_000.0, late_us=2_000.0)
    return d


def test_nccl_metadata_names_the_planted_straggler_and_hta_compares_other_collectives(planted):
    sums = {r: summarize(read_trace(planted / f"rank{r}.json.gz")) for r in (0, 1)}
    # the metadata the real kernels carry: the group, its ranks and size, sizes, the op
    s0 = sums[0]
    assert set(s0.groups) == {"0"} and s0.group_ranks == {"0": [(0, 2, 1)]}
    assert s0.group_size == {"0": 2} and s0.group_desc == {"0": "default_pg"}
    assert set(s0.ops) == {"AllReduce", "Broadcast"} and min(s0.nelems) > 0
    c = cross_rank(list(sums.values()))
    assert c is not None and c.trusted and c.matched == len(s0.ops) and c.judged == c.matched
    assert "group 0" in {k.group for k in c.collectives}
    by = {p.rank: p for p in c.per_rank}
    assert abs(by[1].clock_offset_ns + 50_000_000) < 1_000  # the planted offset, measured
    assert c.tolerance_ns is not None and c.tolerance_ns < 50_000  # µs, not ms
    assert c.straggler.startswith("rank 0,") and {s.straggler for s in c.steps} == {0}
    assert all(abs(s.others_waited_ns - 2e6 * 7) < 1e5 for s in c.steps)  # 7 a step, 2 ms each

    picked, kernels = _hta(planted)
    assert picked == [1]  # HTA names the rank that waited
    # why: per iteration it compares each rank's last kernel longer than 1 % of an iteration;
    # the waiting rank's kernels are 2 ms longer, so more of them pass, and its last one is a
    # later collective of the group than rank 0's
    for it in {i for _, i, _ in kernels}:
        pair = {r: _at(sums[r], start) for r, i, start in kernels if i == it}
        ordinal = {r: sums[r].ordinals[k] for r, k in pair.items()}
        op = {r: sums[r].ops[k] for r, k in pair.items()}
        assert op[0] == op[1] and ordinal[1] > ordinal[0], (it, ordinal)


def test_without_a_planted_wait_both_say_so_or_explain(tmp_path):
    """No straggler planted: ours says none (the aligned arrivals are identical)."""
    d = tmp_path / "pg"
    d.mkdir()
    shutil.copy(PG, d / "rank0.json.gz")
    second_rank(PG, d / "rank1.json.gz", clock_offset_us=-20_000.0)
    c = cross_rank([summarize(read_trace(d / f"rank{r}.json.gz")) for r in (0, 1)])
    assert c is not None and c.trusted and c.straggler.startswith("none")
    assert all(s.straggler is None for s in c.steps)


def test_files_of_different_jobs_are_refused_with_one_line_naming_them(tmp_path, capsys):
    from gitm_tui.cli import main

    d = tmp_path / "mixed"
    d.mkdir()
    for name in ("a100_80gb_5streams_graphs.json.gz", "v100_16gb_ddp_graphs_3streams.json.gz"):
        shutil.copy(KINETO / name, d / name)
    rc = main(["analyze", str(d), "--no-write", "--workers", "1"])
    cap = capsys.readouterr()
    assert rc == 3 and "Traceback" not in cap.err
    lines = [ln for ln in cap.err.splitlines() if "not one job" in ln]
    assert len(lines) == 1
    assert "a100_80gb_5streams_graphs.json.gz (rank 0: world size 16" in lines[0]
    assert "v100_16gb_ddp_graphs_3streams.json.gz (rank 1: world size 2" in lines[0]
    assert "collectives across ranks" not in cap.out


def test_one_world_size_but_another_workload_is_refused():
    """Rank 0 and rank 1 of worlds of 2, but of two programs (A100 with NCCL metadata, V100
    DDP): the busiest kernels tell them apart."""
    sums = [summarize(read_trace(KINETO / n)) for n in
            ("a100_nccl_pg_metadata.json.gz", "v100_16gb_ddp_graphs_3streams.json.gz")]  # fmt: skip
    line = not_one_job(sums)
    assert line is not None and line.count("another workload") == 2
    assert cross_rank(sums) is None
    # the two ranks of the 128-rank job are one job
    assert (
        not_one_job([summarize(read_trace(JOB128 / f"rank-{r}.json.gz")) for r in (0, 1)]) is None
    )


def test_a_process_group_recorded_differently_names_the_odd_file(tmp_path):
    from engine.analyze.ranks.synth_ranks import write_ranks

    paths = write_ranks(tmp_path, ranks=3, steps=1, straggler=None, kernels_per_step=20)
    sums = [summarize(read_trace(p)) for p in paths]
    sums[2].group_ranks = {"0": [(0, 4, 1)]}  # another job's group "0": ranks 0..3
    line = not_one_job(sums)
    assert line is not None and "1 of 3 file(s)" in line
    assert (
        "rank0002.json.gz (rank 2: process group '0' of ranks [0..3] (the others: [0..2]))" in line
    )


def test_collectives_are_matched_by_size_when_a_rank_has_one_more(tmp_path):
    """Without a group: the i-th all-reduce of a size on one rank is the i-th of that size on
    the other, so a collective only one rank ran does not shift the others' matches."""

    def summary(rank: int, sizes: list[int], ends: list[int]) -> RankSummary:
        n = len(sizes)
        return RankSummary(
            source=f"r{rank}", rank=rank, steps=[], ops=["AllReduce"] * n, ordinals=list(range(n)),
            starts=[e - 100_000 for e in ends], ends=ends, nelems=sizes, nbytes=[4 * x for x in sizes],
            compute_ns=0, comm_ns=1, overlap_ns=0, span_ns=1,
        )  # fmt: skip

    a = summary(0, [10, 99, 20, 30], [1_000_000, 1_500_000, 2_000_000, 3_000_000])
    b = summary(1, [10, 20, 30], [1_000_000, 2_000_000, 3_000_000])
    c = cross_rank([a, b])
    assert c is not None and c.trusted and c.matched == 3 and c.unmatched == 1
    assert c.inconsistent == 0
