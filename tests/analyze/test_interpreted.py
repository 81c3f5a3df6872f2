"""A first run analyses a small trace with interpreted kernels (engine.jit.interpreted: each
kernel's Python, or a faster twin of it) while numba compiles them for the next run. It must
answer what the compiled kernels answer, to the bit."""

from __future__ import annotations

import sys

import pytest

from engine import jit
from engine.analyze.compute import analyze_trace
from engine.device.simulator import simulate
from engine.trace.kineto.kineto import read_kineto
from engine.trace.trace import Trace
from tests.paths import TRACES


def _kernels_named() -> list[tuple[str, str]]:
    """(module, attribute) of every kernel a loaded engine / gitm_tui module names."""
    out = []
    for name, mod in list(sys.modules.items()):
        if mod is None or name.split(".", 1)[0] not in ("engine", "gitm_tui"):
            continue
        for attr, value in list(vars(mod).items()):
            if id(value) in jit._KERNELS and jit._KERNELS[id(value)] is value:
                out.append((name, attr))
    return out


def test_interpreted_swaps_every_kernel_name_and_restores_them():
    import engine.eesm.viterbi
    import engine.schedule.dag  # noqa: F401 - loaded, so its names are swapped

    before = _kernels_named()
    assert ("engine.eesm.viterbi", "viterbi_groups") in before
    with jit.interpreted():
        assert _kernels_named() == []  # no compiled kernel is reachable by name
        from engine.schedule import dag

        assert dag._replay is dag._replay_py  # a twin where one is registered
    assert _kernels_named() == before


@pytest.mark.parametrize(
    "name", ["a100_training_3streams", "a100_cupti_counters", "a100_event_sync_multistream"]
)
def test_an_interpreted_analysis_is_the_compiled_one(name):
    trace = read_kineto(TRACES / "kineto" / f"{name}.json.gz")
    want = analyze_trace(trace).analysis.model_dump_json()
    with jit.interpreted():
        got = analyze_trace(trace).analysis.model_dump_json()
    assert got == want


def test_an_interpreted_analysis_of_counters_is_the_compiled_one():
    """The simulator's rows carry float32 counters (issue, stall, occupancy): numba widens
    them before arithmetic, numpy 2 would not — the twin of ``observe`` does (found: the
    stall pressure differed in its last digits)."""
    batch, names = simulate("hft-lob", 3)
    trace = Trace(segments=batch.segments, names=names, host=batch.host, source="sim")
    want = analyze_trace(trace).analysis.model_dump_json()
    with jit.interpreted():
        got = analyze_trace(trace).analysis.model_dump_json()
    assert got == want
