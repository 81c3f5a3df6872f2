"""The trace formats gitm-tui reads, in one registry: the one place a new importer is added.

Each :class:`Format` declares its name, the files it claims (suffixes a folder listing takes, a
cheap content sniff on the first bytes), how it reads (a function that imports its
importer when called, so ``--help``, ``doctor`` and the docs never load a reader or numba), and
what it carries (kernels, copies, host calls, shapes, counters, ranks). :data:`REFUSED` holds
the files people bring that are not read here, each with the one line that says how to get a
file that is (``nsys export`` for an ``.nsys-rep``).

Everything that must know the formats asks this module: :func:`engine.trace.read.read_trace`
(which importer), the analysis's folder listing (:func:`listed`), ``analyze --help``
(:func:`help_text`), ``doctor`` (:func:`doctor_line`), the format table of docs/analyze.md
(:func:`markdown_table`; a test keeps the file equal to it) and the error for a file nothing
claims (:func:`unknown_line`). Nothing outside engine.trace sniffs a format (a test greps).

Order matters: a file goes to the first format that claims it, so the specific sniffs come
first and Chrome-trace JSON, which takes whatever JSON is left, comes last.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.trace.errors import TraceImportError
from engine.trace.files import open_regular

if TYPE_CHECKING:
    from engine.trace.trace import Trace

#: what a reader is given besides the path (each reader takes what it uses; see ReadHow)
SNIFF_BYTES = 4096
_GZIP = b"\x1f\x8b"
_SQLITE = b"SQLite format 3\x00"

#: the facts a format can carry, in the order the docs' table lists them
CARRIES = ("kernels", "copies", "host calls", "cpu operators", "shapes", "counters", "ranks")


@dataclass(frozen=True)
class ReadHow:
    """How a file is read, whatever its format. ``interpreted``: a first run — a reader with a
    compiled scanner tries its Python twin first and calls ``declined`` when the twin leaves
    the file to the compiled one; ``merge_idle``: runs of calls that only take host time kept
    as one row, exact at the times it names (engine.trace.idle_calls)."""

    interpreted: bool = False
    declined: Callable[[], None] | None = None
    merge_idle: Callable[[Trace], Sequence[int]] | None = None


@dataclass(frozen=True)
class Peek:
    """What a sniff sees of a file: its first bytes as stored and, for a gzip file, the first
    decompressed bytes (at most SNIFF_BYTES of either; empty where the file cannot be read —
    the reader it goes to then says why)."""

    path: Path
    raw: bytes
    text: bytes
    is_dir: bool = False


@dataclass(frozen=True)
class Format:
    """One importer as the rest of the tool sees it."""

    #: the name analysis.json's ``device_properties.format`` carries ("kineto", "nsys", …)
    name: str
    #: what a person calls it, for --help and the docs
    title: str
    #: how to produce one (a command), for the docs' table
    produce: str
    #: suffixes a folder listing takes as this format's files (".json.gz", ".sqlite", …)
    suffixes: tuple[str, ...]
    #: whether a file (or, with ``Peek.is_dir``, a folder) is this format's, from a Peek
    sniff: Callable[[Peek], bool]
    #: reads (path, ReadHow) into a Trace; it imports its importer when called, so listing
    #: the formats loads no reader
    reader: Callable[[Path, ReadHow], Trace]
    #: what its rows carry (a subset of CARRIES)
    carries: tuple[str, ...]
    #: whether a folder listing should also ask the sniff of files with a listed suffix that
    #: another format shares (".db": only rocpd's databases are traces)
    check_listed: bool = False
    #: whether one trace is a whole folder (rocprofv3's CSV files): its files are not listed
    #: one by one, and a folder it claims is one trace
    whole_folder: bool = False

    def read(self, path: Path, how: ReadHow) -> Trace:
        return self.reader(path, how)


@dataclass(frozen=True)
class Refused:
    """A kind of file people bring that gitm-tui does not read, and what to do instead."""

    title: str
    suffixes: tuple[str, ...]
    sniff: Callable[[Peek], bool]
    line: str


# --- the sniffs: cheap, on the first bytes only; the readers check everything else ---------


def _is_rocprof_csv(p: Peek) -> bool:
    if p.is_dir:
        from engine.trace.rocprof.rocprof_csv import is_rocprof_dir

        return is_rocprof_dir(p.path)
    from engine.trace.rocprof.rocprof_csv import looks_like_rocprof_csv

    return looks_like_rocprof_csv(p.raw)


def _is_rocpd(p: Peek) -> bool:
    if not p.raw.startswith(_SQLITE):
        return False
    from engine.trace.rocprof.rocpd import is_rocpd

    return is_rocpd(p.path)


def _is_sqlite(p: Peek) -> bool:
    return p.raw.startswith(_SQLITE)


def _is_rocprof_json(p: Peek) -> bool:
    from engine.trace.rocprof.rocprof_json import looks_like_rocprof_json

    return not p.is_dir and looks_like_rocprof_json(p.text)


def _is_pftrace(p: Peek) -> bool:
    from engine.trace.rocprof.rocprof_pftrace import looks_like_pftrace

    if p.is_dir:
        return False
    return looks_like_pftrace(p.text) or p.path.name.lower().endswith((".pftrace", ".pftrace.gz"))


def _is_json(p: Peek) -> bool:
    # whatever else is JSON, or not recognised at all: the Chrome-trace reader says why not
    return not p.is_dir


def _suffix_is(*suffixes: str) -> Callable[[Peek], bool]:
    return lambda p: p.path.name.lower().endswith(suffixes)


# --- the readers' adapters: (path, ReadHow) → Trace ---------------------------------------


def _merged(trace: Trace, how: ReadHow) -> Trace:
    if how.merge_idle is not None and len(trace.host) > 1:
        from engine.trace.idle_calls import merge_idle_calls

        merge_idle_calls(trace.host, trace.segments.correlation, how.merge_idle(trace))
    return trace


def read_kineto_file(path: Path, how: ReadHow) -> Trace:
    from engine.trace.kineto.kineto import read_kineto

    return read_kineto(
        path, interpreted=how.interpreted, declined=how.declined, merge_idle=how.merge_idle
    )


def read_nsys_file(path: Path, how: ReadHow) -> Trace:
    from engine.trace.nsys.nsys import read_nsys

    return _merged(read_nsys(path), how)


def read_rocpd_file(path: Path, how: ReadHow) -> Trace:
    from engine.trace.rocprof.rocpd import read_rocpd

    return _merged(read_rocpd(path), how)


def read_rocprof_json_file(path: Path, how: ReadHow) -> Trace:
    from engine.trace.rocprof.rocprof_json import read_rocprof_json

    return _merged(read_rocprof_json(path), how)


def read_rocprof_pftrace_file(path: Path, how: ReadHow) -> Trace:
    from engine.trace.rocprof.rocprof_pftrace import read_rocprof_pftrace

    return _merged(read_rocprof_pftrace(path), how)


def read_rocprof_csv_file(path: Path, how: ReadHow) -> Trace:
    from engine.trace.rocprof.rocprof_csv import read_rocprof_csv

    return read_rocprof_csv(path)


#: the importers, in the order a file is offered to them
FORMATS: tuple[Format, ...] = (
    Format(
        name="rocprofv3-csv",
        title="rocprofv3 CSV output (a folder, or one of its files)",
        produce="rocprofv3 --kernel-trace --memory-copy-trace --output-format csv -d OUT -- APP",
        suffixes=(".csv",),
        sniff=_is_rocprof_csv,
        reader=read_rocprof_csv_file,
        carries=("kernels", "copies", "host calls", "counters"),
        whole_folder=True,
    ),
    Format(
        name="rocpd",
        title="rocpd SQLite database (rocprofv3 --output-format rocpd)",
        produce="rocprofv3 --kernel-trace --output-format rocpd -d OUT -- APP",
        suffixes=(".db",),
        sniff=_is_rocpd,
        reader=read_rocpd_file,
        carries=("kernels", "copies", "host calls", "counters"),
        check_listed=True,
    ),
    Format(
        name="nsys",
        title="Nsight Systems SQLite export",
        produce="nsys export --type sqlite --output REPORT.sqlite REPORT.nsys-rep",
        suffixes=(".sqlite",),
        sniff=_is_sqlite,
        reader=read_nsys_file,
        carries=("kernels", "copies", "host calls"),
    ),
    Format(
        name="rocprofv3-json",
        title="rocprofv3 JSON output (plain or .gz)",
        produce="rocprofv3 --kernel-trace --memory-copy-trace --output-format json -d OUT -- APP",
        suffixes=(".json", ".json.gz"),
        sniff=_is_rocprof_json,
        reader=read_rocprof_json_file,
        carries=("kernels", "copies", "host calls", "counters"),
    ),
    Format(
        name="rocprofv3-pftrace",
        title="rocprofv3 Perfetto trace (.pftrace)",
        produce="rocprofv3 --kernel-trace --memory-copy-trace --hip-trace --output-format pftrace "
        "-d OUT -- APP",
        suffixes=(".pftrace", ".pftrace.gz"),
        sniff=_is_pftrace,
        reader=read_rocprof_pftrace_file,
        carries=("kernels", "copies", "host calls"),
    ),
    Format(
        name="kineto",
        title="PyTorch profiler / Kineto JSON (plain or .gz; PyTorch 1.8 and later)",
        produce="torch.profiler.profile(...).export_chrome_trace('trace.json')",
        suffixes=(".json", ".json.gz"),
        sniff=_is_json,
        reader=read_kineto_file,
        carries=("kernels", "copies", "host calls", "cpu operators", "shapes", "counters", "ranks"),
    ),
)

_NSYS_EXPORT = (
    "an Nsight Systems report, which gitm-tui reads once exported: "
    "nsys export --type sqlite --output REPORT.sqlite REPORT.nsys-rep, then "
    "gitm-tui analyze REPORT.sqlite"
)

#: files people bring that are not read here, checked before any format, by content or name
REFUSED: tuple[Refused, ...] = (
    Refused(
        title="Nsight Systems report (.nsys-rep, .qdrep)",
        suffixes=(".nsys-rep", ".qdrep"),
        sniff=_suffix_is(".nsys-rep", ".qdrep"),
        line=_NSYS_EXPORT,
    ),
    Refused(
        title="Nsight Compute report (.ncu-rep)",
        suffixes=(".ncu-rep",),
        sniff=_suffix_is(".ncu-rep"),
        line="an Nsight Compute report: per-kernel metrics with no timeline, which gitm-tui "
        "does not read; record a timeline with nsys profile (then nsys export --type sqlite) "
        "or the PyTorch profiler",
    ),
    Refused(
        title="Nsight Systems capture in progress (.qdstrm)",
        suffixes=(".qdstrm",),
        sniff=_suffix_is(".qdstrm"),
        line="an unfinished Nsight Systems capture (.qdstrm): let nsys finish it into an "
        ".nsys-rep, then nsys export --type sqlite",
    ),
)


def peek(path: Path) -> Peek:
    """The first bytes of ``path`` (and, gzipped, of its content) for the sniffs; a folder is
    a Peek with ``is_dir``. A file that cannot be opened peeks as empty (its reader says why)."""
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            return Peek(path, b"", b"", is_dir=True)
    except OSError:
        return Peek(path, b"", b"")
    try:
        with open_regular(path) as f:
            raw = f.read(SNIFF_BYTES)
    except (TraceImportError, OSError):
        return Peek(path, b"", b"")
    text = raw
    if raw.startswith(_GZIP):
        try:  # the first bytes of the first member; a damaged stream peeks as nothing
            text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, SNIFF_BYTES)
        except zlib.error:
            text = b""
    return Peek(path, raw, text)


def refused(p: Peek) -> Refused | None:
    """The refusal for a file gitm-tui does not read, if it is one."""
    return next((r for r in REFUSED if r.sniff(p)), None)


def format_of(path: Path) -> Format:
    """The format that reads ``path``: the first whose sniff claims it. TraceImportError (one
    line) for a file people bring that is not read here (with what to do instead), and for a
    folder nothing claims."""
    p = peek(path)
    if (r := refused(p)) is not None:
        raise TraceImportError(path, r.line)
    for fmt in FORMATS:
        if fmt.sniff(p):
            return fmt
    raise TraceImportError(path, unknown_line())


def by_name(name: str) -> Format:
    """The format of this name (KeyError for none)."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise KeyError(name)


