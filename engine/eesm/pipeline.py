"""The EESM estimator f = h ∘ S_markov ∘ T_stream ∘ B_bounded ∘ O_θ over a Segments table.

``decode`` composes the per-layer kernels (and can switch layers off for ablations);
``decode_fused`` runs the same full pipeline in one numba pass (the throughput path);
``decode_raw`` is the baseline: per-segment argmax, no ordering, no smoothing, no gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from engine.eesm import embed, emission, kappa, stream_order, viterbi
from engine.eesm._jit import jit
from engine.manifest import EesmParams, HardwareSpec, load_eesm, load_hardware
from engine.regimes import Regime
from engine.trace.segments import Segments


class Variant(str, Enum):
    """Pipeline variants: the full estimator, its ablations (DESIGN §4) and the raw baseline."""

    FULL = "full"
    NO_TSTREAM = "abl1_no_tstream"  # one global time order instead of per-stream sequences
    NO_BOUND = "abl2_no_bound"  # pressures not clipped (only floored to keep logs defined)
    NO_KAPPA = "abl3_no_kappa"  # no identifiability gate: every label reported confident
    RAW = "raw"  # per-segment argmax, global order, no smoothing, no gate


@dataclass(frozen=True)
class EesmModel:
    """Everything the kernels need, derived once from the hardware and EESM manifests."""

    params: EesmParams
    class_peak: np.ndarray  # (n_classes,) FLOP/s
    prior: np.ndarray  # (n_classes, 3)
    hbm_Bps: float
    centroids: np.ndarray  # (S, 3)
    W: np.ndarray  # (S, 3) affine emission weights
    c: np.ndarray  # (S,) affine emission offsets
    logA: np.ndarray  # (S, S)
    logpi: np.ndarray  # (S,)

    @classmethod
    def build(cls, hw: HardwareSpec | None = None, params: EesmParams | None = None) -> EesmModel:
        """Return the model for ``hw`` (default H100) and ``params`` (default manifest)."""
        hw = hw or load_hardware()
        params = params or load_eesm()
        if tuple(params.regimes) != tuple(r.name for r in Regime):
            raise ValueError(
                f"eesm.json regimes {params.regimes} must be {[r.name for r in Regime]}"
            )
        mu = params.centroid_matrix()
        W, c = emission.affine_coefficients(mu, params.bregman_beta, params.emission_scale)
        S = len(params.regimes)
        return cls(
            params=params,
            class_peak=hw.class_peak_flops(),
            prior=params.prior_matrix(),
            hbm_Bps=hw.hbm_bandwidth_Bps,
            centroids=mu,
            W=W,
            c=c,
            logA=viterbi.sticky_log_transitions(S, params.p_stay),
            logpi=np.full(S, -np.log(S)),
        )


@dataclass(frozen=True)
class Decoded:
    """Per-row results in the Segments' own row order."""

    labels: np.ndarray  # uint8 Regime
    kappa: np.ndarray  # float32, NaN = undetermined
    degenerate: np.ndarray  # bool, κ > K_max (M_deg)
    estimated: np.ndarray  # uint8 0/1, some pressure came from priors

    def regime_shares(self) -> dict[str, float]:
        """Return the share of rows in each regime."""
        n = max(1, len(self.labels))
        counts = np.bincount(self.labels, minlength=len(Regime))
        return {r.name: float(counts[r]) / n for r in Regime}

    def kappa_partition(self) -> dict[str, float]:
        """Return the shares of rows in M_id, M_deg and undetermined."""
        n = max(1, len(self.labels))
        und = int(np.isnan(self.kappa).sum())
        deg = int(self.degenerate.sum())
        return {
            "M_id": (n - und - deg) / n if len(self.labels) else 0.0,
            "M_deg": deg / n,
            "undetermined": und / n,
        }


def _observe_args(seg: Segments, m: EesmModel) -> tuple:
    return (
        seg.start_ns,
        seg.end_ns,
        seg.klass,
        seg.flops,
        seg.dram_bytes,
        seg.issue_active,
        seg.stall_frac,
        seg.occupancy,
        m.class_peak,
        m.prior,
        m.hbm_Bps,
        float(m.params.priors.short_kernel_ns),
    )


