"""The replay replays what a trace shows (issue 35): hand-made SYNTHETIC traces, each built here
to hold one case an independent review found the replay getting wrong — every one must replay
to its own observed times, and a lever's replay must respect what the rows waited for."""

from __future__ import annotations

import numpy as np

from engine.analyze.advice.levers import replay_levers
from engine.planner.catalogue import by_id
from engine.schedule.dag import build_dag, schedule
from engine.schedule.reference import schedule_ref
from engine.trace.segments import Kind, Klass
from engine.trace.trace import ApiKind, Trace
from tests.fakes import rows_trace

US = 1_000
HW = by_id("a100-80gb")
GEMM = "ampere_sgemm_128x64_nn"
EW = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def _trace(host: list[tuple], dev: list[tuple]) -> Trace:
    """host: (api, start, end, correlation, stream, event, thread); dev: (start, end, stream,
    correlation, name, klass, kind)."""
    props = {"format": "kineto", "devices": [{"name": "NVIDIA A100-SXM4-80GB"}]}
    return rows_trace(host, dev, props=props, source="synthetic")


def _launch(s: int, e: int, corr: int, thread: int = 0) -> tuple:
    return (ApiKind.LAUNCH, s, e, corr, -1, -1, thread)


def _kernel(s: int, e: int, stream: int, corr: int, name: str = GEMM, klass=Klass.GEMM) -> tuple:
    return (s, e, stream, corr, name, klass, Kind.KERNEL)


def _replays_itself(tr: Trace) -> None:
    dag = build_dag(tr, HW, 1)
    s = schedule(dag)
    assert s.makespan_ns == dag.observed_ns
    np.testing.assert_allclose(s.d_start, dag.d_start_obs - dag.t0_ns, atol=1.0)
    ref = schedule_ref(dag)
    np.testing.assert_array_equal(s.d_start, ref.d_start)
    np.testing.assert_array_equal(s.h_end, ref.h_end)


def test_a_sync_waits_for_an_unlinked_row_that_finished_while_it_was_blocked():
    """cudaStreamSynchronize 20-151 µs waits for a collective no call in the trace launched
    (50-150 µs): it is queued before the sync, and the sync returns when it did."""
    host = [
        _launch(0, 3 * US, 1),
        (ApiKind.SYNC, 20 * US, 151 * US, 0, 7, -1, 0),
        _launch(152 * US, 155 * US, 5),
    ]
    dev = [
        _kernel(10 * US, 50 * US, 7, 1),
        (50 * US, 150 * US, 7, 0, NCCL, Klass.COMM, Kind.COMM),
        _kernel(160 * US, 170 * US, 7, 5),
    ]
    _replays_itself(_trace(host, dev))


def test_an_unlinked_row_does_not_take_a_later_stream_wait():
    """A row no call launched ran at 40 µs, before the stream's wait on an event recorded behind
    a 300 µs kernel: the wait is for the next launched row, not for it."""
    host = [
        _launch(0, 3 * US, 1),
        _launch(3 * US, 6 * US, 2),
        (ApiKind.EVENT_RECORD, 6 * US, 7 * US, 0, 8, 1, 0),
        (ApiKind.STREAM_WAIT, 11 * US, 12 * US, 0, 7, 1, 0),
        _launch(12 * US, 15 * US, 4),
    ]
    dev = [
        _kernel(10 * US, 300 * US, 8, 1),
        _kernel(8 * US, 40 * US, 7, 2),
        (40 * US, 60 * US, 7, 0, NCCL, Klass.COMM, Kind.COMM),
        _kernel(300 * US, 310 * US, 7, 4),
    ]
    dag = build_dag(_trace(host, dev), HW, 1)
    s = schedule(dag)
    unlinked = int(np.flatnonzero(dag.d_kind == Kind.COMM)[0])
    assert abs(s.d_start[unlinked] - (dag.d_start_obs[unlinked] - dag.t0_ns)) < 1 * US


def test_a_blocking_memcpy_keeps_its_time_after_the_copy():
    """A cudaMemcpy 30-400 µs whose copy ran 40-60 µs: the call returns at 400 µs, as observed."""
    host = [
        _launch(0, 3 * US, 1),
        (ApiKind.MEMCPY_SYNC, 30 * US, 400 * US, 2, -1, -1, 0),
        _launch(401 * US, 404 * US, 3),
    ]
    dev = [
        _kernel(10 * US, 30 * US, 7, 1),
        (40 * US, 60 * US, 7, 2, "Memcpy HtoD (Pageable -> Device)", Klass.COPY, Kind.MEMCPY),
        _kernel(410 * US, 430 * US, 7, 3),
    ]
    _replays_itself(_trace(host, dev))


def test_a_wait_on_a_fused_away_row_waits_for_what_absorbed_it():
    """Stream 8's long kernel started right after e2 ended on stream 7 (an unrecorded event
    wait, inferred). Fusing e1+e2 removes e2: the long kernel then waits for the fused kernel,
    not for nothing — so no lever's replay exceeds its ceiling."""
    host = [_launch(i * 3 * US, i * 3 * US + 2 * US, i + 1) for i in range(4)]
    dev = [
        _kernel(10 * US, 110 * US, 7, 1),
        _kernel(110 * US, 115 * US, 7, 2, EW, Klass.ELEMENTWISE),
        _kernel(115 * US, 120 * US, 7, 3, EW, Klass.ELEMENTWISE),
        _kernel(122 * US, 622 * US, 8, 4),
    ]
    tr = _trace(host, dev)
    dag = build_dag(tr, HW, 1)
    assert (dag.d_after >= 0).sum() == 1  # the inferred wait
    rep = replay_levers(tr, HW, np.full(len(tr.segments), 255, np.uint8), threads=1)
    for e in rep.estimates:
        if e.status == "predicted":
            assert not e.capped, e
