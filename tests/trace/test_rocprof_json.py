"""The rocprofv3 JSON importer (engine.trace.rocprof.rocprof_json).

On the real sample (tests/data/traces/rocprof/tracelens_mi350x: AMD's TraceLens test data, a
training run on an 8x MI350X node) every count is checked against a recount of the raw JSON
made here with the json module alone. Copies, HIP calls, RCCL calls, counters and several
processes are not in that sample, so they are tested on documents built here (SYNTHETIC,
labelled so) in the layout of rocprofiler-sdk's JSON writer. The CSV and JSON of one run give
the same rows and the same analysis: no such pair is published (rocprofiler-sdk's tests write
theirs at test time), so the CSV side is written here from the JSON, in the columns of
rocprofv3's own CSV files (tests/data/traces/rocprof/sdk_streams: ROCm 6.4's header) — DERIVED
from the real file, not a rocprofv3 output.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.trace.errors import TraceImportError
from engine.trace.rocprof.rocprof_csv import read_rocprof_csv
from engine.trace.rocprof.rocprof_json import _depth, looks_like_rocprof_json, read_rocprof_json
from engine.trace.segments import Kind, Provenance
from engine.trace.trace import ApiKind
from tests.paths import TRACES

SAMPLE = TRACES / "rocprof" / "tracelens_mi350x" / "908_results.json.gz"


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    with gzip.open(SAMPLE, "rb") as f:
        proc: dict[str, Any] = json.load(f)["rocprofiler-sdk-tool"][0]
    return proc


@pytest.fixture(scope="module")
def sample():
    return read_rocprof_json(SAMPLE)


# --- the sniff ----------------------------------------------------------------------------


def test_sniff_claims_rocprofv3_json_plain_gzipped_and_indented():
    head = SAMPLE.read_bytes()[:4096]
    assert looks_like_rocprof_json(head)  # the raw gzip bytes
    assert looks_like_rocprof_json(gzip.decompress(SAMPLE.read_bytes())[:64])
    assert looks_like_rocprof_json(b'\xef\xbb\xbf{\n    "rocprofiler-sdk-tool": [\n')
    for other in (
        b'{"traceEvents": [',
        b'{"schemaVersion": 1, "rocprofiler-sdk-tool": []}',  # not its first key
        b'"Kind","Agent_Id","Queue_Id"',
        b"SQLite format 3\x00",
        b"",
        b"\x1f\x8b\x08garbage",
    ):
        assert not looks_like_rocprof_json(other), other


# --- the real sample, against a raw recount -----------------------------------------------


def test_real_sample_counts_equal_a_raw_recount(raw, sample):
    disp = raw["buffer_records"]["kernel_dispatch"]
    seg = sample.segments
    assert len(disp) == 43_915 == len(seg)
    assert (seg.kind == Kind.KERNEL).all()
    assert not raw["buffer_records"]["memory_copy"] and not raw["buffer_records"]["hip_api"]
    assert len(sample.host) == 0
    # total and per-stream kernel time, in ns
    total = sum(r["end_timestamp"] - r["start_timestamp"] for r in disp)
    assert int((seg.end_ns - seg.start_ns).sum()) == total == 4_441_741_378
    per_stream = Counter(r["stream_id"]["handle"] for r in disp)
    assert dict(Counter(seg.stream.tolist())) == dict(per_stream)
    assert len(per_stream) == 567 and per_stream[567] == 37_300
    ns_stream: Counter[int] = Counter()
    for r in disp:
        ns_stream[r["stream_id"]["handle"]] += r["end_timestamp"] - r["start_timestamp"]
    for s, ns in ns_stream.items():
        assert int((seg.end_ns - seg.start_ns)[seg.stream == s].sum()) == ns
    # per agent: every dispatch is on the first GPU (node 2), device 0
    node = {a["id"]["handle"]: a["node_id"] for a in raw["agents"]}
    assert Counter(node[r["dispatch_info"]["agent_id"]["handle"]] for r in disp) == {2: 43_915}
    assert set(seg.device.tolist()) == {0}
    # names: each dispatch's kernel symbol's formatted name, as the CSV writer names kernels
    sym = {k["kernel_id"]: k["formatted_kernel_name"] for k in raw["kernel_symbols"]}
    want = Counter(sym[r["dispatch_info"]["kernel_id"]] for r in disp)
    assert Counter(sample.names[i] for i in seg.name.tolist()) == want
    assert want["ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"] == 1310
    # times, correlation and geometry, row by row (the rows are in start order)
    order = sorted(range(len(disp)), key=lambda i: disp[i]["start_timestamp"])
    starts = [disp[i]["start_timestamp"] for i in order]
    assert seg.start_ns.tolist() == starts
    corr = {r["correlation_id"]["internal"] for r in disp}
    assert set(seg.correlation.tolist()) == corr
    r0 = disp[order[0]]["dispatch_info"]
    groups = math.prod(
        -(-r0["grid_size"][d] // r0["workgroup_size"][d]) for d in "xyz"
    )  # work-items → workgroups
    assert seg.grid[0] == groups and seg.block[0] == math.prod(r0["workgroup_size"].values())
    assert (seg.provenance[seg.grid > 0] & Provenance.GEOMETRY).all()


def test_real_sample_devices_are_the_gpu_agents(raw, sample):
    props = sample.device_properties
    gpus = [a for a in raw["agents"] if a["type"] == 2]
    assert len(gpus) == 8 and len(raw["agents"]) == 10
    assert props["format"] == "rocprofv3-json"
    assert [d["agent_id"] for d in props["devices"]] == [a["node_id"] for a in gpus]
    assert [d["id"] for d in props["devices"]] == list(range(8))
    assert {d["name"] for d in props["devices"]} == {"AMD Instinct MI350X"}
    assert {(d["gfx"], d["numSms"]) for d in props["devices"]} == {("gfx950", 256)}
    assert props["processes"] == 1 and props["pids"] == [908]
    assert props["malformed_events"] == 0 and props["unnamed_kernels"] == 0


# --- the CSV of the same run gives the same rows and the same analysis -------------------

_KERNEL_COLS = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id",
                "Kernel_Id", "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp",
                "Private_Segment_Size", "Group_Segment_Size", "Workgroup_Size_X",
                "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y",
                "Grid_Size_Z"]  # fmt: skip
_COPY_COLS = ["Kind", "Direction", "Stream_Id", "Source_Agent_Id", "Destination_Agent_Id",
              "Correlation_Id", "Start_Timestamp", "End_Timestamp"]  # fmt: skip
_AGENT_COLS = ["Node_Id", "Logical_Node_Id", "Agent_Type", "Cpu_Cores_Count", "Simd_Count",
               "Cu_Count", "Name", "Product_Name"]  # fmt: skip
_HIP_COLS = ["Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id",
             "Start_Timestamp", "End_Timestamp"]  # fmt: skip


def _csv(path: Path, cols: list[str], rows: list[list[Any]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        w.writerow(cols)
        w.writerows(rows)


def csv_twin(proc: dict[str, Any], out: Path) -> Path:
    """DERIVED: the CSV files rocprofv3 writes for a run, made from its JSON (one process)."""
    out.mkdir(parents=True, exist_ok=True)
    node = {a["id"]["handle"]: a["node_id"] for a in proc["agents"]}
    sym = {k["kernel_id"]: k["formatted_kernel_name"] for k in proc["kernel_symbols"]}
    ops = proc["strings"]["buffer_records"]
    rows = []
    for r in proc["buffer_records"]["kernel_dispatch"]:
        d = r["dispatch_info"]
        rows.append(["KERNEL_DISPATCH", node[d["agent_id"]["handle"]], d["queue_id"]["handle"],
                     r["stream_id"]["handle"], r["thread_id"], d["dispatch_id"], d["kernel_id"],
                     sym[d["kernel_id"]], r["correlation_id"]["internal"], r["start_timestamp"],
                     r["end_timestamp"], d["private_segment_size"], d["group_segment_size"],
                     *(d["workgroup_size"][k] for k in "xyz"),
                     *(d["grid_size"][k] for k in "xyz")])  # fmt: skip
    _csv(out / "kernel_trace.csv", _KERNEL_COLS, rows)
    rows = [
        ["MEMORY_COPY", ops[r["kind"]]["operations"][r["operation"]], r["stream_id"]["handle"],
         node[r["src_agent_id"]["handle"]], node[r["dst_agent_id"]["handle"]],
         r["correlation_id"]["internal"], r["start_timestamp"], r["end_timestamp"]]
        for r in proc["buffer_records"].get("memory_copy", [])
    ]  # fmt: skip
    if rows:
        _csv(out / "memory_copy_trace.csv", _COPY_COLS, rows)
    rows = [
        [ops[r["kind"]]["kind"], ops[r["kind"]]["operations"][r["operation"]], 1, r["thread_id"],
         r["correlation_id"]["internal"], r["start_timestamp"], r["end_timestamp"]]
        for r in proc["buffer_records"].get("hip_api", [])
    ]  # fmt: skip
    if rows:
        _csv(out / "hip_api_trace.csv", _HIP_COLS, rows)
    rows = [
        [a["node_id"], a["logical_node_id"], {1: "CPU", 2: "GPU"}[a["type"]],
         a.get("cpu_cores_count", 0), a.get("simd_count", 0), a["cu_count"], a["name"],
         a["product_name"]]
        for a in proc["agents"]
    ]  # fmt: skip
    _csv(out / "agent_info.csv", _AGENT_COLS, rows)
    return out


_SAME = ("start_ns", "end_ns", "stream", "device", "kind", "name", "correlation", "grid",
         "block", "smem", "klass")  # fmt: skip


def _same_rows(a, b) -> None:
    """The JSON's rows are the CSV's (``a`` the JSON's, ``b`` the CSV's), but for what only the
    JSON carries: a copy's bytes (rocprofv3's memory_copy_trace.csv has no size column in the
    published samples) and each kernel's VGPRs (its kernel symbol)."""
    sa, sb = a.segments, b.segments
    assert len(sa) == len(sb)
    kern = sa.kind == Kind.KERNEL
    np.testing.assert_array_equal(sa.provenance[kern], sb.provenance[kern])
    assert np.isnan(sb.dram_bytes[~kern]).all() and not np.isnan(sa.dram_bytes[~kern]).any()
    for col in _SAME:
        x, y = getattr(sa, col), getattr(sb, col)
        if col == "name":
            x = [a.names[i] for i in x.tolist()]
            y = [b.names[i] for i in y.tolist()]
            assert x == y
        else:
            np.testing.assert_array_equal(x, y, err_msg=col)
    for col in ("correlation", "api_start_ns", "api_end_ns", "api", "thread"):
        np.testing.assert_array_equal(getattr(a.host, col), getattr(b.host, col), err_msg=col)
    keep = ("id", "agent_id", "name", "gfx", "numSms", "type", "logical_id")
    da = [{k: d.get(k) for k in keep} for d in a.device_properties["devices"]]
    db = [{k: d.get(k) for k in keep} for d in b.device_properties["devices"]]
    assert da == db


