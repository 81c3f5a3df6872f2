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

p-values are Holm-corrected over every test run; a cause is *claimed* when its impact is at
least ``MIN_IMPACT`` of the window and its confidence reaches ``MIN_CONFIDENCE`` — with no
planted cause, nothing is claimed (tests).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
from scipy import stats

from engine.levers import base as L  # the levers' own pattern finders
from engine.levers.priors import FOREACH_MIN_RUN
from engine.optimizer.monitor import Residuals
from engine.planner.catalogue import by_id
from engine.regimes import Regime
from engine.schedule.causes import Cause
from engine.schedule.dag import ReplayDag, Schedule
from engine.telemetry.sample import ClockEventReason, TelemetrySample
from engine.trace.segments import Kind, Klass
from engine.trace.trace import ApiKind

MIN_IMPACT = 0.01  # share of the window
MIN_CONFIDENCE = 0.5
ALPHA = 0.05
GRANGER_LAGS = 2
_CAPPED = (
    ClockEventReason.SW_POWER_CAP
    | ClockEventReason.HW_THERMAL_SLOWDOWN
    | ClockEventReason.SW_THERMAL_SLOWDOWN
    | ClockEventReason.HW_SLOWDOWN
)


@lru_cache(maxsize=1)
def structural_priors() -> dict[str, Any]:
    """Return manifests/attribution.json: each cause's confidence, recoverable share and
    thresholds (engineering priors, not fitted; the file says why each is what it is)."""
    return json.loads(resources.files("manifests").joinpath("attribution.json").read_text())


# ------------------------------------------------------------------ statistics
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
class Evidence:
    """One piece of evidence for a cause."""

    kind: str  # structural | granger | aipw
    what: str
    value: float
    p: float | None = None
    p_adjusted: float | None = None


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
        capped = np.array([bool((s.clock_event_reasons or 0) & _CAPPED) for s in tel])
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
    struct = _structural(res, dag, rows, tel, clock_max_mhz, window)
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


def _structural(
    res: Residuals,
    dag: ReplayDag,
    rows: _Rows,
    tel: list[TelemetrySample],
    clock_max: float | None,
    window: float,
) -> dict[Cause, tuple[float, float, list[Evidence]]]:
    """Impact (share of the window) and confidence of each cause from trace patterns: what the
    host did while the device idled, copies, kernel patterns (the levers' own finders on the
    replay graph), and the device (power cap, an unsaturated GPU)."""
    s = _Structural(res, dag, rows, window)
    s.host()
    s.copies()
    s.kernels()
    s.device(tel, clock_max)
    return s.out


