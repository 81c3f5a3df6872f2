"""Nsight import details (one row per runtime call, Kineto-style copy names) and the counting
semantics (engine/analyze/breakdown/semantics.py: exact vs HTA-compatible), on exports and traces built
here so each rule is seen in isolation."""

from __future__ import annotations

import collections
import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engine.analyze.api import AnalyzeOptions, analyze
from engine.analyze.breakdown.semantics import DEFAULT_COUNTING, apply_counting
from engine.trace.kineto.kineto import read_kineto
from engine.trace.nsys.nsys import read_nsys
from engine.trace.segments import Kind, NameTable, Segments
from engine.trace.trace import ApiKind, HostEvents, Trace
from gitm_tui.cli import main
from tests.paths import TRACES

NSYS = TRACES / "nsys" / "a100_cloverleaf.sqlite"
ROCM = TRACES / "kineto" / "mi250_rocm62_minitoy.json.gz"
#: the pattern the copy-lever code parses copy names with (Kineto's form, and ours)
COPY_NAME = re.compile(
    r"Memcpy (HtoD|DtoH|DtoD|HtoH|PtoP|[A-Za-z]+)(?: \((\w[\w ]*) -> (\w[\w ]*)\))?"
)


def _db(path: Path, script: str) -> Path:
    con = sqlite3.connect(path)
    con.executescript(script)
    con.commit()
    con.close()
    return path


def _copy_names(tr: Trace) -> list[str]:
    s = tr.segments
    return [tr.names[int(i)] for i in s.name[s.kind == Kind.MEMCPY]]


# -- Nsight: one host row per runtime call ----------------------------------------------------

_STRINGS = """
    create table StringIds (id int, value text);
    insert into StringIds values (1, 'cudaMemcpy'), (2, 'cudaMemcpy_v3020'),
        (3, 'cudaLaunchKernel_v7000'), (4, 'cuLaunchKernel'), (5, 'k');
"""


def _twins_export(tmp_path: Path, with_names: bool = True) -> Path:
    """15 blocking copies, each stored twice as an old Nsight does (the call and its versioned
    entry point nested inside, one correlation id), rows in either order; in the last one the
    versioned row is the outer span. Plus a kernel whose runtime and driver calls share an id."""
    rows = []
    for c in range(1, 16):
        t = c * 1000
        outer, inner = (t, t + 100, c, 1), (t + 10, t + 90, c, 2)
        if c == 15:
            outer, inner = (t, t + 100, c, 2), (t + 10, t + 90, c, 1)
        rows += [outer, inner] if c % 2 else [inner, outer]
    rows += [(20_000, 20_050, 20, 3), (20_005, 20_045, 20, 4)]
    name_col = ", nameId int" if with_names else ""
    values = ", ".join(
        f"({a}, {b}, {c}, {n})" if with_names else f"({a}, {b}, {c})" for a, b, c, n in rows
    )
    copies = ", ".join(
        f"({c * 1000 + 20}, {c * 1000 + 80}, 0, 7, {c}, 1, 0, 2, 64)" for c in range(1, 16)
    )
    return _db(
        tmp_path / "twins.sqlite",
        _STRINGS
        + f"""
        create table CUPTI_ACTIVITY_KIND_RUNTIME (start int, end int, correlationId int{name_col});
        insert into CUPTI_ACTIVITY_KIND_RUNTIME values {values};
        create table CUPTI_ACTIVITY_KIND_MEMCPY (start int, end int, deviceId int, streamId int,
            correlationId int, copyKind int, srcKind int, dstKind int, bytes int);
        insert into CUPTI_ACTIVITY_KIND_MEMCPY values {copies};
        create table CUPTI_ACTIVITY_KIND_KERNEL (start int, end int, deviceId int, streamId int,
            correlationId int, demangledName int);
        insert into CUPTI_ACTIVITY_KIND_KERNEL values (20100, 20200, 0, 7, 20, 5);
        """,
    )


