"""What every rocprofv3 reader (CSV, JSON, pftrace, rocpd) turns its records into the same way:
copy directions in Kineto's spelling, stream ids that fit the Segments column, and HIP API calls
as host rows."""

from __future__ import annotations

import numpy as np

from engine.trace.trace import HostEvents

#: rocprofiler's memory-copy operations → Kineto's spelling of a copy's kind
DIRECTION = {
    "MEMORY_COPY_HOST_TO_DEVICE": "HtoD",
    "MEMORY_COPY_DEVICE_TO_HOST": "DtoH",
    "MEMORY_COPY_DEVICE_TO_DEVICE": "DtoD",
    "MEMORY_COPY_HOST_TO_HOST": "HtoH",
}


def dense_streams(ids: np.ndarray) -> np.ndarray:
    """Stream ids as int32: kept where they fit, else renumbered 0.. in increasing order."""
    if not len(ids) or (ids.min() >= -(2**31) and ids.max() < 2**31):
        return ids.astype(np.int32)
    return np.unique(ids, return_inverse=True)[1].reshape(-1).astype(np.int32)


def host_rows(calls: list[tuple[int, int, int, int, int]]) -> HostEvents:
    """HIP API calls — (correlation, start ns, end ns, thread, ApiKind) each — as host rows in
    start order: a kernel's correlation id is that of the call that launched it."""
    if not calls:
        return HostEvents.empty()
    a = np.array(sorted(calls, key=lambda h: h[1]), np.int64)
    return HostEvents(
        correlation=a[:, 0],
        stream=np.full(len(a), -1, np.int32),
        api_start_ns=a[:, 1],
        api_end_ns=a[:, 2],
        api=a[:, 4].astype(np.uint8),
        thread=HostEvents.threads_of(a[:, 3]),
    )
