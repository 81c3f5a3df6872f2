"""What changed between two traces (`gitm-tui diff BEFORE AFTER`, issue 39): per kernel name,
per class and per label (decoded regime, or COPY / COMM / UNKNOWN), what appeared, disappeared
and changed in count and in time — total, mean, and per ProfilerStep where the traces have
steps — sorted by |Δ time|; idle (HTA's split), launch calls, copies, memsets and collectives;
GPU busy time and span; the workload fingerprint's distance. Pure engine: the models are
engine.analyze.diff.diff_model (``TraceDiff.to_json``), the rendering is the UI's.

Entry points, by what the caller holds:

* ``diff_results(before, after)`` — two ``AnalysisResult`` (the analysis's rows, decoded labels
  and trace: what the optimize loop's capture analysis returns) — no file read, nothing decoded
  twice;
* ``diff_traces(before, after)`` — two ``Trace``: analysed here first (engine.analyze.compute);
* ``diff_paths(before, after)`` — two trace files or run folders, read through the analysis's
  one front door (engine.analyze.api.analyze); bad input raises DiffInputError (its one line) or
  DiffUsageError (a request the inputs cannot meet).

Steps follow Holistic Trace Analysis's iteration rule (hta/common/trace.py ``add_iteration``): a
GPU row belongs to the ProfilerStep in which its launch call starts; a row without a launch
call belongs to none. With ``step_before`` / ``step_after`` the diff compares one step of each
(HTA's TraceDiff compares the first iteration by default); without, the whole traces, and each
name's ``per_step_ns`` is the time of its rows inside the steps divided by their number.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from engine.analyze.breakdown.copies import parse_copy
from engine.analyze.breakdown.idle import CONSECUTIVE_KERNEL_DELAY_NS, grouped_running_end
from engine.analyze.breakdown.intervals import intersection, interval_union, length
from engine.analyze.diff.diff_model import (
    Change,
    CriticalDiff,
    Figures,
    FingerprintDiff,
    GroupChange,
    Metric,
    PathSide,
    Side,
    Status,
    TraceDiff,
)
from engine.regimes import N_LABELS, N_REGIMES, Label
from engine.trace.evidence import Tier, tiers
from engine.trace.segments import Kind, Klass
from engine.trace.trace import ApiKind, HostEvents, Trace

if TYPE_CHECKING:
    from engine.analyze.breakdown.critical_model import CriticalPath
    from engine.analyze.compute import AnalysisResult
    from engine.analyze.diff.cpu_diff import CpuDiff
    from engine.analyze.options import AnalyzeOptions, Hooks
    from engine.analyze.run import FileOutcome

__all__ = [
    "RUN_TRACES",
    "DiffInputError",
    "DiffUsageError",
    "Step",
    "TraceDiff",
    "critical_diff",
    "diff_inputs",
    "diff_paths",
    "diff_results",
    "diff_traces",
    "trace_file_of",
]

#: a step chosen by its N (ProfilerStep#N) or "first" (each trace's first, HTA's default)
Step = int | str | None

_NO_LAUNCH = np.iinfo(np.int64).min
#: the trace files a run folder may hold, in the order looked for: `gitm-tui capture`'s CUPTI
#: trace (engine.runtime.sources) and the torch loop's torch.profiler window
#: (engine.optimizer.torch_loop)
RUN_TRACES = ("trace.json", "profile.json")
_LAUNCH_APIS = (ApiKind.LAUNCH, ApiKind.GRAPH_LAUNCH)


class DiffUsageError(ValueError):
    """The request cannot be met by these inputs (a step a trace lacks, a folder of several
    traces): the one line says what to name instead."""


class DiffInputError(RuntimeError):
    """An input cannot be read or holds nothing to compare: the one line names it."""


@dataclass
class _Scoped:
    """One trace's GPU rows in scope, with the columns the diff reads."""

    side: Side
    names: list[str]  # the trace's name table
    name: npt.NDArray[np.int32]
    klass: npt.NDArray[np.uint8]
    kind: npt.NDArray[np.uint8]
    label: npt.NDArray[np.uint8]
    tier: npt.NDArray[np.uint8]
    device: npt.NDArray[np.int16]
    stream: npt.NDArray[np.int32]
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    launch: npt.NDArray[np.int64]  # the launch call's start, _NO_LAUNCH where none
    nbytes: npt.NDArray[np.float64]
    in_step: npt.NDArray[np.bool_]
    steps: int
    host: HostEvents  # the host rows in scope
    host_known: bool  # the trace has host runtime rows at all

    @property
    def dur(self) -> npt.NDArray[np.int64]:
        return self.end - self.start


