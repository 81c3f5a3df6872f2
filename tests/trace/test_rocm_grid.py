"""Issue 47: on ROCm, Kineto (roctracer) writes the ``grid`` of a kernel launched by
``hipExtModuleLaunchKernel`` as HIP takes it there, a global work size in work-items; the reader
turns it into workgroups (engine/trace/kineto/kineto.py ``_workgroups``). Kernels launched by
``hipLaunchKernel`` / ``hipModuleLaunchKernel`` keep their grid: it is in workgroups already."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from engine.trace.kineto.kineto import read_kineto
from engine.trace.segments import Kind
from tests.paths import TRACES

KINETO = TRACES / "kineto"


def _raw_launches(path: Path) -> dict[int, tuple[str, int, int]]:
    """correlation → (launch call, grid product, block product) of every kernel, read from the
    file itself with the json module (the reader under test is not used)."""
    with gzip.open(path, "rt") as f:
        ev = json.load(f)["traceEvents"]
    call = {
        e["args"]["correlation"]: e["name"]
        for e in ev
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    out = {}
    for e in ev:
        a = e.get("args", {})
        if e.get("cat") == "kernel" and isinstance(a.get("grid"), list):
            g = a["grid"][0] * a["grid"][1] * a["grid"][2]
            b = a["block"][0] * a["block"][1] * a["block"][2]
            out[a["correlation"]] = (call.get(a["correlation"], "?"), g, b)
    return out


def _read(path: Path) -> dict[int, tuple[int, int]]:
    s = read_kineto(path).segments
    k = s.kind == Kind.KERNEL
    return {
        int(c): (int(g), int(b))
        for c, g, b in zip(s.correlation[k], s.grid[k], s.block[k], strict=True)
    }


@pytest.mark.parametrize(
    "name",
    ["mi300x_torch_compile_triton", "mi300x_hf_bert_small", "mi210_gpu_only"],
)
def test_real_rocm_traces_grid_in_workgroups_only_where_the_launch_gives_work_items(name):
    """Real roctracer traces (TraceLens test data): every kernel launched by
    hipExtModuleLaunchKernel (Tensile GEMMs, MIOpen ops) reads grid = work-items / block; every
    other launch call's kernels keep the grid as recorded."""
    path = KINETO / f"{name}.json.gz"
    raw, got = _raw_launches(path), _read(path)
    by_call: dict[str, int] = defaultdict(int)
    for corr, (call, g, b) in raw.items():
        if corr not in got:
            continue
        by_call[call] += 1
        want = -(-g // b) if call == "hipExtModuleLaunchKernel" else g
        assert got[corr] == (want, b), (call, g, b, got[corr])
    assert by_call["hipExtModuleLaunchKernel"] > 0, by_call
    assert set(by_call) - {"hipExtModuleLaunchKernel"}, by_call  # other calls are checked too


def test_a_tensile_gemm_on_mi300x_reads_its_workgroup_count():
    """mi300x_torch_compile_triton: the Cijk_…MT256x192x64 GEMMs were recorded as grid
    [350208, 1, 1] and [1400832, 1, 1] with block [256, 1, 1] (hipExtModuleLaunchKernel): 1368
    and 5472 workgroups. The Triton reduction launched by hipModuleLaunchKernel with grid
    [16384, 1, 1] and block [512, 1, 1] keeps 16384 programs."""
    t = read_kineto(KINETO / "mi300x_torch_compile_triton.json.gz")
    s, names = t.segments, t.names.names()
    grids: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for n, g, b in zip(s.name, s.grid, s.block, strict=True):
        grids[names[n][:9]].add((int(g), int(b)))
    assert grids["Cijk_Alik"] == {(1368, 256), (5472, 256)}, grids["Cijk_Alik"]
    assert grids["triton_re"] == {(16384, 512)}, grids["triton_re"]


def _synthetic(tmp_path: Path, launches: list[tuple[str, list[int], list[int]]]) -> Path:
    ev: list[dict] = []
    for i, (call, grid, block) in enumerate(launches):
        corr = 100 + i
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": call, "pid": 1, "tid": 1,
                   "ts": 10 * i, "dur": 2, "args": {"correlation": corr}})  # fmt: skip
        ev.append({"ph": "X", "cat": "kernel", "name": f"k_{i}", "pid": 0, "tid": 3,
                   "ts": 10 * i + 5, "dur": 3,
                   "args": {"correlation": corr, "device": 0, "stream": 3, "grid": grid,
                            "block": block}})  # fmt: skip
    p = tmp_path / "synthetic_rocm_grid.json"
    dev = [{"id": 0, "name": "AMD Instinct MI300X", "numSms": 304, "warpSize": 64}]
    p.write_text(json.dumps({"traceEvents": ev, "deviceProperties": dev}))
    return p


def test_synthetic_launch_calls_decide_the_grid_unit(tmp_path):
    """SYNTHETIC rows: the same recorded grid [71680, 1, 1] with block [256, 1, 1] is 280
    workgroups when hipExtModuleLaunchKernel launched it (the issue's Tensile addmm) and 71680
    when hipLaunchKernel or hipModuleLaunchKernel did; a global size that is not a multiple of
    the workgroup rounds up (1000 work-items in 256-wide workgroups: 4); a 2-D global size of
    [512, 4, 1] in [256, 1, 1] workgroups is 8."""
    p = _synthetic(
        tmp_path,
        [
            ("hipExtModuleLaunchKernel", [71680, 1, 1], [256, 1, 1]),
            ("hipLaunchKernel", [71680, 1, 1], [256, 1, 1]),
            ("hipModuleLaunchKernel", [71680, 1, 1], [256, 1, 1]),
            ("hipExtModuleLaunchKernel", [1000, 1, 1], [256, 1, 1]),
            ("hipExtModuleLaunchKernel", [512, 4, 1], [256, 1, 1]),
            ("hipExtModuleLaunchKernel", [64, 1, 1], [0, 0, 0]),  # no block: left as recorded
        ],
    )
    got = _read(p)
    assert [got[100 + i][0] for i in range(6)] == [280, 71680, 71680, 4, 8, 64], got
