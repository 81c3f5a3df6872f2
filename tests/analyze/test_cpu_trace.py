"""`gitm-tui analyze` on a CPU-only PyTorch profiler trace (issue 38 item 4): read for what it
holds — step times, operators by self time, data loading, optimizer, host gaps — with exit 0,
instead of "no GPU activity" and exit 3 (engine.analyze.breakdown.cpu_trace)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.analyze.api import AnalysisFailed, AnalyzeOptions, CpuOnlyTrace, analyze
from engine.analyze.breakdown.cpu_trace import (
    GPU_HINT,
    NOTHING,
    cpu_dict,
    read_cpu_events,
    read_cpu_summary,
    summarize,
)
from engine.trace.errors import TraceImportError
from engine.trace.limits import ReadLimits
from gitm_tui.cli import main
from gitm_tui.exit_codes import ExitCode
from tests.paths import TRACES

TRACE = TRACES / "cpu" / "cpu_only_train_small.json.gz"
GPU = TRACES / "kineto" / "a100_alexnet_2streams.json.gz"

#: an epoch-µs base with sub-µs digits: the times must be read exactly (a float64 would not)
BASE = 1712195495505000


def _x(cat: str, name: str, ts: float | str, dur: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur}


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    """The trace file; a ts given as a string ("…µs.ddd") is written as that number's text."""
    text = json.dumps({"schemaVersion": 1, "traceEvents": events})
    for e in events:
        if isinstance(e.get("ts"), str):
            text = text.replace(f'"ts": "{e["ts"]}"', f'"ts": {e["ts"]}')
    path.write_text(text)
    return path


def _tiny(tmp_path: Path) -> Path:
    """Two steps of known nesting on thread 1 (µs from BASE), an op on thread 2, an op after
    the steps, an event with no dur and an operator name with an escape sequence."""
    op, ann = "cpu_op", "user_annotation"
    ev = [
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "main"}},
        _x(ann, "ProfilerStep#0", BASE, 100),
        _x(ann, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", BASE, 10),
        _x(op, "aten::stack", BASE + 2, 6),
        _x(op, "aten::linear", BASE + 10, 40),
        _x(op, "aten::t", BASE + 10, 2),
        _x(op, "aten::addmm", BASE + 12, 36),
        _x(op, "aten::copy_", BASE + 20, 5),
        _x(ann, "Optimizer.step#SGD.step", BASE + 60, 30),
        _x(op, "aten::add_", BASE + 61, 10),
        _x(op, "aten::add_", BASE + 71, 10),
        _x(ann, "ProfilerStep#1", BASE + 100, 50),
        # 0.5 µs of sub-µs digits on an epoch-µs ts: exact only if read as decimal text
        _x(op, "aten::mul", f"{BASE + 105}.500", 39.5),
        _x(op, "\x1b[31maten::evil\x07", BASE + 146, 1),
        _x(op, "aten::sum", BASE + 20, 5, tid=2),  # another thread
        _x(op, "aten::zeros", BASE + 200, 10),  # after the last step: left out
        {"ph": "X", "cat": "cpu_op", "name": "aten::nodur", "pid": 7, "tid": 1, "ts": BASE},
        _x("python_function", "train.py(12): step", BASE, 150),  # not read
    ]
    return _write(tmp_path / "tiny.json", ev)


# ------------------------------------------------------------------------- the real trace
def test_the_committed_trace_reads_as_its_steps_operators_and_shares():
    c = read_cpu_summary(TRACE)
    assert c.format == "kineto" and c.threads == 1 and c.events > 1000
    st = c.steps
    assert st is not None and st.count == 8 and len(st.each) == 8
    assert [n for n, _ in st.each] == list(range(8))
    assert st.min_ns <= st.median_ns <= st.max_ns and st.min_ns <= st.mean_ns <= st.max_ns
    assert st.first_apart_ns is not None and st.first_apart_ns > st.max_ns  # the warm-up step
    assert c.window_ns == sum(t for _, t in st.each)
    names = {r.name for r in c.top}
    assert {"aten::mm", "aten::addmm"} <= names  # the Linear layers, forward and backward
    assert c.operators > 20 and c.op_calls > 1000 and len(c.top) == 20
    assert [r.self_ns for r in c.top] == sorted((r.self_ns for r in c.top), reverse=True)
    for r in c.top:
        assert 0 <= r.self_ns <= r.total_ns and 0.0 <= r.share <= 1.0
    assert sum(r.self_ns for r in c.top) <= c.op_self_ns <= c.window_ns
    for s in (c.op_share, c.data_loading.share, c.optimizer.share, c.gaps.share):
        assert 0.0 <= s <= 1.0
    assert c.data_loading.calls == 8 and c.data_loading.share > 0
    assert c.optimizer.calls == 16 and c.optimizer.share > 0  # step and zero_grad, 8 each
    # one thread: the operators' self time and the gaps between them make up the steps
    assert c.op_self_ns + c.gaps.time_ns == c.window_ns
    assert 0 < c.gaps.longest_ns <= c.gaps.time_ns and 0 <= c.gaps.longest_step < 8
    assert c.skipped == 0 and not c.notes and c.gpu_hint == GPU_HINT


