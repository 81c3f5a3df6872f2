"""The machinery under the analysis's front door (engine.analyze.api): expand directories,
import by format, analyse each file here or on Dask (engine.analyze.cluster), collect errors."""

from __future__ import annotations

import os
import re
import stat
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.analyze.breakdown.model import Analysis
from engine.analyze.breakdown.steady import exact_at
from engine.analyze.compute import AnalysisResult, analyze_trace
from engine.analyze.options import AnalyzeOptions, Hooks
from engine.analyze.output.export import write_outputs
from engine.analyze.remote import expand_url, is_url, local_copy, url_name
from engine.analyze.warm import kernels, side_by_side_here
from engine.jit import (
    cold,
    compile_elsewhere,
    compiling_elsewhere,
    compiling_since,
    interpreted,
    numba_in_use,
    wait_compiled,
)
from engine.trace.errors import TraceImportError
from engine.trace.files import not_regular
from engine.trace.formats import carries, is_trace_folder, listed, suffixes
from engine.trace.read import read_trace
from engine.trace.trace import Trace

if TYPE_CHECKING:  # (a file analysed alone never imports the cross-rank module)
    from engine.analyze.advice.peers import PeerBounds
    from engine.analyze.breakdown.cpu_trace import CpuSummary
    from engine.analyze.cluster import Workers
    from engine.analyze.ranks.ranks import RankSummary

#: a rank's part of a job's merged Perfetto file: (rank, clock shift ns, its file, after a comma)
Part = tuple[int, int, str, bool]

#: what a remote folder's listing takes (engine.trace.formats: every format's suffixes)
TRACE_SUFFIXES = suffixes()


@dataclass(frozen=True)
class FileOutcome:
    """One input file's result: an analysis and where it was written, or one error line."""

    path: str
    analysis: Analysis | None = None
    outputs: tuple[str, ...] = ()
    error: str | None = None
    #: what crossing ranks needs of this file (engine.analyze.ranks.ranks): a few kB, never events
    summary: RankSummary | None = None
    #: the analysis with its rows, decoded labels and trace (AnalyzeOptions.keep_arrays: what a
    #: screen draws; a file analysed here only)
    result: AnalysisResult | None = None
    #: a Kineto trace with no GPU row: what its CPU events say (engine.analyze.breakdown.cpu_trace), in
    #: place of an analysis — not an error, and never crossed with the ranks
    cpu: CpuSummary | None = None
    #: its part of the job's merged Perfetto file, made (``analyze_file``'s ``part``): CRC-32
    #: and length (engine.analyze.output.rank_export.write_part)
    part: tuple[int, int] | None = None


def expand(paths: list[str]) -> tuple[list[str], list[FileOutcome]]:
    """Return the trace files named or contained (one level) in ``paths``, and per-path errors
    (a path that does not exist, cannot be listed or is not a regular file: a FIFO or a device
    would block or never end). An fsspec URL (``s3://…``) is listed with fsspec
    (engine.analyze.remote) and read by the worker that analyses it."""
    files: list[str] = []
    errors: list[FileOutcome] = []
    for raw in paths:
        if is_url(raw):
            found, why = expand_url(raw, TRACE_SUFFIXES)
            files.extend(found)
            if why is not None:
                errors.append(FileOutcome(raw, error=why))
            continue
        p = Path(raw)
        try:
            mode = p.stat().st_mode
        except FileNotFoundError:
            errors.append(FileOutcome(str(p), error=f"{p}: no such file or directory"))
            continue
        except OSError as e:
            errors.append(FileOutcome(str(p), error=f"{p}: cannot read: {e.strerror or e}"))
            continue
        if stat.S_ISDIR(mode) and is_trace_folder(p):  # one rocprofv3 CSV output: one trace
            files.append(raw)
        elif stat.S_ISDIR(mode):
            try:
                found = sorted(str(f) for f in p.iterdir() if _is_trace_file(f))
            except OSError as e:
                errors.append(
                    FileOutcome(str(p), error=f"{p}: cannot list directory: {e.strerror or e}")
                )
                continue
            if not found:
                errors.append(
                    FileOutcome(
                        str(p),
                        error=f"{p}: no trace files ({', '.join(TRACE_SUFFIXES)}) in "
                        "this directory",
                    )
                )
            files.extend(found)
        elif (problem := not_regular(mode)) is not None:
            errors.append(FileOutcome(str(p), error=f"{p}: {problem}"))
        else:
            files.append(raw)
    return _once(files), errors