def _analysis(trace) -> dict[str, Any]:
    from engine.analyze.compute import analyze_trace
    from engine.analyze.output.export import analysis_dict

    d = analysis_dict(analyze_trace(trace).analysis)
    for k in ("source", "format"):
        d.pop(k, None)
    return json.loads(json.dumps(d))


@pytest.mark.slow
def test_real_sample_json_and_its_csv_give_the_same_rows_and_analysis(raw, sample, tmp_path):
    twin = read_rocprof_csv(csv_twin(raw, tmp_path / "csv"))
    _same_rows(sample, twin)
    # the JSON also knows each kernel's VGPRs (its symbols); the CSV kernel trace does not
    assert (twin.segments.regs == 0).all() and (sample.segments.regs > 0).any()
    a, b = _analysis(sample), _analysis(twin)
    assert a == b
    assert a["kernels"] == 43_915 and a["gpu_time_ns"] == 4_441_741_378


# --- SYNTHETIC documents: copies, HIP and RCCL calls, counters, several processes ----------

_OPS = [
    {"kind": "NONE", "operations": []},
    {"kind": "HIP_RUNTIME_API", "operations": ["hipNone", "hipLaunchKernel", "hipMemcpyAsync",
                                               "hipStreamSynchronize"]},
    {"kind": "MEMORY_COPY", "operations": ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_HOST",
                                           "MEMORY_COPY_HOST_TO_DEVICE",
                                           "MEMORY_COPY_DEVICE_TO_HOST",
                                           "MEMORY_COPY_DEVICE_TO_DEVICE"]},
    {"kind": "KERNEL_DISPATCH", "operations": ["KERNEL_DISPATCH_NONE", "KERNEL_DISPATCH_ENQUEUE",
                                               "KERNEL_DISPATCH_COMPLETE"]},
    {"kind": "RCCL_API", "operations": ["ncclAllGather", "ncclAllReduce"]},
]  # fmt: skip


