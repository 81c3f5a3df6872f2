"""Issue 46, item 2: every collective matched across ranks — the all-to-all exchanges that run
as ``ncclKernel_SendRecv`` kernels naming neither their peer nor their collective included —
each split into arrival skew and transfer, and the straggler named from the whole wait it
causes. On SYNTHETIC jobs (engine.analyze.ranks.synth_ranks.exchange_job) like the real 8-rank job of
the issue: rank 5 arrives last at four of five exchanges per step, which hold most of the wait;
rank 2 arrives last at the three small AllReduces, which are all the old matching compared."""

from __future__ import annotations

import numpy as np
import pytest

from engine.analyze.ranks.ranks import RankSummary, cross_rank, peer_bounds, summarize
from engine.analyze.ranks.synth_ranks import exchange_job, planted_waits
from engine.trace.read import read_trace
from tests.paths import ROOT

JOB128 = ROOT / "tests" / "data" / "traces" / "kineto" / "job128_two_ranks"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> list[RankSummary]:
    paths = exchange_job(tmp_path_factory.mktemp("exchange"))
    return [summarize(read_trace(p)) for p in paths]


def test_the_rank_late_at_the_exchanges_is_named_not_the_one_late_at_the_allreduces(job):
    c = cross_rank(job)
    assert c is not None and c.trusted
    # every collective matched: 3 steps × (5 exchanges + 3 AllReduces), nothing left over
    assert c.matched == c.judged == 24 and c.unmatched == 0 and c.unmatched_ops == []
    by = {k.op: k.matched_by for k in c.collectives}
    assert by == {"SendRecv": "order and ends", "AllReduce": "seq"}
    # the AllReduces alone would name rank 2 (the old verdict): it is last at every one of them
    assert {k.last_rank for k in c.collectives if k.op == "AllReduce"} == {2}
    # … but the wait it causes is a fifteenth of rank 5's
    assert c.straggler_rank == 5, c.straggler
    planted = planted_waits()
    assert abs(c.caused_ns[5] - planted[5]) < 0.01 * planted[5]
    assert abs(c.caused_ns[2] - planted[2]) < 0.05 * planted[2]
    assert c.straggler.startswith("rank 5, the others waited 5.7")  # ms per step: 3.8+0.9+0.6+0.4
    assert "ms per step for it (94% of all wait), last at 12 of 15 SendRecv" in c.straggler
    assert "rank 2 next (0.36" in c.straggler
    assert {s.straggler for s in c.steps} == {5}
    assert next(p for p in c.per_rank if p.rank == 5).caused_ns == c.caused_ns[5]


def test_each_collective_splits_into_waits_and_transfer_with_its_bus_bandwidth(job):
    c = cross_rank(job)
    assert c is not None
    first = [k for k in c.collectives if k.op == "SendRecv" and k.ordinal == 0]
    assert len(first) == 3  # the first exchange of each step: the others waited 3.8 ms
    for k in first:
        assert k.last_rank == 5 and k.waits_ns[5] == 0 and len(k.waits_ns) == 8
        assert all(3.78e6 < w < 3.83e6 for r, w in k.waits_ns.items() if r != 5)
        assert k.waited_ns == sum(k.waits_ns.values()) and 170e3 < k.transfer_ns < 190e3
        assert k.nbytes is None and k.bus_bw_Bps is None  # the kernel says no size
    ar = [k for k in c.collectives if k.op == "AllReduce"]
    assert len(ar) == 9 and all(35e3 < k.transfer_ns < 45e3 for k in ar)
    # 64 Ki bf16 elements in ~40 µs, × 2(n−1)/n = 1.75: NCCL's busBw, against NVLink 450 GB/s
    assert c.peer_link == "NVLink" and c.peer_link_Bps == 450e9
    for k in ar:
        assert k.nbytes == (1 << 16) * 2
        assert k.bus_bw_Bps == pytest.approx(k.nbytes / (k.transfer_ns * 1e-9) * 1.75)
        assert k.link_share == pytest.approx(k.bus_bw_Bps / 450e9)
    assert c.wait_ns == sum(c.caused_ns.values())
    assert any(n.startswith("the 24 judged collective(s):") and "NVLink" in n for n in c.notes)


def test_the_clocks_align_on_the_exchanges_when_they_are_all_there_is(tmp_path):
    paths = exchange_job(tmp_path, plan="xxxxx")
    c = cross_rank([summarize(read_trace(p)) for p in paths])
    assert c is not None and c.trusted and c.matched == c.judged == 15
    assert "the ends of SendRecv kernels that name nothing" in c.clocks
    assert c.tolerance_ns is not None and c.tolerance_ns < 10_000  # µs, on ±50 ms host clocks
    assert max(abs(p.clock_offset_ns) for p in c.per_rank) > 1e6
    assert c.straggler_rank == 5 and "(100% of all wait)" in c.straggler


