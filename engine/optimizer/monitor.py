"""Monitor (DESIGN §5): observed vs predicted, and the three invariants.

``residuals(trace, graph)`` matches each observed device row to its predicted op (same stream,
same name, same occurrence within the step) and computes the residual; ``check_invariants``
evaluates

1. **kernel_time** — every matched kernel within its roofline bounds: not faster than the
   ideal (peak) time, not slower than expected × tolerance (``kernel_time``);
2. **memory_traffic** — measured DRAM bytes within ±bytes_tolerance of the prediction, only
   for rows whose bytes were *measured* (otherwise the invariant says it cannot be checked);
3. **concurrency** — op pairs the plan runs concurrently overlap in the trace, only where the
   plan predicts concurrency (otherwise: not checkable, and said so).

Each violation carries observed, predicted, residual and the rows involved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from engine.planner.graph import (
    Graph,
    counted,
    planner_priors,
    shared_fraction,
    time_resolution_ns,
)
from engine.trace.segments import Kind, Provenance
from engine.trace.trace import Trace

INVARIANTS = ("kernel_time", "memory_traffic", "concurrency")


@dataclass
class Residuals:
    """Observed device rows matched to the predicted graph."""

    graph: Graph
    trace: Trace
    row: np.ndarray  # index into trace.segments
    pred: np.ndarray  # index into the graph (-1: no predicted op)
    iteration: np.ndarray  # which step of the trace the row belongs to
    names: list[str]
    observed_ns: np.ndarray
    expected_ns: np.ndarray
    ideal_ns: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    bytes_observed: np.ndarray
    bytes_measured: np.ndarray  # bool
    unmatched: int

    @property
    def residual_ns(self) -> np.ndarray:
        """Observed minus expected duration (NaN where unmatched)."""
        return self.observed_ns - self.expected_ns

    def name_codes(self) -> tuple[np.ndarray, list[str]]:
        """Each row's name as an index into a table of the distinct names."""
        table: dict[str, int] = {}
        codes = np.array([table.setdefault(n, len(table)) for n in self.names], np.intp)
        return codes, list(table)

    @property
    def log_ratio(self) -> np.ndarray:
        """log(observed / expected): the duration residual attribution models."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(self.observed_ns / self.expected_ns)


# One type wherever a violation goes: the optimize loop's verdicts (report.json, the dashboard's
# ``engine.runtime.events.ViolationView``) and `gitm-tui analyze`'s analysis.json
# (``engine.analyze.breakdown.model.Invariant``), whose JSON Schema is this model's (its docstring and
# field descriptions included) less ``rows``: row indices mean something only next to the trace
# in memory, so the file cites the rows by their start times (``first_start_ns``).
class Violation(BaseModel):
    """One invariant broken by the rows of one kernel name (the optimize loop's fields)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    message: str
    count: int = Field(description="rows of this name that violate")
    observed: float = Field(description="mean observed value of those rows (unit)")
    predicted: float = Field(description="mean predicted bound of those rows (unit)")
    residual: float = Field(description="observed - predicted")
    unit: str
    first_start_ns: list[int] = Field(description="start times of the first violating rows")
    #: the first trace rows involved (indices into the trace checked; not written to a file)
    rows: SkipJsonSchema[list[int]] = Field(default_factory=list, exclude=True)


@dataclass
class InvariantResult:
    """One invariant's verdict (``engine.analyze.breakdown.model.Invariant`` is its analysis.json form)."""

    invariant: str
    checkable: bool
    checked: int
    reason: str
    violations: list[Violation] = field(default_factory=list)
    #: rows not judged because their derived work implies more than the device's peak
    above_peak: int = 0

    @property
    def violating_rows(self) -> int:
        return sum(v.count for v in self.violations)

    def as_dict(self) -> dict[str, Any]:
        """The verdict as plain data (report.json)."""
        return {
            "invariant": self.invariant,
            "checkable": self.checkable,
            "checked": self.checked,
            "reason": self.reason,
            "violating_rows": self.violating_rows,
            "above_peak": self.above_peak,
            # (the rows' start times are analysis.json's way to cite them, not the report's)
            "violations": [v.model_dump(exclude={"first_start_ns"}) for v in self.violations],
        }


def residuals(trace: Trace, graph: Graph) -> Residuals:
    """Match the trace's device rows to the predicted graph (DESIGN §9)."""
    seg = trace.segments
    idx = np.flatnonzero(np.isin(seg.kind, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)))
    idx = idx[np.argsort(seg.start_ns[idx], kind="stable")]
    keys = graph.key()
    per_step: dict[tuple[int, str], int] = {}
    lookup: dict[tuple[int, str, int], int] = {}
    for g, (s, n, occ) in enumerate(keys):
        per_step[(s, n)] = per_step.get((s, n), 0) + 1
        lookup[(s, n, occ)] = g
    seen: dict[tuple[int, str], int] = {}
    pred = np.full(len(idx), -1, np.int64)
    it = np.zeros(len(idx), np.int64)
    names = []
    for j, r in enumerate(idx.tolist()):
        s, n = int(seg.stream[r]), trace.names[int(seg.name[r])]
        names.append(n)
        c = seen.get((s, n), 0)
        seen[(s, n)] = c + 1
        per = per_step.get((s, n))
        if per:
            pred[j] = lookup[(s, n, c % per)]
            it[j] = c // per
    hit = pred >= 0
    exp = np.full(len(idx), np.nan)
    ide = np.full(len(idx), np.nan)
    exp[hit] = graph.expected_ns[pred[hit]]
    ide[hit] = graph.ideal_ns[pred[hit]]
    return Residuals(
        graph=graph,
        trace=trace,
        row=idx,
        pred=pred,
        iteration=it,
        names=names,
        observed_ns=seg.duration_ns[idx].astype(float),
        expected_ns=exp,
        ideal_ns=ide,
        start_ns=seg.start_ns[idx].astype(float),
        end_ns=seg.end_ns[idx].astype(float),
        bytes_observed=seg.dram_bytes[idx].astype(float),
        bytes_measured=(seg.provenance[idx] & Provenance.DRAM_BYTES) != 0,
        unmatched=int((~hit).sum()),
    )


