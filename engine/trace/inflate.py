"""A trace file's decompressed bytes, chunk by chunk (plain, or every member of a gzip file),
within the read limits of engine.trace.limits: what every importer that reads a whole JSON
file through (Kineto's streaming scanner, rocprofv3's JSON and pftrace readers) starts from.
Each limit and damage gets its one TraceImportError line."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

try:  # ISA-L's inflate is ~3x zlib's on x86-64 and arm64 (python-isal); plain zlib otherwise
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is a core dependency; this keeps odd platforms going
    _zlib = zlib  # type: ignore[misc]

from engine.trace.errors import TraceImportError
from engine.trace.files import open_regular
from engine.trace.limits import RATIO_FLOOR, ReadLimits, size_text

_GZIP_MAGIC = b"\x1f\x8b"
_INFLATE_ERRORS: tuple[type[BaseException], ...] = (zlib.error, getattr(_zlib, "error", zlib.error))


def _read(f: BinaryIO, path: Path, n: int) -> bytes:
    try:
        return f.read(n)
    except OSError as e:  # EIO on a failing disk, …: this file's error, not the batch's
        raise TraceImportError(path, f"cannot read: {e.strerror or e}") from None


def chunks(path: Path, limits: ReadLimits, chunk: int) -> Iterator[bytes]:
    """Yield decompressed chunks of at most ``chunk`` bytes of the file (gzip detected by its
    magic bytes; every member of a multi-member gzip file), within the size and ratio limits;
    TraceImportError when the file cannot be read or passes a limit."""
    with open_regular(path) as f:
        head = _read(f, path, 2)
        if not head:
            raise TraceImportError(path, "empty file")
        f.seek(0)
        if head != _GZIP_MAGIC:
            total = 0
            while block := _read(f, path, chunk):
                total += len(block)
                if total > limits.max_trace_bytes:
                    raise TraceImportError(
                        path,
                        f"larger than {size_text(limits.max_trace_bytes)} "
                        "(limit: GITM_MAX_TRACE_BYTES)",
                    )
                yield block
            return
        inflated = False
        for out in _inflate(f, path, limits, chunk):
            inflated = True
            yield out
        if not inflated:  # a valid gzip stream of nothing (``gzip < /dev/null``)
            raise TraceImportError(path, "empty file: its gzip stream decompresses to nothing")


def _inflate(f: BinaryIO, path: Path, limits: ReadLimits, chunk: int) -> Iterator[bytes]:
    """Inflate a gzip file member after member (``cat a.gz b.gz`` is one valid gzip file, RFC
    1952 §2.2); bytes after the last member that are not one are an error, not ignored."""
    z = _zlib.decompressobj(wbits=31)
    data = b""  # compressed bytes read and not yet inflated
    read = 0  # compressed bytes read from the file
    total = 0  # bytes inflated
    while True:
        if not data:
            data = _read(f, path, 1 << 20)
            read += len(data)
            if not data:
                break
        try:
            # cap each output chunk at ``chunk``: gzip'd traces inflate ~20x, and uncapped 4 MB
            # reads became 80 MB chunks (peak memory, page faults, big copies)
            out = z.decompress(data, chunk)
        except _INFLATE_ERRORS as e:
            raise TraceImportError(path, f"corrupt gzip data ({e})") from None
        data = z.unconsumed_tail
        if out:
            total += len(out)
            _check_inflated(path, limits, total, read - len(data) - len(z.unused_data))
            yield out
        if not z.eof:
            continue
        data = z.unused_data + data  # what follows this member
        while len(data) < 2 and (more := _read(f, path, 1 << 20)):
            read += len(more)
            data += more
        if not data:
            return
        if data[:2] != _GZIP_MAGIC:
            raise TraceImportError(
                path,
                "corrupt gzip file: trailing bytes after the gzip stream are not gzip data "
                "(a damaged or appended file)",
            )
        z = _zlib.decompressobj(wbits=31)  # the next member
    raise TraceImportError(path, "truncated gzip file (the stream ends early)")


def _check_inflated(path: Path, limits: ReadLimits, total: int, consumed: int) -> None:
    """TraceImportError once ``total`` inflated bytes pass the size limit, or (past
    RATIO_FLOOR) the ratio limit for the ``consumed`` compressed bytes."""
    if total > limits.max_trace_bytes:
        raise TraceImportError(
            path,
            f"decompresses to more than {size_text(limits.max_trace_bytes)} "
            "(limit: GITM_MAX_TRACE_BYTES)",
        )
    if total > RATIO_FLOOR and total > limits.max_gzip_ratio * max(consumed, 1):
        raise TraceImportError(
            path,
            f"inflates more than {limits.max_gzip_ratio:g}:1 ({total:,} bytes from "
            f"{consumed:,}), a gzip bomb rather than a trace (limit: GITM_MAX_GZIP_RATIO)",
        )


__all__ = ["chunks"]
