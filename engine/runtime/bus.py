"""A bounded event bus that never blocks the publisher: high-rate kinds coalesce, overflow drops logs first."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from engine.runtime.events import Event, LogEvent, RunFinished

_LIFECYCLE = ("run_started", "phase", "run_finished", "kernels_ready")


class Subscription:
    """One consumer's queue. Iterate it (``async for ev in sub``) until the run finishes."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.dropped = 0
        self._q: deque[list[Event]] = deque()
        self._keyed: dict[Any, list[Event]] = {}
        self._ready = asyncio.Event()
        self._closed = False

    def put(self, ev: Event) -> None:
        """Queue ``ev`` without blocking: merge into a pending event of the same key if any."""
        key = ev.coalesce_key()
        if key is not None:
            box = self._keyed.get(key)
            if box is not None:
                box[0] = box[0].merge(ev)
                return
        if len(self._q) >= self.maxsize:
            self._drop_one()
        box = [ev]
        self._q.append(box)
        if key is not None:
            self._keyed[key] = box
        self._ready.set()

    def _drop_one(self) -> None:
        idx = next(
            (
                i
                for i, b in enumerate(self._q)
                if isinstance(b[0], LogEvent) and b[0].level == "info"
            ),
            None,
        )
        if idx is None:
            idx = next((i for i, b in enumerate(self._q) if b[0].kind not in _LIFECYCLE), 0)
        victim = self._q[idx]
        del self._q[idx]  # by position: boxes hold numpy arrays, so no equality-based remove
        key = victim[0].coalesce_key()
        if key is not None and self._keyed.get(key) is victim:
            del self._keyed[key]
        self.dropped += 1

    def get_nowait(self) -> Event | None:
        """Return the oldest pending event, or None."""
        if not self._q:
            self._ready.clear()
            return None
        box = self._q.popleft()
        key = box[0].coalesce_key()
        if key is not None and self._keyed.get(key) is box:
            del self._keyed[key]
        return box[0]

    async def get(self) -> Event:
        """Wait for and return the next event."""
        while True:
            ev = self.get_nowait()
            if ev is not None:
                return ev
            await self._ready.wait()

    def __len__(self) -> int:
        return len(self._q)

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            ev = await self.get()
            yield ev
            if isinstance(ev, RunFinished):
                return


class EventBus:
    """Fan-out of engine events to subscribers; ``publish`` is synchronous and O(1)."""

    def __init__(self, maxsize: int = 1024) -> None:
        self.maxsize = maxsize
        self._subs: list[Subscription] = []

    def subscribe(self) -> Subscription:
        """Return a new subscription receiving every event published from now on."""
        sub = Subscription(self.maxsize)
        self._subs.append(sub)
        return sub

    def publish(self, ev: Event) -> None:
        """Deliver ``ev`` to every subscriber without waiting."""
        for s in self._subs:
            s.put(ev)

    @property
    def dropped(self) -> int:
        """Return the events dropped across subscribers (overflow only; coalescing is not loss)."""
        return sum(s.dropped for s in self._subs)