def _group(
    codes: np.ndarray,
    names: list[str],
    rows: np.ndarray,
    start_ns: np.ndarray | None,
    mask: np.ndarray,
    observed: np.ndarray,
    predicted: np.ndarray,
    unit: str,
    what: str,
) -> list[Violation]:
    """One violation per name among the ``mask``ed rows (``codes`` index ``names``): mean
    observed and predicted, the first trace rows (``rows``' values, ``start_ns`` their start
    times indexed by them; None: none cited by time), most excess first."""
    sel = np.flatnonzero(mask)
    if not len(sel):
        return []
    if len(mask) < 2**31:  # (int32: held with the codes' order below, at the analysis' peak)
        sel = sel.astype(np.int32)
    # by the codes themselves (they index ``names``): np.unique's sorted copy and inverse took
    # 8 bytes a row each (26 MiB on a 10 M-event trace's kernels)
    c = codes[sel]
    if len(names) <= 1 << 16:  # (16-bit codes: numpy's stable sort is a radix sort, no buffer)
        c = c.astype(np.uint16)
    per = np.bincount(c, minlength=len(names))
    uniq = np.flatnonzero(per)
    count = per[uniq]
    o_mean = np.bincount(c, weights=observed[sel], minlength=len(names))[uniq] / count
    p_mean = np.bincount(c, weights=predicted[sel], minlength=len(names))[uniq] / count
    first = np.argsort(c, kind="stable")
    del c
    starts = np.concatenate(([0], np.cumsum(count)[:-1]))
    out = []
    for g, code in enumerate(uniq.tolist()):
        o, p, n = float(o_mean[g]), float(p_mean[g]), int(count[g])
        cited = rows[sel[first[starts[g] : starts[g] + min(n, 8)]]]
        out.append(
            Violation(
                name=names[code],
                message=what.format(o=o, p=p, n=n),
                count=n,
                observed=o,
                predicted=p,
                residual=o - p,
                unit=unit,
                first_start_ns=[] if start_ns is None else start_ns[cited[:4]].tolist(),
                rows=cited.tolist(),
            )
        )
    return sorted(out, key=lambda v: (-abs(v.residual) * v.count, v.name))


