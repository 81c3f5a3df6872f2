"""Import PyTorch-profiler (Kineto) / Chrome-trace JSON, plain or gzip, NVIDIA or AMD, into a Trace.

One module (~900 lines) on purpose: every step here reads or fills the reader's one private
accumulator, ``_Columns`` — a block's rows (``_add``), its framework ops (``_framework``,
``_works``), the join into a Trace (``_build``); split, that accumulator would become an interface.
What stands alone is in modules of its own: the byte stream (chrome_stream), the scanner
(json_scan) and its Python twin (json_twin), shapes, derive, collectives.

Pipeline: stream-decompress in chunks (every member of a multi-member gzip file) → the numba
scanner (json_scan) follows the top-level object to its own ``traceEvents`` array, finds every
event and keeps the GPU and runtime categories, its state carried from chunk to chunk so each
byte is scanned once → a second numba pass parses each kept event strictly (it must be valid
JSON) and reads the fields we use straight into arrays, ``ts``/``dur`` exactly into int64 ns
(one missing, not a number, negative or beyond ±2**62 ns makes the event malformed: skipped
and counted in the analysis notes); only distinct kernel names
become Python strings. Memory stays in the tens of MB whatever the file size, and no
per-event Python runs. What one file may make the reader do — element size, decompressed size,
gzip ratio, nesting — is bounded by engine.trace.limits (GITM_MAX_* variables).

What becomes what:
* ``kernel`` → KERNEL rows (launch geometry, registers, shared memory; Kineto's
  "est. achieved occupancy %" is kept as an *estimate*: the OCCUPANCY provenance bit stays 0);
* ``gpu_memcpy`` / ``gpu_memset`` → MEMCPY / MEMSET rows with their bytes;
* ``cuda_sync`` on a device timeline → SYNC rows (stream/event synchronisation);
* ``cuda_profiler_range`` (CUPTI profiler mode) → KERNEL rows whose ``flops`` are measured
  from the SASS counters: add + mul + 2 × fma, over half, single and double precision;
* ``cuda_runtime`` / ``cuda_driver`` with a correlation id → HostEvents (launch ↔ kernel);
* MTIA (Meta's accelerator): ``mtia_ccp_events`` rows on a device stream (``args.stream``) →
  device rows of that stream, as Holistic Trace Analysis takes them (it counts the whole
  category as GPU work): ``dma*`` → MEMCPY (``args.size`` bytes), ``event_*`` (event record /
  wait: the stream waits for another) → SYNC, the rest (``pe_exe``, ``merge``, ``remote`` …) →
  KERNEL; a row naming no stream is not device work to HTA either, and is counted, not kept.
  ``mtia_runtime`` calls with a correlation id → HostEvents of kind OTHER: they link each
  device row to the call that queued it (the idle split's host wait), and nothing more — their
  semantics are not CUDA's, so no launch / sync / copy kind is read into them.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from engine.trace.errors import TraceImportError
from engine.trace.idle_calls import merge_idle_calls
from engine.trace.import_memory import chunk_buffers_reused, gc_paused, give_back
from engine.trace.inflate import chunks
from engine.trace.kineto import json_scan as js
from engine.trace.kineto import json_twin
from engine.trace.kineto.chrome_stream import READ_CHUNK, EventStream, metadata, prefetched
from engine.trace.kineto.collectives import collective_meta
from engine.trace.kineto.derive import derive_work
from engine.trace.kineto.op_shapes import from_derived_ops
from engine.trace.kineto.shapes import OpWork, may_derive, op_work
from engine.trace.kineto.top_ops import join as join_top_ops
from engine.trace.kineto.top_ops import name_id as top_name_id
from engine.trace.kineto.top_ops import nested, tid_of_thread
from engine.trace.limits import ReadLimits, check_times
from engine.trace.segments import Kind, Klass, NameTable, Provenance, Segments
from engine.trace.taxonomy import classify, classify_table
from engine.trace.trace import ApiKind, HostEvents, Trace, api_kind_from_name

CHUNK = READ_CHUNK  # decompressed bytes per scan step (see chrome_stream.READ_CHUNK)


_TOP, _TOPLENS = js.key_table(js.TOP_KEYS)
_ARGK, _ARGLENS = js.key_table(js.ARG_KEYS)
_PREFIX = np.frombuffer(js.FLOP_PREFIX, np.uint8).copy()
_SUFFIX = np.frombuffer(js.FLOP_SUFFIX, np.uint8).copy()


class _Columns:
    """Per-chunk arrays of the kept events, concatenated at the end."""

    def __init__(self) -> None:
        self.dev: list[dict[str, np.ndarray]] = []
        self.host: list[dict[str, np.ndarray]] = []
        self.names = NameTable()
        self.name_of_hash: dict[int, int] = {}
        self.api_of_name: dict[int, int] = {}
        # launch calls whose ``grid`` Kineto writes in work-items, not workgroups (_WORKITEM_LAUNCH):
        # name id → whether it is one, and the correlation ids of such calls, block by block
        self.workitem_of_name: dict[int, bool] = {}
        self.workitem_corr: list[np.ndarray] = []
        self.malformed = 0  # events without a usable time, skipped
        self.malformed_gpu = 0  # of them, GPU activity (kernels, copies, memsets, ranges)
        self.out_of_range = 0  # of them, with a ts or dur beyond ±MAX_TIME_NS
        self.ranges = 0  # cuda_profiler_range rows (CUPTI profiler mode)
        # cuda_sync rows that name the event they wait for (Kineto ≥ 2023: "Stream Wait Event",
        # "Event Sync"): they give the record/wait runtime calls their stream and event id
        self.waits: list[dict[str, np.ndarray]] = []
        # framework ops (thread, interval, index into ``work`` or -1) for the DERIVED tier
        self.ops: list[dict[str, np.ndarray]] = []
        self.framework_ops = 0  # cpu_op rows seen (only those of known work are kept)
        self.work: list[OpWork] = []
        self.op_names: dict[int, str] = {}  # name hash → op name
        self.op_work_memo: dict[tuple[str, ...], OpWork | None] = {}  # (name, shape texts)
        self.work_index: dict[int, int] = {}  # id of an OpWork (held by the memo) → its index
        # (name hash, bytes of each shape value) of an op group js.shape_keys vouched for → its
        # index into ``work`` (-1: unknown): a group seen in an earlier block is not decoded
        # again (15.5k _op_work calls → a few hundred on a 2 M-event trace)
        self.shape_work: dict[tuple[int, bytes | None, bytes | None, bytes | None], int] = {}
        self.steps: list[tuple[int, int, int]] = []  # ProfilerStep#N (start, end ns, N or -1)
        # each block's outer CPU ops (engine.trace.kineto.top_ops): thread id, interval, name
        # (an id into ``top_names``, kept apart from the kernels' table until the join)
        self.top: list[dict[str, np.ndarray]] = []
        self.top_names = NameTable()
        self.top_of_hash: dict[int, int] = {}  # name hash → id in top_names (-1: a step)
        self.mtia = 0  # mtia_ccp_events rows seen
        self.mtia_streams: set[int] = set()  # the device streams they name
        self.mtia_unstreamed = 0  # of them, rows naming no stream (not kept)
        self.mtia_kind_of_name: dict[int, int] = {}  # name id → the row kind (_mtia_kind)
        # collective kernels whose args name their communicator: (start ns, stream, facts)
        self.collectives: list[tuple[int, int, dict[str, Any]]] = []
        self.is_comm: dict[int, bool] = {}  # name id → a collective kernel's name


_I32 = (-(2**31), 2**31 - 1)
_I16 = (-(2**15), 2**15 - 1)
_KIND = np.full(len(js.CATEGORIES), 255, np.uint8)
_KIND[js.CAT_KERNEL] = Kind.KERNEL
_KIND[js.CAT_MEMCPY] = Kind.MEMCPY
_KIND[js.CAT_MEMSET] = Kind.MEMSET
_KIND[js.CAT_SYNC] = Kind.SYNC
_KIND[js.CAT_PROFILER] = Kind.RANGE
#: GPU activity: the categories and the row kinds they become
_GPU_CATS = np.array([js.CAT_KERNEL, js.CAT_MEMCPY, js.CAT_MEMSET, js.CAT_PROFILER, js.CAT_MTIA])
#: host rows: runtime / driver calls (and MTIA's runtime calls) that carry a correlation id
_HOST_CATS = (js.CAT_RUNTIME, js.CAT_DRIVER, js.CAT_MTIA_RUNTIME)
_TIMED_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM, Kind.RANGE)


def _decode_name(buf: np.ndarray, s: int, e: int, escaped: bool) -> str:
    """The JSON string buf[s:e] (its content, quotes excluded) as text; invalid UTF-8 or
    escapes are replaced, not fatal (names are labels, the event itself was validated)."""
    raw = buf[s:e].tobytes() if s >= 0 else b""
    try:
        return json.loads(b'"' + raw + b'"') if escaped else raw.decode("utf-8")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw.decode("utf-8", "replace")


def _name_ids(
    cols: _Columns, buf: np.ndarray, ns: np.ndarray, ne: np.ndarray, esc: np.ndarray, h: np.ndarray
) -> np.ndarray:
    """Intern the distinct names (by a 64-bit hash of their bytes; collisions ignored), new ones
    in the order they first appear: ids do not depend on how the file was cut into blocks."""
    uniq, first, inv = np.unique(h, return_index=True, return_inverse=True)
    ids = np.empty(len(uniq), np.int32)
    for u in np.argsort(first, kind="stable").tolist():
        hv, i = int(uniq[u]), int(first[u])
        nid = cols.name_of_hash.get(hv)
        if nid is None:
            nid = cols.names.intern(_decode_name(buf, int(ns[i]), int(ne[i]), bool(esc[i])))
            cols.name_of_hash[hv] = nid
        ids[u] = nid
    return ids[inv.reshape(-1)]


def _mtia_kind(cols: _Columns, name_ids: np.ndarray) -> np.ndarray:
    """Row kind of each MTIA device row from its name (decided once per distinct name): ``dma*``
    (HTA's "MTIA Memory" pattern) a copy, ``event_*`` (record / wait on a stream) a
    synchronisation, anything else work the device ran."""
    for nid in np.unique(name_ids).tolist():
        if nid not in cols.mtia_kind_of_name:
            n = cols.names[nid].lower() if nid >= 0 else ""
            cols.mtia_kind_of_name[nid] = (
                Kind.MEMCPY
                if n.startswith("dma")
                else Kind.SYNC
                if n.startswith("event")
                else Kind.KERNEL
            )
    return np.array([cols.mtia_kind_of_name[n] for n in name_ids.tolist()], np.uint8)


#: launch calls that take the grid as a global work size (work-items per dimension, HIP's
#: ``hipExtModuleLaunchKernel(f, globalWorkSizeX, …, localWorkSizeX, …)`` and the older
#: ``hipHccModuleLaunchKernel``), which Kineto (roctracer) writes as the kernel's ``grid``: a
#: Tensile GEMM launched by one reads grid 71680 with block 256 for 280 workgroups.
#: hipLaunchKernel / hipModuleLaunchKernel take the grid in workgroups, as CUDA does.
_WORKITEM_LAUNCH = re.compile(r"^hip(Ext|Hcc)ModuleLaunchKernel(_spt)?$")


def _workitem_of(cols: _Columns, name_ids: np.ndarray) -> np.ndarray:
    """Per host row, whether its call gives the grid in work-items (classified once per name)."""
    out = np.zeros(len(name_ids), bool)
    for nid in np.unique(name_ids).tolist():
        if nid not in cols.workitem_of_name:
            cols.workitem_of_name[nid] = nid >= 0 and bool(_WORKITEM_LAUNCH.match(cols.names[nid]))
        if cols.workitem_of_name[nid]:
            out |= name_ids == nid
    return out


def _workgroups(
    grid: np.ndarray, block: np.ndarray, corr: np.ndarray, workitem_corr: list[np.ndarray]
) -> np.ndarray:
    """The grid in workgroups: the rows launched by a work-item launch call (their correlation
    is one of ``workitem_corr``) get ceil(grid / block); every other row keeps its grid. The
    reader keeps each launch's grid and block as the product of their dimensions, so the
    division is of the products: exact where each dimension's work-items are a multiple of its
    workgroup size (every such launch in the repository's ROCm traces), else the count less at
    most one partial workgroup per dimension."""
    if not workitem_corr or not len(grid):
        return grid
    ids = np.unique(np.concatenate(workitem_corr))
    hit = np.isin(corr, ids[ids >= 0]) & (grid > 0) & (block > 0)
    if not hit.any():
        return grid
    out = grid.copy()
    out[hit] = -(-grid[hit] // block[hit])
    return out


def _api_of(cols: _Columns, name_ids: np.ndarray) -> np.ndarray:
    """ApiKind per host row from its runtime-call name (classified once per distinct name)."""
    for nid in np.unique(name_ids).tolist():
        if nid not in cols.api_of_name:
            cols.api_of_name[nid] = api_kind_from_name(cols.names[nid])
    lut = np.zeros(max(cols.api_of_name) + 1, np.uint8)
    for nid, k in cols.api_of_name.items():
        lut[nid] = k
    return lut[name_ids]


class _InvalidEvent(Exception):
    """A kept event is not valid JSON: ``at`` = its offset in the block, ``why`` = the reason."""

    def __init__(self, at: int, why: str) -> None:
        super().__init__(why)
        self.at = at
        self.why = why


def _extract(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    codes: np.ndarray,
    threads: ThreadPoolExecutor,
) -> list[Future[tuple[Any, ...]]]:
    """js.extract_fields over the rows, started on ``threads`` (numba releases the GIL): in two
    halves where there are enough rows, so both cores parse one block. ``_fields`` joins them."""

    def run(lo: int, hi: int) -> tuple[Any, ...]:
        return js.extract_fields(
            buf, starts[lo:hi], ends[lo:hi], codes[lo:hi], _TOP, _TOPLENS, _ARGK, _ARGLENS,
            _PREFIX, _SUFFIX,
        )  # fmt: skip

    m = len(starts)
    if m < 2048:
        return [threads.submit(run, 0, m)]
    return [threads.submit(run, 0, m // 2), threads.submit(run, m // 2, m)]


def _fields(parts: list[Future[tuple[Any, ...]]]) -> tuple[Any, ...]:
    """The columns of ``_extract``'s parts, joined in file order; raise _InvalidEvent for the
    first bad row (the first part's before the second's)."""
    done = [part.result() for part in parts]
    for part in done:
        bad_row, bad_at = part[-2], part[-1]
        if bad_row >= 0:
            raise _InvalidEvent(bad_at >> 4, js.BAD_REASONS[bad_at & 15])
    if len(done) == 1:
        return done[0][:-2]
    return tuple(np.concatenate(cols) for cols in zip(*(p[:-2] for p in done), strict=True))


def _add(
    cols: _Columns,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    codes: np.ndarray,
    fields: tuple[Any, ...],
    grouped: bool,
) -> None:
    """Append the kept events, whose fields extract_fields read (``_fields``; or the
    interpreted twin, engine.trace.kineto.json_twin), as device rows / host events. ``grouped``: the
    compiled reader's (see ``_works``)."""
    # names of device rows are kernels; of host rows, the runtime calls that give API kinds
    ints, ts, dur, occ, flops, ns, ne, esc, h = fields
    miss = js.MISSING
    # no usable time: ts or dur missing, not a number (null, a string, …) or beyond
    # ±MAX_TIME_NS, or a negative dur. Every kept category is a complete event ("ph": "X",
    # a span): one without a usable dur has no span, and read as an instant it was a kernel
    # of 0 ns that nothing noted. (NO_TIME and OUT_OF_RANGE are negative: dur < 0 holds both)
    bad = (ts == js.NO_TIME) | (ts == js.OUT_OF_RANGE) | (dur < 0)
    if bad.any():
        cols.malformed += int(bad.sum())
        cols.malformed_gpu += int(np.isin(codes[bad], _GPU_CATS).sum())
        cols.out_of_range += int(((ts == js.OUT_OF_RANGE) | (dur == js.OUT_OF_RANGE)).sum())
    dur = np.where(bad, 0, dur)  # (the skipped rows' times are never read)
    corr = ints[:, js.F_CORR]
    host = np.isin(codes, _HOST_CATS) & ~bad & (corr != miss) & (corr >= 0)
    # (fields given: the Python twin read them, no kernel is compiled yet)
    _framework(cols, buf, starts, ends, codes, ints, ts, dur, ns, ne, esc, h, bad, grouped)
    # MTIA rows are device work only on a stream (HTA: stream -1 is not a GPU row)
    mtia = (codes == js.CAT_MTIA) & ~bad & (ints[:, js.F_STREAM] != miss)
    dev = ((_KIND[codes] != 255) & ~bad) | mtia
    # runtime calls' and device rows' names, interned together in file order (see _name_ids)
    named = np.flatnonzero(host | dev)
    name_id = np.full(len(codes), -1, np.int32)
    name_id[named] = _name_ids(cols, buf, ns[named], ne[named], esc[named], h[named])
    if host.any():
        st = ints[host, js.F_STREAM]
        api_names = name_id[host]
        wi = _workitem_of(cols, api_names)
        if wi.any():
            cols.workitem_corr.append(corr[host][wi])
        cols.host.append(
            {
                "tid": _narrow(ints[host, js.F_TID]),
                "correlation": _narrow(corr[host]),
                # (most runtime calls name no stream: a -1 of every row holds no memory)
                "stream": np.where(st == miss, -1, st).clip(*_I32).astype(np.int32)
                if (st != miss).any()
                else np.broadcast_to(np.int32(-1), st.shape),
                "api_start_ns": ts[host],
                "api_dur_ns": _narrow(dur[host]),
                # an MTIA runtime call: kept for its link only (see the module docstring)
                "api": np.where(
                    codes[host] == js.CAT_MTIA_RUNTIME,
                    np.uint8(ApiKind.OTHER),
                    _api_of(cols, api_names),
                ).astype(np.uint8),
            }
        )
    rec = ints[:, js.F_WAIT_RECORD]
    sync = (codes == js.CAT_SYNC) & (rec != miss) & (rec >= 0) & (corr != miss)
    if sync.any():
        ev = ints[sync, js.F_WAIT_EVENT]
        cols.waits.append(
            {
                "correlation": corr[sync],
                "stream": np.where(ints[sync, js.F_STREAM] == miss, -1, ints[sync, js.F_STREAM]),
                "wait_stream": np.where(
                    ints[sync, js.F_WAIT_STREAM] == miss, -1, ints[sync, js.F_WAIT_STREAM]
                ),
                "record_correlation": rec[sync],
                "event": np.where(ev == miss, -1, ev),
            }
        )
    if not dev.any():
        return
    c = codes[dev]
    iv = ints[dev]
    names = name_id[dev]
    kind = _KIND[c]
    on_mtia = c == js.CAT_MTIA
    if on_mtia.any():
        kind[on_mtia] = _mtia_kind(cols, names[on_mtia])
    stream = np.where(iv[:, js.F_STREAM] != miss, iv[:, js.F_STREAM], iv[:, js.F_TID])
    stream = np.where(stream == miss, 0, stream)
    device = np.where(iv[:, js.F_DEVICE] != miss, iv[:, js.F_DEVICE], iv[:, js.F_PID])
    grid = np.where(iv[:, js.F_GRID] == miss, 0, iv[:, js.F_GRID])
    block = np.where(iv[:, js.F_BLOCK] == miss, 0, iv[:, js.F_BLOCK])
    nbytes = np.where(on_mtia, iv[:, js.F_SIZE], iv[:, js.F_BYTES])
    copy = (
        (np.isin(c, (js.CAT_MEMCPY, js.CAT_MEMSET)) | (on_mtia & (kind == Kind.MEMCPY)))
        & (nbytes != miss)
        & (nbytes >= 0)
    )
    f = np.where(c == js.CAT_PROFILER, flops[dev], np.nan)
    prov = (
        np.where(grid > 0, int(Provenance.GEOMETRY), 0)
        | np.where(copy, int(Provenance.DRAM_BYTES), 0)
        | np.where(~np.isnan(f), int(Provenance.FLOPS), 0)
    ).astype(np.uint8)
    cols.ranges += int((c == js.CAT_PROFILER).sum())
    # the stream as the segment column will hold it (int32)
    s32 = stream.clip(-(2**31), 2**31 - 1)
    _collectives(cols, buf, starts, ends, np.flatnonzero(dev), c, names, ts[dev], s32)
    o = occ[dev]
    cols.dev.append(
        {
            "start_ns": ts[dev],
            "dur_ns": _narrow(dur[dev]),
            # each block in the columns' own types: a block held in int64 and float64 took
            # twice the memory until the join
            "stream": stream.clip(*_I32).astype(np.int32),
            "device": np.where(device == miss, 0, device).clip(*_I16).astype(np.int16),
            "kind": kind,
            "name": names.astype(np.int32, copy=False),
            "correlation": _narrow(np.where(iv[:, js.F_CORR] == miss, -1, iv[:, js.F_CORR])),
            "grid": grid.clip(0, _I32[1]).astype(np.int32),
            "block": block.clip(0, _I32[1]).astype(np.int32),
            "regs": np.where(iv[:, js.F_REGS] == miss, 0, iv[:, js.F_REGS])
            .clip(0, _I32[1])
            .astype(np.int32),
            "smem": np.where(iv[:, js.F_SMEM] == miss, 0, iv[:, js.F_SMEM])
            .clip(0, _I32[1])
            .astype(np.int32),
            "occupancy": np.where(np.isnan(o), np.nan, np.clip(o / 100.0, 0.0, 1.0)).astype(
                np.float32
            ),
            "flops": f,
            "dram_bytes": np.where(copy, nbytes, np.nan).astype(np.float64),
            "provenance": prov,
        }
    )


def _collectives(
    cols: _Columns,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    rows: np.ndarray,
    codes: np.ndarray,
    names: np.ndarray,
    start_ns: np.ndarray,
    stream: np.ndarray,
) -> None:
    """Keep what collective kernels' args say of their communicator
    (engine.trace.kineto.collectives): only those kernels are parsed again, a few per step."""
    kern = codes == js.CAT_KERNEL
    if not kern.any():
        return
    uniq, inv = np.unique(names[kern], return_inverse=True)
    for nid in uniq.tolist():
        if nid not in cols.is_comm:
            cols.is_comm[nid] = classify(cols.names[nid]) == Klass.COMM
    comm = np.zeros(len(names), bool)  # one lookup per distinct name, not per row
    comm[kern] = np.array([cols.is_comm[n] for n in uniq.tolist()], bool)[inv.reshape(-1)]
    for i in np.flatnonzero(comm).tolist():
        r = int(rows[i])
        try:  # the event is valid JSON: extract_fields checked it
            ev = json.loads(buf[starts[r] : ends[r]].tobytes())
        except (ValueError, RecursionError):
            continue
        meta = collective_meta(ev.get("args") if isinstance(ev, dict) else None)
        if meta is not None:
            cols.collectives.append((int(start_ns[i]), int(stream[i]), meta))


def _op_name(cols: _Columns, buf: np.ndarray, s: int, e: int, esc: bool, hv: int) -> str:
    """A framework op's name, decoded once per distinct name (kept apart from the kernel names)."""
    name = cols.op_names.get(hv)
    if name is None:
        name = cols.op_names[hv] = _decode_name(buf, s, e, esc)
    return name


_SHAPE_KEYS = tuple(k.decode() for k in js.SHAPE_KEYS)
_SHAPES, _SHAPELENS = js.key_table(js.SHAPE_KEYS)
_DECODER = json.JSONDecoder()


def _op_work(cols: _Columns, name: str, raw: bytes) -> OpWork | None:
    """The work of one framework op from its recorded shapes. A training loop repeats the same
    ops with the same shapes every step: only the three values op_work reads are decoded (each
    from its key's last occurrence, as json.loads keeps the last), and op_work runs once per
    distinct (name, values) — 3.5 s → a fraction on a 2 M-event trace."""
    try:  # the event is valid JSON: extract_fields checked it
        text = raw.decode("utf-8")
        key: list[str] = [name]
        values: list[Any] = []
        for k in _SHAPE_KEYS:
            at = text.rfind(k)
            if at < 0:
                key.append("")
                values.append(None)
                continue
            colon = text.index(":", at + len(k))
            start = colon + 1
            while text[start] in " \t\r\n":
                start += 1
            value, end = _DECODER.raw_decode(text, start)
            key.append(text[start:end])
            values.append(value)
    except (ValueError, IndexError, RecursionError):
        return None
    memo = (*key,)
    if memo in cols.op_work_memo:
        return cols.op_work_memo[memo]
    dims, types, concrete = values
    w = None
    if isinstance(dims or [], list) and isinstance(types or [], list):
        try:
            w = op_work(
                name, dims or [], types or [], concrete if isinstance(concrete, list) else None
            )
        except ArithmeticError:  # shapes no tensor has (op_work refuses those it knows of)
            w = None
    cols.op_work_memo[memo] = w
    return w


#: op groups remembered across blocks (``_Columns.shape_work``): a training loop has hundreds
#: to a few thousand; a trace whose every op has shapes of its own fills the table and reads
#: the rest block by block, as before. Each entry holds its values' bytes, as ``op_work_memo``
#: (not capped) holds their text: at worst this doubles what the reader keeps for shapes
_SHAPE_GROUPS_KEPT = 1 << 16


def _works(
    cols: _Columns,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    rows: np.ndarray,
    h: np.ndarray,
    grouped: bool,
) -> np.ndarray:
    """Each op's index into ``cols.work`` (-1: work unknown), for the cpu_op events ``rows``.

    ``grouped`` (the compiled reader): ops whose name and shape values are byte for byte the
    same share one ``_op_work`` call — js.shape_keys finds each op's values and hashes them,
    js.same_shapes checks every op against its group's first, a group known from an earlier
    block by the same bytes (``cols.shape_work``) is not read again, and ops it cannot vouch
    for go to ``_op_work`` one by one. A training loop repeats the same ops every step: on a
    2 M-event trace, 153k ops read one by one took ~0.8 s of the 2.3 s import. Otherwise (the
    Python twin's first run: no kernel compiled) every op is read by ``_op_work``."""
    m = len(rows)
    leader = np.arange(m)  # the op whose _op_work each op takes
    if grouped and m:
        spans, hashes, sure = js.shape_keys(buf, starts, ends, rows, h, _SHAPES, _SHAPELENS)
        known = np.flatnonzero(sure)
        _, first, group = np.unique(hashes[known], return_index=True, return_inverse=True)
        rep = leader.copy()
        rep[known] = known[first][group.reshape(-1)]
        same = js.same_shapes(buf, spans, h[rows], rep)
        leader = np.where(sure & same, rep, leader)
    leaders, of = np.unique(leader, return_inverse=True)
    index = np.full(len(leaders), -1, np.int64)
    vouched: list[bool] = []
    if grouped and m:  # a group's work is known from earlier blocks by its values' bytes
        vouched, where, mv = sure[leaders].tolist(), spans[leaders].tolist(), buf.data
    for j, p in enumerate(leaders.tolist()):
        r = int(rows[p])
        key = None
        if vouched and vouched[j]:
            a0, b0, a1, b1, a2, b2 = where[j]
            key = (int(h[r]), mv[a0:b0].tobytes() if a0 >= 0 else None,
                   mv[a1:b1].tobytes() if a1 >= 0 else None,
                   mv[a2:b2].tobytes() if a2 >= 0 else None)  # fmt: skip
            k = cols.shape_work.get(key)
            if k is not None:
                index[j] = k
                continue
        w = _op_work(cols, cols.op_names[int(h[r])], buf[starts[r] : ends[r]].tobytes())
        k = -1
        if w is not None:
            k = cols.work_index.get(id(w), -1)
            if k < 0:  # one entry per distinct work (the memo hands out one object each)
                k = cols.work_index[id(w)] = len(cols.work)
                cols.work.append(w)
        index[j] = k
        if key is not None and len(cols.shape_work) < _SHAPE_GROUPS_KEPT:
            cols.shape_work[key] = k
    return index[of.reshape(-1)]


def _framework(
    cols: _Columns,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    codes: np.ndarray,
    ints: np.ndarray,
    ts: np.ndarray,
    dur: np.ndarray,
    ns: np.ndarray,
    ne: np.ndarray,
    esc: np.ndarray,
    h: np.ndarray,
    bad: np.ndarray,
    grouped: bool = True,
) -> None:
    """Keep what the CPU-side rows tell: framework ops with their work where their recorded
    shapes give it (only ops of a known family are parsed again for their args; ``grouped``:
    see ``_works``), the outer ops of the block (``_top_ops``), the ProfilerStep ranges, and
    how much MTIA device activity the trace holds."""
    op = np.flatnonzero((codes == js.CAT_CPU_OP) & ~bad)
    top = np.full(len(codes), -1, np.int32)  # each CPU op's id in cols.top_names (-1: none)
    if op.size:
        idx = np.full(op.size, -1, np.int64)
        # which ops may be derived is decided once per distinct name, not once per op
        uniq, first, inv = np.unique(h[op], return_index=True, return_inverse=True)
        derivable = np.zeros(len(uniq), bool)
        top_u = np.empty(len(uniq), np.int32)
        for u, i in enumerate(first.tolist()):
            r = int(op[i])
            name = _op_name(cols, buf, int(ns[r]), int(ne[r]), bool(esc[r]), int(h[r]))
            derivable[u] = may_derive(name)
            top_u[u] = top_name_id(cols.top_of_hash, cols.top_names, int(h[r]), name)
        top[op] = top_u[inv.reshape(-1)]
        pos = np.flatnonzero(derivable[inv.reshape(-1)])  # of the ops whose shapes are read
        idx[pos] = _works(cols, buf, starts, ends, op[pos], h, grouped)
        # only ops of known work are kept: the innermost-known-op sweep needs no other
        # (engine.trace.kineto.shapes.innermost_known), and a 2 M-event trace has ~730k ops
        cols.framework_ops += int(op.size)
        keep = idx >= 0
        if keep.any():
            kept = op[keep]
            cols.ops.append(
                {"tid": _narrow(ints[kept, js.F_TID]), "start": ts[kept],
                 "dur": _narrow(dur[kept]), "work": _narrow(idx[keep])}
            )  # fmt: skip
    ann = np.flatnonzero((codes == js.CAT_ANNOTATION) & ~bad)
    if op.size:  # a ProfilerStep# range written as a CPU op (2021's "Operator", json_scan):
        ann = np.union1d(ann, op[top[op] < 0])  # the ops top_name_id gives no id (-1)
    for r in ann.tolist():
        name = _op_name(cols, buf, int(ns[r]), int(ne[r]), bool(esc[r]), int(h[r]))
        top[r] = top_name_id(cols.top_of_hash, cols.top_names, int(h[r]), name)
        if name.startswith("ProfilerStep#"):
            num = name[len("ProfilerStep#") :]
            sid = int(num) if num.isascii() and num.isdigit() and len(num) < 12 else -1
            cols.steps.append((int(ts[r]), int(ts[r] + dur[r]), sid))
    _top_ops(cols, ints, ts, dur, top)
    mt = (codes == js.CAT_MTIA) & ~bad
    if mt.any():
        st = ints[mt, js.F_STREAM]
        cols.mtia += int(mt.sum())
        cols.mtia_unstreamed += int((st == js.MISSING).sum())
        cols.mtia_streams.update(st[st != js.MISSING].tolist())


def _top_ops(
    cols: _Columns, ints: np.ndarray, ts: np.ndarray, dur: np.ndarray, top: np.ndarray
) -> None:
    """Keep the block's outer CPU ops (``top``: the id in ``cols.top_names`` of each of its
    cpu_op and user_annotation events, -1 for a step and any other event): those of some
    length that no other op of the block contains on their thread, as the rows lie in the file
    (engine.trace.kineto.top_ops)."""
    rows = np.flatnonzero((top >= 0) & (dur > 0))
    if not rows.size:
        return
    tid, start = ints[rows, js.F_TID], ts[rows]
    end = start + dur[rows]
    outer = nested(tid, start, end)
    cols.top.append(
        {"tid": _narrow(tid[outer]), "start": start[outer], "end": end[outer],
         "name": top[rows[outer]]}
    )  # fmt: skip


def _chunks(path: Path, limits: ReadLimits | None = None) -> Iterator[bytes]:
    """The file's decompressed chunks of at most CHUNK bytes
    (engine.trace.kineto.chrome_stream.chunks; limits from the environment unless given)."""
    return chunks(path, limits or ReadLimits.from_env(path), CHUNK)


def read_kineto(
    path: str | Path,
    limits: ReadLimits | None = None,
    interpreted: bool = False,
    declined: Callable[[], None] | None = None,
    merge_idle: Callable[[Trace], Sequence[int]] | None = None,
) -> Trace:
    """Import one Kineto/Chrome-trace JSON file (.json or .json.gz); raise TraceImportError.
    ``limits``: what the file may make the reader do (default: ReadLimits.from_env, the
    defaults moved by any GITM_MAX_* variable; see engine.trace.limits). ``interpreted``: try
    the scanner's Python twin first (engine.trace.kineto.json_twin: the same trace, without
    compiling the scanner; for a first run), and compile only when it declines the file (then
    ``declined`` is called first). ``merge_idle``: keep each run of back-to-back calls that
    only take host time as one host row (engine.trace.idle_calls), exact for a replay window
    that starts or ends at any of the times it returns for the trace read (every call kept,
    as read, without it)."""
    path = Path(path)
    limits = limits or ReadLimits.from_env(path)
    if interpreted:
        got = json_twin.read(path, limits)  # (it pauses the GC itself)
        if got is not None:
            data, (starts, ends, codes, *fields), prefix, suffix = got
            cols = _Columns()
            buf = np.frombuffer(data, np.uint8)
            _add(cols, buf, starts, ends, codes, tuple(fields), grouped=False)
            try:
                meta = metadata(path, prefix, suffix)
            except TraceImportError:
                meta = None  # the compiled reader says why, where it finds it first
            if meta is not None:
                return _build(path, cols, meta, False, merge_idle)
        if declined is not None:
            declined()
    cols = _Columns()
    # four stages: inflate (a thread) → scan (here; numba releases the GIL) → field extraction
    # (the longest: each block's events parsed in two halves on two threads, as soon as the
    # block is scanned) → columns (one thread, block after block in file order, so names are
    # interned in file order). The columns of one block are made while the next is parsed:
    # with the halves parsed by the thread that then made the columns, the other waited (the
    # read of a 2 M-event trace used 1.47 of the 2 cores)
    jobs: deque[Future[None]] = deque()
    with (
        chunk_buffers_reused(CHUNK),
        gc_paused(),
        ThreadPoolExecutor(1, thread_name_prefix="gitm-columns") as pool,
        ThreadPoolExecutor(2, thread_name_prefix="gitm-extract") as extract,
    ):

        def parse(
            data: bytes, starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, base: int
        ) -> None:
            """Queue the parse of the kept events data[starts[r]:ends[r]], in file order."""
            buf = np.frombuffer(data, dtype=np.uint8)
            parts = _extract(buf, starts, ends, codes, extract)

            def job() -> None:
                try:  # the kept events must be valid JSON: checked as their fields are read
                    _add(cols, buf, starts, ends, codes, _fields(parts), grouped=True)
                except _InvalidEvent as e:
                    where = f"decompressed byte {base + e.at:,}"
                    raise TraceImportError(
                        path, f"invalid JSON in traceEvents ({e.why} at {where})"
                    ) from None

            jobs.append(pool.submit(job))
            # bound the blocks in flight (memory), surface errors: 4 rather than 2 kept both
            # cores busier (2 M events: 1.48 s vs 1.57 s end to end, the same peak RSS)
            while len(jobs) > 4:
                jobs.popleft().result()

        reader = EventStream(path, limits, parse)
        chunk_iter = prefetched(_chunks(path, limits))
        try:
            for chunk in chunk_iter:
                reader.feed(chunk)
                del chunk  # (each inflated chunk, the last too: 8 MiB not held through the build)
            reader.finish()
        except TraceImportError:
            while jobs:  # a block before the failing point may hold the first error: report it
                jobs.popleft().result()
            raise
        except BaseException:
            for f in jobs:
                f.cancel()
            raise
        finally:
            chunk_iter.close()
        while jobs:
            jobs.popleft().result()  # raises a worker's TraceImportError
    meta = metadata(path, bytes(reader.prefix), bytes(reader.suffix))
    del reader, chunk_iter
    return _build(path, cols, meta, True, merge_idle)


#: a join that frees more than this hands the heap back at once (import_memory.give_back):
#: the import's trim threshold (256 MB) kept every joined column's blocks resident until the
#: last join, +60 MiB on a 10 M-event trace
_GIVE_BACK_BYTES = 4 << 20


def _cat(parts: list[dict[str, np.ndarray]], key: str, dtype: type) -> np.ndarray:
    """The blocks' ``key`` column as one array of ``dtype``. The blocks' arrays are dropped as
    they are joined (a trace's kept columns were held two and three times over: the import's
    peak was in this join, 856 MiB for 10 M events against 458 MiB while streaming)."""
    if not parts:
        return np.zeros(0, dtype)
    arrs = [p.pop(key) for p in parts]
    out = np.concatenate(arrs) if len(arrs) > 1 else arrs[0]
    freed = sum(a.nbytes for a in arrs) if len(arrs) > 1 else 0
    del arrs
    if freed > _GIVE_BACK_BYTES:  # the blocks' heap back now, not after every column's join
        give_back()
    return out.astype(dtype, copy=False)


def _narrow(a: np.ndarray) -> np.ndarray:
    """An int64 block column as int32 when every value fits (thread ids, correlation ids,
    durations, op indices mostly do): the blocks of a 10 M-event trace are held until the
    parse ends, and these columns were 40 MiB of them. The join widens them back (_cat)."""
    if a.size and a.dtype == np.int64 and _I32[0] <= a.min() and a.max() <= _I32[1]:
        return a.astype(np.int32)
    return a


def _ends(start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """start + dur, in ``dur``'s array (its own: _cat made it)."""
    dur += start
    return dur


def _link_events(host: HostEvents, w: dict[str, np.ndarray]) -> None:
    """Give record / wait / event-sync runtime rows their stream and event id (in place).

    A cuda_sync row names the runtime call that waited (its ``correlation``), the stream that
    waited (``stream``; -1 for a host-side cudaEventSynchronize), the stream the event was
    recorded on, the cudaEventRecord call's correlation and the event id. With them the replay
    links each wait to the exact record instead of guessing.
    """
    if not len(host):
        return
    rows_of = host.rows_of
    r = rows_of(w["record_correlation"])
    ok = (r >= 0) & (w["wait_stream"] >= 0)
    ok[ok] &= host.api[r[ok]] == ApiKind.EVENT_RECORD
    host.streams_to_fill()[r[ok]] = w["wait_stream"][ok]
    host.events_to_fill()[r[ok]] = w["event"][ok]
    r = rows_of(w["correlation"])
    found = r >= 0
    api = np.full(len(r), 255, np.int64)
    api[found] = host.api[r[found]]
    wait = found & (api == ApiKind.STREAM_WAIT) & (w["stream"] >= 0)
    host.streams_to_fill()[r[wait]] = w["stream"][wait]
    host.events_to_fill()[r[wait]] = w["event"][wait]
    # cudaEventSynchronize: the host waits for the recording stream (not every stream)
    esync = found & (api == ApiKind.SYNC) & (w["wait_stream"] >= 0)
    esync[esync] &= host.stream[r[esync]] < 0
    host.streams_to_fill()[r[esync]] = w["wait_stream"][esync]


def _build(
    path: Path,
    cols: _Columns,
    meta: dict[str, Any],
    compiled: bool,
    merge_idle: Callable[[Trace], Sequence[int]] | None = None,
) -> Trace:
    """The trace from the reader's blocks; ``compiled``: read by the compiled scanner (the
    derivation's sweep and the idle calls' merge may run as kernels too), not by the twin
    (which compiles nothing); ``merge_idle``: see read_kineto."""
    d = cols.dev
    if d:
        name = _cat(d, "name", np.int32)
        klass_of_name = classify_table(cols.names)
        start_ns = _cat(d, "start_ns", np.int64)
        correlation = _cat(d, "correlation", np.int64)
        block = _cat(d, "block", np.int32)
        grid = _workgroups(_cat(d, "grid", np.int32), block, correlation, cols.workitem_corr)
        seg = Segments.from_columns(  # the blocks hold the columns' types, clipped (_add)
            start_ns=start_ns,
            end_ns=_ends(start_ns, _cat(d, "dur_ns", np.int64)),
            stream=_cat(d, "stream", np.int32),
            device=_cat(d, "device", np.int16),
            kind=_cat(d, "kind", np.uint8),
            name=name,
            klass=klass_of_name[name],
            correlation=correlation,
            grid=grid,
            block=block,
            regs=_cat(d, "regs", np.int32),
            smem=_cat(d, "smem", np.int32),
            occupancy=_cat(d, "occupancy", np.float32),
            flops=_cat(d, "flops", np.float64),
            dram_bytes=_cat(d, "dram_bytes", np.float64),
            issue_active=Segments.unknown("issue_active", len(name)),  # no counters in Kineto
            stall_frac=Segments.unknown("stall_frac", len(name)),
            provenance=_cat(d, "provenance", np.uint8),
        )
    else:
        seg = Segments.empty()
    h = cols.host
    api_start = _cat(h, "api_start_ns", np.int64)
    if all(not p["stream"].flags.writeable for p in h):  # no call names its stream (_add)
        stream = np.broadcast_to(np.int32(-1), (sum(len(p.pop("stream")) for p in h),))
    else:
        stream = _cat(h, "stream", np.int32)
    tids = np.concatenate([p["tid"] for p in h]) if h else np.zeros(0, np.int64)
    host = HostEvents(
        correlation=_cat(h, "correlation", np.int64),
        stream=stream,
        api_start_ns=api_start,
        api_end_ns=_ends(api_start, _cat(h, "api_dur_ns", np.int64)),
        api=_cat(h, "api", np.uint8),
        # each call's thread (the replay's host clocks), dense; the blocks keep their "tid"
        # for the derivation, which pops it
        thread=HostEvents.threads_of(tids),
    )
    # the raw id of each thread number: the top-level ops are kept on the launching threads
    launching = tid_of_thread(tids, host.thread)
    del api_start, stream, tids  # (the columns' one holder is the table: the merge replaces them)
    give_back()  # the blocks' arrays, joined into the columns
    timed = np.isin(seg.kind, np.array(_TIMED_KINDS, np.uint8))
    if cols.malformed_gpu and not timed.any():  # not "CPU-only": the GPU rows were dropped
        raise TraceImportError(
            path,
            f"every GPU event ({cols.malformed_gpu:,}) is malformed: its ts or dur is missing, "
            "not a number, negative, or out of range (beyond ±2**62 ns, 146 years)",
        )
    if cols.mtia and not timed.any():  # MTIA rows, none of them device work we can time
        raise TraceImportError(
            path,
            f"MTIA activity ({cols.mtia:,} mtia_ccp_events) without device work to analyse: "
            f"{cols.mtia_unstreamed:,} name no stream (args.stream), the rest are event "
            "record / wait rows",
        )
    check_times(
        path, [seg.start_ns, host.api_start_ns], [seg.end_ns, host.api_end_ns]
    )  # fmt: skip
    if cols.waits:
        _link_events(host, {k: _cat(cols.waits, k, np.int64) for k in list(cols.waits[0])})
    if merge_idle is not None and len(host) > 1:
        steps = [(a, b) for a, b, _ in sorted(cols.steps)]
        at = merge_idle(Trace(seg, cols.names, host, {"profiler_steps": steps}, str(path)))
        keep = merge_idle_calls(host, seg.correlation, at, compiled)
        if keep is not None:  # the blocks' threads of the host rows (the derivation's), alike
            off = 0
            for part in h:  # (every host block has its rows' threads: _add)
                t = part["tid"]
                part["tid"] = t[keep[off : off + len(t)]]
                off += len(t)
        del keep
    # the recorded shapes of the ops whose work is derived, for the workload fingerprint (read
    # from the blocks before derive_work consumes them: engine.trace.kineto.op_shapes)
    op_shapes = from_derived_ops(cols.op_work_memo, cols.work_index, cols.ops, cols.framework_ops)
    seg, by_op = derive_work(seg, cols.names, h, host, cols.ops, cols.work, compiled)
    cols.ops, cols.work = [], []
    give_back()  # the derivation's transients: the analysis starts from what the trace keeps
    top_ops = join_top_ops(cols.top, launching, cols.top_names, cols.names)
    # top-level metadata is free-form JSON: keep only values of the shape we read
    devices = meta.get("deviceProperties")
    dist = meta.get("distributedInfo")
    rank = dist.get("rank") if isinstance(dist, dict) else None
    world = dist.get("world_size") if isinstance(dist, dict) else None
    base = meta.get("baseTimeNanoseconds")
    schema = meta.get("schemaVersion")
    props: dict[str, Any] = {
        "format": "kineto",
        "devices": [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else [],
        "rank": rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
        "world_size": world if isinstance(world, int) and not isinstance(world, bool) else None,
        "collectives": cols.collectives,
        "base_time_ns": base if isinstance(base, int) and not isinstance(base, bool) else None,
        "malformed_events": cols.malformed,
        "out_of_range_times": cols.out_of_range,
        "profiler_ranges": cols.ranges,
        "schema_version": schema if isinstance(schema, (int, str)) else None,
        # who numbered the GPU rows' devices (engine.planner.devices): roctracer numbers them
        # by HSA agent node, not by the deviceProperties ids the others share
        "gpu_tracer": next((t for t in _TRACERS if f"{t}_version" in meta), None),
        "profiler_steps": [(a, b) for a, b, _ in sorted(cols.steps)],
        # each step's N (ProfilerStep#N: the iteration it profiled), -1 where the name has none
        "profiler_step_ids": [n for _, _, n in sorted(cols.steps)],
        "framework_ops": cols.framework_ops,
        # kernels whose class their launching op decided (engine.trace.kineto.derive), and how
        # many of them the name alone would have put elsewhere
        "class_by_op": {"decided": by_op.decided, "changed": by_op.changed},
        "mtia_events": cols.mtia,
        "mtia_streams": len(cols.mtia_streams),
        "mtia_unstreamed_events": cols.mtia_unstreamed,
        "op_shapes": op_shapes,
    }
    if cols.mtia:  # the device the rows ran on, as the trace names it (no catalogue entry)
        props["platform"] = "mtia"
    return Trace(
        segments=seg, names=cols.names, host=host, device_properties=props, source=str(path),
        top_ops=top_ops,
    )  # fmt: skip


#: the GPU tracers whose version Kineto writes in the trace's metadata (``<name>_version``)
_TRACERS = ("cupti", "roctracer", "rocprofiler-sdk")


def mtia_device(trace: Trace, hardware: str | None = None) -> tuple[str, str]:
    """The device of an MTIA trace (``device_properties["platform"] == "mtia"``) as the trace
    names it, and the note that says what its analysis can and cannot tell; TraceImportError
    when ``hardware`` (a --hardware catalogue id) would put a GPU's peaks on it.

    What an MTIA trace tells, as Holistic Trace Analysis reads it: per stream, when its rows
    ran (busy time) and the gaps between them split host wait / kernel wait / other. It carries
    no counters, no launch geometry and no peaks we know, and its rows' names are no kernel
    classes: regimes are unknown, roofline and link rates not computed, and the levers (CUDA /
    ROCm changes replayed on CUDA semantics) not applicable.
    """
    devices = trace.device_properties.get("devices") or []
    reported = devices[0].get("name") if devices and isinstance(devices[0], dict) else None
    name = f"MTIA {reported}" if isinstance(reported, str) and reported else "MTIA"
    if hardware:
        raise TraceImportError(
            trace.source,
            f"--hardware {hardware}: this is an MTIA trace ({name}); the hardware catalogue "
            "holds NVIDIA and AMD GPUs, whose peaks do not apply to it",
        )
    note = (
        f"{name} (as the trace reports it): what it tells is each stream's busy and idle time "
        "(host wait / kernel wait / other, as HTA splits them); the hardware catalogue has no "
        "MTIA entry and the trace no counters or launch geometry, so regimes are unknown, the "
        "roofline, copy link rates and FLOP-based pressures are not computed, and the levers "
        "(CUDA / ROCm changes) are not applicable. Event record / wait rows are the stream "
        "waiting, not busy (HTA counts them busy)"
    )
    return name, note
