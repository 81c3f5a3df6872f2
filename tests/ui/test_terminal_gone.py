"""A dashboard whose terminal goes away (issue 36): Textual's output thread died on the first
refused write and the app, the engine on its loop and the run all hung for good. Now what the
terminal refuses is dropped and the run stops as on SIGHUP: journal, report, process gone."""

from __future__ import annotations

import os
import sys
import time

import pytest

from engine.store.journal import read
from gitm_tui.terminal import _Dropping
from tests.paths import ROOT


class _Hungup:
    def __init__(self) -> None:
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        raise OSError(5, "Input/output error")

    def flush(self) -> None:
        raise OSError(5, "Input/output error")

    def fileno(self) -> int:
        return 2


def test_a_refused_write_is_dropped_and_said_once():
    told: list[int] = []
    f = _Dropping(_Hungup(), lambda: told.append(1))
    assert f.write("\x1b[?1000l") == 8
    f.flush()
    assert f.write("more") == 4
    assert told == [1] and f.refused
    assert f.fileno() == 2  # everything else is the file's own


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_the_dashboard_stops_with_a_report_when_its_terminal_closes(tmp_path):
    import pty

    env = {**os.environ, "GITM_SCRATCH": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env["TERM"] = "xterm-256color"
    env.pop("TEXTUAL_DRIVER", None)
    pid, master = pty.fork()
    if pid == 0:  # the child: the dashboard on the pseudo-terminal
        os.execve(sys.executable, [sys.executable, "-m", "gitm_tui", "--budget", "120s"], env)
    journal = None
    try:
        deadline = time.monotonic() + 120  # bounds the test; measures nothing
        while journal is None and time.monotonic() < deadline:  # drain the screen until the
            try:  # run has journalled its proposals
                os.read(master, 1 << 16)
            except OSError:
                break
            found = list(tmp_path.glob("runs/*/journal.jsonl"))
            if found and any(r.get("to") == "PROPOSED" for r in read(found[0])):
                journal = found[0]
        assert journal is not None, "the dashboard never started its run"
        os.close(master)  # the terminal goes away (ssh dropped, tmux killed)
        master = -1
        end = time.monotonic() + 60
        while time.monotonic() < end:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the dashboard outlived its terminal by 60 s (hung)")
    finally:
        if master >= 0:
            os.close(master)
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    finished = [r for r in read(journal) if r.get("type") == "run_finished"]
    assert finished and finished[-1]["status"] == "stopped"
    assert (journal.parent / "report.md").exists()
