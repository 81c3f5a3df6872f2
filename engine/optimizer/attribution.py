"""Attribution (DESIGN §5): which causes explain the deviations, with evidence and confidence.

Two kinds of evidence per cause:

* **structural** — what the trace shows directly: the time the pattern costs (device idle
  during mid-step syncs, layout-transform kernel time, launch-gated idle, …) as a share of the
  window, and how far the decoded regimes agree with the mechanism (an unfused chain decoded
  MEMORY, an FP32 GEMM decoded COMPUTE);
* **statistical** — on the per-row residual series (rows in time order): Granger tests of a
  candidate series (SM clock, launch queue depth, copy activity, other streams' activity) on
  the residual (F-test of lagged x added to an AR model of the residual), and doubly-robust
  (AIPW) effects of a binary exposure (launch-gated, clock-throttled, concurrent with another
  stream, first row after a host sync) on the residual, with logistic propensity and linear
  outcome models on kernel class, predicted duration and grid.

The structural half is ``engine/optimizer/structural.py``; this module joins it with the statistics.
p-values are Holm-corrected over every test run; a cause is *claimed* when its impact is at
least ``MIN_IMPACT`` of the window and its confidence reaches ``MIN_CONFIDENCE`` — with no
planted cause, nothing is claimed (tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from engine.optimizer.monitor import Residuals
from engine.optimizer.structural import (
    CAPPED,
    Evidence,
    structural_evidence,
)
from engine.planner.catalogue import by_id
from engine.schedule.causes import Cause
from engine.schedule.dag import ReplayDag, Schedule
from engine.telemetry.sample import TelemetrySample
from engine.trace.segments import Kind, Klass
from engine.trace.trace import ApiKind

MIN_IMPACT = 0.01  # share of the window
MIN_CONFIDENCE = 0.5
ALPHA = 0.05
GRANGER_LAGS = 2


def granger(y: np.ndarray, x: np.ndarray, lags: int = GRANGER_LAGS) -> tuple[float, float]:
    """F statistic and p-value that lags of ``x`` improve an AR(lags) model of ``y``."""
    ok = np.isfinite(y) & np.isfinite(x)
    y, x = y[ok], x[ok]
    n = len(y) - lags
    if n < 5 * (2 * lags + 1) or np.std(x) == 0 or np.std(y) == 0:
        return 0.0, 1.0
    Y = y[lags:]
    ylag = np.column_stack([y[lags - k : len(y) - k] for k in range(1, lags + 1)])
    xlag = np.column_stack([x[lags - k : len(x) - k] for k in range(1, lags + 1)])
    one = np.ones((n, 1))
    r = np.hstack([one, ylag])
    u = np.hstack([one, ylag, xlag])
    rss_r = _rss(r, Y)
    rss_u = _rss(u, Y)
    df2 = n - u.shape[1]
    if rss_u <= 0 or df2 <= 0:
        return 0.0, 1.0
    F = ((rss_r - rss_u) / lags) / (rss_u / df2)
    return float(F), float(stats.f.sf(F, lags, df2))


def _rss(A: np.ndarray, y: np.ndarray) -> float:
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    e = y - A @ coef
    return float(e @ e)


def aipw(y: np.ndarray, t: np.ndarray, X: np.ndarray) -> tuple[float, float, float]:
    """Doubly-robust average effect of binary ``t`` on ``y`` given covariates ``X``:
    (effect, standard error, two-sided p). Propensity: ridge logistic regression (IRLS),
    clipped to [0.02, 0.98]; outcomes: ridge linear regression per arm."""
    ok = np.isfinite(y) & np.all(np.isfinite(X), axis=1)
    y, t, X = y[ok], t[ok].astype(float), X[ok]
    n1, n0 = int(t.sum()), int((1 - t).sum())
    if n1 < 10 or n0 < 10:
        return 0.0, math.inf, 1.0
    Z = np.hstack([np.ones((len(y), 1)), (X - X.mean(0)) / (X.std(0) + 1e-12)])
    e = np.clip(_logistic(Z, t), 0.02, 0.98)
    m1 = Z @ _ridge(Z[t == 1], y[t == 1])
    m0 = Z @ _ridge(Z[t == 0], y[t == 0])
    psi = m1 - m0 + t * (y - m1) / e - (1 - t) * (y - m0) / (1 - e)
    ate = float(psi.mean())
    se = float(psi.std(ddof=1) / math.sqrt(len(psi)))
    if se == 0:
        return ate, 0.0, 0.0 if ate else 1.0
    return ate, se, float(2 * stats.norm.sf(abs(ate) / se))


def _ridge(Z: np.ndarray, y: np.ndarray, lam: float = 1e-3) -> np.ndarray:
    return np.linalg.solve(Z.T @ Z + lam * np.eye(Z.shape[1]), Z.T @ y)


def _logistic(Z: np.ndarray, t: np.ndarray, lam: float = 1e-2, iters: int = 25) -> np.ndarray:
    w = np.zeros(Z.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-np.clip(Z @ w, -30, 30)))
        W = p * (1 - p) + 1e-9
        H = Z.T @ (Z * W[:, None]) + lam * np.eye(Z.shape[1])
        step = np.linalg.solve(H, Z.T @ (t - p) - lam * w)
        w += step
        if np.abs(step).max() < 1e-8:
            break
    return 1 / (1 + np.exp(-np.clip(Z @ w, -30, 30)))


def holm(p: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order)."""
    m = len(p)
    order = np.argsort(p)
    adj = np.empty(m)
    run = 0.0
    for rank, i in enumerate(order):
        run = max(run, min(1.0, (m - rank) * p[i]))
        adj[i] = run
    return adj.tolist()


