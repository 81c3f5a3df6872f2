"""A reader that stalls never stalls the run (issue 36): `gitm-tui --no-ui … | (sleep 40; cat)`
made a 10 s run take 42 s, its measurements counting the wait on a full pipe."""

from __future__ import annotations

import asyncio
import io
import json
import threading

from engine.runtime import RunConfig
from engine.store.journal import read
from gitm_tui import headless


class _StalledReader(io.StringIO):
    """A stdout whose reader takes nothing until released: every write blocks until then."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.blocked = threading.Event()

    def write(self, text: str) -> int:
        self.blocked.set()
        self.release.wait(120)
        return super().write(text)


async def test_the_run_ends_while_its_reader_takes_nothing(tmp_path, monkeypatch):
    """The run finishes — its journal says so — while stdout's reader has not taken one line;
    released afterwards, the reader then gets every line, the last one run_finished."""
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    out, err = _StalledReader(), io.StringIO()
    run = asyncio.ensure_future(
        headless.run_headless(RunConfig(workload="kitti", budget_s=2), out=out, err=err)
    )

    def finished() -> bool:
        return any(
            r.get("type") == "run_finished"
            for j in (tmp_path / "runs").glob("*/journal.jsonl")
            for r in read(j)
        )

    for _ in range(600):  # (a bound for the test only: the run itself takes its 2 s budget)
        if finished():
            break
        await asyncio.sleep(0.1)
    assert out.blocked.is_set() and not out.getvalue()  # the reader took nothing yet
    assert finished(), "the run waited for its reader"
    out.release.set()
    assert await asyncio.wait_for(run, 60) == 0
    lines = out.getvalue().splitlines()
    assert json.loads(lines[-1])["type"] == "run_finished"
