"""Advice an expert accepts (issue 35): levers the device cannot do say so, the replay with no
lever reproduces the trace before anything is predicted, every predicted gain sits under a
ceiling the trace proves, and what the program already does earns no lever credit.

The real traces are the shipped ones (tests/data/traces, MIT; see its README). The generated
traces of the property test are SYNTHETIC: the simulator's programs (engine/device) and the
generated Kineto ranks (engine/analyze/ranks/synth_ranks.py), built here by code."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.analyze.advice.levers import replay_levers
from engine.analyze.breakdown.fidelity import TOLERANCE
from engine.analyze.breakdown.model import Analysis
from engine.analyze.compute import analyze_trace
from engine.levers.library import LEVERS
from engine.planner.catalogue import by_id
from engine.schedule.dag import build_dag, schedule
from engine.trace.read import read_trace
from engine.trace.trace import ApiKind
from tests.paths import TRACES

REAL = (
    sorted((TRACES / "kineto").glob("*.json.gz"))
    + sorted((TRACES / "kineto" / "job128_two_ranks").glob("*.json.gz"))
    + sorted((TRACES / "nsys").glob("*.sqlite"))
)
#: how close the no-lever replay comes to every shipped real trace: far inside the 3 % a replay
#: must meet to be called faithful (issue 47: at most 0.23 % of the span, on the Nsight
#: CloverLeaf export; the rest within 0.01 %)
REAL_TOLERANCE = 0.005
V100 = TRACES / "kineto" / "v100_16gb_ddp_graphs_3streams.json.gz"
GRAPHS = TRACES / "kineto" / "a100_80gb_5streams_graphs.json.gz"

_cache: dict[Path, Analysis] = {}


def _analysis(path: Path) -> Analysis:
    if path not in _cache:
        tr = read_trace(path)
        _cache[path] = analyze_trace(tr[0] if isinstance(tr, tuple) else tr).analysis
    return _cache[path]


def _replayed(path: Path) -> bool:
    return _analysis(path).replay is not None


# ------------------------------------------------------------------ 1. applicability
def test_a_v100_cannot_do_bf16_or_tf32_and_says_why():
    a = _analysis(V100)
    assert a.hardware.id == "v100-sxm2-16gb"
    by = {e.lever: e for e in a.interventions}
    for lever, lacks in (("bf16_autocast", "BF16"), ("tf32_matmul", "TF32")):
        e = by[lever]
        assert e.status == "not_applicable", e
        assert e.predicted_gain is None and e.gain_low is None and e.gain_high is None
        assert "not applicable on V100 SXM2 16GB (sm_70)" in e.basis
        assert f"lacks {lacks} tensor cores" in e.basis
        assert e.gain_text() == "not applicable"


def test_an_unknown_device_leaves_device_dependent_levers_unjudged():
    """The same trace with its device unnamed: the replay runs on reference rates, and levers
    that need a capability cannot be checked, so they are not judged (no gain, the reason)."""
    tr = read_trace(V100)
    tr = tr[0] if isinstance(tr, tuple) else tr
    tr.device_properties["devices"] = [{"name": "Mystery Accelerator"}]
    a = analyze_trace(tr).analysis
    assert a.hardware.id is None
    bf16 = next(e for e in a.interventions if e.lever == "bf16_autocast")
    assert bf16.status == "not_judged" and bf16.predicted_gain is None
    assert "cannot be checked" in bf16.basis
    # a lever that does not depend on the device is still predicted
    assert any(e.status == "predicted" and e.lever == "cuda_graphs" for e in a.interventions)


def test_an_a100_can_do_bf16():
    a = _analysis(GRAPHS)
    assert all(e.status != "not_applicable" for e in a.interventions)


# ------------------------------------------------------------------ 2. replay fidelity
@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_no_lever_replay_reproduces_every_real_trace(path):
    """Span, every stream's last end, and device idle, replayed with no lever, against the
    observed window: within ``REAL_TOLERANCE`` (0.5 %) on every shipped real trace that has
    host rows to replay — the HF Qwen pair included, whose first 14.5 ms are rows queued before
    the profiler started (tests/schedule/test_queued_rows.py)."""
    a = _analysis(path)
    if not _replayed(path):
        pytest.skip("nothing replayed: no host runtime rows or no timed device rows")
    r = a.replay
    assert r is not None
    assert REAL_TOLERANCE < TOLERANCE
    assert abs(r.span_error) <= REAL_TOLERANCE, r.line()
    assert all(abs(v) <= REAL_TOLERANCE for v in r.stream_end_error.values()), r.stream_end_error
    assert r.faithful
    assert abs(r.device_idle_replayed_ns - r.device_idle_observed_ns) <= REAL_TOLERANCE * max(
        1, r.observed_span_ns
    )
    assert "replayed" in r.line() and "faithful" in r.line()


def test_an_unfaithful_replay_marks_every_prediction():
    """Break the replay on purpose (every device row's observed delays dropped and its launch
    latency inflated), and every prediction says it rests on an unfaithful replay."""
    tr = read_trace(V100)
    tr = tr[0] if isinstance(tr, tuple) else tr
    hw = by_id("v100-sxm2-16gb")
    regimes = np.full(len(tr.segments), 255, np.uint8)
    import engine.analyze.advice.levers as lv_mod

    real_build = lv_mod.build_dag

    def skewed(*args, **kwargs):
        dag = real_build(*args, **kwargs)
        dag.launch_latency_ns *= 200  # 1 ms from call to kernel: the replay drifts late
        return dag

    lv_mod.build_dag = skewed
    try:
        rep = replay_levers(tr, hw, regimes, threads=1)
    finally:
        lv_mod.build_dag = real_build
    assert rep.replay is not None and not rep.replay.faithful
    assert "NOT faithful" in rep.replay.line()
    predicted = [e for e in rep.estimates if e.status == "predicted"]
    assert predicted and all(e.unfaithful_replay for e in predicted)


def test_syncs_replay_as_observed():
    """On the V100 trace the 61 synchronising calls take 0.8 ms in all; replayed they must not
    wait out collectives they never waited for (the old replay made each wait 50 ms), so
    removing them can gain little: under its ceiling, which is their observed time."""
    a = _analysis(V100)
    sync = next(e for e in a.interventions if e.lever == "sync_removal")
    assert sync.ceiling is not None and sync.ceiling < 0.002
    assert (sync.predicted_gain or 0.0) <= sync.ceiling + 1e-9


# ------------------------------------------------------------------ 3. ceilings
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_every_printed_gain_sits_under_its_ceiling(path):
    a = _analysis(path)
    for e in a.interventions:
        if e.status != "predicted":
            continue
        assert e.ceiling is not None and e.ceiling_basis.startswith("ceiling "), e
        assert (e.predicted_gain or 0.0) <= e.ceiling + 1e-6, e
        assert (e.gain_high or 0.0) <= e.ceiling + 1e-6, e
        # no slowdown in an interval unless the lever can slow a program, and says how
        lever = next(lv for lv in LEVERS if lv.id == e.lever)
        if (e.gain_low or 0.0) < 0:
            assert lever.can_slow and "can slow a program" in e.basis, e


def _generated() -> list[tuple[str, object]]:
    """SYNTHETIC traces: the simulator's three workloads (two configurations each) and
    generated Kineto ranks of several shapes."""
    import tempfile

    from engine.analyze.ranks.synth_ranks import write_ranks
    from engine.device.simulator import simulate
    from engine.trace.kineto.kineto import read_kineto
    from engine.trace.trace import Trace

    out: list[tuple[str, object]] = []
    for wl in ("hft-lob", "af2", "kitti"):
        batch, names = simulate(wl, 3)
        out.append((wl, Trace(segments=batch.segments, names=names, host=batch.host)))
    with tempfile.TemporaryDirectory() as d:
        for steps in (2, 4):
            (path,) = write_ranks(Path(d), ranks=1, steps=steps)
            out.append((f"synth-{steps}", read_kineto(path)))
    return out


@pytest.mark.parametrize("name,trace", _generated(), ids=lambda x: x if isinstance(x, str) else "")
def test_property_no_replay_exceeds_its_ceiling(name, trace):
    """Property: on generated traces, for every lever, the replay's own prediction (before any
    cap) never exceeds the ceiling counted from the observed trace alone — the ceiling is a
    bound of the lever, not a guess. (``capped`` records a replay that went above it.)"""
    hw = by_id("h100-sxm")
    regimes = np.full(len(trace.segments), 255, np.uint8)
    rep = replay_levers(trace, hw, regimes, threads=1)
    predicted = [e for e in rep.estimates if e.status == "predicted"]
    assert predicted, "a generated trace with no lever to predict tests nothing"
    for e in predicted:
        assert not e.capped, e
        assert e.ceiling is not None and (e.predicted_gain or 0.0) <= e.ceiling + 1e-6, e


# ------------------------------------------------------------------ 4. already in use
def test_kernels_already_in_graphs_are_seen_and_not_credited():
    a = _analysis(GRAPHS)
    graphs = next(u for u in a.in_use if u.what == "cuda_graphs")
    assert 0 < graphs.share < 1
    assert "cudaGraphLaunch" in graphs.evidence and "cuda_graphs" in graphs.levers
    e = next(e for e in a.interventions if e.lever == "cuda_graphs")
    assert "cudaGraphLaunch calls already in the trace: their kernels are not counted" in e.basis
    # the transform captures no kernel a graph launch already launched
    tr = read_trace(GRAPHS)
    tr = tr[0] if isinstance(tr, tuple) else tr
    hw = by_id("a100-80gb")
    from engine.levers.launch import CudaGraphs
    from engine.levers.model import Observation

    dag = build_dag(tr, hw, 1)
    edit, _ = CudaGraphs().transform_launch_api(Observation(dag, schedule(dag), [], hw))
    was_graph = dag.api == ApiKind.GRAPH_LAUNCH
    assert (edit.dag.api[was_graph] == ApiKind.GRAPH_LAUNCH).all()
    assert edit.rows > 0


def test_already_fused_and_reduced_precision_are_reported():
    a = _analysis(GRAPHS)
    what = {u.what: u for u in a.in_use}
    assert "fused_kernels" in what and "Triton" in what["fused_kernels"].evidence
    assert "reduced_precision" in what and what["reduced_precision"].share > 0.5


def _random_trace(seed: int):
    """A SYNTHETIC trace drawn at random (seeded): two host threads launching kernels of
    several classes onto three streams, async and blocking copies, stream syncs, device syncs
    and cross-stream event waits; each row timed as a device runs it (a kernel starts after its
    launch, its stream's previous row and any event it waits for, plus a small random gap)."""
    from engine.trace.segments import Kind, Klass, NameTable, Segments
    from engine.trace.trace import HostEvents, Trace

    rng = np.random.default_rng(seed)
    names = NameTable()
    kinds = [
        ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
         Klass.ELEMENTWISE),
        ("ampere_sgemm_128x64_nn", Klass.GEMM),
        ("void at::native::layer_norm_kernel<float>", Klass.NORM),
        ("void at::native::reduce_kernel<512, 1>", Klass.REDUCTION),
    ]  # fmt: skip
    ids = [(names.intern(n), k) for n, k in kinds]
    copy_id = names.intern("Memcpy HtoD (Pinned -> Device)")
    clock = [0.0, 0.0]
    free = {7: 0.0, 8: 0.0, 9: 0.0}
    last_end = {7: 0.0, 8: 0.0, 9: 0.0}
    h: dict[str, list] = {k: [] for k in ("corr", "stream", "s", "e", "api", "event", "thread")}
    d: dict[str, list] = {k: [] for k in ("s", "e", "stream", "kind", "klass", "name", "corr")}
    corr = 0
    events: dict[int, float] = {}
    pending: dict[int, float] = {}

    def host(api, s, e, c=0, stream=-1, event=-1, th=0):
        for k, v in zip(h, (c, stream, s, e, api, event, th), strict=True):
            h[k].append(v)

    def device(s_, e_, stream, kind, klass, name, c):
        for k, v in zip(d, (s_, e_, stream, kind, klass, name, c), strict=True):
            d[k].append(v)

    nxt = [float(rng.exponential(4_000)), float(rng.exponential(4_000))]
    for _ in range(int(rng.integers(150, 400))):
        th = int(np.argmin(nxt))  # calls in time order: a stream queues them as they come
        t = nxt[th]
        op = rng.choice(["launch"] * 8 + ["copy", "sync", "devsync", "record", "wait"])
        stream = int(rng.choice([7, 7, 7, 8, 9]))
        if op in ("launch", "copy"):
            corr += 1
            call = float(rng.uniform(2_000, 9_000)) * (40 if rng.random() < 0.02 else 1)
            dur = float(rng.exponential(15_000)) + 1_500
            start = max(t + 3_000, free[stream], pending.pop(stream, 0.0)) + float(
                rng.exponential(1_500)
            )
            free[stream] = start + dur
            if op == "launch":
                nm, kl = ids[int(rng.integers(0, len(ids)))]
                device(start, start + dur, stream, Kind.KERNEL, kl, nm, corr)
                host(ApiKind.LAUNCH, t, t + call, corr, th=th)
            else:
                blocking = rng.random() < 0.3
                device(start, start + dur, stream, Kind.MEMCPY, Klass.COPY, copy_id, corr)
                end = max(t + call, start + dur) if blocking else t + call
                host(ApiKind.MEMCPY_SYNC if blocking else ApiKind.MEMCPY_ASYNC, t, end, corr,
                     th=th)  # fmt: skip
                call = end - t
            clock[th] = t + call
            nxt[th] = clock[th] + float(rng.exponential(4_000))
        elif op in ("sync", "devsync"):
            until = free[stream] if op == "sync" else max(free.values())
            end = max(t + 1_000, until + 500)
            host(ApiKind.SYNC, t, end, stream=stream if op == "sync" else -1, th=th)
            clock[th] = end
            nxt[th] = clock[th] + float(rng.exponential(4_000))
        elif op == "record":
            ev = len(events)
            events[ev] = free[stream]
            host(ApiKind.EVENT_RECORD, t, t + 1_000, stream=stream, event=ev, th=th)
            clock[th] = t + 1_000
            nxt[th] = clock[th] + float(rng.exponential(4_000))
        elif events:
            ev = int(rng.integers(0, len(events)))
            pending[stream] = max(pending.get(stream, 0.0), events[ev])
            host(ApiKind.STREAM_WAIT, t, t + 1_000, stream=stream, event=ev, th=th)
            clock[th] = t + 1_000
            nxt[th] = clock[th] + float(rng.exponential(4_000))
        else:
            nxt[th] = clock[th] + float(rng.exponential(4_000))
    del last_end
    order = np.argsort(np.array(d["s"]), kind="stable")
    seg = Segments.from_columns(
        start_ns=np.array(d["s"], np.int64)[order],
        end_ns=np.array(d["e"], np.int64)[order],
        stream=np.array(d["stream"], np.int32)[order],
        kind=np.array(d["kind"], np.uint8)[order],
        klass=np.array(d["klass"], np.uint8)[order],
        name=np.array(d["name"], np.int32)[order],
        correlation=np.array(d["corr"], np.int64)[order],
    )
    hs = HostEvents(
        correlation=np.array(h["corr"], np.int64),
        stream=np.array(h["stream"], np.int32),
        api_start_ns=np.array(h["s"], np.int64),
        api_end_ns=np.array(h["e"], np.int64),
        api=np.array(h["api"], np.uint8),
        event=np.array(h["event"], np.int64),
        thread=np.array(h["thread"], np.int32),
    )
    props = {"format": "kineto", "devices": [{"name": "NVIDIA A100-SXM4-80GB"}]}
    return Trace(segments=seg, names=names, host=hs, device_properties=props, source="synthetic")


@pytest.mark.parametrize("seed", range(16))
def test_property_random_traces_replay_faithfully_and_under_ceilings(seed):
    """Property over SYNTHETIC random traces (seeded): the no-lever replay reproduces each one,
    and no lever's replay exceeds its ceiling."""
    trace = _random_trace(seed)
    hw = by_id("a100-80gb")
    rep = replay_levers(trace, hw, np.full(len(trace.segments), 255, np.uint8), threads=1)
    assert rep.replay is not None and rep.replay.faithful, rep.replay
    predicted = [e for e in rep.estimates if e.status == "predicted"]
    assert len(predicted) >= 5  # graphs, fusion, precision, syncs, copies: each has targets
    for e in predicted:
        if e.status == "predicted":
            assert not e.capped, e
            assert e.ceiling is not None and (e.predicted_gain or 0.0) <= e.ceiling + 1e-6, e
