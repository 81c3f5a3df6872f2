"""The hostile-input corpus (tests/ui/hostile_names.py, synthetic) through every output: the terminal
summary of `gitm-tui analyze` (pipe and TTY), --json, report.md / analysis.json / perfetto.json,
the error lines, the analysis screen and the live dashboard. Nothing from outside may reach them
raw: no ESC, BEL, NUL or C1 byte the app did not put there itself, markup shown literally, every
error one line with its documented exit code, never a traceback; `q` quits at once while a
trace loads. Plus a full disk (exit 3, one line) and `audit --out DIR`."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from textual.widgets import DataTable, RichLog, Static

from engine.analyze.compute import analyze_trace
from engine.regimes import Regime
from engine.runtime.events import (
    DecodedBatch,
    EvidenceView,
    HypothesesReport,
    HypothesisView,
    InvariantsReport,
    InvariantView,
    LogEvent,
    RunStarted,
    TelemetryEvent,
    ViolationView,
)
from engine.study.audit import AuditLedger
from engine.telemetry.sample import TelemetrySample
from engine.text import md_text
from engine.trace.kineto.kineto import read_kineto
from gitm_tui.app import Settings, make_analysis_app, make_app
from gitm_tui.cli import main
from gitm_tui.modes.analysis import kernel_details
from gitm_tui.render import SHOWN_CHARS
from gitm_tui.screens import ConfirmScreen, InterventionScreen
from gitm_tui.widgets.causes import CauseTable
from gitm_tui.widgets.interventions import InterventionTable
from gitm_tui.widgets.violations import ViolationTable
from tests.paths import ROOT, TRACES
from tests.ui.hostile_names import HOSTILE_FILE_STEM, write_corpus
from tests.ui.scripted_engine import ScriptedEngine
from tests.ui.waiting import until

KINETO = TRACES / "kineto"

#: characters no output may carry from outside: C0 controls but tab and newline (the app's own
#: line structure), DEL, C1, bidi controls, line separators, lone surrogates
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
#: the only escape sequences the app itself writes to a colour terminal: SGR (colours, bold)
SGR = re.compile("\x1b\\[[0-9;]*m")


def unsafe(text: str) -> list[str]:
    """Return the distinct forbidden characters in ``text`` (empty: safe)."""
    return sorted(set(UNSAFE.findall(text)))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("hostile"))


def _strings(data):
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield k
            yield from _strings(v)
    elif isinstance(data, list):
        for x in data:
            yield from _strings(x)


def _check_json_file(path: Path) -> object:
    text = path.read_bytes().decode("utf-8")  # strict UTF-8: no encoded surrogate
    assert unsafe(text) == [], (path, unsafe(text))  # every control character a JSON escape
    data = json.loads(text)
    assert not any(re.search("[\ud800-\udfff]", s) for s in _strings(data)), path
    return data


# ------------------------------------------------------------------ analyze: terminal and files


def test_analyze_shows_hostile_names_escaped_on_a_pipe_and_writes_clean_files(
    corpus, capsys, tmp_path
):
    out_dir = tmp_path / "out"
    files = [str(corpus["names"]), str(corpus["file_name"])]
    rc = main(["analyze", *files, "--out", str(out_dir), "--workers", "1"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert unsafe(out) == [] and unsafe(err) == [], (unsafe(out), unsafe(err))
    assert "Traceback" not in out + err
    # the names are shown, their escapes visible and their markup literal
    assert "\\x1b[2J" in out and "\\x1b]0;pwned\\x07" in out and "[bold red]x[/]" in out
    assert "\\u202egnp.exe" in out

    # the output folder's name has no control or bidi character (issue 51: `ls` in a
    # terminal ran the file name's escapes)
    folder_name = "_]0;pwned_[bold red]x__[2J"
    assert (out_dir / folder_name).is_dir()
    stems = {"names": "hostile_names", "file_name": folder_name}
    for role, stem in stems.items():
        folder = out_dir / stem
        report = (folder / "report.md").read_bytes()
        assert not {b"\x1b", b"\x07", b"\x00"} & {bytes([b]) for b in report}, role
        text = report.decode("utf-8")
        assert unsafe(text) == [], (role, unsafe(text))
        analysis = _check_json_file(folder / "analysis.json")
        perfetto = _check_json_file(folder / "perfetto.json")
        assert isinstance(analysis, dict) and isinstance(perfetto, dict)
    report_md = (out_dir / "hostile_names" / "report.md").read_text(encoding="utf-8")
    assert "\\x1b[2J" in report_md and "[bold red]x[/]" in report_md
    # the device's name from the trace: its escapes visible, its markup escaped (issue 51: it
    # reached report.md raw, where `[x](url)` would have been a link)
    said = md_text("\x1b]0;gpu\x07NVIDIA [bold]A100[/] \u202e\ufffd")
    assert f"trace says {said}" in report_md and "\\[bold\\]A100" in said
    # analysis.json keeps the names as they were (JSON escapes their controls); only the lone
    # surrogate, which UTF-8 cannot hold, became U+FFFD
    data = json.loads((out_dir / "hostile_names" / "analysis.json").read_text(encoding="utf-8"))
    names = [k["name"] for k in data["top_kernels"]]
    assert any(n.startswith("\x1b[2J") for n in names)
    assert any(n.startswith("\ufffd ") for n in names)


def test_analyze_on_a_colour_terminal_writes_only_its_own_colour_codes(corpus, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")  # Rich writes as to a terminal: SGR codes
    monkeypatch.setenv("COLUMNS", "160")
    rc = main(["analyze", str(corpus["names"]), "--no-write"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert SGR.search(out), "expected the app's own colours"
    assert unsafe(SGR.sub("", out)) == [], unsafe(SGR.sub("", out))


def test_analyze_json_output_is_valid_json_without_surrogates(corpus, capsys, tmp_path):
    rc = main(["analyze", str(corpus["names"]), "--json", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0 and err == "", err
    assert unsafe(out) == []
    data = json.loads(out)
    assert data[0]["hardware"]["reported_name"].startswith("\x1b]0;gpu")  # data, kept
    assert (tmp_path / "hostile_names" / "analysis.json").exists()  # the surrogate no longer fails


def test_error_lines_quoting_file_names_and_sqlite_contents_are_one_clean_line(corpus, capsys):
    rc = main(["analyze", str(corpus["sqlite"]), str(corpus["garbage"]), "--no-write"])
    _, err = capsys.readouterr()
    assert rc == 3
    lines = err.splitlines()
    assert len(lines) == 2 and err.endswith("\n"), err  # one line per file, no more
    assert all(line.startswith("gitm-tui: error: ") for line in lines)
    assert unsafe(err) == [], unsafe(err)
    assert "malformed database schema" in lines[0] and "\\x1b]0;pwned\\x07" in lines[0]
    assert "\\x1b]0;pwned\\x07[bold red]x" in lines[1]
    assert "Traceback" not in err


@pytest.mark.timeout(240)
def test_an_8_mb_kernel_name_is_shown_cut(corpus, capsys, tmp_path):
    rc = main(["analyze", str(corpus["huge_name"]), "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and unsafe(out + err) == []
    if rc == 3:  # an importer limit on element size may refuse it: then one line says so
        assert len(err.splitlines()) == 1 and err.startswith("gitm-tui: error: ")
        return
    assert rc == 0, err
    assert len(out) < 100_000  # the summary shows a cut name, not 8 MB
    assert "kkkk…" in out
    report = (tmp_path / "huge_name" / "report.md").read_text(encoding="utf-8")
    assert len(report) < 100_000 and unsafe(report) == []


# ------------------------------------------------------------------ the analysis screen


def _svg_text(app) -> str:
    return app.export_screenshot()


async def test_analysis_screen_shows_hostile_names_literally(corpus):
    res = analyze_trace(read_kineto(corpus["names"]))
    app = make_analysis_app(res, source=str(corpus["names"]))
    async with app.run_test(size=(160, 50)) as pilot:
        table = app.query_one("#analysis-kernels", DataTable)
        await until(pilot, lambda: app.analysis.selected is not None, what="the filled screen")
        assert unsafe(_svg_text(app)) == []
        cells = [str(table.get_row_at(r)[0]) for r in range(table.row_count)]
        assert table.row_count == len(res.analysis.top_kernels)
        assert all(unsafe(c) == [] for c in cells)
        assert any(c.startswith("[bold red]x[/]") for c in cells)  # literal, not styled
        assert any(c.startswith("[/]") for c in cells)
        shown = app.analysis.shown.top_kernels  # the table's rows, in order (not sorted)
        for row in range(min(table.row_count, 12)):  # every payload in the details panel
            table.move_cursor(row=row)
            await until(pilot, lambda row=row: app.analysis.selected is shown[row])
            details = app.query_one("#analysis-details", Static)
            assert unsafe(str(details.render())) == []
        await pilot.press("q")


@pytest.mark.timeout(120)
async def test_analysis_screen_cuts_an_8_mb_name_and_still_quits():
    res = analyze_trace(read_kineto(KINETO / "a100_triton_one_kernel.json.gz"))
    res.analysis.top_kernels[0].name = "\x1b[2J" + "k" * (8 * 2**20)
    app = make_analysis_app(res)
    async with app.run_test(size=(140, 40)) as pilot:
        table = app.query_one("#analysis-kernels", DataTable)
        await until(pilot, lambda: app.analysis.selected is not None, what="the filled screen")
        shown = str(table.get_row_at(0)[0])
        assert len(shown) <= SHOWN_CHARS and shown.startswith("\\x1b[2J") and shown[-1] == "…"
        assert app.analysis.selected is not None and len(app.analysis.selected.name) <= SHOWN_CHARS
        assert unsafe(_svg_text(app)) == []
        await pilot.press("q")
    assert app.return_code == 0


async def test_the_stage_line_names_a_hostile_file_literally():
    """The loader's progress quotes the file name: markup in it is text, its escapes visible."""
    import threading

    gate = threading.Event()
    res = analyze_trace(read_kineto(KINETO / "a100_triton_one_kernel.json.gz"))

    def load(progress):
        progress(f"reading {HOSTILE_FILE_STEM}[/]…")
        gate.wait(30)
        return res

    app = make_analysis_app(load=load, source=HOSTILE_FILE_STEM)
    async with app.run_test(size=(140, 40)) as pilot:

        def stage_line() -> str:
            return str(app.query_one("#analysis-stage", Static).render())

        await until(pilot, lambda: stage_line().startswith("reading"), what="the stage line")
        stage = stage_line()
        assert "[bold red]x" in stage and "[/]" in stage and unsafe(stage) == [], stage
        assert unsafe(_svg_text(app)) == []
        gate.set()

        def filled() -> bool:  # the result arrives, the screen is rebuilt, then filled
            tables = app.query("#analysis-kernels")
            return bool(tables) and tables.first(DataTable).row_count > 0

        await until(pilot, filled, what="the kernel table's rows")
        assert app.analysis.error is None


