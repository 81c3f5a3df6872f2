"""A Trace: Segments plus host launch events, device properties and where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.trace.segments import NameTable, Segments


class ApiKind(IntEnum):
    """What a host row is: the replay's dependency edges depend on it (DESIGN §5)."""

    LAUNCH = 0  # kernel launch (cudaLaunchKernel): device row by correlation
    MEMCPY_ASYNC = 1  # cudaMemcpyAsync from pinned memory: returns at once
    MEMCPY_SYNC = 2  # pageable cudaMemcpy(Async): the host waits for the copy
    SYNC = 3  # cudaStreamSynchronize (stream >= 0) / cudaDeviceSynchronize (stream -1)
    EVENT_RECORD = 4  # cudaEventRecord on ``stream``; ``event`` = event id
    STREAM_WAIT = 5  # cudaStreamWaitEvent: ``stream`` waits for the last record of ``event``
    MALLOC = 6  # cudaMalloc / cudaFree from the caching allocator
    GRAPH_LAUNCH = 7  # cudaGraphLaunch of a captured region (its nodes follow as GRAPH_NODE)
    HOST_WORK = 8  # an annotated host range (framework / user code) on the launching thread
    DATA_LOADING = 9  # an annotated data-loading range (prefetchable by a loader)
    GRAPH_NODE = 10  # a kernel/copy node of the preceding graph launch (CUPTI graph-node id)
    OTHER = 255


def api_kind_from_name(name: str) -> int:
    """ApiKind of a CUDA/HIP runtime or driver call from its name (cudaLaunchKernel,
    cudaMemcpyAsync, cuStreamSynchronize, hipEventRecord, …)."""
    n = name.lower()
    if "graphlaunch" in n:
        return ApiKind.GRAPH_LAUNCH
    if "launch" in n:
        return ApiKind.LAUNCH
    if "memcpy" in n or "memset" in n:
        return ApiKind.MEMCPY_ASYNC if "async" in n else ApiKind.MEMCPY_SYNC
    if "synchronize" in n or "eventsynchronize" in n:
        return ApiKind.SYNC
    if "eventrecord" in n:
        return ApiKind.EVENT_RECORD
    if "streamwaitevent" in n:
        return ApiKind.STREAM_WAIT
    if "malloc" in n or "free" in n:
        return ApiKind.MALLOC
    return ApiKind.OTHER


def _unfilled(col: np.ndarray) -> bool:
    """A column that is one read-only value repeated (a broadcast: no memory of its own)."""
    return bool(not col.flags.writeable and col.strides == (0,))