# ------------------------------------------------------------------ results
@dataclass
class Hypothesis:
    """A cause, how much of the window it costs, how sure we are, and why."""

    cause: Cause
    impact: float  # share of the window attributable
    confidence: float
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def claimed(self) -> bool:
        return self.impact >= MIN_IMPACT and self.confidence >= MIN_CONFIDENCE


@dataclass
class RankedHypotheses:
    """Every cause examined, claimed ones first (by impact × confidence)."""

    hypotheses: list[Hypothesis]
    tests: int

    @property
    def claimed(self) -> list[Hypothesis]:
        return [h for h in self.hypotheses if h.claimed]

    def get(self, cause: Cause) -> Hypothesis | None:
        for h in self.hypotheses:
            if h.cause == cause:
                return h
        return None


# ------------------------------------------------------------------ series from a trace
@dataclass
class _Rows:
    """Per device row (time order) series the statistics run on."""

    y_dur: np.ndarray
    y_idle: np.ndarray
    clock: np.ndarray
    queue: np.ndarray
    copy_active: np.ndarray
    others: np.ndarray
    gated: np.ndarray
    throttled: np.ndarray
    concurrent: np.ndarray
    after_sync: np.ndarray
    X: np.ndarray
    is_kernel: np.ndarray


def _rows(
    res: Residuals,
    dag: ReplayDag,
    sch: Schedule,
    tel: list[TelemetrySample],
    hw_clock: float | None,
) -> _Rows:
    tr = res.trace
    seg = tr.segments
    r = res.row
    n = len(r)
    start, end = res.start_ns, res.end_ns
    stream = seg.stream[r].astype(np.int64)
    kind = seg.kind[r]
    # idle gap before each row on its stream
    y_idle = np.zeros(n)
    last: dict[int, float] = {}
    for j in range(n):
        s = int(stream[j])
        y_idle[j] = max(0.0, start[j] - last[s]) if s in last else np.nan
        last[s] = max(last.get(s, 0.0), end[j])
    # launch call start per row (correlation) and mid-step sync ends
    h = tr.host
    pos = {int(c): i for i, c in enumerate(h.correlation) if c > 0}
    api_start = np.array(
        [h.api_start_ns[pos[c]] if (c := int(seg.correlation[x])) in pos else np.nan for x in r],
        float,
    )
    gated = (
        np.isfinite(api_start) & (start - api_start <= dag.launch_latency_ns * 1.05) & (y_idle > 0)
    )
    queue = np.searchsorted(np.sort(api_start[np.isfinite(api_start)]), start) - np.arange(n)
    sync_end = np.sort(
        h.api_end_ns[(h.api == ApiKind.SYNC) | (h.api == ApiKind.MEMCPY_SYNC)].astype(float)
    )
    k = np.searchsorted(sync_end, start)
    prev_sync = np.where(k > 0, sync_end[np.maximum(k - 1, 0)], -np.inf)
    prev_end_any = np.concatenate(([-np.inf], np.maximum.accumulate(end)[:-1]))
    after_sync = prev_sync > prev_end_any
    # concurrency: other-stream kernels and copies overlapping each row
    order_e = np.sort(end)
    started_before = np.searchsorted(np.sort(start), end, side="left")
    ended_before = np.searchsorted(order_e, start, side="right")
    overlapping = started_before - ended_before - 1
    copy = kind == Kind.MEMCPY
    cs, ce = start[copy], end[copy]
    copy_active = (
        np.array([float(((cs < e) & (ce > s)).sum()) for s, e in zip(start, end, strict=True)])
        - copy
    )
    others = np.maximum(0, overlapping - np.maximum(0, copy_active)).astype(float)
    # clock at each row (telemetry sample in effect)
    clock = np.full(n, np.nan)
    throttled = np.zeros(n, bool)
    if tel:
        ts = np.array([s.t_ns for s in tel], float)
        ck = np.array([s.sm_clock_mhz if s.sm_clock_mhz else np.nan for s in tel], float)
        capped = np.array([bool((s.clock_event_reasons or 0) & CAPPED) for s in tel])
        i = np.clip(np.searchsorted(ts, start), 0, len(ts) - 1)
        clock = ck[i]
        throttled = capped[i] & np.isfinite(clock) & (clock < (hw_clock or np.nanmax(ck)))
    klass = seg.klass[r]
    X = np.column_stack(
        [np.log(np.maximum(res.expected_ns, 1.0))]
        + [
            (klass == c).astype(float)
            for c in (
                Klass.GEMM,
                Klass.CONV,
                Klass.ATTENTION,
                Klass.ELEMENTWISE,
                Klass.NORM,
                Klass.REDUCTION,
            )
        ]
        + [np.log1p(seg.grid[r].astype(float))]
    )
    return _Rows(
        y_dur=res.log_ratio,
        y_idle=y_idle / 1e3,
        clock=clock,
        queue=queue.astype(float),
        copy_active=copy_active,
        others=others,
        gated=gated,
        throttled=throttled,
        concurrent=others > 0,
        after_sync=after_sync,
        X=np.nan_to_num(X),
        is_kernel=kind == Kind.KERNEL,
    )


