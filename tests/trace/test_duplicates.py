"""Events a trace lists twice are counted once, and said (issue 51: "every event listed twice
counts twice with no note", Kineto and Nsight). The traces are the tests' real ones, with their
events written twice here; the rule is checked to drop nothing from any real trace as it is."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engine.analyze.compute import analyze_trace
from engine.trace.read import read_trace
from tests.paths import TRACES

KINETO = TRACES / "kineto" / "a100_alexnet_2streams.json.gz"
CLOVERLEAF = TRACES / "nsys" / "a100_cloverleaf.sqlite"


def _same_counts(base, twice) -> None:
    a, b = analyze_trace(base).analysis, analyze_trace(twice).analysis
    assert b.segments == a.segments and b.kernels == a.kernels
    assert b.gpu_time_ns == a.gpu_time_ns and b.span_ns == a.span_ns
    assert [s.kernel_time_ns for s in b.streams] == [s.kernel_time_ns for s in a.streams]
    assert any("listed twice in the trace" in n and "counted once" in n for n in b.notes)
    assert not any("listed twice" in n for n in a.notes)


def test_a_kineto_trace_with_every_event_twice_counts_as_the_trace_once(tmp_path: Path):
    doc = json.loads(gzip.decompress(KINETO.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] for _ in (0, 1)]
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps(doc))
    base, got = read_trace(KINETO), read_trace(twice)
    assert got.device_properties["duplicate_rows"] == len(base.segments)
    assert got.device_properties["duplicate_host_rows"] > 0
    _same_counts(base, got)


def test_an_nsight_export_with_its_kernel_rows_twice_counts_them_once(tmp_path: Path):
    twice = tmp_path / "twice.sqlite"
    shutil.copy(CLOVERLEAF, twice)
    con = sqlite3.connect(twice)
    with con:  # (the table rebuilt without its keys: what a merged export may hold)
        con.execute("CREATE TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("INSERT INTO k SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("ALTER TABLE k RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
        kernels = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    base, got = read_trace(CLOVERLEAF), read_trace(twice)
    assert got.device_properties["duplicate_rows"] == kernels // 2
    _same_counts(base, got)


def test_rows_that_only_look_alike_are_all_counted(tmp_path: Path):
    """Two rows of no duration at one instant with no correlation id may be two events; two
    rows with different correlation ids are two launches, whatever else they share."""
    from engine.trace.duplicates import drop_duplicates

    t = read_trace(KINETO)
    seg = t.segments
    i = int(np.flatnonzero(seg.correlation >= 0)[0])
    extra = seg.take([i, i])
    extra.correlation[:] = [seg.correlation.max() + 1, seg.correlation.max() + 2]
    zero = seg.take([i, i])
    zero.correlation[:] = -1
    zero.end_ns[:] = zero.start_ns
    from engine.trace.segments import Segments

    t.segments = Segments.concat([seg, extra, zero])
    n = len(t.segments)
    assert len(drop_duplicates(t).segments) == n
    assert "duplicate_rows" not in t.device_properties


@pytest.mark.parametrize(
    "path",
    sorted(p for p in TRACES.rglob("*") if p.suffix in (".gz", ".sqlite") and p.is_file()),
    ids=lambda p: p.name,
)
def test_no_real_trace_has_a_row_dropped_as_it_is(path: Path):
    """The rule drops nothing from the real traces of the repository as they were recorded."""
    try:
        t = read_trace(path)
    except Exception:  # not a trace this reads alone (a rank folder's file, a CPU trace)
        pytest.skip("not read alone")
    assert "duplicate_rows" not in t.device_properties
    assert "duplicate_host_rows" not in t.device_properties
