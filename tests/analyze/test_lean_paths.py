"""The analysis's memory-lean paths give what the plain computations they replaced gave: the
host-row lookup, the interval union, the rows of each name, the grouped invariant violations,
the roofline in blocks and the default event column (issue 17, memory)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.analyze.breakdown.intervals import interval_union as _union
from engine.analyze.compute import _rows_by_name
from engine.device.simulator import simulate
from engine.optimizer.monitor import _group
from engine.planner import graph
from engine.planner.catalogue import by_id
from engine.trace.trace import HostEvents


def _host(corr: np.ndarray) -> HostEvents:
    n = len(corr)
    z = np.zeros(n, np.int64)
    return HostEvents(corr.astype(np.int64), np.zeros(n, np.int32), z, z.copy())


@pytest.mark.parametrize("ordered", [True, False])
def test_rows_of_is_the_first_row_of_each_id(ordered):
    rng = np.random.default_rng(1 if ordered else 2)
    for trial in range(200):
        n = int(rng.integers(1, 40))
        corr = rng.integers(-3, 25, n)  # repeats, negatives
        if ordered:
            corr = np.sort(corr)
        q = rng.integers(-5, 30, int(rng.integers(0, 30)))
        first: dict[int, int] = {}
        for i, c in enumerate(corr.tolist()):
            first.setdefault(c, i)
        want = [first.get(c, -1) if c >= 0 else -1 for c in q.tolist()]
        got = _host(corr).rows_of(q)
        assert got.dtype == np.int64 and got.tolist() == want, (trial, corr, q)


def _intervals(rng: np.random.Generator, least: int, most: int) -> tuple[np.ndarray, np.ndarray]:
    """Between ``least`` and ``most`` - 1 random intervals in [0, 115): starts and ends."""
    n = int(rng.integers(least, most))
    s = rng.integers(0, 100, n)
    return s, s + rng.integers(0, 15, n)


def test_union_merges_touching_and_nested_intervals():
    rng = np.random.default_rng(3)
    for _ in range(300):
        s, e = _intervals(rng, 1, 30)
        covered = np.zeros(130, bool)  # unit cells [t, t+1) covered by some [s, e)
        for a, b in zip(s.tolist(), e.tolist(), strict=True):
            covered[a:b] = True
        us, ue = _union(s.copy(), e.copy())
        assert (us[1:] > ue[:-1]).all()  # disjoint, sorted, not touching
        assert (ue >= us).all()
        mine = np.zeros(130, bool)
        for a, b in zip(us.tolist(), ue.tolist(), strict=True):
            mine[a:b] = True
        assert (mine == covered).all()
        # every start is some interval's start, every end some interval's end
        assert set(us.tolist()) <= set(s.tolist()) and set(ue.tolist()) <= set(e.tolist())


def test_rows_by_name_in_first_appearance_order():
    rng = np.random.default_rng(4)
    for _ in range(100):
        name = rng.integers(0, 12, int(rng.integers(0, 50))).astype(np.int32)
        want: dict[int, list[int]] = {}
        for i, nm in enumerate(name.tolist()):
            want.setdefault(nm, []).append(i)
        got = [(nm, idx.tolist()) for nm, idx in _rows_by_name(name)]
        assert got == list(want.items())


def _group_plain(codes, names, rows, mask, observed, predicted):
    """The grouping as np.unique did it (the code this replaced), for comparison."""
    sel = np.flatnonzero(mask)
    out = []
    for code in np.unique(codes[sel]).tolist():
        mine = sel[codes[sel] == code]
        o, p = float(observed[mine].mean()), float(predicted[mine].mean())
        out.append((names[code], rows[mine[:8]].tolist(), len(mine), o, p))
    return sorted(out, key=lambda v: (-abs(v[3] - v[4]) * v[2], v[0]))


@pytest.mark.parametrize("many_names", [False, True], ids=["16-bit codes", "wider codes"])
def test_grouped_violations_match_the_plain_grouping(many_names):
    rng = np.random.default_rng(5)
    for _ in range(100):
        n = int(rng.integers(1, 60))
        # (over 65,536 names: the codes are not sorted as 16-bit ones)
        few = int(rng.integers(1, 9))
        names = [f"k{i}" for i in range(few + (70_000 if many_names else 0))]
        names = names[-few:] + names[:-few] if many_names else names  # codes 0..few-1 named
        codes = rng.integers(0, len(names), n).astype(np.intp)
        rows = np.sort(rng.choice(10 * n, n, replace=False))
        mask = rng.random(n) < 0.6
        obs, pred = rng.random(n) * 100, rng.random(n) * 100
        got = _group(codes, names, rows, None, mask, obs, pred, "ns", "{n}")
        want = _group_plain(codes, names, rows, mask, obs, pred)
        assert len(got) == len(want)
        for v, (nm, r, cnt, o, p) in zip(got, want, strict=True):
            assert (v.name, v.rows, v.count) == (nm, r, cnt)
            assert v.observed == pytest.approx(o, rel=1e-12)
            assert v.predicted == pytest.approx(p, rel=1e-12)


def test_roofline_in_blocks_is_the_roofline(monkeypatch):
    b, _ = simulate("af2", 4, seed=2)
    seg = b.segments
    hw = by_id("h100-sxm")
    whole = graph.trace_roofline(seg, hw)
    monkeypatch.setattr(graph, "_BLOCK", 5)
    blocks = graph.trace_roofline(seg, hw)
    assert np.isfinite(whole[1]).any()
    for a, c in zip(whole, blocks, strict=True):
        np.testing.assert_array_equal(a, c)


def test_default_event_column_costs_nothing_and_fills_on_request():
    h = _host(np.arange(1000))
    assert h.event.tolist() == [-1] * 1000 and h.event.strides == (0,)
    with pytest.raises(ValueError):
        h.event[3] = 7  # read-only: a filler must ask for it
    h.events_to_fill()[3] = 7
    assert h.event[3] == 7 and h.event.sum() == 7 - 999
    sub = h.take(np.array([3, 4]))
    assert sub.event.tolist() == [7, -1]


def test_union_of_some_rows_is_the_union_of_their_copy():
    rng = np.random.default_rng(6)
    for _ in range(100):
        s, e = _intervals(rng, 0, 40)
        rows = np.flatnonzero(rng.random(len(s)) < 0.5)
        a = _union(s, e, rows)
        b = _union(s[rows], e[rows])
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_import_tuning_is_set_back_when_the_last_import_ends(monkeypatch):
    """The import's malloc thresholds (chunk reuse) hold only while an import runs: left in
    place, the analysis's freed arrays stayed resident (~100 MiB on a 10 M-event trace)."""
    from engine.trace import import_memory as im

    calls: list[tuple[str, int, int]] = []

    class FakeLibc:
        def mallopt(self, what: int, value: int) -> int:
            calls.append(("mallopt", what, value))
            return 1

        def malloc_trim(self, pad: int) -> int:
            calls.append(("trim", pad, 0))
            return 1

    monkeypatch.setattr(im, "_libc", lambda: FakeLibc())
    with im.chunk_buffers_reused(16 << 20):
        assert ("mallopt", im._M_MMAP_THRESHOLD, (16 << 20) + (1 << 20)) in calls
        with im.chunk_buffers_reused(16 << 20):  # a second import at once (another thread)
            pass
        assert ("mallopt", im._M_MMAP_THRESHOLD, im._AFTER) not in calls  # one still runs
    assert calls[-3:] == [
        ("mallopt", im._M_MMAP_THRESHOLD, im._AFTER),
        ("mallopt", im._M_TRIM_THRESHOLD, im._AFTER),
        ("trim", 0, 0),
    ]
    assert im._importing == 0