@pytest.mark.timeout(120)
def test_q_quits_at_once_while_a_trace_is_still_loading(tmp_path):
    """A loader that never returns (a 21 s load, a FIFO): `q` ends the process anyway. Run in a
    child process, as `gitm-tui analyze --ui` runs: the bug was in App.run's exit, which waited
    for the loading thread. A bounded wait (never a time assertion): before the fix the child
    never ended."""
    script = textwrap.dedent(
        """
        import threading
        from gitm_tui.app import make_analysis_app
        from tests.ui.waiting import until

        started = threading.Event()

        def load(progress):
            progress("reading slow.json.gz…")
            started.set()
            threading.Event().wait()  # a load that outlives the app

        async def press_q(pilot):
            await until(pilot, started.is_set, what="the load's start")
            await pilot.press("q")

        app = make_analysis_app(load=load, source="slow.json.gz")
        app.run(headless=True, size=(100, 30), auto_pilot=press_q)
        print("quit", app.return_code)
        """
    )
    env = {**os.environ, "GITM_SCRATCH": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "quit 0", r.stdout


# ------------------------------------------------------------------ the live dashboard


HOSTILE_NOTE = "metric printed as [/] \x1b]0;pwned\x07\x1b[2J"


class HostileEngine(ScriptedEngine):
    """The scripted run, then events whose strings came from outside: an intervention note
    built from a program's output, a lever named by the user, log lines, invariant and cause
    texts quoting kernel names, a device name from the driver."""

    async def run(self) -> None:
        pub = self.bus.publish
        pub(
            RunStarted(
                t_wall=0.0,
                run_id="20261129-000000-abcdef",
                workload="command",
                workload_title="python job.py [/] \x1b[2J",
                device="NVIDIA \x1b]0;gpu\x07 [bold]H100[/]",
                simulated=False,
                budget_s=60.0,
                seed=1,
                streams=(7,),
                regimes=tuple(r.name for r in Regime),
            )
        )
        start = np.arange(3, dtype=np.int64) * 10_000
        pub(
            DecodedBatch(
                t_wall=1.0,
                stream=7,
                start_ns=start,
                end_ns=start + 5_000,
                labels=np.array([Regime.COMPUTE] * 3, np.uint8),
                degenerate=np.zeros(3, bool),
                kappa=np.full(3, 10.0, np.float32),
                names=("[/]\x1b[2J kernel", "[bold]k[/bold]\x07", "\u202ek\x9b"),
            )
        )
        for dev in (0, 1):  # two devices: the panel's per-device view shows their names
            pub(
                TelemetryEvent(
                    t_wall=1.0,
                    sample=TelemetrySample(
                        t_ns=10**8, device=dev, source="nvml", name="GPU [/] \x1b]0;x\x07"
                    ),
                )
            )
        pub(LogEvent(t_wall=2.0, level="warning", message="output:\n[/]\x1b[2J\x07 done"))
        pub(
            InvariantsReport(
                t_wall=2.0,
                results=(
                    InvariantView(
                        "kernel_time",
                        checkable=True,
                        checked=3,
                        reason="",
                        violations=(
                            ViolationView(
                                name="[/]\x1b[2J kernel",
                                message="[/] over \x1b]0;x\x07 its allowance",
                                count=1,
                                observed=2.0,
                                predicted=1.0,
                                residual=1.0,
                                unit="ns",
                                rows=(0,),
                            ),
                        ),
                    ),
                    InvariantView(
                        "bytes", checkable=False, checked=0, reason="[/] no counters \x1b[2J"
                    ),
                ),
            )
        )
        pub(
            HypothesesReport(
                t_wall=2.0,
                hypotheses=(
                    HypothesisView(
                        cause="LAUNCH_BOUND",
                        description="",
                        impact=0.2,
                        confidence=0.9,
                        claimed=True,
                        evidence=(EvidenceView("structural", "[/] \x1b[2J", 1.0),),
                    ),
                ),
            )
        )
        self._iv("I1", "block=[/]\x1b[2J", "SAFE", "PROPOSED", 0.1, None, HOSTILE_NOTE)
        self._iv("I2", "threads", "SAFE", "VERIFIED", 0.2, 0.19, HOSTILE_NOTE, "cli:[/]\x07")
        await self._stopped.wait()


async def test_markup_and_escapes_from_outside_never_crash_or_reach_the_dashboard():
    eng = HostileEngine()
    app = make_app(Settings(), eng)
    async with app.run_test(size=(140, 44)) as pilot:
        table = app.query_one(InterventionTable)
        await until(pilot, lambda: table.row_count == 2, what="both interventions")
        note = str(table.get_cell("I1", "note"))
        assert note.startswith("metric printed as [/] \\x1b]0;pwned\\x07")  # literal, visible
        assert unsafe(_svg_text(app)) == []
        for widget in (ViolationTable, CauseTable):
            t = app.query_one(widget)
            cells = [str(c) for r in range(t.row_count) for c in t.get_row_at(r)]
            assert cells and all(unsafe(c) == [] for c in cells), cells
        assert any("[/]" in str(c) for c in app.query_one(ViolationTable).get_row_at(0))
        app.query_one("#loop").active = "tab-log"
        # a hidden log shows its lines once its tab gives it a size
        await until(pilot, lambda: app.query_one(RichLog).lines, what="the log's lines")
        assert unsafe(_svg_text(app)) == []
        app.query_one("#loop").active = "tab-interventions"
        table.focus()
        table.move_cursor(row=table.get_row_index("I1"))
        await pilot.press("d")  # the details screen quotes evidence, note, lever
        await until(pilot, lambda: isinstance(app.screen, InterventionScreen))
        body = str(app.screen.query_one(Static).render())
        assert "[/]" in body and unsafe(body) == [] and unsafe(_svg_text(app)) == []
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.dashboard)
        await pilot.press("a")  # the confirmation names the lever
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        question = str(app.screen.query_one(Static).render())
        assert "block=[/]\\x1b[2J" in question and unsafe(_svg_text(app)) == []
        await pilot.press("n")
        await until(pilot, lambda: app.screen is app.dashboard)
        await pilot.press("q")
    assert app.return_code == 0


