"""Write an analysis: analysis.json, report.md and a Perfetto/Chrome-trace JSON with regime tracks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from engine.analyze.compute import AnalysisResult
from engine.analyze.model import Analysis
from engine.regimes import Regime
from engine.runtime.store import atomic_write_text

#: Chrome-trace reserved colour names per regime (ui.perfetto.dev and chrome://tracing honour them)
_CNAME = {
    Regime.COMPUTE: "good",
    Regime.MEMORY: "rail_load",
    Regime.STALL: "terrible",
    Regime.IDLE: "grey",
}
#: tid offset of a stream's regime track, so it sorts right below the stream's own track
_REGIME_TID = 1_000_000


def _us(ns: int) -> str:
    """Exact decimal microseconds for the JSON 'ts'/'dur' fields (no float rounding)."""
    sign = "-" if ns < 0 else ""
    ns = abs(int(ns))
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


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
    for i in order.tolist():
        lab = Regime(int(dec.labels[i]))
        k = float(dec.kappa[i])
        out.append(
            '{"ph":"X","cat":"gpu","name":%s,"pid":%d,"tid":%d,"ts":%s,"dur":%s,'
            '"args":{"regime":"%s","kappa":%s,"low_confidence":%s}}'
            % (
                json.dumps(names[int(rows.name[i])]),
                rows.device[i],
                rows.stream[i],
                _us(rows.start_ns[i]),
                _us(rows.end_ns[i] - rows.start_ns[i]),
                lab.name,
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
            r = Regime(int(lab[run[0]]))
            s, e = int(rows.start_ns[first]), int(rows.end_ns[sel[run]].max())
            out.append(
                '{"ph":"X","cat":"regime","name":"%s","cname":"%s","pid":%d,"tid":%d,'
                '"ts":%s,"dur":%s,"args":{"segments":%d,"low_confidence":%d}}'
                % (
                    r.name,
                    _CNAME[r],
                    dev,
                    _REGIME_TID + st,
                    _us(s),
                    _us(max(0, e - s)),
                    len(run),
                    int(dec.degenerate[sel[run]].sum()),
                )
            )
        _ = last
    return (
        '{"displayTimeUnit":"ns","otherData":{"producer":"gitm-tui analyze"},'
        '"traceEvents":[\n' + ",\n".join(out) + "\n]}\n"
    )


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def report_markdown(a: Analysis) -> str:
    """Return the human report of one analysis."""
    lines = [
        f"# gitm-tui analysis — {Path(a.source).name}",
        "",
        f"* source: `{a.source}` ({a.format}{'' if a.rank is None else f', rank {a.rank}'})",
        f"* hardware: {a.hardware.name} ({a.hardware.detected_from}"
        f"{'' if not a.hardware.reported_name else ', trace says ' + a.hardware.reported_name})",
        f"* {a.segments:,} GPU segments ({a.kernels:,} kernels), {_ms(a.gpu_time_ns)} ms GPU "
        f"time over {_ms(a.span_ns)} ms",
        f"* pressures: {a.pressures}",
        "",
    ]
    lines += ["## GPU time by regime", "", "| regime | ms | share |", "|---|---:|---:|"]
    tot = max(1, sum(a.time_by_regime_ns.values()))
    lines += [f"| {k} | {_ms(v)} | {v / tot:.1%} |" for k, v in a.time_by_regime_ns.items()]
    lines += ["", "## GPU time by kernel class", "", "| class | ms | share |", "|---|---:|---:|"]
    tot = max(1, sum(a.time_by_class_ns.values()))
    lines += [
        f"| {k} | {_ms(v)} | {v / tot:.1%} |"
        for k, v in sorted(a.time_by_class_ns.items(), key=lambda kv: -kv[1])
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
        "| kernel | class | calls | total ms | share | regime | achieved of roofline |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for k in a.top_kernels:
        name = k.name if len(k.name) <= 80 else k.name[:77] + "…"
        name = name.replace("|", "\\|")
        ach = "—" if k.achieved_fraction is None else f"{k.achieved_fraction:.1%}"
        lines.append(
            f"| `{name}` | {k.klass} | {k.calls} | {_ms(k.total_ns)} | "
            f"{k.share_of_gpu_time:.1%} | {k.regime} ({k.regime_share:.0%}) | {ach} |"
        )
    if a.interventions:
        lines += [
            "",
            "## What would help (replayed on this trace; nothing applied)",
            "",
            "Each lever's transform edits this trace's dependency graph and re-schedules it. The "
            "predictions assume the change keeps the program's semantics; in the optimize loop a "
            "lever is kept only after it is measured and passes the workload's correctness check.",
            "",
            "| lever | safety | predicted | what the replay changed |",
            "|---|---|---:|---|",
        ]
        for e in a.interventions[:10]:
            prior = " (prior-based)" if e.prior_based else ""
            lines.append(f"| {e.lever} | {e.safety} | {e.predicted_gain:+.1%}{prior} | {e.what} |")
    inv = a.kernel_time_invariant
    lines += [
        "",
        "## Kernel-time invariant",
        "",
        f"{inv.note}. Checkable: {inv.checkable}, violations: {inv.violations}.",
        "",
    ]
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
        ),
        "",
    ]
    if a.notes:
        lines += ["## Notes", ""] + [f"* {n}" for n in a.notes] + [""]
    return "\n".join(lines)


def write_outputs(res: AnalysisResult, out_dir: Path) -> list[Path]:
    """Write analysis.json, report.md and perfetto.json into ``out_dir`` (atomically)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "analysis.json", out_dir / "report.md", out_dir / "perfetto.json"]
    atomic_write_text(paths[0], res.analysis.model_dump_json(indent=2))
    atomic_write_text(paths[1], report_markdown(res.analysis))
    atomic_write_text(paths[2], perfetto_json(res))
    return paths


def schema_json() -> str:
    """Return the JSON Schema of analysis.json (committed as manifests/schemas/analysis.schema.json)."""
    return json.dumps(Analysis.model_json_schema(), indent=2) + "\n"