def _plain_fusion(obs):
    """ElementwiseFusion.transform as it was: one run at a time (np.sum, np.nansum per run)."""
    from engine.levers.base import kernel_floor, launch_runs, merge_rows, same_name_run
    from engine.levers.kernels import FUSABLE
    from engine.levers.priors import SIDE_INPUT
    from engine.trace.segments import Kind

    dag, fl = obs.dag.copy(), kernel_floor(obs)
    ok = np.isin(dag.d_klass, FUSABLE) & (dag.d_kind == Kind.KERNEL)
    runs = [run for run in launch_runs(dag, ok) if not same_name_run(dag, run)]
    host_of, side = dag.host_of(), obs.prior(SIDE_INPUT)
    for run in runs:
        b = np.nan_to_num(dag.d_bytes[run])
        work = float(np.sum(np.maximum(0.0, dag.d_dur[run] - fl)))
        total = float(b.sum())
        fused = float(b.max() + side * (total - b.max())) if total else 0.0
        ratio = fused / total if total > 0 else (1.0 + side * (len(run) - 1)) / len(run)
        merge_rows(dag, run, fl + work * ratio, float(np.nansum(dag.d_flops[run])), fused,
                   host_of)  # fmt: skip
    return dag, sum(len(r) for r in runs)


@pytest.mark.parametrize("workload", ["hft-lob", "af2", "kitti"])
def test_fusion_of_all_runs_at_once_is_the_run_by_run_fusion(workload):
    """ElementwiseFusion sums every run's bytes, time and FLOPs at once (np.add.reduceat): the
    same graph as fusing run by run, to the last bits of rounding — with bytes and FLOPs
    unmeasured (NaN), zero or negative on a fifth of the rows."""
    from engine.levers.kernels import ElementwiseFusion
    from engine.levers.model import Observation
    from engine.levers.priors import SIDE_INPUT
    from engine.schedule.dag import build_dag, schedule
    from engine.trace.trace import Trace

    batch, names = simulate(workload, 2)
    trace = Trace(segments=batch.segments, names=names, host=batch.host, source=workload)
    hw = by_id("h100-sxm")
    dag = build_dag(trace, hw, iterations=1, regimes=np.full(len(trace.segments), 255, np.uint8))
    base = schedule(dag)
    rng = np.random.default_rng(3)
    for trial in range(4):
        d = dag.copy()
        if trial:
            for col in (d.d_bytes, d.d_flops):
                pick = rng.random(len(col)) < 0.2
                col[pick] = rng.choice([np.nan, 0.0, -5.0, 1e12], int(pick.sum()))
        for side in (0.0, 0.25, 1.0):
            obs = Observation(d, base, [], hw, 1, priors={SIDE_INPUT.name: side})
            want, rows = _plain_fusion(obs)
            got = ElementwiseFusion().transform(obs)
            assert got.rows == rows > 0
            for col in ("d_dur", "d_flops", "d_bytes"):
                np.testing.assert_allclose(getattr(got.dag, col), getattr(want, col),
                                           rtol=1e-12, atol=0, equal_nan=True)  # fmt: skip
            for col in ("d_live", "api", "dur_ns", "gap_ns"):
                assert np.array_equal(getattr(got.dag, col), getattr(want, col)), col
            assert got.dag.h_dev == want.h_dev