def _once(files: list[str]) -> list[str]:
    """Each file once, in first-named order: a file named twice (``ranks/`` and
    ``ranks/rank1.json``, or two spellings of one path) would be analysed twice, its outputs
    written to one folder, and its rank counted twice — which made the ranks look like no
    single job's and stopped the cross-rank comparison."""
    seen: set[str] = set()
    out = []
    for f in files:
        key = f if is_url(f) else os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _is_trace_file(f: Path) -> bool:
    """A regular file a format lists (engine.trace.formats.listed: a trace's suffix, and for a
    ``.db`` a rocpd database — rocprofv3's ``<pid>_results.db``, one per process: its ranks);
    one that cannot be stat'ed is left out."""
    try:
        return stat.S_ISREG(f.stat().st_mode) and listed(f)
    except OSError:
        return False


#: characters a folder name never carries (C0 and C1 controls, DEL, bidirectional overrides):
#: a file named with an escape sequence made a folder whose name, listed by `ls` in a
#: terminal, ran that escape
_UNSAFE_IN_NAMES = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _stem(name: str) -> str:
    """The output folder's name for a file named ``name``: its suffix dropped, every control
    and bidirectional-override character as ``_``."""
    for s in sorted(suffixes(), key=len, reverse=True):
        if name.endswith(s):
            name = name.removesuffix(s)
            break
    name = _UNSAFE_IN_NAMES.sub("_", name)
    return name if name not in ("", ".", "..") else "trace"


def output_names(files: list[str]) -> dict[str, str]:
    """Each file's output folder: its name without suffixes; where two files share one
    (``a/trace.json`` and ``b/trace.json``), its parent's name joins it (``a_trace``), and a
    number where that still collides — no file's outputs overwrite another's."""
    full = {f: (url_name(f) if is_url(f) else Path(f).name) for f in files}
    stems = {f: _stem(n) for f, n in full.items()}
    count: dict[str, int] = defaultdict(int)
    for v in stems.values():
        count[v] += 1
    out: dict[str, str] = {}
    used: set[str] = set()
    for f in files:
        stem = stems[f]
        if count[stem] > 1:
            segs = f.rstrip("/").replace("\\", "/").split("/")
            parent = _UNSAFE_IN_NAMES.sub("_", segs[-2]) if len(segs) >= 2 and segs[-2] else "x"
            stem = f"{parent}_{stem}"
        base, k = stem, 1
        while stem in used:
            k += 1
            stem = f"{base}-{k}"
        used.add(stem)
        out[f] = stem
    return out


def load_trace(
    path: str,
    interpreted: bool = False,
    declined: Callable[[], None] | None = None,
    merge_idle: Callable[[Trace], Sequence[int]] | None = None,
) -> Trace:
    """Import a file, or a URL read through fsspec into a temporary copy (its source stays the
    URL); TraceImportError for anything that cannot be read. ``merge_idle``: see read_trace."""
    if not is_url(path):
        return read_trace(Path(path), interpreted, declined, merge_idle)
    with local_copy(path) as copy:
        try:
            trace = read_trace(copy, interpreted, declined, merge_idle)
        except TraceImportError as e:  # named by its URL, not by the temporary copy
            raise TraceImportError(path, e.problem) from None
    trace.source = path
    return trace


#: GPU rows up to which a first run analyses with interpreted kernels (engine.jit.interpreted)
#: instead of waiting for them to compile: 1.9 s for the 9,450 rows of the 109k-event trace
#: here, against ~7 s of compiling; the replays' share is bounded by the steady-state window
INTERPRET_MAX_ROWS = 30_000


#: A file up to this size, in a process that has not loaded numba yet, is read and analysed
#: interpreted (engine.jit.interpreted) where AnalyzeOptions.first_run allows: numba is then
#: never imported, which
#: with loading its kernels' machine code is ~0.25 s of a small analysis, more than
#: interpreting its rows costs (benchmarks/results/fixed_cost.md has the measurement behind
#: both numbers). A file that turns out to hold more than LEAN_MAX_ROWS GPU rows is analysed
#: compiled after all.
LEAN_MAX_BYTES = 256 * 1024
LEAN_MAX_ROWS = 1_000


