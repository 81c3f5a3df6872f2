"""The levers of a long trace are replayed on its steady state: a window of consecutive
ProfilerSteps (never the first) or the middle rows, said in a note; a short trace whole."""

from __future__ import annotations

import numpy as np

from engine.analyze.breakdown import steady
from engine.analyze.ranks.synth_ranks import write_ranks
from engine.trace.read import read_trace
from tests.paths import TRACES


def test_a_short_trace_is_replayed_whole():
    t = read_trace(TRACES / "kineto" / "a100_training_3streams.json.gz")
    regimes = np.zeros(len(t.segments), np.uint8)
    sub, reg, note = steady.steady_window(t, regimes)
    assert sub is t and reg is regimes and note is None


def test_a_long_trace_is_replayed_on_middle_steps_not_the_first(tmp_path, monkeypatch):
    (path,) = write_ranks(tmp_path, ranks=1, steps=12, kernels_per_step=100)
    t = read_trace(path)
    monkeypatch.setattr(steady, "REPLAY_ROWS", 400)  # about 3 steps of ~100 kernels
    regimes = np.arange(len(t.segments)) % 4
    sub, reg, note = steady.steady_window(t, regimes.astype(np.uint8))
    assert note is not None and "ProfilerSteps #" in note and "(the first is warm-up)" in note
    steps = t.device_properties["profiler_steps"]
    lo, hi = int(sub.segments.start_ns.min()), int(sub.segments.start_ns.max())
    inside = [i for i, (a, b) in enumerate(steps) if a <= lo <= b or a <= hi <= b]
    assert 0 not in inside and len(inside) >= 2
    assert len(reg) == len(sub.segments) <= len(t.segments)
    # every kept kernel's launch call is kept with it
    assert np.isin(sub.segments.correlation[sub.segments.correlation >= 0],
                   sub.host.correlation).all()  # fmt: skip


def test_the_analysis_says_which_window_it_replayed(tmp_path, monkeypatch):
    from engine.analyze.compute import analyze_trace

    (path,) = write_ranks(tmp_path, ranks=1, steps=8, kernels_per_step=100)
    monkeypatch.setattr(steady, "REPLAY_ROWS", 300)
    a = analyze_trace(read_trace(path)).analysis
    assert any(n.startswith("levers replayed on ProfilerSteps") for n in a.notes)


def test_the_first_launching_call_is_found_block_by_block(monkeypatch):
    """_first_call reads the host rows in blocks (bounded memory): the same answer as one np.isin
    over all of them, wherever the blocks fall."""
    from engine.analyze.breakdown import steady
    from engine.trace.trace import HostEvents

    rng = np.random.default_rng(4)
    n = 1000
    host = HostEvents(
        correlation=rng.permutation(n).astype(np.int64),
        stream=np.zeros(n, np.int32),
        api_start_ns=rng.integers(0, 10**9, n).astype(np.int64),
        api_end_ns=np.zeros(n, np.int64),
    )
    for block in (7, 64, 1 << 18):
        monkeypatch.setattr(steady, "_BLOCK", block)
        for ids in (rng.choice(n, 30, replace=False), np.array([n + 5]), np.zeros(0, np.int64)):
            hit = np.isin(host.correlation, ids)
            want = int(host.api_start_ns[hit].min()) if hit.any() else -1
            assert steady._first_call(host, ids, -1) == want


def test_steps_whose_ids_repeat_are_named_by_their_place_in_time(tmp_path, monkeypatch):
    """A trace joined from several profiles repeats its step ids (ProfilerStep#1009 … #1014,
    then #1009 again): the note counts the window's steps in time instead of printing a
    window "#1010–#1009"."""
    (path,) = write_ranks(tmp_path, ranks=1, steps=12, kernels_per_step=100)
    t = read_trace(path)
    ids = t.device_properties["profiler_step_ids"]
    t.device_properties["profiler_step_ids"] = [1009 + i % 6 for i in range(len(ids))]
    monkeypatch.setattr(steady, "REPLAY_ROWS", 400)
    _, _, note = steady.steady_window(t, np.zeros(len(t.segments), np.uint8))
    assert note is not None and "#" not in note and " in time of " in note
    a, b = (int(x) for x in note.split("ProfilerSteps ")[1].split(" in time")[0].split("–"))
    assert 2 <= a <= b <= len(ids)  # 1-based, never the first (warm-up)
