"""Import rocprofv3's CSV output (``rocprofv3 … --output-format csv``) into a Trace.

rocprofv3 writes one CSV per kind of record, each named ``<prefix>_<kind>.csv``; the files are
told apart by their header, never by their name (a user renames them):

* ``kernel_trace.csv`` (``"Kind","Agent_Id","Queue_Id",…,"Kernel_Name",…``): one KERNEL row per
  dispatch. Times are ns. ``Grid_Size_*`` are HSA grid sizes in *work-items*, so the ``grid``
  column (workgroups, as CUDA's grid counts blocks) is the product of ceil(grid / workgroup) per
  dimension; ``block`` the workgroup size; ``smem`` the LDS (``Group_Segment_Size``) bytes;
  ``regs`` the per-lane VGPR count where the file has it. ``Stream_Id`` (rocprofv3 ≥ ROCm 6.4)
  is the stream; older files have only the HSA queue (``Queue_Id``), used in its place.
* ``memory_copy_trace.csv``: MEMCPY rows named as Kineto names copies (``Memcpy HtoD``); bytes
  where the file has a size column (older releases have none: NaN, never guessed).
* ``counter_collection.csv`` (``--pmc``): one row per dispatch *per counter*; joined to its
  kernel row by ``Dispatch_Id`` (and the kernel name, which must agree) and turned into the
  measured columns (engine.trace.rocprof.counters). Without a kernel trace, files of ROCm 6.4+
  carry the dispatch's own start/end and give the kernel rows themselves; older ones have no
  times, and are refused (their counters belong to no kernel we can place).
* ``agent_info.csv``: the GPU agents (``Product_Name`` → the device name the hardware
  catalogue matches, ``Cu_Count`` → its CU count).
* ``rccl_trace.csv``, ``hip_api_trace.csv``…: host API calls (``"Domain","Function",…``). RCCL's
  are counted by function (``rccl_calls`` in the properties); the collectives' device time is
  the RCCL kernels of the kernel trace (COMM by the taxonomy). HIP's (``--hip-trace``) become
  host rows, linked to the kernels and copies they launched by ``Correlation_Id``.
* ``*_stats.csv`` summaries are read for nothing (everything in them is in the traces).

A folder is read whole (and its ``pmc_N`` sub-folders: one per counter pass); a single file is
read with its folder's ``agent_info.csv``. Anything malformed — a wrong header, a truncated
row, a number that is not one — is a TraceImportError naming the file and the row.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.trace.errors import TraceImportError
from engine.trace.files import open_regular
from engine.trace.limits import MAX_TIME_NS, check_times
from engine.trace.rocprof.counters import PRESSURE_COUNTERS, measured_columns, measured_flops
from engine.trace.rocprof.rows import DIRECTION, host_rows
from engine.trace.segments import Kind, NameTable, Provenance, Segments
from engine.trace.taxonomy import classify_table
from engine.trace.trace import Trace, api_kind_from_name

#: header columns that make a file each kind of rocprofv3 CSV
_KERNEL = {"Kind", "Kernel_Name", "Dispatch_Id", "Start_Timestamp", "End_Timestamp"}
_COPY = {"Kind", "Direction", "Start_Timestamp", "End_Timestamp"}
_COUNTER = {"Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value"}
_AGENT = {"Node_Id", "Agent_Type"}
_API = {"Domain", "Function", "Start_Timestamp", "End_Timestamp"}
_STATS = {"Name", "Calls", "TotalDurationNs"}
_AGENT_NUM = re.compile(r"(-?\d+)\s*$")  # "Agent 4" (ROCm 6.4+) or 4 (earlier)
#: the first bytes of a file that may be rocprofv3 CSV (a quoted header of known columns)
_SNIFF = (b'"Kind","', b'"Correlation_Id","Dispatch_Id"', b'"Node_Id","Logical_Node_Id"')


def looks_like_rocprof_csv(head: bytes) -> bool:
    """Whether a file's first bytes are a rocprofv3 CSV header (kernel, copy, counter or agent
    file); API traces and summaries alone are not analysable traces and are not claimed."""
    return head.lstrip(b"\xef\xbb\xbf").startswith(_SNIFF)


def csv_files(folder: Path) -> list[Path]:
    """The ``*.csv`` files of a rocprofv3 output folder and of its ``pmc_N`` sub-folders."""
    out = sorted(p for p in folder.glob("*.csv") if p.is_file())
    for sub in sorted(folder.glob("pmc_*")):
        if sub.is_dir():
            out.extend(sorted(p for p in sub.glob("*.csv") if p.is_file()))
    return out


def is_rocprof_dir(folder: Path) -> bool:
    """Whether a folder holds rocprofv3 CSV output (a kernel, copy or counter file)."""
    try:
        for p in csv_files(folder):
            if _kind_of(_header(p)) in ("kernel", "copy", "counter"):
                return True
    except (OSError, TraceImportError, csv.Error):
        return False
    return False


def _kind_of(header: list[str]) -> str | None:
    cols = set(header)
    if cols >= _COUNTER:
        return "counter"
    if cols >= _KERNEL:
        return "kernel"
    if cols >= _COPY:
        return "copy"
    if cols >= _AGENT:
        return "agent"
    if cols >= _API:
        return "api"
    if cols >= _STATS:
        return "stats"
    return None


def _text_of(path: Path) -> io.TextIOWrapper:
    # bytes that are not UTF-8 (a damaged file) read as U+FFFD; names are cleaned on output
    return io.TextIOWrapper(open_regular(path), encoding="utf-8-sig", errors="replace", newline="")


def _header(path: Path) -> list[str]:
    with _text_of(path) as f:
        try:
            return next(csv.reader(f), [])
        except csv.Error as e:
            raise TraceImportError(path, f"not a readable CSV file ({e})") from None


def _rows(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row by column) of a CSV file; TraceImportError for a row whose field count
    is not the header's (a truncated file) or a file the csv module cannot read."""
    with _text_of(path) as f:
        reader = csv.reader(f)
        try:
            header = next(reader, [])
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    raise TraceImportError(
                        path,
                        f"truncated or malformed CSV: line {reader.line_num} has {len(row)} "
                        f"fields, the header {len(header)}",
                    )
                yield reader.line_num, dict(zip(header, row, strict=True))
        except csv.Error as e:
            raise TraceImportError(
                path, f"not a readable CSV file (line {reader.line_num}: {e})"
            ) from None