def _agent(handle: int, node: int, gpu: bool) -> dict[str, Any]:
    return {
        "size": 312, "id": {"handle": handle}, "type": 2 if gpu else 1, "node_id": node,
        "logical_node_id": node, "cu_count": 304 if gpu else 64, "cpu_cores_count": 0 if gpu
        else 64, "simd_count": 1216 if gpu else 0, "name": "gfx942" if gpu else "SYNTHETIC CPU",
        "product_name": "AMD Instinct MI300X" if gpu else "SYNTHETIC CPU",
    }  # fmt: skip


def _dispatch(i: int, agent: int, t: int, dur: int, kernel: int, stream: int) -> dict[str, Any]:
    return {
        "size": 184, "kind": 3, "operation": 2, "thread_id": 77,
        "correlation_id": {"internal": 100 + i, "external": 0},
        "start_timestamp": t, "end_timestamp": t + dur,
        "dispatch_info": {
            "size": 72, "agent_id": {"handle": agent}, "queue_id": {"handle": 9},
            "kernel_id": kernel, "dispatch_id": i + 1, "private_segment_size": 0,
            "group_segment_size": 1024, "workgroup_size": {"x": 256, "y": 1, "z": 1},
            "grid_size": {"x": 256 * (i + 1), "y": 2, "z": 1},
        },
        "stream_id": {"handle": stream},
    }  # fmt: skip


