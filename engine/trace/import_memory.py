"""Process tuning while an importer creates many objects and inflates big chunks: the cyclic GC
paused, glibc's malloc made to reuse freed chunk buffers (then trimmed). Nothing here changes what
is read; it only changes how fast and with how many page faults."""

from __future__ import annotations

import ctypes
import gc
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


@lru_cache(maxsize=1)
def _glibc(chunk: int) -> Any:
    """glibc (else None); the first call sets its mmap and trim thresholds for the import (see
    chunk_buffers_reused)."""
    libc = _libc()
    if libc is None:  # pragma: no cover - not glibc
        return None
    m_trim_threshold, m_mmap_threshold, m_arena_max = -1, -3, -8  # <malloc.h>
    # buffers past the chunk size are mapped: the joined columns of a large trace left holes
    # in the heap otherwise
    libc.mallopt(m_mmap_threshold, chunk + (1 << 20))
    libc.mallopt(m_trim_threshold, 256 << 20)
    # the reader's threads share two arenas: one each kept its own freed memory (10 M events:
    # peak 873 → 793 MiB, the same speed)
    libc.mallopt(m_arena_max, 2)
    return libc


@contextmanager
def chunk_buffers_reused(chunk: int) -> Iterator[None]:
    """While importing, have glibc's malloc reuse freed chunk buffers; return them after.

    Every inflated chunk (``chunk`` bytes, 16 MB for Kineto) is a fresh buffer. By default glibc serves such sizes with mmap
    and gives freed heap tops over 32 MB back to the kernel, so each chunk's pages were faulted
    in anew: ~65,000 page faults and 0.15-0.25 s of kernel time per 2 M-event trace. With the
    mmap threshold just above the chunk size and a 256 MB trim threshold (set once per process),
    freed chunks are reused; malloc_trim at the end hands the free memory back, so a
    long-running process does not keep it. Elsewhere than glibc nothing changes."""
    libc = _glibc(chunk)
    try:
        yield
    finally:
        if libc is not None:
            libc.malloc_trim(0)


def give_back() -> None:
    """Hand the heap's free memory back to the kernel now (glibc; elsewhere nothing): after a
    large structure was joined from its pieces, or a stage of work dropped its arrays, their
    memory is free but resident — glibc returns free pages inside the heap only when asked.
    The analysis of a 10 M-event trace held ~100 MiB of such pages by its end. A call costs
    under a millisecond, ~8 ms when it returns 100 MiB."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
