"""Write an analysis: analysis.json, report.md and a Perfetto/Chrome-trace JSON with regime tracks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from pydantic_core import PydanticSerializationError

from engine.analyze.breakdown.measured import Confusion
from engine.analyze.breakdown.model import Analysis
from engine.analyze.compute import AnalysisResult
from engine.regimes import Label, Regime
from engine.store.runs import atomic_write_text
from engine.text import (
    REPORT_CHARS,
    clean,
    escape_json_text,
    map_strings,
    md_code,
    md_text,
    us_texts,
    valid_unicode,
)
from engine.trace.evidence import Tier, tiers

#: Chrome-trace reserved colour names per regime (ui.perfetto.dev and chrome://tracing honour them)
_CNAME = {
    Regime.COMPUTE: "good",
    Regime.MEMORY: "rail_load",
    Regime.STALL: "terrible",
    Regime.IDLE: "grey",
    Label.UNKNOWN: "white",
    Label.COMM: "rail_animation",
    Label.COPY: "rail_idle",
}
#: tid offset of a stream's regime track, so it sorts right below the stream's own track
_REGIME_TID = 1_000_000
# the most characters of one outside string in report.md: engine.text.REPORT_CHARS
_REPORT_CHARS = REPORT_CHARS


def clean_analysis(a: Analysis, limit: int | None = None) -> Analysis:
    """Return a copy of ``a`` with every string through :func:`engine.text.clean` (one line, no
    escape sequence, at most ``limit`` characters): what a terminal, a screen or report.md shows.
    Every field at once, so a field added later cannot slip through raw."""
    return Analysis.model_validate(map_strings(a.model_dump(), lambda s: clean(s, limit)))


def analysis_dict(a: Analysis) -> dict[str, object]:
    """Return the analysis as plain JSON data — what `gitm-tui analyze --json` prints (a list
    of them) and tests/data/golden holds: the names as they were in the trace, except that a
    lone surrogate, which UTF-8 cannot hold, becomes U+FFFD (as in analysis.json)."""
    out: dict[str, object] = map_strings(a.model_dump(mode="json"), valid_unicode)
    return out


def analysis_json(a: Analysis) -> str:
    """Return analysis.json's text: the names as they were in the trace, every control
    character a JSON escape (engine.text.escape_json_text), except that a lone surrogate, which
    UTF-8 cannot hold, becomes U+FFFD."""
    try:
        text = a.model_dump_json(indent=2)
    except PydanticSerializationError:  # a lone surrogate (a "\ud800" escape in a trace name)
        fixed = Analysis.model_validate(map_strings(a.model_dump(), valid_unicode))
        text = fixed.model_dump_json(indent=2)
    return escape_json_text(text)


#: in a job's merged Perfetto file (engine.analyze.output.rank_export) the rank is the process:
#: thread ids of a rank's second and later GPUs are moved by this much, and a perfetto.json
#: process at or above OVERLAY_PID (an overlay track: the critical path) is a thread band of
#: its own at OVERLAY_TID
DEVICE_TID = 100_000_000
OVERLAY_PID = 1 << 20
OVERLAY_TID = 1_000 * DEVICE_TID


def merged_tid(dev: int, tid: int) -> int:
    """A thread's id in the merged file, where the rank is the process: each GPU's streams in
    their own band, an overlay track's in another."""
    return tid + (OVERLAY_TID if dev >= OVERLAY_PID else dev * DEVICE_TID)


def merged_meta(ev: dict, rank: int) -> dict | None:
    """A metadata event of a rank's perfetto.json as the merged file holds it (None: dropped).
    The rank is the process (named once, first); a GPU's process name is dropped and its
    threads say which GPU; an overlay track's process name becomes its thread's name."""
    dev = int(ev.get("pid", 0))
    name = ev.get("name")
    if dev >= OVERLAY_PID and name in ("process_name", "process_sort_index"):
        if name == "process_sort_index":
            return None
        return {"ph": "M", "name": "thread_name", "pid": rank, "tid": merged_tid(dev, 0),
                "args": ev.get("args", {})}  # fmt: skip
    if name == "process_name":
        return None  # one process per rank, named above
    ev["pid"] = rank
    if "tid" in ev:
        ev["tid"] = merged_tid(dev, int(ev["tid"]))
    if 0 < dev < OVERLAY_PID and name == "thread_name":
        ev["args"] = {"name": f"GPU {dev} · {ev['args']['name']}"}
    return ev