def synthetic(pid: int = 11, t0: int = 1_000_000) -> dict[str, Any]:
    """SYNTHETIC: one process, two GPUs (nodes 1, 2) and a CPU (node 0); 4 kernels, 2 copies,
    4 HIP calls (3 launches/copies linked by correlation, one sync), 3 RCCL calls, counters."""
    agents = [_agent(500, 0, False), _agent(501, 1, True), _agent(502, 2, True)]
    symbols = [
        {"kernel_id": 0, "formatted_kernel_name": "", "arch_vgpr_count": 0},
        {"kernel_id": 1, "formatted_kernel_name": "Cijk_Alik_Bljk_HHS_BH_MT128x128x32",
         "demangled_kernel_name": "Cijk_Alik_Bljk_HHS_BH_MT128x128x32.kd", "arch_vgpr_count": 128},
        {"kernel_id": 2, "formatted_kernel_name": "ncclDevKernel_Generic_1(ncclDevKernelArgs)",
         "arch_vgpr_count": 64},
    ]  # fmt: skip
    disp = [
        _dispatch(0, 501, t0 + 100, 50, 1, 3),
        _dispatch(1, 501, t0 + 200, 70, 2, 4),
        _dispatch(2, 502, t0 + 150, 30, 1, 5),
        _dispatch(3, 502, t0 + 400, 10, 1, 5),
    ]
    copies = [
        {"size": 96, "kind": 2, "operation": 2, "thread_id": 77,
         "correlation_id": {"internal": 90, "external": 0}, "start_timestamp": t0 - 60_000,
         "end_timestamp": t0 - 10_000, "dst_agent_id": {"handle": 501},
         "src_agent_id": {"handle": 500}, "bytes": 1 << 20, "stream_id": {"handle": 3}},
        {"size": 96, "kind": 2, "operation": 3, "thread_id": 77,
         "correlation_id": {"internal": 91, "external": 0}, "start_timestamp": t0 + 500,
         "end_timestamp": t0 + 4_500, "dst_agent_id": {"handle": 500},
         "src_agent_id": {"handle": 502}, "bytes": 4096, "stream_id": {"handle": 5}},
    ]  # fmt: skip
    hip = [
        {"kind": 1, "operation": 2, "thread_id": 77, "correlation_id": {"internal": 90},
         "start_timestamp": t0 - 61_000, "end_timestamp": t0 - 60_500},
        {"kind": 1, "operation": 1, "thread_id": 77, "correlation_id": {"internal": 100},
         "start_timestamp": t0 + 90, "end_timestamp": t0 + 95},
        {"kind": 1, "operation": 1, "thread_id": 78, "correlation_id": {"internal": 101},
         "start_timestamp": t0 + 180, "end_timestamp": t0 + 185},
        {"kind": 1, "operation": 3, "thread_id": 77, "correlation_id": {"internal": 110},
         "start_timestamp": t0 + 420, "end_timestamp": t0 + 4_600},
    ]  # fmt: skip
    rccl = [
        {"kind": 4, "operation": o, "thread_id": 77, "correlation_id": {"internal": 120 + o},
         "start_timestamp": t0 + 170, "end_timestamp": t0 + 175}
        for o in (1, 1, 0)
    ]  # fmt: skip
    counters = [
        {"id": {"handle": 7}, "name": "FETCH_SIZE", "agent_id": {"handle": 501}},
        {"id": {"handle": 8}, "name": "WRITE_SIZE", "agent_id": {"handle": 501}},
        {"id": {"handle": 9}, "name": "SQ_WAVES", "agent_id": {"handle": 501}},
    ]
    collection = [
        {"dispatch_data": {"correlation_id": {"internal": 100}, "dispatch_info": {
            "dispatch_id": 1, "kernel_id": 1, "agent_id": {"handle": 501}}},
         "records": [{"counter_id": {"handle": 7}, "value": 10.0},   # two instances: summed
                     {"counter_id": {"handle": 7}, "value": 6.0},
                     {"counter_id": {"handle": 8}, "value": 4.0},
                     {"counter_id": {"handle": 9}, "value": 512.0}]},
        {"dispatch_data": {"correlation_id": {"internal": 999}, "dispatch_info": {
            "dispatch_id": 999, "kernel_id": 1, "agent_id": {"handle": 501}}},
         "records": [{"counter_id": {"handle": 9}, "value": 1.0}]},  # no such dispatch
    ]  # fmt: skip
    return {
        "metadata": {"pid": pid, "init_time": t0, "fini_time": t0 + 10_000, "config": {}},
        "agents": agents,
        "counters": counters,
        "strings": {"buffer_records": _OPS, "callback_records": []},
        "kernel_symbols": symbols,
        "callback_records": {"counter_collection": collection},
        "buffer_records": {"kernel_dispatch": disp, "memory_copy": copies, "hip_api": hip,
                           "rccl_api": rccl, "hsa_api": [], "marker_api": []},
    }  # fmt: skip


