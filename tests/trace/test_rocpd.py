"""rocpd (rocprofv3's SQLite output) import, on a database built here from rocprofiler-sdk's own
schema SQL (tests/data/traces/rocprof/rocpd_schema, MIT): the rows are synthetic (no real rocpd
database is published), the tables, views and their column types are the real schema's."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engine.planner.catalogue import detect
from engine.trace.errors import TraceImportError
from engine.trace.evidence import Tier, tiers
from engine.trace.read import read_trace
from engine.trace.rocprof.counters import measured_flops
from engine.trace.rocprof.rocpd import is_rocpd
from engine.trace.segments import DTYPES, Kind, Provenance
from gitm_tui.cli import main
from gitm_tui.exit_codes import ExitCode

SCHEMA = Path(__file__).parent.parent / "data" / "traces" / "rocprof" / "rocpd_schema"
GUID = "0190a6b2-8c1e-7d3a-9f00-5e1d2c3b4a59"  # (a uuid v7, as rocprofv3 makes one per process)
UUID = "_" + GUID.replace("-", "_")
PID, TID, GPU, CPU = 4242, 4243, 2, 0
KB = 1024


def _schema(con: sqlite3.Connection, views: bool = True) -> None:
    """The real schema, its placeholders filled as rocprofv3 fills them (generateRocpd.cpp:
    ``{{uuid}}`` → ``_<uuid with underscores>``, ``{{guid}}`` → the uuid)."""
    files = ["rocpd_tables.sql"] + (["rocpd_views.sql"] if views else [])
    for f in files:
        sql = (SCHEMA / f).read_text().replace("{{uuid}}", UUID).replace("{{guid}}", GUID)
        con.executescript(sql)


class _Db:
    """Inserts into the uuid-suffixed tables, the way rocprofv3 writes them."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self.strings: dict[str, int] = {}
        self.events = 0

    def put(self, table: str, **values: object) -> None:
        cols = ", ".join(f'"{c}"' for c in values)
        marks = ", ".join("?" for _ in values)
        self.con.execute(
            f"INSERT INTO `{table}{UUID}` ({cols}) VALUES ({marks})", list(values.values())
        )

    def string(self, s: str) -> int:
        if s not in self.strings:
            self.strings[s] = len(self.strings) + 1
            self.put("rocpd_string", id=self.strings[s], string=s)
        return self.strings[s]

    def event(self, category: str, corr: int) -> int:
        self.events += 1
        self.put("rocpd_event", id=self.events, category_id=self.string(category), stack_id=corr,
                 parent_stack_id=corr, correlation_id=0)  # fmt: skip
        return self.events


#: (kernel symbol id, name, VGPRs): a rocBLAS/Tensile GEMM, an elementwise kernel, an RCCL kernel
KERNELS = {
    1: ("Cijk_Alik_Bljk_HHS_BH_MT256x256x64_MI32x32x8x1", 128),
    2: ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>", 32),
    3: ("ncclDevKernel_Generic(ncclDevComm*, unsigned long, ncclWork*)", 64),
}


