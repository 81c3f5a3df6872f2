"""Analyse an imported trace: decode regimes per stream, time breakdowns, idle split, top kernels,
roofline bounds, the kernel-time invariant, κ partition and launch statistics."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.analyze.model import (
    Analysis,
    Hardware,
    Idle,
    InvariantResult,
    KernelRow,
    LaunchStats,
    StreamStats,
    Violation,
)
from engine.eesm.pipeline import Decoded, EesmModel, decode_fused
from engine.planner.catalogue import GpuPeaks, by_id, detect
from engine.regimes import Regime
from engine.trace.errors import TraceImportError
from engine.trace.segments import Kind, Klass, Provenance, Segments
from engine.trace.trace import Trace

#: HTA's default ``consecutive_kernel_delay`` (30 µs): shorter gaps between back-to-back GPU
#: events on a stream count as launch overhead ("kernel wait"), as in HTA's idle breakdown.
CONSECUTIVE_KERNEL_DELAY_NS = 30_000
#: a kernel achieving less than this fraction of its roofline bound violates the kernel-time
#: invariant (DESIGN §5 (1)); the same floor as the lowest class efficiency in the H100 manifest.
MIN_ROOFLINE_FRACTION = 0.2
#: the hardware assumed when a trace's device is not in the catalogue (said in the notes)
FALLBACK_HARDWARE = "h100-sxm"

_TIMED = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM)


@dataclass
class AnalysisResult:
    """The analysis plus the arrays the exporters need."""

    analysis: Analysis
    rows: Segments  # the decoded rows (kernels, copies, memsets)
    decoded: Decoded
    trace: Trace


def _hardware(trace: Trace, hardware: str | None) -> tuple[GpuPeaks, Hardware, list[str]]:
    """Return the peaks to use, how they were chosen, and a note when they are a fallback."""
    devices = trace.device_properties.get("devices") or []
    reported = str(devices[0].get("name")) if devices and devices[0].get("name") else None
    notes: list[str] = []
    found = by_id(hardware) if hardware else detect(devices)
    source = "flag" if hardware else "trace"
    if found is None:
        found, source = by_id(FALLBACK_HARDWARE), "none"
        notes.append(
            f"device {reported or '(unnamed)'} is not in the hardware catalogue: "
            f"roofline bounds use {found.name} peaks; pass --hardware to choose"
        )
    model = Hardware(
        id=found.id if source != "none" else None,
        name=found.name,
        detected_from=source,
        reported_name=reported,
        peak_source=found.source,
    )
    return found, model, notes


def _idle(start: np.ndarray, end: np.ndarray, launch: np.ndarray) -> Idle:
    """HTA's idle split for one stream's GPU events (sorted by start)."""
    if len(start) < 2:
        return Idle(total_ns=0, host_wait_ns=0, kernel_wait_ns=0, other_ns=0)
    prev_end = end[:-1]
    gap = start[1:] - prev_end
    lt = launch[1:]
    host = (lt != np.iinfo(np.int64).min) & (lt > prev_end)
    kern = ~host & (gap < CONSECUTIVE_KERNEL_DELAY_NS)
    other = ~host & ~kern
    return Idle(
        total_ns=int(gap.sum()),
        host_wait_ns=int(gap[host].sum()),
        kernel_wait_ns=int(gap[kern].sum()),
        other_ns=int(gap[other].sum()),
    )


def _launch_times(rows: Segments, trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Return each row's launch-call start and duration (int64 min / -1 where not linked)."""
    missing = np.iinfo(np.int64).min
    start = np.full(len(rows), missing, np.int64)
    dur = np.full(len(rows), -1, np.int64)
    h = trace.host
    if not len(h) or not len(rows):
        return start, dur
    order = np.argsort(h.correlation, kind="stable")
    corr = h.correlation[order]
    pos = np.searchsorted(corr, rows.correlation)
    pos = np.clip(pos, 0, len(corr) - 1)
    hit = (corr[pos] == rows.correlation) & (rows.correlation >= 0)
    idx = order[pos[hit]]
    start[hit] = h.api_start_ns[idx]
    dur[hit] = h.api_end_ns[idx] - h.api_start_ns[idx]
    return start, dur


