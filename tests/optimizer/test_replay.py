"""Counterfactual replay: the dependency graph is built from the trace alone and reproduces it;
each lever's transform edits it; predictions track the re-simulated measurement."""

from __future__ import annotations

import numpy as np
import pytest

from engine.eesm.pipeline import decode_fused
from engine.levers.library import LEVERS, by_id
from engine.levers.model import Observation
from engine.manifest import ExecConfig, WorkloadSpec
from engine.planner.catalogue import by_id as hw_by_id
from engine.schedule.dag import build_dag, schedule
from engine.trace.trace import ApiKind
from engine.workloads.sim import SimState, SimWorkload
from tests.paths import TRACES

H100 = hw_by_id("h100-sxm")


def _obs(wl: SimWorkload, state: SimState, model, seed: int = 1):
    m = wl.measure(state, seed=seed)
    dec = decode_fused(m.trace.segments, model)
    dag = build_dag(m.trace, H100, m.iterations, regimes=dec.labels, window=m.window)
    return m, Observation(dag, schedule(dag), m.telemetry, H100, m.samples_per_iteration)


@pytest.mark.parametrize("workload", ["hft-lob", "af2", "kitti"])
@pytest.mark.parametrize("config", [ExecConfig(), ExecConfig(cuda_graphs=True, prefetch_depth=2)])
def test_unedited_replay_reproduces_the_observed_step(workload, config, model):
    wl = SimWorkload(workload)
    m, obs = _obs(wl, wl.base.with_config(**config.model_dump()), model)
    assert obs.baseline.makespan_ns == pytest.approx(obs.dag.observed_ns, rel=0.005)
    assert obs.per_sample_ns(obs.baseline) == pytest.approx(m.mean_ns, rel=0.005)


def test_replay_reads_the_trace_only():
    """The graph is built from Segments + HostEvents + the catalogue; each lever's transform
    sees only that Observation — never the workload state or the simulator."""
    import inspect
    from pathlib import Path

    import engine.schedule.dag as dag_mod

    code = Path(dag_mod.__file__).read_text().split('"""', 2)[2]  # past the docstring
    assert "engine.device" not in code and "SimulatedGPU" not in code
    for lv in LEVERS:
        src = inspect.getsource(type(lv).transform)
        assert "state" not in src and "load_hardware" not in src and "engine.device" not in src, (
            lv.id
        )


def _spec(ops, streams=(1, 2)):
    return WorkloadSpec.model_validate(
        {
            "name": "t",
            "title": "t",
            "description": "t",
            "regime_mix": "t",
            "streams": list(streams),
            "memory_used_bytes": 1 << 30,
            "framework_ns": 5000,
            "iteration": ops,
        }
    )


def test_event_edges_hold_in_the_replay(model):
    """Stream 2 waits for stream 1's kernel through record/wait: making stream 1's kernel longer
    in the graph delays stream 2's kernel by the same amount."""
    k = {"op": "kernel", "klass": "GEMM", "flops": 4e11, "bytes": 1e6, "grid": 1056, "block": 256}
    spec = _spec(
        [
            {**k, "name": "producer", "stream": 1},
            {"op": "record", "stream": 1, "event": "e"},
            {"op": "wait", "stream": 2, "event": "e"},
            {**k, "name": "consumer", "stream": 2},
            {"op": "sync"},
        ]
    )
    wl = SimWorkload("hft-lob")
    wl.base = SimState(spec=spec)
    _, obs = _obs(wl, wl.base, model)
    dag = obs.dag.copy()
    prod = [i for i, n in enumerate(dag.d_name) if n == "producer"]
    cons = [i for i, n in enumerate(dag.d_name) if n == "consumer"]
    s0 = schedule(dag)
    dag.d_dur[prod] += 100_000.0
    s1 = schedule(dag)
    # each step's consumer waits for its producer; the step-end sync carries the delay on
    delay = s1.d_start[cons] - s0.d_start[cons]
    assert np.allclose(delay, 100_000.0 * np.arange(1, len(cons) + 1))
    assert (dag.api == ApiKind.STREAM_WAIT).any() and (dag.api == ApiKind.EVENT_RECORD).any()