def test_the_python_twin_reads_what_the_compiled_reader_reads():
    assert cpu_dict(read_cpu_summary(TRACE, interpreted=True)) == cpu_dict(read_cpu_summary(TRACE))


def test_self_time_matches_a_brute_force_count_on_the_real_trace():
    from engine.analyze.breakdown.cpu_trace import _nesting

    ev = read_cpu_events(TRACE)
    self_ns, _ = _nesting(ev)
    s, e, t = ev.start, ev.end, ev.thread
    for i in range(0, len(ev), 7):  # every 7th event: direct children by brute force
        inside = np.flatnonzero((s >= s[i]) & (e <= e[i]) & (t == t[i]))
        inside = inside[inside != i]
        direct = [
            j for j in inside.tolist()
            if not any(k != j and s[k] <= s[j] and e[j] <= e[k] for k in inside.tolist())
        ]  # fmt: skip
        assert self_ns[i] == max(0, int(e[i] - s[i]) - sum(int(e[j] - s[j]) for j in direct))


# ------------------------------------------------------------------------ a trace by hand
def test_a_hand_built_trace_gives_the_self_times_computed_by_hand(tmp_path):
    ev = read_cpu_events(_tiny(tmp_path))
    assert ev.skipped == 1 and len(ev.threads) == 2  # aten::nodur; threads 1 and 2
    c = summarize(ev, "tiny.json", top=50)
    us = 1000
    self_ns = {r.name: r.self_ns for r in c.top}
    calls = {r.name: r.calls for r in c.top}
    assert self_ns == {
        "aten::mul": int(39.5 * us),
        "aten::addmm": 31 * us,  # 36 less aten::copy_'s 5
        "aten::add_": 20 * us,  # two calls of 10
        "aten::stack": 6 * us,
        "aten::copy_": 5 * us,
        "aten::sum": 5 * us,  # on thread 2
        "aten::linear": 2 * us,  # 40 less aten::t's 2 and aten::addmm's 36
        "aten::t": 2 * us,
        "\x1b[31maten::evil\x07": 1 * us,
    }
    assert calls["aten::add_"] == 2 and "aten::zeros" not in self_ns  # after the steps
    assert {r.name: r.total_ns for r in c.top}["aten::linear"] == 40 * us
    st = c.steps
    assert st is not None and st.count == 2 and st.first_apart_ns is None  # two: none apart
    assert (st.min_ns, st.max_ns, st.median_ns) == (50 * us, 100 * us, 75 * us)
    assert c.window_ns == 150 * us and c.window == "the 2 ProfilerStep spans"
    assert c.op_self_ns == sum(self_ns.values()) and c.operators == 9 and c.op_calls == 10
    assert c.data_loading.time_ns == 10 * us and c.data_loading.share == pytest.approx(10 / 150)
    assert c.optimizer.time_ns == 30 * us and c.optimizer.calls == 1
    # main thread (1): step 0 covered by stack 6 + linear 40 + add_ 20 = 66 of 100; step 1 by
    # mul 39.5 + evil 1 of 50 (mul ends at 145, evil runs 146-147)
    assert c.main_thread == (7, 1)
    assert c.gaps.time_ns == int((34 + 9.5) * us)
    assert (c.gaps.longest_ns, c.gaps.longest_step) == (19 * us, 0)  # 81-100, after add_
    assert c.gaps.longest_after == "aten::add_"
    assert any("1 operator call outside the ProfilerStep spans" in n for n in c.notes)
    assert any("1 CPU event skipped" in n for n in c.notes)


def test_a_warm_up_first_step_is_set_apart(tmp_path):
    ev = [_x("user_annotation", f"ProfilerStep#{i}", BASE + 100 * i, d) for i, d in
          enumerate([90, 10, 12, 11])]  # fmt: skip
    ev += [_x("cpu_op", "aten::mm", BASE + 100 * i + 1, 5) for i in range(4)]
    c = read_cpu_summary(_write(tmp_path / "w.json", ev))
    st = c.steps
    assert st is not None and st.first_apart_ns == 90_000 and st.count == 4
    assert (st.min_ns, st.median_ns, st.max_ns, st.mean_ns) == (10_000, 11_000, 12_000, 11_000)
    assert c.window_ns == 123_000  # the shares are of every step


