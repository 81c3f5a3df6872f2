"""The device each row ran on decides the roofline (issue 47 items 2 and 4): a row's ``device``
read against the trace's device list by id — Kineto ``deviceProperties[].id``, Nsight's CUDA
device numbers (TARGET_INFO_CUDA_DEVICE / ``cuDevice``, not TARGET_INFO_GPU's own ids), rocprof's
GPU agents — never the first listed; GPUs of today named as the trace names them, each with a
roofline from the catalogue or an estimate labelled as one, never silence.

The Nsight exports and Kineto traces here are SYNTHETIC: built in the test (the Kineto one from
a shipped real trace whose device list is rewritten), with the device facts of the GPUs they
name (SM counts, memory sizes and compute capabilities as CUDA reports them)."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from engine.analyze.compute import analyze_trace
from engine.analyze.output.export import analysis_json, report_markdown
from engine.planner.catalogue import by_id, detect, identify
from engine.planner.graph import trace_roofline
from engine.trace.kineto.kineto import read_kineto
from engine.trace.nsys.nsys import read_nsys
from engine.trace.read import read_trace
from engine.trace.segments import DTYPES, Provenance, Segments
from gitm_tui.analyze_view import summary
from tests.paths import TRACES

GIB = 2**30
#: what CUDA reports for the devices of the issue's hosts (cudaGetDeviceProperties: name,
#: multiProcessorCount, totalGlobalMem, major.minor)
A40 = {"name": "NVIDIA A40", "numSms": 84, "totalGlobalMem": 47_697_362_944, "cc": (8, 6)}
A100_PCIE = {
    "name": "NVIDIA A100-PCIE-40GB",
    "numSms": 108,
    "totalGlobalMem": 42_505_273_344,
    "cc": (8, 0),
}


def _first_screen(a: Any) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(summary(a))
    return console.export_text()


# --------------------------------------------------------------------------- Nsight
def _nsys(
    path: Path,
    gpus: list[tuple[int, dict[str, Any], int]],
    rows_on: list[int],
    cuda_device: list[tuple[int, int, int]] | None = None,
) -> Path:
    """A SYNTHETIC Nsight export: ``gpus`` as (TARGET_INFO_GPU id, device, cuDevice), each
    device in ``rows_on`` running a GEMM, an elementwise kernel and an HtoD copy (deviceId is
    the CUDA device number, as CUPTI records it); ``cuda_device`` TARGET_INFO_CUDA_DEVICE rows
    (gpuId, cudaId, pid) where given."""
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER NOT NULL, name TEXT,
            busLocation TEXT, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER,
            smCount INTEGER, chipName TEXT, cuDevice INTEGER, computeMajor INTEGER,
            computeMinor INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER, streamId INTEGER NOT NULL,
            correlationId INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL,
            gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER,
            blockZ INTEGER, registersPerThread INTEGER, staticSharedMemory INTEGER,
            dynamicSharedMemory INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER, streamId INTEGER NOT NULL,
            correlationId INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER,
            dstKind INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
            globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL);
        INSERT INTO StringIds VALUES (1, 'ampere_sgemm_128x64_nn'),
            (2, 'void at::native::vectorized_elementwise_kernel<4>'), (3, 'cudaLaunchKernel'),
            (4, 'cudaMemcpyAsync');
        """
    )
    for gid, dev, cu in gpus:
        con.execute(
            "INSERT INTO TARGET_INFO_GPU VALUES (0, ?, ?, ?, ?, ?, ?, ?, 'GA10x', ?, ?, ?)",
            (gid, dev["name"], f"0000:{gid + 1:02x}:00.0", dev["totalGlobalMem"],
             dev.get("bw", 0), dev.get("clock", 0), dev["numSms"], cu, *dev["cc"]),
        )  # fmt: skip
    if cuda_device is not None:
        con.execute("CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, pid INT)")
        con.executemany("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, ?)", cuda_device)
    t, corr = 1_000_000, 1
    for dev_id in rows_on:
        for _ in range(20):  # a step: GEMM, elementwise, HtoD copy of 8 MB
            for name, dur in ((1, 400_000), (2, 30_000)):
                con.execute(
                    "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, 3)",
                    (t - 8_000, t - 2_000, corr),
                )
                con.execute(
                    "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
                    "(?, ?, ?, 1, 7, ?, ?, ?, 216, 1, 1, 256, 1, 1, 64, 0, 32768)",
                    (t, t + dur, dev_id, corr, name, name),
                )
                t, corr = t + dur + 5_000, corr + 1
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, 4)",
                (t - 6_000, t - 1_000, corr),
            )
            con.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, ?, 1, 7, ?, 8388608, 1, 1, 2)",
                (t, t + 400_000, dev_id, corr),
            )
            t, corr = t + 405_000, corr + 1
    con.commit()
    con.close()
    return path


