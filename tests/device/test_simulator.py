"""The simulated GPU: determinism and each mechanism the issue names, on small specs built here."""

from __future__ import annotations

import numpy as np
import pytest

from engine.device.kernel_model import blocks_per_sm
from engine.device.simulator import SimulatedGPU, simulate
from engine.device.thermal import ThermalState
from engine.manifest import Noise, WorkloadSpec, load_workload
from engine.regimes import Regime
from engine.telemetry.sample import ClockEventReason
from engine.trace.segments import Kind, Provenance


@pytest.fixture
def quiet_hw(hw):
    return hw.model_copy(update={"noise": Noise(duration_sigma=0, launch_sigma=0, counter_sigma=0)})


def spec(ops, streams=(1, 2), framework_ns=0.0):
    return WorkloadSpec.model_validate(
        {
            "name": "t",
            "title": "t",
            "description": "t",
            "regime_mix": "t",
            "streams": list(streams),
            "memory_used_bytes": 1 << 30,
            "framework_ns": framework_ns,
            "iteration": ops,
        }
    )


def k(name, stream=1, **kw):
    base = {
        "op": "kernel",
        "name": name,
        "klass": "ELEMENTWISE",
        "stream": stream,
        "flops": 0,
        "bytes": 0,
        "grid": 1024,
        "block": 256,
    }
    return {**base, **kw}


def durations(batch, gpu, name):
    idx = [i for i, n in enumerate(batch.segments.name) if gpu.names[int(n)] == name]
    return batch.segments.duration_ns[idx]


def test_same_seed_same_trace_other_seed_differs():
    a, _ = simulate("kitti", 5, seed=3)
    b, _ = simulate("kitti", 5, seed=3)
    c, _ = simulate("kitti", 5, seed=4)
    assert np.array_equal(a.segments.start_ns, b.segments.start_ns)
    assert np.array_equal(a.truth, b.truth)
    assert not np.array_equal(a.segments.end_ns, c.segments.end_ns)


def test_wave_quantization(quiet_hw):
    cap = blocks_per_sm(quiet_hw, 256, 64, 0) * quiet_hw.sm_count
    per_block = 2e7  # FLOPs per block: total work scales with the grid
    # same name: the simulator draws a kernel's achieved efficiency once per name
    ops = [
        k("gemm", klass="GEMM", grid=cap, flops=per_block * cap, regs=64),
        k("gemm", klass="GEMM", grid=cap + 1, flops=per_block * (cap + 1), regs=64),
        {"op": "sync", "stream": 1},
    ]
    gpu = SimulatedGPU(quiet_hw, spec(ops), seed=0)
    b = gpu.run(1)
    one, two = durations(b, gpu, "gemm")
    # one more block costs a whole extra wave: ~2x the time for 1/cap more work
    assert 1.8 < two / one < 2.05


def test_concurrent_memory_kernels_share_bandwidth(quiet_hw):
    mem = {"klass": "ELEMENTWISE", "bytes": 2e9, "grid": 65536}
    alone = SimulatedGPU(quiet_hw, spec([k("m1", 1, **mem), {"op": "sync"}]), seed=0)
    t_alone = durations(alone.run(1), alone, "m1")[0]
    both = SimulatedGPU(
        quiet_hw, spec([k("m1", 1, **mem), k("m2", 2, **mem), {"op": "sync"}]), seed=0
    )
    b = both.run(1)
    t1, t2 = durations(b, both, "m1")[0], durations(b, both, "m2")[0]
    assert t1 > 1.8 * t_alone and t2 > 1.8 * t_alone
    assert (b.truth == Regime.MEMORY).all()


def test_tiny_kernels_are_launch_bound(quiet_hw):
    ops = [{"op": "loop", "times": 50, "body": [k("tiny", bytes=1e4, grid=64)]}, {"op": "sync"}]
    gpu = SimulatedGPU(quiet_hw, spec(ops, framework_ns=5000), seed=0)
    b = gpu.run(1)
    s = b.segments
    gaps = s.start_ns[1:] - s.end_ns[:-1]
    per_launch = 5000 + quiet_hw.launch_api_ns
    assert np.median(gaps) >= per_launch - s.duration_ns.max()
    assert (b.truth == Regime.IDLE).all()
    assert b.telemetry[0].gpu_util < 40


