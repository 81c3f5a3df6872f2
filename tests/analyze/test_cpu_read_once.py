"""A CPU-only torch.profiler trace is read once (issue 38): it was read by the GPU reader, found
to hold no GPU row, then read again for its CPU events. A trace whose metadata says it was
recorded without a device (``"deviceProperties": []``) is now read for its CPU events first,
and goes to the GPU reader only when a device row turns up after all."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from engine.analyze import run as analyze_run
from engine.analyze.breakdown import cpu_trace
from engine.analyze.breakdown.cpu_trace import cpu_profile
from engine.analyze.options import AnalyzeOptions
from engine.analyze.run import analyze_file
from tests.paths import TRACES

CPU = TRACES / "cpu" / "cpu_only_train_small.json.gz"
GPU = TRACES / "kineto" / "a100_alexnet_2streams.json.gz"
ONE = AnalyzeOptions(workers=1, first_run=False)


@pytest.fixture
def reads(monkeypatch):
    """Count the file's reads: by the CPU reader, and by the GPU reader (read_and_analyse)."""
    seen = {"cpu": 0, "gpu": 0}
    cpu_read, gpu_read = cpu_trace.read_cpu_events, analyze_run.read_and_analyse

    def cpu(*a, **k):
        seen["cpu"] += 1
        return cpu_read(*a, **k)

    def gpu(*a, **k):
        seen["gpu"] += 1
        return gpu_read(*a, **k)

    monkeypatch.setattr(cpu_trace, "read_cpu_events", cpu)
    monkeypatch.setattr(analyze_run, "read_and_analyse", gpu)
    return seen


def _trace(path: Path, meta: dict, events: list[dict]) -> Path:
    """A SYNTHETIC Kineto trace: ``meta`` before its traceEvents."""
    path.write_text(json.dumps({**meta, "traceEvents": events}))
    return path


def test_a_cpu_only_profile_says_so_in_its_metadata():
    assert cpu_profile(CPU)  # torch.profiler without CUDA: "deviceProperties": []
    assert not cpu_profile(GPU)  # the A100's properties listed


def test_what_is_not_a_cpu_profile_is_left_to_the_readers(tmp_path):
    after = tmp_path / "after.json"  # said after the events: not looked for
    after.write_text('{"traceEvents": [], "deviceProperties": []}')
    inside = tmp_path / "inside.json"  # said in a string, not as the key
    inside.write_text('{"note": "\\"deviceProperties\\": [] x", "traceEvents": []}')
    bad_gzip = tmp_path / "bad.json.gz"
    bad_gzip.write_bytes(b"\x1f\x8b" + b"\x00" * 64)
    for p in (after, inside, bad_gzip, tmp_path / "missing.json", tmp_path):
        assert not cpu_profile(p), p
    zipped = tmp_path / "cpu.json.gz"
    zipped.write_bytes(gzip.compress(b'{"deviceProperties": [ ], "traceEvents": []}'))
    assert cpu_profile(zipped)


def test_a_cpu_only_profile_is_read_once(reads):
    out = analyze_file(str(CPU), ONE)
    assert out.cpu is not None and out.error is None and out.analysis is None
    assert out.cpu.steps is not None and out.cpu.steps.count > 0
    assert reads == {"cpu": 1, "gpu": 0}


def test_a_trace_that_says_no_device_but_holds_a_kernel_goes_to_the_gpu_reader(tmp_path, reads):
    kernel = {
        "ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
        "args": {"device": 0, "stream": 7, "correlation": 1},
    }  # fmt: skip
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 20}
    p = _trace(tmp_path / "odd.json", {"deviceProperties": []}, [op, kernel])
    out = analyze_file(str(p), ONE)
    assert out.cpu is None  # not summarised as CPU-only: the GPU reader had it
    assert reads == {"cpu": 1, "gpu": 1}
