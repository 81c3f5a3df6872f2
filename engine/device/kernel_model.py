"""Roofline cost model of one kernel on the simulated GPU: occupancy, waves, and the limiter terms.

Each kernel's duration alone on the GPU is a fixed device-side overhead plus the largest of three
work terms (a roofline with a latency term):

* ``t_compute`` — FLOPs ÷ (class peak × clock factor × achieved efficiency × wave efficiency);
  wave efficiency = grid ÷ (waves × resident-block capacity), so a grid of 1.1 waves pays for 2.
* ``t_memory``  — DRAM bytes ÷ (HBM bandwidth × achieved efficiency).
* ``t_latency`` — the spec's serial-dependency latency (atomics, recurrences, NMS loops) plus the
  extra time of a grid too small to keep enough bytes in flight to saturate HBM (Little's law).
* ``t_floor``   — block scheduling and teardown on the device: the length of an empty kernel.

Ground truth names the largest term (IDLE when the overhead outweighs all work: a launch-bound
kernel); a compute-limited kernel whose grid fills less than half of one wave is called STALL
(parallelism-starved: most SMs idle while its few warps wait on latency).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.manifest import HardwareSpec, KernelOp
from engine.regimes import Regime
from engine.trace.segments import Klass

#: bytes in flight per SM needed to saturate HBM (Little's law: ~600 ns DRAM latency ×
#: 3.35 TB/s ÷ 132 SMs ≈ 15 KB per SM).
BYTES_IN_FLIGHT_PER_SM = 15 * 1024
#: bytes one thread keeps in flight with plain vectorised loads (one 16-byte load outstanding).
BYTES_PER_THREAD = 16
#: shared-memory staging assumed for tensor-core classes whose spec gives no smem: bulk/TMA
#: loads keep a double-buffered tile in flight per block (a 64×64 bf16 A+B tile pair = 32 KB).
TENSOR_STAGING_BYTES = 32 * 1024
_TENSOR_CLASSES = {Klass.GEMM, Klass.CONV, Klass.ATTENTION}

#: a compute-limited kernel that occupies less than this share of one wave is parallelism-starved.
STARVED_FILL = 0.5


@dataclass(frozen=True, slots=True)
class KernelCost:
    """Noise-free cost terms of one kernel at maximum clock (ns) and its launch geometry."""

    t_compute: float
    t_memory: float
    t_latency: float
    t_floor: float
    fill: float  # share of the first wave's resident-block slots the grid occupies, ≤ 1
    occupancy: float  # theoretical: resident warps ÷ max warps per SM
    peak_flops: float

    def alone_ns(self, clock_factor: float = 1.0) -> float:
        """Return the duration alone on the GPU at ``clock_factor`` × max clock."""
        return self.t_floor + max(self.t_compute / clock_factor, self.t_memory, self.t_latency)


def blocks_per_sm(hw: HardwareSpec, block: int, regs: int, smem: int) -> int:
    """Return resident blocks per SM, limited by threads, registers, shared memory and the cap."""
    by_threads = hw.max_threads_per_sm // block
    by_regs = hw.regs_per_sm // max(1, regs * block)
    by_smem = hw.smem_per_sm // smem if smem > 0 else hw.max_blocks_per_sm
    return max(1, min(hw.max_blocks_per_sm, by_threads, by_regs, by_smem))


def kernel_cost(
    hw: HardwareSpec, op: KernelOp, eff_compute: float, eff_memory: float
) -> KernelCost:
    """Return the cost terms of ``op`` given its drawn achieved efficiencies."""
    klass = Klass[op.klass]
    peak_key = op.dtype or hw.class_efficiency[klass.name].peak
    peak = hw.peak_flops[peak_key]
    bps = blocks_per_sm(hw, op.block, op.regs, op.smem)
    capacity = bps * hw.sm_count
    waves = math.ceil(op.grid / capacity)
    wave_eff = op.grid / (waves * capacity)
    fill = min(1.0, op.grid / capacity)
    occupancy = min(1.0, bps * op.block / hw.max_threads_per_sm)
    t_compute = op.flops / (peak * eff_compute * wave_eff) * 1e9 if op.flops > 0 else 0.0
    t_bw = op.bytes / (hw.hbm_bandwidth_Bps * eff_memory) * 1e9
    per_block = op.block * BYTES_PER_THREAD
    if klass in _TENSOR_CLASSES:
        per_block = max(per_block, op.smem or TENSOR_STAGING_BYTES)
    in_flight = min(op.grid, capacity) * per_block
    parallelism = min(1.0, in_flight / (BYTES_IN_FLIGHT_PER_SM * hw.sm_count))
    t_latency = op.latency_ns + t_bw * (1.0 / parallelism - 1.0)
    return KernelCost(
        t_compute=t_compute,
        t_memory=t_bw,
        t_latency=t_latency,
        t_floor=float(hw.kernel_floor_ns),
        fill=fill,
        occupancy=occupancy,
        peak_flops=peak,
    )


def limiter(
    t_compute: float, t_memory: float, t_latency: float, t_floor: float, fill: float
) -> Regime:
    """Return the ground-truth regime: the term that set the duration."""
    terms = (t_compute, t_memory, t_latency, t_floor)
    i = max(range(4), key=lambda k: terms[k])
    if i == 0:
        return Regime.COMPUTE if fill >= STARVED_FILL else Regime.STALL
    return (Regime.MEMORY, Regime.STALL, Regime.IDLE)[i - 1]