#: a job's first round (engine.analyze.api) keeps each trace it read for the second, which
#: analyses it, up to this many bytes of arrays in a process (a worker's, or this one's when
#: the files are analysed here): a 109k-event rank's trace is ~2 MB (its host rows merged), so
#: the ranks a worker reads are all kept until they outgrow it; past it, a rank is read again
KEEP_BYTES = 256 << 20
_kept: dict[tuple[str, int, int, str], tuple[Trace, int]] = {}


def _kept_key(path: str, options: AnalyzeOptions) -> tuple[str, int, int, str] | None:
    if is_url(path):
        return None  # its local copy is gone: read again
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path, st.st_mtime_ns, st.st_size, options.counting)


def _nbytes(trace: Trace) -> int:
    """The bytes of the trace's columns (what keeping it holds)."""
    total = 0
    for part in (trace.segments, trace.host, trace.top_ops, trace.names):
        for v in vars(part).values() if hasattr(part, "__dict__") else ():
            total += getattr(v, "nbytes", 0)
    return total


def keep_trace(path: str, options: AnalyzeOptions, trace: Trace) -> bool:
    """Keep ``trace`` (read from ``path``) for the job's second round, if it fits KEEP_BYTES."""
    key = _kept_key(path, options)
    size = _nbytes(trace)
    if key is None or sum(n for _, n in _kept.values()) + size > KEEP_BYTES:
        return False
    _kept[key] = (trace, size)
    return True


def kept_trace(path: str, options: AnalyzeOptions) -> Trace | None:
    """The trace the job's first round kept for ``path`` (taken: kept once), if the file is
    unchanged since."""
    key = _kept_key(path, options)
    got = _kept.pop(key, None) if key is not None else None
    return got[0] if got is not None else None


def forget_kept() -> int:
    """Drop every trace kept (the job is over); how many there were."""
    n = len(_kept)
    _kept.clear()
    return n


def lean(path: str) -> bool:
    """Whether ``path`` is read and analysed without numba (see LEAN_MAX_BYTES)."""
    if numba_in_use() or is_url(path):
        return False
    try:
        return os.stat(path).st_size <= LEAN_MAX_BYTES
    except OSError:
        return False


class FirstRun:
    """A first run after an install, when kernels are missing from numba's disk cache: a child
    compiles them for the next run (engine.analyze.warm), while this run reads with the JSON
    scanner's Python twin and analyses a small trace with interpreted kernels — the same
    results, without waiting. Only a large trace waits for the analysis kernels. A run that
    finds an earlier run's child still compiling starts none of its own (each extra child
    waited on the first's lock holding its own memory: six runs in a row after an install had
    six, at 2.2-3.7 s and 245 MB each) and waits on that child where it would wait on its own."""

    def __init__(self) -> None:
        self.read = cold(kernels("import"))
        self.analysis = cold(kernels("analysis"))
        kinds = [k for k, c in (("analysis", self.analysis), ("import", self.read)) if c]
        #: seconds the earlier run's child has been compiling, when one is
        self.since = compiling_since("analyze") if kinds else None
        self.child = None
        if kinds and self.since is None:
            self.child = compile_elsewhere("engine.analyze.warm", *kinds)

    def note(self) -> str:
        """What the reading line says of the compile (empty when the cache is warm)."""
        if self.since is not None:
            return (
                " — first runs: kernels still compiling in the background (an earlier run's, "
                f"{self.since:.0f} s so far; about 20 s on 2 cores, once)"
            )
        return " — first run, kernels compiling in the background for the next run (once)"

    def _compiler_alive(self) -> bool:
        if self.child is not None:
            return self.child.poll() is None
        return self.since is not None and compiling_elsewhere("analyze")

    def compiling(self) -> bool:
        """Whether a child (this run's or an earlier run's) still compiles kernels the cache
        lacks."""
        if not self._compiler_alive():
            return False
        return cold(kernels("analysis")) or cold(kernels("import"))

    def read_cold(self) -> bool:
        """Whether to read with the scanner's twin (the reader is not compiled yet)."""
        self.read = self.read and cold(kernels("import"))
        return self.read

    def interpret(self, rows: int) -> bool:
        """Whether to analyse ``rows`` GPU rows interpreted (else: compiled, waiting if need be)."""
        if not self.analysis or not cold(kernels("analysis")):
            return False
        return rows <= INTERPRET_MAX_ROWS  # larger: compiled (by the child, or here)

    def wait_analysis(self, say: Callable[[str], None]) -> None:
        """Wait until the child has compiled the analysis kernels (or has stopped)."""
        if not self.analysis or (self.child is None and self.since is None):
            return
        say("first run: waiting for the analysis kernels to compile (once)…")
        self._wait("analysis")
        self.analysis = False

    def wait_reader(self, say: Callable[[str], None], line: str) -> bool:
        """For a file the scanner's twin leaves to the compiled reader: wait for the child's
        reader, where the child compiles it in a process of its own from the start (its
        warm-up side by side: engine.analyze.warm) — compiling it here too would compile it
        twice at once, ~300 MB more for nothing; whether it is compiled now (False: compile it
        here, as on 2 cores, where the child compiles the analysis kernels first). ``line``
        is said when it waits."""
        if (self.child is None and self.since is None) or not side_by_side_here():
            return False
        say(line)
        self._wait("import")
        return not cold(kernels("import"))

    def _wait(self, kind: str) -> None:
        """Wait until the compiler is done with ``kind`` or gone (180 s at most: then it is
        stopped, and what is missing compiles here)."""
        deadline = time.monotonic() + 180
        while cold(kernels(kind)) and self._compiler_alive():
            if time.monotonic() > deadline:
                if self.child is not None:
                    wait_compiled(self.child, 0)  # stops it: what is missing compiles here
                return
            time.sleep(0.05)

    def done(self) -> None:
        """The run is over: a child still compiling goes on for the next run (reaped here by a
        daemon thread while this process lives, by init after)."""
        if self.child is not None and self.child.poll() is None:
            threading.Thread(target=self.child.wait, daemon=True).start()


