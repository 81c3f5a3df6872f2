"""The workload fingerprint (issue 39 part 1, engine.optimizer.fingerprint): the same program
captured twice matches, a changed batch size, model width or dtype does not, and says why; load
(times) and a shorter capture do not change a real trace's identity; a trial is credited only
for the workload the lever is allowed to leave behind."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from engine.analyze.fingerprints import fingerprint_file, main, trace_fingerprint
from engine.levers.library import LEVERS
from engine.optimizer.fingerprint import (
    Activity,
    Fingerprint,
    allowed_change_for,
    credit_trial,
    distance,
    fingerprint_of_trace,
    load_params,
    repeating_period,
)
from engine.trace.read import read_trace
from engine.trace.segments import Kind, Klass, NameTable, Segments
from engine.trace.trace import HostEvents, Trace
from tests.paths import TRACES

A100 = TRACES / "kineto" / "a100_training_3streams.json.gz"
V100 = TRACES / "kineto" / "v100_16gb_ddp_graphs_3streams.json.gz"
A100_GRAPHS = TRACES / "kineto" / "a100_80gb_5streams_graphs.json.gz"
THRESHOLD = load_params().threshold


# ------------------------------------------------------------------ two CPU runs of a script
@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Fingerprint]:
    """train_small.py profiled on the CPU, unmodified (tests/fixtures/profile_script.py): twice
    as it is, then with another batch size, model width and dtype, and once without
    ProfilerStep ranges. Six short runs of a small MLP: ~1.5 s, most of it importing torch."""
    pytest.importorskip("torch")
    import warnings

    from tests.fixtures.profile_script import profile_script

    out = tmp_path_factory.mktemp("runs")
    base = ["--steps", "6"]
    runs = {
        "a": dict(argv=base),
        "b": dict(argv=base),
        "batch": dict(argv=[*base, "--batch", "64"]),
        "width": dict(argv=[*base, "--width", "512"]),
        "dtype": dict(argv=base, dtype="float64"),
        "unmarked": dict(argv=base, steps=False),
    }
    got = {}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
        for tag, kw in runs.items():
            path = profile_script(out / f"{tag}.json", **kw)  # type: ignore[arg-type]
            got[tag] = fingerprint_file(path)
    return got


def test_two_cpu_runs_of_the_same_script_match(cpu_runs: dict[str, Fingerprint]) -> None:
    a, b = cpu_runs["a"], cpu_runs["b"]
    assert a.kind == "cpu" and not a.kernels and a.operators and a.shapes_recorded
    assert any("no kernels" in n for n in a.notes)
    assert a.steps.how == "ProfilerStep" and a.steps.count == 4
    d = distance(a, b)
    # nothing structural differs; the time part (load: the first run in a process is slower)
    # adds time_weight at most
    assert d.same and all(v == 0 for k, v in d.parts.items() if k != "time" and v is not None)
    assert d.value <= load_params().time_weight, d
    assert a.digest() == b.digest()  # names, calls per step and shapes: not times


def test_a_changed_batch_size_is_another_workload(cpu_runs: dict[str, Fingerprint]) -> None:
    d = distance(cpu_runs["a"], cpu_runs["batch"])
    assert not d.same and d.value > THRESHOLD
    assert d.parts["operators"] == 0  # the same operators, on other shapes
    assert "size 32 → 64 throughout" in d.reasons[0] and "aten::addmm" in d.reasons[0]


def test_a_changed_model_width_is_another_workload(cpu_runs: dict[str, Fingerprint]) -> None:
    d = distance(cpu_runs["a"], cpu_runs["width"])
    assert not d.same and d.value > THRESHOLD
    assert "size 256 → 512 throughout" in d.reasons[0]


def test_a_changed_dtype_is_another_workload(cpu_runs: dict[str, Fingerprint]) -> None:
    d = distance(cpu_runs["a"], cpu_runs["dtype"])
    assert not d.same and d.value > 2 * THRESHOLD
    assert d.reasons[0].startswith("dtype: aten::addmm input type")
    assert '"double"' in d.reasons[0]
    assert any(r.startswith("dtype mix:") and "fp64" in r for r in d.reasons)


def test_steps_found_where_the_operator_sequence_repeats(cpu_runs: dict[str, Fingerprint]) -> None:
    """No ProfilerStep ranges (the profiler without a schedule): the steps are where the
    operator sequence repeats, and the fingerprint is the annotated run's."""
    u = cpu_runs["unmarked"]
    assert u.steps.how == "repeating sequence" and u.steps.count >= 4 and u.steps.period > 0
    assert distance(cpu_runs["a"], u).same


