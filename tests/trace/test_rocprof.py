"""rocprofv3 CSV import: real samples (tests/data/traces/rocprof, MIT) counted against their files,
and the counters → measured tier on an output generated here (synthetic, labelled so)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from engine.planner.catalogue import detect
from engine.trace.errors import TraceImportError
from engine.trace.evidence import Tier, tiers
from engine.trace.read import read_trace
from engine.trace.segments import Kind, Provenance
from gitm_tui.cli import main
from gitm_tui.exit_codes import ExitCode

DATA = Path(__file__).parent.parent / "data" / "traces" / "rocprof"


def _data_rows(path: Path) -> list[dict[str, str]]:
    """The file's rows as the csv module reads them (blank lines skipped): the count we check."""
    with path.open(newline="") as f:
        return [r for r in csv.DictReader(f) if any(r.values())]


@pytest.mark.parametrize("folder", ["sdk_0.5.0", "sdk_streams"])
def test_real_sample_counts_match_the_files(folder: str) -> None:
    t = read_trace(DATA / folder)
    kern = _data_rows(DATA / folder / "kernel_trace.csv")
    copy_file = DATA / folder / "memory_copy_trace.csv"
    copies = _data_rows(copy_file) if copy_file.exists() else []
    seg = t.segments
    assert t.device_properties["format"] == "rocprofv3-csv"
    assert int((seg.kind == Kind.KERNEL).sum()) == len(kern)
    assert int((seg.kind == Kind.MEMCPY).sum()) == len(copies)
    starts = sorted(int(r["Start_Timestamp"]) for r in kern + copies)
    assert seg.start_ns.tolist() == starts  # ns, as written
    k = seg.kind == Kind.KERNEL
    # HSA grid sizes are work-items: 1024x1024 items in 64-item groups = 16384 workgroups
    assert set(seg.grid[k].tolist()) == {16384} and set(seg.block[k].tolist()) == {64}
    want_streams = {int(r.get("Stream_Id") or r["Queue_Id"]) for r in kern}
    assert set(seg.stream[k].tolist()) == want_streams
    # one capture: the rows lie on one clock (the published 0.5.0 example's copy file came from
    # another run, ~102 days apart on the clock: it is kept in a folder of its own)
    assert seg.end_ns.max() - seg.start_ns.min() < 3_600 * 10**9
    names = {t.names[i] for i in seg.name[seg.kind == Kind.MEMCPY]}
    assert names <= {"Memcpy HtoD", "Memcpy DtoH"}
    # no size column in these releases: bytes unknown, never guessed
    assert np.isnan(seg.dram_bytes[seg.kind == Kind.MEMCPY]).all()


def test_counter_file_with_times_gives_its_kernels() -> None:
    path = DATA / "rocm_systems_counters" / "counter_collection.csv"
    t = read_trace(path)
    rows = _data_rows(path)
    assert len(t.segments) == len({r["Dispatch_Id"] for r in rows}) == 4
    assert t.device_properties["counters"] == {"SQ_WAVES": 4}
    assert t.device_properties["counters_joined"] == 4
    # SQ_WAVES counts waves: no pressure, so no row is measured
    assert (tiers(t.segments) != Tier.MEASURED).all()


