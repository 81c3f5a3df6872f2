"""`gitm-tui diff` in the engine (engine.analyze.diff.diff): every figure on a SYNTHETIC pair built
here whose answer is known by construction; the diff against the analysis of the same trace;
run folders; and the kernel diff held to Holistic Trace Analysis's TraceDiff on the two real
control/test pairs of HTA's own tests (tests/data/traces/hta_diff/README.md)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.analyze.api import AnalyzeOptions
from engine.analyze.compute import AnalysisResult, analyze_trace
from engine.analyze.diff.diff import (
    DiffInputError,
    DiffUsageError,
    diff_paths,
    diff_results,
    diff_traces,
    step_of,
    trace_file_of,
)
from engine.analyze.diff.diff_model import TraceDiff, diff_schema_json
from engine.analyze.run import load_trace
from engine.trace.segments import Kind, NameTable, Segments
from engine.trace.taxonomy import classify
from engine.trace.trace import ApiKind, HostEvents, Trace
from tests.paths import ROOT, TRACES

HTA_DIFF = TRACES / "hta_diff"
#: HTA's trace_compare pair (small: in every run)
SMALL = (HTA_DIFF / "control" / "base.json.gz", HTA_DIFF / "test" / "test.json.gz")
#: HTA's trace_diff pair, byte-identical to these two (hta_diff/README.md)
BIG = (
    TRACES / "kineto" / "a100_training_3streams.json.gz",
    TRACES / "kineto" / "v100_16gb_ddp_graphs_3streams.json.gz",
)
HERE = AnalyzeOptions(first_run=False)  # compiled kernels, no child compiling (a test run)
US = 1000


# ------------------------------------------------------------------ a SYNTHETIC pair
def _trace(rows: list[tuple[Any, ...]], steps: list[tuple[int, int, int]] | None = None) -> Trace:
    """A SYNTHETIC trace: rows (name, kind, stream, start µs, dur µs, launch µs or None, bytes),
    each launched (when it has a launch time) by a 2 µs host call; steps (N, start µs, end µs)."""
    names = NameTable()
    n = len(rows)
    cols: dict[str, Any] = {
        "start_ns": [r[3] * US for r in rows],
        "end_ns": [(r[3] + r[4]) * US for r in rows],
        "stream": [r[2] for r in rows],
        "kind": [int(r[1]) for r in rows],
        "name": [names.intern(r[0]) for r in rows],
        "klass": [int(classify(r[0])) for r in rows],
        "correlation": np.arange(1, n + 1),
        "dram_bytes": [np.nan if r[6] is None else float(r[6]) for r in rows],
    }
    seg = Segments.from_columns(**cols)
    linked = [i for i, r in enumerate(rows) if r[5] is not None]
    api = [
        ApiKind.MEMCPY_ASYNC if rows[i][1] in (Kind.MEMCPY, Kind.MEMSET) else ApiKind.LAUNCH
        for i in linked
    ]
    host = HostEvents(
        correlation=np.array([i + 1 for i in linked], np.int64),
        stream=np.full(len(linked), -1, np.int32),
        api_start_ns=np.array([rows[i][5] * US for i in linked], np.int64),
        api_end_ns=np.array([(rows[i][5] + 2) * US for i in linked], np.int64),
        api=np.array(api, np.uint8),
    )
    props: dict[str, Any] = {"format": "kineto"}
    if steps:
        props["profiler_steps"] = [(a * US, b * US) for _, a, b in steps]
        props["profiler_step_ids"] = [k for k, _, _ in steps]
    return Trace(seg, names, host, props, source="synthetic")


K, C, S = Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET
GEMM, ELEM, NCCL = "sgemm_128x64_nn", "vectorized_elementwise_kernel", "ncclKernel_AllReduce"
HTOD = "Memcpy HtoD (Pinned -> Device)"
# before: two steps [0, 100) and [100, 200) µs; after: the same with the elementwise kernel
# fused away in step 2, a copy added, the GEMM slower, a new kernel, a collective
BEFORE = _trace(
    [
        (GEMM, K, 7, 10, 20, 5, None),
        (ELEM, K, 7, 40, 10, 8, None),  # host wait: launched at 8 µs, 10 µs gap after the GEMM
        (HTOD, C, 7, 60, 5, 55, 4096),
        (GEMM, K, 7, 110, 20, 105, None),
        (ELEM, K, 7, 135, 10, 108, None),  # kernel wait: 5 µs gap, launched long before
        ("Memset (Device)", S, 7, 150, 1, 149, 64),
        (ELEM, K, 8, 300, 10, None, None),  # no launch call: in no step
    ],
    steps=[(1, 0, 100), (2, 100, 200)],
)
AFTER = _trace(
    [
        (GEMM, K, 7, 10, 25, 5, None),
        (ELEM, K, 7, 40, 10, 8, None),
        (HTOD, C, 7, 60, 5, 55, 4096),
        (HTOD, C, 7, 70, 5, 66, 4096),
        (GEMM, K, 7, 110, 25, 105, None),
        ("fused_softmax_kernel", K, 7, 140, 8, 108, None),
        ("Memset (Device)", S, 7, 150, 1, 149, 64),
        (NCCL, K, 9, 120, 30, 115, None),
        (ELEM, K, 8, 300, 10, None, None),
    ],
    steps=[(1, 0, 100), (2, 100, 200)],
)


@pytest.fixture(scope="module")
def synthetic() -> TraceDiff:
    return diff_traces(BEFORE, AFTER)


def _by_key(rows: list[Any]) -> dict[str, Any]:
    return {c.key: c for c in rows}


def test_names_appear_disappear_and_change_in_count_and_time(synthetic):
    k = _by_key(synthetic.kernels)
    assert set(k) == {GEMM, ELEM, HTOD, "Memset (Device)", "fused_softmax_kernel", NCCL}
    assert (k["fused_softmax_kernel"].status, k[NCCL].status) == ("added", "added")
    assert k[ELEM].status == "decreased" and k[ELEM].delta_count == -1
    assert k[ELEM].delta_ns == -10 * US
    assert k[GEMM].status == "unchanged" and k[GEMM].delta_ns == 10 * US
    assert k[GEMM].before.mean_ns == 20 * US and k[GEMM].after.mean_ns == 25 * US
    assert k[HTOD].status == "increased" and k[HTOD].after.bytes == 8192
    assert k["Memset (Device)"].status == "unchanged" and k["Memset (Device)"].delta_ns == 0
    # largest |Δ time| first: the collective (+30 µs), then the GEMM, ELEM, … (ties by name)
    deltas = [abs(c.delta_ns) for c in synthetic.kernels]
    assert deltas == sorted(deltas, reverse=True) and synthetic.kernels[0].key == NCCL
    assert synthetic.kernels_total == 6
    assert synthetic.kernels_by_status == {
        "added": 2, "removed": 0, "increased": 1, "decreased": 1, "unchanged": 2,
    }  # fmt: skip


def test_per_step_figures_count_the_rows_launched_inside_a_step(synthetic):
    k = _by_key(synthetic.kernels)
    # ELEM before: 10 µs in each step, and 10 µs on stream 8 launched by nothing (no step)
    assert k[ELEM].before.per_step_ns == 10 * US and k[ELEM].before.total_ns == 30 * US
    assert k[ELEM].after.per_step_ns == 5 * US
    assert k[ELEM].delta_per_step_ns == -5 * US
    assert synthetic.before.steps == 2 and synthetic.before.rows_in_steps == 6
    assert synthetic.metric("gpu_time_per_step").before == (20 + 10 + 5 + 20 + 10 + 1) * US / 2


def test_totals_idle_launches_copies_collectives_busy(synthetic):
    m = {x.name: x for x in synthetic.totals}
    # stream 7 before, its gaps: 10 µs before ELEM (launched at 8 µs, before the GEMM ended at
    # 30: a kernel wait, < 30 µs), 10 before the copy (launched at 55, after ELEM ended at 50:
    # the host), 45 before the GEMM (launched at 105 > 65: the host), 5 before ELEM (launched
    # at 108 < 130: kernel wait), 5 before the memset (launched at 149 > 145: the host)
    assert m["idle"].before == (10 + 10 + 45 + 5 + 5) * US
    assert m["idle_host_wait"].before == (10 + 45 + 5) * US
    assert m["idle_kernel_wait"].before == (10 + 5) * US
    assert m["idle_other"].before == 0
    assert m["launch_calls"].before == 4 and m["launch_calls"].after == 5
    assert m["launch_time"].delta == 2 * US
    assert m["copies"].delta == 1 and m["copy_bytes"].after == 8192
    assert m["memset_bytes"].before == 64 and m["memsets"].delta == 0
    assert m["collectives"].after == 1 and m["collective_time"].after == 30 * US
    # the collective [120, 150) µs beside the GEMM [110, 135) and the fused kernel [140, 148)
    assert m["collective_overlap"].after == (15 + 8) * US
    assert m["busy"].before == (20 + 10 + 5 + 20 + 10 + 1 + 10) * US
    assert m["busy"].after == synthetic.after.busy_ns == (25 + 10 + 5 + 5 + 40 + 1 + 10) * US
    assert m["span"].before == 300 * US and m["gpu_time"].before == synthetic.before.gpu_time_ns


def test_one_step_of_each(synthetic):
    d = diff_traces(BEFORE, AFTER, step_before=2)  # the other side follows
    assert d.before.scope == d.after.scope == "ProfilerStep#2" and d.before.rows == 3
    k = _by_key(d.kernels)
    assert k[ELEM].status == "removed" and k["fused_softmax_kernel"].status == "added"
    assert k[NCCL].after.count == 1 and HTOD not in k  # the copies are in step 1
    # kernel launch calls starting inside [100, 200) µs (the memset's call is no launch)
    assert (d.metric("launch_calls").before, d.metric("launch_calls").after) == (2, 3)
    first = diff_traces(BEFORE, AFTER, step_before="first", step_after=1)
    assert first.before.step_ids == first.after.step_ids == [1]
    with pytest.raises(DiffUsageError, match=r"no ProfilerStep#7 .*its steps: 1, 2"):
        diff_traces(BEFORE, AFTER, step_before=7)


def test_step_of_follows_htas_iteration_rule():
    steps = [(0, 100), (100, 200), (300, 400)]
    launch = np.array([0, 99, 100, 250, 399, 400, -5, np.iinfo(np.int64).min], np.int64)
    assert step_of(launch, steps).tolist() == [0, 0, 1, -1, 2, -1, -1, -1]


def test_labels_say_how_much_rests_on_the_prior(synthetic):
    labels = _by_key(synthetic.labels)
    assert labels["COPY"].after.count == 3 and labels["COMM"].status == "added"
    decoded = [c for c in synthetic.labels if c.key in ("COMPUTE", "MEMORY", "STALL", "IDLE")]
    assert decoded and all(
        c.after.prior_share == 1.0 for c in decoded if c.after.count
    )  # no shapes, no counters: every label rests on the kernel-name prior
    assert labels["COPY"].after.prior_share is None  # not decoded
    classes = _by_key(synthetic.classes)
    assert classes["COMM"].after.count == 1 and classes["GEMM"].delta_ns == 10 * US


def test_a_trace_without_host_rows_has_unknown_launches():
    bare = Trace(BEFORE.segments, BEFORE.names, HostEvents.empty(), {}, "bare")
    d = diff_traces(bare, AFTER)
    m = d.metric("launch_calls")
    assert m.before is None and m.delta is None and "unknown" in m.note
    assert d.before.steps == 0 and d.kernels[0].before.per_step_ns is None
    assert any("before has no ProfilerStep" in n for n in d.notes)


def test_skipped_events_are_said():
    odd = Trace(AFTER.segments, AFTER.names, AFTER.host, {"malformed_events": 3}, "odd")
    d = diff_traces(BEFORE, odd)
    assert "after: 3 malformed events skipped (a ts or dur missing or unusable)" in d.notes


def test_json_round_trips_and_the_committed_schema_is_current(synthetic):
    again = TraceDiff.model_validate_json(synthetic.to_json())
    assert again == synthetic
    committed = (ROOT / "manifests" / "schemas" / "diff.schema.json").read_text()
    assert committed == diff_schema_json(), (
        "regenerate: python -c 'from engine.analyze.diff.diff_model import diff_schema_json as s; "
        'open("manifests/schemas/diff.schema.json", "w").write(s())\''
    )


def test_hostile_names_are_escaped_in_json_and_cleaned_for_the_screen():
    evil = "\x1b]0;pwned\x07\u202e\ud800k"
    t = _trace([(evil, K, 7, 10, 20, 5, None)])
    d = diff_traces(t, BEFORE)
    text = d.to_json()
    assert "\x1b" not in text and "\u202e" not in text and "\\u001b" in text
    keys = [c["key"] for c in json.loads(text)["kernels"]]
    assert "\x1b]0;pwned\x07\u202e\ufffdk" in keys  # as it was, but the lone surrogate
    shown = d.cleaned(100)
    assert all("\x1b" not in c.key and "\u202e" not in c.key for c in shown.kernels)


def test_the_report_section_is_markdown_with_its_names_made_safe(synthetic):
    md = synthetic.markdown(top=3)
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and "→" in ln]
    assert len(rows) == 3 and rows[0].startswith(f"| added | `{NCCL}` | 0 → 1 |")
    assert "| launch calls | 4 | 5 | +1 |" in md and "| idle |" in md
    evil = "[x](http://x/y.png) |`<script>\x1b[2J"
    t = _trace([(evil, K, 7, 10, 20, 5, None)])
    md = diff_traces(t, BEFORE).markdown()
    line = next(ln for ln in md.splitlines() if "script" in ln and ln.startswith("| "))
    quoted = next(ln for ln in md.splitlines() if ln.startswith("Fingerprint"))
    assert "\\[x\\](http" in quoted and "\\<script\\>" in quoted  # the reason, escaped
    assert "\x1b" not in md and "\\|'<script>" in line and line.count(" | ") == 4


def test_the_fingerprints_are_compared(synthetic, alexnet):
    from engine.optimizer.fingerprint_model import load_params

    f = synthetic.fingerprint
    assert f.available and f.threshold == load_params().threshold
    assert f.value is not None and 0 < f.value <= 1 and f.same == (f.value <= f.threshold)
    assert not f.same and f.reasons  # a kernel fused away, one added, a collective: not the same
    assert "kernels" in f.parts or f.parts  # the parts it judged, by name
    itself = diff_results(alexnet, alexnet).fingerprint
    assert (itself.value, itself.same, itself.reasons) == (0.0, True, [])


# ------------------------------------------------------------------ a real trace
@pytest.fixture(scope="module")
def alexnet() -> AnalysisResult:
    return analyze_trace(load_trace(str(TRACES / "kineto" / "a100_alexnet_2streams.json.gz")))


def test_a_trace_against_itself_changes_nothing_and_adds_up_to_its_analysis(alexnet):
    d = diff_results(alexnet, alexnet)
    a = alexnet.analysis
    assert all(c.status == "unchanged" and c.delta_ns == 0 for c in d.kernels)
    assert all(m.delta in (0, None) for m in d.totals)
    assert d.before.gpu_time_ns == a.gpu_time_ns and d.before.kernels == a.kernels
    assert {c.key: c.before.total_ns for c in d.classes} == a.time_by_class_ns
    assert {c.key: c.before.total_ns for c in d.labels} == {
        k: v for k, v in a.time_by_regime_ns.items() if v
    }
    idle = [sum(getattr(s.idle, f) for s in a.streams) for f in
            ("total_ns", "host_wait_ns", "kernel_wait_ns", "other_ns")]  # fmt: skip
    assert [d.metric(n).before for n in ("idle", "idle_host_wait", "idle_kernel_wait",
                                          "idle_other")] == idle  # fmt: skip
    assert d.metric("collectives").before == sum(c.kernels for c in a.communication)
    top = {k.name: k for k in a.top_kernels}
    for c in d.kernels:
        if c.key in top:
            assert (c.before.count, c.before.total_ns) == (top[c.key].calls, top[c.key].total_ns)
            assert c.before.label == top[c.key].regime


# ------------------------------------------------------------------ inputs
def _run(d: Path, *files: str) -> Path:
    d.mkdir()
    (d / "journal.jsonl").write_text("")
    for f in files:
        (d / f).write_bytes(SMALL[0].read_bytes())
    return d


def test_run_folders_and_folders_name_their_one_trace(tmp_path):
    run = _run(tmp_path / "20261204-120000-abcdef", "profile.json")
    assert trace_file_of(str(run)) == str(run / "profile.json")
    with pytest.raises(DiffInputError, match="this run holds no trace"):
        trace_file_of(str(_run(tmp_path / "empty")))
    with pytest.raises(DiffUsageError, match="holds 2 traces"):
        trace_file_of(str(_run(tmp_path / "both", "trace.json", "profile.json")))
    one = tmp_path / "one"
    one.mkdir()
    (one / "a.json.gz").write_bytes(SMALL[0].read_bytes())
    assert trace_file_of(str(one)) == str(one / "a.json.gz")
    (one / "b.json.gz").write_bytes(SMALL[1].read_bytes())
    with pytest.raises(DiffUsageError, match="holds 2 trace files"):
        trace_file_of(str(one))
    with pytest.raises(DiffInputError, match="no trace files"):
        trace_file_of(str(_empty(tmp_path / "nothing")))


def _empty(d: Path) -> Path:
    d.mkdir()
    (d / "notes.txt").write_text("not a trace")
    return d


def test_inputs_that_cannot_be_read_are_one_line(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(DiffInputError, match=r"broken\.json"):
        diff_paths(str(bad), str(SMALL[1]), HERE)
    with pytest.raises(DiffInputError, match="no such file"):
        diff_paths(str(SMALL[0]), str(tmp_path / "missing.json"), HERE)
    # one file named twice (two spellings) is read once and diffed with itself
    twice = diff_paths(str(SMALL[0]), str(SMALL[0].parent / "." / SMALL[0].name), HERE)
    assert twice.kernels and all(c.status == "unchanged" for c in twice.kernels)
    cpu = TRACES / "cpu" / "cpu_only_train_small.json.gz"
    with pytest.raises(DiffInputError, match="CPU-only"):
        diff_paths(str(cpu), str(SMALL[1]), HERE)


# ------------------------------------------------------------------ HTA's TraceDiff
def _hta(control: Path, test: Path, iteration: int | None) -> tuple[Any, dict[str, list[str]]]:
    """HTA's compare_traces and ops_diff, GPU kernels only, of ``iteration`` (None: HTA's
    default, each trace's first)."""
    from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff

    logging.getLogger("hta").setLevel(logging.ERROR)
    c = LabeledTrace("control", trace_dir=str(control))
    t = LabeledTrace("test", trace_dir=str(test))
    args = (c, t, None, None, iteration, iteration, DeviceType.GPU)
    return TraceDiff.compare_traces(*args), TraceDiff.ops_diff(*args)


