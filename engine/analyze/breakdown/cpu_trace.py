"""A CPU-only PyTorch profiler trace (``activities=[ProfilerActivity.CPU]``: no kernel, copy or
runtime row) read for what it holds, where the GPU analysis has nothing to decode.

What it reads: the trace's ``cpu_op`` events (ATen operators) and ``user_annotation`` ranges
(``ProfilerStep#N``, ``enumerate(DataLoader)#…__next__``, ``Optimizer.step#…``), through the
same byte stream, scanner and strict field parser as the GPU reader — every limit of
engine.trace.limits (file size, gzip ratio, event size, nesting) and its one-line errors; ts
and dur exactly in int64 ns (an event whose time is missing, negative or out of range is
skipped and counted).

What it says (``CpuSummary``):

* **steps** — the ``ProfilerStep#N`` spans: count, mean, median, min, max; the first step is
  set apart when it is a warm-up outlier (``WARMUP_FACTOR`` × the others' median or more, with
  two others at least).
* **the window** the shares are of: the steps' summed time; without steps, the span from the
  first to the last CPU operator. Operators are those that start in it.
* **operators by self time**: self = an event's duration minus the durations of the events
  nested directly inside it on the same thread (a per-thread stack over the events sorted by
  start; a child that outlasts its parent counts up to the parent's end), summed per name.
* **data loading** (``enumerate(DataLoader)#…__next__``) and the **optimizer**
  (``Optimizer.step#…``, ``Optimizer.zero_grad#…``): their time in the window, per thread
  without double counting, as a share of it.
* **host gaps**: within each step, the time on the main thread (the one with the most time in
  top-level operators) that no top-level operator covers — Python, the data loader's own code,
  waiting. Covered is the union of the thread's operators: the top-level ones' where events
  nest properly, and no gap where a child outlasts its parent.

Read once: a trace that says in its metadata that it is a CPU-only profile
(``"deviceProperties": []``, as torch.profiler writes it without CUDA; ``cpu_profile``) is read
here first (``read_cpu_profile``), and handed to the GPU reader only when a device row turns up
after all. Any other trace is read by the GPU reader first, and here only when it holds no GPU
row (engine.analyze.run.analyze_file).

UI-free: engine.analyze.run makes a file's outcome of it; gitm_tui renders it. Names are kept as
the trace wrote them: a caller cleans them (engine.text.clean) before showing any.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.text import valid_unicode
from engine.trace.errors import TraceImportError
from engine.trace.kineto.cpu_events import CpuEvents, cpu_profile, read_cpu_events
from engine.trace.limits import ReadLimits

__all__ = [
    "GPU_HINT",
    "WARMUP_FACTOR",
    "CpuEvents",
    "CpuSummary",
    "Gaps",
    "OpRow",
    "Share",
    "Steps",
    "cpu_dict",
    "cpu_profile",
    "read_cpu_events",
    "read_cpu_profile",
    "read_cpu_summary",
    "summarize",
]

#: the first step is a warm-up outlier when it took this many times the others' median or more
WARMUP_FACTOR = 2.0
#: what a GPU trace would add, and how to record one
GPU_HINT = (
    "a GPU trace adds kernels, regimes, the roofline and the replay's lever predictions: "
    "profile with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
    "ProfilerActivity.CUDA], record_shapes=True)"
)
#: the line of a trace with neither GPU rows nor CPU operators
NOTHING = (
    "no GPU activity and no CPU operators in this trace (no kernel, copy, cpu_op or "
    "ProfilerStep event): nothing to analyse"
)

_DATALOADER = "enumerate(DataLoader)#"
#: the CPU ranges of collectives: ProcessGroupGloo's and NCCL's record_function names, c10d's
#: ops and the profiler's record_param_comms
_COLLECTIVE = ("gloo:", "nccl:", "c10d::", "record_param_comms", "mpi:", "ucc:")
_OPTIMIZER = ("Optimizer.step#", "Optimizer.zero_grad#")
_STEP = "ProfilerStep#"


# ---------------------------------------------------------------------------------- figures
@dataclass(frozen=True)
class Steps:
    """The ProfilerStep spans' times (ns), the first set apart when it is a warm-up outlier."""

    count: int
    mean_ns: float
    median_ns: float
    min_ns: int
    max_ns: int
    #: the first step's time when it is a warm-up outlier (the figures above leave it out)
    first_apart_ns: int | None = None
    #: every step's number (from its name; -1 where none) and time, in order
    each: tuple[tuple[int, int], ...] = ()
    rule: str = (
        f"the first step is set apart as a warm-up outlier when it took {WARMUP_FACTOR:g}x the "
        "others' median or more (two others at least)"
    )


