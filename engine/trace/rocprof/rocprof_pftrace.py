"""Import rocprofv3's Perfetto output (``rocprofv3 … --output-format pftrace``:
``<pid>_results.pftrace``) into a Trace — the rows the JSON importer (rocprof_json) makes of
the same run, less what the Perfetto file does not record.

The file is a Perfetto ``Trace`` protobuf, decoded by the protobuf library with the message
classes the ``perfetto`` package ships (``perfetto_trace_pb2``, generated from Perfetto's own
``perfetto_trace.proto``): no wire format is decoded here. What is read on top of it is the
layout of rocprofiler-sdk's writer (``source/lib/output/generatePerfetto.cpp``, also
``source/lib/rocprofiler-sdk-tool/generatePerfetto.cpp`` before ROCm 6.4), which emits one
Perfetto track-event slice per record through the Perfetto SDK:

* the slice's category names the record kind: ``kernel_dispatch`` → KERNEL rows,
  ``memory_copy`` → MEMCPY rows, ``hip_api`` → host rows, ``rccl_api`` counted by function (as
  the JSON importer counts them); ``hsa_api``, ``marker_api``, the copy and allocation counter
  tracks and anything else are not rows;
* the slice's debug annotations carry the record: ``begin_ns``/``end_ns`` (rocprofiler-sdk's
  clock, the JSON's and the CSV's: the times used here, not the packet timestamps),
  ``corr_id`` (the internal correlation id the launching HIP call carries too), ``tid``; on a
  kernel ``agent`` (the agent's node id, or from ROCm 6.4 an index such as ``GPU-0``),
  ``queue``, ``kernel_id``, ``group_segment_size`` (LDS bytes), ``workgroup_size`` and
  ``grid_size`` (each the product of its three HSA dimensions, in work-items); on a copy
  ``copy_bytes``, ``src_agent``, ``dst_agent``;
* the slice's name is the kernel's demangled name, the copy's operation
  (``MEMORY_COPY_HOST_TO_DEVICE``) or the API function's name;
* the slice's track names the stream (``COMPUTE AGENT [2] STREAM [1] (GPU)``, ``COPY to AGENT
  [2] STREAM [1] (GPU)``) from ROCm 6.4; older files and ``--group-by-queue`` have per-queue
  (or per-thread) tracks, and the kernel's ``queue`` stands for the stream, as in the JSON and
  CSV importers.

Names, categories and annotation names are interned per packet sequence (Perfetto's
``interned_data``, cleared by ``SEQ_INCREMENTAL_STATE_CLEARED``), resolved here as the
Perfetto trace processor resolves them.

What the Perfetto file does not carry, and the JSON does: the agents' table (the device's
name, gfx target and CU count are unknown: ``devices`` lists each GPU by the id the rows carry),
kernels' register counts (``regs`` is 0), dispatch ids and counters, the grid's three
dimensions (the workgroup count is the work-item product over the workgroup product, rounded
up: exact when each dimension is a multiple of its workgroup's, as a HIP launch's is). Where two
kernels on one queue overlap, rocprofiler-sdk's writer moves both ends to the middle of the
overlap (a firmware-timestamp workaround in generatePerfetto.cpp), so such rows differ from
the JSON's by that much.

Anything malformed — not a Perfetto trace, a truncated or corrupt protobuf, a slice without
its times, a value of the wrong type, a time beyond ±2**62 ns — is a TraceImportError (one
line); a row that ends before it starts is dropped and counted, as in the JSON importer.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.trace.errors import TraceImportError
from engine.trace.limits import MAX_TIME_NS, ReadLimits, check_times
from engine.trace.rocprof.rocprof_json import _file_bytes
from engine.trace.rocprof.rows import DIRECTION, dense_streams, host_rows
from engine.trace.segments import Kind, NameTable, Provenance, Segments
from engine.trace.taxonomy import classify_table
from engine.trace.trace import Trace, api_kind_from_name

_GZIP = b"\x1f\x8b"
_I64 = 1 << 63
#: TracePacket.sequence_flags: SEQ_INCREMENTAL_STATE_CLEARED
_CLEARED = 1
#: TrackEvent.Type
_SLICE_BEGIN = 1
_STREAM = re.compile(r"\bSTREAM \[(\d+)\]")
_TRAILING_INT = re.compile(r"(\d+)\s*$")
#: bytes of text (printable ASCII and whitespace): a file whose first bytes are all text is
#: JSON, CSV or a script, never a protobuf (whose field tags and lengths are control bytes)
_TEXT_BYTES = bytes(range(0x20, 0x7F)) + b"\t\n\r"
#: the categories that become rows
_KERNEL, _COPY, _HIP, _RCCL = "kernel_dispatch", "memory_copy", "hip_api", "rccl_api"


def _pb2() -> Any:
    """Perfetto's generated message classes (the ``perfetto`` package): imported when a file is
    read, so that listing the formats loads no protobuf."""
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError as e:  # not installed, or a protobuf runtime older than its gencode
        raise ImportError(
            "reading a Perfetto trace needs the perfetto package and protobuf>=6.31: "
            f"pip install 'gitm-tui[pftrace]' ({e})"
        ) from e
    return perfetto_trace_pb2


def looks_like_pftrace(head: bytes) -> bool:
    """Whether a file's first bytes (decompressed, for a gzip file) are a Perfetto trace: the
    ``Trace`` message's field 1 (``packet``, length-delimited: byte 0x0A), a length, and — where
    the first packet lies within the bytes seen — a TracePacket the protobuf library decodes
    with known fields only. Text (JSON, CSV) is never claimed, though a newline is 0x0A too."""
    if len(head) < 2 or head[0] != 0x0A or not head[:256].translate(None, _TEXT_BYTES):
        return False
    length, pos, shift = 0, 1, 0
    while pos < len(head) and pos < 11:
        b = head[pos]
        length |= (b & 0x7F) << shift
        pos += 1
        if not b & 0x80:
            break
        shift += 7
    else:
        return False
    if length == 0:
        return True  # an empty first packet is valid protobuf
    if pos + length > len(head):
        return True  # a first packet larger than the peek: the reader checks it
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet

        packet = _pb2().TracePacket.FromString(head[pos : pos + length])
        return bool(packet.ListFields()) and not len(UnknownFieldSet(packet))
    except Exception:  # (DecodeError, a missing library: not claimed by content)
        return False


class _Bad(Exception):
    """A malformed slice: which and what is wrong."""


@dataclass
class _Seq:
    """One packet sequence's interned strings (Perfetto's incremental state)."""

    names: dict[int, str] = field(default_factory=dict)
    categories: dict[int, str] = field(default_factory=dict)
    annotation_names: dict[int, str] = field(default_factory=dict)
    strings: dict[int, str] = field(default_factory=dict)
    default_track: int | None = None


@dataclass
class _Read:
    names: NameTable = field(default_factory=NameTable)
    rows: dict[str, list[Any]] = field(default_factory=dict)
    host: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    rccl: Counter[str] = field(default_factory=Counter)
    slices: Counter[str] = field(default_factory=Counter)
    #: the GPU agents kernel and copy rows name (numbered 0.. in increasing id, as the JSON
    #: importer numbers the agents' table's GPUs by node id)
    agents: dict[int, None] = field(default_factory=dict)
    pids: dict[int, None] = field(default_factory=dict)
    unnamed: int = 0

    def add(self, **values: Any) -> None:
        for k, v in values.items():
            self.rows.setdefault(k, []).append(v)


def _interned(entries: Any, into: dict[int, str]) -> None:
    for e in entries:
        into[int(e.iid)] = str(e.name)


def _interned_bytes(entries: Any, into: dict[int, str]) -> None:
    for e in entries:  # InternedString: bytes
        into[int(e.iid)] = bytes(e.str).decode("utf-8", "replace")


def _annotations(event: Any, seq: _Seq, where: str) -> dict[str, Any]:
    """A slice's debug annotations by name (nested and JSON values are not read)."""
    out: dict[str, Any] = {}
    for a in event.debug_annotations:
        which = a.WhichOneof("name_field")
        if which == "name_iid":
            name = seq.annotation_names.get(int(a.name_iid))
            if name is None:
                raise _Bad(f"{where}: annotation name iid {a.name_iid} was never interned")
        elif which == "name":
            name = a.name
        else:
            continue
        kind = a.WhichOneof("value")
        if kind in ("uint_value", "int_value", "bool_value", "double_value", "string_value"):
            out[name] = getattr(a, kind)
        elif kind == "string_value_iid":
            out[name] = seq.strings.get(int(a.string_value_iid), "")
    return out