def _fresh_launch_lists(dag) -> tuple[list[int], list[int]]:
    """launch_lists computed from h_dev as it is now, with no cache."""
    off = [0]
    for ds in dag.h_dev:
        off.append(off[-1] + len(ds))
    return off, [d for ds in dag.h_dev for d in ds]


@pytest.mark.parametrize("workload", ["hft-lob", "af2", "kitti"])
def test_cached_launch_lists_follow_every_lever_edit(workload):
    """ReplayDag keeps launch_lists' arrays until h_dev changes: after every lever's transform
    (copies share the cache; removals and insertions clear it), they are the lists built from
    h_dev afresh, and they cannot be written to."""
    from engine.levers.library import LEVERS
    from engine.levers.model import Observation
    from engine.schedule.dag import build_dag, schedule
    from engine.trace.trace import Trace

    batch, names = simulate(workload, 2)
    trace = Trace(segments=batch.segments, names=names, host=batch.host, source=workload)
    hw = by_id("h100-sxm")
    dag = build_dag(trace, hw, iterations=1, regimes=np.full(len(trace.segments), 255, np.uint8))
    dag.launch_lists()  # cached before any copy
    obs = Observation(dag, schedule(dag), [], hw, 1)
    edited = 0
    for lv in LEVERS:
        edit = lv.transform(obs)
        off, flat = edit.dag.launch_lists()
        want_off, want_flat = _fresh_launch_lists(edit.dag)
        assert off.tolist() == want_off and flat.tolist() == want_flat, lv.id
        assert not off.flags.writeable and not flat.flags.writeable
        edited += edit.dag.h_dev != dag.h_dev
    assert edited  # some lever removed or inserted launches
    assert [list(x) for x in _fresh_launch_lists(dag)] == [a.tolist() for a in dag.launch_lists()]