def test_json_round_trip(cpu_runs: dict[str, Fingerprint]) -> None:
    fp = cpu_runs["a"]
    back = Fingerprint.from_json(fp.to_json())
    assert back == fp and back.digest() == fp.digest()
    d = json.loads(fp.to_json())
    assert d["digest"] == fp.digest()
    d["version"] = 99
    with pytest.raises(ValueError, match="version"):
        Fingerprint.from_dict(d)
    with pytest.raises(ValueError, match="not a fingerprint"):
        Fingerprint.from_dict({"version": 1})


# ------------------------------------------------------------------ real GPU traces
@pytest.fixture(scope="module")
def a100() -> tuple[Trace, Fingerprint]:
    t = read_trace(A100)
    return t, trace_fingerprint(t)


def _times(t: Trace, factor: float) -> Trace:
    """Every device row's duration times ``factor`` (a busier or a quieter machine)."""
    seg = t.segments.take(np.arange(len(t.segments)))
    seg.end_ns = seg.start_ns + np.round(seg.duration_ns * factor).astype(np.int64)
    return Trace(seg, t.names, t.host, t.device_properties, t.source)


def _first_steps(t: Trace, keep: int) -> Trace:
    """The capture cut after its first ``keep`` ProfilerSteps: rows launched later dropped."""
    props = t.device_properties
    cut = props["profiler_steps"][keep - 1][1]
    hrow = t.host.rows_of(t.segments.correlation)
    when = np.where(hrow >= 0, t.host.api_start_ns[np.maximum(hrow, 0)], t.segments.start_ns)
    short = dict(
        props,
        profiler_steps=props["profiler_steps"][:keep],
        profiler_step_ids=props["profiler_step_ids"][:keep],
    )
    return Trace(
        t.segments.take(when <= cut), t.names, t.host.take(t.host.api_start_ns <= cut), short,
        t.source,
    )  # fmt: skip


def test_a_real_trace_is_its_own_workload(a100: tuple[Trace, Fingerprint]) -> None:
    _, fp = a100
    assert fp.kind == "gpu" and fp.device == "A100 SXM4 40GB"
    assert fp.steps.how == "ProfilerStep" and fp.steps.count == 6
    assert fp.shapes_recorded and fp.kernels and fp.activity.launches
    assert fp.process.world_size == 8
    d = distance(fp, fp)
    assert d.value == 0 and d.same and not d.reasons


def test_load_does_not_change_a_real_workload(a100: tuple[Trace, Fingerprint]) -> None:
    t, fp = a100
    slower = trace_fingerprint(_times(t, 1.3))
    d = distance(fp, slower)
    assert d.same and d.value == 0
    assert slower.digest() == fp.digest()
    # three times slower: the time part is at its most, and still alone below the threshold
    d3 = distance(fp, trace_fingerprint(_times(t, 3.0)))
    assert d3.parts["time"] == 1 and d3.same and d3.value <= load_params().time_weight
    assert any("times move with load" in r for r in d3.reasons)


