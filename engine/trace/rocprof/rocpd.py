"""Import a rocpd database (rocprofv3's SQLite output, ``--output-format rocpd``, the default
since ROCm 7: ``<pid>_results.db``) into a Trace.

The schema is rocprofiler-sdk's ``source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql`` (schema
version 3; ROCm/rocm-systems, projects/rocprofiler-sdk): every table carries the writing
process's uuid in its name (``rocpd_kernel_dispatch_<uuid>``) and ``rocpd_views.sql`` gives
each one a plain-named view (``rocpd_kernel_dispatch``). The views are read; a database
without them (tables only, or several processes' tables merged) is read table by table, every
``rocpd_<name>_<uuid>`` of a name together. Rows of different processes are told apart by
their ``guid`` column, and every join matches it as the schema's own views do.

What becomes what (the rocpd_* names are the tables above):

* ``rocpd_kernel_dispatch`` → KERNEL rows: ``start``/``end`` ns, the stream (``stream_id``;
  the HSA queue where every dispatch names one stream but several queues), the kernel's
  ``display_name`` from ``rocpd_info_kernel_symbol``, launch geometry (HSA grid sizes are in
  work-items: workgroups = ceil(grid / workgroup) per dimension), LDS bytes, VGPRs;
  the correlation id is the dispatch event's ``stack_id`` — the *internal* correlation id,
  which the HIP call that launched it carries too (``correlation_id`` holds the external one);
* ``rocpd_memory_copy`` → MEMCPY rows with their ``size`` in bytes (measured), named as Kineto
  names copies (``Memcpy HtoD``): the direction from the source and destination agents' types
  (GPU to another GPU is ``PtoP``), else from the copy's name;
* ``rocpd_pmc_event`` (counter collection) → summed per dispatch and counter (as the schema's
  ``counters_collection`` view sums a counter's instances), joined to its dispatch by
  ``event_id`` and turned into the measured columns by engine.trace.rocprof.counters (FLOPs
  too, where FLOP-counting counters were collected);
* ``rocpd_region`` whose event category is a HIP API (``HIP_*_API*``) → host rows (launches,
  copies, syncs by their function name), linked to the device rows by correlation;
  ``RCCL_API`` regions are counted by function (``rccl_calls``: host calls — the collectives'
  device time is the RCCL kernels among the dispatches, COMM by the taxonomy);
* ``rocpd_info_agent`` → the GPU devices (``product_name`` for the catalogue, ``cu_count`` from
  its ``extdata`` JSON), numbered 0.. in their type index order.

Every value read is checked: a text where a number belongs, a time beyond ±2**62 ns, a join to a
row that does not exist. A damaged database is a TraceImportError (one line), a row that ends
before it starts is skipped and counted.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from engine.trace.errors import TraceImportError
from engine.trace.files import check_regular
from engine.trace.limits import MAX_TIME_NS, check_times
from engine.trace.rocprof.counters import measured_columns, measured_flops
from engine.trace.rocprof.rows import dense_streams
from engine.trace.segments import Kind, NameTable, Provenance, Segments
from engine.trace.taxonomy import classify_table
from engine.trace.trace import HostEvents, Trace, api_kind_from_name

#: the tables this reader uses (each as its plain-named view, or its ``_<uuid>`` tables)
TABLES = (
    "rocpd_kernel_dispatch",
    "rocpd_memory_copy",
    "rocpd_info_agent",
    "rocpd_info_kernel_symbol",
    "rocpd_event",
    "rocpd_string",
    "rocpd_pmc_event",
    "rocpd_info_pmc",
    "rocpd_region",
)
#: rocprofv3's copy names (rocprofiler's memory-copy operations) → Kineto's copy kinds
_COPY_NAME = {
    "MEMORY_COPY_HOST_TO_DEVICE": "HtoD",
    "MEMORY_COPY_DEVICE_TO_HOST": "DtoH",
    "MEMORY_COPY_DEVICE_TO_DEVICE": "DtoD",
    "MEMORY_COPY_HOST_TO_HOST": "HtoH",
}
#: correlation ids of the i-th process (guid) of a merged database are offset by i << 48: the
#: internal ids of one process count its API calls, far below 2**48
_GUID_SHIFT = 48


def is_rocpd(path: Path) -> bool:
    """Whether an SQLite file is a rocpd database (it has rocpd's kernel-dispatch table or
    view, or its metadata); False for any other SQLite file (Nsight's) or one that cannot be
    opened (the reader it goes to then says why)."""
    try:
        con = _connect(path)
    except TraceImportError:
        return False
    try:
        names = _names(con)
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        return False
    finally:
        con.close()
    return any(n.startswith(("rocpd_kernel_dispatch", "rocpd_metadata")) for n in names)


def _connect(path: Path) -> sqlite3.Connection:
    """Open read-only (a ``file:`` URI, percent-encoded: '#', '?' in a name are the name;
    ``mode=ro`` never creates a file); text that is not UTF-8 reads with U+FFFD."""
    check_regular(path)  # a FIFO would block SQLite's open
    try:
        con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise TraceImportError(path, f"not a readable SQLite database ({_one_line(e)})") from None
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def _one_line(e: BaseException) -> str:
    if isinstance(e, UnicodeDecodeError):
        return "its schema holds text that is not UTF-8: a damaged file"
    return " ".join(str(e).split())


def _names(con: sqlite3.Connection) -> list[str]:
    return [
        str(r[0])
        for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    ]


_IDENT = re.compile(r"^[A-Za-z0-9_]+$")


def _sources(names: list[str]) -> dict[str, str]:
    """Each of TABLES → an SQL expression to select from: its view, else the union of its
    per-process tables (``name_<uuid>``), absent when the database has neither."""
    have = set(names)
    out = {}
    for t in TABLES:
        if t in have:
            out[t] = f"`{t}`"
            continue
        rx = re.compile(rf"^{t}_[0-9A-Za-z_]+$")
        # (a longer table name of the same stem, rocpd_event vs rocpd_event_x, is its uuid)
        parts = sorted(n for n in names if rx.match(n) and _IDENT.match(n))
        if parts:
            out[t] = "(" + " UNION ALL ".join(f"SELECT * FROM `{p}`" for p in parts) + ")"
    return out


def _columns(con: sqlite3.Connection, src: str) -> set[str]:
    cur = con.execute(f"SELECT * FROM {src} LIMIT 0")
    return {d[0] for d in cur.description}


def _int(v: Any, what: str) -> int:
    """An integer column's value; ValueError naming the column for anything else (NULL
    included — callers pass a default for optional columns)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{what} holds {type(v).__name__}, not an integer")
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise ValueError(f"{what} holds {v!r}, not an integer")
        v = int(v)
    return v


