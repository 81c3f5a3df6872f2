"""Read a trace file into a Trace, whichever importer it needs: the one entry point the analysis
uses (engine.analyze.run). Which importer is the registry's answer (engine.trace.formats); the
importers' internals live in their own packages (engine.trace.kineto, engine.trace.nsys,
engine.trace.rocprof); what they produce (Segments, HostEvents, Trace) is this package's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from engine.trace.duplicates import drop_duplicates
from engine.trace.formats import ReadHow, format_of
from engine.trace.trace import Trace


def read_trace(
    path: Path,
    interpreted: bool = False,
    declined: Callable[[], None] | None = None,
    merge_idle: Callable[[Trace], Sequence[int]] | None = None,
) -> Trace:
    """Import a file (or a folder that is one trace) by its content, through the first format
    of engine.trace.formats.FORMATS that claims it. TraceImportError (one line) for any file
    that cannot be read — not a regular file, a kind of file not read here (with how to get
    one that is), or a file its importer refuses.
    ``interpreted``: a first run: try the JSON scanner's Python twin before compiling it
    (``declined`` is called when the twin leaves the file to the compiled reader).
    ``merge_idle``: runs of calls that only take host time kept as one row, exact at the
    times it names (engine.trace.idle_calls: as Kineto files are read; SQLite once read).
    Rows the file lists twice are kept once, and counted (engine.trace.duplicates)."""
    path = Path(path)
    how = ReadHow(interpreted=interpreted, declined=declined, merge_idle=merge_idle)
    return drop_duplicates(format_of(path).read(path, how))
