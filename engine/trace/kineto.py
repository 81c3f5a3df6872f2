"""Import PyTorch-profiler (Kineto) / Chrome-trace JSON, plain or gzip, NVIDIA or AMD, into a Trace.

Pipeline: stream-decompress in chunks → the numba scanner (json_scan) finds every event,
keeps GPU and runtime categories and reads ``ts``/``dur`` exactly into int64 ns → msgspec
decodes only the kept events, typed, keeping the fields we use → columns. Memory stays in the
tens of MB whatever the file size; the GC is paused while objects are created in bulk.

What becomes what:
* ``kernel`` → KERNEL rows (launch geometry, registers, shared memory; Kineto's
  "est. achieved occupancy %" is kept as an *estimate*: the OCCUPANCY provenance bit stays 0);
* ``gpu_memcpy`` / ``gpu_memset`` → MEMCPY / MEMSET rows with their bytes;
* ``cuda_sync`` on a device timeline → SYNC rows (stream/event synchronisation);
* ``cuda_profiler_range`` (CUPTI profiler mode) → KERNEL rows whose ``flops`` are measured
  from the SASS counters: add + mul + 2 × fma, over half, single and double precision;
* ``cuda_runtime`` / ``cuda_driver`` with a correlation id → HostEvents (launch ↔ kernel).
"""

from __future__ import annotations

import gc
import json
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from engine.trace import json_scan as js
from engine.trace.errors import TraceImportError
from engine.trace.segments import Kind, NameTable, Provenance, Segments
from engine.trace.taxonomy import classify_table
from engine.trace.trace import HostEvents, Trace

CHUNK = 16 << 20  # decompressed bytes per scan step
_KEY = b'"traceEvents"'


class _Args(msgspec.Struct):
    correlation: int | str = -1
    stream: int | str | None = None  # absent: the event's tid is the stream
    device: int | str | None = None  # absent: the event's pid is the device
    grid: list[int] | None = None
    block: list[int] | None = None
    regs: int = msgspec.field(default=0, name="registers per thread")
    smem: int = msgspec.field(default=0, name="shared memory")
    occupancy: float | None = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: int | str | None = None


class _Event(msgspec.Struct):
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: _Args | None = None


class _RangeEvent(msgspec.Struct):
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: dict[str, Any] | None = None


_DEC_EVENTS = msgspec.json.Decoder(list[_Event])
_DEC_RANGES = msgspec.json.Decoder(list[_RangeEvent])
_DEC_ONE = msgspec.json.Decoder(_Event)

