"""EESM kernels: numba equals the numpy reference (hypothesis), Viterbi equals brute force,
fixed-lag equals batch where certified, the fused pass equals the layered pipeline."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.eesm import embed, emission, kappa, stream_order, viterbi
from engine.eesm.live import LiveDecoder
from engine.eesm.pipeline import Variant, _observe_args, decode, decode_fused, pressures
from engine.trace.segments import Segments

SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def segment_tables(draw, max_rows=150):
    n = draw(st.integers(0, max_rows))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    streams = rng.choice(draw(st.sampled_from([[7], [7, 13], [0, 3, 21, 9]])), n)
    start = rng.integers(0, 10**7, n)
    if draw(st.booleans()):
        start = np.sort(start)  # traces usually arrive in time order; sometimes not
    dur = rng.integers(1, 10**6, n)
    cols = {
        "start_ns": start,
        "end_ns": start + dur,
        "stream": streams,
        "klass": rng.integers(0, 9, n),
    }
    for c, hi in (
        ("flops", 1e13),
        ("dram_bytes", 1e10),
        ("issue_active", 1.0),
        ("stall_frac", 1.0),
        ("occupancy", 1.0),
    ):
        v = rng.random(n) * hi
        v[rng.random(n) < draw(st.sampled_from([0.0, 0.3, 1.0]))] = np.nan  # counters missing
        cols[c] = v
    return Segments.from_columns(**cols)


def _obs_args(seg, model):
    """The column arguments O_θ takes — the pipeline's own helper, so tests feed what it feeds."""
    return _observe_args(seg, model)


@SETTINGS
@given(segment_tables())
def test_observe_and_bound_match_reference(model, seg):
    P, est = embed.observe(*_obs_args(seg, model))
    Pr, estr = embed.observe_ref(*_obs_args(seg, model))
    np.testing.assert_allclose(P, Pr, rtol=1e-12)
    assert np.array_equal(est, estr)
    f = model.params.pressure_floor
    B = embed.bound(P, f)
    np.testing.assert_array_equal(B, embed.bound_ref(P, f))
    assert ((f <= B) & (B <= 1)).all()


@SETTINGS
@given(segment_tables(), st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0]))
def test_affine_emissions_equal_full_divergence_up_to_a_row_constant(model, seg, beta):
    P, _ = pressures(seg, model)
    mu = model.centroids
    W, c = emission.affine_coefficients(mu, beta, 7.0)
    fast = emission.emissions_affine(P, W, c)
    np.testing.assert_allclose(fast, emission.emissions_affine_ref(P, W, c), rtol=1e-12, atol=1e-9)
    # over the pressures (their array one column wider): the same bits
    PE = np.zeros((len(P), W.shape[0]))
    PE[:, :3] = P
    emission.emissions_in_place(PE, W, c)
    assert PE.tobytes() == fast.tobytes()
    full = emission.emissions_ref(P, mu, beta, 7.0)
    diff = full - fast
    np.testing.assert_allclose(diff, diff[:, :1].repeat(diff.shape[1], axis=1), atol=1e-8)
    if len(P):
        assert np.array_equal(full.argmax(axis=1), fast.argmax(axis=1))


def test_beta_divergence_is_a_divergence():
    p = np.array([0.2, 0.5, 0.9])
    for beta in (0.0, 1.0, 2.0, 1.5):
        assert np.allclose(emission.beta_divergence(p, p, beta), 0)
        assert (emission.beta_divergence(p, p[::-1], beta)[[0, 2]] > 0).all()
    # β = 2 is half the squared distance; β = 1 is generalised KL
    assert np.isclose(emission.beta_divergence(0.3, 0.7, 2.0), 0.5 * 0.4**2)
    assert np.isclose(emission.beta_divergence(0.3, 0.7, 1.0), 0.3 * np.log(0.3 / 0.7) - 0.3 + 0.7)


@SETTINGS
@given(segment_tables())
def test_stream_order_matches_reference(seg):
    perm, off, keys = stream_order.stream_order(seg.stream, seg.start_ns)
    pr, offr, keysr = stream_order.stream_order_ref(seg.stream, seg.start_ns)
    assert np.array_equal(off, offr) and np.array_equal(keys, keysr)
    assert np.array_equal(perm, pr)  # both stable: equal start times keep their row order
    assert perm.dtype == np.int64 and off.dtype == np.int64 and keys.dtype == np.int32