def test_an_export_whose_rows_ran_on_the_second_listed_gpu_gets_its_roofline(tmp_path):
    """Two GPU models, the A40 listed first (id 0), every row on device 1 (an A100 PCIe 40GB):
    the A100's peaks, links and invariants, not the first entry's."""
    p = _nsys(tmp_path / "mixed.sqlite", [(0, A40, 0), (1, A100_PCIE, 1)], rows_on=[1])
    tr = read_nsys(p)
    devices = tr.device_properties["devices"]
    assert detect(devices).id == "a40"  # the first listed: what the analysis used to take
    res = analyze_trace(tr)
    a = res.analysis
    assert a.hardware.id == "a100-pcie-40gb" and a.hardware.detected_from == "trace"
    assert a.hardware.reported_name == "NVIDIA A100-PCIE-40GB"
    assert a.hardware.peak_source == by_id("a100-pcie-40gb").source
    assert a.hardware.host_link and a.hardware.host_link.startswith("PCIe 4.0 x16")
    assert not any("hardware unknown" in n for n in a.notes)
    # the invariants and links are the A100's: the kernel-time invariant is not dropped as
    # "hardware unknown" (it waits for FLOPs, which an export without shapes lacks), and the
    # copies are read against its PCIe link
    kt = next(v for v in res.verdicts if v.invariant == "kernel_time")
    assert "hardware is unknown" not in kt.reason, kt.reason
    (htod,) = a.copies
    assert htod.link == "PCIe 4.0 x16" and htod.link_Bps == 31.5e9
    assert htod.fraction_of_link == pytest.approx(20.97152e9 / 31.5e9)
    screen = _first_screen(a)
    assert "NVIDIA A100-PCIE-40GB · catalogue A100 PCIe 40GB (trace)" in screen
    # the same export with its rows on device 0: the A40
    p0 = _nsys(tmp_path / "on_a40.sqlite", [(0, A40, 0), (1, A100_PCIE, 1)], rows_on=[0])
    a0 = analyze_trace(read_nsys(p0)).analysis
    assert a0.hardware.id == "a40" and a0.hardware.peak_source == by_id("a40").source


def test_nsight_device_ids_are_cuda_numbers_not_the_gpu_tables(tmp_path):
    """The issue's host as Nsight writes it: TARGET_INFO_GPU in PCI order (ids 0, 1 the A40s,
    2, 3 the A100s), CUDA numbering the A100s first (FASTEST_FIRST, TARGET_INFO_CUDA_DEVICE),
    every row on CUDA device 0: an A100."""
    gpus = [(0, A40, 2), (1, A40, 3), (2, A100_PCIE, 0), (3, A100_PCIE, 1)]
    cuda = [(2, 0, 101), (3, 1, 101), (0, 2, 101), (1, 3, 101)]
    tr = read_nsys(_nsys(tmp_path / "host.sqlite", gpus, rows_on=[0], cuda_device=cuda))
    by = {d["id"]: (d["gpu_id"], d["name"]) for d in tr.device_properties["devices"]}
    assert by == {
        2: (0, "NVIDIA A40"),
        3: (1, "NVIDIA A40"),
        0: (2, "NVIDIA A100-PCIE-40GB"),
        1: (3, "NVIDIA A100-PCIE-40GB"),
    }
    assert analyze_trace(tr).analysis.hardware.id == "a100-pcie-40gb"
    # without TARGET_INFO_CUDA_DEVICE, TARGET_INFO_GPU's cuDevice says the same
    tr2 = read_nsys(_nsys(tmp_path / "host2.sqlite", gpus, rows_on=[0]))
    assert analyze_trace(tr2).analysis.hardware.id == "a100-pcie-40gb"


