"""The EESM estimator f = h ∘ S_markov ∘ T_stream ∘ B_bounded ∘ O_θ over a Segments table.

``decode`` composes the per-layer kernels (and can switch layers off for ablations);
``decode_fused`` runs the same full pipeline in one numba pass (the throughput path);
``decode_raw`` is the baseline: per-segment argmax, no ordering, no smoothing, no gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from engine.eesm import embed, emission, fused, kappa, posterior, stream_order, viterbi
from engine.manifest import EesmParams, HardwareSpec, dtype_peak_table, load_eesm, load_hardware
from engine.regimes import Label, Regime
from engine.trace.evidence import Tier
from engine.trace.segments import Kind, Klass, Segments


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
    #: (n_classes, len(DTYPES)) FLOP/s per class and dtype code, NaN where none is listed: the
    #: matrix rate for matrix classes where the datasheet gives one (manifest.dtype_peak_table)
    dtype_peak: np.ndarray
    #: the device's SM/CU count and per-SM limits: what a launch's grid says (embed.starved)
    geometry: embed.Geometry

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
            dtype_peak=dtype_peak_table(hw),
            geometry=embed.Geometry.of(hw),
        )


@dataclass(frozen=True)
class Decoded:
    """Per-row results in the Segments' own row order."""

    labels: np.ndarray  # uint8 Regime
    kappa: np.ndarray  # float32, NaN = undetermined
    degenerate: np.ndarray  # bool, κ > K_max (M_deg)
    estimated: np.ndarray  # uint8 0/1, some pressure came from priors
    #: posterior probability of each label (forward–backward, posterior.py); NaN where the
    #: decode did not compute it (the fused throughput path)
    confidence: np.ndarray | None = None

    def take(self, index: np.ndarray) -> Decoded:
        """Return the rows selected by a boolean mask or an index array."""
        return Decoded(
            labels=self.labels[index],
            kappa=self.kappa[index],
            degenerate=self.degenerate[index],
            estimated=self.estimated[index],
            confidence=None if self.confidence is None else self.confidence[index],
        )

    def regime_shares(self) -> dict[str, float]:
        """Return the share of rows in each regime."""
        n = max(1, len(self.labels))
        counts = np.bincount(self.labels, minlength=len(Regime))
        return {r.name: float(counts[r]) / n for r in Regime}

    def kappa_partition(self, index: np.ndarray | None = None) -> dict[str, float]:
        """Return the shares of rows (of ``index``, a mask or indices, when given) in M_id,
        M_deg and undetermined; reading only κ and the gate (``take`` copies every field)."""
        k, deg = self.kappa, self.degenerate
        if index is not None:
            k, deg = k[index], deg[index]
        return kappa.partition_shares(kappa.partition_counts(k, deg))


def row_labels(kind: np.ndarray, klass: np.ndarray, regimes: np.ndarray) -> np.ndarray:
    """Label per row (uint8 ``Label``), the one vocabulary of the dashboard and `analyze`:
    copies and memsets are COPY and collectives COMM — what they are, not a regime of the SMs
    (their pressures are read against a link or a peer, not the roofline) — and every other
    row keeps its decoded regime."""
    comm = (kind == Kind.COMM) | ((kind == Kind.KERNEL) & (klass == Klass.COMM))
    out = np.asarray(regimes, np.uint8).copy()
    out[(kind == Kind.MEMCPY) | (kind == Kind.MEMSET)] = Label.COPY
    out[comm] = Label.COMM
    return out


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


#: rows per block of the decode's elementwise steps that need temporaries
_BLOCK = 1 << 16