def _bounds(rows: Segments, hw: GpuPeaks) -> np.ndarray:
    """Roofline lower bound per row (ns) where FLOPs or bytes were measured, else NaN."""
    peak = hw.class_peak_flops()[rows.klass]
    measured_f = (rows.provenance & Provenance.FLOPS) != 0
    measured_b = (rows.provenance & Provenance.DRAM_BYTES) != 0
    t_f = np.where(measured_f, rows.flops / peak * 1e9, np.nan)
    t_b = np.where(measured_b, rows.dram_bytes / hw.hbm_bandwidth_Bps * 1e9, np.nan)
    return np.fmax(t_f, t_b)  # fmax ignores a NaN side


def analyze_trace(trace: Trace, hardware: str | None = None, top: int = 20) -> AnalysisResult:
    """Return the analysis of ``trace``; TraceImportError if it has no GPU activity."""
    seg = trace.segments
    rows = seg.take(np.isin(seg.kind, np.array(_TIMED, np.uint8)))
    if not len(rows):
        raise TraceImportError(trace.source, "no GPU activity in this trace (a CPU-only profile?)")
    hw, hw_model, notes = _hardware(trace, hardware)
    model = EesmModel.build(hw)  # type: ignore[arg-type]  # GpuPeaks has the peaks EESM needs
    dec = decode_fused(rows, model)
    dur = rows.duration_ns
    labels = dec.labels
    names = trace.names

    n_kern = int((rows.kind == Kind.KERNEL).sum())
    counted = (
        rows.provenance & (Provenance.FLOPS | Provenance.ISSUE_ACTIVE | Provenance.STALL_FRAC)
    ) != 0
    kern_mask = rows.kind == Kind.KERNEL
    if counted[kern_mask].any():
        share = counted[kern_mask].mean()
        pressures = (
            f"measured counters on {share:.0%} of kernels (FLOPs from SASS counters); the "
            "rest estimated from kernel-class priors and durations"
        )
    else:
        pressures = (
            "estimated from kernel-class priors and durations: this trace has no "
            "hardware counters, so regimes follow kernel classes and launch shapes"
        )
    time_by_class = {
        k.name: int(dur[rows.klass == k].sum()) for k in Klass if (rows.klass == k).any()
    }
    time_by_regime = {r.name: int(dur[labels == r].sum()) for r in Regime}

    launch_start, launch_dur = _launch_times(rows, trace)
    streams: list[StreamStats] = []
    keys = sorted({(int(d), int(s)) for d, s in zip(rows.device, rows.stream, strict=True)})
    for dev, st in keys:
        sel = np.flatnonzero((rows.device == dev) & (rows.stream == st))
        sel = sel[np.argsort(rows.start_ns[sel], kind="stable")]
        s_start, s_end = rows.start_ns[sel], rows.end_ns[sel]
        k_mask = rows.kind[sel] == Kind.KERNEL
        und = np.isnan(dec.kappa[sel])
        deg = dec.degenerate[sel]
        n = max(1, len(sel))
        streams.append(
            StreamStats(
                device=dev,
                stream=st,
                kernels=int(k_mask.sum()),
                kernel_time_ns=int((s_end - s_start)[k_mask].sum()),
                span_ns=int(s_end.max() - s_start.min()),
                idle=_idle(s_start, s_end, launch_start[sel]),
                regime_time_ns={
                    r.name: int((s_end - s_start)[labels[sel] == r].sum()) for r in Regime
                },
                kappa_partition={
                    "M_id": float((~und & ~deg).sum() / n),
                    "M_deg": float(deg.sum() / n),
                    "undetermined": float(und.sum() / n),
                },
            )
        )

    bounds = _bounds(rows, hw)
    gpu_time = int(dur.sum())
    groups: dict[int, list[int]] = defaultdict(list)
    for i, nm in enumerate(rows.name.tolist()):
        groups[nm].append(i)
    table = []
    for nm, idx_list in groups.items():
        idx = np.asarray(idx_list)
        tot = int(dur[idx].sum())
        counts = np.bincount(labels[idx], minlength=len(Regime))
        maj = int(counts.argmax())
        b = bounds[idx]
        has_b = ~np.isnan(b)
        bound = float(b[has_b].sum()) if has_b.any() else None
        achieved = (
            bound / float(dur[idx][has_b].sum())
            if bound is not None and dur[idx][has_b].sum() > 0
            else None
        )
        table.append(
            KernelRow(
                name=names[nm],
                klass=Klass(int(rows.klass[idx[0]])).name,
                streams=sorted({int(x) for x in rows.stream[idx]}),
                calls=len(idx),
                total_ns=tot,
                mean_ns=tot / len(idx),
                share_of_gpu_time=tot / gpu_time if gpu_time else 0.0,
                regime=Regime(maj).name,
                regime_share=float(counts[maj] / len(idx)),
                roofline_bound_ns=bound,
                achieved_fraction=achieved,
            )
        )
    table.sort(key=lambda r: r.total_ns, reverse=True)

    # kernels only: a host↔device copy is bounded by PCIe/NVLink, not by HBM; and in CUPTI
    # profiler mode a "kernel" duration is its replay range, not its execution time
    replay = bool(trace.device_properties.get("profiler_ranges"))
    checkable = ~np.isnan(bounds) & (bounds > 0) & (dur > 0) & kern_mask & (not replay)
    ratio = np.where(checkable, dur / np.where(checkable, bounds, 1.0), np.nan)
    viol = checkable & (ratio > 1.0 / MIN_ROOFLINE_FRACTION)
    worst_idx = np.flatnonzero(viol)
    worst_idx = worst_idx[np.argsort(-(dur[worst_idx] - bounds[worst_idx]))][:10]
    invariant = InvariantResult(
        checkable=int(checkable.sum()),
        not_checkable=int((~checkable).sum()),
        violations=int(viol.sum()),
        worst=[
            Violation(
                name=names[int(rows.name[i])],
                stream=int(rows.stream[i]),
                start_ns=int(rows.start_ns[i]),
                observed_ns=int(dur[i]),
                predicted_ns=float(bounds[i]),
                residual_ns=float(dur[i] - bounds[i]),
                ratio=float(ratio[i]),
            )
            for i in worst_idx
        ],
        note=(
            f"a kernel violates when it achieves < {MIN_ROOFLINE_FRACTION:.0%} of its roofline "
            "bound max(FLOPs/peak, bytes/HBM bandwidth)"
        )
        if checkable.any()
        else (
            "not checkable: in CUPTI-profiler mode kernel durations are replay ranges, not "
            "execution times"
            if replay
            else "not checkable: no kernel has measured FLOPs or DRAM bytes (record hardware "
            "counters, e.g. the PyTorch profiler's CUPTI-profiler mode)"
        ),
    )

    linked = kern_mask & (launch_dur >= 0)
    launch = LaunchStats(
        kernels_linked=int(linked.sum()),
        shorter_than_launch=int((linked & (dur < launch_dur)).sum()),
        median_launch_ns=float(np.median(launch_dur[linked])) if linked.any() else None,
        median_kernel_ns=float(np.median(dur[kern_mask])) if kern_mask.any() else None,
    )
    if replay:
        notes.append(
            "CUPTI-profiler mode: each kernel is replayed once per counter pass, so its "
            "'duration' is a profiling range: FLOPs are measured, times and regimes are not "
            "meaningful"
        )
    if not rows.grid.any():
        notes.append("no launch geometry in this trace (grid/block): occupancy-based estimates off")
    malformed = trace.device_properties.get("malformed_events") or 0
    if malformed:
        notes.append(f"{malformed} malformed events were skipped")

    analysis = Analysis(
        source=str(Path(trace.source)),
        format=str(trace.device_properties.get("format", "")),
        rank=trace.device_properties.get("rank"),
        hardware=hw_model,
        segments=len(rows),
        kernels=n_kern,
        gpu_time_ns=gpu_time,
        span_ns=int(rows.end_ns.max() - rows.start_ns.min()),
        pressures=pressures,
        time_by_class_ns=time_by_class,
        time_by_regime_ns=time_by_regime,
        kappa_partition=dec.kappa_partition(),
        streams=streams,
        top_kernels=table[:top],
        kernel_time_invariant=invariant,
        launch=launch,
        interventions=_levers(trace, hw, seg, dec, notes),
        notes=notes,
    )
    return AnalysisResult(analysis=analysis, rows=rows, decoded=dec, trace=trace)


def _levers(trace: Trace, hw: GpuPeaks, seg: Segments, dec: Decoded, notes: list[str]) -> list:
    """Replay each lever on the trace (regimes of every segment: 255 where none was decoded)."""
    from engine.analyze.levers import estimate_levers

    regimes = np.full(len(seg), 255, np.uint8)
    regimes[np.isin(seg.kind, np.array(_TIMED, np.uint8))] = dec.labels
    out = estimate_levers(trace, hw, regimes)
    if not len(trace.host):
        notes.append(
            "no host runtime rows in this trace: launch/sync structure unknown, no lever replayed"
        )
    return out