_BLOCK = 1 << 16  # rows compared at a time (kernel_time)


def kernel_time(
    codes: np.ndarray,
    names: list[str],
    rows: np.ndarray,
    observed: np.ndarray,
    expected: np.ndarray,
    ideal: np.ndarray,
    basis: str,
    *,
    shared: np.ndarray | None = None,
    measured: np.ndarray | None = None,
    resolution_ns: float = 0.0,
    start_ns: np.ndarray | None = None,
) -> InvariantResult:
    """Invariant 1 on rows with a prediction (``expected`` finite; ``codes`` index ``names``,
    ``rows`` are what violations cite). One rule for the optimize loop and `gitm-tui analyze`
    (``engine.planner.graph.roofline_times``):

    * slow: the time the row had the device to itself, less the trace's time resolution —
      observed × (1 − ``shared``) − ``resolution_ns`` — exceeds its expected time × the
      planner's ``tolerance``, × ``derived_uncertainty`` too where its work is derived from
      shapes (manifests/planner.json says what each covers). A row that shared the device with
      other rows may have made no progress meanwhile, so only its time alone counts against it;
    * fast (counted work only, ``measured``): observed + resolution under 0.9 × its ideal time
      — faster than the hardware allows, so the counters or the peaks are wrong;
    * a row whose derived work implies more than the device's peak in the time it took is not
      judged: that is evidence against the count (``engine.planner.graph.above_peak``), not
      against the kernel; the result counts them (``above_peak``).

    ``shared`` None: no row shared the device; ``measured`` None: every row's work is counted
    (a workload spec's plan). ``start_ns``: every row's start time, indexed by ``rows``'
    values (a violation cites its first rows by them too); None: by index only."""
    pri = planner_priors()
    tol = float(pri["tolerance"])
    tol_derived = tol * float(pri["derived_uncertainty"])
    has = np.isfinite(expected)
    slow, fast, above = np.empty_like(has), np.empty_like(has), np.empty_like(has)
    bound = np.full(len(has), np.nan)
    with np.errstate(invalid="ignore"):
        for a in range(0, len(has), _BLOCK):  # (no whole-length float temporaries)
            b = a + _BLOCK
            o, i, e, h = observed[a:b], ideal[a:b], expected[a:b], has[a:b]
            meas = np.ones(len(o), bool) if measured is None else measured[a:b]
            alone = o if shared is None else o * (1.0 - shared[a:b])
            above[a:b] = h & ~meas & np.isfinite(i) & (o < i)
            judged = h & ~above[a:b]
            bound[a:b] = e * np.where(meas, tol, tol_derived)
            slow[a:b] = judged & (alone - resolution_ns > bound[a:b])
            fast[a:b] = judged & meas & np.isfinite(i) & (o + resolution_ns < i * 0.9)
    v = _group(
        codes,
        names,
        rows,
        start_ns,
        slow,
        observed,
        bound,
        "ns",
        "{n} rows slower than their bound: {o:.0f} ns observed vs {p:.0f} ns allowed "
        "(expected time × tolerance)",
    )
    v += _group(
        codes,
        names,
        rows,
        start_ns,
        fast,
        observed,
        ideal,
        "ns",
        "{n} rows faster than the hardware's peak allows ({o:.0f} ns observed vs {p:.0f} ns at "
        "peak): the counters or the peaks are wrong",
    )
    n_above = int(above.sum())
    n = int(has.sum()) - n_above
    return InvariantResult("kernel_time", n > 0, n, basis, v, above_peak=n_above)


#: why invariants 2 and 3 cannot be checked on an imported trace (the optimize loop's monitor
#: and `gitm-tui analyze` say the same)
IMPORTED_NOT_CHECKABLE = {
    "memory_traffic": "an imported trace has no byte prediction independent of its own counters",
    "concurrency": "an imported trace carries no plan of which kernels should overlap",
}