def test_versioned_runtime_twins_are_one_call_the_outer_span(tmp_path):
    tr = read_nsys(_twins_export(tmp_path))
    h = tr.host
    copies = h.api == ApiKind.MEMCPY_SYNC
    # 15 host-blocking copies, not 30: one row per correlation id
    assert int(copies.sum()) == 15
    assert sorted(h.correlation[copies].tolist()) == list(range(1, 16))
    # the kept row is the outer span (entry to return), whichever name it has (c = 15)
    by_corr = {
        int(c): (int(a), int(b))
        for c, a, b in zip(h.correlation, h.api_start_ns, h.api_end_ns, strict=True)
    }
    assert all(by_corr[c] == (c * 1000, c * 1000 + 100) for c in range(1, 16))
    assert tr.device_properties["duplicate_runtime_rows"] == 15
    # a runtime call and the driver call it made share an id but are two calls: both stay
    assert int((h.correlation == 20).sum()) == 2


def test_without_call_names_nothing_is_merged(tmp_path):
    """No nameId column: rows cannot be told to be the same call, so none is dropped."""
    tr = read_nsys(_twins_export(tmp_path, with_names=False))
    assert len(tr.host) == 32 and tr.device_properties["duplicate_runtime_rows"] == 0


def test_the_shipped_export_has_no_runtime_twins():
    """The A100 export (a recent Nsight) stores each call once: nothing is dropped from it."""
    con = sqlite3.connect(NSYS)
    n, distinct = con.execute(
        "select count(*), count(distinct correlationId) from CUPTI_ACTIVITY_KIND_RUNTIME"
        " where correlationId > 0"
    ).fetchone()
    con.close()
    tr = read_nsys(NSYS)
    assert n == distinct == len(tr.host) == 3048
    assert tr.device_properties["duplicate_runtime_rows"] == 0


# -- Nsight: copy names -------------------------------------------------------------------------

_MEM_ENUM = """
    create table ENUM_CUDA_MEM_KIND (id int, name text, label text);
    insert into ENUM_CUDA_MEM_KIND values
        (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),
        (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'),
        (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device'),
        (3, 'CUDA_MEMOPR_MEMORY_KIND_ARRAY', 'Array'),
        (4, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED', 'Managed'),
        (5, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC', 'Device Static'),
        (6, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC', 'Managed Static'),
        (7, 'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN', 'Unknown');
"""


def _copies_export(
    tmp_path: Path, name: str, rows: list[tuple], kinds: bool, extra: str = ""
) -> Path:
    cols = "copyKind int, srcKind int, dstKind int" if kinds else "copyKind int"
    sql = [", ".join("NULL" if v is None else str(v) for v in r) for r in rows]
    vals = ", ".join(f"({i * 100}, {i * 100 + 50}, 0, 7, {i + 1}, {v})" for i, v in enumerate(sql))
    return _db(
        tmp_path / name,
        extra
        + f"""
        create table CUPTI_ACTIVITY_KIND_MEMCPY (start int, end int, deviceId int, streamId int,
            correlationId int, {cols});
        insert into CUPTI_ACTIVITY_KIND_MEMCPY values {vals};
        """,
    )


def test_copy_names_are_kinetos_with_the_exports_memory_kinds(tmp_path):
    rows = [(1, 0, 2), (2, 2, 1), (8, 2, 2), (10, 2, 2), (9, 1, 0), (1, 5, 6), (7, 4, 3)]
    want = [
        "Memcpy HtoD (Pageable -> Device)",
        "Memcpy DtoH (Device -> Pinned)",
        "Memcpy DtoD (Device -> Device)",
        "Memcpy PtoP (Device -> Device)",
        "Memcpy HtoH (Pinned -> Pageable)",
        "Memcpy HtoD (Device Static -> Managed Static)",
        "Memcpy DtoA (Managed -> Array)",
    ]
    for extra in (_MEM_ENUM, ""):  # the export's enum table, or Nsight's numbering without it
        p = _copies_export(tmp_path, f"k{len(extra)}.sqlite", rows, True, extra)
        assert _copy_names(read_nsys(p)) == want


def test_the_exports_enum_ids_win_over_the_usual_numbering(tmp_path):
    """Ids are read through the export's own ENUM_CUDA_MEM_KIND, by enum name."""
    shuffled = _MEM_ENUM.replace(
        "(0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE'", "(9, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE'"
    )
    p = _copies_export(tmp_path, "s.sqlite", [(1, 9, 2), (1, 0, 2)], True, shuffled)
    assert _copy_names(read_nsys(p)) == [
        "Memcpy HtoD (Pageable -> Device)",
        "Memcpy HtoD (Unknown -> Device)",  # id 0 is no kind in this export
    ]


