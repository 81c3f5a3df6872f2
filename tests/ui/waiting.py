"""Waiting in Pilot tests: on a condition, never for a fixed time.

A fixed ``await pilot.pause(0.5)`` is a guess at how long the app needs; on a loaded machine
(two shared cores, a parallel test run) the guess is wrong and the test flakes, and on an idle
one it wastes the rest. ``until`` pauses in short steps until what the test needs has happened
and fails with a line naming it at the bound. The bound measures nothing: it only keeps a test
that will never pass from hanging until pytest-timeout kills it.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

from textual.css.query import NoMatches
from textual.pilot import Pilot

#: seconds between two looks at the condition
STEP_S = 0.02
#: how long a condition may take before the test fails (generous: a shared 2-core machine)
BOUND_S = 30.0


def _describe(cond: Callable[[], object]) -> str:
    try:
        return inspect.getsource(cond).strip()
    except (OSError, TypeError):
        return repr(cond)


async def until(
    pilot: Pilot[Any], cond: Callable[[], object], timeout: float = BOUND_S, what: str = ""
) -> None:
    """Pause in steps of ``STEP_S`` until ``cond()`` is true; fail after ``timeout`` seconds,
    naming ``what`` (or the condition's source line). A widget not mounted yet (NoMatches)
    counts as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause(STEP_S)
        try:
            if cond():
                return
        except NoMatches:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s in vain for: {what or _describe(cond)}")
