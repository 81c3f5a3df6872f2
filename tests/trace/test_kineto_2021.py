"""Kineto's 2021 schema read as today's (issue 48, item 5). PyTorch's profiler of 2021 wrote its
categories as "Kernel", "Memcpy", "Memset", "Runtime" and "Operator" (every CPU activity, the
ProfilerStep#N ranges among them), device rows on ``"tid": "stream 7"`` and host rows on a
quoted thread id (libkineto's output_json.cpp of that time; engine/trace/kineto/json_scan.py
``CATEGORY_ALIASES`` says which commit ended each spelling).

* The TensorBoard plugin's own sample (kineto/v100_dgxs_32gb_resnet50_kineto2021.json.gz,
  pytorch/kineto tb_plugin/samples, BSD): every count the reader gives equals a recount of the
  file with Python's json — device rows per stream and kind with their nanoseconds, each
  kernel's start, the runtime calls and what they link, the ProfilerSteps, the CPU operators,
  the device — by both readers (the compiled scanner and the first run's Python twin).
* SYNTHETIC: a real trace of today's schema rewritten into the 2021 spellings reads as the same
  trace, and so does the CPU-only one (the 2021 spellings are this file's own, from the Kineto
  source, not the importer's table).
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.analyze.breakdown.cpu_trace import summarize
from engine.trace.kineto import json_twin
from engine.trace.kineto.cpu_events import read_cpu_events
from engine.trace.kineto.kineto import read_kineto
from engine.trace.limits import ReadLimits
from engine.trace.segments import COLUMNS, Kind
from engine.trace.trace import ApiKind
from tests.paths import TRACES

SAMPLE = TRACES / "kineto" / "v100_dgxs_32gb_resnet50_kineto2021.json.gz"
US = 1000
#: today's category → its 2021 spelling (libkineto output_json.cpp before 6f9c0eef, 2021-06-08:
#: "Operator" for every CPU activity, "User" for GPU-side user ranges, "async" for flows)
TO_2021 = {
    "kernel": "Kernel",
    "gpu_memcpy": "Memcpy",
    "gpu_memset": "Memset",
    "cuda_runtime": "Runtime",
    "cpu_op": "Operator",
    "user_annotation": "Operator",
    "gpu_user_annotation": "User",
    "ac2g": "async",
}
_DEVICE_KIND = {"Kernel": Kind.KERNEL, "Memcpy": Kind.MEMCPY, "Memset": Kind.MEMSET}


def _events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rb") as f:
        return json.load(f, parse_float=Decimal)["traceEvents"]


def _ns(v: Any) -> int:
    return int(Decimal(v) * US)


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    return [e for e in _events(SAMPLE) if e.get("ph") == "X"]


@pytest.mark.parametrize("interpreted", [False, True], ids=["compiled", "twin"])
def test_the_2021_sample_reads_as_a_recount_of_the_file(raw, interpreted):
    if interpreted:  # the first run's reader must take this file itself, not decline it
        assert json_twin.read(SAMPLE, ReadLimits.from_env(SAMPLE)) is not None
    tr = read_kineto(SAMPLE, interpreted=interpreted)
    s = tr.segments
    device = [e for e in raw if e.get("cat") in _DEVICE_KIND]
    # the figures the issue quotes, from the file itself (a recount that goes wrong fails here)
    assert sum(e["cat"] == "Kernel" for e in device) == 8772
    # device rows: per (device, stream, kind), their count and nanoseconds
    want: Counter[tuple[int, int, int]] = Counter()
    want_ns: Counter[tuple[int, int, int]] = Counter()
    for e in device:
        k = (e["args"]["device"], e["args"]["stream"], int(_DEVICE_KIND[e["cat"]]))
        want[k] += 1
        want_ns[k] += _ns(e["dur"])
    got: Counter[tuple[int, int, int]] = Counter()
    got_ns: Counter[tuple[int, int, int]] = Counter()
    for d, st, kd, dur in zip(
        s.device.tolist(), s.stream.tolist(), s.kind.tolist(), s.duration_ns.tolist(), strict=True
    ):
        got[(d, st, kd)] += 1
        got_ns[(d, st, kd)] += dur
    assert got == want and got_ns == want_ns
    assert sorted(s.start_ns[s.kind == Kind.KERNEL].tolist()) == sorted(
        _ns(e["ts"]) for e in device if e["cat"] == "Kernel"
    )
    # bytes of the copies and memsets
    for cat, kind in (("Memcpy", Kind.MEMCPY), ("Memset", Kind.MEMSET)):
        assert np.nansum(s.dram_bytes[s.kind == kind]) == sum(
            e["args"]["bytes"] for e in device if e["cat"] == cat
        )
    # runtime calls: one host row each (all carry a correlation id), every device row linked
    runtime = [e for e in raw if e.get("cat") == "Runtime"]
    h = tr.host
    assert len(h.correlation) == len(runtime)
    assert sorted(h.correlation.tolist()) == sorted(e["args"]["correlation"] for e in runtime)
    assert set(s.correlation.tolist()) <= set(h.correlation.tolist())
    names = Counter(e["name"] for e in runtime)
    api = Counter(h.api.tolist())
    assert api[ApiKind.LAUNCH] == names["cudaLaunchKernel"]
    assert api[ApiKind.SYNC] == sum(n for k, n in names.items() if k.endswith("Synchronize"))
    # each call on its thread (the quoted tids read as numbers: two threads, numbered 0.. in
    # order of first call)
    first = list(dict.fromkeys(int(e["tid"]) for e in sorted(runtime, key=lambda e: e["ts"])))
    by_call = {e["args"]["correlation"]: first.index(int(e["tid"])) for e in runtime}
    assert len(first) == 2
    assert h.thread.tolist() == [by_call[c] for c in h.correlation.tolist()]
    # the ProfilerSteps: "Operator" rows of that name
    steps = sorted(
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), int(e["name"].split("#")[1]))
        for e in raw
        if e.get("cat") == "Operator" and e["name"].startswith("ProfilerStep#")
    )
    assert len(steps) == 6
    props = tr.device_properties
    assert [tuple(map(int, x)) for x in props["profiler_steps"]] == [(a, b) for a, b, _ in steps]
    assert props["profiler_step_ids"] == [n for _, _, n in steps]
    assert props["framework_ops"] == sum(e.get("cat") == "Operator" for e in raw)
    # the device, as deviceProperties names it
    with gzip.open(SAMPLE, "rb") as f:
        listed = json.load(f)["deviceProperties"]
    assert {d["id"] for d in listed} >= set(s.device.tolist())
    assert [d["name"] for d in props["devices"]] == [d["name"] for d in listed]
    assert listed[0]["name"] == "Tesla V100-DGXS-32GB"


def test_the_cpu_reader_takes_the_2021_steps_for_steps(raw):
    """The CPU reader (both paths) on the sample: every "Operator" row, the ProfilerSteps as
    steps (not operators), the rest as operators."""
    want_ops = [e for e in raw if e.get("cat") == "Operator"]
    for interpreted in (False, True):
        ev = read_cpu_events(SAMPLE, interpreted=interpreted)
        assert len(ev) == len(want_ops) and ev.device_rows == sum(
            e.get("cat") in _DEVICE_KIND for e in raw
        )
        step = np.array([ev.names[i].startswith("ProfilerStep#") for i in ev.name.tolist()])
        assert int(step.sum()) == 6 and not ev.is_op[step].any() and ev.is_op[~step].all()


# ------------------------------------------------------------------ SYNTHETIC rewrites into 2021
def _to_2021(src: Path, dst: Path) -> Counter[str]:
    """Write ``src`` (today's schema) with the 2021 spellings: categories by TO_2021, each device
    row's tid "stream N", every other tid a quoted decimal as 2021 wrote host threads. Numbers
    keep their text. Returns how many events of each category were renamed. SYNTHETIC."""
    with gzip.open(src, "rb") as f:
        doc = json.load(f, parse_float=lambda t: f"\0num{t}\0")
    renamed: Counter[str] = Counter()
    for e in doc["traceEvents"]:
        cat = e.get("cat")
        if cat not in TO_2021:
            continue
        renamed[cat] += 1
        e["cat"] = TO_2021[cat]
        stream = (e.get("args") or {}).get("stream")
        if cat in ("kernel", "gpu_memcpy", "gpu_memset") and isinstance(stream, int):
            e["tid"] = f"stream {stream}"
        elif isinstance(e.get("tid"), int):
            e["tid"] = str(e["tid"])
    text = re.sub(r'"\\u0000num([^"\\]*)\\u0000"', r"\1", json.dumps(doc))
    with gzip.open(dst, "wt") as f:
        f.write(text)
    return renamed


def _same_columns(got, want) -> None:
    for c in COLUMNS:
        a, b = getattr(got.segments, c), getattr(want.segments, c)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), c
    for f in ("correlation", "stream", "api_start_ns", "api_end_ns", "api", "event", "thread"):
        assert np.array_equal(getattr(got.host, f), getattr(want.host, f)), f
    assert got.names.names() == want.names.names()


def test_todays_trace_in_the_2021_spellings_reads_the_same(tmp_path):
    src = TRACES / "kineto" / "v100_32gb_ns_resolution.json.gz"
    dst = tmp_path / "v100_2021.json.gz"
    renamed = _to_2021(src, dst)
    assert renamed["kernel"] and renamed["gpu_memcpy"] and renamed["gpu_memset"]
    assert renamed["cuda_runtime"] and renamed["cpu_op"] and renamed["user_annotation"]
    want = read_kineto(src)
    for interpreted in (False, True):
        got = read_kineto(dst, interpreted=interpreted)
        _same_columns(got, want)
        a, b = dict(got.device_properties), dict(want.device_properties)
        # every annotation is an "Operator" in 2021: counted with the CPU ops, nothing else moves
        assert a.pop("framework_ops") == b.pop("framework_ops") + renamed["user_annotation"]
        assert a.pop("op_shapes").calls == b.pop("op_shapes").calls + renamed["user_annotation"]
        assert a == b
        assert len(a["profiler_steps"]) == 5


def test_a_cpu_only_trace_in_the_2021_spellings_keeps_its_steps(tmp_path):
    src = TRACES / "cpu" / "cpu_only_train_small.json.gz"
    dst = tmp_path / "cpu_2021.json.gz"
    renamed = _to_2021(src, dst)
    want = read_cpu_events(src)
    for interpreted in (False, True):
        got = read_cpu_events(dst, interpreted=interpreted)
        assert len(got) == len(want) and got.names == want.names
        assert np.array_equal(got.start, want.start) and np.array_equal(got.end, want.end)
        # the steps stay steps; the other annotations (DataLoader, Optimizer ranges) become
        # operators, as a 2021 file cannot tell them from one
        step = np.array([got.names[i].startswith("ProfilerStep#") for i in got.name.tolist()])
        assert np.array_equal(got.is_op, ~step)
        assert int((~want.is_op).sum()) == renamed["user_annotation"]
        s_got, s_want = summarize(got, str(dst)).steps, summarize(want, str(src)).steps
        assert s_got is not None and s_got == s_want and s_got.count == 8