def carries(name: object, what: str) -> bool:
    """Whether the format of this name (a trace's ``device_properties["format"]``) carries
    ``what`` (one of CARRIES); False for a name no format has (a live CUPTI capture's)."""
    assert what in CARRIES, what
    return any(fmt.name == name and what in fmt.carries for fmt in FORMATS)


def listed(f: Path) -> bool:
    """Whether a file in a folder being listed is a trace to analyse: a suffix some format
    takes (and, for a suffix such as ``.db``, that format's sniff), or a refused kind (listed
    so that it gets its one line instead of being silently skipped)."""
    name = f.name.lower()
    if name.endswith(tuple(s for r in REFUSED for s in r.suffixes)):
        return True
    for fmt in FORMATS:
        if name.endswith(fmt.suffixes):
            if fmt.whole_folder:
                return False  # its folder is the trace, read whole (see is_trace_folder)
            return not fmt.check_listed or fmt.sniff(peek(f))
    return False


def is_trace_folder(folder: Path) -> bool:
    """Whether a folder is itself one trace (a rocprofv3 CSV output), not a folder of traces."""
    p = Peek(folder, b"", b"", is_dir=True)
    return any(fmt.sniff(p) for fmt in FORMATS if fmt.whole_folder)


def suffixes() -> tuple[str, ...]:
    """Every suffix a format lists in a folder, for a remote folder's listing."""
    return tuple(dict.fromkeys(s for fmt in FORMATS if not fmt.whole_folder for s in fmt.suffixes))


def unknown_line() -> str:
    """The error for a file no format claims."""
    names = "; ".join(fmt.title for fmt in FORMATS)
    return f"not a trace gitm-tui reads (it reads: {names})"


def help_text() -> str:
    """The formats, for ``analyze --help``'s description."""
    return "; ".join(fmt.title for fmt in FORMATS)


def doctor_line() -> str:
    """The formats, for ``gitm-tui doctor``."""
    return ", ".join(fmt.name for fmt in FORMATS) + " (gitm-tui analyze)"


def markdown_table() -> str:
    """docs/analyze.md's table of formats (a test keeps the file equal to this)."""
    head = "| format | how to produce it | what it carries |\n|---|---|---|\n"
    rows = [f"| {fmt.title} | `{fmt.produce}` | {', '.join(fmt.carries)} |" for fmt in FORMATS] + [
        f"| {r.title} | not read: {r.line} | — |" for r in REFUSED
    ]
    return head + "\n".join(rows) + "\n"