# ------------------------------------------------------------------ entry points
def diff_results(
    before: AnalysisResult,
    after: AnalysisResult,
    step_before: Step = None,
    step_after: Step = None,
    top: int | None = None,
) -> TraceDiff:
    """What changed from ``before`` to ``after`` (two analyses with their arrays: the rows,
    decoded labels and counted trace). ``step_before`` / ``step_after``: compare one
    ProfilerStep of each (its N, or "first"; one given, the other defaults to it); None for
    both: the whole traces. ``top``: keep that many kernel names (largest |Δ time| first;
    ``kernels_total`` says how many there were). DiffUsageError when a trace lacks the step."""
    if (step_before is None) != (step_after is None):
        step_before = step_after if step_before is None else step_before
        step_after = step_before if step_after is None else step_after
    a = _scope(before, step_before)
    b = _scope(after, step_after)
    names = _changes(_by_name(a), _by_name(b), a, b)
    kernels = names[:top] if top is not None else names
    klasses = [k.name for k in Klass]
    classes = _changes(_by_codes(a, a.klass, klasses), _by_codes(b, b.klass, klasses), a, b)
    lab = [x.name for x in Label]
    labels = _changes(
        _by_codes(a, a.label, lab, prior=True), _by_codes(b, b.label, lab, prior=True), a, b
    )
    copies = _changes(_by_copy(a), _by_copy(b), a, b)
    return TraceDiff(
        before=a.side,
        after=b.side,
        scope=_scope_line(a.side, b.side),
        counting=before.analysis.counting,
        totals=_totals(a, b),
        kernels=kernels,
        kernels_total=len(names),
        kernels_by_status={
            st: sum(c.status == st for c in names)
            for st in ("added", "removed", "increased", "decreased", "unchanged")
        },
        classes=classes,
        labels=labels,
        copies=copies,
        fingerprint=fingerprint_diff(before, after),
        critical_path=critical_diff(
            before.analysis.critical_path, after.analysis.critical_path, a.side, b.side
        ),
        notes=_notes(before, after, a, b),
    )


def diff_traces(
    before: Trace,
    after: Trace,
    hardware: str | None = None,
    counting: str = "exact",
    step_before: Step = None,
    step_after: Step = None,
    top: int | None = None,
) -> TraceDiff:
    """``diff_results`` of two traces, each analysed first as `gitm-tui analyze` would
    (``hardware``: the catalogue id when a trace does not say; ``counting``: "exact" or "hta").
    TraceImportError when a trace has no GPU row."""
    from engine.analyze.compute import analyze_trace

    res = [analyze_trace(t, hardware=hardware, counting=counting) for t in (before, after)]
    return diff_results(res[0], res[1], step_before, step_after, top)


def diff_paths(
    before: str,
    after: str,
    options: AnalyzeOptions | None = None,
    hooks: Hooks | None = None,
    step_before: Step = None,
    step_after: Step = None,
    top: int | None = None,
) -> TraceDiff:
    """``diff_inputs`` where both traces have GPU rows; DiffInputError for CPU-only ones."""
    d = diff_inputs(before, after, options, hooks, step_before, step_after, top)
    if not isinstance(d, TraceDiff):
        raise DiffInputError(
            f"{before}: a CPU-only trace (no GPU rows): this diff compares GPU rows"
        )
    return d


def diff_inputs(
    before: str,
    after: str,
    options: AnalyzeOptions | None = None,
    hooks: Hooks | None = None,
    step_before: Step = None,
    step_after: Step = None,
    top: int | None = None,
) -> TraceDiff | CpuDiff:
    """``diff_results`` of two trace files, run folders or run ids (``trace_file_of``), read
    through the analysis's front door as ``options`` say (hardware, counting; nothing is
    written); two CPU-only traces: ``CpuDiff`` (engine.analyze.diff.cpu_diff). DiffInputError:
    an input cannot be read, or one is CPU-only and the other not; DiffUsageError: a folder of
    several traces, or a step a trace lacks."""
    from engine.analyze.api import AnalyzeOptions, analyze

    # both files in one call, here (workers=1: never on Dask): one first-run helper for both —
    # two calls started two compile children on a first run (the second waiting on the first)
    opts = dataclasses.replace(
        options or AnalyzeOptions(),
        keep_arrays=True, ranks=False, out_root=None, cluster=None, workers=1,
    )  # fmt: skip
    files = [trace_file_of(p) for p in (before, after)]  # both named before either is read
    outcomes = analyze(files, opts, hooks).outcomes
    cpu = [_cpu_of(f, outcomes) for f in files]
    if all(c is not None for c in cpu):  # two CPU-only traces: their operators compared
        return _cpu_diff(files)
    if any(c is not None for c in cpu):
        which = files[0] if cpu[0] is not None else files[1]
        raise DiffInputError(
            f"{which}: a CPU-only trace (no GPU rows) against one with GPU rows: nothing alike "
            "to compare (diff compares two CPU-only traces, or two with GPU rows)"
        )
    got = [_result_of(f, outcomes) for f in files]
    return diff_results(got[0], got[1], step_before, step_after, top)


def _cpu_of(path: str, outcomes: list[FileOutcome]) -> object | None:
    """The CPU summary of ``path`` when it is a CPU-only trace, else None."""
    found = [o for o in outcomes if o.path == path or o.path == str(Path(path))]
    return found[0].cpu if found else None