def test_unknown_and_missing_kinds(tmp_path):
    rows = [(42, 99, 2), (0, None, 2), (11, 4, 4)]
    p = _copies_export(tmp_path, "u.sqlite", rows, True, _MEM_ENUM)
    assert _copy_names(read_nsys(p)) == [
        "Memcpy Unknown (Unknown -> Device)",
        "Memcpy Unknown (Unknown -> Device)",
        "Memcpy UvmHtoD (Managed -> Managed)",  # Nsight's unified-memory migration kinds
    ]
    # an export without srcKind/dstKind: the direction alone, no parenthesis
    p = _copies_export(tmp_path, "d.sqlite", [(1,), (2,), (77,)], False)
    assert _copy_names(read_nsys(p)) == ["Memcpy HtoD", "Memcpy DtoH", "Memcpy Unknown"]


def test_every_copy_name_parses_with_the_lever_pattern(tmp_path):
    rows = [(k, s, d) for k in range(15) for s in (0, 3, 5, 8) for d in (2, 6)]
    names = _copy_names(read_nsys(_copies_export(tmp_path, "all.sqlite", rows, True, _MEM_ENUM)))
    names += _copy_names(
        read_nsys(_copies_export(tmp_path, "dir.sqlite", [(k,) for k in range(15)], False))
    )
    for name in names:
        m = COPY_NAME.fullmatch(name)
        assert m, name
        if "(" in name:
            assert m.group(2) and m.group(3), name


def test_the_shipped_exports_copies_are_pageable():
    """The A100 export: srcKind 0 / dstKind 2 are Pageable / Device in Nsight's numbering (in
    CUPTI's they would read "Unknown -> Pinned", impossible for a host-to-device copy)."""
    con = sqlite3.connect(NSYS)
    n = dict(
        con.execute(
            "select copyKind, count(*) from CUPTI_ACTIVITY_KIND_MEMCPY group by 1"
        ).fetchall()
    )
    con.close()
    assert collections.Counter(_copy_names(read_nsys(NSYS))) == {
        "Memcpy HtoD (Pageable -> Device)": n[1],
        "Memcpy DtoH (Device -> Pageable)": n[2],
    }


# -- counting semantics ---------------------------------------------------------------------------


def _trace(rows, host, steps=None) -> Trace:
    """rows: (start_ns, end_ns, correlation, kind); host: (correlation, start_ns, end_ns)."""
    names = NameTable(["k"])
    seg = Segments.from_columns(
        start_ns=np.array([r[0] for r in rows], np.int64),
        end_ns=np.array([r[1] for r in rows], np.int64),
        correlation=np.array([r[2] for r in rows], np.int64),
        kind=np.array([r[3] for r in rows], np.uint8),
        stream=np.full(len(rows), 7, np.int32),
        name=np.zeros(len(rows), np.int32),
    )
    h = HostEvents(
        correlation=np.array([r[0] for r in host], np.int64),
        stream=np.full(len(host), -1, np.int32),
        api_start_ns=np.array([r[1] for r in host], np.int64),
        api_end_ns=np.array([r[2] for r in host], np.int64),
    )
    props = {} if steps is None else {"profiler_steps": steps}
    return Trace(segments=seg, names=names, host=h, device_properties=props, source="t")


K, C = Kind.KERNEL, Kind.MEMCPY
MS = 1_000_000
#: three steps of 1 ms; the last starts at 2 ms
STEPS = [[0, 1 * MS], [1 * MS, 2 * MS], [2 * MS, 3 * MS]]
ROWS = [
    (100_000, 200_000, 1, K),  # launched in step 1: kept
    (2_100_000, 2_300_000, 2, K),  # runs in the last step but was launched before it: kept
    (2_050_000, 2_060_000, 3, C),  # launched exactly at the last step's start: dropped
    (2_600_000, 2_700_000, 4, K),  # launched in the last step: dropped
    (500_000, 600_000, 5, K),  # no launch event: dropped
    (1_000_000, 1_100_000, -1, K),  # no correlation id (a "CPU op" to HTA), early: kept
    (2_200_000, 2_250_000, -1, K),  # the same, in the last step: dropped
]
HOST = [
    (1, 90_000, 95_000),
    (2, 1_500_000, 1_510_000),
    (3, 2 * MS, 2_010_000),
    (4, 2_500_000, 2_510_000),
]