# ------------------------------------------------------------------ a full disk; audit --out


class _FullDisk:
    """A stdout on a full disk: every write fails with ENOSPC."""

    encoding = "utf-8"

    def write(self, s: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _one_error_line(err: str, *needles: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gitm-tui: error: "), err
    assert "internal error" not in err and "Traceback" not in err
    for n in needles:
        assert n in lines[0], err


def test_a_full_disk_is_one_line_and_exit_code_3_not_a_bug(capsys, monkeypatch, tmp_path):
    trace = str(KINETO / "a100_triton_one_kernel.json.gz")
    # stdout on a full disk (`gitm-tui analyze … > file` on a full file system)
    monkeypatch.setattr(sys, "stdout", _FullDisk())
    assert main(["analyze", trace, "--no-write"]) == 3
    _one_error_line(capsys.readouterr().err, "cannot write stdout", "No space left on device")
    monkeypatch.undo()

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    # the outputs of analyze
    monkeypatch.setattr("engine.analyze.output.export.atomic_write_text", full)
    assert main(["analyze", trace, "--out", str(tmp_path / "a")]) == 3
    _one_error_line(capsys.readouterr().err, "No space left on device")
    # the audit ledger
    monkeypatch.setattr("engine.store.runs.atomic_write_text", full)
    trace = str(KINETO / "a100_event_sync_multistream.json.gz")
    assert main(["audit", trace, "--seeds", "1", "--out", str(tmp_path / "l.json")]) == 3
    _one_error_line(capsys.readouterr().err, "l.json", "No space left on device")

    # an optimize run whose run store fills up (the engine journals it, then re-raises)
    async def run_out_of_space(config):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/scratch/runs/x/journal.jsonl")

    monkeypatch.setattr("gitm_tui.headless.run_headless", run_out_of_space)
    assert main(["--no-ui", "--budget", "5s"]) == 3
    _one_error_line(capsys.readouterr().err, "journal.jsonl", "No space left on device")


def test_audit_out_takes_a_directory_like_analyze(capsys, tmp_path):
    trace = str(KINETO / "a100_event_sync_multistream.json.gz")
    folder = tmp_path / "results"
    folder.mkdir()
    assert main(["audit", trace, "--seeds", "1", "--out", str(folder)]) == 0, capsys.readouterr()
    led = AuditLedger.model_validate_json((folder / "audit_ledger.json").read_text())
    assert led.corpus[0].kind == "trace"
    assert f"wrote {folder / 'audit_ledger.json'}" in capsys.readouterr().err
    # a file path still names the ledger itself
    assert main(["audit", trace, "--seeds", "1", "--out", str(tmp_path / "mine.json")]) == 0
    assert AuditLedger.model_validate_json((tmp_path / "mine.json").read_text()).corpus
    # and a path ending in a separator is a directory to create
    fresh = str(tmp_path / "fresh") + os.sep
    assert main(["audit", trace, "--seeds", "1", "--out", fresh]) == 0
    assert (tmp_path / "fresh" / "audit_ledger.json").exists()


def test_details_of_a_raw_kernel_row_are_cut_and_clean():
    """kernel_details is public (tests, the screenshot script): it cleans on its own."""
    from rich.console import Console

    res = analyze_trace(read_kineto(KINETO / "a100_triton_one_kernel.json.gz"))
    row = res.analysis.top_kernels[0].model_copy(update={"name": "\x1b]0;x\x07" + "k" * 10**6})
    console = Console(width=100, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(kernel_details(row))
    text = console.export_text()
    assert unsafe(text) == [] and "\\x1b]0;x\\x07" in text and len(text) < 3 * SHOWN_CHARS


# ------------------------------------------------------------------ optimize report, narration


def test_the_optimize_report_quotes_notes_and_names_without_their_escapes():
    """report.md of an optimize run: notes carry a program's output, the lever the user's flag."""
    from engine.optimizer.report import write

    claims = [
        {
            "id": "I1",
            "lever": "block|[/]\x1b[2J",
            "safety": "SAFE",
            "state": "VERIFIED",
            "note": HOSTILE_NOTE + "\nsecond line | with a pipe",
            "evidence": ["\x1b]0;x\x07 evidence"],
            "replay": "\x9b2J replay",
        }
    ]
    md = write(claims, {"workload": "command", "run_id": "r\x07", "device": "\u202egpu"})
    assert unsafe(md) == [], unsafe(md)
    row = next(line for line in md.splitlines() if line.startswith("| I1 |"))
    assert row.count(" | ") == 7  # eight cells: the pipes in lever and note are escaped
    # quoted as text: the escapes visible, markup characters backslash-escaped (md_escape)
    from engine.text import md_escape

    assert md_escape("metric printed as [/] \\x1b]0;pwned\\x07") in row and "\\|" in row


def test_headless_narration_is_one_clean_line_per_event():
    import io

    from gitm_tui.headless import _narrate

    err = io.StringIO()
    _narrate(LogEvent(t_wall=1.0, level="warning", message="out:\n\x1b[2J[/]\x07 done"), err)
    assert err.getvalue() == "gitm-tui: warning: out: \\x1b[2J[/]\\x07 done\n"