def _cpu_diff(files: list[str]) -> CpuDiff:
    """Two CPU-only traces read again with every operator kept (the analysis keeps the top
    ones), and compared (engine.analyze.diff.cpu_diff)."""
    from engine.analyze.breakdown.cpu_trace import read_cpu_summary
    from engine.analyze.diff.cpu_diff import ALL_OPS, diff_cpu
    from engine.analyze.remote import is_url
    from engine.trace.errors import TraceImportError

    if any(is_url(f) for f in files):
        raise DiffInputError("CPU-only traces are compared from local files (not URLs)")
    try:
        b, a = (read_cpu_summary(f, ALL_OPS) for f in files)
    except TraceImportError as e:
        raise DiffInputError(str(e)) from None
    return diff_cpu(b, a)


def _result_of(path: str, outcomes: list[FileOutcome]) -> AnalysisResult:
    """The analysis of ``path`` among the front door's outcomes (a file named twice is
    analysed once); DiffInputError with its line when it has none."""
    import os

    from engine.analyze.remote import is_url

    def same(o: FileOutcome) -> bool:
        if o.path == path or is_url(path) or is_url(o.path):
            return o.path == path
        return o.path == str(Path(path)) or os.path.realpath(o.path) == os.path.realpath(path)

    found = [o for o in outcomes if same(o)]
    if not found:  # (not expected: every named file has its outcome)
        raise DiffInputError(f"{path}: not analysed")
    o = found[0]
    if o.cpu is not None:
        raise DiffInputError(f"{path}: a CPU-only trace (no GPU rows): diff compares GPU rows")
    if o.result is None:
        raise DiffInputError(o.error or f"{path}: not analysed")
    return o.result


def trace_file_of(path: str) -> str:
    """The trace file ``path`` names: a file or URL as it is; a run folder (it holds the run
    store's journal) or a run id: the trace it holds (``RUN_TRACES``); another folder: the one
    trace file in it. DiffInputError when there is none or the path cannot be read;
    DiffUsageError when a folder holds several (diff compares one trace with one)."""
    from engine.analyze.api import list_files
    from engine.analyze.remote import is_url
    from engine.store.runs import JOURNAL, RUN_ID, run_path

    if is_url(path):
        return path
    p = Path(path)
    if RUN_ID.fullmatch(path) and not p.exists():
        p = run_path(path)
        if not p.is_dir():
            raise DiffInputError(f"run {path}: no such run in the run store ({p.parent})")
    try:
        is_dir = p.is_dir()
        run = is_dir and (p / JOURNAL).is_file()
    except OSError as e:
        raise DiffInputError(f"{p}: cannot read: {e.strerror or e}") from None
    if run:
        found = [p / n for n in RUN_TRACES if (p / n).is_file()]
        if not found:
            raise DiffInputError(
                f"{p}: this run holds no trace ({' or '.join(RUN_TRACES)}): runs on the simulated "
                "device and CPU-only programs capture none"
            )
        if len(found) > 1:
            raise DiffUsageError(
                f"{p}: this run holds {len(found)} traces ({', '.join(f.name for f in found)}): "
                "name the file to compare"
            )
        return str(found[0])
    if not is_dir:
        return path  # a file (or nothing: the front door says so in its line)
    files, errors = list_files([str(p)])
    if errors:
        raise DiffInputError(errors[0])
    if len(files) > 1:
        shown = ", ".join(Path(f).name for f in files[:3]) + (", …" if len(files) > 3 else "")
        raise DiffUsageError(
            f"{p}: holds {len(files)} trace files ({shown}): diff compares one trace with one; "
            "name the file"
        )
    return files[0]


# ------------------------------------------------------------------ scope
def step_of(launch: npt.NDArray[np.int64], steps: list[tuple[int, int]]) -> npt.NDArray[np.int64]:
    """Per row, the index of the step (in ``steps``, sorted by start) in which its launch call
    starts, -1 for none or no launch (``_NO_LAUNCH``) — HTA's rule: a GPU row's iteration is
    its launch's, a CPU event's the ProfilerStep with ``ts <= t < ts + dur``."""
    out = np.full(len(launch), -1, np.int64)
    if not steps or not len(launch):
        return out
    a = np.array([s for s, _ in steps], np.int64)
    b = np.array([e for _, e in steps], np.int64)
    i = np.searchsorted(a, launch, side="right") - 1
    inside = (i >= 0) & (launch != _NO_LAUNCH)
    inside &= launch < b[np.maximum(i, 0)]
    out[inside] = i[inside]
    return out


def _steps(trace: Trace) -> tuple[list[tuple[int, int]], list[int]]:
    """The trace's ProfilerSteps as (start, end) ns sorted by start, and their N (-1: unnamed)."""
    props = trace.device_properties
    raw = props.get("profiler_steps") or []
    ids = props.get("profiler_step_ids") or []
    steps = [(int(a), int(b)) for a, b in raw]
    if len(ids) != len(steps):
        ids = [-1] * len(steps)
    order = sorted(range(len(steps)), key=lambda i: steps[i])
    return [steps[i] for i in order], [int(ids[i]) for i in order]


