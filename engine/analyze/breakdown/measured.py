"""Measured tier against the labels the priors would give: a confusion table of kernels.

A kernel row whose counters measure a pressure (engine.trace.evidence Tier.MEASURED) is decoded
twice: once as the analysis decodes it (its counters), once with its counters removed — the
label the same analysis gives a trace without counters (shape-derived where FLOPs/bytes were
derived, else the kernel-name prior). The table crosses the two (kernel time and counts):
its diagonal is where the priors were right, the rest where counters changed the verdict.
Rows without counters are not in it (there is nothing to compare them against).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.analyze.breakdown.model import MeasuredTier
from engine.eesm.pipeline import EesmModel, decode_evidence, row_labels
from engine.planner.catalogue import GpuPeaks
from engine.planner.graph import expected_efficiency
from engine.regimes import Label
from engine.trace.evidence import Tier, tiers
from engine.trace.segments import Kind, Provenance, Segments

_COUNTER_BITS = np.uint8(
    Provenance.FLOPS | Provenance.DRAM_BYTES | Provenance.ISSUE_ACTIVE | Provenance.STALL_FRAC
)


@dataclass(frozen=True)
class Confusion:
    """Measured label (rows) × label without counters (columns), over measured kernels."""

    labels: tuple[str, ...]
    #: [measured][without counters] kernel count
    counts: tuple[tuple[int, ...], ...]
    #: [measured][without counters] kernel time, ns
    time_ns: tuple[tuple[int, ...], ...]
    #: share of decoded kernel time in the measured tier (0..1)
    measured_share: float
    #: share of measured kernel time whose label the counters kept (the diagonal)
    agreement: float | None

    def model(self) -> MeasuredTier:
        """The table as analysis.json holds it (``Analysis.measured_tier``)."""
        return MeasuredTier(
            labels=list(self.labels),
            counts=[list(r) for r in self.counts],
            time_ns=[list(r) for r in self.time_ns],
            measured_share=self.measured_share,
            agreement=self.agreement,
        )

    @classmethod
    def of(cls, m: MeasuredTier) -> Confusion:
        """The table back from analysis.json's ``measured_tier``."""
        return cls(
            labels=tuple(m.labels),
            counts=tuple(tuple(r) for r in m.counts),
            time_ns=tuple(tuple(r) for r in m.time_ns),
            measured_share=m.measured_share,
            agreement=m.agreement,
        )

    def headline(self) -> str:
        """One line: the measured tier's share of kernel time and the agreement."""
        return f"measured tier: {self.measured_share:.0%} of kernel time" + (
            f"; without counters the label agrees on {self.agreement:.0%} of it"
            if self.agreement is not None
            else ""
        )

    def cells(self, most: int = 4) -> str:
        """One line: the table's largest cells by kernel time, ``MEASURED (WITHOUT) n``."""
        n = len(self.labels)
        cells = sorted(
            ((self.time_ns[i][j], i, j) for i in range(n) for j in range(n) if self.counts[i][j]),
            reverse=True,
        )
        parts = [
            f"{self.labels[i]} ({self.labels[j]}) {self.counts[i][j]}" for _, i, j in cells[:most]
        ]
        more = f" · {len(cells) - most} more" if len(cells) > most else ""
        return "with counters (without) kernels: " + " · ".join(parts) + more

    def markdown(self) -> list[str]:
        """The table in Markdown (label names and numbers only: nothing from the trace)."""
        out = [
            "| measured \\ without counters | " + " | ".join(self.labels) + " |",
            "|---|" + "---:|" * len(self.labels),
        ]
        for i, name in enumerate(self.labels):
            cells = " | ".join(
                f"{self.counts[i][j]} / {self.time_ns[i][j] / 1e6:.3f} ms"
                for j in range(len(self.labels))
            )
            out.append(f"| {name} | {cells} |")
        return out

    def lines(self) -> list[str]:
        """The table as plain text lines (label names only: nothing from the trace)."""
        w = max(len(x) for x in self.labels) + 2
        out = [
            self.headline(),
            "measured \\ without counters".ljust(30) + "".join(x.rjust(w + 8) for x in self.labels),
        ]
        for i, name in enumerate(self.labels):
            cells = "".join(
                f"{self.counts[i][j]}/{self.time_ns[i][j] / 1e6:.2f}ms".rjust(w + 8)
                for j in range(len(self.labels))
            )
            out.append(name.ljust(30) + cells)
        return out


def _without_counters(rows: Segments) -> Segments:
    cols = rows.columns()
    has = (rows.provenance & _COUNTER_BITS) != 0
    measured_flops = has & ((rows.provenance & np.uint8(Provenance.FLOPS)) != 0)
    measured_bytes = (rows.kind == Kind.KERNEL) & (
        (rows.provenance & np.uint8(Provenance.DRAM_BYTES)) != 0
    )
    cols["flops"] = np.where(measured_flops, np.nan, rows.flops)
    cols["dram_bytes"] = np.where(measured_bytes, np.nan, rows.dram_bytes)
    cols["issue_active"] = np.full(len(rows), np.nan, np.float32)
    cols["stall_frac"] = np.full(len(rows), np.nan, np.float32)
    keep = ~_COUNTER_BITS
    cols["provenance"] = np.where(has, rows.provenance & keep, rows.provenance).astype(np.uint8)
    return Segments(**cols)


def measured_confusion(rows: Segments, hw: GpuPeaks | None, model: EesmModel) -> Confusion | None:
    """The confusion table of ``rows`` (the analysed kernels, copies…), or None when no kernel
    is in the measured tier. ``hw`` None: derived FLOPs/bytes count for nothing (as the
    analysis reads them without peaks)."""
    kern = (rows.kind == Kind.KERNEL) & (
        row_labels(rows.kind, rows.klass, np.zeros(len(rows), np.uint8)) != Label.COMM
    )
    tier = tiers(rows, derived_evidence=hw is not None)
    meas = kern & (tier == Tier.MEASURED)
    if not meas.any():
        return None
    bare = _without_counters(rows)
    tier_bare = tiers(bare, derived_evidence=hw is not None)
    eff = expected_efficiency()
    with_c = decode_evidence(rows, tier[kern], model, eff, rows=kern).labels
    without = decode_evidence(bare, tier_bare[kern], model, eff, rows=kern).labels
    without = np.where(tier_bare[kern] == Tier.NONE, Label.UNKNOWN, without)
    m = meas[kern]
    a, b = np.asarray(with_c)[m].astype(int), np.asarray(without)[m].astype(int)
    dur = rows.duration_ns[kern][m]
    names = [lab.name for lab in Label if lab not in (Label.COMM, Label.COPY)]
    n = len(names)
    counts = np.zeros((n, n), np.int64)
    times = np.zeros((n, n), np.int64)
    np.add.at(counts, (a, b), 1)
    np.add.at(times, (a, b), dur)
    ktime = float(rows.duration_ns[kern].sum())
    mtime = float(dur.sum())
    return Confusion(
        labels=tuple(names),
        counts=tuple(tuple(int(x) for x in r) for r in counts),
        time_ns=tuple(tuple(int(x) for x in r) for r in times),
        measured_share=mtime / ktime if ktime else 0.0,
        agreement=float(np.trace(times)) / mtime if mtime else None,
    )