def synthetic_rocpd(path: Path, views: bool = True) -> Path:
    """Write a rocpd database (synthetic rows in the real schema): one MI300X and one CPU agent;
    8 GEMM and 8 elementwise dispatches on stream 1 (each launched by a hipLaunchKernel region,
    with FETCH_SIZE/WRITE_SIZE/VALUBusy/SQ_WAVES counters — the GEMM busy and light on DRAM,
    the elementwise kernel the opposite), 2 RCCL dispatches on stream 2 without counters,
    3 copies (2 HtoD of 1 MiB, 1 DtoH of 512 KiB) and 2 ncclAllReduce API calls."""
    con = sqlite3.connect(path)
    _schema(con, views)
    db = _Db(con)
    db.put("rocpd_info_node", id=1, hash=1, machine_id="synthetic-node", hostname="synthetic")
    db.put("rocpd_info_process", id=PID, nid=1, pid=PID, command="synthetic")
    db.put("rocpd_info_thread", id=TID, nid=1, pid=PID, tid=TID)
    db.put("rocpd_info_agent", id=CPU, nid=1, pid=PID, type="CPU", absolute_index=0,
           logical_index=0, type_index=0, name="AMD EPYC 9654", product_name="AMD EPYC 9654",
           extdata=json.dumps({"cu_count": 96}))  # fmt: skip
    db.put("rocpd_info_agent", id=GPU, nid=1, pid=PID, type="GPU", absolute_index=2,
           logical_index=1, type_index=0, name="gfx942", product_name="AMD Instinct MI300X",
           extdata=json.dumps({"cu_count": 304, "wave_front_size": 64}))  # fmt: skip
    for q in (1, 2):
        db.put("rocpd_info_queue", id=q, nid=1, pid=PID, name=f"queue {q}")
        db.put("rocpd_info_stream", id=q, nid=1, pid=PID, name=f"stream {q}")
    db.put("rocpd_info_code_object", id=1, nid=1, pid=PID, agent_id=GPU, uri="memory://synthetic")
    for kid, (name, vgpr) in KERNELS.items():
        db.put("rocpd_info_kernel_symbol", id=kid, nid=1, pid=PID, code_object_id=1,
               kernel_name=name, display_name=name, group_segment_size=16384,
               private_segment_size=0, sgpr_count=32, arch_vgpr_count=vgpr,
               accum_vgpr_count=0)  # fmt: skip
    pmcs = {"FETCH_SIZE": 1, "WRITE_SIZE": 2, "VALUBusy": 3, "SQ_WAVES": 4,
            "SQ_INSTS_VALU_MFMA_MOPS_F16": 5, "SQ_INSTS_VALU_ADD_F32": 6}  # fmt: skip
    for name, pid in pmcs.items():
        db.put("rocpd_info_pmc", id=pid, nid=1, pid=PID, agent_id=GPU, target_arch="GPU",
               name=name, symbol=name, value_type="ABS")  # fmt: skip
    t, corr, pmc_row = 1_000_000_000, 0, 0
    plan = [(1, 1)] * 8 + [(2, 1)] * 8 + [(3, 2)] * 2  # (kernel symbol, stream)
    for dispatch, (kid, stream) in enumerate(plan, 1):
        corr += 1
        launch = db.event("HIP_RUNTIME_API_EXT", corr)
        db.put("rocpd_region", id=corr, nid=1, pid=PID, tid=TID, start=t, end=t + 4_000,
               name_id=db.string("hipLaunchKernel"), event_id=launch)  # fmt: skip
        dur = 200_000 if kid == 1 else 100_000  # GEMM 200 µs, the others 100 µs
        start = t + 10_000
        evt = db.event("KERNEL_DISPATCH", corr)
        db.put("rocpd_kernel_dispatch", id=dispatch, nid=1, pid=PID, tid=TID, agent_id=GPU,
               kernel_id=kid, dispatch_id=dispatch, queue_id=stream, stream_id=stream,
               start=start, end=start + dur, private_segment_size=0, group_segment_size=16384,
               workgroup_size_x=256, workgroup_size_y=1, workgroup_size_z=1,
               grid_size_x=256 * 1216, grid_size_y=1, grid_size_z=1, event_id=evt)  # fmt: skip
        if kid != 3:
            # MI300X HBM: 5.3 TB/s; the elementwise kernel moves ~420 MB in 100 µs (~0.8 of
            # it), the GEMM ~40 MB in 200 µs; VALUBusy 92 % vs 8 %
            fetch_kb = 300_000 if kid == 2 else 30_000
            values = {"FETCH_SIZE": [fetch_kb / 2, fetch_kb / 2],  # two instances: summed
                      "WRITE_SIZE": [fetch_kb / 3], "VALUBusy": [92.0 if kid == 1 else 8.0],
                      "SQ_WAVES": [1216.0]}  # fmt: skip
            if kid == 1:  # 357.5 M MFMA ops x 512 = 183 GFLOP in 200 µs: ~0.7 of FP16 peak
                values["SQ_INSTS_VALU_MFMA_MOPS_F16"] = [357_500_000.0]
            else:  # 1.5625 M wave-wide FP32 adds x 64 lanes = 100 M FLOPs
                values["SQ_INSTS_VALU_ADD_F32"] = [1_562_500.0]
            for name, parts in values.items():
                for v in parts:
                    pmc_row += 1
                    db.put("rocpd_pmc_event", id=pmc_row, event_id=evt, pmc_id=pmcs[name], value=v)
        t = start + dur + 5_000
    copies = [("MEMORY_COPY_HOST_TO_DEVICE", CPU, GPU, 1 << 20)] * 2
    copies.append(("MEMORY_COPY_DEVICE_TO_HOST", GPU, CPU, 512 * KB))
    for j, (name, src, dst, size) in enumerate(copies, 1):
        corr += 1
        evt = db.event("MEMORY_COPY", corr)
        db.put("rocpd_memory_copy", id=j, nid=1, pid=PID, tid=TID, start=t, end=t + 50_000,
               name_id=db.string(name), src_agent_id=src, dst_agent_id=dst, size=size,
               queue_id=1, stream_id=1, event_id=evt)  # fmt: skip
        t += 60_000
    for _ in range(2):
        corr += 1
        evt = db.event("RCCL_API", corr)
        db.put("rocpd_region", id=corr, nid=1, pid=PID, tid=TID, start=t, end=t + 9_000,
               name_id=db.string("ncclAllReduce"), event_id=evt)  # fmt: skip
        t += 10_000
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_rocpd(tmp_path_factory.mktemp("rocpd") / "4242_results.db")


