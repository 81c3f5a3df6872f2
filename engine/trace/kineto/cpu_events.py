"""The CPU events of a PyTorch profiler / Kineto JSON trace — ``cpu_op`` operators and
``user_annotation`` ranges — read through the same byte stream, scanner and strict field parser
as the GPU reader (every limit of engine.trace.limits and its one-line errors; ts and dur exactly
in int64 ns; an event whose time is missing, negative or out of range is skipped and counted),
and the sniff that tells a CPU-only profile from its metadata (``cpu_profile``).

What the events say (steps, operators by self time, data loading, host gaps) is the analysis's:
engine.analyze.breakdown.cpu_trace. Names are kept as the trace wrote them: a caller cleans them."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.trace.errors import TraceImportError
from engine.trace.files import head, open_regular
from engine.trace.kineto import json_scan as js
from engine.trace.kineto import json_twin
from engine.trace.kineto.chrome_stream import extract_checked, metadata, stream_events
from engine.trace.limits import ReadLimits, check_times

__all__ = ["HEAD_BYTES", "CpuEvents", "cpu_profile", "read_cpu_events"]

#: the event categories that are device rows (kernels, copies, memsets, syncs, profiler ranges,
#: MTIA): one of them in a trace makes it the GPU reader's
_DEVICE = np.array(
    [js.CAT_KERNEL, js.CAT_MEMCPY, js.CAT_MEMSET, js.CAT_SYNC, js.CAT_PROFILER, js.CAT_MTIA]
)
#: how much of a trace's start (decompressed) ``cpu_profile`` reads for its metadata
HEAD_BYTES = 64 * 1024
_NO_DEVICES = re.compile(rb'"deviceProperties"\s*:\s*\[\s*\]')
_KEPT = (js.CAT_CPU_OP, js.CAT_ANNOTATION)
_TOP, _TOPLENS = js.key_table(js.TOP_KEYS)
_ARGK, _ARGLENS = js.key_table(js.ARG_KEYS)
_PREFIX = np.frombuffer(js.FLOP_PREFIX, np.uint8).copy()
_SUFFIX = np.frombuffer(js.FLOP_SUFFIX, np.uint8).copy()


# ---------------------------------------------------------------------------------- reading
@dataclass(eq=False)
class CpuEvents:
    """The CPU events of a trace, one row each: an operator (``cpu_op``) or an annotated range
    (``user_annotation``), its thread, its start and end (ns) and its name."""

    is_op: npt.NDArray[np.bool_]
    #: dense thread numbers (0.. in order of first appearance), one per (pid, tid)
    thread: npt.NDArray[np.int32]
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    name: npt.NDArray[np.int32]
    names: list[str]
    #: each thread's (pid, tid) as the trace wrote them (None where it wrote none)
    threads: list[tuple[int | None, int | None]]
    #: CPU events skipped: ts or dur missing, not a number, negative or out of range
    skipped: int = 0
    #: events of a device category (kernel, copy, memset…): a CPU-only trace has none
    device_rows: int = 0

    def __len__(self) -> int:
        return len(self.start)


class _Collect:
    """The kept events' columns, block after block (in file order)."""

    def __init__(self) -> None:
        self.blocks: list[tuple[np.ndarray, ...]] = []
        self.names: list[str] = []
        self.is_step: list[bool] = []  # per name: a ProfilerStep# range's
        self.by_hash: dict[int, int] = {}
        self.skipped = 0
        self.device_rows = 0

    def count_device(self, codes: np.ndarray) -> None:
        """Count the device rows among a block's events (before they are filtered out)."""
        self.device_rows += int(np.isin(codes, _DEVICE.astype(codes.dtype)).sum())

    def add(self, buf: np.ndarray, codes: np.ndarray, fields: tuple[Any, ...]) -> None:
        ints, ts, dur, _occ, _flops, ns, ne, esc, h = fields[:9]
        cpu = np.isin(codes, np.array(_KEPT, codes.dtype))
        timed = (
            cpu
            & (ts != js.NO_TIME)
            & (ts != js.OUT_OF_RANGE)
            & (dur != js.NO_TIME)
            & (dur != js.OUT_OF_RANGE)
            & (dur >= 0)
        )
        self.skipped += int((cpu & ~timed).sum())
        rows = np.flatnonzero(timed)
        if not rows.size:
            return
        ids = np.empty(rows.size, np.int32)
        hashes = h[rows]
        uniq, first, inv = np.unique(hashes, return_index=True, return_inverse=True)
        for u in np.argsort(first, kind="stable").tolist():  # interned in file order
            hv, r = int(uniq[u]), int(rows[first[u]])
            nid = self.by_hash.get(hv)
            if nid is None:
                nid = self.by_hash[hv] = len(self.names)
                self.names.append(_decode(buf, int(ns[r]), int(ne[r]), bool(esc[r])))
                self.is_step.append(self.names[-1].startswith("ProfilerStep#"))
            ids[inv.reshape(-1) == u] = nid
        # an operator is a cpu_op, but a ProfilerStep# range written as one (2021's "Operator",
        # json_scan.CATEGORY_ALIASES): a step, as a user_annotation of that name is
        step = np.array(self.is_step, bool)[ids]
        self.blocks.append(
            (
                (codes[rows] == js.CAT_CPU_OP) & ~step,
                ints[rows, js.F_PID],
                ints[rows, js.F_TID],
                ts[rows],
                ts[rows] + dur[rows],
                ids,
            )
        )

    def events(self, path: str | Path) -> CpuEvents:
        cols = list(zip(*self.blocks, strict=True)) if self.blocks else [[]] * 6
        is_op, pid, tid, start, end, name = (
            np.concatenate(c) if len(c) else np.zeros(0, dt)
            for c, dt in zip(
                cols, (bool, np.int64, np.int64, np.int64, np.int64, np.int32), strict=True
            )
        )
        check_times(path, start, end)  # every total below is then within int64
        pairs = np.stack([pid, tid], axis=1) if len(pid) else np.zeros((0, 2), np.int64)
        uniq, first, inv = (
            np.unique(pairs, axis=0, return_index=True, return_inverse=True)
            if len(pairs)
            else (pairs, np.zeros(0, np.int64), np.zeros(0, np.int64))
        )
        order = np.argsort(first, kind="stable")  # numbered in order of first appearance
        rank = np.empty(len(order), np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)

        def raw(v: int) -> int | None:
            return None if v == js.MISSING else v

        threads = [(raw(int(uniq[i, 0])), raw(int(uniq[i, 1]))) for i in order.tolist()]
        return CpuEvents(
            is_op.astype(bool), rank[inv.reshape(-1)].astype(np.int32), start, end,
            name.astype(np.int32), self.names, threads, self.skipped, self.device_rows,
        )  # fmt: skip