def check_invariants(
    res: Residuals, invariants: tuple[str, ...] = INVARIANTS
) -> list[InvariantResult]:
    """Evaluate the invariants (DESIGN §9); an invariant that cannot be checked says why."""
    pri = planner_priors()
    out: list[InvariantResult] = []
    matched = res.pred >= 0
    for inv in invariants:
        if inv == "kernel_time":
            seg = res.trace.segments
            resolution = time_resolution_ns(seg)
            out.append(
                kernel_time(
                    *res.name_codes(),
                    res.row,
                    res.observed_ns,
                    np.where(matched, res.expected_ns, np.nan),
                    np.where(matched, res.ideal_ns, np.nan),
                    "roofline bounds from the planner"
                    if matched.any()
                    else "no observed row matches the plan",
                    shared=shared_fraction(seg)[res.row],
                    measured=counted(seg)[res.row] if res.graph.plan_source == "trace" else None,
                    resolution_ns=float(resolution) if resolution > 1 else 0.0,
                    start_ns=seg.start_ns,
                )
            )
        elif inv in IMPORTED_NOT_CHECKABLE and res.graph.plan_source == "trace":
            out.append(InvariantResult(inv, False, 0, IMPORTED_NOT_CHECKABLE[inv]))
        elif inv == "memory_traffic":
            tol = float(pri["bytes_tolerance"])
            meas = matched & res.bytes_measured
            if not meas.any():
                out.append(
                    InvariantResult(inv, False, 0, "DRAM bytes were not measured in this trace")
                )
                continue
            pb = res.graph.bytes[res.pred[meas]]
            ratio = np.full(len(res.pred), np.nan)
            ratio[meas] = res.bytes_observed[meas] / np.maximum(pb, 1.0)
            bad = meas & ((ratio > 1 + tol) | (ratio < 1 - tol))
            pbytes = np.full(len(res.pred), np.nan)
            pbytes[meas] = pb
            v = _group(
                *res.name_codes(),
                res.row,
                res.trace.segments.start_ns,
                bad,
                res.bytes_observed,
                pbytes,
                "bytes",
                "{n} rows moved {o:.3g} bytes vs {p:.3g} predicted",
            )
            out.append(
                InvariantResult(inv, True, int(meas.sum()), "measured DRAM bytes vs plan", v)
            )
        elif inv == "concurrency":
            out.append(_concurrency(res, float(pri["concurrency_violation_overlap"])))
        else:
            raise ValueError(f"unknown invariant {inv!r}; one of {INVARIANTS}")
    return out


def _concurrency(res: Residuals, min_share: float) -> InvariantResult:
    pairs = res.graph.concurrent
    if not pairs:
        return InvariantResult("concurrency", False, 0, "the plan predicts no concurrent kernels")
    at: dict[tuple[int, int], int] = {}
    for j in np.flatnonzero(res.pred >= 0).tolist():
        at[(int(res.pred[j]), int(res.iteration[j]))] = j
    bad: dict[tuple[int, int], list[tuple[int, int, float]]] = {}
    checked = 0
    for a, b in pairs:
        for it in range(int(res.iteration.max()) + 1 if len(res.iteration) else 0):
            ja, jb = at.get((a, it)), at.get((b, it))
            if ja is None or jb is None:
                continue
            checked += 1
            ov = min(res.end_ns[ja], res.end_ns[jb]) - max(res.start_ns[ja], res.start_ns[jb])
            short = min(res.observed_ns[ja], res.observed_ns[jb])
            share = max(0.0, ov) / short if short > 0 else 1.0
            if share < min_share:
                bad.setdefault((a, b), []).append((ja, jb, share))
    v = []
    g = res.graph
    for (a, b), hits in bad.items():
        shares = [h[2] for h in hits]
        rows = [int(res.row[h[0]]) for h in hits[:4]] + [int(res.row[h[1]]) for h in hits[:4]]
        v.append(
            Violation(
                name=f"{g.names[a]} ∥ {g.names[b]}",
                message=f"predicted to overlap, ran serialised in {len(hits)} step(s) "
                f"(mean overlap {np.mean(shares):.0%})",
                count=len(hits),
                observed=float(np.mean(shares)),
                predicted=1.0,
                residual=float(np.mean(shares)) - 1.0,
                unit="overlap share",
                first_start_ns=res.trace.segments.start_ns[rows[:4]].tolist(),
                rows=rows,
            )
        )
    return InvariantResult(
        "concurrency", True, checked, f"{len(pairs)} predicted-concurrent pairs", v
    )
