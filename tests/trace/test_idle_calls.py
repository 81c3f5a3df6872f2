"""engine/trace/idle_calls.py: runs of back-to-back calls that launch nothing, kept as one row —
with the replay's graph exactly what it was, for the whole trace and for any window selected at
the times the merge was told to keep exact."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.analyze.breakdown import steady
from engine.analyze.compute import analyze_trace
from engine.analyze.options import AnalyzeOptions
from engine.analyze.run import read_and_analyse
from engine.planner.catalogue import by_id
from engine.schedule.dag import build_dag, merge_idle_host_rows
from engine.trace import idle_calls, order
from engine.trace.kineto.kineto import read_kineto
from engine.trace.segments import Kind, NameTable, Segments
from engine.trace.trace import ApiKind, HostEvents, Trace
from tests.paths import TRACES

HW = by_id("a100-40gb")
REAL = TRACES / "kineto" / "a100_training_3streams.json.gz"
BASE = 1_661_203_462_598_772_000  # epoch ns, as Kineto's: float64 keeps ~256 ns of them


def _timeline(rng: np.random.Generator) -> Trace:
    """SYNTHETIC host calls on 1-3 threads (overlapping, nested, tied starts), a third of them
    launching a kernel, most of the rest launching nothing; some such calls share a device
    row's correlation (not idle), some are syncs or allocator calls."""
    starts, ends, apis, corrs = [], [], [], []
    d_start, d_end, d_corr, d_stream = [], [], [], []
    corr = 0
    for _thread in range(int(rng.integers(1, 4))):
        t = BASE + int(rng.integers(0, 50))
        for _ in range(int(rng.integers(5, 60))):
            t += int(rng.choice([0, 0, 1, 3, 17, 400]))
            dur = int(rng.choice([0, 1, 2, 5, 40, 900]))
            u = rng.random()
            api = (
                ApiKind.LAUNCH
                if u < 0.3
                else ApiKind.SYNC
                if u < 0.35
                else ApiKind.MALLOC
                if u < 0.4
                else ApiKind.OTHER
            )
            corr += 1
            starts.append(t)
            ends.append(t + dur)
            apis.append(api)
            corrs.append(corr)
            if api == ApiKind.LAUNCH or (api == ApiKind.OTHER and rng.random() < 0.05):
                s = t + int(rng.integers(1, 30))
                d_start.append(s)
                d_end.append(s + int(rng.integers(1, 200)))
                d_corr.append(corr)
                d_stream.append(int(rng.integers(7, 9)))
            if rng.random() < 0.2:  # a nested call (inside this one)
                corr += 1
                starts.append(t + min(dur, 1))
                ends.append(t + min(dur, 1) + int(rng.integers(0, 2)))
                apis.append(ApiKind.OTHER)
                corrs.append(corr)
            t += dur
    if not d_start:  # one kernel, so the graph has a device row
        d_start, d_end, d_corr, d_stream = [BASE], [BASE + 5], [-7], [7]
    perm = rng.permutation(len(starts))  # rows in no particular order, as a file has them
    host = HostEvents(
        correlation=np.array(corrs, np.int64)[perm],
        stream=np.full(len(starts), -1, np.int32),
        api_start_ns=np.array(starts, np.int64)[perm],
        api_end_ns=np.array(ends, np.int64)[perm],
        api=np.array(apis, np.uint8)[perm],
    )
    names = NameTable(["k"])
    n = len(d_start)
    seg = Segments.from_columns(
        start_ns=np.array(d_start, np.int64),
        end_ns=np.array(d_end, np.int64),
        stream=np.array(d_stream, np.int32),
        kind=np.full(n, Kind.KERNEL, np.uint8),
        name=np.zeros(n, np.int32),
        correlation=np.array(d_corr, np.int64),
    )
    return Trace(segments=seg, names=names, host=host)


def _copy(tr: Trace) -> Trace:
    h = tr.host
    host = HostEvents(*(np.array(getattr(h, f)) for f in ("correlation", "stream",
                      "api_start_ns", "api_end_ns", "api", "event")))  # fmt: skip
    return Trace(segments=tr.segments, names=tr.names, host=host)