class _Structural:
    """The structural evidence of one window, cause by cause (priors: manifests/attribution.json)."""

    def __init__(self, res: Residuals, dag: ReplayDag, rows: _Rows, window: float) -> None:
        self.res, self.dag, self.rows, self.window = res, dag, rows, window
        self.seg = res.trace.segments
        self.pri = structural_priors()
        self.C = self.pri["causes"]
        self.dur = dag.d_dur
        self.reg = dag.d_regime
        self.out: dict[Cause, tuple[float, float, list[Evidence]]] = {}

    def agree(self, rows_: list[int], regimes: tuple[Regime, ...]) -> float:
        """Share of ``rows_`` decoded to one of ``regimes`` (a prior when none was decoded)."""
        if not rows_:
            return 0.0
        known = [d for d in rows_ if self.reg[d] != 255]
        if not known:
            return float(self.pri["regime_unknown_agreement"])
        return float(np.mean([self.reg[d] in regimes for d in known]))

    def put(self, cause: Cause, t_ns: float, conf: float, what: str) -> None:
        share = t_ns / self.window
        self.out[cause] = (
            share,
            conf if share > 0 else 0.0,
            [Evidence("structural", what, share)],
        )

    def host(self) -> None:
        """Launch overhead, mid-step syncs, pageable copies, data loading, the allocator."""
        res, dag, C, put, rows = self.res, self.dag, self.C, self.put, self.rows
        # launch overhead: device idle (no stream busy) while the host was issuing launches, i.e.
        # not blocked in a sync, a pageable copy, host work, data loading or the allocator
        h_start, h_end = _host_times(res)
        h_api = res.trace.host.api[np.argsort(res.trace.host.api_start_ns, kind="stable")]
        blocked = np.isin(
            h_api,
            (
                ApiKind.SYNC,
                ApiKind.MEMCPY_SYNC,
                ApiKind.HOST_WORK,
                ApiKind.DATA_LOADING,
                ApiKind.MALLOC,
            ),
        )
        whole = [(float(res.start_ns.min()), float(res.end_ns.max()))] if len(res.row) else []
        idle_blocked = _idle_during(res, list(zip(h_start[blocked], h_end[blocked], strict=True)))
        launch_idle = max(0.0, _idle_during(res, whole) - idle_blocked)
        put(
            Cause.LAUNCH_OVERHEAD,
            launch_idle,
            C["LAUNCH_OVERHEAD"]["confidence"]
            if rows.gated.any()
            else C["LAUNCH_OVERHEAD"]["confidence_without_gated_rows"],
            f"device idle {launch_idle / 1e3:.0f} µs while the host was launching "
            f"({int(rows.gated.sum())} rows started as soon as launched)",
        )
        # host-blocking rows: device bubble around each mid-step sync / pageable copy
        starts = np.sort(res.start_ns)
        ends_sorted = np.maximum.accumulate(res.end_ns[np.argsort(res.start_ns)])
        sync_rows = np.flatnonzero(dag.api == ApiKind.SYNC)
        k = max(1, len(sync_rows) // max(1, dag.iterations))
        mid = (
            [r for i, r in enumerate(sync_rows.tolist()) if i % k != k - 1]
            if len(sync_rows) % max(1, dag.iterations) == 0
            else []
        )
        put(
            Cause.HOST_SYNC,
            _bubbles(res, mid, starts, ends_sorted),
            C["HOST_SYNC"]["confidence"],
            f"{len(mid)} mid-step syncs: device idle around them",
        )
        pageable = np.flatnonzero(dag.api == ApiKind.MEMCPY_SYNC).tolist()
        put(
            Cause.PAGEABLE_COPY,
            _bubbles(res, pageable, starts, ends_sorted),
            C["PAGEABLE_COPY"]["confidence"],
            f"{len(pageable)} host-blocking pageable copies: device idle around them",
        )
        for api, cause, what in (
            (ApiKind.DATA_LOADING, Cause.DATA_LOADING, "data loading on the launching thread"),
            (ApiKind.MALLOC, Cause.ALLOCATOR_CHURN, "allocator calls on the launching thread"),
        ):
            rr = np.flatnonzero(dag.api == api).tolist()
            idle = _idle_during(res, [(h_start[r], h_end[r]) for r in rr])
            conf = C[cause.name]["confidence"]
            put(cause, idle, conf, f"{len(rr)} {what}: {idle / 1e3:.0f} µs with the device idle")

    def copies(self) -> None:
        """Async copies serialised with compute."""
        res, seg, C, put, rows = self.res, self.seg, self.C, self.put, self.rows
        # serial copies: async copies on compute streams that no other stream's work overlapped
        stream_r = seg.stream[res.row]
        kinds_r = seg.kind[res.row]
        kstreams = set(stream_r[kinds_r == Kind.KERNEL].tolist())
        async_corr = set(
            res.trace.host.correlation[res.trace.host.api == ApiKind.MEMCPY_ASYNC].tolist()
        )
        serial = [
            j
            for j in range(len(res.row))
            if kinds_r[j] == Kind.MEMCPY
            and int(stream_r[j]) in kstreams
            and rows.others[j] == 0
            and int(seg.correlation[res.row[j]]) in async_corr
        ]
        put(
            Cause.SERIAL_COPY,
            float(res.observed_ns[serial].sum()),
            C["SERIAL_COPY"]["confidence"],
            f"{len(serial)} async copies serialised with compute",
        )

    def kernels(self) -> None:
        """Unfused chains, FP32 matmuls, layout transforms, unfused attention, conv algorithms,
        starved grids, per-parameter optimizer launches."""
        res, dag, dur, reg, C = self.res, self.dag, self.dur, self.reg, self.C
        put, agree = self.put, self.agree
        # kernel patterns (the levers' own finders on the replay graph)
        chains = [
            run
            for run in L.launch_runs(
                dag,
                lambda d: (
                    int(dag.d_klass[d]) in (Klass.ELEMENTWISE, Klass.NORM)
                    and int(dag.d_kind[d]) == Kind.KERNEL
                ),
            )
            if not L.same_name_run(dag, run)
        ]
        ch = [d for run in chains for d in run]
        put(
            Cause.UNFUSED_ELEMENTWISE,
            float(dur[ch].sum()) * C["UNFUSED_ELEMENTWISE"]["recoverable"],
            agree(ch, (Regime.MEMORY, Regime.IDLE)),
            f"{len(chains)} adjacent elementwise/norm chains ({len(ch)} kernels)",
        )
        fp32 = [
            d
            for d in range(len(dag.d_name))
            if dag.d_klass[d] in (Klass.GEMM, Klass.CONV)
            and L.FP32_GEMM.search(dag.d_name[d])
            and "tensorop" not in dag.d_name[d].lower()
        ]
        put(
            Cause.FP32_MATMUL,
            float(dur[fp32].sum()),
            agree(fp32, (Regime.COMPUTE, Regime.STALL)),
            f"{len(fp32)} FP32 SIMT matmul/conv rows",
        )
        lay = [d for d in range(len(dag.d_name)) if L.LAYOUT.search(dag.d_name[d])]
        put(
            Cause.LAYOUT_TRANSFORM,
            float(dur[lay].sum()),
            C["LAYOUT_TRANSFORM"]["confidence"],
            f"{len(lay)} layout-transform kernels",
        )
        att = []
        for run in L.launch_runs(
            dag, lambda d: int(dag.d_klass[d]) in (Klass.GEMM, Klass.REDUCTION), 3
        ):
            for i in range(len(run) - 2):
                a, s, b = run[i : i + 3]
                if (
                    dag.d_klass[a] == Klass.GEMM
                    and dag.d_klass[b] == Klass.GEMM
                    and L.SOFTMAX.search(dag.d_name[s])
                ):
                    att += [a, s, b]
        put(
            Cause.UNFUSED_ATTENTION,
            float(dur[att].sum()) * C["UNFUSED_ATTENTION"]["recoverable"],
            agree(att, (Regime.MEMORY,)) if att else 0.0,
            f"{len(att) // 3} GEMM→softmax→GEMM attentions",
        )
        conv = np.flatnonzero(
            (res.graph.klass[np.maximum(res.pred, 0)] == Klass.CONV) & (res.pred >= 0)
        )
        excess = float(np.nansum(np.maximum(0.0, res.residual_ns[conv])))
        dag_of = {int(r): d for d, r in enumerate(dag.d_row.tolist())}
        conv_d = [dag_of[int(res.row[j])] for j in conv if int(res.row[j]) in dag_of]
        put(
            Cause.CONV_ALGO,
            excess,
            agree(conv_d, (Regime.COMPUTE,)) * C["CONV_ALGO"]["agreement_weight"]
            if conv_d
            else 0.0,
            f"{len(conv)} convolution rows {excess / 1e3:.0f} µs over their expected time",
        )
        hw = by_id(res.graph.hardware)
        low = [
            d
            for d in range(len(dag.d_name))
            if dag.d_kind[d] == Kind.KERNEL
            and reg[d] == Regime.STALL
            and dag.d_klass[d] in (Klass.GEMM, Klass.CONV)
            and L.fill(dag, d, hw) < C["LOW_OCCUPANCY"]["wave_fill_below"]
        ]
        put(
            Cause.LOW_OCCUPANCY,
            float(dur[low].sum()) * C["LOW_OCCUPANCY"]["recoverable"],
            C["LOW_OCCUPANCY"]["confidence"] if low else 0.0,
            f"{len(low)} starved GEMM/conv rows (STALL, grid < half a wave)",
        )
        opt = [
            d
            for run in L.launch_runs(
                dag, lambda d: int(dag.d_klass[d]) == Klass.ELEMENTWISE, FOREACH_MIN_RUN
            )
            if L.same_name_run(dag, run)
            for d in run
        ]
        put(
            Cause.OPTIMIZER_LAUNCHES,
            float(dur[opt].sum()) * C["OPTIMIZER_LAUNCHES"]["recoverable"],
            C["OPTIMIZER_LAUNCHES"]["confidence"] if opt else 0.0,
            f"{len(opt)} per-parameter launches of one kernel",
        )

    def device(self, tel: list[TelemetrySample], clock_max: float | None) -> None:
        """The power cap, and a device idle for much of the window (small batch)."""
        res, seg, dur, reg, C, put, window = (
            self.res,
            self.seg,
            self.dur,
            self.reg,
            self.C,
            self.put,
            self.window,
        )
        # power cap: share of samples capped × compute-row time lost to the lower clock
        capped = [s for s in tel if (s.clock_event_reasons or 0) & _CAPPED]
        clocks = [s.sm_clock_mhz for s in tel if s.sm_clock_mhz]
        lost = 0.0
        if capped and clocks and clock_max:
            ratio = float(np.mean(clocks)) / clock_max
            comp = float(dur[reg == Regime.COMPUTE].sum())
            lost = comp * (1 - ratio) * len(capped) / len(tel)
        put(
            Cause.POWER_CAP,
            lost,
            C["POWER_CAP"]["confidence"] if lost else 0.0,
            f"{len(capped)}/{len(tel)} telemetry samples clock-capped",
        )
        # small batch: the device idle share of the window (GPU not saturated)
        busy = _union(seg.start_ns[res.row].astype(float), seg.end_ns[res.row].astype(float))
        idle_share = max(0.0, 1 - busy / window)
        put(
            Cause.SMALL_BATCH,
            idle_share * window * C["SMALL_BATCH"]["recoverable"],
            C["SMALL_BATCH"]["confidence"]
            if idle_share > C["SMALL_BATCH"]["idle_share_above"]
            else 0.0,
            f"device idle {idle_share:.0%} of the window",
        )


def _host_times(res: Residuals) -> tuple[np.ndarray, np.ndarray]:
    h = res.trace.host
    o = np.argsort(h.api_start_ns, kind="stable")
    return h.api_start_ns[o].astype(float), h.api_end_ns[o].astype(float)


def _bubbles(
    res: Residuals, host_rows: list[int], starts: np.ndarray, run_end: np.ndarray
) -> float:
    """Device idle from the end of the work each blocking host row waited for to the first
    row the host could launch after it returned (the round trip the block costs)."""
    _hs, he = _host_times(res)
    total = 0.0
    for r in host_rows:
        i = np.searchsorted(starts, he[r])
        nxt = starts[i] if i < len(starts) else np.nan
        prev = run_end[i - 1] if i > 0 else np.nan
        if np.isfinite(nxt) and np.isfinite(prev) and nxt > prev:
            total += nxt - prev
    return total


def _idle_during(res: Residuals, spans: list[tuple[float, float]]) -> float:
    """Device idle time (no row running on any stream) inside the spans."""
    o = np.argsort(res.start_ns)
    s, _e = res.start_ns[o], np.maximum.accumulate(res.end_ns[o])
    total = 0.0
    for a, b in spans:
        busy = 0.0
        i = max(0, int(np.searchsorted(s, a)) - 1)
        while i < len(s) and s[i] < b:
            busy += max(0.0, min(float(b), float(res.end_ns[o][i])) - max(float(a), float(s[i])))
            i += 1
        total += max(0.0, (b - a) - busy)
    return total


def _union(start: np.ndarray, end: np.ndarray) -> float:
    if not len(start):
        return 0.0
    o = np.argsort(start)
    s, e = start[o], np.maximum.accumulate(end[o])
    gaps = np.maximum(0.0, s[1:] - e[:-1])
    return float(e[-1] - s[0] - gaps.sum())
