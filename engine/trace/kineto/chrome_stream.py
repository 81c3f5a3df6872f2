"""The byte stream of a Chrome-trace JSON file: its decompressed chunks (plain, or every member
of a gzip file), the top-level object around the ``traceEvents`` array, and the array's
elements, scanned once each with the scanner's state carried from chunk to chunk.

Nothing here knows what an event means: the kept ones are handed to a ``parse`` callback
(engine.trace.kineto.kineto reads their fields). Every limit of engine.trace.limits is enforced
here.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from engine.trace.errors import TraceImportError
from engine.trace.inflate import chunks
from engine.trace.kineto import json_scan as js
from engine.trace.limits import ReadLimits, size_text

#: decompressed bytes per chunk, for both readers (the compiled one and json_twin): the gzip
#: ratio limit is judged at each chunk's end, so the two must cut alike to accept the same
#: files. About six chunks are held at once (prefetched, being scanned, being parsed): on a
#: 2 M-event trace 16 MB chunks peaked 32 MB higher than 8 MB at the same speed, and 4 MB ones
#: were 5 % slower for 23 MB less
READ_CHUNK = 8 << 20

# a chunk is scanned up to LOOKAHEAD bytes from its end; those bytes are scanned with the head
# of the next chunk, as a seam of this many bytes
_SEAM = 2 * js.LOOKAHEAD + 64
_CATS, _CATLENS = js.category_table()


def prefetched(chunks: Iterator[bytes], depth: int = 2) -> Generator[bytes, None, None]:
    """Run ``chunks`` (read + inflate, which release the GIL) in a thread, ``depth`` ahead of the
    consumer; its exceptions are re-raised here, in order. Closing the iterator stops it."""
    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for c in chunks:
                if not put(("chunk", c)):
                    return
        except BaseException as e:  # forwarded to the consumer, which raises it
            put(("error", e))
            return
        put(("end", None))

    t = threading.Thread(target=produce, name="gitm-inflate", daemon=True)
    t.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "chunk":
                yield item
            elif kind == "error":
                raise item
            else:
                return
    finally:
        stop.set()
        t.join()


class EventStream:
    """The stream of one file, fed chunk by chunk: finds the top-level ``traceEvents`` key,
    scans the events and hands the kept ones to the parser, keeps the metadata around them.

    Each byte is scanned once: the scanner's state is carried from one chunk to the next.
    A chunk is scanned where it lies (no copy) up to js.LOOKAHEAD bytes from its end; those
    bytes are scanned with the head of the next chunk (a seam of _SEAM bytes). An element
    still open at the end of a chunk is kept as the pieces scanned so far (only while it may
    be a kept event) and joined once, when it ends. ``parse(data, starts, ends, codes, base)``
    is handed the kept events (spans of ``data``, whose first byte is at file offset ``base``),
    in file order."""

    def __init__(
        self,
        path: Path,
        limits: ReadLimits,
        parse: Callable[[bytes, np.ndarray, np.ndarray, np.ndarray, int], None],
    ) -> None:
        self.path, self.limits, self.parse = path, limits, parse
        self.stage = "find"  # find → events → tail
        self.offset = 0  # file offset (decompressed) of the next chunk
        self.prefix = bytearray()  # bytes before the traceEvents key (top-level metadata)
        self.suffix = bytearray()  # bytes after the array's closing bracket
        self.top = js.new_find_state(False)  # the top-level object, around the array
        self.after_top = False  # the top-level object closed
        self.scan = js.new_scan_state()
        self.carry = b""  # bytes not scanned yet at the end of the last chunk
        self.carry_at = 0
        self.open_at = -1  # file offset of the element open at the end of the last chunk
        self.pieces: list[bytes] | None = None  # its bytes scanned so far, if it may be kept
        self.stopped = 0  # where the last scan stopped, in its buffer

    # ---------------------------------------------------------------------------- stages
    def feed(self, chunk: bytes) -> None:
        """Read the next decompressed chunk."""
        at = self.offset
        self.offset += len(chunk)
        if self.stage == "find":
            start = self._find(chunk, at)
            if start is not None:
                self.stage = "events"
                self._events(chunk, at, start)
        elif self.stage == "events":
            self._events(chunk, at, 0)
        else:
            self._tail(chunk, 0, at)

    def finish(self) -> None:
        """The stream ended: scan what is left; TraceImportError if the array never closed."""
        path = self.path
        if self.stage == "find":
            if not bytes(self.prefix).lstrip(b"\xef\xbb\xbf").strip():
                raise TraceImportError(path, "empty file")
            raise TraceImportError(path, "truncated JSON: the file ends before a traceEvents array")
        if self.stage == "events" and self.carry:
            closed = self._scan(self.carry, self.carry_at, 0, len(self.carry))
            if closed is not None:
                self._tail(self.carry, closed, self.carry_at)
        if self.stage == "events":
            raise TraceImportError(path, "truncated JSON: traceEvents array never closes")

    def _find(self, chunk: bytes, at: int) -> int | None:
        """Follow the top-level object to its traceEvents key; return where the array's
        elements begin in ``chunk``, or None if the key is not in it (it is kept as prefix)."""
        path, lim = self.path, self.limits
        start = 3 if at == 0 and chunk.startswith(b"\xef\xbb\xbf") else 0  # a UTF-8 BOM
        what, i = js.find_top_key(
            np.frombuffer(chunk, np.uint8), start, at, self.top, lim.max_json_depth
        )
        if what == js.FIND_MORE:
            self.prefix += chunk
            if len(self.prefix) > lim.max_element_bytes:
                raise TraceImportError(
                    path,
                    f"no traceEvents array in the first {size_text(lim.max_element_bytes)} "
                    "(the metadata before it is limited by GITM_MAX_ELEMENT_BYTES)",
                )
            return None
        if what == js.FIND_KEY:
            if chunk[i] != _LBRACKET:
                raise TraceImportError(path, "traceEvents is not an array")
            self.prefix += chunk[:i]
            del self.prefix[int(self.top[js.F_KEY_AT]) :]
            return i + 1
        if what == js.FIND_TOO_DEEP:
            raise self._too_deep(at + i)
        if what == js.FIND_NOT_OBJECT and chunk[i] != _LBRACKET:
            raise TraceImportError(path, "not JSON (expected a Chrome-trace object)")
        raise TraceImportError(path, "no traceEvents array: not a Chrome/Kineto trace")

    def _events(self, chunk: bytes, at: int, pos: int) -> None:
        """Scan ``chunk`` (at file offset ``at``) from ``pos``: first the seam of what the last
        chunk left unscanned, then the chunk in place up to LOOKAHEAD from its end."""
        if self.carry:
            carry, base = self.carry, self.carry_at
            seam = carry + chunk[:_SEAM]
            self.carry = b""
            closed = self._scan(seam, base, 0, min(len(carry), len(seam) - js.LOOKAHEAD))
            if closed is not None:
                self._tail(seam, closed, base)
                if len(chunk) > _SEAM:
                    self._tail(chunk, _SEAM, at)
                return
            stop = self.stopped
            if stop < len(carry):  # a chunk shorter than the lookahead: carry it on too
                self.carry, self.carry_at = seam[stop:], base + stop
                return
            pos = stop - len(carry)
        closed = self._scan(chunk, at, pos, len(chunk) - js.LOOKAHEAD)
        if closed is not None:
            self._tail(chunk, closed, at)
            return
        self.carry, self.carry_at = chunk[self.stopped :], at + self.stopped

    def _tail(self, data: bytes, start: int, base: int) -> None:
        """Keep ``data[start:]`` (file offset ``base`` + start) as metadata after the array;
        follow the top-level object on: a second traceEvents key in it is refused."""
        path, lim = self.path, self.limits
        if self.stage != "tail":
            self.stage = "tail"
            self.top = js.new_find_state(True)
        piece = data[start:]
        self.suffix += piece
        if len(self.prefix) + len(self.suffix) > lim.max_element_bytes:
            raise TraceImportError(
                path,
                f"the metadata around traceEvents is larger than "
                f"{size_text(lim.max_element_bytes)} (limit: GITM_MAX_ELEMENT_BYTES)",
            )
        if self.after_top:
            return
        what, i = js.find_top_key(
            np.frombuffer(piece, np.uint8), 0, base + start, self.top, lim.max_json_depth
        )
        if what == js.FIND_KEY:
            raise TraceImportError(path, _DUPLICATE)
        if what == js.FIND_TOO_DEEP:
            raise self._too_deep(base + start + i)
        self.after_top = what == js.FIND_END

    # ------------------------------------------------------------------------- scanning
    def _scan(self, data: bytes, base: int, pos: int, limit: int) -> int | None:
        """Scan ``data`` (``data[0]`` at file offset ``base``) from ``pos``, blocks starting
        before ``limit``; queue the kept events' parse. Return the offset in ``data`` just
        past the array's ']' if it closed here, else None (self.stopped = where it stopped)."""
        path, lim = self.path, self.limits.max_element_bytes
        buf = np.frombuffer(data, dtype=np.uint8)
        starts, ends, codes, count, stop, resume, closed_at, first_end, first_code = js.scan_stream(
            buf, pos, limit, self.scan, _CATS, _CATLENS, self.limits.max_json_depth - 2
        )
        self.stopped = stop
        if closed_at == js.MALFORMED:
            raise TraceImportError(path, "invalid JSON in traceEvents (a '}' closes nothing)")
        if closed_at == js.TOO_DEEP:
            raise self._too_deep(base + resume)
        if closed_at == js.ODD_CAT:
            raise TraceImportError(
                path,
                f'more than {js.CAT_BLANKS} blanks around an event\'s "cat" key at '
                f"decompressed byte {base + resume:,}: not read (no profiler writes that)",
            )
        if first_end >= 0:  # the element open when this buffer began ends here
            if base + first_end - self.open_at > lim:
                raise self._too_large(self.open_at)
            if self.pieces is not None and first_code >= 0:
                whole = b"".join([*self.pieces, data[pos:first_end]])
                if whole[:1] == b"{":
                    one = np.zeros(1, np.int64)
                    self.parse(whole, one, one + len(whole), one + first_code, self.open_at)
            self.open_at, self.pieces = -1, None
        if count:
            sizes = ends - starts
            if int(sizes.max()) > lim:
                raise self._too_large(base + int(starts[int(np.argmax(sizes > lim))]))
            keep = np.flatnonzero(codes >= 0)
            if keep.size:  # the job holds only the kept rows
                self.parse(data, starts[keep], ends[keep], codes[keep], base)
        if closed_at >= 0:
            return closed_at + 1
        if self.scan[js.S_DEPTH] > 0:  # an element is still open: keep what may be needed
            el_start = int(self.scan[js.S_EL_START])
            if el_start >= 0:  # it began here
                self.open_at, self.pieces = base + el_start, []
            if base + stop - self.open_at > lim:
                raise self._too_large(self.open_at)
            if self.scan[js.S_EL_CODE] == -1:  # its category is not kept: its bytes are not
                self.pieces = None
            elif self.pieces is not None:
                self.pieces.append(data[max(el_start, pos) : stop])
        return None

    def _too_large(self, at: int) -> TraceImportError:
        lim = self.limits.max_element_bytes
        return TraceImportError(
            self.path,
            f"an event at decompressed byte {at:,} is larger than {size_text(lim)} "
            "(limit: GITM_MAX_ELEMENT_BYTES)",
        )

    def _too_deep(self, at: int) -> TraceImportError:
        return TraceImportError(
            self.path,
            f"JSON nested more than {self.limits.max_json_depth} levels deep at decompressed "
            f"byte {at:,} (limit: GITM_MAX_JSON_DEPTH)",
        )