def _opt_int(v: Any, what: str, default: int = 0) -> int:
    return default if v is None else _int(v, what)


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def read_rocpd(path: str | Path) -> Trace:
    """Import a rocpd database; TraceImportError (one line) when it cannot be read."""
    path = Path(path)
    con = _connect(path)
    try:
        src = _sources(_names(con))
        if "rocpd_kernel_dispatch" not in src and "rocpd_memory_copy" not in src:
            raise TraceImportError(
                path, "SQLite file is not a rocpd database (no rocpd_kernel_dispatch table)"
            )
        guids: dict[str, int] = {}
        agents = _agents(con, src, guids)
        names = NameTable()
        parts = []
        if "rocpd_kernel_dispatch" in src:
            parts.append(_kernels(con, src, names, guids))
        if "rocpd_memory_copy" in src:
            parts.append(_copies(con, src, names, guids, agents))
        counters = _counters(con, src, guids) if "rocpd_pmc_event" in src else {}
        host, rccl = _regions(con, src, guids) if "rocpd_region" in src else (None, Counter())
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
        raise TraceImportError(path, f"unreadable rocpd database ({_one_line(e)})") from None
    except (TypeError, ValueError, OverflowError) as e:
        raise TraceImportError(
            path, f"corrupt rocpd database: a column holds a bad value ({_one_line(e)})"
        ) from None
    finally:
        con.close()
    kern = parts[0] if parts and "event" in parts[0] else None
    joined, counter_names = _join(kern, counters) if kern is not None else (0, Counter())
    unmatched = len(counters) - joined
    parts = [{k: v for k, v in p.items() if k != "event"} for p in parts]
    parts = [p for p in parts if len(p["start_ns"])]
    if not parts:
        raise TraceImportError(path, "no kernel dispatches or memory copies in this rocpd database")
    cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    dev = _device_numbers(agents)
    cols["device"] = np.array(
        [
            dev.get((int(g), int(a)), 0)
            for g, a in zip(cols.pop("guid"), cols.pop("agent"), strict=True)
        ],
        np.int16,
    )
    bad = (
        (cols["end_ns"] < cols["start_ns"])
        | (np.abs(cols["start_ns"].astype(np.float64)) >= MAX_TIME_NS)
        | (np.abs(cols["end_ns"].astype(np.float64)) >= MAX_TIME_NS)
    )
    malformed = int(bad.sum())
    if malformed:
        cols = {k: v[~bad] for k, v in cols.items()}
    cols["klass"] = classify_table(names)[cols["name"]] if len(cols["name"]) else cols["name"]
    seg = Segments.from_columns(**cols)
    seg = seg.take(np.argsort(seg.start_ns, kind="stable"))
    host = host if host is not None else HostEvents.empty()
    check_times(path, [seg.start_ns, host.api_start_ns], [seg.end_ns, host.api_end_ns])
    gpus = sorted((a for a in agents.values() if a["type"] == "GPU"), key=lambda a: a["device"])
    props: dict[str, Any] = {
        "format": "rocpd",
        # each GPU as its rows number it: ``id`` the device number rows carry (agent ids are
        # per process; the analysis reads a row's device by this number), ``agent_id`` its own
        "devices": [
            {
                **{k: v for k, v in a.items() if k not in ("device", "id")},
                "id": a["device"],
                "agent_id": a["id"],
            }
            for a in gpus
        ],
        "rank": None,
        "malformed_events": malformed,
        "processes": len(guids),
        "counters": dict(counter_names),
        "counters_joined": joined,
        "counters_unmatched": unmatched,
        "rccl_calls": dict(rccl),
    }
    return Trace(segments=seg, names=names, host=host, device_properties=props, source=str(path))


