"""The commands file is never trusted to be a file (issue 51): a FIFO in its place froze the
run deaf to SIGTERM, a link to /dev/zero grew the run's memory until the reader died and later
decisions were ignored, a torn line swallowed the decision after it. Each holds here: one line
said, the run goes on, decisions after the damage still come through."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from engine.store.commands import MAX_LINE, CommandReader

GOOD = json.dumps({"action": "approve", "id": "I2", "by": "cli:test"})


def test_a_fifo_in_its_place_is_said_and_never_blocks(tmp_path: Path):
    os.mkfifo(tmp_path / "commands.jsonl")  # no writer: a plain open() blocks for ever
    r = CommandReader(tmp_path)
    t = time.monotonic()
    assert r.poll() == [] and time.monotonic() - t < 1.0
    assert "not a regular file" in r.problem


def test_a_link_to_dev_zero_is_not_followed(tmp_path: Path):
    (tmp_path / "commands.jsonl").symlink_to("/dev/zero")
    r = CommandReader(tmp_path)
    assert r.poll() == [] and "not read" in r.problem


def test_a_torn_line_does_not_swallow_the_next_decision(tmp_path: Path):
    path = tmp_path / "commands.jsonl"
    path.write_text('{"action": "appro')  # a writer that died mid-line
    r = CommandReader(tmp_path)
    assert r.poll() == []  # waits for its end
    with path.open("a") as f:
        f.write(GOOD + "\n")  # the next decision, glued onto it
    assert [(d.action, d.iid) for d in r.poll()] == [("approve", "I2")]


def test_an_endless_line_costs_bounded_reads_and_the_decisions_after_it_arrive(tmp_path: Path):
    path = tmp_path / "commands.jsonl"
    with path.open("wb") as f:
        f.write(b"\0" * (3 * MAX_LINE))  # no newline in 24 MiB
        f.write(b"\n" + GOOD.encode() + b"\n")
    r = CommandReader(tmp_path)
    got = []
    for _ in range(6):  # each poll reads at most POLL_BYTES
        got += r.poll()
    assert [(d.action, d.iid) for d in got] == [("approve", "I2")]
    assert "skipped" in r.problem


async def test_a_run_with_a_fifo_for_its_commands_file_ends_on_time(tmp_path: Path, monkeypatch):
    """The reproduction: a FIFO at RUNS/RUN/commands.jsonl froze the run past its budget. It
    now ends within its budget (and a margin), saying once what is wrong with the file."""
    import asyncio

    from engine.runtime import Engine, RunConfig
    from engine.runtime.events import LogEvent

    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path))
    eng = Engine(RunConfig(workload="hft-lob", budget_s=6, approve="auto", force=True))
    sub = eng.bus.subscribe()
    task = asyncio.ensure_future(eng.run())
    while not task.done() and (eng.run_dir is None or not Path(eng.run_dir).is_dir()):
        await asyncio.sleep(0.05)
    os.mkfifo(Path(eng.run_dir) / "commands.jsonl")
    said = []
    t = time.monotonic()
    async for ev in sub:
        if isinstance(ev, LogEvent) and "commands.jsonl" in ev.message:
            said.append(ev.message)
        if task.done():
            break
    await asyncio.wait_for(task, 30)
    assert time.monotonic() - t < 30
    assert said == ["commands.jsonl is not a regular file: decisions sent to it are not seen"]
