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
    us_text,
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


def perfetto_json(res: AnalysisResult) -> str:
    """Return Chrome-trace JSON: the original GPU rows plus one merged regime track per stream."""
    rows, dec, names = res.rows, res.decoded, res.trace.names
    out: list[str] = []
    seen: set[tuple[int, int]] = set()
    for dev, st in zip(rows.device.tolist(), rows.stream.tolist(), strict=True):
        if (dev, st) in seen:
            continue
        if not any(d == dev for d, _ in seen):
            out.append(
                json.dumps(
                    {"ph": "M", "name": "process_name", "pid": dev, "args": {"name": f"GPU {dev}"}}
                )
            )
        seen.add((dev, st))
        out.append(
            json.dumps(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": dev,
                    "tid": st,
                    "args": {"name": f"stream {st}"},
                }
            )
        )
        out.append(
            json.dumps(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": dev,
                    "tid": _REGIME_TID + st,
                    "args": {"name": f"stream {st} · regime"},
                }
            )
        )
        out.append(
            json.dumps(
                {
                    "ph": "M",
                    "name": "thread_sort_index",
                    "pid": dev,
                    "tid": _REGIME_TID + st,
                    "args": {"sort_index": 2 * st + 1},
                }
            )
        )
        out.append(
            json.dumps(
                {
                    "ph": "M",
                    "name": "thread_sort_index",
                    "pid": dev,
                    "tid": st,
                    "args": {"sort_index": 2 * st},
                }
            )
        )
    order = np.lexsort((rows.start_ns, rows.stream, rows.device))
    conf = dec.confidence if dec.confidence is not None else np.full(len(rows), np.nan)
    copy_or_comm = dec.labels >= Label.COMM
    # the tiers the analysis decoded with: shape-derived work counts only on known hardware
    # (engine.analyze.compute._label), so the trace view says what the report says
    row_tiers = tiers(rows, derived_evidence=res.analysis.hardware.id is not None)
    tier_names = [
        "-" if x else Tier(int(t)).name for t, x in zip(row_tiers, copy_or_comm, strict=True)
    ]
    for i in order.tolist():
        lab = Label(int(dec.labels[i]))
        k = float(dec.kappa[i])
        c = float(conf[i])
        out.append(
            '{"ph":"X","cat":"gpu","name":%s,"pid":%d,"tid":%d,"ts":%s,"dur":%s,'
            '"args":{"regime":"%s","tier":"%s","confidence":%s,"kappa":%s,"low_confidence":%s}}'
            % (
                json.dumps(valid_unicode(names[int(rows.name[i])])),
                rows.device[i],
                rows.stream[i],
                us_text(rows.start_ns[i]),
                us_text(rows.end_ns[i] - rows.start_ns[i]),
                lab.name,
                tier_names[i],
                "null" if c != c else f"{c:.3f}",
                "null" if k != k else f"{k:.4g}",
                "true" if dec.degenerate[i] else "false",
            )
        )
    # regime tracks: consecutive rows of one regime on a stream merge into one slice
    for dev, st in sorted(seen):
        sel = order[(rows.device[order] == dev) & (rows.stream[order] == st)]
        lab = dec.labels[sel]
        cuts = np.flatnonzero(np.diff(lab.astype(np.int16))) + 1
        for run in np.split(np.arange(len(sel)), cuts):
            if not len(run):
                continue
            first, last = sel[run[0]], sel[run[-1]]
            r = Label(int(lab[run[0]]))
            s, e = int(rows.start_ns[first]), int(rows.end_ns[sel[run]].max())
            out.append(
                '{"ph":"X","cat":"regime","name":"%s","cname":"%s","pid":%d,"tid":%d,'
                '"ts":%s,"dur":%s,"args":{"segments":%d,"low_confidence":%d}}'
                % (
                    r.name,
                    _CNAME[r],
                    dev,
                    _REGIME_TID + st,
                    us_text(s),
                    us_text(max(0, e - s)),
                    len(run),
                    int(dec.degenerate[sel[run]].sum()),
                )
            )
        _ = last
    if res.path is not None:  # the critical path, its own track above the streams
        from engine.analyze.breakdown.critical import perfetto_events

        out += perfetto_events(*res.path)
    return (
        '{"displayTimeUnit":"ns","otherData":{"producer":"gitm-tui analyze"},'
        '"traceEvents":[\n' + ",\n".join(out) + "\n]}\n"
    )


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
        f"* hardware: {a.hardware.name} ({a.hardware.detected_from}"
        f"{'' if not a.hardware.reported_name else ', trace says ' + a.hardware.reported_name})",
        f"* {a.segments:,} GPU segments ({a.kernels:,} kernels), {_ms(a.gpu_time_ns)} ms GPU "
        f"time over {_ms(a.span_ns)} ms",
        f"* hardware links: host {a.hardware.host_link or 'unknown'}; peer "
        f"{a.hardware.peer_link or ('none assumed' if a.hardware.id else 'unknown')}",
        *([f"* device inferred: {a.hardware.device_basis}"] if a.hardware.device_basis else []),
        *(
            f"* device {d.id}: {d.name} ({d.detected_from}) — {d.rows:,} rows, "
            f"{_ms(d.gpu_time_ns)} ms ({d.share_of_gpu_time:.0%} of GPU time); host link "
            f"{d.host_link or 'unknown'}; peer {d.peer_link or 'unknown'}"
            + (f"; {d.basis}" if d.basis else "")
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
        lines += ["## Notes", ""] + [f"* {n}" for n in a.notes] + [""]
    return "\n".join(lines)


def write_outputs(res: AnalysisResult, out_dir: Path) -> list[Path]:
    """Write analysis.json, report.md and perfetto.json into ``out_dir`` (atomically), and
    fingerprint.json (the workload fingerprint whole: engine.optimizer.fingerprint
    ``Fingerprint.from_json`` reads it back; names as the trace wrote them, JSON-escaped)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "analysis.json", out_dir / "report.md", out_dir / "perfetto.json"]
    atomic_write_text(paths[0], analysis_json(res.analysis))
    atomic_write_text(paths[1], report_markdown(res.analysis))
    atomic_write_text(paths[2], perfetto_json(res))
    if res.fingerprint is not None:
        paths.append(out_dir / "fingerprint.json")
        text = json.dumps(map_strings(res.fingerprint.to_dict(), valid_unicode), ensure_ascii=True)
        atomic_write_text(paths[-1], text + "\n")
    return paths


def schema_json() -> str:
    """Return the JSON Schema of analysis.json (committed as manifests/schemas/analysis.schema.json)."""
    return json.dumps(Analysis.model_json_schema(), indent=2) + "\n"