def _at_dtype_peaks(seg: Segments, m: EesmModel) -> Segments:
    """Rows whose arithmetic type is known are read against that type's peak, not the class's.

    O_θ divides FLOP/s by the class peak (``class_peak[klass]``); an FP32 SIMT GEMM measured
    against the BF16 tensor peak would look 15x idle. Rows with a known ``dtype`` (and a peak
    for it in the catalogue) get their FLOPs rescaled by class peak ÷ dtype peak *for the
    embedding only*, so flops ÷ class peak = flops ÷ dtype peak; the trace is not changed. The
    dtype peak is the class's: an FP32 GEMM on CDNA against the FP32 matrix (MFMA) rate, an
    FP32 elementwise against the vector rate (``dtype_peak_table``)."""
    if not seg.dtype.any():
        return seg
    row_peak = m.dtype_peak[seg.klass, seg.dtype]
    ok = np.isfinite(row_peak) & (row_peak > 0)
    if not ok.any():
        return seg
    cols = seg.columns()
    cols["flops"] = flops = seg.flops.copy()
    rows = np.flatnonzero(ok)
    del ok
    for lo in range(0, rows.size, _BLOCK):  # in blocks: each whole-column temporary is 8 B a row
        r = rows[lo : lo + _BLOCK]
        flops[r] = seg.flops[r] * m.class_peak[seg.klass[r]] / row_peak[r]
    return Segments(**cols)


def _roofline_stall(P: np.ndarray, seg: Segments, m: EesmModel, expected: np.ndarray) -> None:
    """Pressures of rows without a stall counter whose FLOPs *and* bytes are known (measured or
    derived from shapes), in place, from their roofline position and their launch geometry —
    the simulator's truth rule (engine/device/kernel_model.py) read from what a trace shows.

    The roofline position (FLOP/s ÷ the peak of the row's dtype against bytes/s ÷ HBM
    bandwidth: arithmetic intensity against the ridge) says which pipe bounds the kernel.
    ``expected`` (n_classes, 2) is the share of each peak a good library reaches
    (manifests/planner.json).

    * Where the geometry is evidence of starvation (embed.starved: a grid under half a wave, or
      on the memory side too few bytes in flight), the share of the duration that neither pipe
      explains at the library's rate is latency stall: the stall pressure.
    * Elsewhere — a grid that fills the machine, or no grid recorded — that share is the bound
      pipe running below the library's rate (a slow compute-limited kernel with a full grid is
      COMPUTE in the truth rule): the stall pressure stays the class prior, and the bound pipe
      (where no issue counter measured it) reads as busy at no less than the library's rate.

    Both scale down for kernels too short to be more than launch cost (``short_kernel_ns``).
    Taking every unexplained share as stall labelled the BF16 GEMMs of a Qwen trace on MI300X
    STALL (37 % of peak, 2.8x past the ridge, the grid a full wave) where the same model's
    GEMMs on H100 (63 %) were COMPUTE, and a 163 µs flash-attention kernel IDLE once stall
    needed evidence; on the simulator corpus with counters removed it agreed with the counter
    labels on 96.1 % of GPU time, this rule on 98.6 % (manifests/eesm.json)."""
    every = np.flatnonzero(
        np.isnan(seg.stall_frac) & ~np.isnan(seg.flops) & ~np.isnan(seg.dram_bytes)
    )
    short_ns = float(m.params.priors.short_kernel_ns)
    for lo in range(0, every.size, _BLOCK):  # in blocks (memory: see _at_dtype_peaks)
        rows = every[lo : lo + _BLOCK]
        k = seg.klass[rows].astype(np.intp)
        c, b = P[rows, 0], P[rows, 1]
        side = c >= b  # compute side of the ridge
        hit = embed.starved(
            seg.klass[rows], seg.grid[rows], seg.block[rows], seg.regs[rows], seg.smem[rows],
            side, m.geometry,
        )  # fmt: skip
        dur = np.maximum((seg.end_ns[rows] - seg.start_ns[rows]).astype(np.float64), 1.0)
        short = np.minimum(1.0, dur / short_ns)
        free = ~hit & np.isnan(seg.issue_active[rows])
        on = free & side
        P[rows[on], 0] = np.fmax(c[on], expected[k[on], 0] * short[on])
        on = free & ~side
        P[rows[on], 1] = np.fmax(b[on], expected[k[on], 1] * short[on])
        busy = np.fmax(c[hit] / expected[k[hit], 0], b[hit] / expected[k[hit], 1])
        P[rows[hit], 2] = (1.0 - np.minimum(1.0, busy)) * short[hit]


#: the columns decode_evidence reads (the others of its rows are not gathered: see ``rows``)
DECODE_READS = (
    "start_ns", "end_ns", "stream", "klass", "flops", "dram_bytes", "issue_active",
    "stall_frac", "occupancy", "dtype", "grid", "block", "regs", "smem",
)  # fmt: skip