#: HTA's ops_diff lists, in our statuses
_HTA_STATUS = {
    "added": "added",
    "deleted": "removed",
    "increased": "increased",
    "decreased": "decreased",
    "unchanged": "unchanged",
}


def _same_as_hta(ours: TraceDiff, table: Any, lists: dict[str, list[str]]) -> None:
    """Every name HTA compares is ours with the same counts and (whole-µs traces: HTA's µs are
    exact) the same total times to the ns; HTA's five lists are our statuses; and we compare
    no name HTA does not (the same rows: GPU rows whose launch call starts in the step)."""
    k = _by_key(ours.kernels)
    assert set(k) == set(table.index)
    for name, row in table.iterrows():
        c = k[name]
        assert (c.before.count, c.after.count) == (row["control_counts"], row["test_counts"])
        assert c.before.total_ns == round(row["control_total_duration"] * US), name
        assert c.after.total_ns == round(row["test_total_duration"] * US), name
        assert c.delta_count == row["diff_counts"] and c.delta_ns == round(
            row["diff_duration"] * US
        )
    for hta_status, names in lists.items():
        assert {k[n].status for n in names} <= {_HTA_STATUS[hta_status]}, hta_status
    assert sum(map(len, lists.values())) == ours.kernels_total


@pytest.mark.parametrize("step", [1009, 1010])
def test_htas_trace_compare_pair_step_by_step(step):
    """HTA's own trace_compare pair (tests/test_trace_diff.py there: one GPU row in step 1010 of
    the control, none in the test's: "-": 1)."""
    table, lists = _hta(SMALL[0].parent, SMALL[1].parent, step)
    ours = diff_paths(str(SMALL[0]), str(SMALL[1]), HERE, step_before=step)
    _same_as_hta(ours, table, lists)
    if step == 1010:
        assert lists["deleted"] and ours.kernels[0].status == "removed"