_LBRACKET = ord("[")
_DUPLICATE = (
    "two top-level traceEvents keys: JSON readers disagree on which one counts (the first, "
    "or the last as Python's json takes), so neither is read"
)


def metadata(path: Path, prefix: bytes, suffix: bytes) -> dict[str, Any]:
    """Parse the top-level object without its traceEvents (deviceProperties, distributedInfo…);
    a second top-level traceEvents key, however spelled (``trace\\u0045vents``), is refused."""
    text = prefix + b'"traceEvents": null' + suffix
    top: list[list[tuple[str, Any]]] = [[]]

    def pairs(kv: list[tuple[str, Any]]) -> dict[str, Any]:
        top[0] = kv  # objects end inner first: the last one is the top-level object
        return dict(kv)

    try:
        meta = json.loads(text, object_pairs_hook=pairs)
    except RecursionError:
        raise TraceImportError(path, "JSON nested too deep around the traceEvents array") from None
    except json.JSONDecodeError:
        stripped = suffix.strip()
        if not stripped.endswith(b"}"):
            raise TraceImportError(path, "truncated JSON after the traceEvents array") from None
        raise TraceImportError(path, "invalid JSON around the traceEvents array") from None
    except UnicodeDecodeError:
        raise TraceImportError(path, "invalid JSON around the traceEvents array") from None
    except ValueError:  # valid JSON, but an integer past Python's 4,300 digits (found by review)
        raise TraceImportError(
            path, "a number of more than 4,300 digits in the metadata around traceEvents"
        ) from None
    if not isinstance(meta, dict):
        raise TraceImportError(path, "not a Chrome-trace object")
    if sum(k == "traceEvents" for k, _ in top[0]) > 1:
        raise TraceImportError(path, _DUPLICATE)
    meta.pop("traceEvents", None)
    return meta


