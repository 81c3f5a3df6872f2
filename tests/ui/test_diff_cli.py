"""`gitm-tui diff BEFORE AFTER`: the text table (120 columns, names cleaned and cut), --json,
--top, --step, the exit codes of bad input, and the diff screen (gitm_tui/modes/diff.py)."""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from engine.analyze.diff.diff import diff_traces
from engine.analyze.diff.diff_model import TraceDiff
from engine.analyze.run import load_trace
from gitm_tui.app import GitmApp
from gitm_tui.cli import main
from gitm_tui.commands.common import UsageError
from gitm_tui.commands.diff import WIDTH, diff_lines, parse_steps, short_name, shown_names
from gitm_tui.exit_codes import ExitCode
from gitm_tui.modes.diff import DiffScreen
from tests.paths import TRACES
from tests.ui.hostile_names import hostile_names_trace
from tests.ui.waiting import until

KINETO = TRACES / "kineto"
#: two small real traces (79 and 39 GPU rows)
A = KINETO / "a100_alexnet_2streams.json.gz"
B = KINETO / "a100_event_sync_multistream.json.gz"
#: HTA's trace_compare pair (tests/data/traces/hta_diff)
SMALL = (
    TRACES / "hta_diff" / "control" / "base.json.gz",
    TRACES / "hta_diff" / "test" / "test.json.gz",
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """The alexnet trace with escape sequences, markup and bidi controls in its kernel names and
    device name (SYNTHETIC: tests/ui/hostile_names.py)."""
    p = tmp_path_factory.mktemp("hostile") / "hostile_names.json"
    p.write_text(json.dumps(hostile_names_trace(), ensure_ascii=True), encoding="ascii")
    return p


@pytest.fixture(scope="module")
def pair() -> TraceDiff:
    return diff_traces(load_trace(str(A)), load_trace(str(B)))


def test_text_fits_120_columns_and_leads_with_the_largest_changes(capsys):
    assert main(["diff", str(A), str(B)]) == ExitCode.OK
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(map(len, lines)) <= WIDTH
    assert lines[0].startswith("before  ") and A.name in lines[0]
    assert any(line.startswith("totals") for line in lines)
    assert "fingerprint:" in out and "GPU busy" in out and "launch calls" in out
    head = next(i for i, line in enumerate(lines) if line.startswith("change  kernel"))
    first = lines[head + 1]
    # alexnet's kernels are all gone in the other trace: its largest one leads, removed
    assert first.startswith("removed ")


def test_long_names_are_shortened_then_cut():
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::Functor<float>>(int, x)"
    assert short_name(name) == "at::native::vectorized_elementwise_kernel"
    assert short_name("void at::(anonymous namespace)::f<1>(int)") == "at::{anon}::f"
    assert short_name("Memcpy HtoD (Pinned -> Device)") == "Memcpy HtoD (Pinned -> Device)"
    cutlass = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_nn>(cutlass_80::Params)"
    assert (
        short_name(cutlass, templates=True)
        == "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_nn>"
    )
    t = diff_traces(load_trace(str(A)), load_trace(str(A)))
    t.kernels[0] = t.kernels[0].model_copy(update={"key": "void " + "k" * 500 + "<int>(int)"})
    lines = diff_lines(t)
    assert max(map(len, lines)) <= WIDTH and any("kkk…" in line for line in lines)
    # two names that shorten alike keep their template arguments: rows that can be told apart
    for i, g in enumerate(("a", "b")):
        t.kernels[i + 1] = t.kernels[i + 1].model_copy(update={"key": cutlass.replace("nn", g)})
    lines = diff_lines(t)
    assert sum("cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_" in ln for ln in lines) == 2


def test_json_is_the_whole_diff_and_top_cuts_the_kernels(capsys):
    assert main(["diff", str(A), str(B), "--json", "--top", "2"]) == ExitCode.OK
    d = TraceDiff.model_validate_json(capsys.readouterr().out)
    assert len(d.kernels) == 2 and d.kernels_total > 2
    assert abs(d.kernels[0].delta_ns) >= abs(d.kernels[1].delta_ns)
    assert d.before.source == str(A) and {m.name for m in d.totals} >= {"idle", "launch_calls"}


def test_one_step_as_htas_trace_diff_compares(capsys):
    assert main(["diff", *map(str, SMALL), "--step", "1010", "--json"]) == ExitCode.OK
    d = json.loads(capsys.readouterr().out)
    assert d["before"]["scope"] == "ProfilerStep#1010" and d["kernels"][0]["status"] == "removed"
    assert parse_steps("first") == ("first", "first") and parse_steps("3:4") == (3, 4)
    for bad in ("x", "1:2:3", "-1"):
        with pytest.raises(UsageError):
            parse_steps(bad)


def test_hostile_names_never_reach_the_terminal(hostile, capsys):
    assert main(["diff", str(hostile), str(A)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x9b" not in out and "\u202e" not in out and "\x07" not in out
    assert max(map(len, out.splitlines())) <= WIDTH
    assert "\\x1b" in out  # shown, as its visible escape


@pytest.mark.parametrize(
    "args,code,needle",
    [
        (["diff", str(A)], ExitCode.USAGE, "required: after"),
        (["diff", str(A), str(B), "--top", "0"], ExitCode.USAGE, "--top"),
        (["diff", str(A), str(B), "--step", "x"], ExitCode.USAGE, "--step 'x'"),
        (["diff", str(A), str(B), "--hardware", "h900"], ExitCode.USAGE, "unknown hardware"),
        (["diff", *map(str, SMALL), "--step", "7"], ExitCode.USAGE, "no ProfilerStep#7"),
        (["diff", str(A), "{d}/missing.json"], ExitCode.INPUT, "no such file"),
        (["diff", "{d}/broken.json", str(A)], ExitCode.INPUT, "broken.json"),
        (["diff", str(TRACES / "cpu" / "cpu_only_train_small.json.gz"), str(A)],
         ExitCode.INPUT, "CPU-only"),
        (["diff", str(KINETO / "job128_two_ranks"), str(A)], ExitCode.USAGE, "holds 2 trace"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_its_exit_code(args, code, needle, tmp_path, capsys):
    (tmp_path / "broken.json").write_bytes(gzip.compress(b"{not json"))
    argv = [a.replace("{d}", str(tmp_path)) for a in args]
    assert main(argv) == code
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "Traceback" not in captured.err
    assert captured.out == ""


# ------------------------------------------------------------------ the screen
async def test_the_screen_shows_the_top_rows_and_cycles_its_views(pair):
    screen = DiffScreen(pair, source=f"{A.name} → {B.name}", top=5)
    app = GitmApp(screen)
    async with app.run_test(size=(160, 45)) as pilot:
        table = app.query_one("#diff-table", DataTable)
        await until(pilot, lambda: table.row_count > 0, what="the kernel rows")
        assert table.row_count == min(5, pair.kernels_total)
        first = table.get_row_at(0)
        assert first[0] == pair.kernels[0].status
        top = pair.cleaned(2000).kernels[0]
        assert str(first[1]) == shown_names([c.key for c in pair.cleaned(2000).kernels[:5]])[0]
        details = str(app.query_one("#diff-details", Static).content)
        assert details.startswith(top.key) and f"status {top.status}" in details  # … whole here
        assert screen.selected == top
        console = Console(width=70, record=True)
        console.print(app.query_one("#diff-totals", Static).content)
        totals = console.export_text()
        assert "GPU busy" in totals and "launch calls" in totals
        await pilot.press("v")
        await until(pilot, lambda: table.border_title == "classes", what="the classes view")
        assert table.row_count == len(pair.classes)
        await pilot.press("q")


async def test_the_screen_loads_in_a_thread_and_an_error_ends_it():
    gate = threading.Event()

    def load(progress):
        progress(f"reading {A.name}…")
        assert threading.current_thread() is not threading.main_thread()
        gate.wait(10)
        return diff_traces(load_trace(str(A)), load_trace(str(A)))

    screen = DiffScreen(load=load, source="a → a")
    app = GitmApp(screen)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(
            pilot,
            lambda: "reading" in str(app.query_one("#diff-stage", Static).render()),
            what="the loader's stage line",
        )
        await pilot.press("v")  # nothing to cycle yet: must not fail
        gate.set()

        def filled() -> bool:
            tables = app.query("#diff-table")
            return bool(tables) and tables.first(DataTable).row_count > 0

        await until(pilot, filled, what="the diff's rows")
        assert screen.shown is not None and all(c.status == "unchanged" for c in screen.rows)

    def fail(progress):
        raise RuntimeError("x.json.gz: truncated gzip file")

    broken = DiffScreen(load=fail, source="x")
    app = GitmApp(broken)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: broken.error, what="the loader's error")
    assert broken.error == "x.json.gz: truncated gzip file" and app.return_code == 1
    assert isinstance(broken.failure, RuntimeError)
