"""Columnar device activity (Segments), traces and their sources."""

from engine.trace.segments import (
    COLUMNS,
    Kind,
    Klass,
    NameTable,
    Provenance,
    Segments,
    SegmentsError,
    concat_named,
)
from engine.trace.trace import HostEvents, Trace

__all__ = [
    "COLUMNS",
    "HostEvents",
    "Kind",
    "Klass",
    "NameTable",
    "Provenance",
    "Segments",
    "SegmentsError",
    "Trace",
    "concat_named",
]
