"""Nsight rows with a NULL start or end (issue 51): read as 0, they ran from the session's start
("459,906 ms GPU time over 875.7 ms", no note). A NULL time is no time: the row is skipped and
counted, as one whose end is INT64_MAX already was. The export is the tests' real CloverLeaf
trace with some rows' times set to NULL here."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from engine.analyze.compute import analyze_trace
from engine.analyze.run import load_trace
from tests.paths import TRACES

CLOVERLEAF = TRACES / "nsys" / "a100_cloverleaf.sqlite"


def test_null_times_are_skipped_and_counted(tmp_path: Path):
    base = analyze_trace(load_trace(str(CLOVERLEAF))).analysis
    bad = tmp_path / "nulls.sqlite"
    shutil.copy(CLOVERLEAF, bad)
    con = sqlite3.connect(bad)
    with con:  # (the table rebuilt without its NOT NULL: what a damaged export holds)
        con.execute("CREATE TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("ALTER TABLE k RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
        ids = [r[0] for r in con.execute(
            "SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 20"
        )]  # fmt: skip
        con.executemany(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = NULL WHERE rowid = ?",
            [(i,) for i in ids[:10]],
        )
        con.executemany(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = NULL WHERE rowid = ?",
            [(i,) for i in ids[10:]],
        )
    con.close()
    t = load_trace(str(bad))
    assert t.device_properties["malformed_events"] == 20
    a = analyze_trace(t).analysis
    assert a.segments == base.segments - 20
    assert a.gpu_time_ns <= base.gpu_time_ns  # never more time than the whole export had
    assert any("20 malformed events were skipped" in n for n in a.notes)
