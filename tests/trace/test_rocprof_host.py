"""rocprofv3 ``hip_api_trace.csv`` (``--hip-trace``) read as host rows, linked to the kernels by
``Correlation_Id``: on the synthetic output of test_rocprof.py (synthetic, labelled so) with a
HIP API trace written in rocprofv3's header and domain names."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from engine.trace.errors import TraceImportError
from engine.trace.read import read_trace
from engine.trace.segments import Kind
from engine.trace.trace import ApiKind
from tests.trace.test_rocprof import synthetic_output

#: rocprofv3's header of every API trace (generateCSV.cpp)
API_HEADER = ["Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id",
              "Start_Timestamp", "End_Timestamp"]  # fmt: skip


def _hip_trace(folder: Path, rows: list[list[object]]) -> None:
    with (folder / "1_hip_api_trace.csv").open("w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(API_HEADER)
        w.writerows(rows)


@pytest.fixture(scope="module")
def with_hip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic output (6 dispatches, Correlation_Id 1..6, each starting at
    1 ms + d x 100 µs) with the hipLaunchKernel call of each, a device sync and a compiler call
    with no device work."""
    folder = synthetic_output(tmp_path_factory.mktemp("rocprof_host") / "out")
    rows: list[list[object]] = [
        ["HIP_COMPILER_API_EXT", "__hipRegisterFunction", 7, 7, 100, 10, 20]
    ]
    for d in range(1, 7):
        s = 1_000_000 + d * 100_000
        rows.append(["HIP_RUNTIME_API_EXT", "hipLaunchKernel", 7, 7, d, s - 8_000, s - 3_000])
    rows.append(["HIP_RUNTIME_API_EXT", "hipDeviceSynchronize", 7, 7, 200, 1_700_000, 1_760_000])
    _hip_trace(folder, rows)
    return folder


def test_hip_calls_are_host_rows_linked_to_their_kernels(with_hip: Path) -> None:
    t = read_trace(with_hip)
    host, seg = t.host, t.segments
    assert len(host) == 8  # every HIP call of the file, one row each
    assert host.api_start_ns.tolist() == sorted(host.api_start_ns.tolist())
    k = seg.kind == Kind.KERNEL
    rows = host.rows_of(seg.correlation[k])
    assert (rows >= 0).all()  # each kernel finds the hipLaunchKernel that launched it
    assert (host.api[rows] == ApiKind.LAUNCH).all()
    assert (host.api_end_ns[rows] < seg.start_ns[k]).all()
    assert sorted(host.api.tolist()).count(ApiKind.SYNC) == 1


def test_hip_trace_with_a_bad_time_is_one_line(tmp_path: Path) -> None:
    folder = synthetic_output(tmp_path / "out")
    _hip_trace(folder, [["HIP_RUNTIME_API_EXT", "hipLaunchKernel", 7, 7, 1, "later", 5]])
    with pytest.raises(TraceImportError, match="Start_Timestamp is not a number") as e:
        read_trace(folder)
    assert "\n" not in str(e.value)


def test_kernels_without_a_hip_trace_have_no_host_rows(with_hip: Path, tmp_path: Path) -> None:
    t = read_trace(synthetic_output(tmp_path / "plain"))
    assert len(t.host) == 0
    assert np.array_equal(
        t.segments.start_ns, read_trace(with_hip).segments.start_ns
    )  # (the device rows do not depend on the host file)