def _with_gemm_work(tr: Any) -> Any:
    """The export's trace with each GEMM's work as if derived from its op's shapes (a
    [4096,4096]x[4096,4096] FP32 matmul: 2·4096³ FLOPs, three 64 MiB matrices): what a Kineto
    trace's recorded shapes give, which a SYNTHETIC export cannot carry."""
    seg = tr.segments
    cols = seg.columns()
    gemm = np.array([tr.names[int(n)].startswith("ampere_sgemm") for n in seg.name])
    cols["flops"] = np.where(gemm, 2.0 * 4096**3, seg.flops)
    cols["dram_bytes"] = np.where(gemm, 3.0 * 4096 * 4096 * 4, seg.dram_bytes)
    cols["provenance"] = np.where(gemm, seg.provenance | np.uint8(Provenance.DERIVED),
                                  seg.provenance).astype(np.uint8)  # fmt: skip
    cols["dtype"] = np.where(gemm, np.uint8(DTYPES.index("fp32")), seg.dtype).astype(np.uint8)
    return dataclasses.replace(tr, segments=Segments(**cols))


def test_a_mixed_host_is_judged_per_device_each_by_its_own_peaks(tmp_path):
    """Rows on an A40 (device 0) and an A100 PCIe 40GB (device 1): each device's GEMMs are
    bounded by its own peaks, its copies read against its own link, its kernels checked by the
    kernel-time invariant against its own device; the summary names each device with its share
    of the GPU time. Nothing is judged by the other device's peaks."""
    p = _nsys(tmp_path / "both.sqlite", [(0, A40, 0), (1, A100_PCIE, 1)], rows_on=[0, 1])
    tr = _with_gemm_work(read_nsys(p))
    res = analyze_trace(tr)
    a = res.analysis
    assert a.hardware.id is None  # no one device's peaks judge the other's rows
    assert a.hardware.name.startswith("2 models: ")
    lines = [n for n in a.notes if n.startswith("device ")]
    assert len(lines) == 2, a.notes
    assert any("NVIDIA A40 · catalogue A40 48GB — 60 rows" in n for n in lines), lines
    assert any("NVIDIA A100-PCIE-40GB · catalogue A100 PCIe 40GB — 60 rows" in n for n in lines)
    assert any("rows ran on 2 devices (2 GPU models)" in n for n in a.notes)
    assert any("each device's rows are judged by its own peaks" in n for n in a.notes), a.notes
    # the per-device list: each device, its own catalogue entry, its share of the GPU time
    assert [(d.id, d.hardware_id, d.rows) for d in a.devices] == [
        (0, "a40", 60), (1, "a100-pcie-40gb", 60)]  # fmt: skip
    assert sum(d.share_of_gpu_time for d in a.devices) == pytest.approx(1.0)
    assert a.devices[0].gpu_time_ns == a.devices[1].gpu_time_ns == a.gpu_time_ns // 2
    # the roofline: every GEMM against its own device's peaks — the bound of the kernel (both
    # devices' GEMMs share a name) is the A40's bound of device 0's rows plus the A100's of
    # device 1's, neither device's peaks for both
    rows = res.rows
    gemm = np.array([tr.names[int(n)].startswith("ampere_sgemm") for n in rows.name])
    want = 0.0
    for dev, hw in ((0, "a40"), (1, "a100-pcie-40gb")):
        m = rows.device == dev
        ideal, _ = trace_roofline(rows.take(m), by_id(hw))
        want += float(np.nansum(ideal[gemm[m]]))
    (k,) = [k for k in a.top_kernels if k.name.startswith("ampere_sgemm")]
    assert k.roofline_bound_ns == pytest.approx(want)
    for one in ("a40", "a100-pcie-40gb"):  # neither device's peaks judge both
        f = analyze_trace(tr, hardware=one).analysis
        (fk,) = [x for x in f.top_kernels if x.name.startswith("ampere_sgemm")]
        assert fk.roofline_bound_ns != pytest.approx(want), one
    # the copies: each device's against its own link, named by device
    assert sorted((c.device, c.link, c.count) for c in a.copies) == [
        (0, "PCIe 4.0 x16", 20), (1, "PCIe 4.0 x16", 20)]  # fmt: skip
    assert all(c.fraction_of_link is not None for c in a.copies)
    # the kernel-time invariant: checked, each device's kernels against its own device
    kt = next(v for v in res.verdicts if v.invariant == "kernel_time")
    assert "hardware is unknown" not in kt.reason, kt.reason
    assert "device 0: " in kt.reason and "device 1: " in kt.reason, kt.reason
    assert "each device's kernels against its own device's peaks" in kt.reason
    # the first screen and report.md name each device and its share
    screen = _first_screen(a)
    assert "device 0: NVIDIA A40 · catalogue A40 48GB (trace) — 50% of GPU time" in screen
    assert "device 1: NVIDIA A100-PCIE-40GB · catalogue A100 PCIe 40GB (trace) — 50%" in screen
    md = report_markdown(a)
    assert "* device 0: NVIDIA A40 · catalogue A40 48GB (trace) — 60 rows" in md
    assert "| device 1: HtoD |" in md
    # --hardware still applies one entry to every row, and says so
    f = analyze_trace(read_nsys(p), hardware="a100-pcie-40gb").analysis
    assert f.hardware.id == "a100-pcie-40gb" and f.hardware.detected_from == "flag"
    assert any("every row is judged by A100 PCIe 40GB's peaks" in n for n in f.notes)
    assert {d.hardware_id for d in f.devices} == {"a100-pcie-40gb"}
    assert all(c.device is None for c in f.copies)