def read_and_analyse(
    path: str,
    options: AnalyzeOptions,
    stage: Callable[[str], None] | None = None,
    first: FirstRun | None = None,
    on_trace: Callable[[Trace], None] | None = None,
    peers: PeerBounds | None = None,
) -> AnalysisResult:
    """Read one file and analyse it as ``options`` say (hardware, top, counting); raise
    TraceImportError. ``stage`` hears what is being done (a line); ``first``: a first run (see
    FirstRun: the twin reader, interpreted kernels or a wait for the child, each said);
    ``on_trace`` sees the trace before it is analysed; ``peers``: its collectives' peers
    (engine.analyze.job: the replay holds the collectives to them)."""
    hardware, top, counting = options.hardware, options.top, options.counting
    say = stage or (lambda _line: None)
    trace, was_lean = read_only(path, options, say, first, on_trace)
    rows = len(trace.segments)
    if was_lean:  # a small file: no numba at all (LEAN_MAX_BYTES), unless it holds many rows
        say(f"{rows:,} GPU rows: decoding regimes, replaying levers…")
        if rows <= LEAN_MAX_ROWS:
            with interpreted():
                return analyze_trace(trace, hardware, top, counting, peers)
        return analyze_trace(trace, hardware, top, counting, peers)
    if first is not None and first.interpret(rows):
        say(f"{rows:,} GPU rows: decoding regimes, replaying levers (first run: interpreted)…")
        with interpreted():
            return analyze_trace(trace, hardware, top, counting, peers)
    if first is not None:
        first.wait_analysis(say)
    say(f"{rows:,} GPU rows: decoding regimes, replaying levers…")
    return analyze_trace(trace, hardware, top, counting, peers)