def _brute_force(E, logA, logpi):
    n, S = E.shape
    best, arg = -np.inf, None
    for path in itertools.product(range(S), repeat=n):
        score = logpi[path[0]] + E[0, path[0]]
        for t in range(1, n):
            score += logA[path[t - 1], path[t]] + E[t, path[t]]
        if score > best + 1e-12:
            best, arg = score, path
    return np.array(arg), best


def _path_score(path, E, logA, logpi):
    s = logpi[path[0]] + E[0, path[0]]
    for t in range(1, len(path)):
        s += logA[path[t - 1], path[t]] + E[t, path[t]]
    return s


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**31 - 1), st.floats(0.3, 0.99))
def test_viterbi_equals_brute_force(n, seed, p_stay):
    rng = np.random.default_rng(seed)
    E = rng.normal(0, 2, (n, 4))
    logA = viterbi.sticky_log_transitions(4, p_stay)
    logpi = np.log(np.full(4, 0.25))
    _, best = _brute_force(E, logA, logpi)
    ref = viterbi.viterbi_ref(E, logA, logpi)
    fast = viterbi.viterbi_groups(E, np.arange(n), np.array([0, n]), logA, logpi)
    assert np.array_equal(ref, fast)
    assert np.isclose(_path_score(fast.astype(int), E, logA, logpi), best)


@SETTINGS
@given(segment_tables())
def test_kappa_matches_reference(model, seg):
    P, _ = pressures(seg, model)
    perm, off, _ = stream_order.stream_order(seg.stream, seg.start_ns)
    kp = model.params.kappa
    for window, stride, min_count in ((kp.window, kp.stride, kp.min_count), (16, 4, 8)):
        k = kappa.kappa_groups(P, perm, off, window, stride, min_count, kp.ridge)
        kr = kappa.kappa_groups_ref(P, perm, off, window, stride, min_count, kp.ridge)
        np.testing.assert_allclose(k, kr, rtol=1e-4, equal_nan=True)


def test_kappa_detects_a_collapsed_dimension(model):
    rng = np.random.default_rng(0)
    iso = rng.random((256, 3))
    flat = iso.copy()
    flat[:, 1] = 1.0  # memory pressure pinned at saturation: one direction has no variance
    perm, off = np.arange(256), np.array([0, 256])
    kp = model.params.kappa
    k_iso = kappa.kappa_groups(iso, perm, off, 256, 256, 32, kp.ridge)[0]
    k_flat = kappa.kappa_groups(flat, perm, off, 256, 256, 32, kp.ridge)[0]
    assert k_iso < 3 and k_flat > kp.k_max


@SETTINGS
@given(segment_tables())
def test_layered_numba_equals_numpy_and_fused(model, seg):
    a = decode(seg, model, use_numba=True)
    b = decode(seg, model, use_numba=False)
    c = decode_fused(seg, model)
    assert np.array_equal(a.labels, b.labels)
    assert np.array_equal(a.labels, c.labels)
    np.testing.assert_allclose(a.kappa, b.kappa, rtol=1e-4, equal_nan=True)
    np.testing.assert_array_equal(a.kappa, c.kappa)
    assert np.array_equal(a.degenerate, c.degenerate)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 40), st.integers(1, 7), st.booleans())
