"""A screen's loader, off the event loop: the numeric work (reading, decoding and replaying a
trace; a directory of rank traces, on Dask for several) runs in a thread of its own while the
screen stays live; its progress and its result come back to the screen as messages. The
analysis screen (gitm_tui/modes/analysis.py) and the ranks screen (gitm_tui/modes/ranks.py)
load this way."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

from textual.message import Message
from textual.message_pump import MessagePump

T = TypeVar("T")


def post_from_thread(target: MessagePump, message: Message) -> None:
    """Post ``message`` to ``target`` from the loader's thread (Textual hands it to the event
    loop); nothing when the app has quit meanwhile: its loop is closed, nobody is left to tell."""
    with contextlib.suppress(RuntimeError):
        target.post_message(message)


def load_in_thread(
    target: MessagePump,
    work: Callable[[], T],
    done: Callable[[T | None, str | None], Message],
    name: str,
) -> None:
    """Once ``target`` is on screen, run ``work()`` in a daemon thread called ``name`` and post
    ``done(result, None)`` to ``target``, or ``done(None, line)`` with the one line of what it
    raised (a loader's one-line errors: TraceImportError, a Dask scheduler not reached, …).
    ``work`` tells the screen how it goes with ``post_from_thread``.

    A daemon thread of its own, not a Textual thread worker: a worker runs in the event loop's
    default executor, which App.run joins on the way out, so `q` waited for the whole load
    (21 s on a big trace). Reading and decoding cannot be cut short midway; a daemon thread
    simply ends with the process when the user quits. It starts once the screen is up: a
    loader that fails at once then ends a whole app."""

    def run() -> None:
        try:
            got = work()
        except Exception as e:
            post_from_thread(target, done(None, str(e)))
            return
        post_from_thread(target, done(got, None))

    target.call_after_refresh(threading.Thread(target=run, name=name, daemon=True).start)