def write(tmp: Path, doc: Any, name: str = "results.json", gz: bool = False) -> Path:
    data = json.dumps(doc).encode() if not isinstance(doc, bytes) else doc
    p = tmp / (name + (".gz" if gz else ""))
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def test_synthetic_rows_copies_host_calls_and_counters(tmp_path):
    t = read_rocprof_json(write(tmp_path, {"rocprofiler-sdk-tool": [synthetic()]}, gz=True))
    seg = t.segments
    kern, cp = seg.kind == Kind.KERNEL, seg.kind == Kind.MEMCPY
    assert kern.sum() == 4 and cp.sum() == 2
    assert seg.start_ns.tolist() == sorted(seg.start_ns.tolist())
    # devices: the GPU agents 0.. (nodes 1, 2), as the CSV importer numbers them
    assert [(d["id"], d["agent_id"]) for d in t.device_properties["devices"]] == [(0, 1), (1, 2)]
    assert Counter(seg.device[kern].tolist()) == {0: 2, 1: 2}
    names = [t.names[i] for i in seg.name[cp].tolist()]
    assert names == ["Memcpy HtoD", "Memcpy DtoH"]
    assert seg.dram_bytes[cp].tolist() == [1 << 20, 4096]
    assert seg.device[cp].tolist() == [0, 1]  # HtoD: its destination; DtoH: its source
    # geometry: grid of 256*(i+1) x 2 work-items in workgroups of 256 → (i+1)*2 workgroups
    first = int(np.flatnonzero(kern)[0])
    assert seg.grid[first] == 2 and seg.block[first] == 256 and seg.smem[first] == 1024
    assert seg.regs[first] == 128
    # host rows linked by correlation; the RCCL calls counted by function
    assert len(t.host) == 4
    assert t.host.api.tolist() == [ApiKind.MEMCPY_ASYNC, ApiKind.LAUNCH, ApiKind.LAUNCH,
                                   ApiKind.SYNC]  # fmt: skip
    assert t.host.thread.tolist() == [0, 0, 1, 0]
    linked = t.host.rows_of(seg.correlation)
    assert (linked >= 0).sum() == 3
    assert t.device_properties["rccl_calls"] == {"ncclAllReduce": 2, "ncclAllGather": 1}
    assert t.names[int(seg.name[np.flatnonzero(kern)[1]])].startswith("Cijk")  # (t0+150)
    comm = [t.names[i] for i in set(seg.name[seg.klass == seg.klass.max()].tolist())]
    assert comm  # (classified: the taxonomy's table, as the CSV importer's)
    # counters: summed over instances, joined by dispatch id; FETCH+WRITE KiB → bytes
    props = t.device_properties
    assert props["counters_joined"] == 1 and props["counters_unmatched"] == 1
    assert props["counters"] == {"FETCH_SIZE": 1, "WRITE_SIZE": 1, "SQ_WAVES": 2}
    row = int(np.flatnonzero(seg.correlation == 100)[0])
    assert seg.dram_bytes[row] == (16.0 + 4.0) * 1024
    assert seg.provenance[row] & Provenance.DRAM_BYTES