def read_only(
    path: str,
    options: AnalyzeOptions,
    say: Callable[[str], None],
    first: FirstRun | None = None,
    on_trace: Callable[[Trace], None] | None = None,
) -> tuple[Trace, bool]:
    """Read one file as read_and_analyse reads it — a small file without numba (``lean``; then
    ``on_trace`` runs interpreted too), a first run's with the scanner's twin — and return the
    trace and whether it was read lean; raise TraceImportError."""
    p = Path(url_name(path) if is_url(path) else path)
    was = kept_trace(path, options)
    if was is not None:  # read by the job's first round, here
        say(f"{p.name}: read in the first round…")
        if on_trace is not None:
            on_trace(was)
        return was, options.first_run and lean(path)
    # every call, as read, when counting as HTA does (it counts host events); otherwise runs of
    # calls that only take host time as one row each, exact for the levers' replay window
    merge = exact_at if options.counting == "exact" else None
    if options.first_run and lean(path):
        say(f"reading {p.name}…")
        try:
            with interpreted():
                trace = load_trace(path, interpreted=True, declined=_decline, merge_idle=merge)
                if on_trace is not None:
                    on_trace(trace)
            return trace, True
        except _NeedsNumba:  # the twin declined it: the compiled reader says what is wrong
            pass
    cold_read = first is not None and first.read_cold()
    note = first.note() if first is not None and cold_read else ""
    say(f"reading {p.name}{note}…")

    def declined() -> None:  # a large file: the child's reader, or one compiled here
        if not cold(kernels("import")):
            return
        waiting = f"reading {p.name} — first run: waiting for the trace reader to compile (once)…"
        if first is not None and first.wait_reader(say, waiting):
            return
        say(f"reading {p.name} — first run: compiling the trace reader (once)…")

    trace = load_trace(path, interpreted=cold_read, declined=declined, merge_idle=merge)
    if on_trace is not None:
        on_trace(trace)
    return trace, False


class _NeedsNumba(Exception):
    """The scanner's Python twin declined a small file (bad JSON, a limit passed): read it
    through numba, whose reader says what is wrong where it finds it."""


def _decline() -> None:
    raise _NeedsNumba


def analyze_file(
    path: str,
    options: AnalyzeOptions,
    stage: Callable[[str], None] | None = None,
    first: FirstRun | None = None,
    out_name: str | None = None,
    ranks: bool | None = None,
    peers: PeerBounds | None = None,
    summary_only: bool = False,
    part: Part | None = None,
) -> FileOutcome:
    """Import, analyse and write (under ``options.out_root``) one file — a path, or a URL read
    here through fsspec; never raises for bad input (returns the error line). ``stage`` hears
    what is being done (a line); ``first``: a first run (see FirstRun); ``out_name``: the
    folder under ``out_root`` (default: the file's name without its suffixes; see
    ``output_names``); ``ranks``: keep what crossing ranks needs (``FileOutcome.summary``;
    default ``options.ranks``; a file analysed alone has no other rank to cross: 40-50 ms
    saved on a 2 M-event trace); ``peers``: its collectives' peers (see read_and_analyse).
    ``summary_only``: a job's first round (engine.analyze.api) — a GPU trace is read for its
    rank summary alone (an outcome with ``summary`` and no analysis: its analysis comes once
    the ranks are crossed); any other file gets its whole outcome (its error line, its CPU
    summary), as without it. ``part``: (rank, clock shift in ns, where, after a comma) — with
    its outputs, its part of the job's merged Perfetto file is made from the analysis
    (``FileOutcome.part``; a part that cannot be written is left to the merge to make)."""
    p = Path(url_name(path) if is_url(path) else path)
    summaries: list[RankSummary] = []
    keep = options.ranks if ranks is None else ranks
    gpu_free: list[bool] = []  # the file was read and holds no GPU row (a Kineto CPU profile)

    def seen(t: Trace) -> None:
        props = t.device_properties
        gpu_free.append(
            carries(props.get("format"), "cpu operators")
            and not len(t.segments)
            and not props.get("mtia_events")
        )
        if keep and not gpu_free[-1]:
            from engine.analyze.ranks.ranks import summarize

            summaries.append(summarize(t))

    if not is_url(path):
        from engine.trace.kineto.cpu_events import cpu_profile

        if cpu_profile(path):  # it says it is a CPU-only profile: read once, for its CPU events
            got = cpu_outcome(path, options, stage, first, out_name, device_rows_ok=False)
            if got is not None:
                return got  # (None: a device row after all, the GPU reader's)
    if summary_only:
        keep = True
        try:
            trace, _ = read_only(path, options, stage or (lambda _line: None), first, seen)
        except TraceImportError as e:
            if not (gpu_free and gpu_free[0]):
                return FileOutcome(path, error=str(e))  # (else: its CPU events, below)
        else:
            if summaries and len(trace.segments):
                keep_trace(path, options, trace)
                return FileOutcome(path, summary=summaries[0])
        summaries.clear()  # not a GPU rank: its whole outcome, as without summary_only
        gpu_free.clear()
    try:
        res = read_and_analyse(path, options, stage, first, seen, peers)
        summary = summaries[0] if summaries else None
    except TraceImportError as e:
        if gpu_free and gpu_free[0]:  # read, but nothing for the GPU analysis: its CPU events
            got = cpu_outcome(path, options, stage, first, out_name)  # (None only when asked)
            return got if got is not None else FileOutcome(path, error=str(e))
        return FileOutcome(path, error=str(e))
    kept = res if options.keep_arrays else None
    outputs: tuple[str, ...] = ()
    own: list[str] | None = None  # perfetto.json's events, made with the part's (one pass)
    merged: list[str] | None = None
    if options.out_root is not None:
        out_root = options.out_root
        stem = out_name or _stem(p.name)
        if part is not None:
            from engine.analyze.output.export import perfetto_placed

            own, merged = perfetto_placed(res, [None, (part[0], part[1])])
        try:
            outputs = tuple(str(x) for x in write_outputs(res, Path(out_root) / stem, own))
        except OSError as e:
            return FileOutcome(
                path,
                analysis=res.analysis,
                error=f"{path}: cannot write outputs to {out_root}: {e.strerror or e}",
                summary=summary,
                result=kept,
            )
    made = None
    if part is not None and outputs and merged is not None:
        from engine.analyze.output.rank_export import write_part

        try:
            made = write_part(merged, part[2], part[3])
        except OSError:
            made = None  # the merge converts the rank's perfetto.json instead
    return FileOutcome(
        path, analysis=res.analysis, outputs=outputs, summary=summary, result=kept, part=made
    )