def test_pageable_copy_blocks_host_pinned_does_not(quiet_hw):
    def run(pinned):
        ops = [
            {"op": "copy", "stream": 2, "bytes": 5e7, "pinned": pinned},
            k("after", 1, bytes=1e6),
            {"op": "sync"},
        ]
        gpu = SimulatedGPU(quiet_hw, spec(ops), seed=0)
        b = gpu.run(1)
        copy = b.segments.take(b.segments.kind == Kind.MEMCPY)
        kern = b.segments.take(b.segments.kind == Kind.KERNEL)
        return copy, kern

    copy, kern = run(pinned=False)
    assert kern.start_ns[0] >= copy.end_ns[0]  # host waited for the pageable copy
    pcopy, pkern = run(pinned=True)
    assert pkern.start_ns[0] < pcopy.end_ns[0]  # overlapped
    assert pcopy.duration_ns[0] < copy.duration_ns[0]  # pinned is faster


def test_event_wait_orders_streams(quiet_hw):
    ops = [
        k("producer", 1, bytes=1e9),
        {"op": "record", "stream": 1, "event": "e"},
        {"op": "wait", "stream": 2, "event": "e"},
        k("consumer", 2, bytes=1e6),
        {"op": "sync"},
    ]
    gpu = SimulatedGPU(quiet_hw, spec(ops), seed=0)
    s = gpu.run(1).segments
    p = s.take([gpu.names[int(n)] == "producer" for n in s.name])
    c = s.take([gpu.names[int(n)] == "consumer" for n in s.name])
    assert c.start_ns[0] >= p.end_ns[0]


def test_sustained_load_throttles_then_recovers(hw):
    th = ThermalState.cold(hw)
    for _ in range(300):  # 300 s at full load
        th.step(1.0, busy=1.0, compute=1.0, memory=1.0)
    assert th.temperature_c > hw.thermal.slowdown_c - 1
    assert th.sm_clock_mhz < hw.sm_clock_max_mhz
    assert th.reasons & (ClockEventReason.HW_THERMAL_SLOWDOWN | ClockEventReason.SW_POWER_CAP)
    for _ in range(300):
        th.step(1.0, busy=0.0, compute=0.0, memory=0.0)
    assert th.sm_clock_mhz == hw.sm_clock_max_mhz
    assert th.reasons & ClockEventReason.GPU_IDLE


def test_throttled_clock_slows_compute_kernels(quiet_hw):
    ops = [
        k("gemm", klass="GEMM", flops=5e11, bytes=1e6, grid=1056, block=128, regs=64),
        {"op": "sync"},
    ]
    gpu = SimulatedGPU(quiet_hw, spec(ops), seed=0)
    fast = durations(gpu.run(1), gpu, "gemm")[0]
    gpu.thermal.sm_clock_mhz = quiet_hw.sm_clock_max_mhz // 2
    slow = durations(gpu.run(1), gpu, "gemm")[0]
    assert 1.8 < slow / fast < 2.1


def test_counters_and_provenance():
    b, _ = simulate("af2", 3, seed=1)
    s = b.segments
    kern = s.kind == Kind.KERNEL
    assert (s.provenance[kern] & Provenance.FLOPS).all()
    assert np.all((s.issue_active >= 0) & (s.issue_active <= 1))
    assert np.all((s.stall_frac >= 0) & (s.stall_frac <= 1))
    assert len(b.truth) == len(s) and len(b.telemetry) == 1
    t = b.telemetry[0]
    assert t.source == "simulated" and 0 <= t.gpu_util <= 100 and t.power_w > 0


def test_workloads_exercise_different_regime_mixes():
    mixes, by_time = {}, {}
    for name in ("hft-lob", "af2", "kitti"):
        b, _ = simulate(name, 20, seed=1)
        d = b.segments.duration_ns
        mixes[name] = np.bincount(b.truth, minlength=4) / len(b.truth)
        by_time[name] = np.bincount(b.truth, weights=d, minlength=4) / d.sum()
    hft, af2, kitti = mixes["hft-lob"], by_time["af2"], mixes["kitti"]
    assert hft[Regime.STALL] + hft[Regime.IDLE] > 0.75  # launch/latency-bound
    assert af2[Regime.COMPUTE] + af2[Regime.MEMORY] > 0.7  # throughput-bound (GPU time)
    assert mixes["af2"][Regime.STALL] > 0.4  # ... but most launches are tiny Adam kernels
    assert (kitti > 0.1).all()  # every regime present
    assert load_workload("kitti").regime_mix
