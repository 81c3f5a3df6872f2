"""Levers replayed with the peers held (issue 46, item 3): a collective ends no earlier than its
last peer arrives, then takes its transfer time. On a SYNTHETIC job generated here — each rank
a trace of compute (GEMMs and elementwise pairs) on one stream and an all-reduce per step on
another, joined by event waits and a sync, one rank slower than the others — a rank that is
never last gains nothing for the job beyond what runs after its last collective, and the rank
the others wait for gains at most that plus its lead at its last collective."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pytest

from engine.analyze.advice.levers import LeverReport, replay_levers
from engine.analyze.advice.peers import PeerBounds, hold
from engine.analyze.breakdown.fidelity import fidelity
from engine.planner.catalogue import by_id
from engine.schedule.dag import build_dag, merge_idle_host_rows, schedule
from engine.trace.segments import Kind, Klass, NameTable
from engine.trace.trace import ApiKind, Trace
from tests.fakes import rows_trace

US = 1_000
HW = by_id("a100-80gb")
GEMM = "ampere_sgemm_128x64_nn"
EW = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
COMPUTE, COMM = 7, 13
LAUNCH_NS, GAP_NS, LATENCY_NS = 5 * US, 8 * US, 4 * US
TRANSFER_NS = 100 * US


@dataclass
class _Rank:
    """One rank's trace as it is written: host rows, device rows, and its clocks."""

    slow: float
    host: list[tuple] = field(default_factory=list)
    dev: list[tuple] = field(default_factory=list)
    h: int = 0  # the host thread's clock
    free: dict[int, int] = field(default_factory=lambda: {COMPUTE: 0, COMM: 0})
    after: dict[int, int] = field(default_factory=lambda: {COMPUTE: 0, COMM: 0})  # event waits
    corr: int = 0
    steps: list[int] = field(default_factory=list)

    def call(self, api: int, dur: int, stream: int = -1, event: int = -1) -> int:
        """A host call of ``dur`` ns at the host's clock; returns its correlation."""
        self.corr += 1
        self.host.append((api, self.h, self.h + dur, self.corr, stream, event, 0))
        self.h += dur + GAP_NS
        return self.corr

    def kernel(self, name: str, klass: int, dur_ns: int) -> None:
        """Launch a compute kernel: it starts when launched, its stream free and its waits met."""
        at = self.h
        c = self.call(ApiKind.LAUNCH, LAUNCH_NS)
        start = max(at + LATENCY_NS, self.free[COMPUTE], self.after[COMPUTE])
        end = start + int(dur_ns * self.slow)
        self.dev.append((start, end, COMPUTE, c, name, klass, Kind.KERNEL))
        self.free[COMPUTE] = end

    def handoff(self, src: int, dst: int, event: int) -> None:
        """cudaEventRecord on ``src`` then cudaStreamWaitEvent on ``dst``."""
        self.call(ApiKind.EVENT_RECORD, 2 * US, src, event)
        self.call(ApiKind.STREAM_WAIT, 2 * US, dst, event)
        self.after[dst] = max(self.after[dst], self.free[src])

    def arrive(self) -> tuple[int, int]:
        """Launch the collective: (its correlation, when this rank arrives at it)."""
        at = self.h
        c = self.call(ApiKind.LAUNCH, LAUNCH_NS)
        return c, max(at + LATENCY_NS, self.free[COMM], self.after[COMM])


def _step(rk: _Rank, k: int) -> None:
    """One step's compute: four GEMMs, each followed by an elementwise pair (fusable)."""
    rk.steps.append(rk.h)
    for _ in range(4):
        rk.kernel(GEMM, Klass.GEMM, 150 * US)
        rk.kernel(EW, Klass.ELEMENTWISE, 30 * US)
        rk.kernel(EW, Klass.ELEMENTWISE, 30 * US)
    rk.handoff(COMPUTE, COMM, 2 * k)


