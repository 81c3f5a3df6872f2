"""A trial's blocks that reach the loop as the run ends are not shown (found trying the README's
first command in a fresh install: approve I1, then `q` while the next trial measured — after
the dashboard closed, "Task exception was never retrieved … RuntimeError: Executor shutdown
has been called" and two tracebacks on the terminal)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from engine.runtime.phases import OptimizePhases


def _phases(stopped: bool = False) -> OptimizePhases:
    return OptimizePhases(SimpleNamespace(stopped=stopped))


async def test_a_block_after_the_end_starts_no_show(monkeypatch):
    ph = _phases()
    started: list[object] = []

    async def show(m: object) -> None:
        started.append(m)

    monkeypatch.setattr(ph, "show", show)
    ph._show_soon("block 1")
    await asyncio.sleep(0)
    ph.stop_showing()
    ph._show_soon("block 2")  # handed over by the measuring thread as the run ended
    await asyncio.sleep(0)
    assert started == ["block 1"] and ph._shows == []


async def test_a_pending_show_is_cancelled_and_one_the_shutdown_overtakes_is_dropped(monkeypatch):
    ph = _phases()
    gate = asyncio.Event()

    async def show(m: object) -> None:
        await gate.wait()
        raise RuntimeError("Executor shutdown has been called")

    monkeypatch.setattr(ph, "show", show)
    ph._show_soon("waiting")
    (pending,) = ph._shows
    ph.stop_showing()
    with pytest.raises(asyncio.CancelledError):
        await pending
    gate.set()

    async def overtaken(m: object) -> None:  # a show already past its start at the shutdown
        raise RuntimeError("Executor shutdown has been called")

    monkeypatch.setattr(ph, "show", overtaken)
    await ph._show_quietly("late")  # dropped, not raised: the run is ending


async def test_a_show_that_fails_while_the_run_goes_on_is_not_hidden(monkeypatch):
    ph = _phases()

    async def show(m: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(ph, "show", show)
    with pytest.raises(RuntimeError, match="a bug"):
        await ph._show_quietly("block")