def _int(args: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    v = args.get(key)
    if v is None:
        if default is None:
            raise _Bad(f"{where}: no {key}")
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _Bad(f"{where}: {key} is not a number")
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise _Bad(f"{where}: {key} is {v!r}, not an integer")
        v = int(v)
    if not -_I64 <= v < _I64:
        raise _Bad(f"{where}: {key} is beyond 64 bits")
    return v


def _times(args: dict[str, Any], where: str) -> tuple[int, int]:
    s, e = _int(args, "begin_ns", where), _int(args, "end_ns", where)
    if abs(s) >= MAX_TIME_NS or abs(e) >= MAX_TIME_NS:
        raise _Bad(f"{where}: a timestamp beyond 2**62 ns")
    return s, e


def _agent(v: Any, where: str) -> int:
    """An agent as a kernel or copy names it: a node id (an integer), or an index label such as
    ``GPU-0`` / ``agent-2`` (its trailing number)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and (m := _TRAILING_INT.search(v)):
        return int(m.group(1))
    raise _Bad(f"{where}: agent {str(v)[:40]!r} names no agent")


def _slice(event: Any, seq: _Seq, where: str) -> tuple[str, str]:
    """A slice's (category, name), resolving interned ones."""
    cats = [seq.categories.get(int(i), "") for i in event.category_iids] + list(event.categories)
    which = event.WhichOneof("name_field")
    if which == "name_iid":
        name = seq.names.get(int(event.name_iid))
        if name is None:
            raise _Bad(f"{where}: event name iid {event.name_iid} was never interned")
    else:
        name = event.name
    return (cats[0] if cats else ""), name


def _row(cat: str, name: str, args: dict[str, Any], track: str, where: str, r: _Read) -> None:
    if cat == _RCCL:
        r.rccl[name] += 1
        return
    if cat not in (_KERNEL, _COPY, _HIP):
        return
    s, e = _times(args, where)
    corr = _int(args, "corr_id", where, default=-1)
    if cat == _HIP:
        if e >= s:  # (no usable time: no edge for the replay, as the JSON importer)
            tid = _int(args, "tid", where, default=0)
            r.host.append((corr, s, e, tid, int(api_kind_from_name(name))))
        return
    stream_m = _STREAM.search(track)
    if cat == _KERNEL:
        agent = _agent(args.get("agent"), where)
        r.agents.setdefault(agent, None)
        stream = int(stream_m.group(1)) if stream_m else _int(args, "queue", where)
        wi = max(_int(args, "workgroup_size", where, default=1), 1)
        gi = max(_int(args, "grid_size", where, default=0), 0)
        grid = min(-(-gi // wi), 2**31 - 1)
        if not name:
            r.unnamed += 1
            name = "<unnamed kernel>"
        r.add(
            start_ns=s, end_ns=e, stream=stream, agent=agent, kind=Kind.KERNEL,
            name=r.names.intern(name), correlation=corr, grid=grid, block=min(wi, 2**31 - 1),
            regs=0, smem=_int(args, "group_segment_size", where, default=0),
            dram_bytes=math.nan, issue_active=math.nan, stall_frac=math.nan,
            provenance=int(Provenance.GEOMETRY) if grid else 0,
        )  # fmt: skip
        return
    direction = DIRECTION.get(name, "Unknown")
    src = _agent(args.get("src_agent"), where) if "src_agent" in args else -1
    dst = _agent(args.get("dst_agent"), where) if "dst_agent" in args else -1
    agent = src if direction == "DtoH" else dst
    if direction in ("HtoD", "DtoH", "DtoD"):  # (the agent a copy is on is a GPU)
        r.agents.setdefault(agent, None)
    size = args.get("copy_bytes")
    r.add(
        start_ns=s, end_ns=e, stream=int(stream_m.group(1)) if stream_m else 0, agent=agent,
        kind=Kind.MEMCPY, name=r.names.intern(f"Memcpy {direction}"), correlation=corr,
        grid=0, block=0, regs=0, smem=0,
        dram_bytes=float(_int(args, "copy_bytes", where)) if size is not None else math.nan,
        issue_active=math.nan, stall_frac=math.nan,
        provenance=int(Provenance.DRAM_BYTES) if size is not None else 0,
    )  # fmt: skip


def _walk(packets: Any, r: _Read) -> None:
    """Every packet in order: interned strings and tracks first, then each slice's row."""
    seqs: dict[int, _Seq] = {}
    tracks: dict[int, str] = {}
    for i, p in enumerate(packets):
        sid = int(p.trusted_packet_sequence_id)
        if p.sequence_flags & _CLEARED or p.incremental_state_cleared:
            seqs[sid] = _Seq()
        seq = seqs.setdefault(sid, _Seq())
        if p.HasField("interned_data"):
            d = p.interned_data
            _interned(d.event_names, seq.names)
            _interned(d.event_categories, seq.categories)
            _interned(d.debug_annotation_names, seq.annotation_names)
            _interned_bytes(d.debug_annotation_string_values, seq.strings)
        if p.HasField("trace_packet_defaults"):
            ted = p.trace_packet_defaults.track_event_defaults
            if ted.HasField("track_uuid"):
                seq.default_track = int(ted.track_uuid)
        if p.HasField("track_descriptor"):
            t = p.track_descriptor
            which = t.WhichOneof("static_or_dynamic_name")
            tracks[int(t.uuid)] = str(getattr(t, which)) if which else ""
            for holder in ("process", "thread"):
                if t.HasField(holder) and getattr(t, holder).HasField("pid"):
                    r.pids.setdefault(int(getattr(t, holder).pid), None)
        if not p.HasField("track_event"):
            continue
        ev = p.track_event
        if ev.type != _SLICE_BEGIN:
            continue
        where = f"packet {i:,}"
        cat, name = _slice(ev, seq, where)
        r.slices[cat] += 1
        uuid = int(ev.track_uuid) if ev.HasField("track_uuid") else seq.default_track
        track = tracks.get(uuid, "") if uuid is not None else ""
        _row(cat, name, _annotations(ev, seq, where), track, where, r)


def _packets(path: Path) -> Any:
    """The file's TracePackets, parsed by the protobuf library within the size limits."""
    limits = ReadLimits.from_env(path)
    data = _file_bytes(path, limits)
    try:
        pb2 = _pb2()
    except ImportError as e:
        raise TraceImportError(path, str(e)) from None
    if not looks_like_pftrace(data[:4096]):
        raise TraceImportError(path, "not a Perfetto trace (its first bytes are not a TracePacket)")
    try:
        trace = pb2.Trace.FromString(data)
    except Exception as e:  # protobuf's DecodeError: truncated, corrupt, nested too deep…
        what = " ".join(str(e).split())[:120] or type(e).__name__
        raise TraceImportError(
            path, f"not a readable Perfetto trace: the protobuf does not decode ({what})"
        ) from None
    del data
    return trace.packet


def read_rocprof_pftrace(path: str | Path) -> Trace:
    """Import a rocprofv3 Perfetto trace (``.pftrace``, plain or gzipped); TraceImportError (one
    line) for anything that cannot be read."""
    path = Path(path)
    packets = _packets(path)
    r = _Read()
    try:
        _walk(packets, r)
    except _Bad as e:
        raise TraceImportError(path, f"malformed rocprofv3 Perfetto trace: {e}") from None
    if not r.rows:
        seen = ", ".join(f"{k or 'uncategorised'} {n:,}" for k, n in r.slices.most_common(4))
        raise TraceImportError(
            path,
            "no kernel dispatches or memory copies in this Perfetto trace (not a rocprofv3 "
            f"output, or one recorded without --kernel-trace; slices: {seen or 'none'})",
        )
    cols = {k: np.asarray(v) for k, v in r.rows.items()}
    n = len(cols["start_ns"])
    cols["flops"], cols["dtype"] = np.full(n, np.nan), np.zeros(n, np.uint8)
    agents = cols.pop("agent")
    gpus = {a: i for i, a in enumerate(sorted(r.agents))}
    cols["device"] = np.array([gpus.get(a, 0) for a in agents.tolist()], np.int16)
    cols["stream"] = dense_streams(cols["stream"].astype(np.int64))
    cols["klass"] = classify_table(r.names)[cols["name"]]
    backwards = cols["end_ns"] < cols["start_ns"]
    malformed = int(backwards.sum())
    if malformed:
        cols = {k: v[~backwards] for k, v in cols.items()}
    seg = Segments.from_columns(**cols)
    seg = seg.take(np.argsort(seg.start_ns, kind="stable"))
    host = host_rows(r.host)
    check_times(path, [seg.start_ns, host.api_start_ns], [seg.end_ns, host.api_end_ns])
    props: dict[str, Any] = {
        "format": "rocprofv3-pftrace",
        # the GPUs as the rows name them (the Perfetto file has no agents' table: name, gfx
        # target and CU count unknown); ``id`` the device number rows carry
        "devices": [
            {
                "logical_id": a,
                "type": "GPU",
                "name": "",
                "gfx": "",
                "numSms": None,
                "id": i,
                "agent_id": a,
            }
            for a, i in gpus.items()
        ],
        "rank": None,
        "malformed_events": malformed,
        "processes": 1,
        "pids": list(r.pids),
        "unnamed_kernels": r.unnamed,
        "counters": {},
        "counters_joined": 0,
        "counters_unmatched": 0,
        "rccl_calls": dict(r.rccl),
        "slices": dict(r.slices),
    }
    return Trace(segments=seg, names=r.names, host=host, device_properties=props, source=str(path))


__all__ = ["looks_like_pftrace", "read_rocprof_pftrace"]