def _agents(
    con: sqlite3.Connection, src: dict[str, str], guids: dict[str, int]
) -> dict[tuple[int, int], dict[str, Any]]:
    """(process, agent id) → the agent: type, name for the catalogue (``product_name``, else its
    gfx name), CU count, and the device number of a GPU (set by _device_numbers)."""
    if "rocpd_info_agent" not in src:
        return {}
    have = _columns(con, src["rocpd_info_agent"])
    want = [c for c in ("guid", "id", "type", "type_index", "logical_index", "name",
                        "product_name", "model_name", "extdata") if c in have]  # fmt: skip
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for row in con.execute(f"SELECT {', '.join(want)} FROM {src['rocpd_info_agent']}"):
        r = dict(zip(want, row, strict=True))
        g = guids.setdefault(_text(r.get("guid")), len(guids))
        cus = None
        try:
            ext = json.loads(_text(r.get("extdata")) or "{}")
            c = ext.get("cu_count") if isinstance(ext, dict) else None
            cus = c if isinstance(c, int) and not isinstance(c, bool) and c > 0 else None
        except (json.JSONDecodeError, RecursionError):
            pass  # (an agent's extra facts are optional: the CU count is then unknown)
        aid = _int(r.get("id"), "rocpd_info_agent.id")
        out[(g, aid)] = {
            "id": aid,
            "type": _text(r.get("type")).upper(),
            "type_index": _opt_int(r.get("type_index"), "rocpd_info_agent.type_index", aid),
            "name": _text(r.get("product_name")) or _text(r.get("name")),
            "gfx": _text(r.get("name")),
            "numSms": cus,
        }
    _device_numbers(out)
    return out