@pytest.fixture(scope="module")
def big_pair(tmp_path_factory) -> tuple[Any, ...]:
    """HTA's trace_diff pair loaded by HTA once (5-6 s here: its pandas load) and by us."""
    from hta.trace_diff import LabeledTrace

    logging.getLogger("hta").setLevel(logging.ERROR)
    labelled = []
    for side, f in zip(("control", "test"), BIG, strict=True):
        d = tmp_path_factory.mktemp(side)
        (d / f.name).symlink_to(f)
        labelled.append(LabeledTrace(side, trace_dir=str(d)))
    res = [analyze_trace(load_trace(str(f))) for f in BIG]
    return labelled, res


@pytest.mark.slow
@pytest.mark.parametrize("step", [None, 1014])
def test_htas_trace_diff_pair(big_pair, step):
    """HTA's trace_diff pair: its first step (HTA's default) and its last, all 201 names."""
    from hta.trace_diff import DeviceType, TraceDiff

    (c, t), (before, after) = big_pair
    args = (c, t, None, None, step, step, DeviceType.GPU)
    table, lists = TraceDiff.compare_traces(*args), TraceDiff.ops_diff(*args)
    ours = diff_results(before, after, step_before=step or "first")
    _same_as_hta(ours, table, lists)
    assert ours.kernels_total == 201 and {k: len(v) for k, v in lists.items()} == {
        "added": 27, "deleted": 66, "increased": 15, "decreased": 9, "unchanged": 84,
    }  # fmt: skip
    assert ours.fingerprint.same is False and any(
        r.startswith("device A100 SXM4 40GB → V100 SXM2 16GB") for r in ours.fingerprint.reasons
    )
    # our default compares the whole traces: what HTA leaves out of every iteration is in it —
    # the test trace's 614 GPU rows launched outside any ProfilerStep (or with no launch call)
    whole = diff_results(before, after)
    assert (whole.before.rows - whole.before.rows_in_steps) == 0
    assert (whole.after.rows - whole.after.rows_in_steps) == 614