def _window(tr: Trace, a: int, b: int) -> Trace:
    """The rows steady_window takes: device rows and host calls starting in [a, b)."""
    seg, h = tr.segments, tr.host
    sel = (seg.start_ns >= a) & (seg.start_ns < b)
    hsel = (h.api_start_ns >= a) & (h.api_start_ns < b)
    return Trace(segments=seg.take(sel), names=tr.names, host=h.take(hsel))


def _graph(tr: Trace) -> dict:
    dag = merge_idle_host_rows(build_dag(tr, HW, 1))
    # (_launches: a cache of h_dev, which is compared)
    return {f.name: getattr(dag, f.name) for f in dataclasses.fields(dag) if f.name != "_launches"}


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        elif isinstance(a[k], tuple):  # (a cache of arrays)
            assert len(a[k]) == len(b[k]), k
            for x, y in zip(a[k], b[k], strict=True):
                np.testing.assert_array_equal(x, y, err_msg=k)
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize(
    ("compiled", "merged_order"),
    [(True, False), (True, True), (False, False)],
    ids=["kernel", "kernel-run-merge", "numpy"],
)
def test_the_replay_graph_is_the_same_whole_and_in_every_exact_window(
    monkeypatch, compiled, merged_order
):
    """(kernel-run-merge: the start order by order._stable_order, as for long rows nearly in
    order; else numpy's)"""
    if merged_order:
        monkeypatch.setattr(order, "NEARLY", 0)  # (every key: merged, however many runs)
        monkeypatch.setattr(order, "SHORT", 0)
    rng = np.random.default_rng(1234)
    merged_some = 0
    for _case in range(150):
        full = _timeline(rng)
        starts = np.sort(full.host.api_start_ns)
        at = sorted(rng.choice(starts, int(rng.integers(0, 4))).tolist())
        if rng.random() < 0.5 and at:  # a time between calls, too
            at[0] += int(rng.integers(0, 3))
        merged = _copy(full)
        keep = idle_calls.merge_idle_calls(merged.host, merged.segments.correlation, at, compiled)
        if keep is not None:
            merged_some += 1
            assert len(merged.host) == int(keep.sum()) < len(full.host)
        _assert_same(_graph(full), _graph(merged))
        edges = [int(starts[0]), *at, int(starts[-1]) + 1]
        for a in edges:
            for b in edges:
                if a < b and len(_window(full, a, b).segments):
                    _assert_same(_graph(_window(full, a, b)), _graph(_window(merged, a, b)))
    assert merged_some > 100  # the cases do merge


def test_the_kernel_and_numpy_keep_the_same_rows_and_ends():
    rng = np.random.default_rng(7)
    for _case in range(300):
        tr = _timeline(rng)
        at = rng.choice(tr.host.api_start_ns, int(rng.integers(0, 3))).tolist()
        a, b = _copy(tr), _copy(tr)
        ka = idle_calls.merge_idle_calls(a.host, tr.segments.correlation, at, True)
        kb = idle_calls.merge_idle_calls(b.host, tr.segments.correlation, at, False)
        assert (ka is None) == (kb is None)
        if ka is not None:
            np.testing.assert_array_equal(ka, kb)
        np.testing.assert_array_equal(a.host.api_end_ns, b.host.api_end_ns)


def test_a_call_sharing_a_kernels_correlation_is_not_idle():
    host = HostEvents(
        correlation=np.array([1, 2, 3], np.int64),
        stream=np.full(3, -1, np.int32),
        api_start_ns=np.array([0, 10, 20], np.int64),
        api_end_ns=np.array([5, 15, 25], np.int64),
        api=np.full(3, ApiKind.OTHER, np.uint8),
    )
    np.testing.assert_array_equal(idle_calls.idle_rows(host, np.array([2])), [True, False, True])
    # 1 and 3 are idle but not adjacent (2 launches a kernel between them): nothing merges
    assert idle_calls.merge_idle_calls(host, np.array([2]), ()) is None
    keep = idle_calls.merge_idle_calls(host, np.array([99]), ())
    assert keep is not None and keep.tolist() == [True, False, False]
    assert host.api_end_ns.tolist() == [25] and host.api_start_ns.tolist() == [0]