def _count(path: Path, sql: str) -> object:
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def test_rocpd_counts_against_the_database(db: Path) -> None:
    assert is_rocpd(db)
    t = read_trace(db)
    seg = t.segments
    p = t.device_properties
    assert p["format"] == "rocpd"
    k, c = seg.kind == Kind.KERNEL, seg.kind == Kind.MEMCPY
    assert int(k.sum()) == _count(db, "SELECT COUNT(*) FROM rocpd_kernel_dispatch") == 18
    assert int(c.sum()) == _count(db, "SELECT COUNT(*) FROM rocpd_memory_copy") == 3
    assert seg.dram_bytes[c].sum() == _count(db, "SELECT SUM(size) FROM rocpd_memory_copy")
    assert (seg.provenance[c] & Provenance.DRAM_BYTES).all()  # a copy's size is measured
    assert sorted(t.names[i] for i in seg.name[c]) == ["Memcpy DtoH", "Memcpy HtoD", "Memcpy HtoD"]
    assert p["rccl_calls"] == {"ncclAllReduce": 2}
    # the GPU: its product name and CU count, which the catalogue matches
    assert p["devices"][0]["name"] == "AMD Instinct MI300X" and p["devices"][0]["numSms"] == 304
    hw = detect(p["devices"])
    assert hw is not None and hw.id == "mi300x"
    assert set(seg.device.tolist()) == {0}
    assert sorted(set(seg.stream[k].tolist())) == [1, 2]
    # geometry: HSA grid sizes are work-items (256 x 1216 items in 256-item workgroups)
    assert set(seg.grid[k].tolist()) == {1216} and set(seg.block[k].tolist()) == {256}
    assert set(seg.regs[k].tolist()) == {128, 32, 64} and set(seg.smem[k].tolist()) == {16384}
    assert seg.start_ns.tolist() == sorted(seg.start_ns.tolist())
    # each kernel is linked to its hipLaunchKernel (the internal correlation id, stack_id)
    assert len(t.host) == 18
    assert (t.host.rows_of(seg.correlation[k]) >= 0).all()


def test_rocpd_counters_join_their_dispatch_as_measured(db: Path) -> None:
    t = read_trace(db)
    seg, p = t.segments, t.device_properties
    assert p["counters_joined"] == 16 and p["counters_unmatched"] == 0
    assert p["counters"] == {"FETCH_SIZE": 16, "WRITE_SIZE": 16, "VALUBusy": 16, "SQ_WAVES": 16,
                             "SQ_INSTS_VALU_MFMA_MOPS_F16": 8, "SQ_INSTS_VALU_ADD_F32": 8}  # fmt: skip
    names = [t.names[i] for i in seg.name]
    gemm = np.array([n.startswith("Cijk") for n in names])
    elem = np.array(["elementwise" in n for n in names])
    comm = np.array([n.startswith("nccl") for n in names])
    # FETCH_SIZE (two instances, summed) + WRITE_SIZE, in KB → bytes
    assert np.allclose(seg.dram_bytes[elem], (300_000 + 100_000) * KB)
    assert np.allclose(seg.dram_bytes[gemm], (30_000 + 10_000) * KB)
    assert np.allclose(seg.issue_active[gemm], 0.92) and np.allclose(seg.issue_active[elem], 0.08)
    # FLOPs: MFMA MOPs x 512 (FP16: the FP16 peak), wave-wide FP32 adds x 64 lanes (FP32)
    assert np.allclose(seg.flops[gemm], 357_500_000 * 512) and np.allclose(seg.flops[elem], 1e8)
    assert {DTYPES[d] for d in seg.dtype[gemm]} == {"fp16"}
    assert {DTYPES[d] for d in seg.dtype[elem]} == {"fp32"}
    want = Provenance.DRAM_BYTES | Provenance.ISSUE_ACTIVE | Provenance.FLOPS
    assert ((seg.provenance[gemm | elem] & want) == want).all()
    tier = tiers(seg)
    assert (tier[gemm | elem] == Tier.MEASURED).all()
    assert (tier[comm] != Tier.MEASURED).all() and np.isnan(seg.dram_bytes[comm]).all()
    assert np.isnan(seg.flops[comm]).all()


