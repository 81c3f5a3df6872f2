"""Structural evidence for attribution (DESIGN §5): what the trace shows directly, cause by
cause — the time a pattern costs as a share of the window (device idle during mid-step syncs,
layout-transform kernel time, launch-gated idle, …) and how far the decoded regimes agree with
the mechanism. The levers' own pattern finders run on the replay graph; every confidence and
threshold is a prior in ``manifests/attribution.json``. The statistics are in attribution.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.levers import base as L  # the levers' own pattern finders
from engine.levers.priors import FOREACH_MIN_RUN
from engine.optimizer.monitor import Residuals
from engine.planner.catalogue import by_id
from engine.regimes import Regime
from engine.schedule.causes import Cause
from engine.schedule.dag import ReplayDag
from engine.telemetry.sample import ClockEventReason, TelemetrySample
from engine.trace.precision import row_precisions
from engine.trace.segments import Kind, Klass
from engine.trace.trace import ApiKind

if TYPE_CHECKING:
    from engine.optimizer.attribution import _Rows

CAPPED = (
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
@dataclass
class Evidence:
    """One piece of evidence for a cause."""

    kind: str  # structural | granger | aipw
    what: str
    value: float
    p: float | None = None
    p_adjusted: float | None = None


def structural_evidence(
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
        # FP32 by engine.trace.precision (the recorded input type first, then the name): the
        # rows tf32_matmul / bf16_autocast act on
        mm = [d for d in range(len(dag.d_name)) if dag.d_klass[d] in (Klass.GEMM, Klass.CONV)]
        codes = dag.d_dtype[mm] if dag.d_dtype is not None else np.zeros(len(mm), np.uint8)
        prec, _ = row_precisions(codes, [dag.d_name[d] for d in mm])
        fp32 = [d for d, p in zip(mm, prec, strict=True) if p == "fp32"]
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
        cand = np.flatnonzero(
            (dag.d_kind == Kind.KERNEL)
            & (reg == Regime.STALL)
            & np.isin(dag.d_klass, (Klass.GEMM, Klass.CONV))
        )
        low = cand[L.fills(dag, cand, hw) < C["LOW_OCCUPANCY"]["wave_fill_below"]]
        put(
            Cause.LOW_OCCUPANCY,
            float(dur[low].sum()) * C["LOW_OCCUPANCY"]["recoverable"],
            C["LOW_OCCUPANCY"]["confidence"] if len(low) else 0.0,
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
        capped = [s for s in tel if (s.clock_event_reasons or 0) & CAPPED]
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