def test_exchanges_a_rank_lost_can_hold_more_than_the_margin_so_cannot_tell(tmp_path):
    # rank 3's trace lacks the first two exchanges of every step: the ones rank 5 held up most
    paths = exchange_job(tmp_path, lost={3: (0, 1)})
    c = cross_rank([summarize(read_trace(p)) for p in paths])
    assert c is not None and c.trusted and c.matched == 18 and c.unmatched == 6
    assert c.straggler_rank is None and c.steps == [] and c.caused_ns == {}
    assert c.straggler.startswith("cannot tell — the others waited 1.00")
    assert "could not be judged, more than the margin between them" in c.straggler
    (u,) = c.unmatched_ops
    assert (u.op, u.why, u.kernels) == ("SendRecv", "unmatched", 7 * 2 * 3)
    assert 0.6 < u.share < 0.7 and f"{u.share:.0%} of collective time" in c.straggler


def test_a_lost_exchange_smaller_than_the_margin_leaves_the_verdict(tmp_path):
    paths = exchange_job(tmp_path, lost={3: (2,)})  # the exchange nobody was late at
    c = cross_rank([summarize(read_trace(p)) for p in paths])
    assert c is not None and c.straggler_rank == 5
    assert "could not be judged, less than its margin" in c.straggler


def test_peer_bounds_hold_each_rank_to_the_last_arrival_on_its_own_clock(job):
    c = cross_rank(job)
    bounds = peer_bounds(job, c)
    assert sorted(bounds) == list(range(8))
    b0 = bounds[0]
    assert len(b0) == 24 and b0.unmatched == 0 and b0.rank == 0
    # the key into rank 0's Segments: the COMM rows' own start_ns, exactly
    seg = read_trace(job[0].source).segments
    from engine.trace.segments import Kind, Klass

    comm = (seg.kind == Kind.COMM) | ((seg.kind == Kind.KERNEL) & (seg.klass == Klass.COMM))
    assert set(b0.start_ns.tolist()) == set(seg.start_ns[comm].tolist()) == set(job[0].starts)
    x = np.array([op == "SendRecv" for op in b0.op])
    late = b0.last_rank == 5
    assert late.sum() >= 12 and (b0.peer_ready_ns[late] >= b0.start_ns[late]).all()
    waited = b0.waited_ns()
    # at each step's first exchange rank 0 waited 3.8 ms for rank 5, then 180 µs of transfer
    first = np.flatnonzero(x & (waited > 3e6))
    assert len(first) == 3 and np.all(np.abs(waited[first] - 3.8e6) < 3e4)
    assert np.all(np.abs(b0.transfer_ns[first] - 180e3) < 1e4)
    # and the AllReduces: it waited ~120 µs for rank 2
    ar = ~x
    assert (b0.last_rank[ar] == 2).all() and np.all(np.abs(waited[ar] - 120e3) < 1e4)
    # rank 5 itself: last at the exchanges it held up, so it waited for nobody there
    b5 = bounds[5]
    held = b5.last_rank == 5
    assert held.sum() >= 12 and (b5.waited_ns()[held] == 0).all()
    assert (b5.peer_ready_ns[held] < b5.start_ns[held]).all()
    # a rank's own kernel lasts its wait + transfer: the bound reproduces its observed end
    s0 = job[0]
    ends = dict(zip(s0.starts, s0.ends, strict=True))
    obs = np.array([ends[int(t)] for t in b0.start_ns])
    assert np.all(np.abs(np.maximum(b0.start_ns, b0.peer_ready_ns) + b0.transfer_ns - obs) < 3e3)


def test_peer_bounds_count_what_was_not_matched_and_need_trusted_clocks(tmp_path, job):
    paths = exchange_job(tmp_path, lost={3: (0, 1)})
    sums = [summarize(read_trace(p)) for p in paths]
    bounds = peer_bounds(sums)
    assert bounds[0].unmatched == 6 and len(bounds[0]) == 18 and bounds[3].unmatched == 0
    c = cross_rank(job)
    assert c is not None
    assert peer_bounds(job, c.model_copy(update={"trusted": False})) == {}


def test_the_real_two_ranks_of_a_128_rank_job_give_bounds_for_nothing_and_say_so():
    sums = [summarize(read_trace(JOB128 / f"rank-{r}.json.gz")) for r in (0, 1)]
    bounds = peer_bounds(sums)
    # the clocks align on the SendRecv kernels that end together, but each may take in ranks of
    # the 126 not given: no collective is judged, so nothing holds the replay — all counted
    assert {r: (len(b), b.unmatched) for r, b in bounds.items()} == {0: (0, 10), 1: (0, 10)}


def test_the_verdict_reaches_the_terminal_and_cross_rank_md(tmp_path, capsys):
    from gitm_tui.cli import main

    exchange_job(tmp_path / "ranks")
    assert main(["analyze", str(tmp_path / "ranks"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "straggler: rank 5, the others waited" in " ".join(out.split())
    md = (tmp_path / "out" / "cross_rank.md").read_text()
    assert "**Straggler:** rank 5, the others waited" in md
    assert "## Collectives" in md and "| SendRecv | 0 |" in md