def _int(path: Path, line: int, row: dict[str, str], col: str, default: int | None = None) -> int:
    v = row.get(col)
    if v is None or v == "":
        if default is not None:
            return default
        raise TraceImportError(path, f"line {line}: no value in column {col}")
    try:
        return int(v)
    except ValueError:
        try:
            f = float(v)
        except ValueError:
            raise TraceImportError(path, f"line {line}: column {col} is not a number") from None
        if not math.isfinite(f) or f != int(f):
            raise TraceImportError(path, f"line {line}: column {col} is not an integer") from None
        return int(f)


def _float(path: Path, line: int, row: dict[str, str], col: str) -> float:
    try:
        return float(row.get(col, ""))
    except ValueError:
        raise TraceImportError(path, f"line {line}: column {col} is not a number") from None


def _agent(path: Path, line: int, v: str | None) -> int:
    m = _AGENT_NUM.search(v or "")
    if m is None:
        raise TraceImportError(path, f"line {line}: agent id {v!r:.40} is not one")
    return int(m.group(1))


def _time(path: Path, line: int, row: dict[str, str]) -> tuple[int, int]:
    s = _int(path, line, row, "Start_Timestamp")
    e = _int(path, line, row, "End_Timestamp")
    if abs(s) >= MAX_TIME_NS or abs(e) >= MAX_TIME_NS:
        raise TraceImportError(path, f"line {line}: a timestamp beyond 2**62 ns")
    return s, e


@dataclass
class _Rows:
    """Rows gathered from every file, as lists (converted to columns once)."""

    cols: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, **values: Any) -> None:
        for k, v in values.items():
            self.cols.setdefault(k, []).append(v)


