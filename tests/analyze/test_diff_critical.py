"""`gitm-tui diff` compares the two traces' critical paths by headline group (issue 46 item 6:
"exposed communication 38 % → 12 %"): on two SYNTHETIC traces with a known answer, on HTA's
`trace_diff` pair, one ProfilerStep of each, and a side with no path — unknown, never 0."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from engine.analyze.breakdown.critical import GROUPS
from engine.analyze.diff.diff import critical_diff, diff_paths, path_groups, share_text
from engine.analyze.diff.diff_model import TraceDiff
from gitm_tui.commands.diff import WIDTH, critical_lines, diff_lines
from tests.paths import TRACES

KINETO = TRACES / "kineto"
#: HTA's trace_diff pair (tests/data/traces/hta_diff/README.md)
HTA_CONTROL = KINETO / "a100_training_3streams.json.gz"
HTA_TEST = KINETO / "v100_16gb_ddp_graphs_3streams.json.gz"
T0 = 1_700_000_000_000  # µs
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def _synthetic(path: Path, gemm_us: float, comm_us: float, steps: int = 30) -> Path:
    """A SYNTHETIC Kineto trace (written here, never recorded): one stream running, back to
    back, a GEMM of ``gemm_us`` then an AllReduce of ``comm_us``, ``steps`` times; the host
    launches everything up front and synchronises at the end. The device never idles, so the
    critical path is the stream: exposed communication comm/(gemm+comm) of it, kernels the
    rest."""
    ev: list[dict] = []
    t_dev, t_host = 10.0, 0.0
    corr = 1
    for _ in range(steps):
        for name, dur in (("ampere_sgemm_128x64_nn", gemm_us), (NCCL, comm_us)):
            t_host += 1.0
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": T0 + t_host,
                    "dur": 4.0,
                    "args": {"correlation": corr},
                }
            )
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                       "ts": T0 + t_dev, "dur": dur,
                       "args": {"stream": 7, "correlation": corr, "device": 0,
                                "grid": [108, 1, 1], "block": [256, 1, 1]}})  # fmt: skip
            t_host += 4.0
            t_dev += dur
            corr += 1
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1,
               "tid": 1, "ts": T0 + t_host + 1, "dur": t_dev - t_host + 2,
               "args": {"correlation": corr}})  # fmt: skip
    doc = {
        "schemaVersion": 1,
        "synthetic": True,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85e9,
                              "computeMajor": 8, "computeMinor": 0, "numSms": 108}],
        "traceEvents": ev,
    }  # fmt: skip
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return path


@pytest.fixture(scope="module")
def overlapped(tmp_path_factory) -> TraceDiff:
    """Before: AllReduces of 250 µs after GEMMs of 50 µs (communication-bound); after: the
    reverse (kernel-bound) — what overlapping or shrinking the communication would do."""
    d = tmp_path_factory.mktemp("critical_diff")
    before = _synthetic(d / "before.json.gz", gemm_us=50.0, comm_us=250.0)
    after = _synthetic(d / "after.json.gz", gemm_us=250.0, comm_us=50.0)
    return diff_paths(str(before), str(after))


def _group(d: TraceDiff, name: str):
    return next(g for g in d.critical_path.groups if g.group == name)


def test_a_known_change_of_bound_reads_exposed_communication_before_to_after(overlapped):
    c = overlapped.critical_path
    assert c.available and c.before.known and c.after.known
    comm, kern = _group(overlapped, "exposed communication"), _group(overlapped, "kernels")
    # the stream is the path: 250/(50+250) of it communication before, 50/300 after
    assert comm.before_share == pytest.approx(250 / 300, abs=0.03)
    assert comm.after_share == pytest.approx(50 / 300, abs=0.03)
    assert kern.before_share == pytest.approx(50 / 300, abs=0.03)
    assert kern.after_share == pytest.approx(250 / 300, abs=0.03)
    assert comm.delta_share == pytest.approx(comm.after_share - comm.before_share)
    assert c.before.bound_by == "exposed communication" and c.after.bound_by == "kernels"
    moved = (
        f"exposed communication {share_text(comm.before_share)} → {share_text(comm.after_share)}"
    )
    assert c.headline.startswith("bound by exposed communication → kernels; ")
    assert moved in c.headline, c.headline
    assert moved.startswith("exposed communication 8") and "→ 1" in moved  # 83% → 17%


def test_the_text_output_says_it_in_a_line_and_a_table_that_fit(overlapped):
    lines = diff_lines(overlapped)
    assert max(len(line) for line in lines) <= WIDTH
    text = "\n".join(lines)
    head = critical_lines(overlapped)[0]
    assert head.startswith("critical path: bound by exposed communication → kernels")
    comm = _group(overlapped, "exposed communication")
    row = next(line for line in lines if line.strip().startswith("exposed communication "))
    assert f"{comm.before_share:.1%}" in row and f"{comm.after_share:.1%}" in row
    assert f"{100 * comm.delta_share:+.1f} pt" in row
    assert "unknown" not in text.split("totals")[0]  # both paths known
    # the critical paths come before the totals: what bounds the step is read first
    assert text.index("critical path:") < text.index("\ntotals")


def test_groups_add_up_the_analyses_own_paths_on_htas_trace_diff_pair():
    """On HTA's trace_diff pair, each group's time is the sum of its parts on that trace's own
    path (``Analysis.critical_path``), and the shares are of that path's length."""
    from engine.analyze.api import AnalyzeOptions, analyze

    d = diff_paths(str(HTA_CONTROL), str(HTA_TEST))
    got = analyze(
        [str(HTA_CONTROL), str(HTA_TEST)], AnalyzeOptions(ranks=False, out_root=None, workers=1)
    )
    paths = [o.analysis.critical_path for o in got.outcomes]
    assert all(p is not None for p in paths)
    for cp, side, ns_of, share_of in (
        (paths[0], d.critical_path.before, "before_ns", "before_share"),
        (paths[1], d.critical_path.after, "after_ns", "after_share"),
    ):
        assert side.total_ns == cp.total_ns and side.headline == cp.headline
        want = path_groups({p.part: p.ns for p in cp.parts})
        for g in d.critical_path.groups:
            assert getattr(g, ns_of) == want[g.group], g.group
            assert getattr(g, share_of) == pytest.approx(want[g.group] / cp.total_ns)
    assert {g.group for g in d.critical_path.groups} == set(GROUPS)
    # the V100 DDP trace's path holds exposed communication; the A100 control's holds none
    comm = _group(d, "exposed communication")
    assert comm.before_ns == 0 and comm.after_share > 0.03
    assert f"exposed communication 0% → {share_text(comm.after_share)}" in d.critical_path.headline