def _write(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(header)
        w.writerows(rows)


K_HEADER = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
            "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp",
            "Private_Segment_Size", "Group_Segment_Size", "Workgroup_Size_X", "Workgroup_Size_Y",
            "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]  # fmt: skip
C_HEADER = ["Correlation_Id", "Dispatch_Id", "Agent_Id", "Queue_Id", "Process_Id", "Thread_Id",
            "Grid_Size", "Kernel_Id", "Kernel_Name", "Workgroup_Size", "LDS_Block_Size",
            "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count", "Counter_Name",
            "Counter_Value", "Start_Timestamp", "End_Timestamp"]  # fmt: skip


def synthetic_output(folder: Path) -> Path:
    """A SYNTHETIC rocprofv3 CSV output (columns as rocprofv3 writes them): an MI300X agent, six
    dispatches on two streams; dispatches 1-4 have pressure counters, 5-6 none."""
    folder.mkdir(parents=True, exist_ok=True)
    _write(
        folder / "1_agent_info.csv",
        ["Node_Id", "Logical_Node_Id", "Agent_Type", "Cu_Count", "Name", "Product_Name"],
        [
            [0, 0, "CPU", 0, "AMD EPYC", "AMD EPYC"],
            [2, 2, "GPU", 304, "gfx942", "AMD Instinct MI300X"],
        ],
    )
    names = ["gemm_kernel", "elementwise_add", "reduce_sum", "softmax_kernel", "gemm_kernel", "x"]
    kern, cnt = [], []
    for d, name in enumerate(names, start=1):
        s = 1_000_000 + d * 100_000
        kern.append(["KERNEL_DISPATCH", 2, 1, d % 2, 7, d, 10 + d, name, d, s, s + 50_000, 0, 4096,
                     256, 1, 1, 65536, 1, 1])  # fmt: skip
        if d <= 4:
            busy, stall, kb = [(90, 5, 1e3), (10, 60, 2e6), (20, 40, 1e6), (30, 30, 5e5)][d - 1]
            for cname, v in (("VALUBusy", busy), ("MemUnitStalled", stall),
                             ("FETCH_SIZE", kb), ("WRITE_SIZE", kb / 2), ("SQ_WAVES", 1024)):  # fmt: skip
                cnt.append([d, d, "Agent 2", 1, 7, 7, 65536, 10 + d, name, 256, 4096, 0, 32, 0, 16,
                            cname, v, s, s + 50_000])  # fmt: skip
    _write(folder / "1_kernel_trace.csv", K_HEADER, kern)
    pmc = folder / "pmc_1"
    pmc.mkdir(exist_ok=True)
    _write(pmc / "1_counter_collection.csv", C_HEADER, cnt)
    return folder


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_output(tmp_path_factory.mktemp("rocprof") / "out")


def test_counters_join_their_dispatch_as_measured(synthetic: Path) -> None:
    t = read_trace(synthetic)
    seg = t.segments
    assert detect(t.device_properties["devices"]).id == "mi300x"  # type: ignore[union-attr]
    assert t.device_properties["counters_joined"] == 4
    assert t.device_properties["counters_unmatched"] == 0
    order = np.argsort(seg.correlation)
    dram = seg.dram_bytes[order]
    # FETCH_SIZE and WRITE_SIZE are KiB (derived_counters.xml: bytes / 1024)
    assert dram[1] == pytest.approx((2e6 + 1e6) * 1024)
    assert seg.issue_active[order][0] == pytest.approx(0.9)
    assert seg.stall_frac[order][1] == pytest.approx(0.6)
    measured = (seg.provenance[order] & np.uint8(Provenance.ISSUE_ACTIVE)) != 0
    assert measured.tolist() == [True] * 4 + [False] * 2
    assert (tiers(seg)[order][:4] == Tier.MEASURED).all()
    assert (tiers(seg)[order][4:] != Tier.MEASURED).all()


def test_single_file_is_read_with_its_agent_info(synthetic: Path) -> None:
    t = read_trace(synthetic / "1_kernel_trace.csv")
    assert len(t.segments) == 6
    assert t.device_properties["devices"][0]["name"] == "AMD Instinct MI300X"


def test_truncated_csv_is_one_line(tmp_path: Path) -> None:
    text = (DATA / "sdk_streams" / "kernel_trace.csv").read_text()
    bad = tmp_path / "kernel_trace.csv"
    bad.write_text(text[: len(text) - 40])
    with pytest.raises(TraceImportError, match="truncated or malformed CSV: line 9"):
        read_trace(bad)


def test_wrong_header_and_counters_without_kernels(tmp_path: Path) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text('"Kind","Something"\n"KERNEL_DISPATCH",1\n')
    with pytest.raises(TraceImportError, match="not a rocprofv3 kernel"):
        read_trace(bad)
    with pytest.raises(TraceImportError, match="counters with no kernel"):
        read_trace(DATA / "sdk_0.5.0_counters")
    nan = tmp_path / "n" / "kernel_trace.csv"
    nan.parent.mkdir()
    nan.write_text(text := (DATA / "sdk_streams" / "kernel_trace.csv").read_text().replace(
        "2414192765353337", "12x"))  # fmt: skip
    assert "12x" in text
    with pytest.raises(TraceImportError, match="Start_Timestamp is not a number"):
        read_trace(nan)


def test_cli_exit_code_on_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["analyze", str(DATA / "sdk_0.5.0_counters"), "--no-write"])
    assert rc == ExitCode.INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "counters with no kernel" in err[0]


def test_measured_confusion_on_the_synthetic_output(synthetic: Path) -> None:
    from engine.analyze.breakdown.measured import measured_confusion
    from engine.analyze.compute import analyze_trace
    from engine.eesm.pipeline import EesmModel
    from engine.planner.catalogue import by_id

    res = analyze_trace(read_trace(synthetic))
    hw = by_id("mi300x")
    conf = measured_confusion(res.rows, hw, EesmModel.build(hw))  # type: ignore[arg-type]
    assert conf is not None and res.analysis.evidence is not None
    assert sum(map(sum, conf.counts)) == 4  # the four dispatches with pressure counters
    assert conf.measured_share == pytest.approx(4 / 6)  # equal durations, 4 of 6 measured
    assert conf.measured_share == pytest.approx(
        res.analysis.evidence.share_of_kernel_time["MEASURED"]
    )
    assert sum(map(sum, conf.time_ns)) == 4 * 50_000
    assert "measured tier: 67% of kernel time" in conf.lines()[0]
    # what analysis.json holds is the same table
    assert res.analysis.measured_tier == conf.model()