def test_fixed_lag_equals_batch_where_certified(seed, lag, pushes, use_numba):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    E = rng.normal(0, 3, (n, 4))
    logA = viterbi.sticky_log_transitions(4, 0.9)
    logpi = np.full(4, -np.log(4))
    batch = viterbi.viterbi_ref(E, logA, logpi)
    push = viterbi.fixed_lag_push if use_numba else viterbi.fixed_lag_push_ref
    flush = viterbi.fixed_lag_flush if use_numba else viterbi.fixed_lag_flush_ref
    delta, ring = np.zeros(4), np.zeros((lag, 4), np.int8)
    labels, exact = [], []
    cuts = np.sort(rng.integers(0, n + 1, pushes - 1))
    t = 0
    for chunk in np.split(np.arange(n), cuts):
        lab, ex = np.empty(len(chunk), np.uint8), np.empty(len(chunk), bool)
        k = push(np.ascontiguousarray(E[chunk]), logA, logpi, delta, ring, t, lab, ex)
        t += len(chunk)
        labels += lab[:k].tolist()
        exact += ex[:k].tolist()
    tail = np.empty(lag, np.uint8)
    k = flush(delta, ring, t, tail)
    labels += tail[:k].tolist()
    exact += [True] * k
    labels, exact = np.array(labels), np.array(exact)
    assert len(labels) == n
    assert np.array_equal(labels[exact], batch[exact])  # certified ⇒ identical to batch
    assert np.array_equal(labels[-k:], batch[-k:]) if k else True  # the flushed tail is exact


def test_fixed_lag_is_certified_almost_everywhere_on_workloads(model):
    from engine.device.simulator import simulate

    for wl in ("hft-lob", "af2", "kitti"):
        b, _ = simulate(wl, 30, seed=2)
        live = LiveDecoder(model, use_numba=True)
        finals = live.push(b.segments) + live.flush()
        exact = np.concatenate([f.exact for f in finals])
        assert len(exact) == len(b.segments)
        assert exact.mean() > 0.99, wl


def test_raw_baseline_is_argmax_and_ablation_orders_globally(model):
    from engine.device.simulator import simulate

    b, _ = simulate("kitti", 10, seed=1)
    P, _ = pressures(b.segments, model)
    E = emission.emissions_affine(P, model.W, model.c)
    raw = decode(b.segments, model, Variant.RAW)
    assert np.array_equal(raw.labels, E.argmax(axis=1))
    assert not raw.degenerate.any()
    abl1 = decode(b.segments, model, Variant.NO_TSTREAM)
    assert len(abl1.labels) == len(b.segments)


@pytest.mark.parametrize("wl", ["hft-lob", "af2", "kitti"])
def test_full_pipeline_beats_chance_by_far(model, wl):
    from engine.device.simulator import simulate
    from engine.eesm import metrics

    b, _ = simulate(wl, 40, seed=5)
    conf = metrics.confusion(b.truth, decode(b.segments, model).labels)
    assert metrics.macro_f1(conf) > 0.9


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 6), st.booleans(), st.integers(1, 200))
def test_every_viterbi_path_matches_reference(seed, S, sticky, n):
    """The unrolled 4-state step, the O(S) sticky step and the general step all equal numpy."""
    rng = np.random.default_rng(seed)
    E = rng.normal(0, 2, (n, S))
    E[rng.random((n, S)) < 0.1] = 0.0  # exact ties in the emissions
    if sticky:
        logA = viterbi.sticky_log_transitions(S, float(rng.uniform(0.3, 0.99)))
    else:
        A = rng.random((S, S)) + 0.05
        logA = np.log(A / A.sum(axis=1, keepdims=True))
    logpi = np.log(np.full(S, 1.0 / S))
    assert viterbi._sticky(logA) == (sticky and logA[0, 0] > logA[1, 0])
    fast = viterbi.viterbi_groups(E, np.arange(n), np.array([0, n]), logA, logpi)
    assert np.array_equal(fast, viterbi.viterbi_ref(E, logA, logpi))


@settings(max_examples=30, deadline=None)
@given(segment_tables())
def test_general_fused_kernel_matches_layered_for_a_non_sticky_chain(model, seg):
    """p_stay below 1/S is not sticky: decode_fused takes the general kernel."""
    from engine.eesm import fused
    from engine.eesm.pipeline import EesmModel

    loose = EesmModel.build(params=model.params.with_overrides(p_stay=0.2))
    assert not fused.fast_path_applies(loose.logA)
    a, b = decode(seg, loose), decode_fused(seg, loose)
    assert np.array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.kappa, b.kappa)


