"""The asyncio sampler: reads a backend every ``interval_s`` (default 1 s) in a worker thread,
so a slow driver call never blocks the event loop, and hands the samples to the sinks and to a
publish callback. Its own cost per sample is measured (``cost_s``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from engine.telemetry.backends import Backend
from engine.telemetry.sample import TelemetrySample


class Sampler:
    def __init__(
        self,
        backend: Backend,
        interval_s: float = 1.0,
        sinks: list[Any] | None = None,
        publish: Callable[[list[TelemetrySample]], None] | None = None,
        on_lost: Callable[[int, str], None] | None = None,
    ) -> None:
        self.backend = backend
        self.interval_s = interval_s
        self.sinks = sinks or []
        self.publish = publish
        self.on_lost = on_lost
        self.cost_s: list[float] = []  # wall seconds per backend.sample() call
        self.samples = 0
        self._reported: set[int] = set()

    def sample_once(self) -> list[TelemetrySample]:
        """One synchronous round (thread side): sample, time it."""
        t0 = time.perf_counter()
        out = self.backend.sample()
        self.cost_s.append(time.perf_counter() - t0)
        return out

    async def run(self, stop: asyncio.Event | None = None, rounds: int | None = None) -> None:
        """Sample until ``stop`` is set (or ``rounds`` rounds), at the interval."""
        n = 0
        while not (stop is not None and stop.is_set()) and (rounds is None or n < rounds):
            t0 = time.monotonic()
            samples = await asyncio.to_thread(self.sample_once)
            self.samples += len(samples)
            for s in self.sinks:
                s.write(samples)
            if self.publish is not None:
                self.publish(samples)
            for idx, why in self.backend.lost.items():
                if idx not in self._reported:
                    self._reported.add(idx)
                    if self.on_lost is not None:
                        self.on_lost(idx, why)
            n += 1
            wait = max(0.0, self.interval_s - (time.monotonic() - t0))
            if stop is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=wait)
            else:
                await asyncio.sleep(wait)