@pytest.mark.slow
def test_htas_rounding_of_fractional_timestamps_is_reproduced_by_counting_hta(big_pair, tmp_path):
    """A trace with ns digits in its timestamps (kineto/v100_32gb_ns_resolution): HTA rounds
    each row to whole µs (start up, end down), so with exact counting the counts agree and the
    times do not; ``counting="hta"`` rounds as HTA does and the times agree to the ns."""
    from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff

    ns_trace = TRACES / "kineto" / "v100_32gb_ns_resolution.json.gz"
    (tmp_path / ns_trace.name).symlink_to(ns_trace)
    control = LabeledTrace("control", trace_dir=str(tmp_path))
    (_, test), (_, after) = big_pair
    table = TraceDiff.compare_traces(control, test, device_type=DeviceType.GPU)
    ns_exact = analyze_trace(load_trace(str(ns_trace)))
    ns_hta = analyze_trace(load_trace(str(ns_trace)), counting="hta")
    test_hta = analyze_trace(load_trace(str(BIG[1])), counting="hta")
    counted = {
        "exact": diff_results(ns_exact, after, step_before="first"),
        "hta": diff_results(ns_hta, test_hta, step_before="first"),
    }
    exact = _by_key(counted["exact"].kernels)
    off = [n for n, row in table.iterrows()
           if exact[n].before.total_ns != round(row["control_total_duration"] * US)]  # fmt: skip
    assert len(off) >= 10  # HTA's µs rounding moves most of the control's names
    assert all(
        (exact[n].before.count, exact[n].after.count) == (r["control_counts"], r["test_counts"])
        for n, r in table.iterrows()
    )
    _same_as_hta(
        counted["hta"], table, TraceDiff.ops_diff(control, test, device_type=DeviceType.GPU)
    )