def test_synthetic_json_and_its_csv_give_the_same_rows_and_analysis(tmp_path):
    proc = synthetic()
    del proc["callback_records"]  # (counters come in another CSV file; not compared here)
    j = read_rocprof_json(write(tmp_path, {"rocprofiler-sdk-tool": [proc]}))
    c = read_rocprof_csv(csv_twin(proc, tmp_path / "csv"))
    _same_rows(j, c)
    a, b = _analysis(j), _analysis(c)
    # but for the copies' bytes, which only the JSON carries (and the rates made of them)
    assert [x["bytes"] for x in a["copies"]] == [1 << 20, 4096]
    assert [x["bytes"] for x in b["copies"]] == [0, 0]
    for d in (a, b):
        for x in d["copies"]:
            x.pop("bytes"), x.pop("achieved_Bps"), x.pop("fraction_of_link")
    assert a == b


def test_several_processes_keep_their_correlations_and_threads_apart(tmp_path):
    doc = {"rocprofiler-sdk-tool": [synthetic(11), synthetic(12, t0=2_000_000)]}
    t = read_rocprof_json(write(tmp_path, doc))
    assert len(t.segments) == 12 and len(t.host) == 8
    assert t.device_properties["processes"] == 2 and t.device_properties["pids"] == [11, 12]
    # one GPU seen by both processes is one device
    assert len(t.device_properties["devices"]) == 2
    corr = t.segments.correlation
    assert len(set(corr.tolist())) == 12
    assert (t.host.rows_of(corr) >= 0).sum() == 6
    assert len(set(t.host.thread.tolist())) == 4