def _device_numbers(agents: dict[tuple[int, int], dict[str, Any]]) -> dict[tuple[int, int], int]:
    """(process, agent id) → device number: the GPUs numbered 0.. by (process, type index)."""
    gpus = sorted(
        (k for k, a in agents.items() if a["type"] == "GPU"),
        key=lambda k: (k[0], agents[k]["type_index"], k[1]),
    )
    out = {k: i for i, k in enumerate(gpus)}
    for k, i in out.items():
        agents[k]["device"] = i
    return out


def _geometry(row: dict[str, Any]) -> tuple[int, int]:
    """(workgroups in the grid, work-items per workgroup) from HSA work-item sizes."""
    wg = [max(_opt_int(row.get(f"workgroup_size_{d}"), f"workgroup_size_{d}", 1), 1) for d in "xyz"]
    gr = [max(_opt_int(row.get(f"grid_size_{d}"), f"grid_size_{d}", 0), 0) for d in "xyz"]
    groups = math.prod(-(-g // w) for g, w in zip(gr, wg, strict=True))
    return min(groups, 2**31 - 1), min(math.prod(wg), 2**31 - 1)


def _kernels(
    con: sqlite3.Connection, src: dict[str, str], names: NameTable, guids: dict[str, int]
) -> dict[str, np.ndarray]:
    k = src["rocpd_kernel_dispatch"]
    have = _columns(con, k)
    base = [c for c in ("guid", "agent_id", "queue_id", "stream_id", "start", "end", "event_id",
                        "kernel_id", "group_segment_size", "workgroup_size_x", "workgroup_size_y",
                        "workgroup_size_z", "grid_size_x", "grid_size_y", "grid_size_z")
            if c in have]  # fmt: skip
    sel = [f"K.{c}" for c in base]
    joins = ""
    if "rocpd_info_kernel_symbol" in src and "kernel_id" in have:
        sel += ["S.display_name", "S.kernel_name", "S.arch_vgpr_count"]
        joins += f" LEFT JOIN {src['rocpd_info_kernel_symbol']} S ON S.id = K.kernel_id" + (
            " AND S.guid = K.guid" if "guid" in have else ""
        )
    if "rocpd_event" in src and "event_id" in have:
        sel += ["E.stack_id"]
        joins += f" LEFT JOIN {src['rocpd_event']} E ON E.id = K.event_id" + (
            " AND E.guid = K.guid" if "guid" in have else ""
        )
    keys = [s.split(".", 1)[1] for s in sel]
    rows = [
        dict(zip(keys, r, strict=True))
        for r in con.execute(f"SELECT {', '.join(sel)} FROM {k} K{joins}")
    ]
    n = len(rows)
    out: dict[str, list[Any]] = {c: [] for c in ("start_ns", "end_ns", "stream", "queue", "guid",
                                                  "agent", "name", "correlation", "grid", "block",
                                                  "regs", "smem", "event")}  # fmt: skip
    for r in rows:
        g = guids.setdefault(_text(r.get("guid")), len(guids))
        out["guid"].append(g)
        out["start_ns"].append(_int(r.get("start"), "rocpd_kernel_dispatch.start"))
        out["end_ns"].append(_int(r.get("end"), "rocpd_kernel_dispatch.end"))
        out["stream"].append(_opt_int(r.get("stream_id"), "rocpd_kernel_dispatch.stream_id", -1))
        out["queue"].append(_opt_int(r.get("queue_id"), "rocpd_kernel_dispatch.queue_id", 0))
        out["agent"].append(_opt_int(r.get("agent_id"), "rocpd_kernel_dispatch.agent_id", -1))
        name = _text(r.get("display_name")) or _text(r.get("kernel_name")) or "<unnamed kernel>"
        out["name"].append(names.intern(name))
        stack = _opt_int(r.get("stack_id"), "rocpd_event.stack_id", -1)
        out["correlation"].append(stack + (g << _GUID_SHIFT) if stack >= 0 else -1)
        grid, block = _geometry(r)
        out["grid"].append(grid)
        out["block"].append(block)
        out["regs"].append(_opt_int(r.get("arch_vgpr_count"), "arch_vgpr_count", 0))
        out["smem"].append(_opt_int(r.get("group_segment_size"), "group_segment_size", 0))
        out["event"].append(_opt_int(r.get("event_id"), "rocpd_kernel_dispatch.event_id", -1))
    cols = {c: np.asarray(v, np.int64) for c, v in out.items()}
    stream, queue = cols.pop("stream"), cols.pop("queue")
    # every dispatch on one stream (or none recorded) but several HSA queues: the queues are
    # the only order the file keeps, as rocprofv3's --group-by-queue shows it
    one_stream = n and (stream == stream[0]).all() and len(np.unique(queue)) > 1
    cols["stream"] = dense_streams(queue if one_stream else stream)
    cols["kind"] = np.full(n, Kind.KERNEL, np.uint8)
    cols["flops"] = np.full(n, np.nan)
    cols["dtype"] = np.zeros(n, np.uint8)
    cols["dram_bytes"] = np.full(n, np.nan)
    cols["issue_active"] = np.full(n, np.nan, np.float32)
    cols["stall_frac"] = np.full(n, np.nan, np.float32)
    cols["provenance"] = np.where(cols["grid"] > 0, int(Provenance.GEOMETRY), 0).astype(np.uint8)
    for c in ("grid", "block", "regs", "smem"):
        cols[c] = np.clip(cols[c], 0, 2**31 - 1).astype(np.int32)
    cols["name"] = cols["name"].astype(np.int32)
    return cols


def _copies(
    con: sqlite3.Connection,
    src: dict[str, str],
    names: NameTable,
    guids: dict[str, int],
    agents: dict[tuple[int, int], dict[str, Any]],
) -> dict[str, np.ndarray]:
    m = src["rocpd_memory_copy"]
    have = _columns(con, m)
    base = [c for c in ("guid", "start", "end", "size", "src_agent_id", "dst_agent_id",
                        "stream_id", "queue_id", "name_id", "event_id") if c in have]  # fmt: skip
    sel = [f"M.{c}" for c in base]
    joins = ""
    g_eq = " AND {a}.guid = M.guid" if "guid" in have else ""
    if "rocpd_string" in src and "name_id" in have:
        sel.append("S.string")
        joins += f" LEFT JOIN {src['rocpd_string']} S ON S.id = M.name_id" + g_eq.format(a="S")
    if "rocpd_event" in src and "event_id" in have:
        sel.append("E.stack_id")
        joins += f" LEFT JOIN {src['rocpd_event']} E ON E.id = M.event_id" + g_eq.format(a="E")
    keys = [s.split(".", 1)[1] for s in sel]
    out: dict[str, list[Any]] = {c: [] for c in ("start_ns", "end_ns", "stream", "guid", "agent",
                                                  "name", "correlation", "dram_bytes",
                                                  "provenance")}  # fmt: skip
    for row in con.execute(f"SELECT {', '.join(sel)} FROM {m} M{joins}"):
        r = dict(zip(keys, row, strict=True))
        g = guids.setdefault(_text(r.get("guid")), len(guids))
        s_id = _opt_int(r.get("src_agent_id"), "rocpd_memory_copy.src_agent_id", -1)
        d_id = _opt_int(r.get("dst_agent_id"), "rocpd_memory_copy.dst_agent_id", -1)
        direction = _direction(agents.get((g, s_id)), agents.get((g, d_id)), _text(r.get("string")))
        size = r.get("size")
        out["guid"].append(g)
        out["start_ns"].append(_int(r.get("start"), "rocpd_memory_copy.start"))
        out["end_ns"].append(_int(r.get("end"), "rocpd_memory_copy.end"))
        out["stream"].append(_opt_int(r.get("stream_id"), "rocpd_memory_copy.stream_id", 0))
        # the GPU the copy is for: the destination, the source of a copy to the host
        out["agent"].append(s_id if direction == "DtoH" else d_id)
        out["name"].append(names.intern(f"Memcpy {direction}"))
        stack = _opt_int(r.get("stack_id"), "rocpd_event.stack_id", -1)
        out["correlation"].append(stack + (g << _GUID_SHIFT) if stack >= 0 else -1)
        nbytes = _opt_int(size, "rocpd_memory_copy.size", -1)
        out["dram_bytes"].append(float(nbytes) if nbytes >= 0 else math.nan)
        out["provenance"].append(int(Provenance.DRAM_BYTES) if nbytes >= 0 else 0)
    n = len(out["start_ns"])
    return {
        "start_ns": np.asarray(out["start_ns"], np.int64),
        "end_ns": np.asarray(out["end_ns"], np.int64),
        "stream": dense_streams(np.asarray(out["stream"], np.int64)),
        "guid": np.asarray(out["guid"], np.int64),
        "agent": np.asarray(out["agent"], np.int64),
        "name": np.asarray(out["name"], np.int32),
        "correlation": np.asarray(out["correlation"], np.int64),
        "kind": np.full(n, Kind.MEMCPY, np.uint8),
        "grid": np.zeros(n, np.int32),
        "block": np.zeros(n, np.int32),
        "regs": np.zeros(n, np.int32),
        "smem": np.zeros(n, np.int32),
        "flops": np.full(n, np.nan),
        "dtype": np.zeros(n, np.uint8),
        "dram_bytes": np.asarray(out["dram_bytes"], np.float64),
        "issue_active": np.full(n, np.nan, np.float32),
        "stall_frac": np.full(n, np.nan, np.float32),
        "provenance": np.asarray(out["provenance"], np.uint8),
    }


def _direction(src: dict[str, Any] | None, dst: dict[str, Any] | None, name: str) -> str:
    """A copy's kind: from its agents' types where both are known, else from its name."""
    if src is not None and dst is not None:
        s, d = src["type"], dst["type"]
        if s == "CPU" and d == "GPU":
            return "HtoD"
        if s == "GPU" and d == "CPU":
            return "DtoH"
        if s == "GPU" and d == "GPU":
            return "DtoD" if src["id"] == dst["id"] else "PtoP"
        if s == "CPU" and d == "CPU":
            return "HtoH"
    return _COPY_NAME.get(name.strip().upper(), "Unknown")


def _counters(
    con: sqlite3.Connection, src: dict[str, str], guids: dict[str, int]
) -> dict[tuple[int, int], dict[str, float]]:
    """(process, dispatch event id) → {counter name: value summed over its instances}."""
    if "rocpd_info_pmc" not in src:
        return {}
    have = _columns(con, src["rocpd_pmc_event"])
    g_sel = "P.guid" if "guid" in have else "''"
    g_eq = " AND I.guid = P.guid" if "guid" in have else ""
    out: dict[tuple[int, int], dict[str, float]] = {}
    q = (
        f"SELECT {g_sel}, P.event_id, I.name, SUM(P.value) FROM {src['rocpd_pmc_event']} P "
        f"JOIN {src['rocpd_info_pmc']} I ON I.id = P.pmc_id{g_eq} "
        f"GROUP BY {g_sel}, P.event_id, I.name"
    )
    for guid, event, name, value in con.execute(q):
        if event is None:
            continue
        g = guids.setdefault(_text(guid), len(guids))
        v = (
            float(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            else math.nan
        )
        out.setdefault((g, _int(event, "rocpd_pmc_event.event_id")), {})[_text(name)] = v
    return out


def _join(
    kern: dict[str, np.ndarray], counters: dict[tuple[int, int], dict[str, float]]
) -> tuple[int, Counter[str]]:
    """Put each dispatch's counters on its kernel row (in place); (dispatches joined, rows of
    each counter name seen)."""
    seen: Counter[str] = Counter()
    if not counters:
        return 0, seen
    row_of = {
        (int(g), int(e)): i
        for i, (g, e) in enumerate(zip(kern["guid"], kern["event"], strict=True))
        if e >= 0
    }
    joined = 0
    for key, values in counters.items():
        seen.update(values.keys())
        i = row_of.get(key)
        if i is None:
            continue
        dram, issue, stall, bits = measured_columns(values)
        flops, dcode, fbits = measured_flops(values)
        kern["flops"][i] = flops
        kern["dtype"][i] = dcode
        bits |= fbits
        kern["dram_bytes"][i] = dram
        kern["issue_active"][i] = issue
        kern["stall_frac"][i] = stall
        kern["provenance"][i] |= np.uint8(bits)
        joined += 1
    return joined, seen


def _regions(
    con: sqlite3.Connection, src: dict[str, str], guids: dict[str, int]
) -> tuple[HostEvents | None, Counter[str]]:
    """Host rows of the HIP API calls (their correlation links the device rows), and the RCCL
    API calls counted by function."""
    r_src = src["rocpd_region"]
    have = _columns(con, r_src)
    g_eq = " AND {a}.guid = R.guid" if "guid" in have else ""
    sel = ["R.start", "R.end", "R.tid", "R.guid" if "guid" in have else "''"]
    joins = ""
    if "rocpd_string" in src:
        sel.append("N.string")
        joins += f" LEFT JOIN {src['rocpd_string']} N ON N.id = R.name_id" + g_eq.format(a="N")
    else:
        sel.append("''")
    if "rocpd_event" in src:
        sel += ["E.stack_id", "C.string" if "rocpd_string" in src else "''"]
        joins += f" LEFT JOIN {src['rocpd_event']} E ON E.id = R.event_id" + g_eq.format(a="E")
        if "rocpd_string" in src:
            joins += f" LEFT JOIN {src['rocpd_string']} C ON C.id = E.category_id" + (
                " AND C.guid = E.guid" if "guid" in have else ""
            )
    else:
        sel += ["NULL", "''"]
    rccl: Counter[str] = Counter()
    corr, start, end, tid, api = [], [], [], [], []
    for s, e, t, guid, name, stack, category in con.execute(
        f"SELECT {', '.join(sel)} FROM {r_src} R{joins}"
    ):
        cat, fn = _text(category).upper(), _text(name)
        if cat.startswith("RCCL"):
            rccl[fn] += 1
            continue
        if not cat.startswith("HIP") or stack is None:
            continue
        g = guids.setdefault(_text(guid), len(guids))
        a, b = _int(s, "rocpd_region.start"), _int(e, "rocpd_region.end")
        if b < a or abs(a) >= MAX_TIME_NS or abs(b) >= MAX_TIME_NS:
            continue  # (a host row without a usable time is no edge for the replay)
        corr.append(_int(stack, "rocpd_event.stack_id") + (g << _GUID_SHIFT))
        start.append(a)
        end.append(b)
        tid.append(_opt_int(t, "rocpd_region.tid", 0) + (g << 32))
        api.append(api_kind_from_name(fn))
    if not corr:
        return None, rccl
    order = np.argsort(np.asarray(start, np.int64), kind="stable")
    host = HostEvents(
        correlation=np.asarray(corr, np.int64)[order],
        stream=np.full(len(corr), -1, np.int32),
        api_start_ns=np.asarray(start, np.int64)[order],
        api_end_ns=np.asarray(end, np.int64)[order],
        api=np.asarray(api, np.uint8)[order],
        thread=HostEvents.threads_of(np.asarray(tid, np.int64)[order]),
    )
    return host, rccl
