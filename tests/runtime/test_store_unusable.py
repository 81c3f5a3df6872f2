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