@dataclass(frozen=True)
class OpRow:
    """One operator name: its calls in the window, their self and total (inclusive) time."""

    name: str
    calls: int
    self_ns: int
    total_ns: int
    #: self time over the window's time
    share: float


@dataclass(frozen=True)
class Share:
    """Time spent in a kind of annotated range (data loading, the optimizer) in the window."""

    calls: int
    time_ns: int
    #: time_ns over the window's time
    share: float
    what: str


@dataclass(frozen=True)
class Gaps:
    """Time on the main thread within the window that no top-level operator covers."""

    time_ns: int
    share: float
    #: the longest single gap, the step it was in (-1: no steps) and what ended just before it
    longest_ns: int = 0
    longest_step: int = -1
    longest_after: str = ""
    rule: str = (
        "within each step, time on the main thread (the one with the most time in top-level "
        "operators) not covered by any top-level operator"
    )


@dataclass(frozen=True)
class CpuSummary:
    """What a CPU-only trace says (module docstring); plain data (a Dask task sends it back)."""

    source: str
    format: str
    #: CPU events read (operators and annotated ranges) and threads they ran on
    events: int
    threads: int
    main_thread: tuple[int | None, int | None]
    #: the time the shares are of, and what it is
    window_ns: int
    window: str
    steps: Steps | None
    #: distinct operator names and calls in the window, their self time and its share
    operators: int
    op_calls: int
    op_self_ns: int
    op_share: float
    top: tuple[OpRow, ...]
    data_loading: Share
    optimizer: Share
    gaps: Gaps
    skipped: int = 0
    notes: tuple[str, ...] = field(default=())
    gpu_hint: str = GPU_HINT
    #: collectives' CPU ranges (gloo:all_reduce, nccl:…, c10d::…): a CPU-only job's
    #: communication — for a gloo job often the most of what it records
    collectives: Share | None = None


def _merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [start, end) as sorted disjoint intervals."""
    if not len(start):
        return start, end
    o = np.argsort(start, kind="stable")
    s, e = start[o], np.maximum.accumulate(end[o])
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > e[:-1]
    idx = np.flatnonzero(new)
    last = np.append(idx[1:] - 1, len(s) - 1)
    return s[idx], e[last]


def _covered(ms: np.ndarray, me: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How much of each [a, b) the sorted disjoint intervals [ms, me) cover (ns)."""
    if not len(ms):
        return np.zeros(len(a), np.int64)
    cum = np.concatenate(([0], np.cumsum(me - ms)))

    def upto(x: np.ndarray) -> np.ndarray:  # covered length before x
        k = np.searchsorted(ms, x, side="right")
        j = np.maximum(k - 1, 0)
        part = np.clip(np.minimum(x, me[j]) - ms[j], 0, None)
        return np.where(k > 0, cum[j] + part, 0)

    return np.maximum(upto(b) - upto(a), 0)


def _nesting(ev: CpuEvents) -> tuple[np.ndarray, np.ndarray]:
    """Each event's self time (its duration less what is nested directly inside it on its
    thread) and whether it is a top-level operator (an operator inside no operator), from a
    per-thread stack over the events sorted by start (the longer first at equal starts, a
    range before an operator of the same span)."""
    n = len(ev)
    start, end = ev.start.tolist(), ev.end.tolist()
    op, thread = ev.is_op.tolist(), ev.thread.tolist()
    order = np.lexsort((ev.is_op, -ev.end, ev.start, ev.thread)).tolist()
    child = [0] * n
    top = [False] * n
    stack: list[int] = []
    ops: list[int] = []  # operators on the stack, up to and including each entry
    current = -1
    for i in order:
        if thread[i] != current:
            current = thread[i]
            stack.clear()
            ops.clear()
        s, e = start[i], end[i]
        while stack and end[stack[-1]] <= s:
            stack.pop()
            ops.pop()
        inside = 0
        if stack:
            p = stack[-1]
            child[p] += min(e, end[p]) - s
            inside = ops[-1]
        top[i] = op[i] and not inside
        stack.append(i)
        ops.append(inside + op[i])
    dur = ev.end - ev.start
    return np.maximum(dur - np.asarray(child, np.int64), 0), np.asarray(top, bool)