@pytest.mark.parametrize("workload", ["hft-lob", "af2", "kitti"])
def test_every_applicable_lever_predicts_its_measured_change(workload, model):
    """Predicted vs measured change of each applicable lever, one at a time from the baseline.
    The bound is loose (0.08 absolute): the benchmark reports the real error distribution."""
    wl = SimWorkload(workload)
    m, obs = _obs(wl, wl.base, model)
    base_pred = obs.per_sample_ns(obs.baseline)
    errors = []
    for lv in LEVERS:
        if not lv.sites(wl.base).ok:
            continue
        edit = lv.transform(obs)
        if edit.rows == 0:
            continue
        pred = 1 - obs.per_sample_ns(schedule(edit.dag), edit.sample_factor) / base_pred
        meas = 1 - wl.measure(lv.apply(wl.base), seed=1).mean_ns / m.mean_ns
        errors.append((lv.id, pred, meas))
        assert abs(pred - meas) < 0.08, (lv.id, pred, meas)
    assert len(errors) >= 5


def test_cuda_graphs_transform_collapses_launches(model):
    wl = SimWorkload("hft-lob")
    _, obs = _obs(wl, wl.base, model)
    edit = by_id("cuda_graphs").transform(obs)
    d = edit.dag
    assert (d.api == ApiKind.GRAPH_LAUNCH).sum() > 0
    assert (d.api == ApiKind.GRAPH_NODE).sum() == edit.rows
    assert (d.api == ApiKind.LAUNCH).sum() < (obs.dag.api == ApiKind.LAUNCH).sum()
    assert schedule(d).makespan_ns < obs.baseline.makespan_ns


def test_kineto_wait_links_to_its_exact_record():
    """Kineto's cuda_sync rows name the cudaEventRecord a cudaStreamWaitEvent waits for: the
    replay of the imported trace makes stream 24's next kernel wait for stream 20's work."""

    from engine.trace.kineto.kineto import read_kineto

    path = TRACES / "kineto/a100_event_sync_multistream.json.gz"
    tr = read_kineto(path)
    h = tr.host
    rec = np.flatnonzero(h.correlation == 1385)[0]
    wait = np.flatnonzero(h.correlation == 1389)[0]
    assert h.api[rec] == ApiKind.EVENT_RECORD and (h.stream[rec], h.event[rec]) == (20, 19)
    assert h.api[wait] == ApiKind.STREAM_WAIT and (h.stream[wait], h.event[wait]) == (24, 19)
    dag = build_dag(tr, hw_by_id("a100-80gb"), iterations=1)
    host_of = dag.host_of()
    r_rec = int(np.flatnonzero((dag.api == ApiKind.EVENT_RECORD) & (dag.h_event == 19))[0])
    r_wait = int(np.flatnonzero(dag.api == ApiKind.STREAM_WAIT)[0])
    launched = [(int(host_of[d]), d) for d in range(len(dag.d_stream)) if host_of[d] >= 0]
    prod = max((r, d) for r, d in launched if dag.d_stream[d] == 20 and r < r_rec)[1]
    cons = min((r, d) for r, d in launched if dag.d_stream[d] == 24 and r > r_wait)[1]
    dag.d_dur[prod] += 50e6  # the producer now runs 50 ms longer (past the host gap)
    s1 = schedule(dag)
    assert s1.d_start[cons] >= s1.d_end[prod]  # the consumer waited for it
    unlinked = dag.copy()
    unlinked.h_event[r_wait] = -7  # no such record: the edge is gone
    s2 = schedule(unlinked)
    assert s2.d_start[cons] < s2.d_end[prod]  # …and without the edge it would not have


def _same_schedule(a, b) -> bool:
    fields = ("d_ready", "d_start", "d_end", "h_start", "h_end")
    arrays = all(np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True) for f in fields)
    return arrays and a.makespan_ns == b.makespan_ns