def test_old_files_without_stream_ids_use_the_queue_and_unknown_symbols_are_named(tmp_path):
    proc = synthetic()
    for r in proc["buffer_records"]["kernel_dispatch"]:
        del r["stream_id"]
    proc["buffer_records"]["kernel_dispatch"][0]["dispatch_info"]["kernel_id"] = 42
    proc["buffer_records"]["kernel_dispatch"][1]["end_timestamp"] = 0  # ends before it starts
    t = read_rocprof_json(write(tmp_path, {"rocprofiler-sdk-tool": [proc]}))
    kern = t.segments.kind == Kind.KERNEL
    assert set(t.segments.stream[kern].tolist()) == {9}
    assert t.device_properties["malformed_events"] == 1 and kern.sum() == 3
    assert t.device_properties["unnamed_kernels"] == 1
    assert "<unnamed kernel>" in t.names


def test_kernel_rename_takes_the_roctx_names(tmp_path):
    proc = synthetic()
    proc["metadata"]["config"] = {"kernel_rename": True}
    proc["strings"]["correlation_id"] = {"external": [{"key": 5, "value": "my_region"}]}
    proc["buffer_records"]["kernel_dispatch"][0]["correlation_id"]["external"] = 5
    t = read_rocprof_json(write(tmp_path, {"rocprofiler-sdk-tool": [proc]}))
    assert "my_region" in t.names


# --- hostile input: one TraceImportError line each ----------------------------------------


def _refused(path: Path, *words: str) -> str:
    with pytest.raises(TraceImportError) as e:
        read_rocprof_json(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    for w in words:
        assert w in msg, msg
    return msg


def _doc(mutate) -> dict[str, Any]:
    proc = synthetic()
    mutate(proc)
    return {"rocprofiler-sdk-tool": [proc]}


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda p: p["buffer_records"].update(kernel_dispatch={"a": 1}), ("not an array",)),
        (lambda p: p["buffer_records"]["kernel_dispatch"][2].update(start_timestamp="12"),
         ("kernel_dispatch[2].start_timestamp", "a string")),
        (lambda p: p["buffer_records"]["kernel_dispatch"][0]["dispatch_info"].pop("agent_id"),
         ("dispatch_info.agent_id", "missing")),
        (lambda p: p["buffer_records"]["kernel_dispatch"][0].pop("correlation_id"),
         ("correlation_id", "missing")),
        (lambda p: p["buffer_records"]["kernel_dispatch"][0].update(end_timestamp=2**70),
         ("beyond 64 bits",)),
        (lambda p: p["buffer_records"]["kernel_dispatch"][0].update(end_timestamp=2**62 + 1),
         ("2**62",)),
        (lambda p: p["buffer_records"]["memory_copy"][0].update(bytes=1.5), ("not an integer",)),
        (lambda p: p["buffer_records"]["hip_api"][0].update(thread_id=True), ("a boolean",)),
        (lambda p: p["agents"][1].update(id=[501]), ("agents[1].id", "not an object")),
        (lambda p: p["callback_records"]["counter_collection"][0]["records"][0].update(
            value="x"), ("records[0].value",)),
        (lambda p: p.update(buffer_records={}), ("counters with no kernel",)),
        (lambda p: p.update(buffer_records={}, callback_records={}),
         ("no kernel dispatches or memory copies",)),
    ],
)  # fmt: skip
def test_malformed_documents_are_one_line(tmp_path, mutate, words):
    _refused(write(tmp_path, _doc(mutate)), *words)