def test_without_steps_the_window_is_the_operators_span(tmp_path):
    ev = [_x("cpu_op", "aten::mm", BASE, 10), _x("cpu_op", "aten::add", BASE + 30, 10)]
    c = read_cpu_summary(_write(tmp_path / "n.json", ev))
    assert c.steps is None and c.window_ns == 40_000 and "no ProfilerStep" in c.window
    assert c.gaps.time_ns == 20_000 and c.gaps.longest_step == -1


def test_a_trace_with_nothing_to_read_is_one_line(tmp_path):
    p = _write(tmp_path / "n.json", [_x("python_function", "f", 1, 2)])
    with pytest.raises(TraceImportError, match="no CPU operators"):
        read_cpu_summary(p)


def test_the_reader_keeps_the_trace_limits_and_its_errors(tmp_path):
    with pytest.raises(TraceImportError, match="GITM_MAX_ELEMENT_BYTES"):
        read_cpu_events(TRACE, ReadLimits(max_element_bytes=64))
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1,, }]}')
    with pytest.raises(TraceImportError, match="invalid JSON"):
        read_cpu_events(bad)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(TRACE.read_bytes()[:-100])
    with pytest.raises(TraceImportError, match="truncated"):
        read_cpu_events(cut)


# --------------------------------------------------------------------------- the command
def test_analyze_prints_the_first_screen_and_exits_0(capsys):
    rc = main(["analyze", str(TRACE), "--no-write"])
    out = capsys.readouterr().out
    assert rc == ExitCode.OK
    lines = out.splitlines()
    assert lines[0].startswith(str(TRACE)) and "CPU only (no GPU rows)" in lines[0]
    assert lines[1].startswith("8 steps: median ") and "warm-up outlier" in lines[1]
    assert lines[2].startswith("profiled: ") and "the 8 ProfilerStep spans" in lines[2]
    assert lines[3].startswith("data loading ") and "of step time" in lines[3]
    assert lines[4].startswith("optimizer ") and lines[5].startswith("host gaps ")
    assert any(ln.startswith("top 10 operators by self time") for ln in lines[6:9])
    assert any(ln.startswith("aten::mm ") for ln in lines)
    joined = " ".join(out.split())
    assert "ProfilerActivity.CUDA], record_shapes=True)" in joined and "roofline" in joined


def test_analyze_json_is_one_cpu_only_object(capsys):
    rc = main(["analyze", str(TRACE), "--json", "--no-write"])
    assert rc == ExitCode.OK
    (doc,) = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "cpu_only" and doc["source"] == str(TRACE)
    assert doc["steps"]["count"] == 8 and doc["operators"]["top_by_self_time"][0]["self_ns"] > 0
    for k in ("data_loading", "optimizer", "host_gaps"):
        assert 0 < doc[k]["share_of_window"] < 1
    assert "ProfilerActivity.CUDA" in doc["gpu_trace_adds"]


def test_analyze_writes_the_cpu_summary(tmp_path, capsys):
    rc = main(["analyze", str(TRACE), "--out", str(tmp_path / "out")])
    written = tmp_path / "out" / "cpu_only_train_small" / "cpu_summary.json"
    assert rc == ExitCode.OK and f"wrote {written}" in capsys.readouterr().out
    assert json.loads(written.read_text())["kind"] == "cpu_only"


