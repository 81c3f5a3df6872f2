"""Import an Nsight Systems SQLite export (``nsys export --type sqlite``) into a Trace.

Schemas differ between Nsight releases: tables are created only when the capture had such
activity, and columns come and go. Every query is built from ``PRAGMA table_info``; a missing
table is simply no rows, a missing optional column is NaN/0 with its provenance bit unset.

Copies are named as Kineto names them, ``Memcpy HtoD (Pageable -> Device)``, so a lever or a
report reads one form from either importer; an export without ``srcKind``/``dstKind`` gives
``Memcpy HtoD``. The memory kinds come from the export's own ``ENUM_CUDA_MEM_KIND`` table:
Nsight numbers them 0 Pageable, 1 Pinned, 2 Device, 3 Array, 4 Managed, 5 Device Static,
6 Managed Static, 7 Unknown — *not* CUPTI's ``CUpti_ActivityMemoryKind`` (0 Unknown,
1 Pageable, 2 Pinned, 3 Device, …). The shipped A100 export proves it: its HtoD copies have
srcKind 0, dstKind 2, which CUPTI's numbering would read as "Unknown -> Pinned".

Old Nsight releases store some CUDA runtime calls twice in ``CUPTI_ACTIVITY_KIND_RUNTIME``: the
call and its versioned entry point (``cudaMemcpy`` and ``cudaMemcpy_v3020``), one correlation
id. Counting both would double every host-side figure (host-blocking copies, launches, syncs),
so only one row per call is kept (see :func:`_one_row_per_call`).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from engine.trace.errors import TraceImportError
from engine.trace.files import check_regular
from engine.trace.limits import MAX_TIME_NS, check_times
from engine.trace.segments import Kind, NameTable, Provenance, Segments
from engine.trace.taxonomy import classify_table
from engine.trace.trace import ApiKind, HostEvents, Trace, api_kind_from_name

_KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
_MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
_MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
_SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_COPY_KIND = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    # Nsight's ENUM_CUDA_MEMCPY_OPER adds unified-memory migrations after CUPTI's ten kinds;
    # letters only, so the name still parses as "Memcpy <kind>" (Kineto has no such kind)
    11: "UvmHtoD",
    12: "UvmDtoH",
    13: "UvmDtoD",
}  # CUpti_ActivityMemcpyKind 0-10 (Kineto's spelling), which Nsight's ENUM_CUDA_MEMCPY_OPER repeats
#: Nsight's ENUM_CUDA_MEM_KIND ids (what srcKind/dstKind hold), in Kineto's spelling
_MEM_KIND = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
#: the enum tables' ``name`` column → our spelling, so the export's own ids are used when it
#: carries the tables (ids could move between releases; the names have not)
_COPY_KIND_BY_ENUM = {
    "CUDA_MEMCPY_KIND_" + v.upper().replace("UVM", "UVM_"): v for v in _COPY_KIND.values()
}
_MEM_KIND_BY_ENUM = {
    "CUDA_MEMOPR_MEMORY_KIND_" + v.upper().replace(" ", "_"): v for v in _MEM_KIND.values()
}
_VERSIONED = re.compile(r"_v\d+$")  # cudaMemcpy_v3020: CUPTI's versioned entry-point name
#: tables only Nsight Systems writes, whatever was traced: an export that captured no CUDA
#: activity (``--trace=osrt,nvtx``, CPU sampling only) has no CUPTI_ACTIVITY_KIND_* table
_NSYS_MARKERS = ("META_DATA_EXPORT", "META_DATA_CAPTURE", "TARGET_INFO_SESSION_START_TIME")
#: what a CPU-only export holds, table by table, as a person names it
_CPU_TABLES = (
    (_RUNTIME, "CUDA API call"),
    ("NVTX_EVENTS", "NVTX event"),
    ("OSRT_API", "OS runtime call"),
    ("COMPOSITE_EVENTS", "CPU sample"),
    ("SCHED_EVENTS", "thread scheduling event"),
    ("ThreadNames", "named thread"),
)
#: what a GPU trace adds, and how to record one (cf. engine.analyze.breakdown.cpu_trace.GPU_HINT)
GPU_HINT = (
    "a GPU trace adds kernels, copies, regimes, the roofline and the replay's lever "
    "predictions: record the GPU work with nsys profile --trace=cuda,nvtx,osrt, then nsys "
    "export --type sqlite"
)


def _connect(path: Path) -> sqlite3.Connection:
    """Open the export read-only. The path goes into a ``file:`` URI percent-encoded
    (Path.as_uri), so '#', '?' and '%' in a name are the name, not a fragment, a query or an
    escape; ``mode=ro`` never creates a file (a missing one is an error)."""
    check_regular(path)  # a FIFO would block SQLite's open
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise TraceImportError(path, f"not a readable SQLite database ({_one_line(e)})") from None
    # text that is not UTF-8 (kernel names in a damaged export) is read with U+FFFD, not fatal
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
        con.close()
        raise TraceImportError(path, f"not a readable SQLite database ({_one_line(e)})") from None
    return con


def _one_line(e: BaseException) -> str:
    """An error's text on one line (SQLite quotes schema text, which may hold line breaks)."""
    if isinstance(e, UnicodeDecodeError):  # raised by sqlite3 for a schema that is not UTF-8
        return "its schema holds text that is not UTF-8: a damaged file"
    return " ".join(str(e).split())