def decode_evidence(
    seg: Segments,
    tier: np.ndarray,
    m: EesmModel | None = None,
    expected: np.ndarray | None = None,
    rows: np.ndarray | None = None,
) -> Decoded:
    """Full pipeline with each row's emissions weighted by its evidence tier, plus the posterior
    confidence of every label (the analysis of imported traces).

    A row's emission scores are multiplied by ``evidence_weight[tier]`` (manifests/eesm.json):
    weight 1 is the measured-counter model, a smaller weight flattens the row's likelihood
    toward uniform — its pressures are estimates, so they move its label (and its neighbours')
    less, and the posterior says how little is known. Weight 0 (tier NONE) leaves the label to
    the chain alone; callers report those rows as unknown.

    ``expected``: the planner's expected library efficiency per class (compute, memory), which
    lets rows with FLOPs and bytes but no stall counter estimate their stall (_roofline_stall);
    None keeps the class prior for them.

    ``rows``: decode only these rows of ``seg`` (an index or a mask; ``tier`` is theirs),
    gathering only the columns the decode reads (DECODE_READS). Memory: each array is dropped
    once read — the rows' columns once ordered, the index once the rows are gathered — and the
    emissions overwrite the pressures once κ has read them (one array for both), so the
    forward–backward pass (its α is 32 bytes a row) does not stack on them (149 → ~85 MiB above
    the trace for a 10 M-event trace's 0.8 M kernels, before the shared array)."""
    m = m or EesmModel.build()
    kp = m.params.kappa
    idx = np.arange(len(seg)) if rows is None else np.asarray(rows)
    if idx.dtype == np.bool_:
        idx = np.flatnonzero(idx)
    perm, offsets, _ = stream_order.stream_order(seg.stream[idx], seg.start_ns[idx])
    states = m.W.shape[0]
    # the pressures in the first three columns of the array that then holds the emissions
    P, est = _embedded(seg, idx, m, expected, max(3, states))
    del idx
    # κ reads columns 0-2 only (a wider C-ordered array is the same kernel type)
    k = kappa.kappa_groups(P, perm, offsets, kp.window, kp.stride, kp.min_count, kp.ridge)
    if P.shape[1] == states:
        emission.emissions_in_place(P, m.W, m.c)
        E = P
    else:  # (fewer than three states: the scores' array is narrower than the pressures')
        E = emission.emissions_affine(P, m.W, m.c)
    del P
    weight, tier = m.params.evidence_weights(), np.asarray(tier)
    for lo in range(0, len(E), _EMBED_BLOCK):  # (a whole-length weight column: 8 bytes a row)
        E[lo : lo + _EMBED_BLOCK] *= weight[tier[lo : lo + _EMBED_BLOCK]][:, None]
    labels = viterbi.viterbi_groups(E, perm, offsets, m.logA, m.logpi)
    conf, _ = posterior.posterior_groups(E, perm, offsets, m.logA, m.logpi, labels)
    del perm
    _prior_confidence(conf, E, labels, tier, m)
    degenerate = _gate(k, m)
    _cap_confidence(conf, tier, degenerate, m)
    return Decoded(labels=labels, kappa=k, degenerate=degenerate, estimated=est, confidence=conf)


def _cap_confidence(
    conf: np.ndarray, tier: np.ndarray, degenerate: np.ndarray, m: EesmModel
) -> None:
    """Only measured counters earn confidence 1.0 (in place): a shape-derived label carries at
    most the measured agreement of such labels (``derived_confidence_cap``), and a label the κ
    gate flags (not identifiable) at most ``degenerate_confidence_cap`` — the number then says
    what the flag says (manifests/eesm.json)."""
    derived = np.flatnonzero(tier == Tier.DERIVED)
    if derived.size:
        conf[derived] = np.minimum(conf[derived], m.params.derived_confidence_cap)
    deg = np.flatnonzero(np.asarray(degenerate, bool))
    if deg.size:
        conf[deg] = np.minimum(conf[deg], m.params.degenerate_confidence_cap)