def test_names_from_the_trace_are_cleaned_on_screen(tmp_path, capsys):
    p = _tiny(tmp_path)
    assert main(["analyze", str(p), "--no-write"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b[31maten::evil\\x07" in out
    assert main(["analyze", str(p), "--no-write", "--json"]) == ExitCode.OK
    (doc,) = json.loads(capsys.readouterr().out)  # JSON: the name as written (escaped)
    assert "\x1b[31maten::evil\x07" in {r["name"] for r in doc["operators"]["top_by_self_time"]}


def test_no_gpu_rows_and_no_cpu_operators_is_one_line_and_exit_3(tmp_path, capsys):
    p = tmp_path / "nothing.json.gz"
    ev = [_x("python_function", "f", 1, 2), {"ph": "i", "name": "x", "ts": 1, "pid": 1}]
    p.write_bytes(gzip.compress(json.dumps({"traceEvents": ev}).encode()))
    rc = main(["analyze", str(p), "--no-write"])
    cap = capsys.readouterr()
    assert rc == ExitCode.INPUT and cap.out == ""
    assert cap.err.strip().splitlines() == [f"gitm-tui: error: {p}: {NOTHING}"]


def test_a_cpu_only_file_among_gpu_ones_is_summarised_not_crossed(tmp_path, capsys):
    got = analyze([str(GPU), str(TRACE)], AnalyzeOptions(first_run=False, workers=1, ranks=True))
    gpu, cpu = got.outcomes
    assert gpu.analysis is not None and cpu.cpu is not None and cpu.analysis is None
    assert got.cpu_only == [cpu] and got.good == [gpu] and not got.failed
    assert got.crossed is None and len(got.summaries) <= 1
    rc = main(["analyze", str(GPU), str(TRACE), "--no-write", "--workers", "1"])
    out = capsys.readouterr().out
    assert rc == ExitCode.OK and "CPU only (no GPU rows)" in out and "GPU rows (" in out
    assert "a CPU-only trace: not compared with the ranks" in out


def test_one_raises_cpu_only_with_its_summary():
    got = analyze([str(TRACE)], AnalyzeOptions(first_run=False, ranks=False, keep_arrays=True))
    with pytest.raises(CpuOnlyTrace) as e:
        got.one()
    assert isinstance(e.value, AnalysisFailed) and e.value.cpu.steps is not None
    assert "CPU-only" in str(e.value)


def test_ui_says_the_screen_needs_a_gpu_trace_and_prints_the_text(monkeypatch, capsys):
    import gitm_tui.app as app_module

    class FakeApp:  # runs the loader as the screen would, then closes as a failed load does
        def __init__(self, load, source):
            self.load = load
            self.analysis = type("S", (), {"error": None})()

        def run(self) -> None:
            try:
                self.load(lambda _stage: None)
            except Exception as e:
                self.analysis.error = str(e)

    monkeypatch.setattr(app_module, "make_analysis_app", lambda load, source: FakeApp(load, source))
    # (as on a terminal: without one, --ui is one line and exit 2 — tests/ui/test_no_terminal.py)
    monkeypatch.setattr("gitm_tui.commands.common.has_terminal", lambda: True)
    rc = main(["analyze", str(TRACE), "--ui"])
    cap = capsys.readouterr()
    assert rc == ExitCode.OK and "needs a GPU trace" in cap.err
    assert "8 steps: median" in cap.out


def test_odd_structures_give_bounded_figures(tmp_path):
    """A child that outlasts its parent counts up to the parent's end (and covers the host
    where it runs); overlapping steps count their union once; a step number in other digits
    is no number."""
    op, ann = "cpu_op", "user_annotation"
    ev = [
        _x(ann, "ProfilerStep#1", BASE, 30),
        _x(ann, "ProfilerStep#\u00b2", BASE + 10, 30),  # overlaps the first; '²' is no number
        _x(op, "a", BASE, 10, tid=2),  # the operators on a thread of their own
        _x(op, "b", BASE + 5, 10, tid=2),  # outlasts a
        _x(op, "c", BASE + 12, 10, tid=2),  # outlasts b
    ]
    c = read_cpu_summary(_write(tmp_path / "odd.json", ev))
    assert {r.name: r.self_ns for r in c.top} == {"a": 5000, "b": 7000, "c": 10000}
    assert c.window_ns == 40_000 and c.steps is not None and [n for n, _ in c.steps.each] == [1, -1]
    assert c.main_thread == (7, 2)
    assert c.gaps.time_ns == 18_000 and 0 <= c.gaps.share <= 1  # 22-40 µs: no operator


def test_a_damaged_trace_is_read_or_refused_with_one_line(tmp_path):
    """Random damage to the committed trace: a summary or a TraceImportError, never another
    exception, from either reader."""
    import random

    raw = gzip.decompress(TRACE.read_bytes())
    rnd = random.Random(38)
    p = tmp_path / "damaged.json"
    for _ in range(25):
        b = bytearray(raw)
        for _ in range(rnd.randint(1, 6)):
            b[rnd.randrange(len(b))] = rnd.choice(b'{}[]",:0123456789.-e x\\')
        p.write_bytes(bytes(b[: rnd.randint(len(b) // 2, len(b))] if rnd.random() < 0.3 else b))
        for interpreted in (False, True):
            try:
                c = read_cpu_summary(p, interpreted=interpreted)
            except TraceImportError as e:
                assert str(p) in str(e)
                continue
            assert all(r.self_ns >= 0 for r in c.top) and c.gaps.time_ns >= 0
            json.dumps(cpu_dict(c))