def test_a_mixed_host_with_an_unknown_device_judges_only_the_known_one(tmp_path):
    """An A100 PCIe 40GB beside a device too sparse to estimate: the A100's rows get its
    roofline and link, the other's are not judged, and the note says which."""
    odd = {"name": "Mystery 9000", "numSms": 7, "totalGlobalMem": 2 * GIB, "cc": (0, 0)}
    p = _nsys(tmp_path / "odd.sqlite", [(0, odd, 0), (1, A100_PCIE, 1)], rows_on=[0, 1])
    a = analyze_trace(_with_gemm_work(read_nsys(p))).analysis
    by = {d.id: d for d in a.devices}
    assert by[1].hardware_id == "a100-pcie-40gb" and by[0].hardware_id is None
    assert by[0].detected_from == "none" and by[0].basis
    assert any("device 0: peaks unknown, not judged" in n for n in a.notes), a.notes
    links = {c.device: c.link for c in a.copies}
    assert links == {0: None, 1: "PCIe 4.0 x16"}


# --------------------------------------------------------------------------- Kineto
def _kineto_with(tmp_path: Path, devices: list[dict[str, Any]]) -> Path:
    """The shipped A100 training trace (every GPU row on cuda:3) with its device list replaced."""
    doc = json.loads(gzip.decompress((TRACES / "kineto" / "a100_training_3streams.json.gz")
                                     .read_bytes()))  # fmt: skip
    doc["deviceProperties"] = devices
    p = tmp_path / "rank.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return p


def _props(i: int, dev: dict[str, Any]) -> dict[str, Any]:
    return {"id": i, "name": dev["name"], "totalGlobalMem": dev["totalGlobalMem"],
            "computeMajor": dev["cc"][0], "computeMinor": dev["cc"][1],
            "numSms": dev["numSms"], "warpSize": 32}  # fmt: skip


