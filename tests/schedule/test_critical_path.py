"""The critical path (engine.schedule.critical): every nanosecond of the replayed span given to
one part, on real traces and on SYNTHETIC ones written here with a known answer."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from engine.analyze.compute import analyze_trace
from engine.planner.catalogue import by_id
from engine.schedule.critical import PARTS, critical_path
from engine.schedule.dag import build_dag, merge_idle_host_rows, schedule
from engine.trace.read import read_trace
from engine.trace.segments import Kind
from tests.paths import TRACES

_KINETO = [*(TRACES / "kineto").glob("*.json.gz"), *(TRACES / "kineto").glob("*/*.json.gz")]
REAL = [
    *sorted(p for p in _KINETO if "mtia" not in p.name),  # (MTIA: no CUDA/ROCm rows)
    TRACES / "nsys" / "a100_cloverleaf.sqlite",
]


def _path_of(path: Path):
    tr = read_trace(path)
    timed = np.isin(tr.segments.kind, [Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM])
    if not len(tr.host) or not timed.any():  # (CUPTI-profiler ranges only: no path)
        pytest.skip("no host rows or no timed device rows: the analysis replays nothing")
    regimes = np.full(len(tr.segments), 255, np.uint8)
    dag = merge_idle_host_rows(build_dag(tr, by_id("a100-80gb"), iterations=1, regimes=regimes))
    sched = schedule(dag)
    return dag, sched, critical_path(dag, sched)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_the_path_covers_the_replayed_span_exactly_on_real_traces(path):
    """The intervals tile [0, makespan): no gap, no overlap, the parts add up to the span."""
    _, sched, cp = _path_of(path)
    assert not cp.cut_short
    assert cp.start[0] == pytest.approx(0.0, abs=1.0)
    assert np.all(np.abs(cp.start[1:] - cp.end[:-1]) <= 1.0)
    assert np.all(cp.end >= cp.start)
    assert sum(cp.by_part().values()) == pytest.approx(sched.makespan_ns, rel=1e-9, abs=2.0)


# ------------------------------------------------------------ SYNTHETIC Kineto traces
T0 = 1_700_000_000_000  # µs


def _kineto(tmp: Path, events: list[dict], name: str = "synthetic.json.gz") -> Path:
    """A SYNTHETIC Kineto trace (written by this test, never recorded) of ``events``."""
    doc = {
        "schemaVersion": 1,
        "synthetic": True,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85e9,
                              "computeMajor": 8, "computeMinor": 0, "numSms": 108}],
        "traceEvents": events,
    }  # fmt: skip
    p = tmp / name
    with gzip.open(p, "wt") as f:
        json.dump(doc, f)
    return p


class _Host:
    """Writes launches and their kernels: one host thread, times in µs from T0."""

    def __init__(self) -> None:
        self.ev: list[dict] = []
        self.corr = 1
        self.t = 0.0

    def launch(self, gap: float, name: str, kdur: float, stream: int = 7, delay: float = 5.0,
               api: float = 4.0, at: float | None = None) -> None:  # fmt: skip
        self.t += gap
        c = self.corr
        self.corr += 1
        self.ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": T0 + self.t,
                "dur": api,
                "args": {"correlation": c},
            }
        )
        start = T0 + (at if at is not None else self.t + delay)
        self.ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream,
                        "ts": start, "dur": kdur, "args": {"stream": stream, "correlation": c,
                        "device": 0, "grid": [108, 1, 1], "block": [256, 1, 1]}})  # fmt: skip
        self.t += api
        self.last_end = start - T0 + kdur

    def sync(self, gap: float, until: float) -> None:
        self.t += gap
        c = self.corr
        self.corr += 1
        self.ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize",
                        "pid": 1, "tid": 1, "ts": T0 + self.t, "dur": until - self.t + 2,
                        "args": {"correlation": c}})  # fmt: skip
        self.t = until + 2


def _shares(path: Path) -> dict[str, float]:
    _, sched, cp = _path_of(path)
    return {k: v / sched.makespan_ns for k, v in cp.by_part().items()}


def test_a_host_bound_trace_is_bound_by_the_host(tmp_path):
    h = _Host()
    for i in range(40):  # 200 µs of host time before each 5 µs kernel
        h.launch(200.0, f"at::native::vectorized_elementwise_kernel<{i % 3}>", 5.0)
    s = _shares(_kineto(tmp_path, h.ev))
    assert s["host"] > 0.9
    assert s["kernel"] < 0.05


def test_a_device_bound_trace_is_bound_by_its_kernels(tmp_path):
    h = _Host()
    for _ in range(40):  # launches 5 µs apart, kernels of 300 µs: the stream is never idle
        h.launch(1.0, "ampere_sgemm_128x64_nn", 300.0, at=10.0 + 300.0 * _)
    s = _shares(_kineto(tmp_path, h.ev))
    assert s["kernel"] > 0.95


def test_a_sync_puts_the_kernel_it_waits_for_on_the_path(tmp_path):
    """The host blocks on a 2 ms kernel and then runs 1 ms of host work: the kernel is on the
    path (the time blocked is the kernel's, not the sync's)."""
    h = _Host()
    h.launch(10.0, "ampere_sgemm_128x64_nn", 2000.0)
    h.sync(2.0, h.last_end)
    h.launch(1000.0, "at::native::vectorized_elementwise_kernel<4>", 5.0)
    _, _, cp = _path_of(_kineto(tmp_path, h.ev))
    parts = cp.by_part()
    assert parts["kernel"] == pytest.approx(2005_000, rel=0.01)
    assert parts["host"] == pytest.approx(1_012_000, rel=0.02)
    assert parts["sync"] < 10_000


def test_a_collective_held_back_is_exposed_communication(tmp_path):
    """A collective that starts 800 µs after its launch on a free stream (its peers late): the
    wait before it is on the path as communication held back, and the analysis says so first."""
    h = _Host()
    h.launch(10.0, "ampere_sgemm_128x64_nn", 100.0)
    h.launch(1.0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
             50.0, stream=21, at=h.t + 1.0 + 800.0)  # fmt: skip
    res = analyze_trace(read_trace(_kineto(tmp_path, h.ev)))
    cp = res.analysis.critical_path
    assert cp is not None
    parts = {p.part: p.ns for p in cp.parts}
    assert parts["comm_wait"] == pytest.approx(800_000, rel=0.02)
    assert cp.headline.startswith("bound by exposed communication")
    assert cp.opportunities[0].what == "exposed_communication"
    assert cp.opportunities[0].levers == []  # no lever of the library does it: named anyway
    assert "peers unknown" in cp.peers


def test_allocation_every_step_is_named_with_the_pool_off(tmp_path):
    """SYNTHETIC: a PyTorch program that calls cudaMalloc/cudaFree 60 times per step (the
    caching allocator off): allocation is named first, with the pool's advice."""
    h = _Host()
    steps = []
    for s in range(3):
        a = h.t
        for _ in range(30):
            for call in ("cudaMalloc", "cudaFree"):
                h.ev.append(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": call,
                        "pid": 1,
                        "tid": 1,
                        "ts": T0 + h.t + 1,
                        "dur": 150.0,
                        "args": {"correlation": h.corr},
                    }
                )
                h.corr += 1  # fmt: skip
                h.t += 152.0
            h.launch(2.0, "at::native::vectorized_elementwise_kernel<4>", 20.0)
        steps.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1,
                      "tid": 1, "ts": T0 + a, "dur": h.t - a})  # fmt: skip
    res = analyze_trace(read_trace(_kineto(tmp_path, h.ev + steps)))
    cp = res.analysis.critical_path
    assert cp is not None
    assert cp.headline.startswith("bound by allocation")
    top = cp.opportunities[0]
    assert top.what == "allocation"
    assert "caching allocator is off" in top.suggestion
    assert len(cp.steps) == 3
    # and the lever that tunes that pool proposes nothing: it is not applicable, and says why
    es = next(e for e in res.analysis.interventions if e.lever == "expandable_segments")
    assert es.status == "not_applicable" and es.predicted_gain is None
    assert "caching allocator looks off" in es.basis


def test_every_part_has_a_label_and_an_hta_category():
    from engine.schedule.critical import HTA_BOUND_BY

    assert set(PARTS) == set(HTA_BOUND_BY)


def test_the_host_part_is_told_by_operator_on_a_real_trace():
    """The A100 training trace records its CPU operators: the path's host part is split among
    them and the time outside any, adding up to the host part (each row rounded to the ns)."""
    a = analyze_trace(read_trace(TRACES / "kineto" / "a100_training_3streams.json.gz")).analysis
    cp = a.critical_path
    assert cp is not None and cp.host_ops
    host = next(p.ns for p in cp.parts if p.part == "host")
    assert abs(sum(r.ns for r in cp.host_ops) - host) <= len(cp.host_ops)
    assert any(r.name.startswith("autograd::engine::evaluate_function") for r in cp.host_ops)
    assert cp.host_waits and cp.host_waits[0].name == "## forward ##"