def test_not_rocprofv3_json_truncated_and_unreadable_files(tmp_path):
    good = json.dumps({"rocprofiler-sdk-tool": [synthetic()]}).encode()
    _refused(write(tmp_path, good[: len(good) // 2], "cut.json"), "truncated JSON")
    _refused(write(tmp_path, good[: len(good) // 2], "cut.json", gz=True), "truncated JSON")
    _refused(write(tmp_path, gzip.compress(good)[:200], "cutgz.json.gz"), "truncated gzip")
    _refused(write(tmp_path, gzip.compress(good) + b"junk", "tail.json.gz"), "trailing bytes")
    _refused(write(tmp_path, b"", "empty.json"), "empty file")
    _refused(write(tmp_path, gzip.compress(b""), "empty.json.gz"), "empty file")
    _refused(write(tmp_path, b'{"traceEvents": []}', "kineto.json"), "not rocprofv3 JSON")
    _refused(write(tmp_path, good.replace(b'"kernel_dispatch"', b'"kernel_\xff\xfe"')),
             "unreadable JSON")  # fmt: skip
    _refused(write(tmp_path, b'{"rocprofiler-sdk-tool": 7}', "seven.json"), "not an array")
    _refused(write(tmp_path, b'{"rocprofiler-sdk-tool": [1]}', "one.json"), "not an object")
    digits = b'{"rocprofiler-sdk-tool": [{"metadata": {"pid": ' + b"9" * 5000 + b"}}]}"
    _refused(write(tmp_path, digits, "digits.json"), "unreadable JSON")
    inf = good.replace(b'"bytes": 4096', b'"bytes": 1e400')
    _refused(write(tmp_path, inf, "inf.json"), "bytes", "not an integer")
    # a merged file whose second member is not a gzip member
    both = gzip.compress(good) + gzip.compress(b"")
    assert len(read_rocprof_json(write(tmp_path, both, "two.json.gz")).segments) == 6


def test_nesting_beyond_the_limit_is_refused_before_parsing(tmp_path, monkeypatch):
    deep = b'{"rocprofiler-sdk-tool": [{"metadata": {"x": ' + b"[" * 600 + b"]" * 600 + b"}}]}"
    _refused(write(tmp_path, deep, "deep.json"), "nested 604 deep", "GITM_MAX_JSON_DEPTH")
    doc = json.dumps({"rocprofiler-sdk-tool": [synthetic()]}).encode()
    depth = _depth(doc)[0]
    assert depth == 9  # (…counter_collection[i].dispatch_data.dispatch_info.agent_id)
    monkeypatch.setenv("GITM_MAX_JSON_DEPTH", str(depth - 1))
    _refused(write(tmp_path, doc, "ok.json"), "nested 9 deep", "GITM_MAX_JSON_DEPTH")
    monkeypatch.setenv("GITM_MAX_JSON_DEPTH", str(depth))
    assert len(read_rocprof_json(write(tmp_path, doc, "ok.json")).segments) == 6


def test_depth_ignores_brackets_inside_strings():
    assert _depth(b'{"a": [1, {"b": "[[[{{{"}]}') == (3, False)
    assert _depth(b'{"a": "x\\\\", "b": [[1]]}') == (3, False)  # an escaped backslash
    assert _depth(b'{"a": "say \\"[[[[\\" ok", "b": []}') == (2, False)  # escaped quotes
    assert _depth(b"[]") == (1, False) and _depth(b"7") == (0, False)
    assert _depth(b'{"a": [1, 2') == (2, True) and _depth(b'{"a": "[') == (1, True)


def test_a_gzip_bomb_and_a_file_past_the_size_limit_stop_early(tmp_path, monkeypatch):
    bomb = b'{"rocprofiler-sdk-tool": [{"metadata": {"x": "' + b" " * (40 << 20) + b'"}}]}'
    p = write(tmp_path, bomb, "bomb.json", gz=True)
    assert p.stat().st_size < 100_000
    _refused(p, "gzip bomb", "GITM_MAX_GZIP_RATIO")
    doc = json.dumps({"rocprofiler-sdk-tool": [synthetic()]}).encode()
    monkeypatch.setenv("GITM_MAX_TRACE_BYTES", "1K")
    _refused(write(tmp_path, doc, "big.json"), "GITM_MAX_TRACE_BYTES")
    _refused(write(tmp_path, doc, "big.json", gz=True), "GITM_MAX_TRACE_BYTES")


def test_not_a_regular_file(tmp_path):
    _refused(tmp_path, "not a regular file")
    _refused(tmp_path / "absent.json", "cannot read")