def test_copy_groups_parsed_once_per_name_are_the_row_by_row_groups():
    """copy_stats parses each distinct copy name once: the groups, their order (largest first,
    ties in the order of their first row), counts, times and bytes are the row-by-row ones."""
    from collections import defaultdict

    from engine.analyze.breakdown.copies import copy_stats, parse_copy
    from engine.trace.segments import Kind, NameTable, Segments

    names = NameTable(["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)",
                       "Memset (Device)", "Memcpy DtoD (Device -> Device)", "gemm", "odd copy"])  # fmt: skip
    rng = np.random.default_rng(5)
    for _ in range(60):
        n = int(rng.integers(0, 40))
        start = rng.integers(0, 1000, n)
        rows = Segments.from_columns(
            start_ns=start, end_ns=start + rng.integers(0, 50, n),
            kind=rng.choice([Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET], n),
            name=rng.integers(0, len(names), n),
            dram_bytes=rng.choice([np.nan, 0.0, 4096.0, 1e6], n),
        )  # fmt: skip
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i in range(n):
            if rows.kind[i] == Kind.MEMSET:
                groups[("memset", "")].append(i)
            elif rows.kind[i] == Kind.MEMCPY:
                groups[parse_copy(names[int(rows.name[i])])].append(i)
        want = [
            (key, len(ix), int(rows.duration_ns[ix].sum()), int(np.nansum(rows.dram_bytes[ix])))
            for key, ix in sorted(groups.items(), key=lambda kv: -len(kv[1]))
        ]
        got = [((c.direction, c.memory), c.count, c.time_ns, c.bytes)
               for c in copy_stats(rows, names, by_id("h100-sxm"))]  # fmt: skip
        assert got == want


def test_overlap_with_a_union_at_once_is_the_interval_walk():
    """_communication's overlap of each collective with the union of compute kernels, from the
    union's cumulative length (_covered), is the interval-by-interval walk it replaced."""
    from engine.analyze.compute import _covered, _device_streams

    rng = np.random.default_rng(6)
    for trial in range(1000):
        s, e = _intervals(rng, 0, 12)
        shift = -60 if trial % 2 else 0  # trace times may be negative
        ks, ke = _union(s + shift, e + shift)
        a = rng.integers(0, 130, int(rng.integers(1, 8))) + shift
        b = a + rng.integers(0, 30, len(a))
        want = 0
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            i = int(np.searchsorted(ke, x, side="right"))
            while i < len(ks) and ks[i] < y:
                want += min(y, int(ke[i])) - max(x, int(ks[i]))
                i += 1
        assert int((_covered(ks, ke, b) - _covered(ks, ke, a)).sum()) == want

    class Rows:  # the (device, stream) pairs, signed and at the int32 ends
        device = rng.integers(-2, 4, 300).astype(np.int16)
        stream = rng.choice([-(2**31), -1, 0, 7, 2**31 - 1], 300).astype(np.int32)

    pairs = sorted({(int(d), int(s)) for d, s in zip(Rows.device, Rows.stream, strict=True)})
    assert _device_streams(Rows) == pairs


def _fill_one(dag, d: int, hw) -> float:
    """The row-by-row wave fill that fills() replaced (integer arithmetic, as written)."""
    if dag.d_grid[d] <= 0:
        return 1.0
    block = max(1, int(dag.d_block[d]))
    per_sm = min(
        hw.max_blocks_per_sm,
        hw.max_threads_per_sm // block,
        hw.regs_per_sm // max(1, int(dag.d_regs[d]) * block) if dag.d_regs[d] > 0 else 1 << 30,
        hw.smem_per_sm // int(dag.d_smem[d]) if dag.d_smem[d] > 0 else 1 << 30,
    )
    return float(dag.d_grid[d]) / (max(1, per_sm) * hw.sm_count)