def test_exact_counting_is_the_trace_itself():
    tr = _trace(ROWS, HOST, STEPS)
    out, statement = apply_counting(tr, "exact")
    assert out is tr and statement == DEFAULT_COUNTING
    assert "no ProfilerStep filter" in DEFAULT_COUNTING and "exact nanoseconds" in DEFAULT_COUNTING


def test_hta_counting_drops_the_last_step_and_rows_without_a_launch():
    tr = _trace(ROWS, HOST, STEPS)
    out, statement = apply_counting(tr, "hta")
    s = out.segments
    assert sorted(zip(s.correlation.tolist(), s.start_ns.tolist(), strict=True)) == [
        (-1, 1_000_000),
        (1, 100_000),
        (2, 2_100_000),
    ]
    assert sorted(out.host.correlation.tolist()) == [1, 2]  # host rows from the last step on go
    assert "dropped 3 GPU rows (2 kernels, 1 copy) launched at or after" in statement
    assert "1 GPU row (1 kernel) without a launch event" in statement
    assert "2 host rows from then on dropped" in statement
    assert "nothing rounded" in statement
    assert len(tr.segments) == len(ROWS) and len(tr.host) == len(HOST)  # the input is untouched


def test_a_row_matching_several_host_events_is_counted_once_and_said():
    tr = _trace(ROWS, [*HOST, (1, 91_000, 92_000)], STEPS)  # a runtime and a driver call
    out, statement = apply_counting(tr, "hta")
    assert int((out.segments.correlation == 1).sum()) == 1
    assert "1 GPU row sharing a correlation id with several host events" in statement


@pytest.mark.parametrize(
    "steps,said",
    [
        (None, "no ProfilerStep annotations are known"),
        ([], "the trace has 0 ProfilerStep annotations"),
        ([[0, 3 * MS]], "the trace has 1 ProfilerStep annotation and"),
    ],
)
def test_hta_filters_nothing_with_fewer_than_two_steps(steps, said):
    """HTA's _filter_irrelevant_gpu_kernels returns early below two ProfilerStep names: even
    the rows without a launch event stay."""
    out, statement = apply_counting(_trace(ROWS, HOST, steps), "hta")
    assert len(out.segments) == len(ROWS) and len(out.host) == len(HOST)
    assert said in statement and "no step filter" in statement


def test_hta_counting_rounds_fractional_times_as_hta_does():
    rows = [
        (1_500, 4_250, 1, K),  # 1.5–4.25 µs → 2–4 µs
        (10_200, 10_700, 2, K),  # spans no whole µs: HTA −1 µs, here 0 µs at 11 µs
        (20_000, 23_000, 3, K),  # whole µs: unchanged
    ]
    host = [(1, 1_100, 1_400), (2, 9_000, 9_999), (3, 19_000, 19_500)]
    out, statement = apply_counting(_trace(rows, host), "hta")
    s = out.segments
    assert list(zip(s.start_ns.tolist(), s.end_ns.tolist(), strict=True)) == [
        (2_000, 4_000),
        (11_000, 11_000),
        (20_000, 23_000),
    ]
    assert out.host.api_start_ns.tolist() == [2_000, 9_000, 19_000]
    assert out.host.api_end_ns.tolist() == [2_000, 9_000, 19_000]
    assert "times rounded to whole µs" in statement
    assert "1 GPU row spanning no whole µs" in statement


def test_the_hta_cut_compares_rounded_times():
    """HTA rounds before it filters: a launch at 2000.2 µs precedes a last step starting at
    2000.4 µs, but both round up to 2001 µs, so to HTA the launch is not before the step and
    its kernel goes."""
    steps = [[0, 1 * MS], [2_000_400, 3 * MS]]
    rows = [(2_100_000, 2_200_000, 1, K), (100_500, 200_000, 2, K)]
    host = [(1, 2_000_200, 2_000_900), (2, 100_000, 100_300)]
    out, _ = apply_counting(_trace(rows, host, steps), "hta")
    assert out.segments.correlation.tolist() == [2]