def extract_checked(
    path: Path,
    buf: np.ndarray,
    rows: tuple[np.ndarray, np.ndarray, np.ndarray],
    base: int,
    spec: tuple[Any, ...],
) -> tuple[Any, ...]:
    """``json_scan.extract_fields`` over the kept ``rows`` (starts, ends, codes) of one block
    with the field ``spec`` (top keys and lengths, arg keys and lengths, prefix, suffix); its
    columns — or TraceImportError naming the first bad byte (``base``: the block's offset in the
    decompressed stream)."""
    *fields, bad_row, bad_at = js.extract_fields(buf, *rows, *spec)
    if bad_row >= 0:
        where = f"decompressed byte {base + (bad_at >> 4):,}"
        raise TraceImportError(
            path, f"invalid JSON in traceEvents ({js.BAD_REASONS[bad_at & 15]} at {where})"
        )
    return tuple(fields)


def stream_events(path: Path, limits: ReadLimits, parse: Callable[..., None]) -> EventStream:
    """Feed the whole file at ``path`` (plain or gzip, read ahead on a thread) through an
    EventStream that hands each block of events to ``parse``; the finished stream (its
    metadata prefix and suffix)."""
    reader = EventStream(path, limits, parse)
    stream = prefetched(chunks(path, limits, READ_CHUNK))
    try:
        for chunk in stream:
            reader.feed(chunk)
        reader.finish()
    finally:
        stream.close()
    return reader
