"""Read a trace file into a Trace, whichever importer it needs: the one entry point the analysis
uses (engine.analyze.run). The importers' internals live in their own packages —
engine.trace.kineto (PyTorch profiler / Chrome-trace JSON) and engine.trace.nsys (Nsight
Systems SQLite exports); what they produce (Segments, HostEvents, Trace) is this package's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from engine.trace.files import head
from engine.trace.idle_calls import merge_idle_calls
from engine.trace.kineto.kineto import read_kineto
from engine.trace.nsys.nsys import read_nsys
from engine.trace.rocprof.rocpd import is_rocpd, read_rocpd
from engine.trace.rocprof.rocprof_csv import looks_like_rocprof_csv, read_rocprof_csv
from engine.trace.trace import Trace


def read_trace(
    path: Path,
    interpreted: bool = False,
    declined: Callable[[], None] | None = None,
    merge_idle: Callable[[Trace], Sequence[int]] | None = None,
) -> Trace:
    """Import a file by its content: a folder or a rocprofv3 CSV header → rocprofv3, SQLite
    magic → a rocpd database (rocprofv3's SQLite output) or else Nsight, otherwise Chrome-trace
    JSON.
    TraceImportError for any file that cannot be read (not a regular file included).
    ``interpreted``: a first run: try the JSON scanner's Python twin before compiling it
    (``declined`` is called when the twin leaves the file to the compiled reader).
    ``merge_idle``: runs of calls that only take host time kept as one row, exact at the
    times it names (engine.trace.idle_calls: as Kineto files are read; Nsight's once read)."""
    if Path(path).is_dir() or looks_like_rocprof_csv(head(Path(path), 64)):
        # a rocprofv3 CSV output folder, or one of its files (engine.trace.rocprof)
        return read_rocprof_csv(path)
    if head(Path(path)).startswith(b"SQLite format 3"):
        trace = read_rocpd(path) if is_rocpd(Path(path)) else read_nsys(path)
        if merge_idle is not None and len(trace.host) > 1:
            merge_idle_calls(trace.host, trace.segments.correlation, merge_idle(trace))
        return trace
    return read_kineto(path, interpreted=interpreted, declined=declined, merge_idle=merge_idle)