def test_a_kineto_rank_on_cuda3_is_judged_by_device_3(tmp_path):
    """Four devices listed (three A40s first), every row on cuda:3, an A100 PCIe 40GB: its
    roofline — each kernel's bound is the one --hardware a100-pcie-40gb gives, not the A40's."""
    devs = [_props(i, A40) for i in range(3)] + [_props(3, A100_PCIE)]
    tr = read_kineto(_kineto_with(tmp_path, devs))
    assert {int(d) for d in set(tr.segments.device.tolist())} == {3}
    assert detect(tr.device_properties["devices"]).id == "a40"  # the first listed
    a = analyze_trace(tr).analysis
    assert a.hardware.id == "a100-pcie-40gb", a.hardware
    bounds = {k.name: k.roofline_bound_ns for k in a.top_kernels if k.roofline_bound_ns}
    assert bounds  # shape-derived kernels have a bound
    a100 = analyze_trace(tr, hardware="a100-pcie-40gb").analysis
    a40 = analyze_trace(tr, hardware="a40").analysis
    assert bounds == {k.name: k.roofline_bound_ns for k in a100.top_kernels if k.name in bounds}
    assert bounds != {k.name: k.roofline_bound_ns for k in a40.top_kernels if k.name in bounds}


# --------------------------------------------------------------------------- today's GPUs
#: the properties each GPU's traces carry (cudaGetDeviceProperties / ROCm's hipDeviceProp as
#: Kineto writes them); the MI300X one with the empty name some ROCm builds write
TODAY = {
    "b200": {"name": "NVIDIA B200", "numSms": 148, "totalGlobalMem": int(178.35 * GIB),
             "computeMajor": 10, "computeMinor": 0, "warpSize": 32},
    "rtx-3090": {"name": "NVIDIA GeForce RTX 3090", "numSms": 82,
                 "totalGlobalMem": 25_438_126_080, "computeMajor": 8, "computeMinor": 6,
                 "warpSize": 32},
    "a40": {"name": "NVIDIA A40", "numSms": 84, "totalGlobalMem": 47_697_362_944,
            "computeMajor": 8, "computeMinor": 6, "warpSize": 32},
    "rtx-2080-ti": {"name": "NVIDIA GeForce RTX 2080 Ti", "numSms": 68,
                    "totalGlobalMem": 11_554_717_696, "computeMajor": 7, "computeMinor": 5,
                    "warpSize": 32},
    "mi300x": {"name": "", "numSms": 304, "totalGlobalMem": 206_141_652_992,
               "computeMajor": 9, "computeMinor": 4, "warpSize": 64},
}  # fmt: skip


def _tiny(tmp_path: Path, dev: dict[str, Any], kernel: str = "ampere_sgemm_128x64_nn") -> Path:
    ev = []
    for i in range(6):
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 100 * i,
                "dur": 5,
                "args": {"correlation": i + 1},
            }
        )
        ev.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7,
                   "ts": 100 * i + 10, "dur": 50,
                   "args": {"stream": 7, "device": 0, "correlation": i + 1}})  # fmt: skip
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"deviceProperties": [{"id": 0, **dev}], "traceEvents": ev}))
    return p


@pytest.mark.parametrize("gpu", sorted(TODAY))
def test_todays_gpus_are_named_with_their_catalogue_roofline(tmp_path, gpu):
    dev = TODAY[gpu]
    a = analyze_trace(read_kineto(_tiny(tmp_path, dev))).analysis
    entry = by_id(gpu)
    assert a.hardware.id == gpu and a.hardware.detected_from == "trace", a.hardware
    assert a.hardware.peak_source == entry.source and a.hardware.host_link
    shown = dev["name"] or "unnamed device (gfx 9.4, 304 CUs, 192 GiB)"
    assert a.hardware.name == f"{shown} · catalogue {entry.name}"
    assert f"{a.hardware.name} (trace)" in _first_screen(a)
    assert not any("no device properties" in n or "hardware unknown" in n for n in a.notes)
    if not dev["name"]:  # what was there, said
        assert any("device 0: it is unnamed; its properties (gfx 9.4, 304 CUs, 192 GiB)" in n
                   for n in a.notes), a.notes  # fmt: skip