@dataclass
class _Read:
    names: NameTable = field(default_factory=NameTable)
    rows: _Rows = field(default_factory=_Rows)
    #: dispatch id → row index of its kernel
    dispatch_row: dict[int, int] = field(default_factory=dict)
    #: dispatch id → (kernel name, {counter: value}, first counter row, its file)
    counters: dict[int, tuple[str, dict[str, float], dict[str, str], Path, int]] = field(
        default_factory=dict
    )
    counter_names: Counter[str] = field(default_factory=Counter)
    agents: list[dict[str, Any]] = field(default_factory=list)
    rccl: Counter[str] = field(default_factory=Counter)
    files: dict[str, list[str]] = field(default_factory=dict)
    unread: list[str] = field(default_factory=list)
    #: HIP API calls (hip_api_trace.csv): correlation, start, end, thread, ApiKind
    host: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    #: kernel row → (FLOPs, dtype code) counted by its FLOP counters (counters.measured_flops)
    flops: dict[int, tuple[float, int]] = field(default_factory=dict)


def read_rocprof_csv(path: str | Path) -> Trace:
    """Import a rocprofv3 CSV output folder, or one of its files (with its folder's
    agent_info.csv); TraceImportError (one line) for anything that cannot be read."""
    path = Path(path)
    if path.is_dir():
        files = csv_files(path)
        if not files:
            raise TraceImportError(path, "no rocprofv3 CSV files (*.csv) in this folder")
    else:
        files = [path] + [
            p for p in sorted(path.parent.glob("*agent_info.csv")) if p.resolve() != path.resolve()
        ]
    r = _Read()
    kinds = {f: _kind_of(_header(f)) for f in files}
    if not path.is_dir() and kinds[path] not in ("kernel", "copy", "counter"):
        raise TraceImportError(
            path,
            "not a rocprofv3 kernel, memory-copy or counter-collection CSV (its header names "
            "none of their columns)",
        )
    for f, kind in kinds.items():  # agents first: the kernel rows number devices by them
        if kind == "agent":
            _agents(f, r)
    for f, kind in kinds.items():
        r.files.setdefault(kind or "unknown", []).append(f.name)
        if kind == "kernel":
            _kernels(f, r)
        elif kind == "copy":
            _copies(f, r)
        elif kind == "api":
            _api(f, r)
    for f, kind in kinds.items():
        if kind == "counter":
            _counter_file(f, r)
    joined, unmatched = _join(r, path, has_kernels="kernel" in r.files)
    cols = {k: np.asarray(v) for k, v in r.rows.cols.items()}
    if not cols:
        if unmatched:
            raise TraceImportError(path, "counters with no kernel: no kernel trace holds them")
        raise TraceImportError(path, "no kernel, copy or counter rows in the rocprofv3 output")
    n = len(cols["start_ns"])
    cols["flops"], cols["dtype"] = np.full(n, np.nan), np.zeros(n, np.uint8)
    for i, (flops, dcode) in r.flops.items():
        cols["flops"][i], cols["dtype"][i] = flops, dcode
    gpus = _device_numbers(r)
    cols["device"] = np.array([gpus.get(a, 0) for a in cols.pop("agent")], np.int16)
    klass = classify_table(r.names)
    cols["klass"] = klass[cols["name"]]
    backwards = cols["end_ns"] < cols["start_ns"]
    malformed = int(backwards.sum())
    if malformed:
        cols = {k: v[~backwards] for k, v in cols.items()}
    seg = Segments.from_columns(**cols)
    seg = seg.take(np.argsort(seg.start_ns, kind="stable"))
    check_times(path, seg.start_ns, seg.end_ns)
    props: dict[str, Any] = {
        "format": "rocprofv3-csv",
        # each GPU as its rows number it: ``id`` the device number rows carry (the GPU agents in
        # agent_info's order, as _device_numbers numbers them), ``agent_id`` the agent's node id
        "devices": [
            {
                **{k: v for k, v in a.items() if k != "id"},
                "id": gpus.get(a["id"], i),
                "agent_id": a["id"],
            }
            for i, a in enumerate(x for x in r.agents if x.get("type") == "GPU")
        ],
        "rank": None,
        "malformed_events": malformed,
        "files": r.files,
        "counters": dict(r.counter_names),
        "counters_joined": joined,
        "counters_unmatched": unmatched,
        "rccl_calls": dict(r.rccl),
    }
    return Trace(
        segments=seg,
        names=r.names,
        host=host_rows(r.host),
        device_properties=props,
        source=str(path),
    )


