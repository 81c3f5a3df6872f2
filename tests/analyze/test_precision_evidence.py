"""Precision from evidence (issue 47, item 1): on every real trace in tests/data, no precision
lever proposes a type the launching ops already record, "already in use" and the levers read
the same precisions (so the report cannot contradict itself), and each says which evidence it
used. The real traces are the shipped ones (tests/data/traces, MIT; see its README); the small
traces built here are SYNTHETIC."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.analyze.breakdown.in_use import in_use
from engine.levers.kernels import Bf16Autocast, Tf32Matmul
from engine.levers.model import Observation
from engine.planner.catalogue import by_id
from engine.schedule.dag import build_dag, schedule
from engine.trace.precision import REDUCED, row_precisions
from engine.trace.read import read_trace
from engine.trace.segments import DTYPES, Kind, Klass, NameTable, Segments
from engine.trace.trace import HostEvents, Trace
from tests.paths import TRACES

REAL = sorted(
    [*TRACES.glob("kineto/**/*.json.gz"), *TRACES.glob("hta_diff/**/*.json.gz")]
) + sorted(TRACES.glob("nsys/*.sqlite"))
LEVERS = (Tf32Matmul(), Bf16Autocast())
#: what each lever's target already covers: a row recorded in one of these is not its source
COVERED = {"tf32_matmul": REDUCED, "bf16_autocast": REDUCED - {"tf32"}}


def _read(path: Path) -> Trace:
    tr = read_trace(path)
    return tr[0] if isinstance(tr, tuple) else tr


def _math_precisions(tr: Trace) -> tuple[np.ndarray, list[str]]:
    seg = tr.segments
    mm = np.flatnonzero((seg.kind == Kind.KERNEL) & np.isin(seg.klass, (Klass.GEMM, Klass.CONV,
                                                                       Klass.ATTENTION)))  # fmt: skip
    prec, _ = row_precisions(seg.dtype[mm], [tr.names[int(i)] for i in seg.name[mm].tolist()])
    return mm, prec


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.relative_to(TRACES).as_posix())
def test_no_lever_proposes_a_precision_the_launching_ops_already_use(path: Path):
    tr = _read(path)
    if not (tr.segments.kind == Kind.KERNEL).any() or not len(tr.host):
        pytest.skip("no kernels or no host rows: no replay graph")
    hw = by_id("a100-80gb")
    dag = build_dag(tr, hw, 1)
    obs = Observation(dag, schedule(dag), [], hw, 1)
    used = {u.what: u for u in in_use(tr)}
    mm, prec = _math_precisions(tr)
    at = dict(zip(mm.tolist(), prec, strict=True))
    for lv in LEVERS:
        rows, src, _ = lv.source_rows(dag)
        assert lv.transform(obs).rows == len(rows)
        seg_rows = dag.d_row[rows].tolist()
        recorded = [DTYPES[int(c)] for c in tr.segments.dtype[seg_rows].tolist()]
        # the evidence: a row whose launching op recorded a type the lever's target covers is
        # never one it acts on
        assert not set(recorded) & COVERED[lv.id], (lv.id, path.name)
        assert all(p in lv.sources for p in src)
        # "already in use" and the lever read the same precision for every row
        assert [at[r] for r in seg_rows] == src
        for u in used.values():
            if lv.id in u.levers and u.what in ("reduced_precision", "half_precision"):
                covered = {r for r, p in at.items() if p in COVERED[lv.id]}
                assert not covered & set(seg_rows), (u, lv.id)
    # "already in use" counts exactly the rows the shared reading puts at TF32 or below
    reduced = sum(p in REDUCED for p in prec)
    if reduced:
        assert used["reduced_precision"].rows == reduced
        assert used["reduced_precision"].of_rows == len(mm)
    else:
        assert "reduced_precision" not in used


def test_the_real_traces_carry_recorded_types_the_check_reads():
    """The check above is not empty: the shipped traces have TF32 rows recorded by their op (a
    float32 op, a TF32 tensor-core kernel) that tf32_matmul leaves alone, and FP32 rows it
    acts on."""
    tr = _read(TRACES / "kineto" / "a100_training_3streams.json.gz")
    codes = {DTYPES[int(c)] for c in tr.segments.dtype[tr.segments.klass == Klass.GEMM]}
    assert {"tf32", "fp32"} <= codes
    hw = by_id("a100-80gb")
    rows, src, evidence = Tf32Matmul().source_rows(build_dag(tr, hw, 1))
    assert len(rows) and set(src) == {"fp32"}
    assert "by the launching op's recorded input type" in evidence
    assert "already TF32" in evidence


def _synthetic(names_dtypes: list[tuple[str, str]]) -> Trace:
    """A SYNTHETIC trace: one GEMM row per (kernel name, recorded type), each launched by its
    own host call."""
    names = NameTable()
    n = len(names_dtypes)
    seg = Segments.from_columns(
        start_ns=np.arange(n, dtype=np.int64) * 10_000 + 1_000,
        end_ns=np.arange(n, dtype=np.int64) * 10_000 + 9_000,
        stream=np.full(n, 7, np.int32),
        kind=np.full(n, Kind.KERNEL, np.uint8),
        klass=np.full(n, Klass.GEMM, np.uint8),
        name=np.array([names.intern(k) for k, _ in names_dtypes], np.int32),
        correlation=np.arange(1, n + 1, dtype=np.int64),
        dtype=np.array([DTYPES.index(d) for _, d in names_dtypes], np.uint8),
    )
    host = HostEvents(
        correlation=np.arange(1, n + 1, dtype=np.int64),
        stream=np.full(n, 7, np.int32),
        api_start_ns=np.arange(n, dtype=np.int64) * 10_000,
        api_end_ns=np.arange(n, dtype=np.int64) * 10_000 + 500,
    )
    return Trace(seg, names, host)


def test_the_h100_bf16_case_of_issue_47():
    """cutlass_75_tensorop_bf16_s1688gemm_bf16 launched by a BF16 aten::bmm is BF16 (``s1688``
    is the instruction shape); sgemm launched by an FP32 op is FP32; a name with no type and
    no record is left alone, and "already in use" says the same."""
    tr = _synthetic(
        [
            ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>", "bf16"),
            ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1>", ""),
            ("ampere_sgemm_128x64_nn", "fp32"),
            ("my_gemm_kernel", ""),
        ]
    )  # fmt: skip
    hw = by_id("h100-sxm")
    dag = build_dag(tr, hw, 1)
    for lv in LEVERS:
        rows, src, evidence = lv.source_rows(dag)
        assert rows.tolist() == [2] and src == ["fp32"], lv.id
        assert "1 by the launching op's recorded input type" in evidence
        assert "2 already BF16" in evidence and "1 of unknown precision" in evidence
    (u,) = [u for u in in_use(tr) if u.what == "reduced_precision"]
    assert (u.rows, u.of_rows) == (2, 4)
    assert "2 BF16" in u.evidence and "1 by the launching op's recorded input type" in u.evidence
    assert "1 by the kernel name" in u.evidence and "1 of unknown precision" in u.evidence
    assert u.levers == ["tf32_matmul", "bf16_autocast"]


def test_tf32_rows_are_left_to_bf16_autocast_and_said_so():
    """TF32 rows are reduced precision for tf32_matmul but a source of bf16_autocast: the
    finding that counts them lists only tf32_matmul, and the 16-bit share has its own."""
    tr = _synthetic(
        [
            ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>", "tf32"),
            ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "bf16"),
            ("ampere_sgemm_128x64_nn", "fp32"),
        ]
    )
    used = {u.what: u for u in in_use(tr)}
    assert used["reduced_precision"].levers == ["tf32_matmul"]
    assert used["reduced_precision"].rows == 2
    assert used["half_precision"].levers == ["bf16_autocast"]
    assert used["half_precision"].rows == 1
    dag = build_dag(tr, by_id("h100-sxm"), 1)
    assert Tf32Matmul().source_rows(dag)[0].tolist() == [2]
    assert Bf16Autocast().source_rows(dag)[0].tolist() == [0, 2]