def cpu_outcome(
    path: str,
    options: AnalyzeOptions,
    stage: Callable[[str], None] | None = None,
    first: FirstRun | None = None,
    out_name: str | None = None,
    device_rows_ok: bool = True,
) -> FileOutcome | None:
    """The outcome of a Kineto trace with no GPU row: its CPU summary (engine.analyze.breakdown.cpu_trace)
    and, under ``options.out_root``, cpu_summary.json; or its one error line (neither CPU
    operators nor ProfilerSteps in it, a file that cannot be read). ``device_rows_ok`` False:
    the file is read here first (cpu_trace.cpu_profile), and None is returned when it holds a
    device row after all. A small file is read by the scanner's twin (``lean``)."""
    import json

    from engine.analyze.breakdown.cpu_trace import cpu_dict, read_cpu_profile, read_cpu_summary
    from engine.store.runs import atomic_write_text
    from engine.text import escape_json_text

    p = Path(url_name(path) if is_url(path) else path)
    if stage is not None:
        said = "a CPU-only profile" if not device_rows_ok else "no GPU rows"
        stage(f"{p.name}: {said} — reading its CPU operators and steps…")
    small = options.first_run and lean(path)
    cold_read = small or (first is not None and first.read_cold())
    try:
        if is_url(path):
            with local_copy(path) as copy:
                cpu = read_cpu_summary(copy, options.top, path, interpreted=cold_read)
        elif not device_rows_ok:
            found = read_cpu_profile(path, options.top, interpreted=cold_read)
            if found is None:
                return None
            cpu = found
        else:
            cpu = read_cpu_summary(path, options.top, interpreted=cold_read)
    except TraceImportError as e:
        return FileOutcome(path, error=f"{path}: {e.problem}")
    if options.out_root is None:
        return FileOutcome(path, cpu=cpu)
    out = Path(options.out_root) / (out_name or _stem(p.name)) / "cpu_summary.json"
    try:
        text = json.dumps(cpu_dict(cpu), indent=2, ensure_ascii=False)
        atomic_write_text(out, escape_json_text(text) + "\n")
    except OSError as e:
        return FileOutcome(
            path,
            error=f"{path}: cannot write outputs to {options.out_root}: {e.strerror or e}",
            cpu=cpu,
        )
    return FileOutcome(path, outputs=(str(out),), cpu=cpu)


def crashed(path: str, e: Exception) -> str:
    """The error line of a file whose analysis raised ``e`` (a bug in gitm-tui, not bad input:
    that is analyze_file's own error line), its traceback saved beside the command's crash
    reports — a run of many files goes on, as it does on a cluster."""
    from engine.store.runs import save_crash

    return (
        f"{path}: not analysed: internal error {e!r} — a bug in gitm-tui; the traceback is in "
        f"{save_crash(e)} (please include it in a report)"
    )