def _agents(f: Path, r: _Read) -> None:
    for line, row in _rows(f):
        node = _int(f, line, row, "Node_Id")
        logical = _int(f, line, row, "Logical_Node_Id", node)
        kind = (row.get("Agent_Type") or "").strip().upper()
        name = row.get("Product_Name") or row.get("Name") or ""
        cus = _int(f, line, row, "Cu_Count", 0)
        r.agents.append(
            {
                "id": node,
                "logical_id": logical,
                "type": kind,
                "name": name,
                "gfx": row.get("Name") or "",
                "numSms": cus or None,
            }
        )


def _device_numbers(r: _Read) -> dict[int, int]:
    """Agent id (as the trace files write it) → device number: GPU agents numbered 0.. in
    agent_info's order; without agent_info, the ids in increasing order."""
    gpus = [a for a in r.agents if a["type"] == "GPU"]
    out: dict[int, int] = {}
    for i, a in enumerate(gpus):
        out.setdefault(a["id"], i)
        out.setdefault(a["logical_id"], i)
    if not out:
        out = {a: i for i, a in enumerate(sorted(set(r.rows.cols.get("agent", []))))}
    return out


def _geometry(f: Path, line: int, row: dict[str, str]) -> tuple[int, int]:
    """(workgroups in the grid, work-items in a workgroup); 0 where the file has no sizes."""
    if "Workgroup_Size_X" in row:
        wg = [max(_int(f, line, row, f"Workgroup_Size_{d}", 1), 1) for d in "XYZ"]
        gr = [_int(f, line, row, f"Grid_Size_{d}", 0) for d in "XYZ"]
    else:  # counter files: totals only
        wg = [max(_int(f, line, row, "Workgroup_Size", 0), 0), 1, 1]
        gr = [_int(f, line, row, "Grid_Size", 0), 1, 1]
        if not wg[0]:
            return 0, 0
    groups = math.prod(-(-g // w) for g, w in zip(gr, wg, strict=True))
    return min(groups, 2**31 - 1), min(math.prod(wg), 2**31 - 1)


def _regs(f: Path, line: int, row: dict[str, str]) -> int:
    for col in ("Arch_VGPR_Count", "VGPR_Count"):
        if row.get(col):
            return _int(f, line, row, col, 0)
    return 0


def _kernels(f: Path, r: _Read) -> None:
    for line, row in _rows(f):
        if row.get("Kind", "KERNEL_DISPATCH") != "KERNEL_DISPATCH":
            continue
        s, e = _time(f, line, row)
        grid, block = _geometry(f, line, row)
        dispatch = _int(f, line, row, "Dispatch_Id")
        r.dispatch_row[dispatch] = len(r.rows.cols.get("start_ns", ()))
        stream = _int(f, line, row, "Stream_Id", _int(f, line, row, "Queue_Id", 0))
        lds = _int(f, line, row, "Group_Segment_Size", _int(f, line, row, "LDS_Block_Size", 0))
        r.rows.add(
            start_ns=s, end_ns=e, stream=stream, agent=_agent(f, line, row.get("Agent_Id")),
            kind=Kind.KERNEL, name=r.names.intern(row["Kernel_Name"]),
            correlation=_int(f, line, row, "Correlation_Id", dispatch), grid=grid, block=block,
            regs=_regs(f, line, row), smem=lds, dram_bytes=math.nan, issue_active=math.nan,
            stall_frac=math.nan, provenance=int(Provenance.GEOMETRY) if grid else 0,
        )  # fmt: skip


def _copies(f: Path, r: _Read) -> None:
    for line, row in _rows(f):
        if row.get("Kind") != "MEMORY_COPY":
            continue
        s, e = _time(f, line, row)
        direction = DIRECTION.get(row.get("Direction", ""), "Unknown")
        size = next((c for c in ("Size", "Bytes", "Copy_Bytes") if row.get(c)), None)
        nbytes = float(_int(f, line, row, size)) if size else math.nan
        dst = _agent(f, line, row.get("Destination_Agent_Id"))
        src = _agent(f, line, row.get("Source_Agent_Id"))
        r.rows.add(
            start_ns=s, end_ns=e, stream=_int(f, line, row, "Stream_Id", 0),
            agent=src if direction == "DtoH" else dst, kind=Kind.MEMCPY,
            name=r.names.intern(f"Memcpy {direction}"),
            correlation=_int(f, line, row, "Correlation_Id", -1), grid=0, block=0, regs=0, smem=0,
            dram_bytes=nbytes, issue_active=math.nan, stall_frac=math.nan,
            provenance=int(Provenance.DRAM_BYTES) if size else 0,
        )  # fmt: skip


def _api(f: Path, r: _Read) -> None:
    for line, row in _rows(f):
        domain = row.get("Domain") or ""
        if domain == "RCCL_API":
            r.rccl[row.get("Function", "")] += 1
        elif domain.startswith("HIP_") and row.get("Correlation_Id"):
            # (hip_api_trace.csv: HIP_RUNTIME_API(_EXT), HIP_COMPILER_API(_EXT) calls)
            s, e = _time(f, line, row)
            if e < s:
                continue  # (no usable time: no edge for the replay)
            fn = row.get("Function") or ""
            r.host.append((_int(f, line, row, "Correlation_Id"), s, e,
                           _int(f, line, row, "Thread_Id", 0), api_kind_from_name(fn)))  # fmt: skip


def _counter_file(f: Path, r: _Read) -> None:
    for line, row in _rows(f):
        dispatch = _int(f, line, row, "Dispatch_Id")
        name = row.get("Counter_Name", "")
        value = _float(f, line, row, "Counter_Value")
        r.counter_names[name] += 1
        got = r.counters.get(dispatch)
        if got is None:
            r.counters[dispatch] = (row["Kernel_Name"], {name: value}, row, f, line)
        else:  # (one value per counter and dispatch: a later pass adds its counters)
            got[1].setdefault(name, value)


def _join(r: _Read, path: Path, has_kernels: bool) -> tuple[int, int]:
    """Put each dispatch's counters on its kernel row; return (joined, unmatched). Without a
    kernel trace, counter rows that carry their dispatch's times become the kernel rows."""
    cols = r.rows.cols
    joined = unmatched = 0
    for dispatch, (kname, values, row, f, line) in r.counters.items():
        i = r.dispatch_row.get(dispatch)
        if i is None and not has_kernels and row.get("Start_Timestamp"):
            s, e = _time(f, line, row)
            grid, block = _geometry(f, line, row)
            i = len(cols.get("start_ns", ()))
            r.rows.add(
                start_ns=s, end_ns=e, stream=_int(f, line, row, "Queue_Id", 0),
                agent=_agent(f, line, row.get("Agent_Id")), kind=Kind.KERNEL,
                name=r.names.intern(kname), correlation=_int(f, line, row, "Correlation_Id", dispatch),
                grid=grid, block=block, regs=_regs(f, line, row),
                smem=_int(f, line, row, "LDS_Block_Size", 0), dram_bytes=math.nan,
                issue_active=math.nan, stall_frac=math.nan,
                provenance=int(Provenance.GEOMETRY) if grid else 0,
            )  # fmt: skip
        if i is None or r.names[cols["name"][i]] != kname:
            unmatched += 1
            continue
        dram, issue, stall, bits = measured_columns(values)
        flops, dcode, fbits = measured_flops(values)
        if fbits:
            r.flops[i] = (flops, dcode)
        bits |= fbits
        if bits:
            cols["dram_bytes"][i], cols["issue_active"][i], cols["stall_frac"][i] = (
                dram,
                issue,
                stall,
            )
            cols["provenance"][i] |= bits
        joined += 1
    return joined, unmatched


__all__ = [
    "PRESSURE_COUNTERS",
    "csv_files",
    "is_rocprof_dir",
    "looks_like_rocprof_csv",
    "read_rocprof_csv",
]
