"""An Nsight Systems export with no GPU row (issue 38): it said "no GPU activity in this trace
(a CPU-only profile?)" — or, captured without CUDA at all (``--trace=osrt,nvtx``), that it was
"not an Nsight Systems export". It now says what the export holds, that it is CPU-only, and
what a GPU trace would add (as engine.analyze.breakdown.cpu_trace does for a CPU-only Kineto file)."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from engine.trace.errors import TraceImportError
from engine.trace.nsys.nsys import GPU_HINT, read_nsys
from gitm_tui.cli import main
from gitm_tui.exit_codes import ExitCode
from tests.paths import TRACES

NSYS = TRACES / "nsys" / "a100_cloverleaf.sqlite"
_GPU_ROWS = ("KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION")


def _without(path, *tables: str):
    """A copy of the shipped export (SYNTHETIC edit: ``tables`` dropped)."""
    shutil.copyfile(NSYS, path)
    con = sqlite3.connect(path)
    for t in tables:
        con.execute(f"DROP TABLE IF EXISTS {t}")
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    d = tmp_path_factory.mktemp("nsys")
    gpu = tuple(f"CUPTI_ACTIVITY_KIND_{t}" for t in _GPU_ROWS)
    return {
        # CUDA traced, but no GPU work in the capture: its API calls are all there is
        "cuda_calls_only": _without(d / "calls.sqlite", *gpu),
        # captured without CUDA at all: no CUPTI table, no GPU described
        "no_cuda": _without(
            d / "osrt.sqlite", *gpu, "CUPTI_ACTIVITY_KIND_RUNTIME", "TARGET_INFO_GPU"
        ),
    }


def test_an_export_with_cuda_calls_and_no_gpu_rows_says_what_it_holds(exports, capsys):
    rc = main(["analyze", str(exports["cuda_calls_only"]), "--no-write"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == ExitCode.INPUT and len(err) == 1 and "Traceback" not in err[0]
    line = err[0]
    assert "an Nsight Systems export with no GPU rows — CPU-only (" in line
    # the counts are the shipped export's own rows (SQLite's count(*) of each table)
    assert "3,048 CUDA API calls" in line and "1,831 OS runtime calls" in line
    assert "1,531 CPU samples" in line and "6 named threads" in line
    assert "no CUDA kernel, copy or memset" in line and GPU_HINT in line
    assert "no GPU activity in this trace" not in line


def test_an_export_captured_without_cuda_is_still_an_nsight_export(exports):
    with pytest.raises(TraceImportError) as e:
        read_nsys(exports["no_cuda"])
    line = str(e.value)
    assert "not an Nsight Systems export" not in line
    assert "CPU-only (1,831 OS runtime calls" in line and "CUDA API call" not in line
    assert "nsys profile --trace=cuda,nvtx,osrt" in line


def test_an_sqlite_file_of_another_program_is_still_refused(tmp_path):
    db = tmp_path / "other.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE META_DATA_EXPORTED (x)")  # a name near, not Nsight's own
    con.commit()
    con.close()
    with pytest.raises(TraceImportError, match="not an Nsight Systems export"):
        read_nsys(db)
