"""Analyse an imported trace: decode regimes per stream, time breakdowns, idle split, top kernels,
roofline bounds, the kernel-time invariant, κ partition and launch statistics."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.analyze.breakdown.copies import copy_stats
from engine.analyze.breakdown.idle import overlap_note, stream_idle
from engine.analyze.breakdown.intervals import interval_union, length
from engine.analyze.breakdown.launches import launch_stats, launch_times
from engine.analyze.breakdown.measured import measured_confusion
from engine.analyze.breakdown.model import (
    Analysis,
    CommStats,
    CopyStats,
    DeviceShare,
    Evidence,
    FingerprintSummary,
    Hardware,
    Invariant,
    KernelRow,
    ProfilerRanges,
    StreamStats,
)
from engine.analyze.remote import is_url
from engine.eesm.pipeline import Decoded, EesmModel, decode_evidence, row_labels
from engine.optimizer.fingerprint import Fingerprint, fingerprint_of_trace
from engine.optimizer.monitor import IMPORTED_NOT_CHECKABLE, InvariantResult, kernel_time
from engine.planner.catalogue import GpuPeaks, by_id, describe
from engine.planner.devices import TIMED, Device, DeviceUse, device_use, ran_on
from engine.planner.graph import (
    counted,
    expected_efficiency,
    kernel_floor,
    planner_priors,
    shared_fraction,
    time_resolution_ns,
    trace_roofline,
)
from engine.regimes import Label, Regime
from engine.trace.duplicates import duplicates_note
from engine.trace.errors import TraceImportError
from engine.trace.evidence import Tier, tiers
from engine.trace.import_memory import gc_paused, give_back
from engine.trace.order import stable_order
from engine.trace.segments import DTYPES, Kind, Klass, NameTable, Provenance, Segments
from engine.trace.trace import ApiKind, Trace

if TYPE_CHECKING:  # (the levers are imported when they are replayed)
    from engine.analyze.advice.levers import LeverReport
    from engine.analyze.advice.peers import PeerBounds
    from engine.analyze.breakdown.critical_model import CriticalPath
    from engine.schedule.critical import CriticalPath as PathIntervals
    from engine.schedule.dag import ReplayDag

#: the device whose launch costs the lever replay and the decoder's model are built on when the
#: hardware is unknown: only hardware-independent evidence is used then (priors, host times);
#: no peak of it is reported as the trace's
REFERENCE_HARDWARE = "h100-sxm"

_TIMED = TIMED


@dataclass
class AnalysisResult:
    """The analysis plus the arrays the exporters need."""

    analysis: Analysis
    rows: Segments  # the decoded rows (kernels, copies, memsets)
    decoded: Decoded
    trace: Trace
    #: the invariants' verdicts as the optimize loop's monitor gives them, every violation
    #: (citing ``rows`` by index); ``analysis.invariants`` is their analysis.json form
    verdicts: list[InvariantResult] = field(default_factory=list)
    #: the workload's fingerprint (engine.optimizer.fingerprint): fingerprint.json
    fingerprint: Fingerprint | None = None
    #: the critical path's intervals and the graph it was walked on (perfetto.json overlays
    #: them); None: nothing was replayed
    path: tuple[PathIntervals, ReplayDag] | None = None


#: device lines shown in the notes at most (a 72-GPU host's rank trace names a few devices)
_DEVICE_LINES = 8


def _device_line(d: Device, u: DeviceUse, total_ns: int) -> str:
    share = u.time_ns / total_ns if total_ns else 0.0
    return (
        f"device {d.id}: {d.label} — {u.rows:,} rows, {u.time_ns / 1e6:,.2f} ms "
        f"({share:.0%} of GPU time)"
    )


def _links(found: GpuPeaks) -> tuple[str, str | None]:
    host = (
        f"{found.host_link.label}, {found.host_link.Bps_per_direction / 1e9:.2f} GB/s per direction"
    )
    peer = found.peer_link
    return host, (
        f"{peer.label}, {peer.Bps_per_direction / 1e9:.0f} GB/s per direction" if peer else None
    )


_UNKNOWN_TAIL = (
    "roofline fractions, copy link rates and FLOP-based pressures are not computed (regimes "
    "rest on kernel-name priors); pass --hardware ID (gitm-tui analyze --help lists the ids) to "
    "name it"
)


@dataclass
class _Chosen:
    """The peaks the rows are judged by, as ``_hardware`` chose them."""

    peaks: GpuPeaks | None  # one device's peaks for every row (None: unknown, or per device)
    model: Hardware
    notes: list[str]
    devices: list[DeviceShare]
    #: each device's own peaks where the rows ran on devices of different models (None: the
    #: same ``peaks`` judge every row)
    by_device: dict[int, GpuPeaks | None] | None = None

    def groups(self, rows: Segments) -> list[tuple[int | None, GpuPeaks | None, np.ndarray | None]]:
        """(device, peaks, the rows' mask) per device; one (None, peaks, None) for every row
        when one set of peaks judges them all."""
        if self.by_device is None:
            return [(None, self.peaks, None)]
        return [
            (d, self.by_device.get(d), rows.device == d) for d in np.unique(rows.device).tolist()
        ]


def _share(d: Device, u: DeviceUse, total: int, flag: GpuPeaks | None = None) -> DeviceShare:
    found = d.found
    peaks = flag or d.peaks
    host, peer = _links(peaks) if peaks is not None else (None, None)
    if flag is not None:
        how = "flag"
    elif found is not None and found.kind in ("catalogue", "estimate"):
        how = "trace" if found.kind == "catalogue" else "estimate"
    else:
        how = "none"
    why = d.problem or (found.why if found is not None and found.entry is None else None)
    return DeviceShare(
        id=d.id,
        name=d.label,
        hardware_id=peaks.id if peaks is not None else None,
        detected_from=how,
        peak_source=peaks.source if peaks is not None else None,
        host_link=host,
        peer_link=peer,
        basis=d.inferred or why,
        rows=u.rows,
        gpu_time_ns=u.time_ns,
        share_of_gpu_time=u.time_ns / total if total else 0.0,
    )


def _class_basis(trace: Trace) -> str:
    """Where the kernels' classes came from, for the evidence note: how many their launching
    op decided (a Kineto trace's recorded op: matmul → GEMM, convolution → CONV, attention →
    ATTENTION), how many of those the op moved from the name's class; the rest are by name."""
    by_op = trace.device_properties.get("class_by_op")
    if not isinstance(by_op, dict) or not by_op.get("decided"):
        return "; class: every kernel's by its name (no launching op decides one)"
    n, moved = int(by_op["decided"]), int(by_op.get("changed") or 0)
    return (
        f"; class: {n:,} kernels' by their launching op (matmul, convolution, attention), "
        f"{moved:,} of them moved from the name's class; the rest by name"
    )


def _hardware(trace: Trace, hardware: str | None) -> _Chosen:
    """Return the peaks the rows are judged by, how they were chosen, and notes.

    The devices are those the rows ran on: each timed row's ``device`` read against the trace's
    device list (engine.planner.devices: by id where the numbering is the list's, else the sole
    model the list holds, said as an inference). Each device's peaks are its catalogue entry's,
    else an ESTIMATE from its own properties (labelled so on the first screen, in report.md and
    in ``peak_source``), else unknown — every figure that needs peaks then says so — unless the
    user names them with --hardware (one entry for every row). Rows on devices of one model are
    judged by its peaks; rows on devices of several models each by their own device's
    (``by_device``: the roofline, copy links and the kernel-time invariant per device), and a
    line per device says which model ran what share of the GPU time. The name shown is the
    device's as the trace names it, sanitised."""
    devices = [d for d in trace.device_properties.get("devices") or [] if isinstance(d, dict)]
    first = str(devices[0].get("name")) if devices and devices[0].get("name") else None
    notes: list[str] = []
    if trace.device_properties.get("platform") == "mtia":  # the catalogue holds GPUs only
        from engine.trace.kineto.kineto import mtia_device

        name, note = mtia_device(trace, hardware)
        hw = Hardware(id=None, name=name, detected_from="trace", reported_name=first)
        return _Chosen(None, hw, [note], [])
    ran_use = ran_on(trace)
    use = [u for _, u in ran_use]
    ran = [d for d, _ in ran_use]
    if not devices:  # nothing to read the rows' devices against
        use = device_use(trace.segments)
        if len(use) > 1:
            notes.append(
                f"rows ran on {len(use)} devices (ids {', '.join(str(u.id) for u in use)}) and "
                "the trace describes none of them"
            )
    main = ran[0] if ran else None
    name0 = main.props.get("name") if main and main.props else None
    reported = str(name0) if name0 else None
    basis = main.inferred if main is not None else None
    models = {d.model for d in ran}
    total = sum(u.time_ns for u in use)
    if len(ran) > 1:
        kinds = f"{len(models)} GPU models" if len(models) > 1 else "one GPU model"
        notes.append(f"rows ran on {len(ran)} devices ({kinds}); by GPU time:")
        notes += [_device_line(d, u, total) for d, u in zip(ran[:_DEVICE_LINES], use, strict=False)]
        if len(ran) > _DEVICE_LINES:
            notes.append(f"… and {len(ran) - _DEVICE_LINES} more devices")
    if hardware:
        found = by_id(hardware)
        host, peer = _links(found)
        if len(models) > 1:
            notes.append(
                f"--hardware {hardware}: every row is judged by {found.name}'s peaks, whichever "
                "device ran it"
            )
        hw = Hardware(
            id=found.id,
            name=found.name,
            detected_from="flag",
            reported_name=reported,
            peak_source=found.source,
            host_link=host,
            peer_link=peer,
            device_basis=basis,
        )
        shares = [_share(d, u, total, found) for d, u in ran_use]
        return _Chosen(found, hw, notes, shares)
    shares = [_share(d, u, total) for d, u in ran_use]
    if len(models) > 1:
        assert main is not None
        others = ", ".join(d.label for d in ran[1:3]) + (", …" if len(ran) > 3 else "")
        tie = len(use) > 1 and use[0].time_ns == use[1].time_ns
        most = "first of equal GPU time" if tie else "most GPU time"
        unknown = [d for d in ran if d.peaks is None]
        notes.append(
            f"the rows ran on {len(models)} GPU models: each device's rows are judged by its "
            "own peaks — roofline fractions, copy link rates and the kernel-time invariant per "
            "device, no device's peaks judging another's rows"
            + (
                f" ({', '.join(f'device {d.id}' for d in unknown[:4])}: peaks unknown, not judged)"
                if unknown
                else ""
            )
            + "; the lever replay models one device: it runs on the reference device's rates "
            "and the levers that depend on the device are not judged; pass --hardware ID to "
            "judge every row by one catalogue entry"
        )
        hw = Hardware(
            id=None,
            name=f"{len(models)} models: {main.label} ({most}), {others}",
            detected_from="trace",
            reported_name=reported,
            device_basis=basis,
        )
        return _Chosen(None, hw, notes, shares, {d.id: d.peaks for d in ran})
    found_id = main.found if main is not None else None
    if main is None or found_id is None or found_id.entry is None:
        if main is None:
            why = "the trace carries no device properties"
        elif main.problem is not None:
            why = main.problem
        else:
            assert found_id is not None
            why = found_id.why
        notes.append(f"hardware unknown: {why}; {_UNKNOWN_TAIL}")
        shown = main.label if main is not None and main.props else "unknown"
        hw = Hardware(
            id=None, name=shown, detected_from="none", reported_name=reported, device_basis=basis
        )
        return _Chosen(None, hw, notes, shares)
    entry = found_id.entry
    host, peer = _links(entry)
    if found_id.kind == "estimate":
        amb = (
            f" (it fits {len(found_id.ambiguous)} catalogue entries equally: "
            f"{', '.join(found_id.ambiguous)})"
            if found_id.ambiguous
            else ""
        )
        notes.append(
            f"ESTIMATED peaks: device {main.id} ({main.shown or 'unnamed'}) is in no "
            f"catalogue entry{amb}; "
            f"{entry.source}; pass --hardware ID to use a catalogue entry instead"
        )
    elif found_id.why == "properties":
        said = f"its name {main.shown!r} names no model" if main.shown else "it is unnamed"
        notes.append(
            f"device {main.id}: {said}; its properties ({describe(main.props or {})}) are the "
            f"catalogue's {entry.name} and no other entry's"
        )
    hw = Hardware(
        id=entry.id,
        name=main.label,
        detected_from="estimate" if found_id.kind == "estimate" else "trace",
        reported_name=reported,
        peak_source=entry.source,
        host_link=host,
        peer_link=peer,
        device_basis=basis,
    )
    return _Chosen(entry, hw, notes, shares)


#: rows of the kernel table between two hand-backs of the heap's free pages: each name's
#: gathered arrays, freed, stayed resident between the names' rows (+29 MiB over the 10 M-event
#: trace's 0.87 M kernels); a hand-back costs ~0.3 ms, so small tables have none
_TRIM_ROWS = 1 << 17


def _where(mask: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(mask)`` in int32 while the rows allow: index arrays of nearly every row
    (a stream's, a device's kernels, the checkable rows) sat at the 10 M-event analysis's peaks,
    8 bytes a row in int64."""
    idx = np.flatnonzero(mask)
    return idx.astype(np.int32) if len(mask) < 2**31 else idx


def _roofline(rows: Segments, ch: _Chosen) -> tuple[np.ndarray, np.ndarray]:
    """(ideal, expected) ns per row by the planner's rule (``trace_roofline``), each device's
    rows against its own peaks; NaN where the hardware is unknown."""
    groups = ch.groups(rows)
    if len(groups) == 1 and groups[0][2] is None:
        hw = groups[0][1]
        if hw is None:
            return np.full(len(rows), np.nan), np.full(len(rows), np.nan)
        return trace_roofline(rows, hw)
    ideal, expected = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    for _, hw, m in groups:
        if hw is not None and m is not None:
            ideal[m], expected[m] = trace_roofline(rows.take(m), hw)
    return ideal, expected


def _invariants(
    rows: Segments,
    names: list[str],
    ideal: np.ndarray,
    expected: np.ndarray,
    ch: _Chosen,
    hint: str = "hardware counters",
) -> list[InvariantResult]:
    """The optimize loop's three invariants on an imported trace: kernel time by the same rule
    (engine/optimizer/monitor.py ``kernel_time``); byte traffic and concurrency need a plan the
    trace does not carry, and say so. The violations cite ``rows``' indices and start times.
    Each device's kernels are judged against its own peaks, sharing the device only with its
    own rows."""
    checkable = np.isfinite(expected) & (rows.end_ns > rows.start_ns)  # (no duration column)
    pri = planner_priors()
    tol, unc = float(pri["tolerance"]), float(pri["derived_uncertainty"])
    shared: np.ndarray | None = None
    resolution = 1
    judged = [(d, hw, m) for d, hw, m in ch.groups(rows) if hw is not None]
    if checkable.any() and judged:
        resolution = time_resolution_ns(rows)
        floors = []
        if len(judged) == 1 and judged[0][2] is None:
            shared = shared_fraction(rows)
            floors.append(kernel_floor(rows, judged[0][1], ideal, shared).basis)
        else:
            shared = np.zeros(len(rows))
            for d, hw, m in judged:
                assert m is not None and hw is not None  # (several devices: a mask each)
                sub = rows.take(m)
                shared[m] = part = shared_fraction(sub)
                floors.append(f"device {d}: {kernel_floor(sub, hw, ideal[m], part).basis}")
        floor_basis = "; ".join(floors)
        basis = (
            "a kernel violates when the time it had the device to itself (its duration less "
            "the time other device rows ran beside it"
            + (
                f", less the trace's {resolution / 1e3:g} µs time resolution"
                if resolution > 1
                else ""
            )
            + f") exceeds {tol:g}× its expected time — {tol * unc:g}× where its FLOPs and bytes "
            f"are derived from shapes, not counted (manifests/planner.json) — or when counted "
            "work ran in under 0.9× its ideal time at peak. Expected: a kernel's fixed cost "
            f"({floor_basis}) + max(FLOPs / peak, bytes / HBM bandwidth) at the efficiency a "
            "good library reaches for its class, the FLOP peak scaled to the SMs its grid can "
            "occupy"
            + (
                "; each device's kernels against its own device's peaks"
                if ch.by_device is not None
                else ""
            )
        )
    elif not judged:
        basis = "the hardware is unknown (no peaks to bound against)"
    else:
        basis = f"no kernel has measured or shape-derived FLOPs or bytes ({hint})"
    at = _where(checkable)  # the others have no prediction: nothing to group
    del checkable
    observed = np.empty(len(at), np.float64)
    step = 1 << 16  # a block at a time: no whole int64 column beside it
    for a in range(0, len(at), step):
        i = at[a : a + step]
        dur = rows.end_ns[i]
        dur -= rows.start_ns[i]  # in int64: epoch ns are not exact in float64, durations are
        observed[a : a + step] = dur
    kt = kernel_time(
        rows.name[at],  # int32 name ids (bincount's codes)
        names,
        at,
        observed,
        expected[at],
        ideal[at],
        basis,
        shared=None if shared is None else shared[at],
        measured=counted(rows)[at],
        resolution_ns=float(resolution) if resolution > 1 else 0.0,
        start_ns=rows.start_ns,
    )
    del shared
    if kt.above_peak:
        kt.reason += (
            f". Not judged: {kt.above_peak} rows whose shape-derived work implies more than "
            "the device's peak in the time they took — evidence that the count is not what "
            "the kernel did (bytes counted at their logical size that the L2 cache served, or "
            "work the shapes overstate), not a kernel faster than the hardware"
        )
    return [kt] + [
        InvariantResult(inv, False, 0, reason) for inv, reason in IMPORTED_NOT_CHECKABLE.items()
    ]


def _without_hardware_evidence(rows: Segments) -> Segments:
    """Rows as the decoder may use them when the hardware is unknown: FLOPs and bytes mean
    nothing without peaks, so shape-derived values are dropped (those kernels fall to PRIOR)."""
    derived = (rows.provenance & Provenance.DERIVED) != 0
    if not derived.any():
        return rows
    cols = rows.columns()
    cols["flops"] = np.where(derived, np.nan, rows.flops)
    cols["dram_bytes"] = np.where(derived, np.nan, rows.dram_bytes)
    cols["provenance"] = (rows.provenance & ~np.uint8(Provenance.DERIVED)).astype(np.uint8)
    return Segments(**cols)


def _label(rows: Segments, ch: _Chosen, model: EesmModel) -> tuple[np.ndarray, Decoded]:
    """Return every timed row's evidence tier and its decode: labels are Label values,
    confidence NaN where nothing was decoded. ``model``: the decoder's model on ``ch.peaks``;
    rows on devices of different models are decoded per device, each on its own device's.

    Only compute kernels are decoded into regimes: copies are COPY, collectives COMM, and a
    kernel of unknown class with nothing measured UNKNOWN (its place in the stream's chain is
    kept, with no evidence of its own)."""
    n = len(rows)
    what = row_labels(rows.kind, rows.klass, np.zeros(n, np.uint8))
    kern = (rows.kind == Kind.KERNEL) & (what != Label.COMM)
    groups = ch.groups(rows)
    if len(groups) == 1:
        hw = groups[0][1]
        src = rows if hw is not None else _without_hardware_evidence(rows)
        tier = tiers(src)
        parts = [(kern, src, model)]
    else:
        known = tiers(rows)
        bare = _without_hardware_evidence(rows)
        unjudged = np.array([d for d, hw, _ in groups if hw is None and d is not None], np.int64)
        tier = np.where(np.isin(rows.device, unjudged), tiers(bare), known)
        ref = by_id(REFERENCE_HARDWARE)
        parts = [
            (kern & m, rows if hw is not None else bare, EesmModel.build(hw or ref))  # type: ignore[arg-type]
            for _, hw, m in groups
            if m is not None
        ]
    labels = what
    kappa = np.full(n, np.nan, np.float32)
    degenerate = np.zeros(n, np.bool_)
    estimated = np.zeros(n, np.uint8)
    confidence = np.full(n, np.nan, np.float32)
    for sel, src, m in parts:
        if not sel.any():
            continue
        # (the mask, not its index: the decode drops the index it makes once it has gathered
        # the rows — one held here through the call was 8 bytes a row under the decode's peak)
        sub = decode_evidence(src, tier[sel], m, expected_efficiency(), rows=sel)
        labels[sel] = np.where(tier[sel] == Tier.NONE, Label.UNKNOWN, sub.labels)
        kappa[sel] = sub.kappa
        degenerate[sel] = sub.degenerate
        estimated[sel] = sub.estimated
        confidence[sel] = np.nan if sub.confidence is None else sub.confidence
    full = Decoded(
        labels=labels,
        kappa=kappa,
        degenerate=degenerate,
        estimated=estimated,
        confidence=confidence,
    )
    return tier, full


def _rows_by_name(name: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(name id, its rows ascending) per distinct name, in the order names first appear.

    numpy, not a dict of lists: lists of every row's index held ~40 bytes a row (37 MiB on a
    10 M-event trace) for the whole kernel table."""
    if not len(name):
        return
    order = np.argsort(name, kind="stable")  # a name's rows stay ascending
    cut = np.flatnonzero(name[order[1:]] != name[order[:-1]]) + 1
    lo = np.concatenate(([0], cut))
    hi = np.concatenate((cut, [len(order)]))
    for g in np.argsort(order[lo], kind="stable").tolist():  # by first appearance
        idx = order[lo[g] : hi[g]]
        yield int(name[idx[0]]), idx


def _device_streams(rows: Segments) -> list[tuple[int, int]]:
    """The distinct (device, stream) pairs, ascending: one int64 key each (the int32 stream,
    offset to unsigned, in the low 32 bits), not a set of 170k tuples."""
    key = (rows.device.astype(np.int64) << 32) | (rows.stream.astype(np.int64) + (1 << 31))
    u = np.unique(key)
    return list(zip((u >> 32).tolist(), ((u & 0xFFFFFFFF) - (1 << 31)).tolist(), strict=True))


def _covered(ks: np.ndarray, ke: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per x, the length of the union [ks, ke) (sorted, disjoint intervals) before x: each
    collective's overlap is covered(end) - covered(start), all rows at once."""
    if not len(ks):
        return np.zeros(len(x), np.int64)
    cum = np.zeros(len(ks) + 1, np.int64)
    np.cumsum(ke - ks, out=cum[1:])
    i = np.searchsorted(ks, x, side="right")  # the intervals starting at or before x
    # less the part of the last of them past x (none before the first: times may be < 0)
    last_end = np.where(i > 0, ke[np.maximum(i - 1, 0)], x)
    return cum[i] - np.maximum(0, last_end - x)


def _communication(rows: Segments, labels: np.ndarray, gpu_time: int) -> list[CommStats]:
    """Collective time per device, its share of GPU time, and how much of it ran while a
    compute kernel ran on another stream of the same device (overlap hides communication)."""
    out = []
    for dev in np.unique(rows.device[labels == Label.COMM]).tolist():
        on = rows.device == dev
        c = _where(on & (labels == Label.COMM))
        k = _where(on & (rows.kind == Kind.KERNEL) & (labels != Label.COMM))
        del on
        ks, ke = interval_union(rows.start_ns, rows.end_ns, k)
        del k
        over = int((_covered(ks, ke, rows.end_ns[c]) - _covered(ks, ke, rows.start_ns[c])).sum())
        t = int(rows.duration_ns[c].sum())
        out.append(
            CommStats(
                device=int(dev),
                kernels=len(c),
                time_ns=t,
                share_of_gpu_time=t / gpu_time if gpu_time else 0.0,
                overlapped_ns=over,
                streams=np.unique(rows.stream[c]).tolist(),
            )
        )
    return out


def analyze_trace(
    trace: Trace,
    hardware: str | None = None,
    top: int = 20,
    counting: str = "exact",
    peers: PeerBounds | None = None,
) -> AnalysisResult:
    """Return the analysis of ``trace``; TraceImportError if it has no GPU activity.
    ``peers``: when this rank's peers arrived at its collectives (a job's ranks analysed
    together, engine.analyze.job): the replay holds each collective to them. The
    cyclic GC is paused meanwhile: an analysis leaves no garbage cycles (a collection after one
    found none; 12 objects after a process's first), and each full collection walked every
    object the imports left (~75 ms; 0.1-0.15 s of a 2 M-event analysis)."""
    with gc_paused():
        return _analyze(trace, hardware, top, counting, peers)


def _analyze(
    trace: Trace, hardware: str | None, top: int, counting: str, peers: PeerBounds | None = None
) -> AnalysisResult:
    # the workload's identity, whatever is counted (~0.07 s on a 2 M-event trace)
    fingerprint = fingerprint_of_trace(trace) if len(trace.segments) else None
    trace, counting_note = _counting(trace, counting)
    seg = trace.segments
    timed = np.isin(seg.kind, np.array(_TIMED, np.uint8))
    rows = seg if timed.all() else seg.take(timed)  # read only: no copy of a whole trace
    ranges = seg.take(seg.kind == Kind.RANGE)
    props = trace.device_properties
    if not len(rows) and not len(ranges):
        if props.get("mtia_events"):
            raise TraceImportError(
                trace.source,
                f"MTIA activity ({props['mtia_events']:,} mtia_ccp_events on "
                f"{props.get('mtia_streams', 0)} device streams): not supported — gitm-tui "
                "reads CUDA and ROCm device activity",
            )
        raise TraceImportError(trace.source, "no GPU activity in this trace (a CPU-only profile?)")
    chosen = _hardware(trace, hardware)
    hw, hw_model, notes = chosen.peaks, chosen.model, chosen.notes
    model = EesmModel.build(hw or by_id(REFERENCE_HARDWARE))  # type: ignore[arg-type]
    tier, dec = _label(rows, chosen, model)
    give_back(len(rows))  # after each stage, its freed pages (see give_back)
    labels = dec.labels
    conf = dec.confidence if dec.confidence is not None else np.full(len(rows), np.nan)
    dur = rows.duration_ns
    names = trace.names
    kern_mask = rows.kind == Kind.KERNEL
    decoded = kern_mask & (labels != Label.COMM)
    n_kern = int(kern_mask.sum())
    gpu_time = int(dur.sum())

    ktime = float(dur[decoded].sum())
    tier_share = {
        t.name: (float(dur[decoded & (tier == t)].sum()) / ktime if ktime else 0.0) for t in Tier
    }
    finite = decoded & np.isfinite(conf)
    evidence = Evidence(
        share_of_kernel_time=tier_share,
        mean_confidence=float(np.average(conf[finite], weights=np.maximum(dur[finite], 1)))
        if finite.any()
        else None,
        note=(
            "MEASURED: hardware counters; DERIVED: FLOPs and bytes from the launching op's "
            "recorded shapes and dtypes; PRIOR: kernel-name class only (confidence is what the "
            "class alone supports); NONE: class unknown, nothing measured → UNKNOWN"
            + _class_basis(trace)
        ),
    )
    pressures = (
        f"{tier_share['MEASURED']:.0%} of kernel time measured (counters), "
        f"{tier_share['DERIVED']:.0%} derived from recorded shapes, "
        f"{tier_share['PRIOR']:.0%} from kernel-name priors, {tier_share['NONE']:.0%} unknown"
        if ktime
        else "no kernel time in this trace: shares measured, derived and from priors unknown"
    )
    time_by_class = {
        k.name: int(dur[rows.klass == k].sum()) for k in Klass if (rows.klass == k).any()
    }
    time_by_regime = {r.name: int(dur[labels == r].sum()) for r in Label}

    launch_start, launch_dur, by_graph = launch_times(rows, trace)
    launch = launch_stats(rows, trace, launch_dur, by_graph)  # (graph launches apart)
    del launch_dur, by_graph  # (the streams below read only the launches' starts)
    streams: list[StreamStats] = []
    for dev, st in _device_streams(rows):
        sel = _where((rows.device == dev) & (rows.stream == st))
        s_start = rows.start_ns[sel]
        order = stable_order(s_start)  # (a stream's rows come nearly in order: int32)
        sel, s_start = sel[order], s_start[order]
        del order
        s_end = rows.end_ns[sel]
        s_dur = s_end - s_start
        k_mask = rows.kind[sel] == Kind.KERNEL
        s_labels = labels[sel]
        streams.append(
            StreamStats(
                device=dev,
                stream=st,
                kernels=int(k_mask.sum()),
                kernel_time_ns=int(s_dur.sum(where=k_mask)),  # (sums: no selected copies)
                span_ns=int(s_end.max() - s_start.min()),
                idle=stream_idle(s_start, s_end, launch_start[sel], hta=counting == "hta"),
                regime_time_ns={r.name: int(s_dur.sum(where=s_labels == r)) for r in Label},
                kappa_partition=dec.kappa_partition(sel[decoded[sel]]),
            )
        )
        del sel, s_start, s_end, s_dur, k_mask, s_labels

    del launch_start  # 8 bytes a row, read: not held through the rest

    give_back(len(rows))
    ideal, expected = _roofline(rows, chosen)
    ideal[~decoded] = np.nan  # copies: their link, not HBM
    expected[~decoded] = np.nan
    bounds = ideal
    table = []
    since_trim = 0
    for nm, idx in _rows_by_name(rows.name):
        since_trim += len(idx)
        if since_trim > _TRIM_ROWS:  # each name's small arrays, freed, spread over the heap
            give_back()
            since_trim = 0
        tot = int(dur[idx].sum())
        counts = np.bincount(labels[idx], weights=np.maximum(dur[idx], 1), minlength=len(Label))
        maj = int(counts.argmax())
        b = bounds[idx]
        has_b = ~np.isnan(b)
        bound = float(b[has_b].sum()) if has_b.any() else None
        achieved = (
            bound / float(dur[idx][has_b].sum())
            if bound is not None and dur[idx][has_b].sum() > 0
            else None
        )
        is_dec = decoded[idx]
        if is_dec.any():
            tcount = np.bincount(
                tier[idx][is_dec], weights=np.maximum(dur[idx][is_dec], 1), minlength=len(Tier)
            )
            tier_name = Tier(int(tcount.argmax())).name
        else:
            tier_name = "-"
        c = conf[idx]
        fl = rows.flops[idx]
        dcode = int(np.bincount(rows.dtype[idx], minlength=len(DTYPES)).argmax())
        table.append(
            KernelRow(
                name=names[nm],
                klass=Klass(int(rows.klass[idx[0]])).name,
                streams=np.unique(rows.stream[idx]).tolist(),
                calls=len(idx),
                total_ns=tot,
                mean_ns=tot / len(idx),
                share_of_gpu_time=tot / gpu_time if gpu_time else 0.0,
                regime=Label(maj).name,
                regime_share=float(counts[maj] / counts.sum()),
                tier=tier_name,
                confidence=float(np.nanmean(c)) if np.isfinite(c).any() else None,
                flops=float(np.nansum(fl)) if np.isfinite(fl).any() and is_dec.any() else None,
                dtype=DTYPES[dcode] or None,
                roofline_bound_ns=bound,
                achieved_fraction=achieved,
            )
        )
    table.sort(key=lambda r: r.total_ns, reverse=True)
    give_back(len(rows))
    # the bounds' last reader: 16 bytes a row not held through the stages after it
    from engine.trace.framework import shapes_hint

    verdicts = _invariants(rows, names.names(), ideal, expected, chosen, shapes_hint(trace))
    del ideal, expected, bounds
    give_back(len(rows))

    measured = None  # counters' labels against the labels without them (measured kernels only)
    if (decoded & (tier == Tier.MEASURED)).any():
        src = rows if hw is not None else _without_hardware_evidence(rows)
        cm = measured_confusion(src, hw, model)
        measured = cm.model() if cm is not None else None

    prof = None
    if len(ranges):
        prof = _profiler_ranges(ranges, trace)
        notes.append(prof.note)
    overlap = overlap_note(((st.device, st.stream, st.idle) for st in streams), counting == "hta")
    if overlap is not None:  # (rows of one stream that overlap: idle over their union)
        notes.append(overlap)
    if len(rows) and not rows.grid.any():
        notes.append("no launch geometry in this trace (grid/block): occupancy-based estimates off")
    malformed = props.get("malformed_events") or 0
    if malformed:
        notes.append(f"{malformed} malformed events were skipped")
    twice = duplicates_note(props)
    if twice is not None:
        notes.append(twice)
    if tier_share["PRIOR"] + tier_share["NONE"] > 0.5 and props.get("framework_ops", 0) == 0:
        from engine.trace.framework import priors_note

        notes.append(priors_note(trace))

    copies = _copies(rows, names, chosen)
    communication = _communication(rows, labels, gpu_time)
    give_back(len(rows))
    mtia = props.get("platform") == "mtia"  # levers are CUDA/ROCm changes: none applies
    levers = _levers(trace, hw, seg, dec, notes, peers) if len(rows) and not mtia else None
    give_back(len(rows))
    critical, path = _critical(levers, trace, communication, notes)
    analysis = Analysis(
        source=trace.source if is_url(trace.source) else str(Path(trace.source)),
        format=str(props.get("format", "")),
        rank=props.get("rank"),
        hardware=hw_model,
        devices=chosen.devices,
        segments=len(rows),
        kernels=n_kern,
        gpu_time_ns=gpu_time,
        span_ns=int(rows.end_ns.max() - rows.start_ns.min()) if len(rows) else 0,
        pressures=pressures,
        counting=counting_note,
        evidence=evidence,
        copies=copies,
        communication=communication,
        profiler_ranges=prof,
        measured_tier=measured,
        time_by_class_ns=time_by_class,
        time_by_regime_ns=time_by_regime,
        kappa_partition=dec.kappa_partition(decoded) if decoded.any() else {},
        streams=streams,
        top_kernels=table[:top],
        invariants=[Invariant.of(r, len(rows), most=10) for r in verdicts],
        launch=launch,
        replay=levers.replay if levers else None,
        in_use=levers.in_use if levers else [],
        interventions=levers.estimates if levers else [],
        critical_path=critical,
        notes=notes,
        fingerprint=FingerprintSummary.of(fingerprint) if fingerprint is not None else None,
    )
    return AnalysisResult(
        analysis=analysis, rows=rows, decoded=dec, trace=trace, verdicts=verdicts,
        fingerprint=fingerprint, path=path,
    )  # fmt: skip


def _copies(rows: Segments, names: NameTable, ch: _Chosen) -> list[CopyStats]:
    """Copies by direction against their link: each device's against its own where the rows ran
    on devices of different models (each group then names its device)."""
    if ch.by_device is None:
        return copy_stats(rows, names, ch.peaks)
    out = []
    for d, hw, m in ch.groups(rows):
        if m is not None:
            out += [c.model_copy(update={"device": d}) for c in copy_stats(rows.take(m), names, hw)]
    return out


def _critical(
    levers: LeverReport | None, trace: Trace, comm: list[CommStats], notes: list[str]
) -> tuple[CriticalPath | None, tuple[PathIntervals, ReplayDag] | None]:
    """The critical path of the no-lever replay, as analysis.json has it and as intervals
    (None, None: nothing was replayed). The replayed window is the steady one where
    ``_levers`` chose one (its note says so)."""
    if levers is None or levers.dag is None or levers.base is None:
        return None, None
    from engine.analyze.breakdown.critical import summarize_path
    from engine.schedule.critical import critical_path

    dag = levers.dag
    window = next((n for n in notes if n.startswith("levers replayed on")), "the whole trace")
    comm_ns = sum(c.time_ns for c in comm)
    overlap = sum(c.overlapped_ns for c in comm) / comm_ns if comm_ns else None
    n_comm = int((dag.d_klass == Klass.COMM).sum())
    nb = getattr(dag, "d_not_before", None)
    n_held = int(np.isfinite(nb).sum()) if nb is not None else 0
    if n_held:
        peers = (
            f"peers known: {n_held} of its {n_comm} collective(s) held until their last peer "
            "arrived (the ranks' traces matched); the rest replayed as if every peer arrived "
            "with this rank"
        )
    elif n_comm:
        peers = (
            f"peers unknown (this rank alone): its {n_comm} collective(s) are replayed as if "
            "every peer arrived with this rank; a later peer would lengthen the path"
        )
    else:
        peers = "no collectives: no peers to wait for"
    from engine.analyze.advice.levers import is_pytorch

    base = levers.base
    cp = levers.path if levers.path is not None else critical_path(dag, base)
    busiest = 0.0
    live = np.isfinite(base.d_start)
    for st in np.unique(dag.d_stream[live]).tolist():
        m = live & (dag.d_stream == st)
        busiest = max(busiest, float(length(interval_union(base.d_start[m], base.d_end[m]))))
    summary = summarize_path(cp, dag, trace, window, peers, overlap, is_pytorch(trace), busiest)
    return summary, (cp, dag)


def _profiler_ranges(ranges: Segments, trace: Trace) -> ProfilerRanges:
    """CUPTI-profiler ranges: what their counters measure and whether each is one kernel.

    Kineto's range profiler runs alone (no kernel activity in the same trace) and spreads the
    profiler's span evenly over the ranges, so a range's duration is not its kernel's time. Per
    kernel (auto-range) it names each range after its kernel, in launch order; with user ranges
    a range may hold several kernels. So: as many ranges as kernel launches on the host — one
    kernel each; otherwise no range is attributed to a kernel."""
    n = len(ranges)
    with_flops = int(np.isfinite(ranges.flops).sum())
    launches = int((trace.host.api == ApiKind.LAUNCH).sum())
    each = None if launches == 0 else n == launches
    if each is None:
        who = "no kernel launch recorded on the host: whether a range is one kernel is unknown"
    elif each:
        who = f"{n:,} ranges for {launches:,} kernel launches: one kernel each, named after it"
    elif n < launches:
        who = (
            f"{n:,} ranges for {launches:,} kernel launches: ranges hold several kernels, "
            "not attributed"
        )
    else:  # launches outside the recorded window, or replays: which is which is unknown
        who = f"{n:,} ranges for {launches:,} kernel launches: not attributed"
    return ProfilerRanges(
        ranges=n,
        measured_flops=float(np.nansum(ranges.flops)),
        with_flops=with_flops,
        kernel_launches=launches,
        one_kernel_each=each,
        note=f"CUPTI-profiler mode: {who}; {with_flops:,} ranges carry FP-instruction counters "
        "(FLOPs measured). A range's duration is the profiler's span split evenly, not its "
        "kernel's execution time: ranges are not GPU time, and FLOPs with no bytes, issue or "
        "stall counters and no kernel time give no regime (unknown), so the measured tier "
        "holds no kernel time",
    )


def _counting(trace: Trace, mode: str) -> tuple[Trace, str]:
    """The counting semantics (engine/analyze/breakdown/semantics.py) applied to the trace."""
    from engine.analyze.breakdown.semantics import apply_counting

    return apply_counting(trace, mode)


def _levers(
    trace: Trace,
    hw: GpuPeaks | None,
    seg: Segments,
    dec: Decoded,
    notes: list[str],
    peers: PeerBounds | None = None,
) -> LeverReport:
    """Replay each lever on the trace (regimes of every segment: 255 where none was decoded).
    On a device the catalogue does not know the replay runs on the reference device's rates
    and the levers that depend on the device are not judged."""
    from engine.analyze.advice.levers import replay_levers
    from engine.analyze.breakdown.steady import steady_window

    regimes = np.full(len(seg), 255, np.uint8)
    lab = dec.labels.copy()
    lab[lab >= len(Regime)] = 255  # UNKNOWN, COMM, COPY: no regime for the replay to read
    regimes[np.isin(seg.kind, np.array(_TIMED, np.uint8))] = lab
    replayed, regimes, window = steady_window(trace, regimes)
    if window is not None:
        notes.append(window)
    # what is already in use: counted over the whole trace, not the replayed window
    ref = hw or by_id(REFERENCE_HARDWARE)
    out = replay_levers(replayed, ref, regimes, device=hw, whole=trace, peers=peers)
    if not len(trace.host):
        notes.append(
            "no host runtime rows in this trace: launch/sync structure unknown, no lever "
            "replayed and what bounds the step (its critical path) unknown"
        )
    return out