@dataclass(eq=False)
class HostEvents:
    """Host rows: launch API calls linked to device rows by ``correlation``, plus (where the
    source knows them) syncs, event record/wait, allocator calls and annotated host work."""

    correlation: npt.NDArray[np.int64]
    #: the stream a row acts on, -1 where none or unknown. May be a read-only -1 of every row
    #: that holds no memory (Kineto's runtime calls mostly name no stream: 4 bytes a host row,
    #: 9 MiB of a 10 M-event trace before its idle calls are merged); a writer calls
    #: ``streams_to_fill`` first
    stream: npt.NDArray[np.int32]
    api_start_ns: npt.NDArray[np.int64]
    api_end_ns: npt.NDArray[np.int64]
    #: ApiKind per row (importers that only see launches leave LAUNCH)
    api: npt.NDArray[np.uint8] = field(default_factory=lambda: np.zeros(0, np.uint8))
    #: event id for EVENT_RECORD / STREAM_WAIT rows, else -1. Not given: a read-only -1 of
    #: every row that holds no memory (18 MiB of a 10 M-event trace's columns, where no row
    #: names an event); an importer that fills it calls ``events_to_fill`` first
    event: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    #: the host thread that made each call, numbered 0.. in order of first call (the replay
    #: runs one clock per thread: a call blocked on one thread does not hold up the others).
    #: Not given: every row on thread 0, a read-only 0 of every row that holds no memory
    thread: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))

    def __post_init__(self) -> None:
        n = len(self.correlation)
        if len(self.api) != n:  # not given: every row is a launch
            self.api = np.zeros(n, np.uint8)
        if len(self.event) != n:
            self.event = np.broadcast_to(np.int64(-1), (n,))
        if len(self.thread) != n:
            self.thread = np.broadcast_to(np.int32(0), (n,))

    @staticmethod
    def threads_of(tid: npt.NDArray[np.integer]) -> npt.NDArray[np.int32]:
        """Dense thread numbers (0.. in order of first appearance) of a column of raw thread
        ids (any integers a trace writes, negative ones included)."""
        if not len(tid):
            return np.zeros(0, np.int32)
        ids, first, inv = np.unique(tid, return_index=True, return_inverse=True)
        rank = np.empty(len(ids), np.int32)
        rank[np.argsort(first, kind="stable")] = np.arange(len(ids), dtype=np.int32)
        return rank[inv.reshape(-1)]

    def events_to_fill(self) -> npt.NDArray[np.int64]:
        """The event column, writable (materialised here when it was the read-only default)."""
        if not self.event.flags.writeable:
            self.event = np.array(self.event)
        return self.event

    def streams_to_fill(self) -> npt.NDArray[np.int32]:
        """The stream column, writable (materialised here when it was a read-only -1)."""
        if not self.stream.flags.writeable:
            self.stream = np.array(self.stream)
        return self.stream

    @classmethod
    def empty(cls) -> HostEvents:
        """Return a table with no rows."""
        return cls(
            np.zeros(0, np.int64),
            np.zeros(0, np.int32),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
        )

    def __len__(self) -> int:
        return len(self.correlation)

    def take(self, index: npt.ArrayLike) -> HostEvents:
        """Return the rows selected by a boolean mask or an integer index array."""
        i = np.asarray(index)
        return HostEvents(
            self.correlation[i], self.stream[i], self.api_start_ns[i], self.api_end_ns[i],
            self.api[i], self.event[i], self.thread[i],
        )  # fmt: skip

    def keep_only(self, keep: npt.NDArray[np.bool_]) -> None:
        """Keep only the rows of a boolean mask, in place, one column at a time (the table is
        never held twice; a column another object also holds stays with it)."""
        for f in ("correlation", "api_start_ns", "api_end_ns", "api"):
            setattr(self, f, getattr(self, f)[keep])
        n = len(self.correlation)
        for f, dt in (("stream", np.int32), ("event", np.int64), ("thread", np.int32)):
            col = getattr(self, f)
            if _unfilled(col):  # a read-only -1 (0: thread) of every row: still no memory
                setattr(self, f, np.broadcast_to(dt(col[0] if len(col) else -1), (n,)))
            else:
                setattr(self, f, col[keep])

    def rows_of(self, correlation: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Return the host row carrying each correlation id (the first, if several), -1 where
        none does or the id is negative (not linked)."""
        if not len(self.correlation) or not len(correlation):
            return np.full(len(correlation), -1, np.int64)
        corr = self.correlation
        last = len(corr) - 1
        if not (corr[1:] >= corr[:-1]).all():  # (the rows are often in correlation order)
            # through the stable order, not a sorted copy of the ids: 8 bytes a host row less
            order = np.argsort(corr, kind="stable")
            pos = np.searchsorted(corr, correlation, sorter=order)
            np.minimum(pos, last, out=pos)  # (in place: 8 bytes a looked-up row)
            pos = order[pos]  # (np.take into pos buffers its output all the same)
            del order
        else:  # the first of equal ids is the first row, as the stable order's is
            pos = np.searchsorted(corr, correlation)
            np.minimum(pos, last, out=pos)
        hit = (corr[pos] == correlation) & (correlation >= 0)
        pos[~hit] = -1
        return pos.astype(np.int64, copy=False)

    @staticmethod
    def concat(parts: list[HostEvents]) -> HostEvents:
        """Concatenate host-event tables."""
        if not parts:
            return HostEvents.empty()
        return HostEvents(
            *(
                np.concatenate([getattr(p, f) for p in parts])
                for f in (
                    "correlation",
                    "stream",
                    "api_start_ns",
                    "api_end_ns",
                    "api",
                    "event",
                    "thread",
                )
            )
        )


@dataclass(eq=False)
class TopOps:
    """The top-level CPU operators of the threads that launch GPU work, where the trace records
    them (Kineto: framework ops and user annotations that no other on their thread contains;
    ProfilerStep# ranges are steps, not ops): one row each, columns of equal length. Per thread
    in order of start and disjoint (an op that began inside the one before it starts where that
    one ends). ``thread`` is HostEvents.thread's numbering; ``name`` an id into Trace.names."""

    start_ns: npt.NDArray[np.int64]
    end_ns: npt.NDArray[np.int64]
    thread: npt.NDArray[np.int32]
    name: npt.NDArray[np.int32]

    @classmethod
    def empty(cls) -> TopOps:
        """Return a table with no rows (a source that records no operators)."""
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32),
                   np.zeros(0, np.int32))  # fmt: skip

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(eq=False)
class Trace:
    """What an importer or a live source hands to the pipeline."""

    segments: Segments
    names: NameTable
    host: HostEvents = field(default_factory=HostEvents.empty)
    device_properties: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    simulated: bool = False
    #: the top-level CPU operators (none where the source records none)
    top_ops: TopOps = field(default_factory=TopOps.empty)