def _finish(rk: _Rank, k: int, corr: int, arrival: int, end: int) -> None:
    """The collective ran from this rank's arrival to the job's end of it; the compute stream
    waits for it, the host syncs on it."""
    rk.dev.append((arrival, end, COMM, corr, NCCL, Klass.COMM, Kind.KERNEL))  # as Kineto's
    rk.free[COMM] = end
    rk.handoff(COMM, COMPUTE, 2 * k + 1)
    at = rk.h
    rk.host.append((ApiKind.SYNC, at, max(at, end) + 5 * US, 0, COMM, -1, 0))
    rk.h = max(at, end) + 5 * US + GAP_NS


def _trace(rk: _Rank, names: NameTable) -> Trace:
    tr = rows_trace(rk.host, rk.dev, names, source="SYNTHETIC")
    seg, host = tr.segments, tr.host
    end = max(int(seg.end_ns.max()), int(host.api_end_ns.max()))
    bounds = [*rk.steps, end]
    props = {
        "format": "kineto",
        "devices": [{"name": "NVIDIA A100-SXM4-80GB"}],
        "profiler_steps": [list(ab) for ab in itertools.pairwise(bounds)],
    }
    tr.device_properties = props
    return tr


@dataclass(frozen=True)
class Job:
    """The generated job: each rank's trace and its PeerBounds, as the cross-rank match gives
    them (engine.analyze.ranks.ranks.peer_bounds), here known by construction."""

    traces: list[Trace]
    peers: list[PeerBounds]


def job(ranks: int = 4, steps: int = 4, straggler: int = 3, slow: float = 1.4) -> Job:
    """SYNTHETIC: ``ranks`` ranks on one clock, ``straggler`` computing ``slow`` times longer;
    each all-reduce ends ``TRANSFER_NS`` after its last rank arrived; after the last one, a
    short tail (two small kernels) on every rank."""
    rks = [_Rank(slow if r == straggler else 1.0 + 0.01 * r) for r in range(ranks)]
    arrivals = np.zeros((steps, ranks), np.int64)
    ends = np.zeros(steps, np.int64)
    for k in range(steps):
        launched = []
        for rk in rks:
            _step(rk, k)
            launched.append(rk.arrive())
        arrivals[k] = [a for _, a in launched]
        ends[k] = arrivals[k].max() + TRANSFER_NS
        for rk, (c, a) in zip(rks, launched, strict=True):
            _finish(rk, k, c, a, int(ends[k]))
    for rk in rks:  # the post-collective tail
        rk.kernel(EW, Klass.ELEMENTWISE, 40 * US)
        rk.kernel(EW, Klass.ELEMENTWISE, 40 * US)
    names = NameTable()
    traces = [_trace(rk, names) for rk in rks]
    peers = []
    for r in range(ranks):
        others = np.delete(arrivals, r, axis=1)
        peers.append(
            PeerBounds(
                rank=r,
                start_ns=arrivals[:, r].copy(),
                peer_ready_ns=others.max(axis=1),
                transfer_ns=ends - arrivals.max(axis=1),
                last_rank=arrivals.argmax(axis=1).astype(np.int64),
                op=["AllReduce"] * steps,
            )
        )
    return Job(traces, peers)


def _levers(tr: Trace, peers: PeerBounds | None) -> LeverReport:
    return replay_levers(tr, HW, np.full(len(tr.segments), 255, np.uint8), 1, peers=peers)


def _predicted(rep: LeverReport) -> dict[str, float]:
    """Each predicted lever's optimistic end (the most its replay gave)."""
    return {
        e.lever: max(e.predicted_gain or 0.0, e.gain_high or 0.0)
        for e in rep.estimates
        if e.status == "predicted"
    }


def _tail_share(tr: Trace) -> tuple[float, float]:
    """(share of the replayed span after the last collective's end, that span)."""
    dag = build_dag(tr, HW, 1)
    span = schedule(dag).makespan_ns
    comm = tr.segments.klass == Klass.COMM
    last = float(tr.segments.end_ns[comm].max()) - dag.t0_ns
    return (span - last) / span, span


@pytest.fixture(scope="module")
def generated() -> Job:
    return job()


def test_the_generated_job_has_one_rank_last_everywhere(generated):
    for pb in generated.peers:
        assert (pb.last_rank == 3).all()
        assert (pb.waited_ns() > 0).all() == (pb.rank != 3)