# ------------------------------------------------------------------ attribution
def attribute(
    res: Residuals,
    graph: object | None = None,
    *,
    dag: ReplayDag | None = None,
    schedule: Schedule | None = None,
    telemetry: list[TelemetrySample] | None = None,
    clock_max_mhz: float | None = None,
) -> RankedHypotheses:
    """Rank the causes of ``res``'s deviations (DESIGN §9: attribute(residuals, graph)).

    ``dag``/``schedule``: the replay graph of the same trace (built here, with EESM regimes,
    when not given); ``telemetry`` feeds the clock series."""
    if dag is None:
        from engine.eesm.pipeline import decode_fused
        from engine.schedule.dag import build_dag
        from engine.schedule.dag import schedule as _schedule

        hw = by_id(res.graph.hardware)
        labels = decode_fused(res.trace.segments).labels
        it = int(res.iteration.max()) + 1 if len(res.iteration) else 1
        dag = build_dag(res.trace, hw, it, regimes=labels)
        schedule = _schedule(dag)
        clock_max_mhz = clock_max_mhz or hw.sm_clock_max_mhz
    assert schedule is not None
    tel = telemetry or []
    rows = _rows(res, dag, schedule, tel, clock_max_mhz)
    window = max(1.0, dag.observed_ns)
    struct = structural_evidence(res, dag, rows, tel, clock_max_mhz, window)
    # statistical tests: (cause, kind, description, run)
    tests: list[tuple[Cause, str, str, float, float]] = []
    kern = rows.is_kernel
    for cause, x, y, what in (
        (Cause.POWER_CAP, rows.clock, rows.y_dur, "SM clock → kernel-time residual"),
        (Cause.LAUNCH_OVERHEAD, rows.queue, rows.y_idle, "launch queue depth → stream idle"),
        (Cause.SERIAL_COPY, rows.copy_active, rows.y_idle, "copy activity → stream idle"),
        (
            Cause.HBM_CONTENTION,
            rows.others,
            rows.y_dur,
            "other streams' kernels → kernel-time residual",
        ),
    ):
        F, p = granger(y[kern], x[kern])
        tests.append((cause, "granger", what, F, p))
    for cause, t, y, what in (
        (
            Cause.LAUNCH_OVERHEAD,
            rows.gated,
            rows.y_idle,
            "launch-gated rows: extra idle before them (µs)",
        ),
        (
            Cause.POWER_CAP,
            rows.throttled,
            rows.y_dur,
            "rows under a clock cap: log kernel-time residual",
        ),
        (
            Cause.HBM_CONTENTION,
            rows.concurrent,
            rows.y_dur,
            "rows concurrent with another stream: log residual",
        ),
        (
            Cause.HOST_SYNC,
            rows.after_sync,
            rows.y_idle,
            "first rows after a host sync: extra idle (µs)",
        ),
    ):
        ate, _se, p = aipw(y[kern], t[kern], rows.X[kern])
        tests.append((cause, "aipw", what, ate, p))
    adj = holm([t[4] for t in tests])
    hyps: dict[Cause, Hypothesis] = {}
    for cause, (impact, conf, ev) in struct.items():
        hyps[cause] = Hypothesis(cause, impact, conf, list(ev))
    for (cause, kind, what, value, p), pa in zip(tests, adj, strict=True):
        h = hyps.setdefault(cause, Hypothesis(cause, 0.0, 0.0))
        h.evidence.append(Evidence(kind, what, value, p, pa))
        if pa < ALPHA and (kind == "granger" or value > 0):
            h.confidence = max(h.confidence, 1.0 - pa)
    # HBM contention has no structural measure: its impact is the AIPW excess on treated rows
    hc = hyps.get(Cause.HBM_CONTENTION)
    if hc is not None:
        aev = next((e for e in hc.evidence if e.kind == "aipw"), None)
        if (
            aev is not None
            and aev.p_adjusted is not None
            and aev.p_adjusted < ALPHA
            and aev.value > 0
        ):
            treated = rows.concurrent & kern
            excess = float(np.nansum(res.observed_ns[treated] * (1 - np.exp(-aev.value))))
            hc.impact = excess / window
    ranked = sorted(hyps.values(), key=lambda h: (not h.claimed, -h.impact * h.confidence))
    return RankedHypotheses(ranked, len(tests))