def _held(dag):
    """A copy with every third device row held to start no earlier than a bound (its observed
    start + 0, 5 or 40 µs, as a collective held by its peers is), one removed row among them
    (a bound on a removed row holds nothing), NaN elsewhere."""
    out = dag.copy()
    nb = np.full(len(out.d_stream), np.nan)
    rows = np.arange(0, len(nb), 3)
    nb[rows] = out.d_start_obs[rows] - out.t0_ns + np.array([0.0, 5e3, 40e3])[(rows // 3) % 3]
    out.d_not_before = nb
    if len(rows) > 1:
        out.d_live[rows[1]] = False
        out.d_dur[rows[1]] = 0.0
    return out


@pytest.mark.parametrize("workload", ["hft-lob", "af2", "kitti"])
def test_compiled_replay_equals_the_python_reference(workload, model):
    """schedule (numba, dense ids) == schedule_ref (Python dicts) == schedule interpreted (the
    kernels' Python twins, as a first run replays), bit for bit, on the observed graph and on
    every lever's edited graph (graph launches, side streams, merged rows…), each also with
    rows held by a start bound (``d_not_before``: a collective held by its peers)."""
    from engine.jit import interpreted
    from engine.schedule.reference import schedule_ref

    def same(dag, what):
        for g, how in ((dag, what), (_held(dag), f"{what}, held")):
            compiled = schedule(g)
            with interpreted():
                twin = schedule(g)
            assert _same_schedule(compiled, schedule_ref(g)), how
            assert _same_schedule(compiled, twin), how
        g = _held(dag)
        on = g.d_live & np.isfinite(g.d_not_before)
        assert (schedule(g).d_start[on] >= g.d_not_before[on]).all(), what

    wl = SimWorkload(workload)
    _, obs = _obs(wl, wl.base, model)
    same(obs.dag, "observed")
    assert schedule(_held(obs.dag)).makespan_ns > obs.baseline.makespan_ns  # the bounds bind
    for lever in LEVERS:
        same(lever.transform(obs).dag, lever.id)


def _launch_runs_ref(dag, pred, min_len=2):
    """The loop launch_runs replaced (program adjacency over non-removed host rows)."""
    from engine.schedule.dag import NOP

    runs, cur, cur_stream = [], [], None
    for r in range(len(dag.api)):
        a = int(dag.api[r])
        if a == NOP:
            continue
        ds = dag.h_dev[r]
        ok = a in (ApiKind.LAUNCH, ApiKind.GRAPH_NODE) and len(ds) == 1 and dag.d_live[ds[0]]
        ok = ok and pred(ds[0])
        if ok and (not cur or dag.d_stream[ds[0]] == cur_stream):
            cur.append(ds[0])
            cur_stream = dag.d_stream[ds[0]]
            continue
        if len(cur) >= min_len:
            runs.append(cur)
        cur, cur_stream = ([ds[0]], dag.d_stream[ds[0]]) if ok else ([], None)
    if len(cur) >= min_len:
        runs.append(cur)
    return runs


@pytest.mark.parametrize("workload", ["hft-lob", "af2", "kitti"])
def test_launch_runs_vectorised_equals_the_loop(workload, model):
    from engine.levers.base import launch_runs
    from engine.trace.segments import Kind

    wl = SimWorkload(workload)
    _, obs = _obs(wl, wl.base, model)
    dag = obs.dag.copy()
    dag.remove_host_row(int(np.flatnonzero(dag.api == ApiKind.LAUNCH)[3]))  # a NOP inside
    mask = dag.d_kind == Kind.KERNEL
    for min_len in (2, 3, 16):
        ref = _launch_runs_ref(dag, lambda d: bool(mask[d]), min_len)
        assert launch_runs(dag, mask, min_len) == ref
        assert launch_runs(dag, lambda d: bool(mask[d]), min_len) == ref