def test_held_replay_still_reproduces_each_rank(generated):
    """Held to its peers, the no-lever replay ends every collective and the span as observed."""
    for tr, pb in zip(generated.traces, generated.peers, strict=True):
        dag = merge_idle_host_rows(build_dag(tr, HW, 1))
        base = schedule(dag)
        hdag, held = hold(dag, pb)
        hbase = schedule(hdag)
        assert len(held.rows) == len(pb)
        assert hbase.makespan_ns == base.makespan_ns
        obs_end = dag.d_start_obs[held.rows] - dag.t0_ns + dag.d_dur[held.rows]
        np.testing.assert_allclose(hbase.d_end[held.rows], obs_end, atol=1.0)
        assert fidelity(dag, hbase).faithful


def test_a_rank_never_last_gains_nothing_beyond_its_tail(generated):
    """Rank 0 waits for rank 3 at every all-reduce. Alone, its replay lets a faster rank 0
    "finish" each all-reduce sooner, and some lever gains more than what runs after its last
    collective; held to its peers, no lever does, and each says what bounded it."""
    tr, pb = generated.traces[0], generated.peers[0]
    tail, _ = _tail_share(tr)
    assert 0 < tail < 0.05
    alone = _levers(tr, None)
    gains = _predicted(alone)
    assert max(gains.values()) > tail + 0.01, gains  # the bug: gains the job cannot have
    for e in alone.estimates:
        if e.status == "predicted":
            assert e.peers is not None and e.peers.startswith("peers unknown: 4 collectives")
    held = _levers(tr, pb)
    for lever, g in _predicted(held).items():
        assert g <= tail + 1e-6, (lever, g, tail)
    line = next(e.peers for e in held.estimates if e.status == "predicted")
    assert line is not None
    assert line.startswith("no gain for the job beyond the post-collective tail (")
    assert "rank 0 waits" in line and "per step for rank 3 at AllReduce" in line
    assert "\n" not in line


def test_the_rank_last_gains_at_most_its_lead_and_its_tail(generated):
    """Rank 3 arrives last: a change on it can end its last all-reduce earlier only until the
    next-latest rank is there, then its tail. Held, no lever gains more than that."""
    tr, pb = generated.traces[3], generated.peers[3]
    tail, span = _tail_share(tr)
    lead = float(pb.start_ns[-1] - pb.peer_ready_ns[-1])
    assert lead > 0
    bound = tail + lead / span
    held = _levers(tr, pb)
    gains = _predicted(held)
    assert gains
    for lever, g in gains.items():
        assert g <= bound + 1e-6, (lever, g, bound)
    assert max(_predicted(_levers(tr, None)).values()) > bound  # alone it over-counts
    line = next(e.peers for e in held.estimates if e.status == "predicted")
    assert line is not None and "rank 3 is last at 4 of 4 collectives" in line


def test_unmatched_collectives_are_named():
    """Peers known for only two of four all-reduces: the other two are said to be replayed as
    if every peer arrived with this rank."""
    g = job(ranks=2, steps=4, straggler=1)
    pb = g.peers[0]
    half = PeerBounds(
        rank=0,
        start_ns=pb.start_ns[:2],
        peer_ready_ns=pb.peer_ready_ns[:2],
        transfer_ns=pb.transfer_ns[:2],
        last_rank=pb.last_rank[:2],
        op=pb.op[:2],
        unmatched=2,
    )
    line = next(e.peers for e in _levers(g.traces[0], half).estimates if e.status == "predicted")
    assert line is not None and "2 collectives (" in line and "with no matched peers" in line


def test_peers_given_but_matching_nothing_say_so(generated):
    """Bounds for starts this rank never had (another window, a group not given) hold nothing:
    the line says so, then what an unknown peer means."""
    pb = generated.peers[0]
    off = PeerBounds(0, pb.start_ns + 1, pb.peer_ready_ns, pb.transfer_ns, pb.last_rank, pb.op)
    rep = _levers(generated.traces[0], off)
    line = next(e.peers for e in rep.estimates if e.status == "predicted")
    assert line is not None
    assert line.startswith("no collective matched across the ranks given; peers unknown: 4 ")
