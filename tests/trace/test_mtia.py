"""An MTIA (Meta's accelerator) Kineto trace is analysed for what it can say: each stream's busy
and idle time, its device as the trace names it, and nothing that would need a GPU's peaks,
kernel classes or CUDA semantics (regimes unknown, roofline not computed, no levers)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.analyze.compute import analyze_trace
from engine.trace.errors import TraceImportError
from engine.trace.kineto.kineto import read_kineto
from engine.trace.segments import Kind
from engine.trace.trace import ApiKind
from tests.paths import TRACES

MTIA = TRACES / "kineto" / "mtia_inference.json.gz"


@pytest.fixture(scope="module")
def result():
    return analyze_trace(read_kineto(MTIA))


def test_the_device_is_what_the_trace_says_and_no_peaks_are_assumed(result):
    a = result.analysis
    assert a.hardware.id is None  # no catalogue entry, none made up
    assert a.hardware.name == "MTIA ARTEMIS"  # deviceProperties[0].name
    assert a.hardware.reported_name == "ARTEMIS"
    assert any("MTIA ARTEMIS" in n and "not applicable" in n for n in a.notes)
    # the catalogue's "pass --hardware" advice is not given for a device it cannot hold
    assert not any("--hardware" in n for n in a.notes)


def test_busy_time_per_stream_is_its_work_and_copies_not_its_waits(result):
    trace = result.trace
    s = trace.segments
    busy = np.isin(s.kind, [Kind.KERNEL, Kind.MEMCPY])
    assert (s.kind[~busy] == Kind.SYNC).all()  # event record / wait rows
    streams = {st.stream: st for st in result.analysis.streams}
    assert set(streams) == set(np.unique(s.stream).tolist())
    for stream, st in streams.items():
        on = s.stream == stream
        assert sum(st.regime_time_ns.values()) == int(s.duration_ns[on & busy].sum())
        assert st.kernels == int((on & (s.kind == Kind.KERNEL)).sum())
        # the idle split covers the gaps between the stream's busy rows exactly
        i = st.idle
        assert i.host_wait_ns + i.kernel_wait_ns + i.other_ns == i.total_ns
        start, end = s.start_ns[on & busy], s.end_ns[on & busy]
        assert i.total_ns == int(end.max() - start.min()) - int((end - start).sum())
    # the runtime calls link rows to their launches (host wait), and nothing more
    assert len(trace.host) and (trace.host.api == ApiKind.OTHER).all()
    assert (trace.host.rows_of(s.correlation) >= 0).sum() > 0
    assert sum(st.idle.host_wait_ns for st in result.analysis.streams) > 0


def test_regimes_roofline_and_levers_are_unknown_or_not_applicable(result):
    a = result.analysis
    assert a.interventions == []  # no lever replayed: each is a CUDA / ROCm change
    kernels = result.rows.kind == Kind.KERNEL
    assert kernels.any()
    assert a.time_by_regime_ns["UNKNOWN"] == int(result.rows.duration_ns[kernels].sum())
    for k in a.top_kernels:
        assert k.roofline_bound_ns is None and k.achieved_fraction is None


def test_a_gpu_from_the_catalogue_is_refused_for_an_mtia_trace():
    with pytest.raises(TraceImportError, match=r"MTIA trace.*NVIDIA and AMD"):
        analyze_trace(read_kineto(MTIA), hardware="h100-sxm")


def test_mtia_rows_without_a_stream_are_not_device_work(tmp_path):
    ev = [
        {"ph": "X", "cat": "mtia_ccp_events", "name": "pe_exe", "pid": 17, "tid": 3,
         "ts": 10.5, "dur": 4.25, "args": {"column": "0"}},
        {"ph": "X", "cat": "mtia_ccp_events", "name": "event_wait", "pid": 17, "tid": 3,
         "ts": 20.0, "dur": 1.0, "args": {"stream": 7}},
    ]  # fmt: skip
    p = tmp_path / "mtia.json"
    p.write_text(json.dumps({"deviceProperties": [{"id": 17, "name": "X"}], "traceEvents": ev}))
    with pytest.raises(TraceImportError, match=r"MTIA activity \(2 mtia_ccp_events\).*1 name no"):
        read_kineto(p)
    with pytest.raises(TraceImportError, match="MTIA activity"):
        read_kineto(p, interpreted=True)