def test_one_step_of_each_compares_the_steps_paths():
    control = TRACES / "hta_diff" / "control" / "base.json.gz"
    test = TRACES / "hta_diff" / "test" / "test.json.gz"
    d = diff_paths(str(control), str(test), step_before=1010, step_after=1010)
    c = d.critical_path
    assert c.before.window.startswith("ProfilerStep#1010 of ")
    assert c.after.window.startswith("ProfilerStep#1010 of ")
    # the step is 122 ms of host time on both sides, the path inside it the same
    assert c.before.total_ns == pytest.approx(d.before.mean_step_ns, rel=0.01)
    assert c.before.bound_by == c.after.bound_by == "host/framework"
    assert "no group moved" in c.headline


def test_a_side_with_no_path_is_unknown_never_zero():
    """The MTIA trace is not replayed (no CUDA/ROCm lever applies): its path is unknown, and
    every figure on its side is None — in the text 'unknown', in JSON null."""
    d = diff_paths(
        str(KINETO / "mtia_inference.json.gz"), str(KINETO / "a100_triton_one_kernel.json.gz")
    )
    c = d.critical_path
    assert not c.available and not c.before.known and c.after.known
    assert c.headline.startswith("unknown: before has no critical path; after: bound by ")
    assert c.before.total_ns is None and c.before.bound_by is None
    for g in c.groups:
        assert g.before_ns is None and g.before_share is None
        assert g.delta_ns is None and g.delta_share is None
        assert g.after_ns is not None
    lines = critical_lines(d)
    shown = [ln for ln in lines if ln.startswith("  ") and "unknown" in ln]
    assert any(ln.split()[0] == "length" for ln in shown)
    row = next(ln for ln in lines if ln.strip().startswith(f"{c.after.bound_by} "))
    assert row.split()[1:3] == ["unknown", "unknown"], row  # before: ms and share
    assert row.split()[-2:] == ["—", "—"], row  # no change where a side is unknown
    data = json.loads(d.to_json())["critical_path"]
    assert data["before"]["total_ns"] is None
    assert all(g["before_share"] is None for g in data["groups"])


def test_no_path_on_either_side_says_so_for_both():
    from engine.analyze.diff.diff_model import Side

    side = Side(source="x", format="kineto", device="unknown", rank=None, scope="whole trace",
                rows=1, kernels=1, gpu_time_ns=1, busy_ns=1, span_ns=1, steps=0, step_ids=[],
                rows_in_steps=0, mean_step_ns=None)  # fmt: skip
    c = critical_diff(None, None, side, side)
    assert c.headline.startswith("unknown: before and after have no critical path")
    assert all(g.before_ns is None and g.after_ns is None for g in c.groups)


def test_json_carries_the_comparison_and_markdown_names_it(overlapped):
    import jsonschema

    from tests.paths import ROOT

    data = json.loads(overlapped.to_json())
    assert data["schema_version"] == 2
    schema = json.loads((ROOT / "manifests" / "schemas" / "diff.schema.json").read_text())
    jsonschema.validate(data, schema)
    comm = next(g for g in data["critical_path"]["groups"] if g["group"] == "exposed communication")
    assert comm["parts"] == list(GROUPS["exposed communication"])
    assert comm["before_ns"] > comm["after_ns"] > 0
    assert (
        f"Critical path (each trace's share of its own path): {overlapped.critical_path.headline}"
        in (overlapped.markdown())
    )