def test_unknown_counting_mode():
    with pytest.raises(ValueError, match="unknown counting mode 'htaa'"):
        apply_counting(_trace(ROWS, HOST), "htaa")
    with pytest.raises(ValueError, match="unknown counting mode"):
        AnalyzeOptions(counting="all", workers=1)


def _rounded_gpu_ns(path: Path) -> tuple[int, int]:
    """GPU time of a Kineto trace, exact and as HTA rounds it (whole µs, start up, end down)."""
    s = read_kineto(path).segments
    timed = np.isin(s.kind, [Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM])
    a, b = s.start_ns[timed], s.end_ns[timed]
    lo, hi = -(-a // 1000), b // 1000
    return int((b - a).sum()), int((np.maximum(hi, lo) - lo).sum() * 1000)


def test_analyze_and_the_cli_pass_the_counting_mode_on(capsys):
    exact_ns, rounded_ns = _rounded_gpu_ns(ROCM)
    assert exact_ns != rounded_ns  # the ROCm trace's fractional µs make the two differ
    (a,) = analyze([str(ROCM)], AnalyzeOptions(counting="hta", workers=1)).outcomes
    assert a.analysis is not None and a.analysis.gpu_time_ns == rounded_ns
    assert main(["analyze", str(ROCM), "--json", "--no-write", "--counting", "hta"]) == 0
    got = json.loads(capsys.readouterr().out)[0]
    assert got["gpu_time_ns"] == rounded_ns
    assert got["counting"].startswith("Counting as Holistic Trace Analysis's default load")
    assert main(["analyze", str(ROCM), "--json", "--no-write"]) == 0  # default: exact
    got = json.loads(capsys.readouterr().out)[0]
    assert got["gpu_time_ns"] == exact_ns and got["counting"] == DEFAULT_COUNTING
    assert main(["analyze", str(ROCM), "--counting", "some"]) == 2


# -- Nsight: runs of calls that launch nothing, merged as Kineto's are -------------------------


def test_an_nsight_exports_idle_calls_are_merged_and_the_analysis_is_the_same(tmp_path):
    """SYNTHETIC export (built here): 40 steps of a launch then three back-to-back calls that
    launch nothing (cudaGetDevice, cudaStreamIsCapturing). analyze reads it with each run of
    them as one host row (engine.trace.idle_calls, as for Kineto files); every figure of the
    analysis is what the unmerged trace gives."""
    from engine.analyze.breakdown import steady
    from engine.analyze.compute import analyze_trace
    from engine.trace.read import read_trace

    rows, kernels = [], []
    for i in range(40):
        t = 10_000 + i * 1_000
        c = 4 * i + 1
        rows.append(f"({t}, {t + 30}, {c}, 3)")  # cudaLaunchKernel
        kernels.append(f"({t + 40}, {t + 400 + 13 * (i % 5)}, 0, 7, {c}, 5)")
        for j, name in enumerate((6, 7, 6)):  # idle calls, each starting as the last ends
            rows.append(f"({t + 30 + 20 * j}, {t + 50 + 20 * j}, {c + 1 + j}, {name})")
    path = _db(
        tmp_path / "idle.sqlite",
        """
        create table StringIds (id int, value text);
        insert into StringIds values (3, 'cudaLaunchKernel_v7000'), (5, 'k'),
            (6, 'cudaGetDevice'), (7, 'cudaStreamIsCapturing_v10000');
        create table CUPTI_ACTIVITY_KIND_RUNTIME (start int, end int, correlationId int,
            nameId int);
        """
        + f"insert into CUPTI_ACTIVITY_KIND_RUNTIME values {', '.join(rows)};"
        + """
        create table CUPTI_ACTIVITY_KIND_KERNEL (start int, end int, deviceId int, streamId int,
            correlationId int, demangledName int);
        """
        + f"insert into CUPTI_ACTIVITY_KIND_KERNEL values {', '.join(kernels)};",
    )
    full = read_trace(path)
    merged = read_trace(path, merge_idle=steady.exact_at)
    assert len(full.host) == 160 and len(merged.host) == 80  # each run of three: one row
    assert (merged.host.api == ApiKind.LAUNCH).sum() == 40
    a = analyze_trace(full).analysis.model_dump()
    b = analyze_trace(merged).analysis.model_dump()
    assert a == b and a["interventions"]