def rank_process(rank: int) -> list[str]:
    """The merged file's two lines naming a rank's process."""
    return [
        json.dumps(
            {"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}}
        ),
        json.dumps(
            {"ph": "M", "name": "process_sort_index", "pid": rank, "args": {"sort_index": rank}}
        ),
    ]


def perfetto_json(res: AnalysisResult, events: list[str] | None = None) -> str:
    """Return Chrome-trace JSON: the original GPU rows plus one merged regime track per stream
    (``events``: its events made already, ``perfetto_events``)."""
    return (
        '{"displayTimeUnit":"ns","otherData":{"producer":"gitm-tui analyze"},'
        '"traceEvents":[\n' + ",\n".join(perfetto_events(res) if events is None else events)
        + "\n]}\n"
    )  # fmt: skip


#: where a rank's events go: None — its own perfetto.json, as the trace placed them; else
#: (rank, shift in ns) — the job's merged file, the rank its process and every time moved
Placement = tuple[int, int] | None


def perfetto_events(res: AnalysisResult, rank: int | None = None, shift_ns: int = 0) -> list[str]:
    """perfetto.json's events, one JSON object each; with ``rank``: as the job's merged file
    holds them (engine.analyze.output.rank_export — the rank is the process, its threads in
    its bands, every time moved by ``shift_ns``), line for line what converting the rank's own
    perfetto.json gives, made from the columns instead."""
    return perfetto_placed(res, [None if rank is None else (rank, shift_ns)])[0]


def perfetto_placed(res: AnalysisResult, placements: list[Placement]) -> list[list[str]]:
    """``perfetto_events`` for each placement, made in one pass: what every placement shares
    (names, durations, regimes, the args) formatted once — a job's rank writes its own
    perfetto.json and its part of the merged file from one call."""
    rows = res.rows
    metas: list[dict] = []
    named: set[int] = set()  # devices whose process is named
    pairs = np.unique(
        np.stack([rows.device, rows.stream]).astype(np.int64), axis=1, return_index=True
    )
    for i in np.sort(pairs[1]).tolist():  # (device, stream) in the order first met
        dev, st = int(rows.device[i]), int(rows.stream[i])
        if dev not in named:
            named.add(dev)
            metas.append(
                {"ph": "M", "name": "process_name", "pid": dev, "args": {"name": f"GPU {dev}"}}
            )
        metas += [
            {"ph": "M", "name": "thread_name", "pid": dev, "tid": st,
             "args": {"name": f"stream {st}"}},
            {"ph": "M", "name": "thread_name", "pid": dev, "tid": _REGIME_TID + st,
             "args": {"name": f"stream {st} · regime"}},
            {"ph": "M", "name": "thread_sort_index", "pid": dev, "tid": _REGIME_TID + st,
             "args": {"sort_index": 2 * st + 1}},
            {"ph": "M", "name": "thread_sort_index", "pid": dev, "tid": st,
             "args": {"sort_index": 2 * st}},
        ]  # fmt: skip
    outs: list[list[str]] = []
    for at in placements:
        out = [] if at is None else rank_process(at[0])
        outs.append(out + _metas([dict(m) for m in metas], None if at is None else at[0]))
    order = np.lexsort((rows.start_ns, rows.stream, rows.device))
    for out, lines in zip(outs, _row_events(res, order, placements), strict=True):
        out += lines
    for out, lines in zip(outs, _regime_events(res, order, placements), strict=True):
        out += lines
    if res.path is not None:  # the critical path, its own track above the streams
        from engine.analyze.breakdown.critical import critical_metas, path_tracks

        tracks = [
            (OVERLAY_PID, 0, 0) if at is None else (at[0], merged_tid(OVERLAY_PID, 0), at[1])
            for at in placements
        ]
        for out, at, lines in zip(outs, placements, path_tracks(*res.path, tracks), strict=True):
            heads = critical_metas(OVERLAY_PID)
            out += [json.dumps(m) for m in heads] if at is None else _metas(heads, at[0])
            out += lines
    return outs


def _metas(metas: list[dict], rank: int | None) -> list[str]:
    """The metadata events as lines: as they are, or as the merged file holds them."""
    if rank is None:
        return [json.dumps(m) for m in metas]
    return [json.dumps(m) for ev in metas if (m := merged_meta(ev, rank)) is not None]


def _placed(dev: np.ndarray, tid: np.ndarray, rank: int | None) -> tuple[list[int], list[int]]:
    """The process and thread columns: the rows' own, or the merged file's (rank, band)."""
    if rank is None:
        return dev.tolist(), tid.tolist()
    d = dev.astype(np.int64)
    band = np.where(d >= OVERLAY_PID, OVERLAY_TID, d * DEVICE_TID)
    return [rank] * len(d), (tid.astype(np.int64) + band).tolist()


def _ts(start: np.ndarray, at: Placement) -> list[str]:
    """The 'ts' texts of ``start`` (ns) where ``at`` places them."""
    if at is None or not at[1]:
        return us_texts(start)
    return us_texts(start.astype(np.int64) + at[1])


#: rows formatted a column at a time per chunk: the columns of a chunk as lists, never of all
_CHUNK = 1 << 16
#: one GPU row as a Chrome-trace slice (``_row_events``): what every placement shares, before
#: and after its "pid", "tid" and "ts"
_ROW_HEAD = '{"ph":"X","cat":"gpu","name":%s,"pid":'
_ROW_TAIL = (
    '"dur":%s,"args":{"regime":"%s","tier":"%s","confidence":%s,"kappa":%s,"low_confidence":%s}}'
)
#: one run of a regime on a stream (``_regime_events``), likewise
_RUN_HEAD = '{"ph":"X","cat":"regime","name":"%s","cname":"%s","pid":'
_RUN_TAIL = '"dur":%s,"args":{"segments":%d,"low_confidence":%d}}'


def _lookup(table: dict[int, str], codes: np.ndarray) -> list[str]:
    """``table[c]`` for each code (the codes are small non-negative integers)."""
    lut = np.empty(max(table) + 1, dtype=object)
    for k, v in table.items():
        lut[k] = v
    return list(lut[codes])


def _joined(
    heads: list[str], tails: list[str], dev: np.ndarray, tid: np.ndarray, start: np.ndarray,
    at: Placement,
) -> list[str]:  # fmt: skip
    """Each event's line: its head, its process, thread and time where ``at`` places them,
    its tail."""
    pids, tids = _placed(dev, tid, None if at is None else at[0])
    return [
        f'{h}{p},"tid":{t},"ts":{ts},{tl}'
        for h, p, t, ts, tl in zip(heads, pids, tids, _ts(start, at), tails, strict=True)
    ]


def _row_events(
    res: AnalysisResult, order: np.ndarray, placements: list[Placement]
) -> list[list[str]]:
    """Every GPU row as a slice with its regime, tier, confidence and κ, in ``order``, for each
    placement. Column at a time: each name JSON-encoded once, the numbers formatted from lists
    (a per-row loop over numpy scalars took 15 µs a row)."""
    rows, dec, names = res.rows, res.decoded, res.trace.names
    outs: list[list[str]] = [[] for _ in placements]
    if not len(order):
        return outs
    conf = dec.confidence if dec.confidence is not None else np.full(len(rows), np.nan)
    labels = dec.labels[order].astype(np.int64)
    # the tiers the analysis decoded with: shape-derived work counts only on known hardware
    # (engine.analyze.compute._label), so the trace view says what the report says
    row_tiers = np.asarray(tiers(rows, derived_evidence=res.analysis.hardware.id is not None))
    dash = max(int(t) for t in Tier) + 1  # a copy's or a collective's tier: "-"
    tier_code = np.where(labels >= Label.COMM, dash, row_tiers[order].astype(np.int64))
    tier_names = {int(t): t.name for t in Tier} | {dash: "-"}
    ids, where = np.unique(rows.name[order], return_inverse=True)
    encoded = np.array(
        [_ROW_HEAD % json.dumps(valid_unicode(names[int(i)])) for i in ids.tolist()], object
    )
    where = where.reshape(-1)
    label_names = {int(v): Label(int(v)).name for v in np.unique(labels)}
    for lo in range(0, len(order), _CHUNK):  # columns of a chunk at a time: bounded memory
        o, hi = order[lo : lo + _CHUNK], lo + _CHUNK
        start, end = rows.start_ns[o], rows.end_ns[o]
        tails = [
            _ROW_TAIL % t
            for t in zip(
                us_texts(end - start),
                _lookup(label_names, labels[lo:hi]),
                _lookup(tier_names, tier_code[lo:hi]),
                ["null" if c != c else f"{c:.3f}" for c in conf[o].astype(np.float64).tolist()],
                [
                    "null" if k != k else f"{k:.4g}"
                    for k in dec.kappa[o].astype(np.float64).tolist()
                ],
                np.where(dec.degenerate[o], "true", "false").tolist(),
                strict=True,
            )
        ]
        heads = list(encoded[where[lo:hi]])
        for out, at in zip(outs, placements, strict=True):
            out += _joined(heads, tails, rows.device[o], rows.stream[o], start, at)
    return outs


def _regime_events(
    res: AnalysisResult, order: np.ndarray, placements: list[Placement]
) -> list[list[str]]:
    """Per stream, each run of consecutive rows of one regime as one slice, streams in
    (device, stream) order — ``order`` sorts by them, so every run is a slice of it (one pass
    over all streams: a pass per stream took 0.1 s on a trace of 567 streams); for each
    placement."""
    rows, dec = res.rows, res.decoded
    n = len(order)
    if not n:
        return [[] for _ in placements]
    dev, st = rows.device[order], rows.stream[order]
    lab = dec.labels[order].astype(np.int64)
    new = np.ones(n, dtype=bool)
    new[1:] = (lab[1:] != lab[:-1]) | (dev[1:] != dev[:-1]) | (st[1:] != st[:-1])
    first = np.flatnonzero(new)
    s = rows.start_ns[order][first].astype(np.int64)
    e = np.maximum.reduceat(rows.end_ns[order], first).astype(np.int64)
    low = np.add.reduceat(dec.degenerate[order].astype(np.int64), first)
    regime = lab[first]
    name = {int(v): Label(int(v)).name for v in np.unique(regime)}
    colour = {int(v): _CNAME[Label(int(v))] for v in np.unique(regime)}
    heads = [
        _RUN_HEAD % t for t in zip(_lookup(name, regime), _lookup(colour, regime), strict=True)
    ]
    tails = [
        _RUN_TAIL % t
        for t in zip(
            us_texts(np.maximum(0, e - s)), np.diff(np.append(first, n)).tolist(), low.tolist(),
            strict=True,
        )
    ]  # fmt: skip
    tids = st[first].astype(np.int64) + _REGIME_TID
    return [_joined(heads, tails, dev[first], tids, s, at) for at in placements]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def report_markdown(a: Analysis) -> str:
    """Return the human report of one analysis (every string of it cleaned first: no escape
    sequence from a trace reaches the file)."""
    a = clean_analysis(a, _REPORT_CHARS)
    lines = [
        f"# gitm-tui analysis — {md_text(Path(a.source).name)}",
        "",
        f"* source: `{md_code(a.source, _REPORT_CHARS)}` "
        f"({a.format}{'' if a.rank is None else f', rank {a.rank}'})",
        f"* hardware: {md_text(a.hardware.name)} ({md_text(a.hardware.detected_from)}"
        f"{'' if not a.hardware.reported_name else ', trace says ' + md_text(a.hardware.reported_name)})",
        f"* {a.segments:,} GPU segments ({a.kernels:,} kernels), {_ms(a.gpu_time_ns)} ms GPU "
        f"time over {_ms(a.span_ns)} ms",
        f"* hardware links: host {a.hardware.host_link or 'unknown'}; peer "
        f"{a.hardware.peer_link or ('none assumed' if a.hardware.id else 'unknown')}",
        *(
            [f"* device inferred: {md_text(a.hardware.device_basis)}"]
            if a.hardware.device_basis
            else []
        ),
        *(
            f"* device {d.id}: {md_text(d.name)} ({md_text(d.detected_from)}) — {d.rows:,} rows, "
            f"{_ms(d.gpu_time_ns)} ms ({d.share_of_gpu_time:.0%} of GPU time); host link "
            f"{d.host_link or 'unknown'}; peer {d.peer_link or 'unknown'}"
            + (f"; {md_text(d.basis)}" if d.basis else "")
            for d in (a.devices if len(a.devices) > 1 else [])
        ),
        f"* evidence behind the labels: {a.pressures}"
        + (
            ""
            if a.evidence is None or a.evidence.mean_confidence is None
            else f"; mean confidence {a.evidence.mean_confidence:.2f} (time-weighted)"
        ),
        f"* counting: {a.counting}",
    ]
    if a.fingerprint is not None:  # (cleaned with the rest; names in it are the device's only)
        lines.append(f"* workload {md_text(a.fingerprint.line)} (docs/fingerprint.md)")
    lines.append("")
    if a.evidence is not None:
        lines += [f"Tiers: {a.evidence.note}.", ""]
    lines += [
        "## GPU time by label",
        "",
        "Kernels are decoded into COMPUTE / MEMORY / STALL / IDLE; copies and memsets are COPY "
        "(measured against their link below), collectives COMM, kernels of unknown class with "
        "nothing measured UNKNOWN.",
        "",
        "| label | ms | share |",
        "|---|---:|---:|",
    ]
    tot = max(1, sum(a.time_by_regime_ns.values()))
    lines += [f"| {k} | {_ms(v)} | {v / tot:.1%} |" for k, v in a.time_by_regime_ns.items()]
    lines += ["", "## GPU time by kernel class", "", "| class | ms | share |", "|---|---:|---:|"]
    tot = max(1, sum(a.time_by_class_ns.values()))
    lines += [
        f"| {k} | {_ms(v)} | {v / tot:.1%} |"
        for k, v in sorted(a.time_by_class_ns.items(), key=lambda kv: -kv[1])
    ]
    if a.copies:
        lines += [
            "",
            "## Copies against their link",
            "",
            "| direction | memory | count | MB | ms | GB/s | link | of link | note |",
            "|---|---|---:|---:|---:|---:|---|---:|---|",
        ]
        for c in a.copies:
            rate = "—" if c.achieved_Bps is None else f"{c.achieved_Bps / 1e9:.2f}"
            frac = "—" if c.fraction_of_link is None else f"{c.fraction_of_link:.0%}"
            lines.append(
                f"| {'' if c.device is None else f'device {c.device}: '}{md_text(c.direction)} | "
                f"{md_text(c.memory) or '—'} | {c.count} | "
                f"{c.bytes / 1e6:,.1f} | {_ms(c.time_ns)} | {rate} | {md_text(c.link or 'unknown')} | "
                f"{frac} | {md_text(c.note)} |"
            )
    if a.communication:
        lines += [
            "",
            "## Communication (collectives)",
            "",
            "| device | kernels | ms | share of GPU time | overlapped with compute | streams |",
            "|---:|---:|---:|---:|---:|---|",
        ]
        for m in a.communication:
            ov = m.overlapped_ns / m.time_ns if m.time_ns else 0.0
            lines.append(
                f"| {m.device} | {m.kernels} | {_ms(m.time_ns)} | {m.share_of_gpu_time:.1%} | "
                f"{ov:.0%} | {', '.join(map(str, m.streams))} |"
            )
    if a.measured_tier is not None:
        cm = Confusion.of(a.measured_tier)
        lines += [
            "",
            "## Measured tier: counters against the labels without them",
            "",
            f"{cm.headline()}. Each measured kernel is decoded twice: with its hardware counters "
            "(rows) and with them removed (columns: the label from recorded shapes where there "
            "are some, else the kernel-name prior; UNKNOWN where neither). Cells: kernels / "
            "kernel time; the diagonal is where the label without counters was right.",
            "",
            *cm.markdown(),
        ]
    if a.profiler_ranges is not None:
        pr = a.profiler_ranges
        lines += [
            "",
            "## CUPTI-profiler ranges",
            "",
            f"{pr.ranges:,} ranges, {pr.measured_flops:.4g} FLOPs measured. {pr.note}.",
        ]
    lines += [
        "",
        "## Streams",
        "",
        "| device | stream | kernels | kernel ms | idle ms | host wait | "
        "kernel wait | other | M_deg |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in a.streams:
        i = s.idle
        lines.append(
            f"| {s.device} | {s.stream} | {s.kernels} | {_ms(s.kernel_time_ns)} | "
            f"{_ms(i.total_ns)} | {_ms(i.host_wait_ns)} | {_ms(i.kernel_wait_ns)} | "
            f"{_ms(i.other_ns)} | {s.kappa_partition['M_deg']:.0%} |"
        )
    lines += [
        "",
        "## Top kernels",
        "",
        "| kernel | class | calls | total ms | share | label | evidence | confidence | "
        "achieved of roofline |",
        "|---|---|---:|---:|---:|---|---|---:|---:|",
    ]
    for k in a.top_kernels:
        name = md_code(k.name)
        ach = "—" if k.achieved_fraction is None else f"{k.achieved_fraction:.1%}"
        conf = "—" if k.confidence is None else f"{k.confidence:.2f}"
        lines.append(
            f"| `{name}` | {k.klass} | {k.calls} | {_ms(k.total_ns)} | "
            f"{k.share_of_gpu_time:.1%} | {k.regime} ({k.regime_share:.0%}) | {k.tier} | "
            f"{conf} | {ach} |"
        )
    if a.critical_path is not None:
        from engine.analyze.breakdown.critical import critical_markdown

        lines += critical_markdown(a.critical_path)
    if a.interventions:
        lines += [
            "",
            "## What would help (replayed on this trace; nothing applied)",
            "",
            "Each lever's transform edits this trace's dependency graph and re-schedules it. The "
            "predictions assume the change keeps the program's semantics; in the optimize loop a "
            "lever is kept only after it is measured and passes the workload's correctness check. "
            "Host time between calls (framework, Python) is kept in every replay. Predicted gains "
            "carry an interval from the stated ranges of their priors and are ranked by its low "
            "end; a ceiling (≤) is an upper bound only; a lever not judged is not predicted. "
            "The ceiling column is the most a lever could gain by the observed trace alone (no "
            "replay): no prediction exceeds it. A lever the device cannot do is not applicable.",
            "",
        ]
        if a.replay is not None:
            lines += [f"**{md_text(a.replay.line())}**", ""]
        lines += [f"* already in use: {md_text(u.evidence)}" for u in a.in_use]
        lines += [
            "",
            "| lever | safety | predicted (interval) | ceiling | basis |",
            "|---|---|---:|---:|---|",
        ]
        for e in a.interventions[:12]:
            gain = e.gain_text() + (" (prior-based)" if e.prior_based else "")
            gain += " (unfaithful replay)" if e.unfaithful_replay else ""
            basis = ("not judged: " if e.status == "not_judged" else "") + e.basis
            if e.ceiling_basis:
                basis += "; " + e.ceiling_basis
            ceil = "—" if e.ceiling is None else f"≤ {e.ceiling:+.1%}"
            lines.append(f"| {e.lever} | {e.safety} | {gain} | {ceil} | {md_text(basis)} |")
        bound = dict.fromkeys(e.peers for e in a.interventions[:12] if e.peers)
        lines += ["", *(f"**Peers:** {md_text(line)}" for line in bound)] if bound else []
    lines += ["", "## Invariants", ""]
    for inv in a.invariants:
        if not inv.checkable:
            lines.append(f"* **{inv.invariant}**: not checkable — {md_text(inv.reason)}")
            continue
        lines.append(
            f"* **{inv.invariant}**: {inv.violating_rows} violating rows of {inv.checked} "
            f"checked ({inv.not_checked} not checkable) — {md_text(inv.reason)}"
        )
        lines += [f"  * `{md_code(v.name)}`: {md_text(v.message)}" for v in inv.violations[:5]]
    lines.append("")
    la = a.launch
    lines += [
        "## Launches",
        "",
        f"{la.shorter_than_launch} of {la.kernels_linked} linked kernels "
        "ran for less time than their launch call"
        + (
            f" (median launch {la.median_launch_ns / 1e3:.1f} µs, median kernel "
            f"{la.median_kernel_ns / 1e3:.1f} µs)."
            if la.median_launch_ns and la.median_kernel_ns
            else "."
        )
        + (
            f" {la.graph_kernels} kernels from {la.graph_launches} graph launch"
            f"{'' if la.graph_launches == 1 else 'es'} are not counted: one graph launch "
            "launches every kernel of its graph, so its duration is no kernel's launch cost."
            if la.graph_kernels
            else ""
        ),
        "",
    ]
    if a.notes:
        lines += ["## Notes", ""] + [f"* {md_text(n)}" for n in a.notes] + [""]
    return "\n".join(lines)


def write_outputs(
    res: AnalysisResult, out_dir: Path, events: list[str] | None = None
) -> list[Path]:
    """Write analysis.json, report.md and perfetto.json into ``out_dir`` (atomically), and
    fingerprint.json (the workload fingerprint whole: engine.optimizer.fingerprint
    ``Fingerprint.from_json`` reads it back; names as the trace wrote them, JSON-escaped).
    ``events``: perfetto.json's events made already (``perfetto_placed``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "analysis.json", out_dir / "report.md", out_dir / "perfetto.json"]
    atomic_write_text(paths[0], analysis_json(res.analysis))
    atomic_write_text(paths[1], report_markdown(res.analysis))
    atomic_write_text(paths[2], perfetto_json(res, events))
    if res.fingerprint is not None:
        paths.append(out_dir / "fingerprint.json")
        text = json.dumps(map_strings(res.fingerprint.to_dict(), valid_unicode), ensure_ascii=True)
        atomic_write_text(paths[-1], text + "\n")
    return paths


def schema_json() -> str:
    """Return the JSON Schema of analysis.json (committed as manifests/schemas/analysis.schema.json)."""
    return json.dumps(Analysis.model_json_schema(), indent=2) + "\n"
