"""Import rocprofv3's JSON output (``rocprofv3 … --output-format json``: ``<pid>_results.json``,
plain or gzipped) into a Trace — the same rows the CSV importer (rocprof_csv) makes of the
CSV files of the same run.

The layout is rocprofiler-sdk's JSON writer (``source/lib/rocprofiler-sdk-tool/generateJSON.cpp``,
``source/docs/rocprofv3-schema.json``; its tests, ``tests/rocprofv3/tracing/validate.py``, read
it the same way): one object whose only key, ``rocprofiler-sdk-tool``, is a list of one entry
per process, each with

* ``agents``: ``id.handle`` (what records name an agent by) → ``node_id`` (the ``Agent_Id`` the
  CSV files carry), ``type`` (1 CPU, 2 GPU), ``product_name`` (the device name the hardware
  catalogue matches: ``AMD Instinct MI350X``), ``name`` (the gfx target), ``cu_count``;
* ``kernel_symbols``: ``kernel_id`` → ``formatted_kernel_name`` (the CSV's ``Kernel_Name``),
  ``arch_vgpr_count``;
* ``strings.buffer_records``: a record's ``kind`` indexes this list, its ``operation`` the
  kind's ``operations`` (a copy's direction, a HIP call's function name);
* ``buffer_records.kernel_dispatch`` → KERNEL rows: ``start_timestamp``/``end_timestamp`` ns
  on rocprofiler-sdk's clock (the same as the CSV's; not the epoch), ``dispatch_info``
  (agent, queue, kernel id, dispatch id, LDS bytes, HSA grid and workgroup sizes in
  work-items: ``grid`` = workgroups, as CUDA's grid counts blocks), ``stream_id`` (ROCm 6.4+;
  older files have only the HSA queue, used in its place, as the CSV importer does), the
  *internal* ``correlation_id`` (the HIP call that launched it carries it too);
* ``buffer_records.memory_copy`` → MEMCPY rows named as Kineto names copies (``Memcpy HtoD``),
  ``bytes`` measured;
* ``buffer_records.hip_api`` → host rows linked by correlation id; ``rccl_api`` counted by
  function (``rccl_calls``: the collectives' device time is the RCCL kernels, COMM by the
  taxonomy);
* ``callback_records.counter_collection`` (``--pmc``) → per dispatch, each counter summed over
  its instances (``counters``: id → name), joined to its kernel row by dispatch id and turned
  into the measured columns (engine.trace.rocprof.counters, shared with the CSV and rocpd
  readers).

Devices are numbered as the CSV importer numbers them: the GPU agents 0.. in the agents' order
(by node id, so one GPU seen by several processes is one device). Several processes in one
file keep their correlation ids apart (the i-th's offset by i << 48) and their threads too.

The file is parsed whole (the format is one JSON object: Python's objects take ~5x its text;
the 37 MB sample peaks near 200 MB), within engine.trace.limits: its decompressed size, the
gzip ratio and the nesting depth are checked before parsing. Anything malformed — not JSON, a
key missing, a text where a number belongs, a time beyond ±2**62 ns — is a TraceImportError
(one line naming the record); a row that ends before it starts is dropped and counted.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.trace.errors import TraceImportError
from engine.trace.inflate import chunks
from engine.trace.limits import MAX_TIME_NS, ReadLimits, check_times
from engine.trace.rocprof.counters import measured_columns, measured_flops
from engine.trace.rocprof.rows import DIRECTION, dense_streams, host_rows
from engine.trace.segments import Kind, NameTable, Provenance, Segments
from engine.trace.taxonomy import classify_table
from engine.trace.trace import Trace, api_kind_from_name

_KEY = "rocprofiler-sdk-tool"
_GZIP = b"\x1f\x8b"
#: the first bytes of rocprofv3 JSON: an object whose first key is the tool's (cereal writes
#: it first and only, indented or not)
_SNIFF = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"rocprofiler-sdk-tool"\s*:')
#: rocprofiler_agent_type_t: ROCPROFILER_AGENT_TYPE_CPU = 1, _GPU = 2
_AGENT_TYPE = {1: "CPU", 2: "GPU"}
#: correlation ids of the i-th process are offset by i << 48 (as engine.trace.rocprof.rocpd)
_PROC_SHIFT = 48
_I64 = 1 << 63


def looks_like_rocprof_json(head: bytes) -> bool:
    """Whether a file's first bytes are rocprofv3 JSON (``{"rocprofiler-sdk-tool": …``): the
    decompressed bytes of a gzip file, or its raw first bytes (inflated here as far as they
    go; a few hundred raw bytes are enough)."""
    if head.startswith(_GZIP):
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, 4096)
        except zlib.error:
            return False
    return _SNIFF.match(head) is not None


class _Bad(Exception):
    """A malformed value: where (a path into the document) and what is wrong."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")