def _pick(step: Step, ids: list[int], source: str) -> int | None:
    """The index of the step ``step`` names among ``ids``; DiffUsageError if it is not there."""
    if step is None:
        return None
    if not ids:
        raise DiffUsageError(f"{source}: no ProfilerStep in this trace: no step to choose")
    if step == "first":
        return 0
    if isinstance(step, int) and step in ids:
        return ids.index(step)
    listed = ", ".join(map(str, ids[:8])) + (", …" if len(ids) > 8 else "")
    raise DiffUsageError(f"{source}: no ProfilerStep#{step} in this trace (its steps: {listed})")


def _scope(res: AnalysisResult, step: Step) -> _Scoped:
    """The rows of ``res`` the diff compares: all, or those launched inside one step."""
    rows, trace, an = res.rows, res.trace, res.analysis
    labels = res.decoded.labels
    if len(labels) != len(rows):
        raise ValueError(f"{len(labels)} labels for {len(rows)} rows: not one analysis")
    host = trace.host
    launch = np.full(len(rows), _NO_LAUNCH, np.int64)
    at = host.rows_of(rows.correlation)
    linked = at >= 0
    launch[linked] = host.api_start_ns[at[linked]]
    steps, ids = _steps(trace)
    k = _pick(step, ids, an.source)
    in_step_of = step_of(launch, steps)
    if k is None:
        keep = np.ones(len(rows), bool)
        in_step = in_step_of >= 0
        scope_steps, scope_ids = steps, ids
        host_keep = np.ones(len(host), bool)
        scope = "whole trace"
    else:
        keep = in_step_of == k
        in_step = np.ones(int(keep.sum()), bool)
        scope_steps, scope_ids = [steps[k]], [ids[k]]
        host_keep = (host.api_start_ns >= steps[k][0]) & (host.api_start_ns < steps[k][1])
        scope = f"ProfilerStep#{ids[k]}"
    tier = tiers(rows, derived_evidence=an.hardware.id is not None)  # as the analysis labels
    start, end = rows.start_ns[keep], rows.end_ns[keep]
    device = rows.device[keep]
    busy = 0
    for d in np.unique(device).tolist():
        on = np.flatnonzero(device == d)
        busy += length(interval_union(start, end, on))
    kind = rows.kind[keep]
    hw = an.hardware
    side = Side(
        source=an.source,
        format=an.format,
        # the catalogue's name, short: the analysis's own name also says what the trace wrote
        device=_catalogue_name(hw.id) if hw.id is not None else (hw.reported_name or "unknown"),
        rank=an.rank,
        scope=scope,
        rows=int(keep.sum()),
        kernels=int((kind == Kind.KERNEL).sum()),
        gpu_time_ns=int((end - start).sum()),
        busy_ns=busy,
        span_ns=int(end.max() - start.min()) if len(start) else 0,
        steps=len(scope_steps),
        step_ids=scope_ids,
        rows_in_steps=int(in_step.sum()),
        mean_step_ns=float(np.mean([e - s for s, e in scope_steps])) if scope_steps else None,
    )
    return _Scoped(
        side=side,
        names=trace.names.names(),
        name=rows.name[keep],
        klass=rows.klass[keep],
        kind=kind,
        label=labels[keep],
        tier=tier[keep],
        device=device,
        stream=rows.stream[keep],
        start=start,
        end=end,
        launch=launch[keep],
        nbytes=rows.dram_bytes[keep],
        in_step=in_step,
        steps=len(scope_steps),
        host=host.take(host_keep),
        host_known=len(host) > 0,
    )


def _scope_line(a: Side, b: Side) -> str:
    if a.scope == "whole trace" and b.scope == "whole trace":
        return (
            "whole traces: every GPU row of each (kernels, copies, memsets, collectives); "
            "per-step figures count the rows launched inside a ProfilerStep"
        )
    return (
        f"{a.scope} of before vs {b.scope} of after: the GPU rows whose launch call starts "
        "inside the step (HTA TraceDiff's iteration rule; rows without a launch call are in "
        "no step)"
    )


