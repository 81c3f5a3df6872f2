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


def __getattr__(name: str) -> object:
    """``engine.trace.capture`` (DESIGN §9) without importing CUPTI machinery until used."""
    if name == "capture":
        from engine.trace.cupti import capture

        return capture
    raise AttributeError(name)
