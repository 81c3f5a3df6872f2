"""Work that must not hold the process: the numba warm-up runs in a daemon thread whose result
is delivered to the event loop (and dropped if the run ended first)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable


def in_daemon_thread(fn: Callable[[], float]) -> asyncio.Future[float]:
    """Run ``fn`` in a daemon thread; return a future resolved on this loop.

    Compilation can take seconds on a cold cache: a daemon thread lets the process exit at once
    when the user quits, where ``asyncio.to_thread`` would make interpreter shutdown wait for it.
    """
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[float] = loop.create_future()

    def deliver(result: float | None, exc: BaseException | None) -> None:
        # a closed loop means the run ended (the user quit) before compiling did: nobody waits
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, fut, result, exc)

    def target() -> None:
        try:
            result = fn()
        except BaseException as e:  # delivered to the engine, which falls back to numpy
            deliver(None, e)
        else:
            deliver(result, None)

    threading.Thread(target=target, name="gitm-numba-warmup", daemon=True).start()
    return fut


def _settle(fut: asyncio.Future[float], result: float | None, exc: BaseException | None) -> None:
    if fut.done():  # cancelled because the run ended first
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(float(result or 0.0))
