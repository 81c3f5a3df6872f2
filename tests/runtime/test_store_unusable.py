"""A run store that cannot be used, a backend library that is missing: the user's environment,
said in one line with its exit code (issue 36)."""

from __future__ import annotations

from gitm_tui.cli import main


def test_a_gitm_scratch_that_is_a_file_is_one_line_and_exit_3(tmp_path, monkeypatch, capsys):
    """GITM_SCRATCH pointing at a file crashed with NotADirectoryError (exit 1, 'a bug in
    gitm-tui'); now: one line naming the variable and what to do, exit 3, no engine started."""
    afile = tmp_path / "not-a-dir"
    afile.write_text("x")
    monkeypatch.setenv("GITM_SCRATCH", str(afile))
    rc = main(["--no-ui", "--budget", "5s"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 3
    assert len(err) == 1 and err[0].startswith("gitm-tui: error: GITM_SCRATCH")
    assert "set GITM_SCRATCH to a writable directory" in err[0]
    assert afile.read_text() == "x"


def test_device_cpu_without_torch_is_exit_4(monkeypatch, capsys):
    """`--device cpu` runs the built-in workload's real PyTorch model: without torch that is a
    missing backend library — one line with the fix, exit 4 (BACKEND), as the README says;
    it was a CommandError reported as a bug (exit 1)."""
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    rc = main(["--no-ui", "--device", "cpu", "--budget", "5s"])
    err = capsys.readouterr().err
    assert rc == 4
    assert "needs PyTorch" in err and "pip install 'gitm-tui[torch]'" in err
    assert "internal error" not in err and "Traceback" not in err


#: the real thing's shape: os.fsync on a full disk raises ENOSPC naming no file
_FILLS_UP = """
import errno, os, sys
real, calls, LIMIT = os.fsync, [0], int(sys.argv[1])
def fsync(fd):
    calls[0] += 1
    if calls[0] > LIMIT:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real(fd)
os.fsync = fsync
sys.argv = ["gitm-tui", "--no-ui", "--budget", "6s", "--approve", "auto"]
from gitm_tui.cli import main
sys.exit(main())
"""


def test_a_run_store_that_fills_up_is_said_once_naming_the_store(tmp_path):
    """Issue 36: a full run store was reported as "engine failed", then "journal or report
    could not be written", then "cannot write stdout" — three lines, none naming the store,
    exit 3 only by luck. Now one error line names the file in the store; exit 3; what the run
    wrote before is kept. (Shown for real on a 16 KiB tmpfs in the issue's note.)"""
    import os
    import subprocess
    import sys

    from tests.paths import ROOT

    scratch = tmp_path / "scratch"
    env = {**os.environ, "GITM_SCRATCH": str(scratch), "PYTHONPATH": str(ROOT)}
    for after in (1, 6):  # at the first journal record; later, mid-run
        r = subprocess.run(
            [sys.executable, "-c", _FILLS_UP, str(after)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,  # proves it ends; measures nothing
        )
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("gitm-tui: error:")]
        assert r.returncode == 3, r.stderr
        assert len(errors) == 1, errors
        assert "the run store refused a write: cannot write " + str(scratch) in errors[0]
        assert "No space left on device" in errors[0]
        assert "Traceback" not in r.stderr and "cannot write stdout" not in r.stderr
        assert '"status":"failed"' in r.stdout
    assert any(scratch.glob("runs/*/journal.jsonl"))
