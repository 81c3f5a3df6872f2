"""What the analysis counts, and an option to count as Holistic Trace Analysis (HTA) does.

Our semantics (``DEFAULT_COUNTING``): every kernel, memcpy, memset and collective row in the
trace, whatever step it belongs to, in exact nanoseconds. HTA's default load counts less, and
users comparing the two see 20–150 % differences; ``apply_counting(trace, "hta")`` reproduces
HTA's default so the figures can be compared like with like.

What HTA (``hta`` 0.5.0, the version in our venv) does when it loads a trace with
``TraceAnalysis(trace_dir=…)`` — read from its source:

* **Rounding** — ``hta/common/trace_parser.py``, ``round_down_time_stamps``, called by
  ``_parse_trace_dataframe_json`` / ``_parse_trace_dataframe_ijson`` right after the events are
  read. Only when the ``ts`` column is float64 (the trace has a fractional timestamp; a trace of
  whole-µs integers is left alone, durations included), and unless
  ``hta_options.disable_ns_rounding()`` (off by default): ``end = ts + dur`` in float64, then
  ``ts = ceil(ts)``, ``end = floor(end)``, ``dur = end - ts``. An event that does not span a
  whole-µs tick (ts 10.2, dur 0.5) gets ``dur = -1``.
* **Dropped rows** — ``_compress_df`` (same file) drops events without ``dur`` or ``cat`` and
  the ``Trace`` category: never a GPU row.
* **Step and launch filter** — ``hta/common/trace.py``: ``TraceAnalysis.__init__`` passes
  ``include_last_profiler_step`` (default ``False``) to ``Trace.load_traces`` →
  ``align_and_filter_trace`` → ``_align_all_ranks`` (shifts every ts by the minimum: no effect on
  durations) and ``_filter_irrelevant_gpu_kernels``. The latter collects the symbol ids of every
  *distinct name* containing "ProfilerStep"; with fewer than two it filters **nothing** (only a
  warning — kernels without a launch event are kept too). Otherwise, per rank: the "GPU kernels"
  are ``hta/common/trace_filter.py``'s ``_filter_gpu_kernels_with_cuda_sync`` rows (``stream >= 0``
  and ``correlation >= 0``, or named "Event Sync" / "Context Sync"), every other event is a "CPU
  op"; ``last_profiler_start`` is the largest ``ts`` of the CPU ops whose name contains
  "ProfilerStep". CPU ops are kept when ``ts < last_profiler_start`` (with
  ``include_last_profiler_step=True``: ``ts <= last_profiler_end``, the largest such end), and
  GPU kernels by an inner ``merge`` on ``correlation`` with the kept CPU ops. So a GPU row is
  dropped when no host event has its correlation id (no launch event) or when its launch starts
  at or after the last step's start; work before the first step is kept, and so is a kernel
  that runs after the last step started but was launched before it. A GPU row that matches *k*
  host events appears *k* times (the merge multiplies it).

``apply_counting(trace, "hta")`` does the same on our data, in HTA's order (round, then filter
with rounded times), with these limits:

* the step boundaries are ``trace.device_properties["profiler_steps"]`` (the Kineto importer's
  ``ProfilerStep#N`` user annotations): we count annotations where HTA counts distinct names
  (the same when each step has its own number, as the profiler writes them), and HTA also takes
  GPU-side ``gpu_user_annotation`` "ProfilerStep#N" rows (they have no stream, so to HTA they are
  "CPU ops") into ``last_profiler_start`` — where one starts later than the last host-side step,
  HTA cuts later than we do;
* rounding happens when any start we hold is a fractional µs; a trace whose timestamps are whole
  µs but whose ``ts`` column HTA reads as float for another reason (``1.0``, a missing ``ts``)
  would have its fractional durations rounded by HTA and not by us;
* the float arithmetic is HTA's (each start becomes the float64 nearest ``start_ns / 1000``,
  bit-identical to parsing the decimal µs string when it has at most three decimals, also for
  epoch-ns starts past 2**53 ns where ``start_ns / 1e3`` in numpy would round twice), but an
  event HTA gives −1 µs is kept at 0 µs (our rows cannot end before they start): it is counted
  in the statement;
* a row HTA's merge would count several times is counted once, also counted in the statement;
* CUPTI profiler-range rows (``cuda_profiler_range``, kernels with measured FLOPs) have no stream
  in Kineto, so HTA never counts them as GPU work; ``apply_counting`` does not drop them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.trace.segments import Kind, Segments
from engine.trace.trace import HostEvents, Trace

COUNTING_MODES = ("exact", "hta")

DEFAULT_COUNTING = (
    "Counting: every kernel, memcpy, memset and collective row in the trace is counted, "
    "whatever step it belongs to: no ProfilerStep filter (the first and last steps, and work "
    "before or after them, are all included) and no requirement that a GPU row have a launch "
    "(runtime) event. Times are exact nanoseconds: Kineto's decimal-µs ts/dur are read exactly "
    "(no float rounding; fractional µs keep their ns), Nsight exports are integer ns already. "
    "Copies and memsets are GPU time like kernels (they occupy their stream); synchronisation "
    "rows are not. Holistic Trace Analysis's default load counts less: in a trace with two or "
    "more ProfilerSteps it drops GPU rows launched at or after the last step's start and GPU "
    "rows without a launch event, and it rounds fractional timestamps to whole µs; "
    "`gitm-tui analyze --counting hta` counts as it does."
)

_US = 1000  # ns per µs: HTA keeps whole microseconds
#: HTA's GPU-side synchronisation names, counted as GPU work whatever their stream
_HTA_SYNC_NAMES = ("Event Sync", "Context Sync")
_KIND_WORDS: dict[int, str] = {
    Kind.KERNEL: "kernel",
    Kind.MEMCPY: "copy",
    Kind.MEMSET: "memset",
    Kind.SYNC: "sync",
    Kind.COMM: "collective",
}


def apply_counting(trace: Trace, mode: str) -> tuple[Trace, str]:
    """Return the trace to analyse under counting ``mode`` and a statement of what was counted.

    ``"exact"``: the trace itself and :data:`DEFAULT_COUNTING`. ``"hta"``: a new Trace filtered
    and rounded as HTA's default load would (see the module docstring) and what was done, with
    counts. The input trace is never modified.
    """
    if mode == "exact":
        return trace, DEFAULT_COUNTING
    if mode == "hta":
        return _as_hta(trace)
    raise ValueError(f"unknown counting mode {mode!r}: expected one of {', '.join(COUNTING_MODES)}")


def _as_hta(trace: Trace) -> tuple[Trace, str]:
    seg, host = trace.segments, trace.host
    steps_known = "profiler_steps" in trace.device_properties
    steps = _steps(trace.device_properties.get("profiler_steps"))
    s_start, s_end = seg.start_ns, seg.end_ns
    h_start, h_end = host.api_start_ns, host.api_end_ns
    # HTA rounds only a float ts column, i.e. a trace with fractional-µs timestamps
    fractional = bool((s_start % _US).any() or (h_start % _US).any())
    parts: list[str] = []
    if fractional:
        s_start, s_end, s_short = _hta_round(s_start, s_end)
        h_start, h_end, _ = _hta_round(h_start, h_end)
        if steps:  # HTA's last_profiler_start is a rounded ts like any other
            starts = np.array([a for a, _ in steps], np.int64)
            rounded = _hta_round(starts, starts)[0]
            steps = [(int(a), b) for a, (_, b) in zip(rounded, steps, strict=True)]
        rounding = (
            "times rounded to whole µs as HTA rounds fractional timestamps (start up to the next "
            "µs, end down)"
        )
        if s_short:
            rounding += (
                f"; {_n(s_short, 'GPU row')} spanning no whole µs: HTA gives them −1 µs, "
                "here they count 0"
            )
    else:
        rounding = (
            "timestamps are whole µs already: nothing rounded (HTA rounds only fractional ones)"
        )

    keep = np.ones(len(seg), bool)
    h_keep = np.ones(len(host), bool)
    if len(steps) >= 2:  # HTA filters only when it finds two or more ProfilerStep names
        last = max(a for a, _ in steps)
        h_keep = h_start < last
        # HTA's "GPU kernels": stream >= 0 and a correlation id, or a GPU-side sync by name;
        # everything else is a "CPU op" to it, kept by its own start like the host rows
        sync_ids = [trace.names.names().index(n) for n in _HTA_SYNC_NAMES if n in trace.names]
        gpu = ((seg.stream >= 0) & (seg.correlation >= 0)) | np.isin(seg.name, sync_ids)
        launched = np.isin(seg.correlation, host.correlation)
        kept_corr, kept_n = np.unique(host.correlation[h_keep], return_counts=True)
        pos = np.searchsorted(kept_corr, seg.correlation).clip(0, max(len(kept_corr) - 1, 0))
        matched = (
            (kept_corr[pos] == seg.correlation) if len(kept_corr) else np.zeros(len(seg), bool)
        )
        keep = np.where(gpu, matched, s_start < last)
        orphan = gpu & ~launched
        late = ~keep & ~orphan
        parts.append(
            f"dropped {_by_kind(seg, late)} launched at or after the start of the last "
            f"ProfilerStep (of {len(steps)}) and {_by_kind(seg, orphan)} without a launch event "
            "(HTA keeps a GPU row only when a host event with its correlation id starts before "
            f"that step); {_n(int((~h_keep).sum()), 'host row')} from then on dropped too"
        )
        multi = int((gpu & matched & (kept_n[pos] > 1)).sum()) if len(kept_corr) else 0
        if multi:
            parts.append(
                f"{_n(multi, 'GPU row')} sharing a correlation id with several host events: HTA's "
                "merge counts each that many times, here they count once"
            )
    elif steps_known:
        parts.append(
            f"no step filter: the trace has {_n(len(steps), 'ProfilerStep annotation')} and HTA "
            "filters (steps and launch events alike) only when it finds two or more"
        )
    else:
        parts.append(
            "no step filter: no ProfilerStep annotations are known for this trace (its importer "
            "records none), and HTA filters only when it finds two or more"
        )
    parts.append(rounding)

    cols = seg.columns()
    cols["start_ns"], cols["end_ns"] = s_start, s_end
    new_seg = Segments(**{k: np.ascontiguousarray(v[keep]) for k, v in cols.items()})
    new_seg.validate()
    new_host = HostEvents(
        correlation=host.correlation[h_keep],
        stream=host.stream[h_keep],
        api_start_ns=h_start[h_keep],
        api_end_ns=h_end[h_keep],
        api=host.api[h_keep],
        event=host.event[h_keep],
        thread=host.thread[h_keep],
    )
    props = dict(trace.device_properties)
    props["counting"] = "hta"
    statement = "Counting as Holistic Trace Analysis's default load: " + "; ".join(parts) + "."
    out = Trace(
        segments=new_seg,
        names=trace.names,
        host=new_host,
        device_properties=props,
        source=trace.source,
        simulated=trace.simulated,
        top_ops=trace.top_ops,  # (the host part of the critical path by operator reads them)
    )
    return out, statement


def _steps(raw: Any) -> list[tuple[int, int]]:
    """The ``profiler_steps`` property as (start_ns, end_ns) pairs; anything else is none."""
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        return []
    out = []
    for pair in raw:
        if isinstance(pair, Sequence) and len(pair) == 2:
            a, b = pair
            if isinstance(a, int | np.integer) and isinstance(b, int | np.integer):
                out.append((int(a), int(b)))
    return out


def _hta_round(
    start_ns: npt.NDArray[np.int64], end_ns: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """HTA's ``round_down_time_stamps`` on ns columns: (start, end, rows it gives −1 µs).

    HTA works on the float64 µs that ``json`` parsed, i.e. the decimal µs string rounded once
    to the nearest float64: :func:`_us_float` of the start (exact also past 2**53 ns, where
    epoch-ns starts lie), and ``(end − start) / 1e3`` for the parsed ``dur`` (a duration is far
    below 2**53 ns, so the division is exact-then-rounded-once too). Their sum is formed in float
    as HTA forms it, so a sum that lands a hair below a whole µs floors as HTA's does.
    """
    ts = _us_float(start_ns)
    end = ts + (end_ns - start_ns) / 1e3
    lo = np.ceil(ts).astype(np.int64)
    hi = np.floor(end).astype(np.int64)
    short = hi < lo  # HTA: dur = end - ts = -1; a Segments row cannot end before it starts
    return lo * _US, np.maximum(hi, lo) * _US, int(short.sum())


_EXACT_INT = 2**53  # float64 holds every integer below this


def _us_float(ns: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """``ns / 1000`` as the float64 nearest the exact quotient: what ``float()`` of the decimal
    µs string (``"1712195495505582.988"``) gives, which is how HTA's ``json`` load reads ``ts``.

    Below 2**53 ns numpy's ``ns / 1e3`` is that float (the integer converts exactly, the
    division rounds once). Above it — a ns-resolution trace's epoch timestamps, ~1.7e18 ns — the
    conversion to float64 already rounds (to a multiple of 256 ns) and the division rounds
    again, which lands one float64 step (0.25 µs there) off in about a quarter of the rows and
    moves HTA's ceil/floor by a whole µs. Those rows are divided as Python integers instead,
    whose true division is correctly rounded.
    """
    out = ns / 1e3
    big = np.abs(ns) >= _EXACT_INT
    if big.any():
        out[big] = [int(v) / _US for v in ns[big].tolist()]
    return out


def _by_kind(seg: Segments, mask: npt.NDArray[np.bool_]) -> str:
    """'12 GPU rows (10 kernels, 2 copies)' for the rows under ``mask``."""
    n = int(mask.sum())
    if not n:
        return "0 GPU rows"
    kinds, counts = np.unique(seg.kind[mask], return_counts=True)
    detail = ", ".join(
        _n(int(c), _KIND_WORDS.get(int(k), "other row")) for k, c in zip(kinds, counts, strict=True)
    )
    return f"{_n(n, 'GPU row')} ({detail})"


def _n(count: int, noun: str) -> str:
    """'1 copy', '2 copies', '3 GPU rows'."""
    if count == 1:
        return f"1 {noun}"
    return f"{count} {noun[:-1]}ies" if noun.endswith("y") else f"{count} {noun}s"