def test_wave_fill_of_all_rows_at_once_is_the_row_by_row_fill():
    """fills() (the batch-size, split-K and low-occupancy paths) gives, bit for bit, the fill
    of each row computed alone — unknown, zero and negative geometry included."""
    from types import SimpleNamespace

    from engine.levers.base import fills

    rng = np.random.default_rng(7)
    for hw_id in ("h100-sxm", "a100-40gb"):
        hw = by_id(hw_id)
        n = 400
        dag = SimpleNamespace(
            d_grid=rng.choice([-1, 0, 1, 7, 108, 5000, 2**31 - 1], n).astype(np.int64),
            d_block=rng.choice([-4, 0, 1, 32, 256, 1024], n).astype(np.int64),
            d_regs=rng.choice([-1, 0, 16, 64, 255], n).astype(np.int64),
            d_smem=rng.choice([-8, 0, 1024, 49152, 232448], n).astype(np.int64),
        )
        rows = rng.permutation(n)[:300]
        want = [_fill_one(dag, int(d), hw) for d in rows]
        assert fills(dag, rows, hw).tolist() == want


def test_launched_by_is_the_dict_of_host_correlations_it_replaced():
    """build_dag's launch lists in numpy (schedule.dag._launched_by) equal what the dict of
    every host row's correlation gave: device rows in start order (stable), each with the last
    host row carrying its correlation (> 0), unmatched rows left out."""
    from engine.schedule.dag import _launched_by

    rng = np.random.default_rng(5)
    for trial in range(300):
        h_corr = rng.integers(-2, 30, int(rng.integers(0, 40)))  # repeats, zero, negatives
        n = int(rng.integers(0, 40))
        d_corr = rng.integers(-2, 35, n)
        d_start = rng.integers(0, 10, n)  # ties: the stable order decides
        pos = {int(c): i for i, c in enumerate(h_corr) if c > 0}
        want_d, want_h = [], []
        for d in np.argsort(d_start, kind="stable").tolist():
            p = pos.get(int(d_corr[d]))
            if p is not None:
                want_d.append(d)
                want_h.append(p)
        assert _launched_by(h_corr, d_corr, d_start) == (want_d, want_h), trial


def test_kernel_time_in_blocks_is_kernel_time(monkeypatch):
    from engine.optimizer import monitor

    rng = np.random.default_rng(11)
    n = 1000
    names = [f"k{i}" for i in range(7)]
    codes = rng.integers(0, 7, n)
    rows = np.arange(n)
    obs = rng.random(n) * 100
    exp = np.where(rng.random(n) < 0.2, np.nan, rng.random(n) * 60)
    ideal = np.where(rng.random(n) < 0.2, np.nan, rng.random(n) * 120)
    whole = monitor.kernel_time(codes, names, rows, obs, exp, ideal, "b")
    monkeypatch.setattr(monitor, "_BLOCK", 7)
    blocks = monitor.kernel_time(codes, names, rows, obs, exp, ideal, "b")
    assert whole.checked == blocks.checked > 0 and whole.violations
    assert [v.__dict__ for v in whole.violations] == [v.__dict__ for v in blocks.violations]


def test_the_kernel_table_and_invariants_are_the_same_with_the_heap_trimmed_often(monkeypatch):
    """The table's loop hands the heap back every _TRIM_ROWS rows: nothing it reads changes."""
    from engine.analyze import compute
    from engine.trace.trace import Trace

    b, names = simulate("af2", 3, seed=4)
    tr = Trace(segments=b.segments, names=names, host=b.host)
    want = compute.analyze_trace(tr, "h100-sxm").analysis.model_dump_json()
    monkeypatch.setattr(compute, "_TRIM_ROWS", 3)
    assert compute.analyze_trace(tr, "h100-sxm").analysis.model_dump_json() == want


def test_a_small_stage_hands_nothing_back(monkeypatch):
    """give_back(rows) trims the heap only after work of SMALL_ROWS rows or more (a trim walks
    every free chunk and its pages fault in again: 20 ms of a 109k-event analyze)."""
    from engine.trace import import_memory as im

    trims: list[int] = []

    class FakeLibc:
        def malloc_trim(self, pad: int) -> int:
            trims.append(pad)
            return 1

    monkeypatch.setattr(im, "_libc", lambda: FakeLibc())
    im.give_back(im.SMALL_ROWS - 1)
    assert trims == []
    im.give_back(im.SMALL_ROWS)
    im.give_back()  # (no size: always)
    assert trims == [0, 0]