# SASS instruction counters that carry floating-point work: FMA counts twice (DESIGN §3).
_FLOP_COUNTERS = {
    f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": (2 if op == "fma" else 1)
    for p in ("h", "f", "d")
    for op in ("add", "mul", "fma")
}


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while we create many small objects that hold no cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _chunks(path: Path) -> Iterator[bytes]:
    """Yield decompressed chunks of the file (gzip detected by its magic bytes)."""
    try:
        f = path.open("rb")
    except OSError as e:
        raise TraceImportError(path, f"cannot read: {e.strerror or e}") from None
    with f:
        head = f.read(2)
        if not head:
            raise TraceImportError(path, "empty file")
        f.seek(0)
        if head != b"\x1f\x8b":
            while block := f.read(CHUNK):
                yield block
            return
        z = zlib.decompressobj(wbits=31)
        while block := f.read(CHUNK // 4):
            try:
                out = z.decompress(block)
            except zlib.error as e:
                raise TraceImportError(path, f"corrupt gzip data ({e})") from None
            if out:
                yield out
            while z.unconsumed_tail:  # pragma: no cover - only with max_length
                yield z.decompress(z.unconsumed_tail)
        if not z.eof:
            raise TraceImportError(path, "truncated gzip file (the stream ends early)")
        tail = z.flush()
        if tail:
            yield tail


class _Columns:
    """Growing per-field lists of the kept events (one entry per device row / host event)."""

    def __init__(self) -> None:
        self.dev: dict[str, list[Any]] = {
            k: []
            for k in (
                "start_ns",
                "end_ns",
                "stream",
                "device",
                "kind",
                "name",
                "correlation",
                "grid",
                "block",
                "regs",
                "smem",
                "occupancy",
                "flops",
                "dram_bytes",
                "provenance",
            )
        }
        self.host: dict[str, list[int]] = {
            k: [] for k in ("correlation", "stream", "api_start_ns", "api_end_ns")
        }
        self.names = NameTable()
        self.malformed = 0
        self.ranges = 0  # cuda_profiler_range rows (CUPTI profiler mode)


def _as_int(v: int | str | None, default: int) -> int:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return default
    return default


def _prod(v: list[int] | None) -> int:
    if not v:
        return 0
    p = 1
    for x in v:
        p *= int(x)
    return p


_KIND = {
    js.CAT_KERNEL: Kind.KERNEL,
    js.CAT_MEMCPY: Kind.MEMCPY,
    js.CAT_MEMSET: Kind.MEMSET,
    js.CAT_SYNC: Kind.SYNC,
}


def _add_events(
    cols: _Columns, events: list[_Event], codes: np.ndarray, ts: np.ndarray, dur: np.ndarray
) -> None:
    d, h, names = cols.dev, cols.host, cols.names
    for ev, code, t, du in zip(events, codes.tolist(), ts.tolist(), dur.tolist(), strict=True):
        a = ev.args or _Args()
        if t == js.NO_TIME:
            cols.malformed += 1
            continue
        du = 0 if du == js.NO_TIME or du < 0 else du
        if code in (js.CAT_RUNTIME, js.CAT_DRIVER):
            corr = _as_int(a.correlation, -1)
            if corr >= 0:
                h["correlation"].append(corr)
                h["stream"].append(_as_int(a.stream, -1))
                h["api_start_ns"].append(t)
                h["api_end_ns"].append(t + du)
            continue
        kind = _KIND[code]
        stream = _as_int(ev.tid, 0) if a.stream is None else _as_int(a.stream, -1)
        device = _as_int(ev.pid, 0) if a.device is None else _as_int(a.device, -1)
        prov = 0
        grid, block = _prod(a.grid), _prod(a.block)
        if grid:
            prov |= Provenance.GEOMETRY
        nbytes = _as_int(a.bytes, -1) if kind in (Kind.MEMCPY, Kind.MEMSET) else -1
        if nbytes >= 0:
            prov |= Provenance.DRAM_BYTES
        d["start_ns"].append(t)
        d["end_ns"].append(t + du)
        d["stream"].append(stream)
        d["device"].append(device)
        d["kind"].append(int(kind))
        d["name"].append(names.intern(ev.name))
        d["correlation"].append(_as_int(a.correlation, -1))
        d["grid"].append(grid)
        d["block"].append(block)
        d["regs"].append(a.regs)
        d["smem"].append(a.smem)
        occ = a.occupancy
        d["occupancy"].append(np.nan if occ is None else min(1.0, max(0.0, occ / 100.0)))
        d["flops"].append(np.nan)
        d["dram_bytes"].append(float(nbytes) if nbytes >= 0 else np.nan)
        d["provenance"].append(int(prov))


def _add_ranges(cols: _Columns, events: list[_RangeEvent], ts: np.ndarray, dur: np.ndarray) -> None:
    d, names = cols.dev, cols.names
    cols.ranges += len(events)
    for ev, t, du in zip(events, ts.tolist(), dur.tolist(), strict=True):
        if t == js.NO_TIME:
            cols.malformed += 1
            continue
        du = 0 if du == js.NO_TIME or du < 0 else du
        args = ev.args or {}
        flops, seen = 0.0, False
        for key, weight in _FLOP_COUNTERS.items():
            v = args.get(key)
            if isinstance(v, int | float):
                flops += weight * float(v)
                seen = True
        d["start_ns"].append(t)
        d["end_ns"].append(t + du)
        d["stream"].append(_as_int(ev.tid, 0))
        d["device"].append(_as_int(ev.pid, 0))
        d["kind"].append(int(Kind.KERNEL))
        d["name"].append(names.intern(ev.name))
        d["correlation"].append(_as_int(args.get("correlation"), -1))
        for c in ("grid", "block", "regs", "smem"):
            d[c].append(0)
        d["occupancy"].append(np.nan)
        d["flops"].append(flops if seen else np.nan)
        d["dram_bytes"].append(np.nan)
        d["provenance"].append(int(Provenance.FLOPS) if seen else 0)


def _decode_kept(
    path: Path,
    cols: _Columns,
    out: np.ndarray,
    codes: np.ndarray,
    ts: np.ndarray,
    dur: np.ndarray,
    ranges: bool,
) -> None:
    data = out.tobytes()
    try:
        if ranges:
            _add_ranges(cols, _DEC_RANGES.decode(data), ts, dur)
        else:
            _add_events(cols, _DEC_EVENTS.decode(data), codes, ts, dur)
        return
    except msgspec.ValidationError:
        pass  # some event has a field of an unexpected type: handled one by one below
    except msgspec.DecodeError as e:
        raise TraceImportError(path, f"invalid JSON in traceEvents ({e})") from None
    try:
        items = msgspec.json.decode(data)
    except msgspec.DecodeError as e:  # a type error came first, a syntax error is further on
        raise TraceImportError(path, f"invalid JSON in traceEvents ({e})") from None
    kind = _RangeEvent if ranges else _Event
    good: list[Any] = []
    keep: list[int] = []
    for i, item in enumerate(items):
        try:
            good.append(msgspec.convert(item, kind))
            keep.append(i)
        except msgspec.ValidationError:
            cols.malformed += 1
    k = np.asarray(keep, dtype=np.int64)
    if ranges:
        _add_ranges(cols, good, ts[k], dur[k])
    else:
        _add_events(cols, good, codes[k], ts[k], dur[k])


def read_kineto(path: str | Path) -> Trace:
    """Import one Kineto/Chrome-trace JSON file (.json or .json.gz); raise TraceImportError."""
    path = Path(path)
    cats, catlens = js.category_table()
    cols = _Columns()
    prefix = bytearray()  # bytes before the traceEvents key (top-level metadata)
    suffix = bytearray()  # bytes after the array's closing bracket
    pending = b""
    state = "find"  # find → events → tail
    key_at = -1
    with _gc_paused():
        for chunk in _chunks(path):
            if state == "tail":
                suffix += chunk
                continue
            if state == "find":
                prefix += chunk
                key_at = prefix.find(_KEY)
                if key_at < 0:
                    if len(prefix) > 256 << 20:
                        raise TraceImportError(path, "no traceEvents array in the first 256 MB")
                    continue
                bracket = prefix.find(b"[", key_at + len(_KEY))
                if bracket < 0:
                    continue
                between = prefix[key_at + len(_KEY) : bracket].strip()
                if between != b":":
                    raise TraceImportError(path, "traceEvents is not an array")
                pending = bytes(prefix[bracket + 1 :])
                del prefix[key_at:]
                state = "events"
            else:
                pending += chunk
            pending, closed = _scan_block(path, pending, cols, cats, catlens)
            if closed is not None:
                suffix += closed
                state = "tail"
        if state == "find":
            if not prefix.strip():
                raise TraceImportError(path, "empty file")
            head = bytes(prefix[:1]).strip()
            if head not in (b"{", b"["):
                raise TraceImportError(path, "not JSON (expected a Chrome-trace object)")
            raise TraceImportError(path, "no traceEvents array: not a Chrome/Kineto trace")
        if state == "events":
            raise TraceImportError(path, "truncated JSON: traceEvents array never closes")
    meta = _metadata(path, bytes(prefix), bytes(suffix))
    return _build(path, cols, meta)


def _scan_block(
    path: Path, pending: bytes, cols: _Columns, cats: np.ndarray, catlens: np.ndarray
) -> tuple[bytes, bytes | None]:
    """Scan ``pending``; decode its complete events; return (unscanned rest, suffix if closed)."""
    buf = np.frombuffer(pending, dtype=np.uint8)
    starts, ends, codes, ts, dur, n, resume, closed_at = js.scan_events(buf, 0, cats, catlens)
    if closed_at == js.MALFORMED:
        raise TraceImportError(path, "invalid JSON in traceEvents (a '}' closes nothing)")
    codes, ts, dur = codes[:n], ts[:n], dur[:n]
    main = np.flatnonzero((codes >= 0) & (codes != js.CAT_PROFILER))
    if main.size:
        out = js.gather(buf, starts, ends, main)
        _decode_kept(path, cols, out, codes[main], ts[main], dur[main], ranges=False)
    prof = np.flatnonzero(codes == js.CAT_PROFILER)
    if prof.size:
        out = js.gather(buf, starts, ends, prof)
        _decode_kept(path, cols, out, codes[prof], ts[prof], dur[prof], ranges=True)
    if closed_at >= 0:
        return b"", pending[closed_at + 1 :]
    return pending[resume:], None


def _metadata(path: Path, prefix: bytes, suffix: bytes) -> dict[str, Any]:
    """Parse the top-level object without its traceEvents (deviceProperties, distributedInfo…)."""
    text = prefix + b'"traceEvents": null' + suffix
    try:
        meta = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        stripped = suffix.strip()
        if not stripped.endswith(b"}"):
            raise TraceImportError(path, "truncated JSON after the traceEvents array") from None
        raise TraceImportError(path, "invalid JSON around the traceEvents array") from None
    if not isinstance(meta, dict):
        raise TraceImportError(path, "not a Chrome-trace object")
    meta.pop("traceEvents", None)
    return meta


def _build(path: Path, cols: _Columns, meta: dict[str, Any]) -> Trace:
    d = cols.dev
    n = len(d["start_ns"])
    klass_of_name = classify_table(cols.names)
    name = np.asarray(d["name"], dtype=np.int32)
    seg = (
        Segments.from_columns(
            start_ns=np.asarray(d["start_ns"], dtype=np.int64),
            end_ns=np.asarray(d["end_ns"], dtype=np.int64),
            stream=np.asarray(d["stream"], dtype=np.int64).clip(-(2**31), 2**31 - 1),
            device=np.asarray(d["device"], dtype=np.int64).clip(-(2**15), 2**15 - 1),
            kind=np.asarray(d["kind"], dtype=np.uint8),
            name=name,
            klass=klass_of_name[name] if n else np.zeros(0, np.uint8),
            correlation=np.asarray(d["correlation"], dtype=np.int64),
            grid=np.asarray(d["grid"], dtype=np.int64).clip(0, 2**31 - 1),
            block=np.asarray(d["block"], dtype=np.int64).clip(0, 2**31 - 1),
            regs=np.asarray(d["regs"], dtype=np.int64).clip(0, 2**31 - 1),
            smem=np.asarray(d["smem"], dtype=np.int64).clip(0, 2**31 - 1),
            occupancy=np.asarray(d["occupancy"], dtype=np.float32),
            flops=np.asarray(d["flops"], dtype=np.float64),
            dram_bytes=np.asarray(d["dram_bytes"], dtype=np.float64),
            provenance=np.asarray(d["provenance"], dtype=np.uint8),
        )
        if n
        else Segments.empty()
    )
    h = cols.host
    host = HostEvents(
        correlation=np.asarray(h["correlation"], dtype=np.int64),
        stream=np.asarray(h["stream"], dtype=np.int64).clip(-(2**31), 2**31 - 1).astype(np.int32),
        api_start_ns=np.asarray(h["api_start_ns"], dtype=np.int64),
        api_end_ns=np.asarray(h["api_end_ns"], dtype=np.int64),
    )
    props: dict[str, Any] = {
        "format": "kineto",
        "devices": meta.get("deviceProperties") or [],
        "rank": (meta.get("distributedInfo") or {}).get("rank"),
        "base_time_ns": meta.get("baseTimeNanoseconds"),
        "malformed_events": cols.malformed,
        "profiler_ranges": cols.ranges,
        "schema_version": meta.get("schemaVersion"),
    }
    return Trace(
        segments=seg, names=cols.names, host=host, device_properties=props, source=str(path)
    )