# ------------------------------------------------------------------ groups
def _sum_at(codes: npt.NDArray[np.integer], values: npt.NDArray[np.integer], n: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per code (bincount's are float64)."""
    out = np.zeros(n, np.int64)
    np.add.at(out, codes, values.astype(np.int64, copy=False))
    return out


def _by_codes(
    s: _Scoped,
    codes: npt.NDArray[np.integer],
    keys: list[str],
    label: bool = False,
    prior: bool = False,
    rows: npt.NDArray[np.bool_] | None = None,
) -> dict[str, Figures]:
    """Figures per key of the rows (``rows`` of them, when given), ``codes`` indexing ``keys``:
    count, time, mean, per step, bytes where the rows are copies; with ``label``, the majority
    label of each key's time (weighted by max(duration, 1), as the analysis's kernel table);
    with ``prior``, the share of its decoded time whose label rests on the name prior alone."""
    sel = np.ones(len(codes), bool) if rows is None else rows
    c = codes[sel].astype(np.int64)
    dur = s.dur[sel]
    n = len(keys)
    count = np.bincount(c, minlength=n)
    total = _sum_at(c, dur, n)
    inside = s.in_step[sel]
    stepped = _sum_at(c[inside], dur[inside], n)
    copies = np.isin(s.kind[sel], (Kind.MEMCPY, Kind.MEMSET))
    b = s.nbytes[sel]
    known = copies & np.isfinite(b)
    nbytes = _sum_at(c[known], b[known].astype(np.int64), n)
    has_bytes = np.bincount(c[known], minlength=n) > 0
    majority = None
    if label:
        w = _sum_at(c * N_LABELS + s.label[sel], np.maximum(dur, 1), n * N_LABELS)
        majority = w.reshape(n, N_LABELS).argmax(axis=1)
    decoded_t = prior_t = None
    if prior:
        dec = s.label[sel] < N_REGIMES  # a decoded regime (not COPY, COMM or UNKNOWN)
        decoded_t = _sum_at(c[dec], dur[dec], n)
        pri = dec & (s.tier[sel] == Tier.PRIOR)
        prior_t = _sum_at(c[pri], dur[pri], n)
    out: dict[str, Figures] = {}
    for i in np.flatnonzero(count).tolist():
        share = None
        if decoded_t is not None and prior_t is not None and decoded_t[i] > 0:
            share = float(prior_t[i] / decoded_t[i])
        out[keys[i]] = Figures(
            count=int(count[i]),
            total_ns=int(total[i]),
            mean_ns=float(total[i] / count[i]),
            per_step_ns=float(stepped[i] / s.steps) if s.steps else None,
            bytes=int(nbytes[i]) if has_bytes[i] else None,
            label=Label(int(majority[i])).name if majority is not None else None,
            prior_share=share,
        )
    return out


def _by_name(s: _Scoped) -> dict[str, tuple[str, Figures]]:
    """Per kernel name: its class and figures (with its majority label)."""
    used = np.unique(s.name)
    codes = np.searchsorted(used, s.name)
    keys = [s.names[int(i)] for i in used]
    figs = _by_codes(s, codes, keys, label=True, prior=True)
    klass = np.zeros(len(used), np.uint8)
    klass[codes] = s.klass  # (one class per name: the taxonomy classifies the name)
    return {k: (Klass(int(klass[i])).name, figs[k]) for i, k in enumerate(keys) if k in figs}


def _by_copy(s: _Scoped) -> dict[str, Figures]:
    """Copies per direction and memory kinds ("HtoD Pageable -> Device"), memsets as one."""
    is_copy = s.kind == Kind.MEMCPY
    is_set = s.kind == Kind.MEMSET
    keys: list[str] = []
    index: dict[str, int] = {}
    codes = np.zeros(len(s.name), np.int64)
    for nm in np.unique(s.name[is_copy]).tolist():
        direction, memory = parse_copy(s.names[nm])
        key = f"{direction} {memory}".strip()
        codes[is_copy & (s.name == nm)] = index.setdefault(key, len(index))
    keys = list(index)
    if is_set.any():
        codes[is_set] = len(keys)
        keys.append("memset")
    return _by_codes(s, codes, keys, rows=is_copy | is_set)


def _empty(s: _Scoped) -> Figures:
    return Figures(
        count=0, total_ns=0, mean_ns=None, per_step_ns=0.0 if s.steps else None, bytes=None
    )


def _status(before: int, after: int) -> Status:
    if before == 0:
        return "added" if after else "unchanged"
    if after == 0:
        return "removed"
    return "increased" if after > before else "decreased" if after < before else "unchanged"


def _changes(
    before: dict[str, Figures] | dict[str, tuple[str, Figures]],
    after: dict[str, Figures] | dict[str, tuple[str, Figures]],
    a: _Scoped,
    b: _Scoped,
) -> list[Change]:
    """One Change per key of either side, largest |Δ time| first (then by key)."""
    out = []
    for key in set(before) | set(after):
        got = [before.get(key), after.get(key)]
        klass = None
        figs: list[Figures] = []
        for g, s in zip(got, (a, b), strict=True):
            if isinstance(g, tuple):
                klass, g = g
            figs.append(g if g is not None else _empty(s))
        fb, fa = figs
        dps = None
        if fb.per_step_ns is not None and fa.per_step_ns is not None:
            dps = fa.per_step_ns - fb.per_step_ns
        out.append(
            Change(
                key=key,
                klass=klass,
                status=_status(fb.count, fa.count),
                before=fb,
                after=fa,
                delta_count=fa.count - fb.count,
                delta_ns=fa.total_ns - fb.total_ns,
                delta_per_step_ns=dps,
            )
        )
    out.sort(key=lambda c: (-abs(c.delta_ns), c.key))
    return out


# ------------------------------------------------------------------ totals
def _idle(s: _Scoped) -> tuple[int, int, int, int]:
    """Idle time between consecutive rows of each stream, split as HTA splits it and as the
    analysis's streams do (engine.analyze.breakdown.idle ``stream_idle``: over each stream's busy union):
    total, waiting for the host (the next row's launch call began after the previous rows
    ended), kernel wait (a shorter gap than CONSECUTIVE_KERNEL_DELAY_NS), other."""
    if len(s.start) < 2:
        return 0, 0, 0, 0
    key = (s.device.astype(np.int64) << 32) | (s.stream.astype(np.int64) + (1 << 31))
    o = np.lexsort((s.start, key))  # by stream, then start (stable: equal starts as read)
    k, st, en, la = key[o], s.start[o], s.end[o], s.launch[o]
    same = k[1:] == k[:-1]
    # from the latest end of the stream's earlier rows: overlapping rows (a copy engine's
    # beside a kernel) leave no negative gap (engine.analyze.breakdown.idle)
    prev_end = grouped_running_end(k, en)[:-1]
    gap = np.maximum(st[1:] - prev_end, 0)
    host = same & (la[1:] != _NO_LAUNCH) & (la[1:] > prev_end)
    kern = same & ~host & (gap < CONSECUTIVE_KERNEL_DELAY_NS)
    other = same & ~host & ~kern
    return (
        int(gap.sum(where=same)),
        int(gap.sum(where=host)),
        int(gap.sum(where=kern)),
        int(gap.sum(where=other)),
    )


def _overlap(s: _Scoped) -> int:
    """Collective time during which a compute kernel ran on the same device."""
    comm = s.label == Label.COMM
    compute = (s.kind == Kind.KERNEL) & ~comm
    out = 0
    for d in np.unique(s.device[comm]).tolist():
        on = s.device == d
        u_comm = interval_union(s.start, s.end, np.flatnonzero(on & comm))
        u_comp = interval_union(s.start, s.end, np.flatnonzero(on & compute))
        out += intersection(u_comm, u_comp)
    return out


_Value = tuple[int | float | None, str]


def _side_totals(s: _Scoped) -> dict[str, tuple[str, _Value]]:
    """name → (unit, (value or None, why None)) of one side."""
    dur = s.dur
    side = s.side
    no_steps = "no ProfilerStep in the trace"
    kern = s.kind == Kind.KERNEL
    idle = _idle(s)
    comm = s.label == Label.COMM
    out: dict[str, tuple[str, _Value]] = {
        "gpu_time": ("ns", (side.gpu_time_ns, "")),
        "gpu_time_per_step": (
            "ns",
            (float(dur[s.in_step].sum()) / s.steps, "") if s.steps else (None, no_steps),
        ),
        "step_time": ("ns", (side.mean_step_ns, "") if s.steps else (None, no_steps)),
        "busy": ("ns", (side.busy_ns, "")),
        "span": ("ns", (side.span_ns, "")),
        "kernels": ("count", (int(kern.sum()), "")),
        "kernel_time": ("ns", (int(dur[kern].sum()), "")),
        "idle": ("ns", (idle[0], "")),
        "idle_host_wait": ("ns", (idle[1], "")),
        "idle_kernel_wait": ("ns", (idle[2], "")),
        "idle_other": ("ns", (idle[3], "")),
    }
    no_host = "no host runtime rows in the trace: launches unknown"
    api = s.host.api
    launch = np.isin(api, _LAUNCH_APIS)
    ldur = s.host.api_end_ns - s.host.api_start_ns
    for name, unit, value in (
        ("launch_calls", "count", int(launch.sum())),
        ("launch_time", "ns", int(ldur[launch].sum())),
        ("graph_launches", "count", int((api == ApiKind.GRAPH_LAUNCH).sum())),
    ):
        out[name] = (unit, (value, "") if s.host_known else (None, no_host))
    for kind, word, one in ((Kind.MEMCPY, "copies", "copy"), (Kind.MEMSET, "memsets", "memset")):
        m = s.kind == kind
        b = s.nbytes[m]
        known = np.isfinite(b)
        out[word] = ("count", (int(m.sum()), ""))
        out[f"{one}_bytes"] = (
            "bytes",
            (int(b[known].sum()), "")
            if known.any() or not m.any()
            else (None, f"the trace records no size of its {word}"),
        )
        out[f"{one}_time"] = ("ns", (int(dur[m].sum()), ""))
    out["collectives"] = ("count", (int(comm.sum()), ""))
    out["collective_time"] = ("ns", (int(dur[comm].sum()), ""))
    out["collective_overlap"] = ("ns", (_overlap(s), ""))
    return out


def _totals(a: _Scoped, b: _Scoped) -> list[Metric]:
    ta, tb = _side_totals(a), _side_totals(b)
    out = []
    for name, (unit, (va, why_a)) in ta.items():
        _, (vb, why_b) = tb[name]
        delta = None if va is None or vb is None else vb - va
        notes = [f"before: {why_a}" if why_a else "", f"after: {why_b}" if why_b else ""]
        out.append(
            Metric(
                name=name,
                unit=unit,  # type: ignore[arg-type]
                before=va,
                after=vb,
                delta=delta,
                note="; ".join(n for n in notes if n),
            )
        )
    return out


# ------------------------------------------------------------------ critical path
#: a group "moved" when its share of the path changed by at least this (half a per cent: the
#: headline prints whole per cents, so a smaller move would read "7% → 7%")
MOVED_SHARE = 0.005


def share_text(x: float | None) -> str:
    """A share of the path as the headline prints it: whole per cents, one decimal under 1 %,
    'unknown' for None (engine.analyze.breakdown.critical words its headline the same way)."""
    if x is None:
        return "unknown"
    return f"{x:.0%}" if x >= 0.01 or x == 0 else f"{x:.1%}"


def share_cell(x: float | None) -> str:
    """A share of the path in a table: one decimal; 'unknown' where the side has no path."""
    return "unknown" if x is None else f"{x:.1%}"


def share_delta(x: float | None) -> str:
    """A change of share in points of the path ('+7.3 pt'); '—' where a side is unknown."""
    if x is None:
        return "—"
    return "0.0 pt" if round(100 * x, 1) == 0 else f"{100 * x:+.1f} pt"


def path_groups(parts_ns: dict[str, int]) -> dict[str, int]:
    """The critical path's parts (``CriticalPath.parts`` or a step's ``parts_ns``) summed by
    headline group (engine.analyze.breakdown.critical.GROUPS), every group present (0: none of it)."""
    from engine.analyze.breakdown.critical import GROUPS

    return {g: sum(int(parts_ns.get(p, 0)) for p in ps) for g, ps in GROUPS.items()}


def _path_side(cp: CriticalPath | None, side: Side) -> tuple[PathSide, dict[str, int] | None]:
    """One side's path in the diff's scope (the whole path, or the ProfilerStep compared) and
    its time per group (None: no path there — unknown, never 0)."""
    if cp is None:
        why = (
            "unknown: no critical path — nothing was replayed (no host rows or timed device "
            "rows to replay; the analysis's notes say which)"
        )
        return PathSide(known=False, total_ns=None, window=why, headline="unknown",
                        bound_by=None), None  # fmt: skip
    if side.scope == "whole trace":
        parts = {p.part: p.ns for p in cp.parts}
        total, window, head = cp.total_ns, cp.window, cp.headline
    else:
        n = side.step_ids[0] if side.step_ids else -1
        step = next((s for s in cp.steps if n >= 0 and s.step == n), None)
        if step is None:
            why = (
                f"unknown: the critical path ({cp.window}) has no {side.scope}: the step lies "
                "outside the replayed window, or is unnamed"
            )
            return PathSide(known=False, total_ns=None, window=why, headline="unknown",
                            bound_by=None), None  # fmt: skip
        parts = dict(step.parts_ns)
        total, window, head = sum(parts.values()), f"{side.scope} of {cp.window}", step.headline
    groups = path_groups(parts)
    top = max(groups.items(), key=lambda kv: kv[1]) if total > 0 else None
    known = PathSide(
        known=total > 0,
        total_ns=total if total > 0 else None,
        window=window if total > 0 else f"unknown: the path in {window} has no time",
        headline=head if total > 0 else "unknown",
        bound_by=top[0] if top is not None and top[1] > 0 else None,
    )
    return known, groups if total > 0 else None


def critical_diff(
    before: CriticalPath | None, after: CriticalPath | None, a: Side, b: Side
) -> CriticalDiff:
    """The two critical paths compared by headline group, in the scope of sides ``a`` and
    ``b`` (the whole path, or one ProfilerStep of it): each group's time and share before and
    after, largest share first, and a headline of the groups whose share moved most. A side
    with no path has None (unknown) for each of its figures, never 0."""
    from engine.analyze.breakdown.critical import GROUPS

    sb, gb = _path_side(before, a)
    sa, ga = _path_side(after, b)

    def share(g: dict[str, int] | None, s: PathSide, k: str) -> float | None:
        return None if g is None or not s.total_ns else g[k] / s.total_ns

    groups = []
    for k, parts in GROUPS.items():
        nb, na = (gb[k] if gb else None), (ga[k] if ga else None)
        fb, fa = share(gb, sb, k), share(ga, sa, k)
        groups.append(
            GroupChange(
                group=k,
                parts=list(parts),
                before_ns=nb,
                after_ns=na,
                before_share=fb,
                after_share=fa,
                delta_ns=None if nb is None or na is None else na - nb,
                delta_share=None if fb is None or fa is None else fa - fb,
            )
        )
    groups.sort(key=lambda g: -max(g.before_share or 0.0, g.after_share or 0.0))
    return CriticalDiff(
        available=sb.known and sa.known,
        before=sb,
        after=sa,
        headline=_critical_headline(sb, sa, groups),
        groups=groups,
        note=(
            "each path is the one its analysis found on the window it replayed (the whole "
            "trace, or its steady window); each share is of that path"
            if a.scope == b.scope == "whole trace"
            else "each side: its path inside the ProfilerStep compared (the analysis's path of "
            "the replayed window, cut to the step)"
        ),
    )


def _critical_headline(sb: PathSide, sa: PathSide, groups: list[GroupChange]) -> str:
    """'bound by X before and after; exposed communication 38% → 12%; …' (the groups whose
    share moved most, at most three), or which side has no path."""
    if not (sb.known and sa.known):
        gone = [w for w, s in (("before", sb), ("after", sa)) if not s.known]
        line = (
            f"unknown: {' and '.join(gone)} {'has' if len(gone) == 1 else 'have'} no critical path"
        )
        for w, s in (("before", sb), ("after", sa)):
            if s.known:
                line += f"; {w}: {s.headline}"
        return line
    moved = sorted(
        (g for g in groups if g.delta_share is not None and abs(g.delta_share) >= MOVED_SHARE),
        key=lambda g: -abs(g.delta_share or 0.0),
    )[:3]
    bound = (
        f"bound by {sb.bound_by} before and after"
        if sb.bound_by == sa.bound_by
        else f"bound by {sb.bound_by} → {sa.bound_by}"
    )
    if not moved:
        top = groups[0]
        return (
            f"{bound} ({share_text(top.before_share)} → {share_text(top.after_share)}); no group "
            f"moved by {MOVED_SHARE:.1%} of the path or more"
        )
    return "; ".join(
        [bound, *(f"{g.group} {share_text(g.before_share)} → {share_text(g.after_share)}"
                  for g in moved)]
    )  # fmt: skip


# ------------------------------------------------------------------ fingerprint, notes
def fingerprint_diff(before: AnalysisResult, after: AnalysisResult) -> FingerprintDiff:
    """The two workload fingerprints (engine.optimizer.fingerprint; the analyses carry them,
    computed on the whole of each trace, per step) and their distance against the manifest's
    threshold; ``available`` False, with why, when a side has none."""
    from engine.optimizer.fingerprint import distance, fingerprint_of_trace

    prints = []
    for res in (before, after):
        fp = res.fingerprint
        if fp is None and len(res.trace.segments):
            fp = fingerprint_of_trace(res.trace)
        if fp is None:
            return FingerprintDiff(
                available=False, note=f"unknown: {res.analysis.source} has no fingerprint"
            )
        prints.append(fp)
    d = distance(prints[0], prints[1])
    return FingerprintDiff(
        available=True,
        value=float(d.value),
        threshold=float(d.threshold),
        same=bool(d.same),
        reasons=[str(r) for r in d.reasons],
        parts=dict(d.parts),
        unknown=[str(u) for u in d.unknown],
        note="computed on the whole of each trace (per step), whatever the scope compared",
    )


def _notes(before: AnalysisResult, after: AnalysisResult, a: _Scoped, b: _Scoped) -> list[str]:
    notes = []
    if a.side.device != b.side.device:
        notes.append(
            f"before ran on {a.side.device}, after on {b.side.device}: the times compare the "
            "hardware as well as the program"
        )
    if (a.steps == 0) != (b.steps == 0):
        which = "before" if a.steps == 0 else "after"
        notes.append(f"{which} has no ProfilerStep: per-step figures are unknown")
    elif a.steps != b.steps:
        notes.append(
            f"before holds {a.steps} ProfilerSteps, after {b.steps}: totals compare different "
            "amounts of work — read the per-step figures"
        )
    for s, word in ((a, "before"), (b, "after")):
        if s.side.scope != "whole trace":
            whole = len(before.rows) if s is a else len(after.rows)
            out = whole - s.side.rows
            notes.append(
                f"{word}: {s.side.rows:,} of {whole:,} GPU rows launched in {s.side.scope}; "
                f"{out:,} others (other steps, or no launch call) left out"
            )
    for res, word in ((before, "before"), (after, "after")):
        bad = res.trace.device_properties.get("malformed_events") or 0
        if bad:
            plural = "s" if bad != 1 else ""
            notes.append(
                f"{word}: {bad:,} malformed event{plural} skipped (a ts or dur missing or unusable)"
            )
    if before.analysis.counting != after.analysis.counting:
        notes.append("the two traces were counted differently: see each analysis's counting")
    return notes


def _catalogue_name(hw_id: str) -> str:
    """The catalogue entry's name of ``hw_id`` (the id itself where the catalogue lacks it)."""
    from engine.planner.catalogue import by_id

    try:
        return by_id(hw_id).name
    except (KeyError, ValueError):
        return hw_id
