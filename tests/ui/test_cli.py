"""The command line as a user meets it: headless output, exit codes, one-line errors, layering."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gitm_tui.cli import main
from gitm_tui.exit_codes import ExitCode
from tests.paths import ROOT


def run_cli(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "gitm_tui", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_headless_prints_only_json_lines_and_exits_zero():
    p = run_cli("--no-ui", "--workload", "kitti", "--budget", "2s", "--seed", "1")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    events = [json.loads(line) for line in lines]  # every stdout line is JSON
    types = [e["type"] for e in events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert {"decoded", "kappa", "telemetry", "progress", "phase"} <= set(types)
    assert events[0]["simulated"] is True and "simulated" in events[0]["device"]
    assert events[-1]["segments"] == sum(len(e["labels"]) for e in events if e["type"] == "decoded")
    assert "SIMULATED" in p.stderr  # narration goes to stderr


def test_engine_import_is_ui_free():
    code = (
        "import engine, engine.runtime, engine.eesm.pipeline, engine.device.simulator, sys; "
        "bad = [m for m in ('textual', 'rich') if m in sys.modules]; assert not bad, bad"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.slow
def test_headless_path_never_imports_textual():
    code = (
        "import sys; from gitm_tui.cli import main; "
        "rc = main(['--no-ui', '--workload', 'af2', '--budget', '0.3s']); "
        "assert 'textual' not in sys.modules; sys.exit(rc)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--no-ui", "--workload", "resnet"], "unknown workload 'resnet'"),
        (["--no-ui", "--budget", "10x"], "bad budget '10x'"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--seed", "-1", "--no-ui"], "bad seed"),
        (["validate", "--seeds", "0"], "must be >= 1"),
        (["validate", "--workload", "nope"], "unknown workload 'nope'"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(capsys, args, needle):
    assert main(args) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_validate_writes_report(tmp_path, capsys):
    out = tmp_path / "v.md"
    assert (
        main(
            [
                "validate",
                "--iterations",
                "5",
                "--seeds",
                "1",
                "--workload",
                "kitti",
                "--write",
                str(out),
            ]
        )
        == 0
    )
    text = out.read_text()
    assert "| kitti | full |" in text and "| kitti | raw |" in text


def test_exit_codes_are_documented_in_readme():

    readme = (ROOT / "README.md").read_text()
    for code in ExitCode:
        assert f"| {code.value} | `{code.name}`" in readme, code


def test_a_bug_gives_one_line_and_the_traceback_in_a_file(monkeypatch, capsys, tmp_path):
    """An unexpected exception (a bug) is not a traceback on the terminal: one line naming the
    file that holds it, exit code 1 (INTERNAL)."""
    import gitm_tui.cli as cli

    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))

    def boom(_argv):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(cli, "_main", boom)
    rc = cli.main(["--no-ui"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "internal error" in err and "planted" in err
    (crash,) = (tmp_path / "crashes").iterdir()
    assert "ZeroDivisionError: planted" in crash.read_text()


def test_the_program_ends_without_collecting_what_it_leaves_but_callers_are_untouched(tmp_path):
    """Run as the program (no argv), main freezes what exists before the process ends, so
    Python's finalisation does not walk it in full collections (0.3 s after an analysis);
    called with an argv (tests, other code), it leaves the caller's GC as it was."""
    import gc

    code = (
        "import gc, sys\n"
        "from gitm_tui.cli import main\n"
        f"sys.argv = ['gitm-tui', 'analyze', {str(tmp_path / 'missing.json')!r}]\n"
        "rc = main()\n"
        "print(rc, gc.get_freeze_count())\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    rc, frozen = p.stdout.split()
    assert int(rc) == ExitCode.INPUT and int(frozen) > 10_000, p.stderr
    before = gc.get_freeze_count()
    assert main(["analyze", str(tmp_path / "missing.json")]) == ExitCode.INPUT
    assert gc.get_freeze_count() == before


def test_heavy_imports_run_without_the_gc_and_only_the_program_freezes_them(monkeypatch):
    """loading_modules pauses the cyclic GC around a command's imports and restores it; it
    freezes what they made only in the program itself (gitm_tui.cli.main without an argv)."""
    import gc

    from gitm_tui.commands import common

    for program in (False, True):
        monkeypatch.setattr(common, "as_program", program)
        gc.collect()
        before = gc.get_freeze_count()
        with common.loading_modules():
            assert not gc.isenabled()
            made = [[i] for i in range(1000)]  # tracked objects, as imports make
        assert gc.isenabled()
        assert (gc.get_freeze_count() > before + len(made)) == program
        if program and before == 0:
            gc.unfreeze()  # nothing was frozen before: the test process's GC as it was


PYDANTIC_PLUGINS = """
import os, sys
from gitm_tui.commands.common import loading_modules
from pydantic.plugin import _loader
scans = []
real = _loader.entry_points
_loader.entry_points = lambda **k: (scans.append(k), real(**k))[1]
with loading_modules():
    inside = os.environ.get("PYDANTIC_DISABLE_PLUGINS")
    from pydantic import BaseModel

    class M(BaseModel):
        x: int
print(repr((inside, os.environ.get("PYDANTIC_DISABLE_PLUGINS"), len(scans), M(x=1).x)))
"""


@pytest.mark.parametrize(("user", "want"), [(None, ("__all__", None, 0, 1)), ("", ("", "", 1, 1))])
def test_models_made_while_loading_look_for_no_pydantic_plugins(user, want):
    """The models gitm makes while loading its modules do not send pydantic through every
    installed package's entry points (~30 ms of analyze), and the environment is the user's
    again after: unset stays unset; a value the user set (here: empty, plugins on) is kept,
    and pydantic looks for plugins as the user asked."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    if user is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = user
    p = subprocess.run(
        [sys.executable, "-c", PYDANTIC_PLUGINS], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == repr(want)


NO_SCAN = """
import contextlib, io, sys
import importlib.metadata as md
scans = []
real = md.entry_points
md.entry_points = lambda *a, **k: (scans.append(k), real(*a, **k))[1]
from gitm_tui.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["analyze", "--json", "--no-write", sys.argv[1]])
print(rc, len(scans))
"""


def test_a_warm_analyze_reads_no_packages_entry_points():
    """Neither pydantic (plugins) nor numba (extensions, needed only to compile) reads every
    installed package's entry points in a warm `analyze`: ~60 ms of each run between them."""
    trace = ROOT / "tests" / "data" / "traces" / "kineto" / "a100_triton_one_kernel.json.gz"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    runs = []
    for _ in range(2):  # the first may compile (a cold cache): then numba loads extensions
        p = subprocess.run(
            [sys.executable, "-c", NO_SCAN, str(trace)], env=env, capture_output=True,
            text=True, timeout=600,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        runs.append(p.stdout.split()[-2:])
    assert runs[-1] == ["0", "0"]
