"""The lever library: 16 levers, each with causes, safety, applicability with a reason, and a
mechanistic apply whose effect the simulator produces (not a lookup)."""

from __future__ import annotations

import pytest

from engine.levers.library import LEVERS, by_id
from engine.levers.model import Safety, lever_specs
from engine.manifest import CopyOp, HostOp, KernelOp, SyncOp
from engine.schedule.causes import Cause
from engine.trace.segments import Kind
from engine.workloads.sim import SimState, SimWorkload


def test_library_has_at_least_15_levers_each_documented():
    specs = lever_specs()
    assert len(LEVERS) >= 15 and {lv.id for lv in LEVERS} == set(specs)
    for lv in LEVERS:
        s = lv.spec
        assert s.causes and all(c in Cause.__members__ for c in s.causes)
        assert s.what and s.effect and s.title
    assert by_id("power_policy").spec.safety == Safety.PRIVILEGED
    assert {by_id(i).spec.safety for i in ("tf32_matmul", "bf16_autocast", "batch_size")} == {
        Safety.NUMERICS
    }
    with pytest.raises(KeyError, match="known"):
        by_id("warp_drive")


@pytest.mark.parametrize("workload", ["hft-lob", "af2", "kitti"])
def test_applicability_always_gives_a_reason(workload):
    st = SimWorkload(workload).base
    ok = 0
    for lv in LEVERS:
        a = lv.sites(st)
        assert a.reason
        ok += a.ok
    assert ok >= 4  # every workload leaves several levers on the table


def test_each_workload_has_its_own_lever_mix():
    mixes = {
        w: {lv.id for lv in LEVERS if lv.sites(SimWorkload(w).base).ok}
        for w in ("hft-lob", "af2", "kitti")
    }
    assert "cuda_graphs" in mixes["hft-lob"] and "cuda_graphs" not in mixes["af2"]
    assert "sdpa_flash" in mixes["af2"] and "prefetch_depth" in mixes["kitti"]
    assert mixes["hft-lob"] != mixes["af2"] != mixes["kitti"]


def test_apply_edits_the_program_and_rollback_is_the_saved_state():
    st = SimWorkload("af2").base
    after = by_id("sdpa_flash").apply(st)
    names = [o.name for o in after.program() if isinstance(o, KernelOp)]
    assert any(n.startswith("flash_fwd_kernel") for n in names)
    assert not any(isinstance(o, KernelOp) and o.role == "attention_math" for o in after.program())
    # the state round-trips through JSON (what the journal stores and rollback restores)
    assert SimState.model_validate_json(st.model_dump_json()) == st
    assert SimState.model_validate_json(after.model_dump_json()) == after


def test_mechanistic_effects_come_from_the_simulator():
    """Fusion reduces the kernel count and launches; pinned copies stop blocking the host;
    the measured change is what the re-simulated program does."""
    wl = SimWorkload("hft-lob")
    base = wl.measure(wl.base, seed=3)
    fused = wl.measure(by_id("elementwise_fusion").apply(wl.base), seed=3)
    kern = lambda m: int((m.trace.segments.kind == Kind.KERNEL).sum())  # noqa: E731
    assert kern(fused) < kern(base) and fused.mean_ns < base.mean_ns
    pinned_state = by_id("pinned_memory").apply(wl.base)
    assert all(o.pinned for o in pinned_state.program() if isinstance(o, CopyOp))
    from engine.trace.trace import ApiKind

    assert not (wl.measure(pinned_state, seed=3).trace.host.api == ApiKind.MEMCPY_SYNC).any()


def test_sync_removal_breaks_kitti_correctness_but_not_hft_lob():
    lv = by_id("sync_removal")
    hft, kit = SimWorkload("hft-lob"), SimWorkload("kitti")
    assert hft.correctness(lv.apply(hft.base))[0]
    ok, why = kit.correctness(lv.apply(kit.base))
    assert not ok and "sync" in why
    assert sum(isinstance(o, SyncOp) for o in lv.apply(kit.base).program()) == 1


def test_prefetch_moves_loading_off_the_critical_path():
    wl = SimWorkload("kitti")
    st = by_id("prefetch_depth").apply(wl.base)
    assert st.config.prefetch_depth == 2
    assert any(isinstance(o, HostOp) and o.kind == "data_loading" for o in st.program())
    assert wl.measure(st, seed=1).mean_ns < 0.85 * wl.measure(wl.base, seed=1).mean_ns


def test_power_policy_lifts_the_cap_and_clocks_recover():
    wl = SimWorkload("af2")
    capped = wl.measure(wl.base, seed=1)
    lifted = wl.measure(by_id("power_policy").apply(wl.base), seed=1)
    assert max(s.sm_clock_mhz for s in capped.telemetry) < 1980
    assert min(s.sm_clock_mhz for s in lifted.telemetry) == 1980
    assert lifted.mean_ns < capped.mean_ns