def test_a_gpu_in_no_entry_gets_an_estimate_labelled_on_every_line(tmp_path):
    """An RTX 3080 (sm_86, 68 SMs): peaks scaled from the consumer entry of its architecture
    (the RTX 3090's) by SM count, ESTIMATE on the first screen, in report.md and in
    analysis.json's peak_source; its kernels get roofline fractions."""
    dev = {"name": "NVIDIA GeForce RTX 3080", "numSms": 68, "totalGlobalMem": 10_737_418_240,
           "computeMajor": 8, "computeMinor": 6, "warpSize": 32}  # fmt: skip
    a = analyze_trace(read_kineto(_tiny(tmp_path, dev))).analysis
    assert a.hardware.detected_from == "estimate" and a.hardware.id == "estimate-sm_86-68"
    assert a.hardware.peak_source.startswith("ESTIMATE from the trace's device properties")
    assert (
        "catalogue 'rtx-3090'" in a.hardware.peak_source and "x 68/82 SMs" in a.hardware.peak_source
    )
    line = "NVIDIA GeForce RTX 3080 · ESTIMATED peaks (sm_86, 68 SMs, 10 GiB) (estimate)"
    assert line in _first_screen(a)
    assert f"* hardware: {line.removesuffix(' (estimate)')} (estimate" in report_markdown(a)
    assert '"peak_source":"ESTIMATE' in analysis_json(a).replace(": ", ":")
    est = by_id(a.hardware.id)  # the graph's hardware id resolves
    rtx = by_id("rtx-3090")
    assert est.peak_flops["bf16"] == pytest.approx(rtx.peak_flops["bf16"] * 68 / 82)
    assert est.hbm_bandwidth_Bps == pytest.approx(rtx.hbm_bandwidth_Bps * 68 / 82)


def test_an_unnamed_device_with_properties_is_never_without_properties(tmp_path):
    """An unnamed gfx 9.4 device with 304 CUs that fits two entries (no memory reported, so the
    MI300X and MI325X both fit): an estimate that says so, not 'no device properties'."""
    dev = {"name": "", "numSms": 304, "computeMajor": 9, "computeMinor": 4, "warpSize": 64}
    found = identify(dev)
    assert found.kind == "estimate" and set(found.ambiguous) == {"Instinct MI300X",
                                                                 "Instinct MI325X"}  # fmt: skip
    a = analyze_trace(
        read_kineto(_tiny(tmp_path, dev, "Cijk_Alik_Bljk_BBS_BH_MT128x256x32"))
    ).analysis
    assert a.hardware.detected_from == "estimate"
    assert (
        a.hardware.name == "unnamed device (gfx 9.4, 304 CUs) · ESTIMATED peaks (gfx 9.4, 304 CUs)"
    )
    assert not any("no device properties" in n for n in a.notes)
    assert any("fits 2 catalogue entries equally" in n for n in a.notes), a.notes


def test_a_device_too_sparse_to_estimate_says_what_it_has(tmp_path):
    a = analyze_trace(read_kineto(_tiny(tmp_path, {"name": "Mystery 9000", "numSms": 7}))).analysis
    assert a.hardware.id is None and a.hardware.name == "Mystery 9000"
    (note,) = [n for n in a.notes if n.startswith("hardware unknown")]
    assert "not in the hardware catalogue; its properties (7 SMs) are too few" in note


