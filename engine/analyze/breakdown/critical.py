"""The critical path of one trace, told as a person reads it: a headline, the parts, the step
by step account, and the opportunities it shows — named first, whether or not a lever of the
library can change them (issue 46: "the elephant not named").

The path itself is found on the no-lever replay (engine.schedule.critical); this module only
sums and words it. Thresholds for naming an opportunity: manifests/critical_path.json.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

from engine.analyze.breakdown.critical_model import (
    CriticalPart,
    CriticalPath,
    CriticalStep,
    Opportunity,
    PathRow,
)
from engine.analyze.breakdown.critical_ops import OUTSIDE, host_by_operator, outside_while
from engine.levers.library import answering
from engine.manifest import load_critical_path
from engine.schedule.critical import GROUPS as GROUPS  # (re-exported: the headline's groups)
from engine.schedule.critical import HTA_BOUND_BY, PARTS, headline, kernel_breakdown
from engine.schedule.critical import CriticalPath as Path
from engine.schedule.critical import share_text as _pct
from engine.schedule.dag import ReplayDag
from engine.text import valid_unicode
from engine.trace.trace import ApiKind, Trace

_HOST_CALL: dict[int, str] = {
    ApiKind.LAUNCH: "launch calls",
    ApiKind.GRAPH_LAUNCH: "cudaGraphLaunch calls",
    ApiKind.MEMCPY_ASYNC: "async copy calls",
    ApiKind.MEMCPY_SYNC: "blocking copy calls",
    ApiKind.SYNC: "synchronize calls",
    ApiKind.EVENT_RECORD: "event record calls",
    ApiKind.STREAM_WAIT: "stream wait calls",
    ApiKind.MALLOC: "cudaMalloc/cudaFree calls",
    ApiKind.HOST_WORK: "annotated host work",
    ApiKind.DATA_LOADING: "data loading ranges",
}


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


def summarize_path(
    cp: Path,
    dag: ReplayDag,
    trace: Trace,
    window: str,
    peers: str,
    comm_overlap: float | None = None,
    pytorch: bool = False,
    busiest_ns: float | None = None,
) -> CriticalPath:
    """The model of ``cp`` (a path of ``dag``'s replay of ``trace``): parts, steps, rows and
    opportunities. ``window``: what was replayed; ``peers``: whether peers held collectives;
    ``comm_overlap``: the share of collective time overlapped by compute (None: unknown);
    ``pytorch``: the program runs PyTorch (its allocator and loader levers can apply);
    ``busiest_ns``: the busiest stream's busy time in the replay (the span cannot fall below
    it by host-side changes alone)."""
    total = float(cp.makespan_ns)
    by = cp.by_part()
    parts = sorted(
        (
            CriticalPart(
                part=p,
                label=PARTS[p],
                ns=round(v),
                share=v / total if total else 0.0,
                hta=HTA_BOUND_BY[p],
            )
            for p, v in by.items()
            if v > 0
        ),
        key=lambda x: -x.ns,
    )
    by_class, by_regime = kernel_breakdown(cp, dag)
    hta: dict[str, int] = defaultdict(int)
    for p, v in by.items():
        hta[HTA_BOUND_BY[p]] += round(v)
    cp_steps = _steps(cp, trace)
    return CriticalPath(
        total_ns=round(total),
        window=window,
        headline=headline(by, total),
        parts=parts,
        kernels_by_class_ns={k: round(v) for k, v in by_class.items()},
        kernels_by_regime_ns={k: round(v) for k, v in by_regime.items()},
        top_rows=_top_rows(cp, dag),
        host_ops=_rows(_top(host_by_operator(cp, dag, trace, n=None), 10, "other operators")),
        host_waits=_rows(outside_while(cp, dag, trace, n=5)),
        steps=cp_steps,
        hta_bound_by_ns=dict(hta),
        opportunities=opportunities(
            by, total, cp, dag, len(cp_steps), comm_overlap, pytorch, busiest_ns
        ),
        peers=peers,
        notes=_notes(cp, by, total, busiest_ns),
    )


def _notes(cp: Path, by: dict[str, float], total: float, busiest_ns: float | None) -> list[str]:
    """What qualifies the path: where it is the host's but the device is nearly as long (the
    host bounds the step only until the busiest stream does), and a walk cut short."""
    out = []
    off = sum(by[p] for p in ("host", "launch_api", "launch_delay", "sync", "allocation",
                              "data_loading", "idle"))  # fmt: skip
    if busiest_ns is not None and total > 0 and off > 0.5 * total:
        room = max(0.0, total - busiest_ns)
        out.append(
            f"the device runs while the host works: its busiest stream is busy "
            f"{busiest_ns / total:.0%} of the span, so host-side changes alone can take at most "
            f"{_ms(room)} ({room / total:.0%}) off it before the device bounds the step"
        )
    if cp.cut_short:
        out.append(
            "the walk stopped before the window's start (a cycle of zero-length waits): the "
            "parts cover less than the span"
        )
    return out


def _top(got: list[tuple[str, float, int]], n: int, rest: str) -> list[tuple[str, float, int]]:
    """The ``n`` largest, and the others as one row (the rows still add up to the whole)."""
    if len(got) <= n + 1:
        return got
    keep = [g for g in got[n:] if g[0] == OUTSIDE]  # (the time outside any operator stays)
    others = [g for g in got[n:] if g[0] != OUTSIDE]
    tail = (f"{len(others):,} {rest}", sum(v for _, v, _ in others), sum(c for *_, c in others))
    return [*got[:n], *keep, tail]


def _rows(got: list[tuple[str, float, int]]) -> list[PathRow]:
    return [PathRow(name=valid_unicode(n), part="host", ns=round(v), rows=c) for n, v, c in got]


def _allocation_advice(pool_off: bool, pytorch: bool) -> str:
    if pytorch and pool_off:
        return (
            "allocation every step: PyTorch's caching allocator is off or not reused — "
            "re-enable the pool (unset PYTORCH_NO_CUDA_MEMORY_CACHING), then keep shapes stable"
        )
    if pytorch:
        return "fewer allocator calls: stable shapes, expandable_segments against fragmentation"
    return "allocate once and reuse (a memory pool; buffers kept across steps)"


def _top_rows(cp: Path, dag: ReplayDag, n: int = 10) -> list[PathRow]:
    names = list(PARTS)
    acc: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    length = cp.length()
    for i in np.flatnonzero(length > 0).tolist():
        part = names[int(cp.part[i])]
        d, h = int(cp.dev[i]), int(cp.host[i])
        if d >= 0 and part in ("kernel", "communication", "copy", "comm_wait", "peer_wait"):
            key = (dag.d_name[d], part)
        elif h >= 0 and part != "host":
            key = (_HOST_CALL.get(int(dag.api[h]), "other host calls"), part)
        else:
            key = (PARTS[part], part)
        acc[key][0] += float(length[i])
        acc[key][1] += 1
    ranked = sorted(acc.items(), key=lambda kv: -kv[1][0])[:n]
    return [PathRow(name=k[0], part=k[1], ns=round(v[0]), rows=int(v[1])) for k, v in ranked]


def _steps(cp: Path, trace: Trace) -> list[CriticalStep]:
    """The path inside each ProfilerStep's host window (the trace's clock)."""
    props = trace.device_properties
    raw = props.get("profiler_steps") or []
    ids = props.get("profiler_step_ids") or []
    if len(ids) != len(raw):
        ids = [-1] * len(raw)
    out = []
    lo_w, hi_w = cp.t0_ns, cp.t0_ns + cp.makespan_ns
    for (a, b), n in sorted(zip(raw, ids, strict=True), key=lambda x: x[0][0]):
        a, b = float(a), float(b)
        if b <= lo_w or a >= hi_w or (min(b, hi_w) - max(a, lo_w)) < 0.5 * (b - a):
            continue  # a step mostly outside the replayed window
        parts = cp.by_part(a - cp.t0_ns, b - cp.t0_ns)
        length = sum(parts.values())
        out.append(
            CriticalStep(
                step=int(n),
                ns=round(b - a),
                parts_ns={p: round(v) for p, v in parts.items() if v > 0},
                headline=headline(parts, length),
            )
        )
    return out


def opportunities(
    by: dict[str, float],
    total: float,
    cp: Path,
    dag: ReplayDag,
    steps: int,
    comm_overlap: float | None,
    pytorch: bool = False,
    busiest_ns: float | None = None,
) -> list[Opportunity]:
    """Each large part of the path an engineer would act on (manifests/critical_path.json says
    how large), largest first; levers that act on it named, none where none does. A host-side
    part (allocation, loading, the host's own time) is sized by what it could take off the
    span: at most the span less the busiest stream's busy time (``busiest_ns``), since the
    device would bound the step after that."""
    if total <= 0:
        return []
    room = total - busiest_ns if busiest_ns is not None else total

    def host_side(ns: float) -> tuple[float, str]:
        if ns <= room:
            return ns, ""
        return max(0.0, room), (
            f"; at most {_ms(room)} of it can come off the span before the busiest stream "
            "(busy the rest of it) bounds the step"
        )

    prm = load_critical_path()
    names = list(PARTS)
    out: list[Opportunity] = []

    def rows_of(part: str) -> np.ndarray:
        return cp.dev[(cp.part == names.index(part)) & (cp.dev >= 0)]

    comm = by["communication"] + by["comm_wait"] + by["peer_wait"]
    if comm / total >= prm.exposed_communication_share:
        n = len(np.unique(rows_of("communication")))
        held = by["comm_wait"] + by["peer_wait"]
        overlap = (
            f"; {_pct(comm_overlap)} of all collective time overlapped with compute"
            if comm_overlap is not None
            else ""
        )
        out.append(
            Opportunity(
                what="exposed_communication",
                ns=round(comm),
                path_ns=round(comm),
                share=comm / total,
                evidence=f"{n} collective kernel(s) on the critical path: {_ms(by['communication'])} "
                f"in the kernels, {_ms(held)} held back before them"
                + (" (waiting for peers)" if by["peer_wait"] else " (cause not recorded: peers "
                   "or the network — analyze every rank's trace together to tell)")
                + overlap,
                suggestion="overlap communication with compute (DDP bucket_cap_mb and "
                "gradient_as_bucket_view, FSDP forward/backward prefetch), fewer and larger "
                "buckets, and find the rank the others wait for (gitm-tui analyze on every "
                "rank's trace)",
                levers=[],
            )
        )  # fmt: skip
    alloc, alloc_cap = host_side(by["allocation"])
    if alloc / total >= prm.allocation_share:
        calls = int((dag.api == ApiKind.MALLOC).sum())
        per_step = calls / steps if steps else None
        pool_off = (
            per_step >= prm.pool_off_calls_per_step
            if per_step is not None
            else calls >= prm.pool_off_calls
        )
        rate = f" ({per_step:,.0f} per step)" if per_step is not None else ""
        out.append(
            Opportunity(
                what="allocation",
                ns=round(alloc),
                path_ns=round(by["allocation"]),
                share=alloc / total,
                evidence=f"{calls:,} device allocation calls (cudaMalloc/cudaFree, hipMalloc/"
                f"hipFree) in the window{rate}, {_ms(by['allocation'])} of them on the critical "
                f"path{alloc_cap}",
                suggestion=_allocation_advice(pool_off, pytorch),
                levers=answering("allocation") if pytorch and not pool_off else [],
            )
        )
    load, load_cap = host_side(by["data_loading"])
    if load / total >= prm.data_loading_share:
        out.append(
            Opportunity(
                what="data_loading",
                ns=round(load),
                path_ns=round(by["data_loading"]),
                share=load / total,
                evidence=f"{_ms(by['data_loading'])} of data loading on the critical path: the "
                f"step waits for its loader{load_cap}",
                suggestion="more DataLoader workers, pin_memory=True, a larger prefetch_factor, "
                "or decode off the training process",
                levers=answering("data_loading") if pytorch else [],
            )
        )
    host, host_cap = host_side(by["host"] + by["launch_api"])
    if host / total >= prm.host_share:
        out.append(
            Opportunity(
                what="host",
                ns=round(host),
                path_ns=round(by["host"] + by["launch_api"]),
                share=host / total,
                evidence=f"{_ms(by['host'])} of host time between calls and "
                f"{_ms(by['launch_api'])} in launch calls on the critical path: the device "
                f"waits for Python and the framework{host_cap}",
                suggestion="capture the step in a CUDA graph (whole-step capture removes the "
                "host time between launches), torch.compile(mode='reduce-overhead'), larger "
                "batches per launch",
                levers=answering("host"),
            )
        )
    if by["kernel_gap"] / total >= prm.device_gap_share:
        out.append(
            Opportunity(
                what="device_gaps",
                ns=round(by["kernel_gap"]),
                path_ns=round(by["kernel_gap"]),
                share=by["kernel_gap"] / total,
                evidence=f"{_ms(by['kernel_gap'])} between dependent device rows that the trace "
                "does not explain (no recorded launch, event or sync accounts for it)",
                suggestion="look at these gaps in the timeline (perfetto.json marks the path): "
                "an unrecorded event wait, another process on the device, or a stream "
                "priority",
                levers=[],
            )
        )
    return sorted(out, key=lambda o: -o.ns)


def critical_markdown(cp: CriticalPath) -> list[str]:
    """report.md's section on the critical path (``cp`` already cleaned: no raw trace text).
    Names reach Markdown only inside code spans or through ``md_text``."""
    from engine.text import md_code, md_text

    lines = [
        "",
        "## What bounds the step: the critical path",
        "",
        f"**{md_text(cp.headline)}**",
        "",
        f"The path that sets the end of {md_text(cp.window)} in the no-lever replay "
        f"({_ms(cp.total_ns)}), every nanosecond given to one part (the parts add up to the "
        "span; docs/critical_path.md says how the path is found and how it compares with "
        f"HTA's). {md_text(cp.peers)}.",
        "",
        "| part | ms | share | HTA's bound_by |",
        "|---|---:|---:|---|",
    ]
    lines += [f"| {md_text(p.label)} | {_ms(p.ns)} | {p.share:.1%} | {p.hta} |" for p in cp.parts]
    if cp.opportunities:
        lines += ["", "### Named first: what the path is bound by", ""]
        for o in cp.opportunities:
            lev = ", ".join(f"`{x}`" for x in o.levers) if o.levers else "no lever of the library"
            lines.append(
                f"* **{md_text(o.what.replace('_', ' '))}** — {o.size_text(cp.total_ns)}: "
                f"{md_text(o.evidence)}. Try: {md_text(o.suggestion)} ({lev})."
            )
    if cp.kernels_by_class_ns:
        lines += ["", "Kernels on the path by class: " + ", ".join(
            f"{k} {_ms(v)}" for k, v in sorted(cp.kernels_by_class_ns.items(), key=lambda kv: -kv[1])
        ) + "; by regime: " + ", ".join(
            f"{k} {_ms(v)}" for k, v in sorted(cp.kernels_by_regime_ns.items(), key=lambda kv: -kv[1])
        ) + "."]  # fmt: skip
    if cp.top_rows:
        lines += ["", "| on the path | part | ms | rows |", "|---|---|---:|---:|"]
        lines += [
            f"| {md_code(r.name)} | {r.part} | {_ms(r.ns)} | {r.rows:,} |" for r in cp.top_rows
        ]
    if cp.host_ops:
        lines += ["", "Host time on the path by the top-level operator it was spent in:", "",
                  "| operator | ms | calls |", "|---|---:|---:|"]  # fmt: skip
        lines += [f"| {md_code(r.name)} | {_ms(r.ns)} | {r.rows:,} |" for r in cp.host_ops]
    if cp.host_waits:
        lines += ["", "Of the host time outside any operator, what another thread ran then (the "
                  "thread on the path waited for it):", "", "| other thread's operator | ms |",
                  "|---|---:|"]  # fmt: skip
        lines += [f"| {md_code(r.name)} | {_ms(r.ns)} |" for r in cp.host_waits]
    if cp.steps:
        lines += ["", "| step | ms | bound by |", "|---:|---:|---|"]
        lines += [
            f"| {s.step if s.step >= 0 else '?'} | {_ms(s.ns)} | {md_text(s.headline)} |"
            for s in cp.steps[:20]
        ]
    lines += [f"* note: {md_text(n)}" for n in cp.notes]
    return lines


def critical_metas(pid: int = 1 << 20) -> list[dict[str, object]]:
    """The critical path's track: its process named and sorted first."""
    return [
        {"ph": "M", "name": "process_name", "pid": pid,
         "args": {"name": "critical path (no-lever replay)"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": -1}},
    ]  # fmt: skip


def perfetto_events(
    cp: Path,
    dag: ReplayDag,
    pid: int = 1 << 20,
    tid: int = 0,
    shift_ns: int = 0,
    metas: bool = True,
) -> list[str]:
    """The path as one Chrome-trace track (a process named 'critical path'): one slice per run
    of intervals of one part and one row, on the trace's clock (µs) moved by ``shift_ns``, on
    process ``pid``, thread ``tid`` (``metas``: with the lines naming the process)."""
    out = [json.dumps(m) for m in critical_metas(pid)] if metas else []
    return out + path_tracks(cp, dag, [(pid, tid, shift_ns)])[0]


def path_tracks(cp: Path, dag: ReplayDag, tracks: list[tuple[int, int, int]]) -> list[list[str]]:
    """The path's slices (``perfetto_events`` without the naming lines) for each track of
    ``tracks`` — (process, thread, shift in ns) — in one pass: what they share (names,
    durations, parts) formatted once."""
    from engine.text import us_texts

    if not len(cp.start):
        return [[] for _ in tracks]
    names = list(PARTS)
    # whole ns, written exactly (us_texts); np.rint rounds half to even, as round() does
    a = np.rint(cp.start.astype(np.float64) + cp.t0_ns).astype(np.int64)
    b = np.rint(cp.end.astype(np.float64) + cp.t0_ns).astype(np.int64)
    said: dict[tuple[int, int], str] = {}  # (part, row) → its line's head, its name encoded once
    parts, devs = cp.part.astype(np.int64).tolist(), cp.dev.astype(np.int64).tolist()
    for key in set(zip(parts, devs, strict=True)):
        p, d = key
        what = PARTS[names[p]] + (f": {dag.d_name[d]}" if d >= 0 else "")
        said[key] = '{"ph":"X","cat":"critical_path","name":' + json.dumps(valid_unicode(what))
    heads = [said[k] for k in zip(parts, devs, strict=True)]
    tails = [
        f'"dur":{dur},"args":{{"part":"{names[p]}"}}}}'
        for p, dur in zip(parts, us_texts(np.maximum(0, b - a)), strict=True)
    ]
    out = []
    for pid, tid, shift in tracks:
        ts = us_texts(a + shift) if shift else us_texts(a)
        out.append(
            [
                f'{h},"pid":{pid},"tid":{tid},"ts":{t},{tl}'
                for h, t, tl in zip(heads, ts, tails, strict=True)
            ]
        )
    return out
