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


@dataclass(eq=False)
class HostEvents:
    """Host rows: launch API calls linked to device rows by ``correlation``, plus (where the
    source knows them) syncs, event record/wait, allocator calls and annotated host work."""

    correlation: npt.NDArray[np.int64]
    stream: npt.NDArray[np.int32]
    api_start_ns: npt.NDArray[np.int64]
    api_end_ns: npt.NDArray[np.int64]
    #: ApiKind per row (importers that only see launches leave LAUNCH)
    api: npt.NDArray[np.uint8] = field(default_factory=lambda: np.zeros(0, np.uint8))
    #: event id for EVENT_RECORD / STREAM_WAIT rows, else -1
    event: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        n = len(self.correlation)
        if len(self.api) != n:  # not given: every row is a launch
            self.api = np.zeros(n, np.uint8)
        if len(self.event) != n:
            self.event = np.full(n, -1, np.int64)

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
            self.api[i], self.event[i],
        )  # fmt: skip

    def rows_of(self, correlation: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Return the host row carrying each correlation id (the first, if several), -1 where
        none does or the id is negative (not linked)."""
        if not len(self.correlation) or not len(correlation):
            return np.full(len(correlation), -1, np.int64)
        order = np.argsort(self.correlation, kind="stable")
        corr = self.correlation[order]
        pos = np.minimum(np.searchsorted(corr, correlation), len(corr) - 1)
        hit = (corr[pos] == correlation) & (correlation >= 0)
        return np.where(hit, order[pos], -1).astype(np.int64)

    @staticmethod
    def concat(parts: list[HostEvents]) -> HostEvents:
        """Concatenate host-event tables."""
        if not parts:
            return HostEvents.empty()
        return HostEvents(
            *(
                np.concatenate([getattr(p, f) for p in parts])
                for f in ("correlation", "stream", "api_start_ns", "api_end_ns", "api", "event")
            )
        )


@dataclass(eq=False)
class Trace:
    """What an importer or a live source hands to the pipeline."""

    segments: Segments
    names: NameTable
    host: HostEvents = field(default_factory=HostEvents.empty)
    device_properties: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    simulated: bool = False
