"""The replay holds a collective to its peers (``ReplayDag.d_not_before``, set by
engine.analyze.advice.peers.hold): it starts its transfer no earlier than its last peer arrived, the
compiled replay, its Python twin and ``schedule_ref`` alike, and a rank's own trace still
replays as observed. SYNTHETIC traces built here."""

from __future__ import annotations

import numpy as np

from engine.analyze.advice.peers import PeerBounds, alone_line, hold
from engine.jit import interpreted
from engine.planner.catalogue import by_id
from engine.schedule.dag import ReplayDag, Schedule, build_dag, schedule
from engine.schedule.reference import schedule_ref
from engine.trace.segments import Kind, Klass, NameTable
from engine.trace.trace import ApiKind, Trace
from tests.fakes import rows_trace

US = 1_000
HW = by_id("a100-80gb")
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def _trace() -> Trace:
    """Stream 7: a GEMM 20-110 µs, then (event wait) an all-reduce on stream 13 from 110 µs
    (this rank's arrival) to 300 µs, then (event wait) a GEMM on stream 7 300-350 µs; a copy
    kernel on stream 9 40-60 µs (launched 20 µs before it started, as the first GEMM: the
    launch latency the replay reads off the trace)."""
    names = NameTable()
    dev = [  # (start, end, stream, correlation, name, class, kind)
        (20 * US, 110 * US, 7, 1, "ampere_sgemm_128x64_nn", Klass.GEMM, Kind.KERNEL),
        (110 * US, 300 * US, 13, 4, NCCL, Klass.COMM, Kind.COMM),
        (300 * US, 350 * US, 7, 7, "ampere_sgemm_128x64_nn", Klass.GEMM, Kind.KERNEL),
        (40 * US, 60 * US, 9, 8, "void at::native::copy_kernel", Klass.ELEMENTWISE, Kind.KERNEL),
    ]
    host = [  # (api, start, end, correlation, stream, event, thread)
        (ApiKind.LAUNCH, 0, 3 * US, 1, -1, -1, 0),
        (ApiKind.EVENT_RECORD, 4 * US, 5 * US, 0, 7, 1, 0),
        (ApiKind.STREAM_WAIT, 6 * US, 7 * US, 0, 13, 1, 0),
        (ApiKind.LAUNCH, 8 * US, 11 * US, 4, -1, -1, 0),
        (ApiKind.EVENT_RECORD, 12 * US, 13 * US, 0, 13, 2, 0),
        (ApiKind.STREAM_WAIT, 14 * US, 15 * US, 0, 7, 2, 0),
        (ApiKind.LAUNCH, 16 * US, 19 * US, 7, -1, -1, 0),
        (ApiKind.LAUNCH, 20 * US, 23 * US, 8, -1, -1, 0),
    ]
    return rows_trace(host, dev, names)


def _peers(ready_us: float, transfer_us: float = 180.0, last: int = 1) -> PeerBounds:
    return PeerBounds(
        rank=0,
        start_ns=np.array([110 * US], np.int64),
        peer_ready_ns=np.array([int(ready_us * US)], np.int64),
        transfer_ns=np.array([int(transfer_us * US)], np.int64),
        last_rank=np.array([last], np.int64),
        op=["AllReduce"],
    )


def _all_agree(dag: ReplayDag) -> Schedule:
    """The compiled replay, equal bit for bit to schedule_ref and to the interpreted twin."""
    s = schedule(dag)
    with interpreted():
        twin = schedule(dag)
    for other in (schedule_ref(dag), twin):
        for f in ("d_ready", "d_start", "d_end", "h_start", "h_end"):
            np.testing.assert_array_equal(getattr(s, f), getattr(other, f), err_msg=f)
        assert s.makespan_ns == other.makespan_ns
    return s


def _comm(dag: ReplayDag) -> int:
    return int(np.flatnonzero(dag.d_kind == Kind.COMM)[0])