def analyze_files(
    paths: list[str], options: AnalyzeOptions, hooks: Hooks | None = None
) -> list[FileOutcome]:
    """Every file's outcome, in input order (engine.analyze.api.analyze is the front door: it
    crosses the ranks too): the paths listed (``expand``), then ``analyze_listed``."""
    files, outcomes = expand(paths)
    return outcomes + analyze_listed(files, options, hooks)


def analyze_listed(
    files: list[str],
    options: AnalyzeOptions,
    hooks: Hooks | None = None,
    *,
    names: dict[str, str] | None = None,
    pool: Workers | None = None,
    peers: dict[str, PeerBounds] | None = None,
    summary_only: bool = False,
    summaries: bool | None = None,
    parts: dict[str, Part] | None = None,
) -> list[FileOutcome]:
    """The outcome of each of ``files`` (listed already), in order. One file (or ``workers=1``)
    runs here; several run on Dask — ``pool`` when given (a job's rounds share one cluster),
    else one started for them: ``options.cluster`` "local" (the default: a local cluster of
    worker processes) or a scheduler's address (engine.analyze.cluster) — except on a first run
    (kernels missing from numba's cache: FirstRun), when files bound for a local cluster are
    analysed here while a child compiles the kernels, and only the rest go to the workers.
    ``names``: each file's output folder (default ``output_names(files)``); ``peers`` (by file)
    and ``summary_only``: as analyze_file takes them — a job's rounds (engine.analyze.api);
    ``summaries``: keep each file's rank summary (default: ``options.ranks`` and several
    files; a job's second round keeps none: its first round's are crossed already);
    ``parts`` (by file): the merged Perfetto file's parts to make (see analyze_file)."""
    hooks = hooks or Hooks()
    stage, progress = hooks.stage, hooks.progress
    cluster, workers = options.cluster, options.workers
    names = names or output_names(files)
    peers, parts = peers or {}, parts or {}
    here = cluster is None and (len(files) <= 1 or workers == 1)
    outcomes: list[FileOutcome] = []
    done = 0
    ranks = options.ranks and len(files) > 1 if summaries is None else summaries
    if files and (here or cluster in (None, "local")):
        # a first run answers without waiting for numba (FirstRun), which compiles for the next
        # run in a child. Files for a local cluster are analysed here only while that child
        # compiles: the workers then load its kernels from the cache instead of each compiling
        # every kernel first (20 s on a core here, with no file analysed meanwhile)
        # (not for one small file: it is analysed without numba, whose cache is then not asked)
        alone = here and len(files) == 1 and lean(files[0])
        first = FirstRun() if options.first_run and not alone else None
        try:
            for f in files:
                if not here and (first is None or not first.compiling()):
                    break
                try:
                    got = analyze_file(
                        f, options, stage, first, names[f], ranks, peers.get(f), summary_only,
                        parts.get(f),
                    )  # fmt: skip
                except Exception as e:  # a bug (bad input is analyze_file's error line)
                    if len(files) == 1:
                        raise  # one file: the command's own crash report
                    got = FileOutcome(f, error=crashed(f, e))  # the other files go on
                outcomes.append(got)
                done += 1
                if progress is not None:
                    progress(done, len(files), f)
        finally:
            if first is not None:
                first.done()
    rest = files[done:]
    if not rest:
        return outcomes
    from engine.analyze.cluster import Workers

    if stage is not None and (pool is None or not pool.started):
        local = cluster in (None, "local")
        where = "a local Dask cluster (its workers starting)" if local else f"Dask at {cluster}"
        stage(f"{len(rest):,} file{'s' if len(rest) != 1 else ''} on {where}…")

    def counted(n: int, _total: int, f: str) -> None:  # counted with the files done here
        if progress is not None:
            progress(done + n, len(files), f)

    if pool is not None:
        return outcomes + pool.analyze(
            rest, options, counted, names, peers, summary_only, ranks, parts
        )  # fmt: skip
    with Workers(options, len(rest), hooks.dashboard) as own:
        return outcomes + own.analyze(
            rest, options, counted, names, peers, summary_only, ranks, parts
        )  # fmt: skip