def _tname(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(v), "null" if v is None else "a number"
    )


def _obj(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _Bad(where, f"is {_tname(v)}, not an object")
    return v


def _arr(v: Any, where: str) -> list[Any]:
    if not isinstance(v, list):
        raise _Bad(where, f"is {_tname(v)}, not an array")
    return v


def _get(d: dict[str, Any], key: str, where: str) -> Any:
    try:
        return d[key]
    except KeyError:
        raise _Bad(f"{where}.{key}", "missing") from None


def _int(v: Any, where: str) -> int:
    """An integer (a float that is one included), within int64."""
    if type(v) is int and -_I64 <= v < _I64:  # (the common case, first: ~600k calls a 44k-row file)
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _Bad(where, f"is {_tname(v)}, not an integer")
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise _Bad(where, f"is {v!r}, not an integer")
        v = int(v)
    if not -_I64 <= v < _I64:
        raise _Bad(where, "is an integer beyond 64 bits")
    return v


def _handle(d: dict[str, Any], key: str, where: str) -> int:
    """``d[key].handle``: how records name agents, queues and streams."""
    return _int(_get(_obj(_get(d, key, where), f"{where}.{key}"), "handle", f"{where}.{key}"),
                f"{where}.{key}.handle")  # fmt: skip


def _time(d: dict[str, Any], where: str) -> tuple[int, int]:
    s = _int(_get(d, "start_timestamp", where), f"{where}.start_timestamp")
    e = _int(_get(d, "end_timestamp", where), f"{where}.end_timestamp")
    if abs(s) >= MAX_TIME_NS or abs(e) >= MAX_TIME_NS:
        raise _Bad(where, "a timestamp beyond 2**62 ns")
    return s, e


# --- reading the file within the limits ---------------------------------------------------


def _file_bytes(path: Path, limits: ReadLimits) -> bytes:
    """The file's bytes, decompressed if gzipped (every member), within the size and gzip
    ratio limits (engine.trace.inflate, as the Kineto reader streams them)."""
    out = bytearray()
    for block in chunks(path, limits, 8 << 20):
        out += block
    if not out:
        raise TraceImportError(path, "empty file")
    return bytes(out)


def _depth(data: bytes) -> tuple[int, bool]:
    """The deepest nesting of arrays and objects (brackets inside strings not counted), and
    whether the text ends with a string or a bracket still open (a cut file), in a few vector
    passes: Python's json recursion is never reached by a hostile file."""
    b = np.frombuffer(data, np.uint8)
    quotes = np.flatnonzero(b == 0x22)
    slashes = np.flatnonzero(b == 0x5C)
    if len(slashes) and len(quotes):  # a quote after an odd run of backslashes is escaped
        starts = np.ones(len(slashes), bool)
        starts[1:] = slashes[1:] != slashes[:-1] + 1
        run_start = np.flatnonzero(starts)
        run_end = np.append(run_start[1:], len(slashes)) - 1
        lengths = run_end - run_start + 1
        after = slashes[run_end] + 1  # the byte after each run
        at = np.searchsorted(after, quotes)
        hit = at < len(after)
        hit[hit] = after[at[hit]] == quotes[hit]
        escaped = np.zeros(len(quotes), bool)
        escaped[hit] = lengths[at[hit]] % 2 == 1
        quotes = quotes[~escaped]
    brackets = np.flatnonzero((b == 0x7B) | (b == 0x5B) | (b == 0x7D) | (b == 0x5D))
    brackets = brackets[np.searchsorted(quotes, brackets) % 2 == 0]  # outside strings
    step = np.where((b[brackets] == 0x7B) | (b[brackets] == 0x5B), 1, -1)
    level = np.cumsum(step)
    open_at_end = len(quotes) % 2 == 1 or bool(len(level) and level[-1] > 0)
    return int(level.max(initial=0)), open_at_end


def _document(path: Path) -> list[Any]:
    """The per-process list of a rocprofv3 JSON file."""
    limits = ReadLimits.from_env(path)
    data = _file_bytes(path, limits)
    if _SNIFF.match(data[:4096]) is None:
        raise TraceImportError(
            path, 'not rocprofv3 JSON (it does not begin {"rocprofiler-sdk-tool": …)'
        )
    depth, cut = _depth(data)
    if depth > limits.max_json_depth:
        raise TraceImportError(
            path,
            f"JSON nested {depth} deep, beyond the limit of {limits.max_json_depth} "
            "(GITM_MAX_JSON_DEPTH): not a rocprofv3 output",
        )
    try:
        doc = json.loads(data)
    except json.JSONDecodeError as e:
        what = "truncated" if cut or e.pos >= len(data.rstrip()) else "malformed"
        raise TraceImportError(
            path, f"{what} JSON (line {e.lineno} column {e.colno}: {e.msg})"
        ) from None
    except (ValueError, RecursionError) as e:  # not UTF-8, a number of 4300+ digits, …
        raise TraceImportError(
            path, f"unreadable JSON ({' '.join(str(e).split())[:120]})"
        ) from None
    del data
    try:
        return _arr(_get(_obj(doc, "the document"), _KEY, "the document"), _KEY)
    except _Bad as e:
        raise TraceImportError(path, f"malformed rocprofv3 JSON: {e}") from None


# --- what one process's entry holds -------------------------------------------------------


@dataclass
class _Read:
    names: NameTable = field(default_factory=NameTable)
    rows: dict[str, list[Any]] = field(default_factory=dict)
    #: GPU node id → device number (the GPU agents in order); the GPUs' properties
    gpus: dict[int, int] = field(default_factory=dict)
    devices: list[dict[str, Any]] = field(default_factory=list)
    any_agents: bool = False
    #: (process, dispatch id) → kernel row
    dispatch_row: dict[tuple[int, int], int] = field(default_factory=dict)
    #: (process, dispatch id) → {counter: value summed over its instances}
    counters: dict[tuple[int, int], dict[str, float]] = field(default_factory=dict)
    counter_names: Counter[str] = field(default_factory=Counter)
    rccl: Counter[str] = field(default_factory=Counter)
    #: HIP calls: correlation, start, end, thread, ApiKind
    host: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    unnamed: int = 0

    def add(self, **values: Any) -> None:
        for k, v in values.items():
            self.rows.setdefault(k, []).append(v)


def _operations(strings: Any, where: str) -> list[tuple[str, list[str]]]:
    """``strings.buffer_records``: (kind name, its operations' names) by kind number."""
    if strings is None:
        return []
    recs = _arr(_obj(strings, where).get("buffer_records", []), f"{where}.buffer_records")
    out = []
    for i, e in enumerate(recs):
        w = f"{where}.buffer_records[{i}]"
        e = _obj(e, w)
        ops = _arr(e.get("operations", []), f"{w}.operations")
        out.append((str(e.get("kind", "")), [str(o) for o in ops]))
    return out


def _op_name(ops: list[tuple[str, list[str]]], kind: int, op: int) -> tuple[str, str]:
    if 0 <= kind < len(ops):
        kname, names = ops[kind]
        return kname, names[op] if 0 <= op < len(names) else ""
    return "", ""


def _renames(strings: Any, meta: dict[str, Any], where: str) -> dict[int, str]:
    """--kernel-rename: external correlation id → the ROCTx range name the kernel takes (as the
    CSV writer names it); empty when the run did not rename."""
    config = meta.get("config")
    if not isinstance(config, dict) or config.get("kernel_rename") is not True:
        return {}
    corr = _obj(strings, where).get("correlation_id") if strings is not None else None
    ext = corr.get("external", []) if isinstance(corr, dict) else []
    pairs = ext.items() if isinstance(ext, dict) else (
        (p.get("key"), p.get("value")) for p in _arr(ext, f"{where}.correlation_id.external")
        if isinstance(p, dict)
    )  # fmt: skip
    out = {}
    for k, v in pairs:
        try:
            out[_int(int(k) if isinstance(k, str) and k.isdigit() else k, "key")] = str(v)
        except _Bad:
            continue  # (a name we cannot key: the kernel keeps its symbol's name)
    return out


def _agents(agents: Any, where: str, r: _Read) -> dict[int, int]:
    """Agent handle → node id; each GPU new to the file becomes the next device."""
    out: dict[int, int] = {}
    for i, a in enumerate(_arr(agents, where)):
        w = f"{where}[{i}]"
        a = _obj(a, w)
        handle = _handle(a, "id", w)
        node = _int(_get(a, "node_id", w), f"{w}.node_id")
        out[handle] = node
        r.any_agents = True
        t = a.get("type")
        kind = _AGENT_TYPE.get(t, "") if isinstance(t, int) else str(t or "").upper()
        if kind != "GPU" or node in r.gpus:
            continue
        logical = a.get("logical_node_id", node)
        cus = a.get("cu_count")
        name = a.get("product_name") or a.get("name") or ""
        r.gpus[node] = len(r.devices)
        r.devices.append(
            {
                "logical_id": logical if isinstance(logical, int) else node,
                "type": "GPU",
                "name": str(name),
                "gfx": str(a.get("name") or ""),
                "numSms": cus if isinstance(cus, int) and not isinstance(cus, bool) and cus > 0
                else None,
                "id": len(r.devices),
                "agent_id": node,
            }
        )  # fmt: skip
    return out


def _symbols(symbols: Any, where: str) -> dict[int, tuple[str, int]]:
    """kernel id → (name as the CSV writes it, arch VGPRs)."""
    out: dict[int, tuple[str, int]] = {}
    for i, s in enumerate(_arr(symbols, where)):
        w = f"{where}[{i}]"
        s = _obj(s, w)
        kid = _int(_get(s, "kernel_id", w), f"{w}.kernel_id")
        name = next(
            (v for k in ("formatted_kernel_name", "demangled_kernel_name", "kernel_name")
             if isinstance(v := s.get(k), str) and v),
            "",
        )  # fmt: skip
        vgpr = s.get("arch_vgpr_count", 0)
        out[kid] = (name, _int(vgpr, f"{w}.arch_vgpr_count") if vgpr is not None else 0)
    return out


def _geometry(info: dict[str, Any], where: str) -> tuple[int, int]:
    """(workgroups in the grid, work-items in a workgroup) from HSA work-item sizes."""
    wg_d = _obj(_get(info, "workgroup_size", where), f"{where}.workgroup_size")
    gr_d = _obj(_get(info, "grid_size", where), f"{where}.grid_size")
    wg = [max(_int(wg_d.get(d, 1), f"{where}.workgroup_size.{d}"), 1) for d in "xyz"]
    gr = [max(_int(gr_d.get(d, 0), f"{where}.grid_size.{d}"), 0) for d in "xyz"]
    groups = math.prod(-(-g // w) for g, w in zip(gr, wg, strict=True))
    return min(groups, 2**31 - 1), min(math.prod(wg), 2**31 - 1)


def _process(g: int, proc: Any, r: _Read) -> None:
    where = f"{_KEY}[{g}]"
    proc = _obj(proc, where)
    meta = proc.get("metadata") or {}
    meta = _obj(meta, f"{where}.metadata")
    if isinstance(pid := meta.get("pid"), int):
        r.pids.append(pid)
    strings = proc.get("strings")
    ops = _operations(strings, f"{where}.strings")
    renames = _renames(strings, meta, f"{where}.strings")
    node_of = _agents(proc.get("agents", []), f"{where}.agents", r)
    symbols = _symbols(proc.get("kernel_symbols", []), f"{where}.kernel_symbols")
    buffers = _obj(proc.get("buffer_records", {}), f"{where}.buffer_records")
    shift = g << _PROC_SHIFT

    def agent(handle: int) -> int:  # the node id rows carry (the raw handle without agents)
        return node_of.get(handle, -1) if node_of else handle

    w0 = f"{where}.buffer_records.kernel_dispatch"
    for i, rec in enumerate(_arr(buffers.get("kernel_dispatch", []), w0)):
        w = f"{w0}[{i}]"
        rec = _obj(rec, w)
        s, e = _time(rec, w)
        info = _obj(_get(rec, "dispatch_info", w), f"{w}.dispatch_info")
        wi = f"{w}.dispatch_info"
        kid = _int(_get(info, "kernel_id", wi), f"{wi}.kernel_id")
        name, vgpr = symbols.get(kid, ("", 0))
        corr = _obj(_get(rec, "correlation_id", w), f"{w}.correlation_id")
        internal = _int(_get(corr, "internal", f"{w}.correlation_id"), f"{w}.correlation_id")
        ext = corr.get("external")
        if renames and isinstance(ext, int) and ext in renames:
            name = renames[ext]
        if not name:
            r.unnamed += 1
            name = "<unnamed kernel>"
        grid, block = _geometry(info, wi)
        dispatch = _int(_get(info, "dispatch_id", wi), f"{wi}.dispatch_id")
        stream = (_handle(rec, "stream_id", w) if "stream_id" in rec
                  else _handle(info, "queue_id", wi))  # fmt: skip
        r.dispatch_row[(g, dispatch)] = len(r.rows.get("start_ns", ()))
        lds = info.get("group_segment_size", 0)
        r.add(
            start_ns=s, end_ns=e, stream=stream, agent=agent(_handle(info, "agent_id", wi)),
            kind=Kind.KERNEL, name=r.names.intern(name), correlation=internal + shift,
            grid=grid, block=block, regs=vgpr,
            smem=_int(lds, f"{wi}.group_segment_size") if lds is not None else 0,
            dram_bytes=math.nan, issue_active=math.nan, stall_frac=math.nan,
            provenance=int(Provenance.GEOMETRY) if grid else 0,
        )  # fmt: skip
    w0 = f"{where}.buffer_records.memory_copy"
    for i, rec in enumerate(_arr(buffers.get("memory_copy", []), w0)):
        w = f"{w0}[{i}]"
        rec = _obj(rec, w)
        s, e = _time(rec, w)
        kind = _int(_get(rec, "kind", w), f"{w}.kind")
        _, op = _op_name(ops, kind, _int(_get(rec, "operation", w), f"{w}.operation"))
        direction = DIRECTION.get(op, "Unknown")
        size = rec.get("bytes")
        nbytes = float(_int(size, f"{w}.bytes")) if size is not None else math.nan
        src, dst = agent(_handle(rec, "src_agent_id", w)), agent(_handle(rec, "dst_agent_id", w))
        corr = _obj(rec.get("correlation_id", {}), f"{w}.correlation_id")
        cid = corr.get("internal")
        r.add(
            start_ns=s, end_ns=e,
            stream=_handle(rec, "stream_id", w) if "stream_id" in rec else 0,
            agent=src if direction == "DtoH" else dst, kind=Kind.MEMCPY,
            name=r.names.intern(f"Memcpy {direction}"),
            correlation=_int(cid, f"{w}.correlation_id.internal") + shift
            if cid is not None else -1,
            grid=0, block=0, regs=0, smem=0, dram_bytes=nbytes, issue_active=math.nan,
            stall_frac=math.nan, provenance=int(Provenance.DRAM_BYTES) if size is not None else 0,
        )  # fmt: skip
    _api(g, buffers, ops, where, r)
    _counter_records(g, proc, where, r)


def _api(g: int, buffers: dict[str, Any], ops: list[tuple[str, list[str]]], where: str,
         r: _Read) -> None:  # fmt: skip
    """HIP calls → host rows (by correlation id); RCCL calls counted by function."""
    w0 = f"{where}.buffer_records.rccl_api"
    for i, rec in enumerate(_arr(buffers.get("rccl_api", []), w0)):
        rec = _obj(rec, f"{w0}[{i}]")
        kind = _int(_get(rec, "kind", f"{w0}[{i}]"), f"{w0}[{i}].kind")
        _, fn = _op_name(ops, kind, _int(_get(rec, "operation", f"{w0}[{i}]"), f"{w0}[{i}]"))
        r.rccl[fn] += 1
    w0 = f"{where}.buffer_records.hip_api"
    for i, rec in enumerate(_arr(buffers.get("hip_api", []), w0)):
        w = f"{w0}[{i}]"
        rec = _obj(rec, w)
        s, e = _time(rec, w)
        if e < s:
            continue  # (no usable time: no edge for the replay)
        kind = _int(_get(rec, "kind", w), f"{w}.kind")
        _, fn = _op_name(ops, kind, _int(_get(rec, "operation", w), f"{w}.operation"))
        corr = _obj(_get(rec, "correlation_id", w), f"{w}.correlation_id")
        internal = _int(_get(corr, "internal", f"{w}.correlation_id"), f"{w}.correlation_id")
        tid = _int(rec.get("thread_id", 0), f"{w}.thread_id")
        r.host.append((internal + (g << _PROC_SHIFT), s, e, tid + (g << 32) if g else tid,
                       api_kind_from_name(fn)))  # fmt: skip


def _counter_records(g: int, proc: dict[str, Any], where: str, r: _Read) -> None:
    """--pmc: each dispatch's counters, summed over their instances (dimensions)."""
    cb = proc.get("callback_records")
    recs = _obj(cb, f"{where}.callback_records").get("counter_collection", []) if cb else []
    if not recs:
        return
    names: dict[int, str] = {}
    for i, c in enumerate(_arr(proc.get("counters", []), f"{where}.counters")):
        c = _obj(c, f"{where}.counters[{i}]")
        names[_handle(c, "id", f"{where}.counters[{i}]")] = str(c.get("name", ""))
    w0 = f"{where}.callback_records.counter_collection"
    for i, rec in enumerate(_arr(recs, w0)):
        w = f"{w0}[{i}]"
        rec = _obj(rec, w)
        data = _obj(_get(rec, "dispatch_data", w), f"{w}.dispatch_data")
        info = _obj(_get(data, "dispatch_info", f"{w}.dispatch_data"), f"{w}.dispatch_info")
        dispatch = _int(_get(info, "dispatch_id", f"{w}.dispatch_info"), f"{w}.dispatch_id")
        values: dict[str, float] = {}
        for j, v in enumerate(_arr(rec.get("records", []), f"{w}.records")):
            v = _obj(v, f"{w}.records[{j}]")
            name = names.get(_handle(v, "counter_id", f"{w}.records[{j}]"), "")
            x = v.get("value")
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise _Bad(f"{w}.records[{j}].value", f"is {_tname(x)}, not a number")
            values[name] = values.get(name, 0.0) + float(x)
        for name in values:
            r.counter_names[name] += 1
        got = r.counters.setdefault((g, dispatch), {})
        for k, x in values.items():  # (a later pass adds its counters)
            got.setdefault(k, x)


def _join(r: _Read) -> tuple[int, int, list[tuple[int, float, int]]]:
    """Each dispatch's counters on its kernel row: (joined, unmatched, the FLOPs counted of
    each row that has them)."""
    cols = r.rows
    joined = unmatched = 0
    flops_at = []
    for key, values in r.counters.items():
        i = r.dispatch_row.get(key)
        if i is None:
            unmatched += 1
            continue
        dram, issue, stall, bits = measured_columns(values)
        flops, dcode, fbits = measured_flops(values)
        bits |= fbits
        if fbits:
            flops_at.append((i, flops, dcode))
        if bits:
            cols["dram_bytes"][i], cols["issue_active"][i], cols["stall_frac"][i] = (
                dram, issue, stall,
            )  # fmt: skip
            cols["provenance"][i] |= bits
        joined += 1
    return joined, unmatched, flops_at


def read_rocprof_json(path: str | Path) -> Trace:
    """Import a rocprofv3 JSON output file (plain or gzipped); TraceImportError (one line) for
    anything that cannot be read."""
    path = Path(path)
    procs = _document(path)
    r = _Read()
    try:
        for g, proc in enumerate(procs):
            _process(g, proc, r)
    except _Bad as e:
        raise TraceImportError(path, f"malformed rocprofv3 JSON: {e}") from None
    joined, unmatched, flops_at = _join(r)
    if not r.rows:
        if r.counters:
            raise TraceImportError(path, "counters with no kernel: no kernel dispatch holds them")
        raise TraceImportError(path, "no kernel dispatches or memory copies in this rocprofv3 JSON")
    cols = {k: np.asarray(v) for k, v in r.rows.items()}
    n = len(cols["start_ns"])
    cols["flops"], cols["dtype"] = np.full(n, np.nan), np.zeros(n, np.uint8)
    for i, flops, dcode in flops_at:
        cols["flops"][i], cols["dtype"][i] = flops, dcode
    agents = cols.pop("agent")
    gpus = r.gpus if r.any_agents else {a: i for i, a in enumerate(sorted(set(agents.tolist())))}
    cols["device"] = np.array([gpus.get(a, 0) for a in agents.tolist()], np.int16)
    cols["stream"] = dense_streams(cols["stream"].astype(np.int64))
    klass = classify_table(r.names)
    cols["klass"] = klass[cols["name"]]
    backwards = cols["end_ns"] < cols["start_ns"]
    malformed = int(backwards.sum())
    if malformed:
        cols = {k: v[~backwards] for k, v in cols.items()}
    seg = Segments.from_columns(**cols)
    seg = seg.take(np.argsort(seg.start_ns, kind="stable"))
    host = host_rows(r.host)
    check_times(path, [seg.start_ns, host.api_start_ns], [seg.end_ns, host.api_end_ns])
    props: dict[str, Any] = {
        "format": "rocprofv3-json",
        # each GPU as the CSV importer lists it: ``id`` the device number rows carry (the GPU
        # agents in the agents' order), ``agent_id`` its node id (the CSV's Agent_Id)
        "devices": r.devices,
        "rank": None,
        "malformed_events": malformed,
        "processes": len(procs),
        "pids": r.pids,
        "unnamed_kernels": r.unnamed,
        "counters": dict(r.counter_names),
        "counters_joined": joined,
        "counters_unmatched": unmatched,
        "rccl_calls": dict(r.rccl),
    }
    return Trace(segments=seg, names=r.names, host=host, device_properties=props, source=str(path))


__all__ = ["looks_like_rocprof_json", "read_rocprof_json"]