@pytest.mark.parametrize("path", [A100, A100_GRAPHS], ids=lambda p: p.name)
def test_half_the_steps_is_the_same_workload(path: Path) -> None:
    """Counts are medians per step: a capture of half the steps matches the whole one — the A100
    80GB trace's first step also runs 705 kernels launched before the capture began (left out)."""
    t = read_trace(path)
    whole = trace_fingerprint(t)
    half = trace_fingerprint(_first_steps(t, whole.steps.count // 2))
    d = distance(whole, half)
    assert d.same and d.value < 0.05, d
    if path == A100_GRAPHS:
        assert any("launched before the capture began" in n for n in whole.notes)


def test_another_real_trace_is_another_workload(a100: tuple[Trace, Fingerprint]) -> None:
    _, fp = a100
    d = distance(fp, fingerprint_file(V100))
    assert not d.same and d.value == 1.0
    assert "device A100 SXM4 40GB → V100 SXM2 16GB" in d.reasons
    assert "world size 8 → 2" in d.reasons
    # without the device and the world size, the structure alone still tells them apart
    bare = dataclasses.replace(fingerprint_file(V100), device="", process=fp.process)
    d2 = distance(dataclasses.replace(fp, device=""), bare)
    assert not d2.same and d2.value > 2 * THRESHOLD
    assert any(r.startswith("kernel mix:") for r in d2.reasons)


# ------------------------------------------------------------------ steps from a sequence
def test_repeating_period_finds_the_step_not_a_layer() -> None:
    rng = np.random.default_rng(0)
    setup = rng.integers(100, 200, 37)
    layer = np.array([1, 2, 3])
    step = np.concatenate([layer] * 4 + [np.array([7, 8, 9, 10])])  # 4 layers, then a head
    seq = np.concatenate([setup] + [step] * 6)
    p, first, end = repeating_period(seq, 0.9, 2)
    assert p == len(step) and (end - first) // p == 6
    assert first <= len(setup) + 1
    assert repeating_period(rng.integers(0, 10**6, 500), 0.9, 2) == (0, 0, 0)


def _synthetic(names: list[str], per_step: int, steps: int = 3) -> Trace:
    """SYNTHETIC: ``steps`` ProfilerSteps, each launching ``names`` ``per_step`` times."""
    table = NameTable(names)
    n = len(names) * per_step * steps
    start = np.arange(n, dtype=np.int64) * 1000
    ids = np.tile(np.arange(len(names), dtype=np.int32), per_step * steps)
    seg = Segments.from_columns(
        start_ns=start + 10, end_ns=start + 500, kind=np.full(n, Kind.KERNEL, np.uint8),
        name=ids, klass=np.full(n, Klass.GEMM, np.uint8), correlation=np.arange(1, n + 1),
    )  # fmt: skip
    host = HostEvents(np.arange(1, n + 1), np.zeros(n, np.int32), start, start + 5)
    span = n * 1000 // steps
    props = {"format": "kineto", "profiler_steps": [(i * span, (i + 1) * span - 1)
                                                     for i in range(steps)]}  # fmt: skip
    return Trace(seg, table, host, props, "synthetic")


def test_names_from_outside_are_cleaned_and_cut_in_reasons() -> None:
    evil = "\x1b]8;;http://x\x07gemm\x1b[31m"
    a = fingerprint_of_trace(_synthetic(["gemm_a", evil], 2))
    b = fingerprint_of_trace(_synthetic(["gemm_a"], 2))
    d = distance(a, b)
    assert not d.same
    assert all("\x1b" not in r and "\x07" not in r for r in d.reasons)
    assert any("\\x1b" in r for r in d.reasons)
    long1, long2 = "k" * 5000 + "1", "k" * 5000 + "2"
    f = fingerprint_of_trace(_synthetic([long1, long2], 1))
    assert len({r.name for r in f.kernels}) == 2 and all(len(r.name) <= 512 for r in f.kernels)


# ------------------------------------------------------------------ trials
def test_every_lever_has_an_allowed_change() -> None:
    from engine.levers.torch_levers import TORCH_LEVERS

    ids = {lv.id for lv in LEVERS} | {lv.id for lv in TORCH_LEVERS}
    missing = sorted(i for i in ids if i not in load_params().allowed)
    assert not missing
    assert allowed_change_for(LEVERS[0]).lever == LEVERS[0].id
    strict = allowed_change_for("block=16")
    assert "only times may change" in strict.what


def test_a_trial_is_credited_only_for_the_allowed_change(a100: tuple[Trace, Fingerprint]) -> None:
    _, base = a100
    act = base.activity
    assert act.launches
    graphs = dataclasses.replace(
        base,
        activity=dataclasses.replace(act, launches=act.launches / 4, graph_launches=12.0),
    )
    ok = credit_trial(base, graphs, allowed_change_for("cuda_graphs"))
    assert ok.credited and "same workload" in ok.reason
    # the same capture under a lever that may not change launches: a violation of "same"
    more = dataclasses.replace(base, activity=dataclasses.replace(act, launches=act.launches * 3))
    bad = credit_trial(base, more, allowed_change_for("cuda_graphs"))
    assert not bad.credited and "launches per step" in bad.reason and "fewer allowed" in bad.reason
    # TF32: other GEMM kernels are its change; a changed elementwise mix is not
    gemm = {r.name for r in base.kernels if r.klass == "GEMM"}
    renamed = dataclasses.replace(
        base,
        kernels=tuple(
            dataclasses.replace(r, name=r.name + "_tf32") if r.name in gemm else r
            for r in base.kernels
        ),
    )
    assert credit_trial(base, renamed, allowed_change_for("tf32_matmul")).credited
    no = credit_trial(base, renamed, allowed_change_for("cuda_graphs"))
    assert not no.credited and "kernel mix" in no.reason


def test_a_trial_on_other_shapes_is_not_credited(cpu_runs: dict[str, Fingerprint]) -> None:
    base, batch = cpu_runs["a"], cpu_runs["batch"]
    no = credit_trial(base, batch, allowed_change_for("cpu_threads"))
    assert not no.credited and "32 → 64" in no.reason
    assert credit_trial(base, batch, allowed_change_for("batch_size")).credited
    assert credit_trial(base, cpu_runs["b"]).credited  # no lever: nothing but times changed


def test_activity_unknown_on_a_cpu_trace(cpu_runs: dict[str, Fingerprint]) -> None:
    assert cpu_runs["a"].activity == Activity()
    d = distance(cpu_runs["a"], cpu_runs["b"])
    assert d.parts["activity"] is None and d.parts["operators"] == 0 and "kernels" not in d.parts


def test_the_command_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main([str(A100), str(A100)]) == 0
    out = capsys.readouterr().out
    assert "fingerprint " in out and "distance 0.000" in out and "same workload" in out
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    assert main([str(bad)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


# ------------------------------------------------------------------ analyze writes it
def test_analyze_writes_the_fingerprint(tmp_path: Path) -> None:
    """analysis.json holds it in brief, fingerprint.json whole (read back equal), report.md in
    one line — the fingerprint a trial or `gitm-tui diff` of a run folder compares."""
    from engine.analyze.api import AnalyzeOptions, analyze

    (o,) = analyze([str(A100)], AnalyzeOptions(out_root=str(tmp_path), first_run=False)).outcomes
    assert o.analysis is not None and o.analysis.fingerprint is not None
    folder = tmp_path / "a100_training_3streams"
    doc = json.loads((folder / "analysis.json").read_text())
    direct = fingerprint_file(A100)
    assert doc["fingerprint"]["digest"] == direct.digest()
    assert (
        doc["fingerprint"]["steps"] == 6 and doc["fingerprint"]["steps_found_by"] == "ProfilerStep"
    )
    whole = Fingerprint.from_json((folder / "fingerprint.json").read_text())
    assert whole == direct and str(folder / "fingerprint.json") in o.outputs
    report = (folder / "report.md").read_text()
    (line,) = [ln for ln in report.splitlines() if ln.startswith("* workload fingerprint ")]
    assert direct.digest() in line and "launches/step" in line and "6 steps (ProfilerStep)" in line