def _decode(buf: np.ndarray, s: int, e: int, escaped: bool) -> str:
    """The JSON string buf[s:e] (its content) as text; what cannot be decoded is replaced."""
    raw = buf[s:e].tobytes() if s >= 0 else b""
    try:
        return str(json.loads(b'"' + raw + b'"')) if escaped else raw.decode("utf-8")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw.decode("utf-8", "replace")


def _twin_blocks(
    path: Path, limits: ReadLimits
) -> Iterator[tuple[np.ndarray, np.ndarray, tuple[Any, ...]]] | None:
    """The kept events as the scanner's Python twin reads them (a first run: nothing compiled),
    or None when it declines the file (the compiled reader then reads it)."""
    got = json_twin.read(path, limits)
    if got is None:
        return None
    data, (_starts, _ends, codes, *fields), prefix, suffix = got
    metadata(path, prefix, suffix)
    return iter([(np.frombuffer(data, np.uint8), codes, tuple(fields))])


def read_cpu_events(
    path: str | Path, limits: ReadLimits | None = None, interpreted: bool = False
) -> CpuEvents:
    """The CPU events of a Kineto / Chrome-trace JSON file (plain or gzip); TraceImportError
    (one line) for a file that cannot be read, passes a limit or is not JSON where an event is
    kept. ``interpreted``: try the scanner's Python twin first (a first run, nothing compiled)."""
    path = Path(path)
    limits = limits or ReadLimits.from_env(path)
    if head(Path(path)).startswith(b"SQLite format 3"):
        raise TraceImportError(path, "an Nsight Systems export: its CPU rows are not read here")
    got = _Collect()
    twin = _twin_blocks(path, limits) if interpreted else None
    if twin is not None:
        for buf, codes, fields in twin:
            got.count_device(codes)
            got.add(buf, codes, fields)
        return got.events(path)

    def parse(
        data: bytes, starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, base: int
    ) -> None:
        got.count_device(codes)
        keep = np.isin(codes, np.array(_KEPT, codes.dtype))
        if not keep.any():
            return
        s, e, c = starts[keep], ends[keep], codes[keep]
        buf = np.frombuffer(data, np.uint8)
        fields = extract_checked(
            path, buf, (s, e, c), base, (_TOP, _TOPLENS, _ARGK, _ARGLENS, _PREFIX, _SUFFIX)
        )
        got.add(buf, c, fields)

    reader = stream_events(path, limits, parse)
    metadata(path, bytes(reader.prefix), bytes(reader.suffix))
    return got.events(path)


def cpu_profile(path: str | Path) -> bool:
    """Whether the trace says in its metadata, before its ``traceEvents``, that it was recorded
    with no device (``"deviceProperties": []``, torch.profiler without CUDA): it is then read
    here first (``read_cpu_profile``), once. Reads at most HEAD_BYTES of it (decompressed); False
    for anything else, a file that cannot be read included (the reader says why)."""
    try:
        with open_regular(path) as f:
            raw = f.read(HEAD_BYTES)
            if raw[:2] == b"\x1f\x8b":
                f.seek(0)
                with gzip.GzipFile(fileobj=f) as z:
                    raw = z.read(HEAD_BYTES)
    except (TraceImportError, OSError, EOFError, zlib.error):
        return False
    end = raw.find(b'"traceEvents"')
    return end > 0 and _NO_DEVICES.search(raw, 0, end) is not None