def _step_stats(spans: list[tuple[int, int, int]]) -> Steps:
    times = [e - s for s, e, _ in spans]
    each = tuple((num, t) for (_, _, num), t in zip(spans, times, strict=True))
    apart = None
    kept = times
    if len(times) >= 3 and times[0] >= WARMUP_FACTOR * float(np.median(times[1:])):
        apart, kept = times[0], times[1:]
    k = np.asarray(kept, np.float64)
    return Steps(
        len(times), float(k.mean()), float(np.median(k)), int(min(kept)), int(max(kept)),
        apart, each,
    )  # fmt: skip


def _share(
    ev: CpuEvents, rows: np.ndarray, ws: np.ndarray, we: np.ndarray, window: int, what: str
) -> Share:
    """The time of the events ``rows`` within the window (merged per thread), its share."""
    ms, me = _merged_by_thread(ev.thread[rows], ev.start[rows], ev.end[rows])
    total = int(_covered(ws, we, ms, me).sum())
    return Share(int(rows.size), total, total / window if window else 0.0, what)


def _merged_by_thread(
    thread: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals on each thread, as disjoint intervals per thread (those of two
    threads may overlap): one pass over the intervals sorted by thread and start."""
    order = np.lexsort((start, thread)).tolist()
    t, s, e = thread.tolist(), start.tolist(), end.tolist()
    ms: list[int] = []
    me: list[int] = []
    current = None
    for i in order:
        if t[i] == current and s[i] <= me[-1]:
            me[-1] = max(me[-1], e[i])
        else:
            current = t[i]
            ms.append(s[i])
            me.append(e[i])
    return np.asarray(ms, np.int64), np.asarray(me, np.int64)


def summarize(ev: CpuEvents, source: str, top: int = 20) -> CpuSummary:
    """The figures of a CPU-only trace's events (module docstring); ``top`` operators kept.
    TraceImportError (NOTHING) when it holds neither a CPU operator nor a ProfilerStep."""
    names = ev.names
    step_name = np.array([names[i].startswith(_STEP) for i in range(len(names))], bool)
    is_step = ~ev.is_op & step_name[ev.name] if len(ev) else np.zeros(0, bool)
    if not ev.is_op.any() and not is_step.any():
        raise TraceImportError(source, NOTHING)
    notes: list[str] = []
    self_ns, top_level = _nesting(ev)

    # the steps, and the window the shares are of
    st = np.flatnonzero(is_step)
    st = st[np.lexsort((ev.end[st], ev.start[st]))]
    spans: list[tuple[int, int, int]] = []
    for i in st.tolist():
        num = names[int(ev.name[i])][len(_STEP) :]
        spans.append(
            (
                int(ev.start[i]),
                int(ev.end[i]),
                int(num) if num.isascii() and num.isdigit() and len(num) < 12 else -1,
            )
        )
    ops = np.flatnonzero(ev.is_op)
    if spans:
        ws, we = _merged(np.array([s for s, _, _ in spans]), np.array([e for _, e, _ in spans]))
        window_ns = int((we - ws).sum())
        window = f"the {len(spans)} ProfilerStep span{'s' if len(spans) != 1 else ''}"
        k = np.searchsorted(ws, ev.start[ops], side="right") - 1
        inside = (k >= 0) & (ev.start[ops] < we[np.maximum(k, 0)])
        if (out := int((~inside).sum())) > 0:
            notes.append(
                f"{out:,} operator call{'s' if out != 1 else ''} outside the ProfilerStep spans "
                f"left out"
            )
        ops = ops[inside]
        steps: Steps | None = _step_stats(spans)
    else:
        lo, hi = int(ev.start[ops].min()), int(ev.end[ops].max())
        ws, we = np.array([lo]), np.array([hi])
        window_ns = hi - lo
        window = "the span from the first to the last CPU operator (no ProfilerStep spans)"
        steps = None

    # operators by self time
    by = ev.name[ops]
    uniq, inv = np.unique(by, return_inverse=True)
    inv = inv.reshape(-1)
    calls = np.bincount(inv, minlength=len(uniq))
    self_int = np.zeros(len(uniq), np.int64)  # exact integer sums (bincount's are floats)
    np.add.at(self_int, inv, self_ns[ops])
    tot_int = np.zeros(len(uniq), np.int64)
    np.add.at(tot_int, inv, ev.end[ops] - ev.start[ops])
    rank = sorted(range(len(uniq)), key=lambda u: (-int(self_int[u]), names[int(uniq[u])]))
    rows = tuple(
        OpRow(
            names[int(uniq[u])],
            int(calls[u]),
            int(self_int[u]),
            int(tot_int[u]),
            int(self_int[u]) / window_ns if window_ns else 0.0,
        )
        for u in rank[: max(top, 0)]
    )
    op_self = int(self_int.sum())
    threads_with_ops = len(np.unique(ev.thread[ops])) if ops.size else 0
    if window_ns and op_self > window_ns:
        notes.append(
            f"operators ran on {threads_with_ops} threads at once: their shares add up past 100%"
        )

    # data loading and the optimizer
    is_dl = np.array([n.startswith(_DATALOADER) and n.endswith("__next__") for n in names], bool)
    is_opt = np.array([n.startswith(_OPTIMIZER) for n in names], bool)
    dl_rows = np.flatnonzero(is_dl[ev.name]) if len(ev) else np.zeros(0, np.int64)
    opt_rows = np.flatnonzero(is_opt[ev.name]) if len(ev) else np.zeros(0, np.int64)
    data_loading = _share(ev, dl_rows, ws, we, window_ns, "enumerate(DataLoader)#…__next__ ranges")
    optimizer = _share(
        ev, opt_rows, ws, we, window_ns, "Optimizer.step#… and Optimizer.zero_grad#… ranges"
    )
    is_coll = np.array([n.startswith(_COLLECTIVE) for n in names], bool)
    coll_rows = np.flatnonzero(is_coll[ev.name]) if len(ev) else np.zeros(0, np.int64)
    kinds: list[int] = (
        np.bincount(ev.name[coll_rows], minlength=len(names)).tolist() if coll_rows.size else []
    )
    seen = sorted(
        ((int(c), names[i]) for i, c in enumerate(kinds) if c), key=lambda x: (-x[0], x[1])
    )
    collectives = _share(
        ev, coll_rows, ws, we, window_ns,
        "ranges: " + ", ".join(f"{n} ×{c:,}" for c, n in seen[:4]) + (" …" if len(seen) > 4 else ""),
    )  # fmt: skip
    if any("MultiProcessingDataLoaderIter" in names[int(i)] for i in np.unique(ev.name[dl_rows])):
        notes.append(
            "the DataLoader has worker processes: their loading is not in this trace, the time "
            "here is the main process waiting for batches"
        )

    # host gaps on the main thread: the one with the most time in top-level operators; what
    # its operators cover is their union (the top-level ones' where they nest properly, and
    # still right where a child outlasts its parent)
    tops = np.flatnonzero(top_level)
    busy = np.zeros(len(ev.threads), np.int64)
    if tops.size:
        np.add.at(busy, ev.thread[tops], ev.end[tops] - ev.start[tops])
    main = int(np.argmax(busy)) if len(busy) else 0
    mine = np.flatnonzero(ev.is_op & (ev.thread == main))
    ms, me = _merged(ev.start[mine], ev.end[mine])
    gaps = _gaps(ev, mine, ms, me, ws, we, spans or [(int(ws[0]), int(we[0]), -1)], window_ns)
    if ev.skipped:
        notes.append(
            f"{ev.skipped:,} CPU event{'s' if ev.skipped != 1 else ''} skipped: ts or dur "
            "missing, not a number, negative or out of range"
        )
    return CpuSummary(
        source=source,
        format="kineto",
        events=len(ev),
        threads=len(ev.threads),
        main_thread=ev.threads[main] if ev.threads else (None, None),
        window_ns=window_ns,
        window=window,
        steps=steps,
        operators=len(uniq),
        op_calls=int(ops.size),
        op_self_ns=op_self,
        op_share=op_self / window_ns if window_ns else 0.0,
        top=rows,
        data_loading=data_loading,
        optimizer=optimizer,
        gaps=gaps,
        skipped=ev.skipped,
        notes=tuple(notes),
        collectives=collectives if collectives.calls else None,
    )


def _gaps(
    ev: CpuEvents,
    mine: np.ndarray,
    ms: np.ndarray,
    me: np.ndarray,
    ws: np.ndarray,
    we: np.ndarray,
    spans: list[tuple[int, int, int]],
    window_ns: int,
) -> Gaps:
    """Host gaps: the time of the window [ws, we) that the merged operators [ms, me) of the
    main thread leave uncovered, and the longest single gap in one of the
    ``spans`` (the steps) with what ended just before it."""
    total = int(((we - ws) - _covered(ms, me, ws, we)).sum())
    longest, where, at = 0, -1, None
    for s, e, num in spans:
        lo = np.searchsorted(me, s, side="right")  # intervals ending after s
        hi = np.searchsorted(ms, e, side="left")  # intervals starting before e
        cs, ce = np.clip(ms[lo:hi], s, e), np.clip(me[lo:hi], s, e)
        edges_s = np.concatenate(([s], ce))  # each gap begins where the last op ended
        edges_e = np.concatenate((cs, [e]))
        g = edges_e - edges_s
        if g.size and int(g.max()) > longest:
            j = int(np.argmax(g))
            longest, where, at = int(g[j]), num, int(edges_s[j])
    after = "the step's start"
    if at is not None and mine.size:
        ended = mine[ev.end[mine] == at]
        if ended.size:  # the outermost of the operators that ended there
            after = ev.names[int(ev.name[ended[np.argmin(ev.start[ended])]])]
    return Gaps(total, total / window_ns if window_ns else 0.0, longest, where, after)


def read_cpu_summary(
    path: str | Path,
    top: int = 20,
    source: str | None = None,
    limits: ReadLimits | None = None,
    interpreted: bool = False,
) -> CpuSummary:
    """Read a CPU-only trace and say what it holds; TraceImportError (one line) for a file that
    cannot be read, or (NOTHING) one with neither CPU operators nor ProfilerSteps. ``source``:
    the name to give it (default: ``path``)."""
    ev = read_cpu_events(path, limits, interpreted)
    return summarize(ev, str(path) if source is None else source, top)


def read_cpu_profile(
    path: str | Path,
    top: int = 20,
    source: str | None = None,
    limits: ReadLimits | None = None,
    interpreted: bool = False,
) -> CpuSummary | None:
    """``read_cpu_summary`` for a trace ``cpu_profile`` names, in one read; None when it holds a
    device row after all (the GPU reader's to read). TraceImportError as read_cpu_summary."""
    ev = read_cpu_events(path, limits, interpreted)
    if ev.device_rows:
        return None
    return summarize(ev, str(path) if source is None else source, top)


# ------------------------------------------------------------------------------- as JSON
def cpu_dict(c: CpuSummary) -> dict[str, Any]:
    """The summary as plain JSON data (``"kind": "cpu_only"``): what `gitm-tui analyze --json`
    prints for a CPU-only trace, names as the trace wrote them (a lone surrogate, which UTF-8
    cannot hold, becomes U+FFFD)."""
    v = valid_unicode
    pid, tid = c.main_thread
    st = c.steps
    return {
        "kind": "cpu_only",
        "source": v(c.source),
        "format": c.format,
        "events": c.events,
        "threads": c.threads,
        "main_thread": {"pid": pid, "tid": tid},
        "window_ns": c.window_ns,
        "window": c.window,
        "steps": None
        if st is None
        else {
            "count": st.count,
            "mean_ns": st.mean_ns,
            "median_ns": st.median_ns,
            "min_ns": st.min_ns,
            "max_ns": st.max_ns,
            "first_apart_ns": st.first_apart_ns,
            "each": [{"step": n, "time_ns": t} for n, t in st.each],
            "rule": st.rule,
        },
        "operators": {
            "distinct": c.operators,
            "calls": c.op_calls,
            "self_ns": c.op_self_ns,
            "share_of_window": c.op_share,
            "top_by_self_time": [
                {
                    "name": v(r.name),
                    "calls": r.calls,
                    "self_ns": r.self_ns,
                    "total_ns": r.total_ns,
                    "share_of_window": r.share,
                }
                for r in c.top
            ],
        },
        "data_loading": _share_dict(c.data_loading),
        "collectives": _share_dict(c.collectives) if c.collectives else None,
        "optimizer": _share_dict(c.optimizer),
        "host_gaps": {
            "time_ns": c.gaps.time_ns,
            "share_of_window": c.gaps.share,
            "longest_ns": c.gaps.longest_ns,
            "longest_step": c.gaps.longest_step,
            "longest_after": v(c.gaps.longest_after),
            "rule": c.gaps.rule,
        },
        "skipped_events": c.skipped,
        "notes": [v(n) for n in c.notes],
        "gpu_trace_adds": c.gpu_hint,
    }


def _share_dict(s: Share) -> dict[str, Any]:
    return {"calls": s.calls, "time_ns": s.time_ns, "share_of_window": s.share, "what": s.what}