def test_keep_only_leaves_the_unfilled_event_column_free():
    host = HostEvents(
        correlation=np.arange(4, dtype=np.int64),
        stream=np.zeros(4, np.int32),
        api_start_ns=np.arange(4, dtype=np.int64),
        api_end_ns=np.arange(4, dtype=np.int64) + 1,
    )
    assert not host.event.flags.writeable and host.event.strides == (0,)
    host.keep_only(np.array([True, False, True, True]))
    assert len(host) == 3 and host.event.strides == (0,) and host.event.tolist() == [-1] * 3
    host.events_to_fill()[1] = 9
    host.keep_only(np.array([False, True, True]))
    assert host.event.tolist() == [9, -1] and host.correlation.tolist() == [2, 3]


@pytest.mark.parametrize("replay_rows", [1_000, 3_500, 5_000, steady.REPLAY_ROWS])
def test_a_real_trace_analyses_the_same_with_idle_calls_merged(monkeypatch, replay_rows):
    """A100, PyTorch profiler (6 ProfilerSteps of ~1.6k rows): replayed whole, on steps, and on
    the middle of the trace (one step is bigger than the window): every figure the same."""
    monkeypatch.setattr(steady, "REPLAY_ROWS", replay_rows)
    full = read_kineto(REAL)
    merged = read_kineto(REAL, merge_idle=steady.exact_at)
    assert len(merged.host) < 0.6 * len(full.host)
    a = analyze_trace(full).analysis.model_dump()
    b = analyze_trace(merged).analysis.model_dump()
    assert a == b and len(a["interventions"]) >= 3


def test_counting_as_hta_reads_every_call():
    seen: dict[str, int] = {}
    for mode in ("exact", "hta"):
        read_and_analyse(
            str(REAL),
            AnalyzeOptions(top=5, counting=mode),
            on_trace=lambda t, m=mode: seen.__setitem__(m, len(t.host)),
        )
    assert seen["hta"] == 24_692 and seen["exact"] < 14_000


def test_the_host_stream_column_holds_memory_only_where_a_call_names_a_stream():
    """Kineto's runtime calls mostly name no stream: the column is then one read-only -1 (no
    memory; merging idle calls keeps it so); a trace whose calls name streams, or whose waits
    are linked to their streams, gets a real column with those streams."""
    plain = read_kineto(REAL, merge_idle=steady.exact_at).host
    assert plain.stream.strides == (0,) and not plain.stream.flags.writeable
    assert len(plain.stream) == len(plain) and (plain.stream == -1).all()
    with pytest.raises(ValueError):
        plain.stream[0] = 3  # a writer asks for it first
    plain.streams_to_fill()[0] = 3
    assert plain.stream.flags.writeable and plain.stream[0] == 3 and (plain.stream[1:] == -1).all()
    linked = read_kineto(TRACES / "kineto" / "a100_event_sync_multistream.json.gz").host
    assert linked.stream.flags.writeable
    assert sorted(set(linked.stream.tolist())) == [-1, 20, 24, 28]  # the waits' streams
    named = read_kineto(TRACES / "kineto" / "mi250_rocm62_minitoy.json.gz").host
    assert named.stream.flags.writeable and (named.stream == 0).sum() == 16


def test_keep_only_keeps_an_unnamed_stream_column_free():
    host = HostEvents(
        correlation=np.arange(4, dtype=np.int64),
        stream=np.broadcast_to(np.int32(-1), (4,)),
        api_start_ns=np.arange(4, dtype=np.int64),
        api_end_ns=np.arange(4, dtype=np.int64) + 1,
    )
    host.keep_only(np.array([True, False, True, True]))
    assert host.stream.strides == (0,) and host.stream.tolist() == [-1] * 3
    host.streams_to_fill()[2] = 5
    host.keep_only(np.array([False, True, True]))
    assert host.stream.tolist() == [-1, 5] and host.stream.flags.writeable
    # a read-only column that is not the unfilled -1 is indexed, not replaced
    host.stream = np.array([7, 8], np.int32)
    host.stream.flags.writeable = False
    host.keep_only(np.array([False, True]))
    assert host.stream.tolist() == [8]