def test_flop_counters() -> None:
    """counter_defs.yaml's conventions: an MFMA MOP is 512 FLOPs, a VALU instruction counts a
    wave of 64 lanes, an FMA two FLOPs; the dtype is the largest term's; no FLOP counter (or
    only bad values) is unknown, not zero."""
    f, d, bits = measured_flops({"SQ_INSTS_VALU_FMA_F64": 10.0, "SQ_INSTS_VALU_MUL_F64": 5.0,
                                 "SQ_INSTS_VALU_MFMA_MOPS_BF16": 1.0, "SQ_WAVES": 99.0})  # fmt: skip
    assert f == 10 * 64 * 2 + 5 * 64 + 512 and DTYPES[d] == "fp64" and bits == Provenance.FLOPS
    f, d, bits = measured_flops({"SQ_WAVES": 4.0, "SQ_INSTS_VALU_ADD_F32": float("nan")})
    assert np.isnan(f) and d == 0 and bits == 0


def test_rocpd_tables_without_views(tmp_path: Path) -> None:
    """A database holding only the uuid-suffixed tables (no views) reads the same."""
    t = read_trace(synthetic_rocpd(tmp_path / "tables_only.db", views=False))
    assert int((t.segments.kind == Kind.KERNEL).sum()) == 18
    assert t.device_properties["counters_joined"] == 16


def test_rocpd_hostile_inputs(tmp_path: Path, db: Path) -> None:
    # an SQLite file that is neither rocpd nor Nsight: the Nsight reader refuses it
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.close()
    assert not is_rocpd(other)
    with pytest.raises(TraceImportError):
        read_trace(other)
    # a truncated database (the profiler killed while writing): one line
    cut = tmp_path / "cut.db"
    cut.write_bytes(db.read_bytes()[:8192])
    with pytest.raises(TraceImportError) as e:
        read_trace(cut)
    assert "\n" not in str(e.value)
    # a text where a time belongs
    bad = synthetic_rocpd(tmp_path / "bad.db")
    con = sqlite3.connect(bad)
    con.execute(f"UPDATE `rocpd_kernel_dispatch{UUID}` SET start = 'soon' WHERE id = 3")
    con.commit()
    con.close()
    with pytest.raises(TraceImportError, match="bad value"):
        read_trace(bad)
    # counters but no dispatch to hold them
    empty = synthetic_rocpd(tmp_path / "nokernels.db")
    con = sqlite3.connect(empty)
    con.execute(f"DELETE FROM `rocpd_kernel_dispatch{UUID}`")
    con.execute(f"DELETE FROM `rocpd_memory_copy{UUID}`")
    con.commit()
    con.close()
    with pytest.raises(TraceImportError, match="no kernel dispatches"):
        read_trace(empty)


def test_rocpd_cli_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = synthetic_rocpd(tmp_path / "nokernels.db")
    con = sqlite3.connect(empty)
    con.execute(f"DELETE FROM `rocpd_kernel_dispatch{UUID}`")
    con.execute(f"DELETE FROM `rocpd_memory_copy{UUID}`")
    con.commit()
    con.close()
    rc = main(["analyze", str(empty), "--no-write"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == ExitCode.INPUT
    assert len(err) == 1 and "no kernel dispatches" in err[0]


def test_a_folder_of_rocpd_databases_lists_each_process(tmp_path: Path, db: Path) -> None:
    """rocprofv3 writes one <pid>_results.db per process: a folder of them is a folder of
    ranks; another SQLite .db beside them is no trace and is not listed."""
    from engine.analyze.run import expand

    folder = tmp_path / "host"
    folder.mkdir()
    for pid in (11, 12):
        (folder / f"{pid}_results.db").write_bytes(db.read_bytes())
    con = sqlite3.connect(folder / "cache.db")
    con.execute("CREATE TABLE t (x)")
    con.close()
    files, errors = expand([str(folder)])
    assert errors == []
    assert [Path(f).name for f in files] == ["11_results.db", "12_results.db"]
