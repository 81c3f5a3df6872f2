"""Process tuning while an importer creates many objects and inflates big chunks: the cyclic GC
paused, glibc's malloc made to reuse freed chunk buffers (then set back and trimmed), and the
heap's freed pages handed back between stages of work. Nothing here changes what is read or
computed; it only changes how fast, with how many page faults, and how much stays resident."""

from __future__ import annotations

import ctypes
import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while we create many small objects that hold no cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@lru_cache(maxsize=1)
def _libc() -> Any:
    """The C library when it is glibc (it has mallopt and malloc_trim), else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim  # noqa: B018 - AttributeError where not glibc
    except (OSError, AttributeError, TypeError):  # pragma: no cover - not glibc
        return None
    return libc


#: <malloc.h>
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
#: after an import: glibc's own starting thresholds (128 KiB). Left at the import's, freed
#: arrays under 17 MB stayed resident — 100 MiB by the end of a 10 M-event trace's analysis
_AFTER = 128 << 10
_lock = threading.Lock()
_importing = 0  # imports inside chunk_buffers_reused now (threads may import at once)


@contextmanager
def chunk_buffers_reused(chunk: int) -> Iterator[None]:
    """While importing, have glibc's malloc reuse freed chunk buffers; return them after.

    Every inflated chunk (``chunk`` bytes, 8 MiB for Kineto) is a fresh buffer. By default glibc
    serves such sizes with mmap and gives freed heap tops over 32 MB back to the kernel, so each
    chunk's pages were faulted in anew: ~65,000 page faults and 0.15-0.25 s of kernel time per
    2 M-event trace. While any import runs, the mmap threshold sits just above the chunk size
    and the trim threshold at 256 MB, so freed chunks are reused; when the last one ends both go
    back to 128 KiB (so what the analysis frees is handed back as it is freed) and malloc_trim
    hands the free memory back. Elsewhere than glibc nothing changes."""
    global _importing
    libc = _libc()
    if libc is None:  # pragma: no cover - not glibc
        yield
        return
    with _lock:
        _importing += 1
        if _importing == 1:
            libc.mallopt(_M_MMAP_THRESHOLD, chunk + (1 << 20))
            libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20)
            # the reader's threads share the main arena. Each with its own kept its freed
            # memory (10 M events: peak 873 → 793 MiB with two); with two, the second arena's
            # freed top stayed resident after the read, 8-31 MiB from run to run (glibc trims
            # only the main arena's top), under every later stage: one arena, 10 M events'
            # stage peaks the same from run to run (bench_memory.py), the same speed
            libc.mallopt(_M_ARENA_MAX, 1)
    try:
        yield
    finally:
        with _lock:
            _importing -= 1
            if _importing == 0:
                libc.mallopt(_M_MMAP_THRESHOLD, _AFTER)
                libc.mallopt(_M_TRIM_THRESHOLD, _AFTER)
        libc.malloc_trim(0)


#: rows below which a stage's give_back(rows) does nothing: a hand-back walks every free chunk
#: of the heap (~40 MiB of them after any import) and the pages it returns fault in again when
#: used — the 16 after the levers of the 109k-event trace (a 25k-row replay graph) and the 8
#: after its stages were 20 ms of its 0.45 s, for a few MiB
SMALL_ROWS = 1 << 16


def give_back(rows: int | None = None) -> None:
    """Hand the heap's free memory back to the kernel now (glibc; elsewhere nothing): after a
    large structure was joined from its pieces, or a stage of work dropped its arrays, their
    memory is free but resident — glibc returns free pages inside the heap only when asked.
    The analysis of a 10 M-event trace held ~100 MiB of such pages by its end. A call costs
    under a millisecond, ~8 ms when it returns 100 MiB. ``rows``: the size of the work that
    freed them; under SMALL_ROWS there is nothing worth the call."""
    if rows is not None and rows < SMALL_ROWS:
        return
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