def test_fused_handles_stream_ids_far_apart(model):
    """Stream ids spanning ≥ 2**20 are renumbered before the fast kernel; labels unchanged."""
    from engine.device.simulator import simulate

    b, _ = simulate("af2", 5, seed=3)
    seg = b.segments
    cols = seg.columns()
    cols["stream"] = np.where(seg.stream == 7, 2**30, seg.stream).astype(np.int32)
    far = Segments(**cols)
    a, f = decode(far, model), decode_fused(far, model)
    assert np.array_equal(a.labels, f.labels) and np.array_equal(
        decode(seg, model).labels, a.labels
    )


def test_kappa_does_not_drift_on_a_long_stream(model):
    """Block sums are summed afresh for every window: after 2·10⁵ rows of large offsets the last
    window's κ equals the κ of those rows alone (a running add/subtract sum would drift)."""
    rng = np.random.default_rng(3)
    n = 200_000
    P = rng.random((n, 3)) * 0.01 + np.array([0.5, 0.9, 0.2])
    P[: n // 2] += 1e6 * rng.random((n // 2, 3))  # huge early values, gone from later windows
    kp = model.params.kappa
    k = kappa.kappa_groups(P, np.arange(n), np.array([0, n]), kp.window, kp.stride, 32, kp.ridge)
    tail = P[-kp.window :]
    alone = kappa.kappa_groups(
        tail, np.arange(kp.window), np.array([0, kp.window]), kp.window, kp.stride, 32, kp.ridge
    )
    assert np.isclose(k[-1], alone[-1], rtol=1e-6)


def test_live_flush_ends_the_streams(model):
    """A second flush releases nothing; a push after a flush starts the streams afresh, with as
    many labels as rows (before, a second flush re-released L labels without their rows)."""
    from engine.eesm.live import LiveDecoder

    rng = np.random.default_rng(0)
    n = 200
    start = np.sort(rng.integers(0, 10**6, n)).astype(np.int64)
    seg = Segments.from_columns(
        start_ns=start,
        end_ns=start + 100,
        stream=rng.integers(0, 2, n),
        klass=rng.integers(0, 9, n),
        flops=rng.random(n) * 1e6,
        dram_bytes=rng.random(n) * 1e5,
        issue_active=rng.random(n),
        stall_frac=rng.random(n),
        occupancy=rng.random(n),
    )
    d = LiveDecoder(model)
    released = d.push(seg, truth=np.zeros(n, np.uint8)) + d.flush()
    assert sum(len(f.labels) for f in released) == n
    assert d.flush() == []
    again = d.push(seg, truth=np.zeros(n, np.uint8)) + d.flush()
    assert all(len(f.labels) == len(f.start_ns) == len(f.truth) for f in again)
    assert sum(len(f.labels) for f in again) == n


def test_live_rows_use_the_analysis_vocabulary(model):
    """The dashboard's rows say what `analyze` says: copies COPY, collectives COMM, kernels their
    decoded regime (the batch decode's, where the fixed lag certified it)."""
    from engine.device.simulator import simulate
    from engine.regimes import Label
    from engine.trace.segments import Kind, Klass

    b, _ = simulate("kitti", 10, seed=4)
    seg = b.segments
    cols = seg.columns()
    # make one kernel a collective (the simulated workloads have none)
    k0 = int(np.flatnonzero(seg.kind == Kind.KERNEL)[0])
    cols["klass"] = cols["klass"].copy()
    cols["klass"][cols["name"] == seg.name[k0]] = Klass.COMM
    seg = Segments(**cols)
    finals = LiveDecoder(model, use_numba=True).push(seg)
    batch = decode(seg, model)
    key = {
        (int(s), int(t)): i for i, (s, t) in enumerate(zip(seg.stream, seg.start_ns, strict=True))
    }
    seen = set()
    for f in finals:
        for j in range(len(f.labels)):
            i = key[(f.stream, int(f.start_ns[j]))]
            kind, klass, lab = seg.kind[i], seg.klass[i], f.labels[j]
            if kind in (Kind.MEMCPY, Kind.MEMSET):
                assert lab == Label.COPY
            elif klass == Klass.COMM:
                assert lab == Label.COMM
            elif f.exact[j]:
                assert lab == batch.labels[i]
            seen.add(Label(int(lab)))
    assert {Label.COPY, Label.COMM} <= seen and len(seen) > 3