#: rows embedded at a time (decode_evidence): the embedding is row by row, so only one block's
#: gathered columns are held at once (~150 bytes a row with their rescaled copy and the
#: pressures: 2**18 rows were the 10 M-event trace's decode peak, 2**16 cost no time)
_EMBED_BLOCK = 1 << 16


def _embedded(
    seg: Segments, idx: np.ndarray, m: EesmModel, expected: np.ndarray | None, width: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """(bounded pressures P (n, ``width`` >= 3; the pressures in columns 0-2, the others left
    to the caller), estimated flags) of the rows ``idx`` of ``seg``, a block
    of rows at a time: gathering the ten columns the decode reads for every row at once
    (DECODE_READS, 50 bytes a row) was the peak of a 10 M-event trace's analysis (402 MiB, the
    columns, their dtype-rescaled copy and P alive together). Every step is row by row
    (observe, _roofline_stall, bound), so the blocks give the same values."""
    n = len(idx)
    P = np.empty((n, width), np.float64)
    est = np.empty(n, np.uint8)
    for lo in range(0, n, _EMBED_BLOCK):
        hi = min(n, lo + _EMBED_BLOCK)
        part = _at_dtype_peaks(seg.take_only(idx[lo:hi], DECODE_READS), m)
        p, est[lo:hi] = embed.observe(*_observe_args(part, m))
        if expected is not None:
            _roofline_stall(p, part, m, expected)
        P[lo:hi, :3] = embed.bound(p, m.params.pressure_floor)
    return P, est


def _prior_confidence(
    conf: np.ndarray, E: np.ndarray, labels: np.ndarray, tier: np.ndarray, m: EesmModel
) -> None:
    """Confidence of labels that rest on a name prior (tier PRIOR) or on nothing (NONE), in place.

    The chain's posterior would count every kernel of a class as independent evidence for the
    class's usual regime — but a prior's errors are shared by the whole class, so 48 identical
    guesses are one guess: on the simulator corpus that posterior put ≥ 0.9 on prior labels of
    which 48 % were right. A prior row's confidence is instead its own emission's softmax at
    the temperature ``prior_confidence_scale`` (manifests/eesm.json, fitted so that the mean
    confidence equals the accuracy on that corpus), independent of its neighbours; NONE → NaN."""
    scale = m.params.prior_confidence_scale
    rows = np.flatnonzero(tier == Tier.PRIOR)
    if rows.size:
        p = E[rows]  # (one copy, worked in place: each step a copy was 32 bytes a row)
        p *= scale
        p -= p.max(axis=1, keepdims=True)
        np.exp(p, out=p)
        conf[rows] = p[np.arange(rows.size), labels[rows]] / p.sum(axis=1)
    conf[tier == Tier.NONE] = np.nan


def decode_fused(seg: Segments, m: EesmModel | None = None) -> Decoded:
    """Full pipeline in one compiled pass; returns exactly what ``decode(seg, m)`` returns."""
    m = m or EesmModel.build()
    kp = m.params.kappa

    fast = fused.fast_path_applies(m.logA)

    def run(s: Segments) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
        extra = fused.work_arrays(len(s)) if fast else ()
        kernel = fused.fused_sticky4 if fast else fused.fused_general
        return kernel(
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
            *extra,
        )

    if len(seg) >= 2**31:
        raise ValueError("decode_fused handles at most 2**31 - 1 rows per call; split the table")
    if (
        fast and len(seg) and (int(seg.stream.max()) - int(seg.stream.min()) >= 1 << 20)
    ):  # its direct stream table wants compact ids: renumber (order-preserving)
        cols = seg.columns()
        cols["stream"] = np.unique(seg.stream, return_inverse=True)[1].astype(np.int32)
        seg = Segments(**cols)
    ok, labels, k, est = run(seg)
    if not ok:  # some stream is out of start order: sort once (T_stream), decode, scatter back
        perm, _, _ = stream_order.stream_order(seg.stream, seg.start_ns)
        ok, lab_p, k_p, est_p = run(seg.take(perm))
        labels, k, est = np.empty_like(lab_p), np.empty_like(k_p), np.empty_like(est_p)
        labels[perm], k[perm], est[perm] = lab_p, k_p, est_p
    return Decoded(labels=labels, kappa=k, degenerate=_gate(k, m), estimated=est)