#: what a NULL start or end reads as: beyond ±MAX_TIME_NS, so the row is skipped and counted
NO_TIME = -(1 << 63)


def _text(v: Any) -> str | None:
    """A value read where text was expected, as text. SQLite columns are not typed: a damaged
    or forged export can hold a BLOB there (bytes, read as UTF-8 with U+FFFD for bad bytes, as
    the connection reads text), a number (its digits) or NULL (None). Every text the importer
    reads from the export goes through here, so no bytes reach a name, a regex or a report."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _fetch(con: sqlite3.Connection, table: str, wanted: list[str]) -> dict[str, np.ndarray]:
    """Return the wanted columns that exist (others absent from the dict), as numpy arrays."""
    have = _columns(con, table)
    cols = [c for c in wanted if c in have]
    if not cols:
        return {}
    rows = con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
    if not rows:
        return {c: np.zeros(0) for c in cols}
    data = list(zip(*rows, strict=True))
    return {c: np.asarray(v, dtype=object) for c, v in zip(cols, data, strict=True)}


def _int(v: Any, column: str) -> int:
    """A value of an integer column as an int; ValueError naming the column when it holds
    something else (a BLOB, text that is not a number: SQLite columns are not typed)."""
    if isinstance(v, int):
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        what = f"a BLOB ({len(v)} bytes)" if isinstance(v, bytes) else f"{_text(v)!r:.40}"
        raise ValueError(f"{column} holds {what} where an integer was expected") from None


def _ints(d: dict[str, np.ndarray], key: str, n: int, default: int = 0) -> np.ndarray:
    if key not in d:
        return np.full(n, default, np.int64)
    v = d[key]
    try:
        return np.array([default if x is None else int(x) for x in v], dtype=np.int64)
    except (TypeError, ValueError):
        for x in v:  # (only once a value failed) the error that names the column
            if x is not None:
                _int(x, key)
        raise


def _rows(
    d: dict[str, np.ndarray],
    n: int,
    kind: Kind,
    name_idx: np.ndarray,
    stream_default: int = 0,
    **columns: np.ndarray,
) -> dict[str, np.ndarray]:
    """Columns shared by every activity table (times, stream, device, correlation) plus the
    given ones; what a table does not have is unknown (0 / NaN, provenance bit unset)."""
    out = {
        # a NULL time is no time: out of range, so the row is skipped and counted (as 0 it
        # made a row from the session's start: "459,906 ms GPU time over 875.7 ms")
        "start_ns": _ints(d, "start", n, NO_TIME),
        "end_ns": _ints(d, "end", n, NO_TIME),
        "stream": _ints(d, "streamId", n, stream_default).astype(np.int32),
        "device": _ints(d, "deviceId", n).astype(np.int16),
        "kind": np.full(n, kind, np.uint8),
        "name": name_idx,
        "correlation": _ints(d, "correlationId", n),
        "grid": np.zeros(n, np.int32),
        "block": np.zeros(n, np.int32),
        "regs": np.zeros(n, np.int32),
        "smem": np.zeros(n, np.int32),
        "occupancy": np.full(n, np.nan, np.float32),
        "flops": np.full(n, np.nan),
        "dram_bytes": np.full(n, np.nan),
        "provenance": np.zeros(n, np.uint8),
    }
    out.update(columns)
    return out


def read_nsys(path: str | Path) -> Trace:
    """Import an Nsight Systems SQLite export (opened read-only; never created or written);
    raise TraceImportError for anything else."""
    path = Path(path)
    con = _connect(path)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables) and (
            "TARGET_INFO_GPU" not in tables
        ):
            if any(t in tables for t in _NSYS_MARKERS):  # Nsight's, with no CUDA activity
                raise TraceImportError(path, _cpu_only(con, tables))
            raise TraceImportError(
                path,
                "SQLite file is not an Nsight Systems export (no CUPTI_ACTIVITY_KIND_* tables)",
            )
        strings = (
            {
                i: t
                for i, v in con.execute("SELECT id, value FROM StringIds").fetchall()
                if (t := _text(v)) is not None
            }
            if "StringIds" in tables
            else {}
        )
        names = NameTable()
        parts: list[dict[str, np.ndarray]] = []
        if _KERNEL in tables:
            parts.append(_kernels(con, strings, names))
        if _MEMCPY in tables:
            parts.append(_copies(con, names, _MEMCPY, Kind.MEMCPY, tables))
        if _MEMSET in tables:
            parts.append(_copies(con, names, _MEMSET, Kind.MEMSET, tables))
        if _SYNC in tables:
            parts.append(_syncs(con, names, tables))
        host, twins = _runtime(con, strings) if _RUNTIME in tables else (HostEvents.empty(), 0)
        if _SYNC in tables:
            _link_syncs(con, host)
        gpus = _gpus(con, tables) if "TARGET_INFO_GPU" in tables else []
        if not any(len(p["kind"]) and p["kind"][0] != Kind.SYNC for p in parts):
            # not one kernel, copy or memset row: a CPU-only capture, said for what it holds
            # (rows read but unusable, times backwards, are counted as malformed below)
            raise TraceImportError(path, _cpu_only(con, tables))
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
        raise TraceImportError(path, f"unreadable Nsight export ({_one_line(e)})") from None
    except (TypeError, ValueError, OverflowError) as e:  # a value of the wrong type in a column
        raise TraceImportError(
            path, f"corrupt Nsight export: a column holds a bad value ({_one_line(e)})"
        ) from None
    finally:
        con.close()
    parts = [p for p in parts if len(p["start_ns"])]
    malformed = 0
    if parts:
        cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        # a row that ends before it starts (a corrupt or half-written export), or whose times
        # are beyond ±MAX_TIME_NS, has no usable time: skipped and counted, like the Kineto
        # importer's events without a timestamp
        backwards = (
            (cols["end_ns"] < cols["start_ns"])
            | (np.abs(cols["start_ns"].astype(np.float64)) >= MAX_TIME_NS)
            | (np.abs(cols["end_ns"].astype(np.float64)) >= MAX_TIME_NS)
        )
        malformed = int(backwards.sum())
        if malformed:
            cols = {k: v[~backwards] for k, v in cols.items()}
        klass = classify_table(names)
        cols["klass"] = klass[cols["name"]] if len(cols["name"]) else cols["name"].astype(np.uint8)
        seg = Segments.from_columns(**cols)
        seg = seg.take(np.argsort(seg.start_ns, kind="stable"))
    else:
        seg = Segments.empty()
    check_times(
        path,
        np.concatenate([seg.start_ns, host.api_start_ns]),
        np.concatenate([seg.end_ns, host.api_end_ns]),
    )
    props: dict[str, Any] = {
        "format": "nsys",
        "devices": gpus,
        "rank": None,
        "malformed_events": malformed,
        # runtime rows dropped as the versioned twin of a call already kept (old exports)
        "duplicate_runtime_rows": twins,
    }
    return Trace(segments=seg, names=names, host=host, device_properties=props, source=str(path))


def _cpu_only(con: sqlite3.Connection, tables: set[str]) -> str:
    """The line for an Nsight export with no GPU row (no kernel, copy or memset): what it holds
    (rows per CPU-side table, as counted by SQLite) and what a GPU trace would add."""
    held = []
    for table, what in _CPU_TABLES:
        if table in tables:
            row = con.execute(f"SELECT count(*) FROM {table}").fetchone()
            n = int(row[0]) if row and isinstance(row[0], int) else 0
            if n:
                held.append(f"{n:,} {what}{'s' if n != 1 else ''}")
    holds = ", ".join(held) if held else "no CPU-side rows either"
    return (
        f"an Nsight Systems export with no GPU rows — CPU-only ({holds}; no CUDA kernel, copy "
        f"or memset): nothing for the GPU analysis; {GPU_HINT}"
    )


def _kernels(
    con: sqlite3.Connection, strings: dict[int, str], names: NameTable
) -> dict[str, np.ndarray]:
    d = _fetch(
        con,
        _KERNEL,
        [
            "start",
            "end",
            "deviceId",
            "streamId",
            "correlationId",
            "gridX",
            "gridY",
            "gridZ",
            "blockX",
            "blockY",
            "blockZ",
            "registersPerThread",
            "staticSharedMemory",
            "dynamicSharedMemory",
            "demangledName",
            "shortName",
            "name",
        ],
    )
    n = len(d.get("start", ()))
    col = next((k for k in ("demangledName", "name", "shortName") if k in d), None)
    if col is None:
        name_idx = np.full(n, names.intern("<unnamed kernel>"), np.int32)
    else:
        name_ids = d[col]
        name_idx = np.array(
            [
                names.intern(strings.get(_int(i, col), f"<string {i}>"))
                if i is not None
                else names.intern("<unnamed kernel>")
                for i in name_ids
            ],
            np.int32,
        )
    grid = _ints(d, "gridX", n, 1) * _ints(d, "gridY", n, 1) * _ints(d, "gridZ", n, 1)
    block = _ints(d, "blockX", n, 1) * _ints(d, "blockY", n, 1) * _ints(d, "blockZ", n, 1)
    has_geom = "gridX" in d and "blockX" in d
    return _rows(
        d,
        n,
        Kind.KERNEL,
        name_idx,
        grid=(grid if has_geom else np.zeros(n, np.int64)).clip(0, 2**31 - 1).astype(np.int32),
        block=(block if has_geom else np.zeros(n, np.int64)).clip(0, 2**31 - 1).astype(np.int32),
        regs=_ints(d, "registersPerThread", n).astype(np.int32),
        smem=(_ints(d, "staticSharedMemory", n) + _ints(d, "dynamicSharedMemory", n)).astype(
            np.int32
        ),
        provenance=np.full(n, int(Provenance.GEOMETRY) if has_geom else 0, np.uint8),
    )


def _copies(
    con: sqlite3.Connection, names: NameTable, table: str, kind: Kind, tables: set[str]
) -> dict[str, np.ndarray]:
    d = _fetch(
        con,
        table,
        [
            "start",
            "end",
            "deviceId",
            "streamId",
            "correlationId",
            "bytes",
            "copyKind",
            "srcKind",
            "dstKind",
        ],
    )
    n = len(d.get("start", ()))
    if kind == Kind.MEMCPY:
        copy_kind = _enum(con, tables, "ENUM_CUDA_MEMCPY_OPER", _COPY_KIND, _COPY_KIND_BY_ENUM)
        ck = _ints(d, "copyKind", n)
        if "srcKind" in d and "dstKind" in d:
            mem_kind = _enum(con, tables, "ENUM_CUDA_MEM_KIND", _MEM_KIND, _MEM_KIND_BY_ENUM)
            # -1: a NULL kind, which no enum names, so it reads "Unknown" like any unknown id
            src, dst = _ints(d, "srcKind", n, -1), _ints(d, "dstKind", n, -1)
            triples = np.stack([ck, src, dst], axis=1)
            uniq, inv = np.unique(triples, axis=0, return_inverse=True)
            ids = np.array(
                [
                    names.intern(
                        f"Memcpy {copy_kind.get(int(c), 'Unknown')} "
                        f"({mem_kind.get(int(a), 'Unknown')} -> {mem_kind.get(int(b), 'Unknown')})"
                    )
                    for c, a, b in uniq
                ],
                np.int32,
            )
            name_idx = ids[inv.reshape(-1)] if n else np.zeros(0, np.int32)
        else:  # an export without memory kinds: the direction is all we know
            name_idx = np.array(
                [names.intern(f"Memcpy {copy_kind.get(int(k), 'Unknown')}") for k in ck], np.int32
            )
    else:
        name_idx = np.full(n, names.intern("Memset"), np.int32)
    has_bytes = "bytes" in d
    return _rows(
        d,
        n,
        kind,
        name_idx,
        dram_bytes=_ints(d, "bytes", n).astype(np.float64) if has_bytes else np.full(n, np.nan),
        provenance=np.full(n, int(Provenance.DRAM_BYTES) if has_bytes else 0, np.uint8),
    )


def _enum(
    con: sqlite3.Connection,
    tables: set[str],
    table: str,
    default: dict[int, str],
    by_name: dict[str, str],
) -> dict[int, str]:
    """id → our spelling for one of Nsight's ENUM_* tables: the export's own ids where it has
    the table (matched by the enum's ``name``; a name we do not know reads "Unknown"), else
    ``default`` (the ids every export we know of uses)."""
    if table not in tables or not {"id", "name"} <= _columns(con, table):
        return default
    return {
        int(i): by_name.get(str(_text(nm)), "Unknown")
        for i, nm in con.execute(f"SELECT id, name FROM {table}").fetchall()
        if isinstance(i, int)
    }


def _syncs(con: sqlite3.Connection, names: NameTable, tables: set[str]) -> dict[str, np.ndarray]:
    d = _fetch(con, _SYNC, ["start", "end", "deviceId", "streamId", "correlationId", "syncType"])
    n = len(d.get("start", ()))
    kinds = {}
    if "ENUM_CUPTI_SYNC_TYPE" in tables:
        cols = _columns(con, "ENUM_CUPTI_SYNC_TYPE")
        if {"id", "label"} <= cols:
            kinds = {
                i: _text(label)
                for i, label in con.execute("SELECT id, label FROM ENUM_CUPTI_SYNC_TYPE")
            }
    st = _ints(d, "syncType", n)
    name_idx = np.array(
        [names.intern(str(kinds.get(int(k), f"Sync {int(k)}"))) for k in st], np.int32
    )
    return _rows(d, n, Kind.SYNC, name_idx, stream_default=-1)


_NO_ID = 0xFFFFFFFF  # CUPTI's "none" for a 32-bit stream or event id


def _link_syncs(con: sqlite3.Connection, host: HostEvents) -> None:
    """Give synchronising runtime rows the stream the SYNCHRONIZATION table names (in place):
    cudaStreamSynchronize (syncType 3) waits for that stream only, not every stream, and
    cudaStreamWaitEvent (syncType 2) makes that stream wait, for that event id."""
    d = _fetch(con, _SYNC, ["correlationId", "streamId", "syncType", "eventId"])
    n = len(d.get("correlationId", ()))
    if not n or not len(host) or not {"streamId", "syncType"} <= set(d):
        return
    corr = _ints(d, "correlationId", n)
    stream = _ints(d, "streamId", n, _NO_ID)
    kind = _ints(d, "syncType", n)
    event = _ints(d, "eventId", n, _NO_ID)
    order = np.argsort(host.correlation, kind="stable")
    hs = host.correlation[order]
    pos = np.minimum(np.searchsorted(hs, corr), len(hs) - 1)
    r = np.where(hs[pos] == corr, order[pos], -1)
    ok = (r >= 0) & (stream >= 0) & (stream != _NO_ID)
    api = np.full(n, 255, np.int64)
    api[r >= 0] = host.api[r[r >= 0]]
    one = ok & (kind == 3) & (api == ApiKind.SYNC)
    host.streams_to_fill()[r[one]] = stream[one]
    wait = ok & (kind == 2) & (api == ApiKind.STREAM_WAIT)
    host.streams_to_fill()[r[wait]] = stream[wait]
    known = wait & (event != _NO_ID)
    host.events_to_fill()[r[known]] = event[known]


def _runtime(con: sqlite3.Connection, strings: dict[int, str]) -> tuple[HostEvents, int]:
    """Host rows of the runtime/driver calls that have a correlation id, one per call, and how
    many versioned twins were dropped."""
    d = _fetch(con, _RUNTIME, ["start", "end", "correlationId", "nameId", "globalTid"])
    n = len(d.get("start", ()))
    corr = _ints(d, "correlationId", n)
    start, end = _ints(d, "start", n, NO_TIME), _ints(d, "end", n, NO_TIME)
    # rows without a correlation id, or with times NULL or beyond ±MAX_TIME_NS (damaged)
    keep = (
        (corr > 0)
        & (np.abs(start.astype(np.float64)) < MAX_TIME_NS)
        & (np.abs(end.astype(np.float64)) < MAX_TIME_NS)
    )
    corr, start, end = corr[keep], start[keep], end[keep]
    # the calling thread (globalTid: process and thread id in one integer), where exported
    tid = np.zeros(len(corr), np.int64)  # (optional: one thread where it is not integers)
    if "globalTid" in d:
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            tid = _ints(d, "globalTid", n)[keep]
    cache: dict[int, int] = {}
    api = np.zeros(len(corr), np.uint8)  # LAUNCH when the export has no nameId column
    twins = 0
    if "nameId" in d:
        ids = _ints(d, "nameId", n)[keep]
        rows = _one_row_per_call(corr, start, end, ids, strings)
        twins = len(corr) - len(rows)
        corr, start, end, ids = corr[rows], start[rows], end[rows], ids[rows]
        tid = tid[rows]
        api = np.array(
            [
                cache.setdefault(int(i), api_kind_from_name(str(strings.get(int(i), ""))))
                for i in ids
            ],
            np.uint8,
        )
    host = HostEvents(
        correlation=corr,
        stream=np.full(len(corr), -1, np.int32),
        api_start_ns=start,
        api_end_ns=end,
        api=api,
        thread=HostEvents.threads_of(tid),
    )
    return host, twins


def _one_row_per_call(
    corr: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    name_ids: np.ndarray,
    strings: dict[int, str],
) -> np.ndarray:
    """Indices (ascending) of the runtime rows to keep: of rows sharing a correlation id *and*
    the same call name once a ``_v<digits>`` suffix is stripped (``cudaMemcpy`` /
    ``cudaMemcpy_v3020``), only one — the outer span: the earliest start, then the latest
    end, then the un-suffixed name.

    Why the outer one: the versioned row is the entry point the call forwards to, nested
    inside it, and what the application waited for is the whole call, entry to return — that
    is the host-blocking time and the moment the host can go on, which the replay's host
    edges use. The name alone would not do: which spelling is outer is not documented and
    differs between releases, the span is what the rows measure. Rows with the same id but a
    different call (a runtime call and a driver call it made) stay: they are two calls.
    Without names nothing can be told apart, so the caller only asks with a nameId column.
    """
    if len(np.unique(corr)) == len(corr):  # the usual export: nothing to do
        return np.arange(len(corr))
    base_of: dict[str, int] = {}
    per_id: dict[int, tuple[int, int]] = {}
    for i in np.unique(name_ids):
        name = str(strings.get(int(i), f"<string {i}>"))
        call = _VERSIONED.sub("", name)
        per_id[int(i)] = (base_of.setdefault(call, len(base_of)), int(call != name))
    calls = np.array([per_id[int(i)][0] for i in name_ids], np.int64)
    suffixed = np.array([per_id[int(i)][1] for i in name_ids], np.int64)
    # np.lexsort's last key is the primary one: group by (correlation, call), then best first
    order = np.lexsort((suffixed, -end, start, calls, corr))
    c, b = corr[order], calls[order]
    first = np.ones(len(order), bool)
    first[1:] = (c[1:] != c[:-1]) | (b[1:] != b[:-1])
    return np.sort(order[first])


def _cuda_ids(con: sqlite3.Connection) -> dict[int, set[int]]:
    """TARGET_INFO_GPU id → the CUDA device numbers processes gave it (TARGET_INFO_CUDA_DEVICE:
    one row per process and device, ``cudaId`` the process's CUDA ordinal, ``gpuId`` the GPU)."""
    cols = _columns(con, "TARGET_INFO_CUDA_DEVICE")
    if not {"gpuId", "cudaId"} <= cols:
        return {}
    out: dict[int, set[int]] = {}
    for gpu, cuda in con.execute("SELECT gpuId, cudaId FROM TARGET_INFO_CUDA_DEVICE").fetchall():
        if isinstance(gpu, int) and isinstance(cuda, int):
            out.setdefault(gpu, set()).add(cuda)
    return out


def _gpus(con: sqlite3.Connection, tables: set[str] | None = None) -> list[dict[str, Any]]:
    """The GPUs of TARGET_INFO_GPU, each with ``id``: the device number its rows carry.

    The activity tables' ``deviceId`` is the process's CUDA device ordinal, not
    TARGET_INFO_GPU's ``id`` (Nsight's own numbering, in PCI order): on a host with mixed GPUs
    CUDA puts the fastest first (CUDA_DEVICE_ORDER=FASTEST_FIRST is its default), and
    CUDA_VISIBLE_DEVICES renumbers them. So ``id`` comes from TARGET_INFO_CUDA_DEVICE
    (``gpuId`` → ``cudaId``) where the export has it, else from TARGET_INFO_GPU's ``cuDevice``,
    else it is the Nsight id. A GPU that processes numbered differently is listed once per
    number (``properties_of`` then sees two devices behind one id). ``gpu_id`` keeps Nsight's
    id, ``clock_mhz`` the clock (clockRate is in Hz)."""
    cols = _columns(con, "TARGET_INFO_GPU")
    wanted = [
        c
        for c in (
            "id",
            "name",
            "smCount",
            "memoryBandwidth",
            "clockRate",
            "totalMemory",
            "computeMajor",
            "computeMinor",
            "chipName",
            "cuDevice",
            "busLocation",
        )
        if c in cols
    ]
    if not wanted:
        return []
    cuda = _cuda_ids(con) if tables is not None and "TARGET_INFO_CUDA_DEVICE" in tables else {}
    rows = con.execute(f"SELECT {', '.join(wanted)} FROM TARGET_INFO_GPU").fetchall()
    out = []
    for r in rows:
        g = dict(zip(wanted, r, strict=True))
        gpu = g.get("id")
        clock = g.get("clockRate")
        dev = {
            "id": gpu,
            "gpu_id": gpu,
            "name": _text(g.get("name")),
            "numSms": g.get("smCount"),
            "memoryBandwidth": g.get("memoryBandwidth"),
            "clockRate": clock,
            "clock_mhz": clock / 1e6
            if isinstance(clock, (int, float)) and not isinstance(clock, bool) and clock > 0
            else None,
            "totalGlobalMem": g.get("totalMemory"),
            "computeMajor": g.get("computeMajor"),
            "computeMinor": g.get("computeMinor"),
            "chipName": _text(g.get("chipName")),
            "busLocation": _text(g.get("busLocation")),
        }
        ids: list[Any] = sorted(cuda.get(gpu, ())) if isinstance(gpu, int) else []
        if not ids and isinstance(g.get("cuDevice"), int) and not isinstance(g["cuDevice"], bool):
            ids = [g["cuDevice"]]
        for cid in ids or [gpu]:
            out.append({**dev, "id": cid})
    return out