def pressures(
    seg: Segments, m: EesmModel, bounded: bool = True, use_numba: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Return (P (n, 3), estimated flags) = B_bounded(O_θ(seg)), or O_θ alone floored."""
    floor = m.params.pressure_floor
    if use_numba:
        P, est = embed.observe(*_observe_args(seg, m))
        P = embed.bound(P, floor) if bounded else np.fmax(np.nan_to_num(P, nan=floor), floor)
    else:
        P, est = embed.observe_ref(*_observe_args(seg, m))
        P = embed.bound_ref(P, floor) if bounded else np.fmax(np.nan_to_num(P, nan=floor), floor)
    return P, est


def _gate(k: np.ndarray, m: EesmModel) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.asarray(k > m.params.kappa.k_max)


def decode(
    seg: Segments,
    m: EesmModel | None = None,
    variant: Variant = Variant.FULL,
    use_numba: bool = True,
) -> Decoded:
    """Decode every row of ``seg`` with the layer-by-layer pipeline (``variant`` for ablations)."""
    m = m or EesmModel.build()
    kp = m.params.kappa
    P, est = pressures(seg, m, bounded=variant != Variant.NO_BOUND, use_numba=use_numba)
    if use_numba:
        E = emission.emissions_affine(P, m.W, m.c)
    else:
        E = emission.emissions_affine_ref(P, m.W, m.c)
    if variant in (Variant.NO_TSTREAM, Variant.RAW):
        perm, offsets = stream_order.global_order(seg.start_ns)
    elif use_numba:
        perm, offsets, _ = stream_order.stream_order(seg.stream, seg.start_ns)
    else:
        perm, offsets, _ = stream_order.stream_order_ref(seg.stream, seg.start_ns)
    if variant == Variant.RAW:
        labels = E.argmax(axis=1).astype(np.uint8)
    elif use_numba:
        labels = viterbi.viterbi_groups(E, perm, offsets, m.logA, m.logpi)
    else:
        labels = np.empty(len(seg), np.uint8)
        for g in range(len(offsets) - 1):
            rows = perm[offsets[g] : offsets[g + 1]]
            labels[rows] = viterbi.viterbi_ref(E[rows], m.logA, m.logpi)
    kfn = kappa.kappa_groups if use_numba else kappa.kappa_groups_ref
    k = kfn(P, perm, offsets, kp.window, kp.stride, kp.min_count, kp.ridge)
    if variant in (Variant.NO_KAPPA, Variant.RAW):
        degenerate = np.zeros(len(seg), bool)
    else:
        degenerate = _gate(k, m)
    return Decoded(labels=labels, kappa=k, degenerate=degenerate, estimated=est)


def decode_raw(seg: Segments, m: EesmModel | None = None) -> Decoded:
    """The raw baseline: per-segment argmax of the emissions, global order, no smoothing."""
    return decode(seg, m, Variant.RAW)


@jit
def _group_ids(stream: np.ndarray) -> tuple[np.ndarray, int]:
    """Map stream ids to dense group ids in order of first appearance (O(n), no sort)."""
    n = stream.shape[0]
    gid = np.empty(n, np.int32)
    if n == 0:
        return gid, 0
    lo, hi = stream.min(), stream.max()
    G = 0
    if hi - lo < 1 << 20:  # stream ids are small integers in practice: a direct table
        table = np.full(hi - lo + 1, -1, np.int32)
        for i in range(n):
            k = stream[i] - lo
            if table[k] < 0:
                table[k] = G
                G += 1
            gid[i] = table[k]
    else:
        d = {}
        for i in range(n):
            s = stream[i]
            if s not in d:
                d[s] = G
                G += 1
            gid[i] = d[s]
    return gid, G


@jit
def _fused(
    start: np.ndarray,
    end: np.ndarray,
    stream: np.ndarray,
    klass: np.ndarray,
    flops: np.ndarray,
    dram: np.ndarray,
    issue: np.ndarray,
    stall: np.ndarray,
    occ: np.ndarray,
    class_peak: np.ndarray,
    prior: np.ndarray,
    hbm: float,
    short_ns: float,
    floor: float,
    W: np.ndarray,
    c: np.ndarray,
    logA: np.ndarray,
    logpi: np.ndarray,
    window: int,
    stride: int,
    min_count: int,
    ridge: float,
) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """One pass in row order with per-stream state; returns ok=False if a stream is out of order.

    Per-stream Viterbi recursions, κ running sums and a ring of the last ``window`` pressures
    make T_stream implicit: no sort and no permutation when each stream is in start order (the
    usual case for device traces). Operation order matches the layered kernels exactly.
    """
    n = start.shape[0]
    S = W.shape[0]
    gid, G = _group_ids(stream)
    labels = np.empty(n, np.uint8)
    kap = np.empty(n, np.float32)
    est = np.zeros(n, np.uint8)
    bp = np.empty((n, S), np.int8)
    prev = np.empty(n, np.int64)
    delta = np.zeros((G, S))
    top_of = np.zeros(G, np.int64)  # index of δ[g]'s (first) maximum, kept by _init/_step_sticky
    last = np.full(G, -1, np.int64)
    count = np.zeros(G, np.int64)
    sums = np.zeros((G, 9))
    ring = np.zeros((G, window, 3))
    pend = np.empty((G, stride), np.int64)
    npend = np.zeros(G, np.int64)
    slot_of = np.zeros(G, np.int64)  # ring position, kept by increment: no % on the hot path
    e = np.empty((1, S))
    new = np.empty(S)
    sticky = viterbi._sticky(logA)
    s4 = sticky and S == 4
    ls, lsw = logA[0, 0], logA[min(1, S - 1), 0]
    for i in range(n):
        g = gid[i]
        if last[g] >= 0 and start[i] < start[last[g]]:
            return False, labels, kap, est
        x, y, z, flag = embed._observe_row(
            float(end[i] - start[i]),
            klass[i],
            flops[i],
            dram[i],
            issue[i],
            stall[i],
            occ[i],
            class_peak,
            prior,
            hbm,
            short_ns,
        )
        x = embed._bound(x, floor)
        y = embed._bound(y, floor)
        z = embed._bound(z, floor)
        est[i] = 1 if flag else 0
        if s4 and count[g] > 0:  # the hot path: four regimes, sticky chain
            viterbi._step_sticky4(
                delta,
                g,
                top_of,
                ls,
                lsw,
                c[0] + x * W[0, 0] + y * W[0, 1] + z * W[0, 2],
                c[1] + x * W[1, 0] + y * W[1, 1] + z * W[1, 2],
                c[2] + x * W[2, 0] + y * W[2, 1] + z * W[2, 2],
                c[3] + x * W[3, 0] + y * W[3, 1] + z * W[3, 2],
                bp,
                i,
            )
        else:
            for s in range(S):
                e[0, s] = c[s] + x * W[s, 0] + y * W[s, 1] + z * W[s, 2]
            if count[g] == 0:
                viterbi._init(delta, g, logpi, e, 0, top_of)
            elif sticky:
                viterbi._step_sticky(delta, g, top_of, ls, lsw, e, 0, new, bp, i)
            else:
                viterbi._step(delta, g, logA, e, 0, new, bp, i)
        prev[i] = last[g]
        last[g] = i
        # κ: one update per running sum with (new − leaving) terms, as kappa.kappa_groups;
        # the ring starts at zeros, so the first `window` rows subtract nothing
        slot = slot_of[g]
        slot_of[g] = 0 if slot + 1 == window else slot + 1
        ox, oy, oz = ring[g, slot, 0], ring[g, slot, 1], ring[g, slot, 2]
        sums[g, 0] += x - ox
        sums[g, 1] += y - oy
        sums[g, 2] += z - oz
        sums[g, 3] += x * x - ox * ox
        sums[g, 4] += x * y - ox * oy
        sums[g, 5] += x * z - ox * oz
        sums[g, 6] += y * y - oy * oy
        sums[g, 7] += y * z - oy * oz
        sums[g, 8] += z * z - oz * oz
        ring[g, slot, 0] = x
        ring[g, slot, 1] = y
        ring[g, slot, 2] = z
        count[g] += 1
        pend[g, npend[g]] = i
        npend[g] += 1
        if npend[g] == stride:  # the stride's evaluation point: count is a multiple of stride
            k = _kappa_from_sums(sums, g, min(count[g], window), min_count, ridge)
            for q in range(npend[g]):
                kap[pend[g, q]] = k
            npend[g] = 0
    for g in range(G):
        if npend[g]:
            k = _kappa_from_sums(sums, g, min(count[g], window), min_count, ridge)
            for q in range(npend[g]):
                kap[pend[g, q]] = k
        i = last[g]
        if i < 0:
            continue
        s = viterbi._argmax(delta, g)
        labels[i] = s
        while prev[i] >= 0:
            s = bp[i, s]
            i = prev[i]
            labels[i] = s
    return True, labels, kap, est


@jit
def _kappa_from_sums(sm: np.ndarray, g: int, cnt: int, min_count: int, ridge: float) -> float:
    if cnt < min_count:
        return np.nan
    m0, m1, m2 = sm[g, 0] / cnt, sm[g, 1] / cnt, sm[g, 2] / cnt
    return kappa._sym3_cond(
        sm[g, 3] / cnt - m0 * m0 + ridge,
        sm[g, 4] / cnt - m0 * m1,
        sm[g, 5] / cnt - m0 * m2,
        sm[g, 6] / cnt - m1 * m1 + ridge,
        sm[g, 7] / cnt - m1 * m2,
        sm[g, 8] / cnt - m2 * m2 + ridge,
    )


def decode_fused(seg: Segments, m: EesmModel | None = None) -> Decoded:
    """Full pipeline in one compiled pass; returns exactly what ``decode(seg, m)`` returns."""
    m = m or EesmModel.build()
    kp = m.params.kappa

    def run(s: Segments) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
        return _fused(
            s.start_ns,
            s.end_ns,
            s.stream,
            s.klass,
            s.flops,
            s.dram_bytes,
            s.issue_active,
            s.stall_frac,
            s.occupancy,
            m.class_peak,
            m.prior,
            m.hbm_Bps,
            float(m.params.priors.short_kernel_ns),
            m.params.pressure_floor,
            m.W,
            m.c,
            m.logA,
            m.logpi,
            kp.window,
            kp.stride,
            kp.min_count,
            kp.ridge,
        )

    ok, labels, k, est = run(seg)
    if not ok:  # some stream is out of start order: sort once (T_stream), decode, scatter back
        perm, _, _ = stream_order.stream_order(seg.stream, seg.start_ns)
        ok, lab_p, k_p, est_p = run(seg.take(perm))
        labels, k, est = np.empty_like(lab_p), np.empty_like(k_p), np.empty_like(est_p)
        labels[perm], k[perm], est[perm] = lab_p, k_p, est_p
    return Decoded(labels=labels, kappa=k, degenerate=_gate(k, m), estimated=est)
