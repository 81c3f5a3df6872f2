"""Columnar device activity (Segments), traces and their sources.

This package is the contract every importer writes and the analysis reads: Segments, HostEvents
and Trace, the taxonomy, evidence tiers, read limits and errors, the shared sorts, and
``read_trace`` (engine.trace.read), which picks the importer by the file's content. Each
importer's internals are a package of their own: engine.trace.kineto (PyTorch profiler /
Chrome-trace JSON), engine.trace.nsys (Nsight Systems SQLite), engine.trace.cupti (live CUPTI
capture)."""

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # imported when first used (__getattr__): the readers load numba
    from engine.trace.read import read_trace

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
    "read_trace",
]


def __getattr__(name: str) -> object:
    """``engine.trace.capture`` (DESIGN §9) without importing CUPTI machinery until used, and
    ``engine.trace.read_trace`` without loading the readers (and numba) until used."""
    if name == "read_trace":
        from engine.trace.read import read_trace

        return read_trace
    if name == "capture":
        from engine.trace.cupti.cupti import capture

        return capture
    raise AttributeError(name)
