"""A run store that cannot be used is the user's environment, said in one line (issue 36)."""

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