# --------------------------------------------------------------------------- rocprof
def test_rocprof_agents_are_numbered_as_their_rows(tmp_path):
    """A SYNTHETIC rocprofv3 output with two GPU agents (nodes 2 and 3: an MI300X, and a gfx942
    agent with no product name and 304 CUs), every dispatch on agent 3: device 1, whose name
    is its gfx target, matched by its properties — not the first agent."""
    out = tmp_path / "out"
    out.mkdir()
    with (out / "1_agent_info.csv").open("w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(["Node_Id", "Logical_Node_Id", "Agent_Type", "Cu_Count", "Name", "Product_Name"])
        w.writerows([[0, 0, "CPU", 0, "AMD EPYC", "AMD EPYC"],
                     [2, 2, "GPU", 104, "gfx90a", "AMD Instinct MI210"],
                     [3, 3, "GPU", 304, "gfx942", ""]])  # fmt: skip
    header = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id",
              "Kernel_Id", "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp",
              "Private_Segment_Size", "Group_Segment_Size", "Workgroup_Size_X",
              "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y",
              "Grid_Size_Z"]  # fmt: skip
    with (out / "1_kernel_trace.csv").open("w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(header)
        for d in range(1, 5):
            s = 1_000_000 + d * 100_000
            w.writerow(["KERNEL_DISPATCH", 3, 1, 0, 7, d, 10 + d, "Cijk_Alik_Bljk_BBS_BH_MT128x256x32",
                        d, s, s + 50_000, 0, 4096, 256, 1, 1, 65536, 1, 1])  # fmt: skip
    tr = read_trace(out)
    tr = tr[0] if isinstance(tr, tuple) else tr
    assert [(d["id"], d["agent_id"]) for d in tr.device_properties["devices"]] == [(0, 2), (1, 3)]
    assert set(tr.segments.device.tolist()) == {1}
    a = analyze_trace(tr).analysis
    # gfx942 with 304 CUs and no memory reported fits the MI300X and the MI325X: an estimate
    # scaled from the MI300X (equal CUs), labelled — the MI210 of device 0 is not it
    assert a.hardware.detected_from == "estimate" and a.hardware.id == "estimate-gfx942-304"
    assert a.hardware.name == "gfx942 · ESTIMATED peaks (gfx942, 304 CUs)"
    assert "catalogue 'mi300x'" in (a.hardware.peak_source or "")


# --------------------------------------------------------------------------- device numbering
MI300X = {"name": "AMD Instinct MI300X", "numSms": 304, "totalGlobalMem": 206_141_652_992,
          "computeMajor": 9, "computeMinor": 4, "warpSize": 64}  # fmt: skip
MI210 = {"name": "AMD Instinct MI210", "numSms": 104, "totalGlobalMem": 68_702_699_520,
         "computeMajor": 9, "computeMinor": 0, "warpSize": 64}  # fmt: skip
H100 = {"name": "NVIDIA H100 80GB HBM3", "numSms": 132, "totalGlobalMem": 85_018_279_936,
        "computeMajor": 9, "computeMinor": 0, "warpSize": 32}  # fmt: skip


def _numbered(tmp_path: Path, devices: list[dict[str, Any]], on: int, meta: dict[str, Any]) -> Path:
    """A SYNTHETIC Kineto trace: ``devices`` as its deviceProperties (ids 0..N-1, as Kineto
    writes them), six kernels whose ``device`` arg is ``on``, and top-level ``meta`` (the
    tracer's version key, as Kineto writes it: roctracer_version, rocprofiler-sdk_version,
    cupti_version)."""
    p = _tiny(tmp_path, devices[0], "Cijk_Alik_Bljk_BBS_BH_MT128x256x32")
    doc = json.loads(p.read_text())
    doc["deviceProperties"] = [{"id": i, **d} for i, d in enumerate(devices)]
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "kernel":
            ev["args"]["device"] = ev["pid"] = on
    doc.update(meta)
    p.write_text(json.dumps(doc))
    return p


def test_roctracer_rows_numbered_by_hsa_agent_take_the_one_listed_device(tmp_path):
    """The real MI300X traces' shape: roctracer numbers the GPU by its HSA agent node (CPU
    agents first: GPU 0 of a two-socket host is 2), the list holds the one device the process
    saw (id 0): that device, said as an inference on the first screen and in report.md."""
    p = _numbered(tmp_path, [MI300X], 2, {"roctracer_version": 4, "hip_runtime_version": 60})
    tr = read_kineto(p)
    assert tr.device_properties["gpu_tracer"] == "roctracer"
    a = analyze_trace(tr).analysis
    assert a.hardware.id == "mi300x" and a.hardware.detected_from == "trace", a.hardware
    basis = a.hardware.device_basis or ""
    assert basis.startswith("rows on device 2 (roctracer's number: the GPU's HSA agent node")
    assert basis.endswith("the trace lists 1 device (id 0): taken as that one"), basis
    assert not any("hardware unknown" in n for n in a.notes), a.notes
    assert "device inferred: rows on device 2" in _first_screen(a)
    assert "* device inferred: rows on device 2" in report_markdown(a)
    assert a.devices[0].basis == basis and a.devices[0].hardware_id == "mi300x"


def test_roctracer_rows_on_a_host_of_two_models_are_unknown_even_on_a_listed_id(tmp_path):
    """Two listed models: roctracer's number does not say which ran the rows — not even when
    it is a listed id (device 1 is the HSA agent after one CPU node, GPU 0, not list entry 1)."""
    for on in (1, 3):
        p = _numbered(tmp_path, [MI300X, MI210], on, {"roctracer_version": 4})
        a = analyze_trace(read_kineto(p)).analysis
        assert a.hardware.id is None and a.hardware.detected_from == "none", a.hardware
        (note,) = [n for n in a.notes if n.startswith("hardware unknown")]
        assert f"rows ran on device {on} (roctracer's number" in note, note
        assert (
            "the trace lists 2 devices (ids 0, 1) of 2 models: which of them ran the rows is "
            "unknown" in note
        ), note
    # the same list and rows under rocprofiler-sdk, which numbers GPUs as the list does: by id
    p = _numbered(tmp_path, [MI300X, MI210], 1, {"rocprofiler-sdk_version": "1.0"})
    tr = read_kineto(p)
    assert tr.device_properties["gpu_tracer"] == "rocprofiler-sdk"
    a = analyze_trace(tr).analysis
    assert a.hardware.id == "mi250-gcd" and a.hardware.device_basis is None, a.hardware


def test_a_cuda_row_on_an_id_the_list_lacks(tmp_path):
    """CUPTI numbers devices as the list does; a row on an id the list lacks is read against
    the list's sole model where it has one (the process ran only on devices it lists), and is
    unknown, said why, where the list holds two models."""
    a = analyze_trace(read_kineto(_numbered(tmp_path, [H100], 1, {"cupti_version": 24}))).analysis
    assert a.hardware.id == "h100-sxm"
    assert a.hardware.device_basis == "rows on device 1; the trace lists 1 device (id 0): taken " \
        "as that one"  # fmt: skip
    p = _numbered(tmp_path, [H100, {**TODAY["a40"]}], 5, {"cupti_version": 24})
    a = analyze_trace(read_kineto(p)).analysis
    assert a.hardware.id is None
    assert any("rows ran on device 5, and the trace lists 2 devices (ids 0, 1) of 2 models: "
               "which of them ran the rows is unknown" in n for n in a.notes), a.notes  # fmt: skip
    # a listed id, by id: no inference said
    a = analyze_trace(read_kineto(_numbered(tmp_path, [TODAY["a40"], H100], 1, {}))).analysis
    assert a.hardware.id == "h100-sxm" and a.hardware.device_basis is None


def test_ranks_and_the_fingerprint_read_the_device_the_rows_ran_on(tmp_path):
    """A rank on cuda:3 of a list whose first three devices are A40s and the fourth an H100
    SXM: its summary's peer link is the H100's NVLink and its fingerprint names the H100 — the
    analysis's choice, not the first listed device."""
    from engine.analyze.ranks.ranks import summarize
    from engine.optimizer.fingerprint import fingerprint_of_trace

    devs = [_props(i, A40) for i in range(3)] + [{"id": 3, **H100}]
    tr = read_kineto(_kineto_with(tmp_path, devs))
    h100 = by_id("h100-sxm")
    assert h100.peer_link is not None and by_id("a40").peer_link is None
    s = summarize(tr)
    assert s.peer_link == h100.peer_link.label
    assert s.peer_link_Bps == h100.peer_link.Bps_per_direction
    assert fingerprint_of_trace(tr).device == h100.name
    assert analyze_trace(tr).analysis.fingerprint.device == h100.name