def test_a_row_starts_no_earlier_than_its_bound():
    """Held to 200 µs, the all-reduce starts then and the GEMM waiting for it moves with it; a
    NaN bound and a bound on a removed row hold nothing."""
    dag = build_dag(_trace(), HW, 1)
    base = _all_agree(dag)
    d = _comm(dag)
    held = dag.copy()
    held.d_not_before = np.full(len(dag.d_stream), np.nan)
    assert _all_agree(held).makespan_ns == base.makespan_ns
    held.d_not_before[d] = 200 * US
    s = _all_agree(held)
    assert s.d_start[d] == 200 * US
    assert s.d_end[d] == 200 * US + dag.d_dur[d]
    assert s.makespan_ns == base.makespan_ns + (200 - 110) * US
    gone = held.copy()
    gone.d_live[d], gone.d_dur[d] = False, 0.0
    ref = dag.copy()
    ref.d_live[d], ref.d_dur[d] = False, 0.0
    assert _all_agree(gone).makespan_ns == _all_agree(ref).makespan_ns


def test_held_to_a_later_peer_the_trace_replays_as_observed():
    """The last peer arrived at 120 µs (this rank at 110 µs): the transfer is 180 µs, and the
    held replay still ends the all-reduce at 300 µs. A GEMM before it running 50 µs shorter
    then gains nothing: the all-reduce waits for its peer."""
    dag = build_dag(_trace(), HW, 1)
    base = schedule(dag)
    hdag, held = hold(dag, _peers(120))
    d = _comm(dag)
    assert held.rows.tolist() == [d] and held.free_rows == 0
    assert hdag.d_not_before[d] == 120 * US - dag.t0_ns
    assert hdag.d_dur[d] == 180 * US
    s = _all_agree(hdag)
    assert s.makespan_ns == base.makespan_ns
    assert s.d_end[d] == 300 * US - dag.t0_ns
    faster = hdag.copy()
    faster.d_dur[0] -= 50 * US
    assert _all_agree(faster).makespan_ns == base.makespan_ns
    alone = dag.copy()
    alone.d_dur[0] -= 50 * US
    assert schedule(alone).makespan_ns < base.makespan_ns - 40 * US  # alone it "gains"


def test_the_rank_last_is_held_only_by_its_lead():
    """This rank was last (its peer was there at 100 µs, 10 µs before it): it keeps its own
    time, and made 50 µs faster before the collective it gains only those 10 µs."""
    dag = build_dag(_trace(), HW, 1)
    base = schedule(dag)
    hdag, held = hold(dag, _peers(100, transfer_us=190, last=0))
    d = _comm(dag)
    assert hdag.d_dur[d] == dag.d_dur[d]
    assert _all_agree(hdag).makespan_ns == base.makespan_ns
    assert held.floor_ns == 290 * US - dag.t0_ns  # 100 µs + the 190 µs transfer
    faster = hdag.copy()
    faster.d_dur[0] -= 50 * US
    assert _all_agree(faster).makespan_ns == base.makespan_ns - 10 * US


def test_a_peer_arrival_past_the_transfer_is_fitted_to_this_trace():
    """Aligned clocks put the last peer at 150 µs, but the transfer takes 180 µs and this rank's
    all-reduce ended at 300 µs: the peer is taken to have arrived at 120 µs (the clock offset's
    error), so the replay still ends it as observed; a transfer longer than the kernel ran here
    is cut to the kernel."""
    dag = build_dag(_trace(), HW, 1)
    base = schedule(dag)
    d = _comm(dag)
    hdag, _ = hold(dag, _peers(150))
    assert hdag.d_not_before[d] == 120 * US - dag.t0_ns and hdag.d_dur[d] == 180 * US
    assert _all_agree(hdag).makespan_ns == base.makespan_ns
    hdag, _ = hold(dag, _peers(90, transfer_us=500))
    assert hdag.d_dur[d] == dag.d_dur[d]
    assert _all_agree(hdag).makespan_ns == base.makespan_ns


def test_entries_that_match_no_collective_hold_nothing():
    dag = build_dag(_trace(), HW, 1)
    pb = _peers(120)
    off = PeerBounds(0, pb.start_ns + 1, pb.peer_ready_ns, pb.transfer_ns, pb.last_rank, pb.op)
    hdag, held = hold(dag, off)
    assert not len(held.rows) and held.free_rows == 1
    assert np.isnan(hdag.d_not_before).all()
    line = alone_line(dag)
    assert line is not None and line.startswith("peers unknown: 1 collective (0.19 ms) are")
