"""Trace paths that are fsspec URLs (``s3://bucket/run/``, ``gs://…``, ``file:///…``, …).

The client lists a URL directory (names only) and each rank's task reads its file where the
worker is: the bytes are streamed into a temporary file on the worker (the importers read local
files: the Kineto reader streams it again, SQLite needs a file), the file is analysed under its
URL, and the copy is deleted. A copy larger than the trace limit (GITM_MAX_TRACE_BYTES) is cut
short and refused. The packages a protocol needs (``s3fs`` for s3://, ``gcsfs`` for gs://, …) are
the user's to install where the workers run; a missing one is one line naming it.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

from engine.trace.errors import TraceImportError
from engine.trace.limits import ReadLimits

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*(::[A-Za-z][A-Za-z0-9+.\-]*)*://")
_COPY_CHUNK = 8 << 20


def is_url(path: str) -> bool:
    """True for ``scheme://…`` (fsspec chains such as ``simplecache::s3://…`` included)."""
    return bool(_URL.match(path))


def url_name(url: str) -> str:
    """The file name at the end of a URL."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def _why(url: str, e: BaseException) -> str:
    if isinstance(e, ImportError):  # fsspec names the package a protocol needs
        return f"{url}: this protocol needs a package that is not installed here: {e}"
    if isinstance(e, FileNotFoundError):
        return f"{url}: no such file or directory"
    if isinstance(e, PermissionError):
        return f"{url}: permission denied"
    return f"{url}: cannot read: {type(e).__name__}: {e}"


def expand_url(url: str, suffixes: tuple[str, ...]) -> tuple[list[str], str | None]:
    """The trace files a URL names: itself, or (a directory) its files with a trace's suffix,
    one level. Returns (urls, None) or ([], the error line)."""
    try:
        import fsspec

        fs, path = fsspec.core.url_to_fs(url)
        if fs.isdir(path):
            found = sorted(
                fs.unstrip_protocol(p)
                for p in fs.ls(path, detail=False)
                if str(p).endswith(suffixes) and fs.isfile(p)
            )
            if not found:
                return [], f"{url}: no trace files ({', '.join(suffixes)}) in this directory"
            return found, None
        if not fs.exists(path):
            return [], f"{url}: no such file or directory"
        return [url], None
    except Exception as e:  # anything a filesystem backend raises: one line, never a traceback
        return [], _why(url, e)


@contextlib.contextmanager
def local_copy(url: str, limits: ReadLimits | None = None) -> Iterator[Path]:
    """The URL's bytes in a temporary local file, deleted on exit; TraceImportError (one line)
    when it cannot be read or is larger than the trace limit."""
    limits = limits or ReadLimits.from_env(url)
    fd, name = tempfile.mkstemp(prefix="gitm-remote-", suffix="-" + url_name(url)[-80:])
    dst = os.fdopen(fd, "wb")  # owns the descriptor from here: closed once, by dst
    try:
        try:
            import fsspec

            with fsspec.open(url, "rb") as src:
                copied = 0
                while chunk := src.read(_COPY_CHUNK):
                    copied += len(chunk)
                    if copied > limits.max_trace_bytes:
                        raise TraceImportError(
                            url,
                            f"larger than the trace limit ({limits.max_trace_bytes:,} bytes; "
                            "GITM_MAX_TRACE_BYTES moves it)",
                        )
                    dst.write(chunk)
            dst.close()
        except TraceImportError:
            raise
        except Exception as e:  # anything a filesystem backend raises: one line
            raise TraceImportError(url, _why(url, e).removeprefix(f"{url}: ")) from None
        yield Path(name)
    finally:
        dst.close()
        with contextlib.suppress(OSError):
            os.unlink(name)
