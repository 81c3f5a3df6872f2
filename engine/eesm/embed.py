"""O_θ (segment → raw pressures) and B_bounded (pressures → [floor, 1]³), numba and numpy reference.

Pressures, one row per segment (DESIGN §4):

* compute  = max(achieved FLOP/s ÷ class peak, issue-slot utilisation) — either counter alone
  when only one is measured; FLOPs say how close a tensor kernel is to its roofline, issue
  activity catches compute-bound kernels that do little floating point (integer, NMS, scatter).
* memory   = DRAM bytes/s ÷ HBM bandwidth.
* stall    = the stall fraction counter (cycles warps were stalled on dependencies/latency).

Without a counter the pressure falls back to the kernel class's prior (manifests/eesm.json
``priors``), scaled down for kernels shorter than ``short_kernel_ns`` (short kernels cannot have
filled the machine), and the row's provenance gets the ESTIMATED bit. An estimated stall is
raised by low occupancy (× (1.5 − occupancy)) where the occupancy is known; Kineto writes an
estimated occupancy of 0 where CUPTI did not compute one (every sm90 GEMM of the H100 TraceLens
traces: 1 block of 12 warps per SM, 19 %), which is read as unknown.

``starved`` says where a launch's geometry is evidence of latency (a grid under half a wave,
too few bytes in flight): the analysis of imported traces (pipeline._roofline_stall) reads the
time neither pipe explains as stall only there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.device.kernel_model import (
    BYTES_IN_FLIGHT_PER_SM,
    BYTES_PER_THREAD,
    STARVED_FILL,
    TENSOR_STAGING_BYTES,
)
from engine.jit import jit, python_of, twin
from engine.trace.segments import Klass, Provenance

ESTIMATED = np.uint8(int(Provenance.ESTIMATED))


@jit
def _observe_row(
    dur_ns: float,
    k: int,
    flops: float,
    dram: float,
    issue: float,
    stall: float,
    occ: float,
    inv_peak: np.ndarray,
    prior: np.ndarray,
    inv_hbm: float,
    short_ns: float,
) -> tuple[float, float, float, bool]:
    # one division per row: rates are FLOPs (bytes) × (1/seconds) × (1/peak), the reciprocals
    # of the peaks computed once per call; the numpy reference divides, which agrees to a few
    # ulps (tested with rtol 1e-12)
    dur = max(dur_ns, 1.0)
    per_s = 1e9 / dur
    est = False
    c = np.nan
    if flops == flops:
        c = flops * per_s * inv_peak[k]
    if issue == issue:
        c = issue if c != c else max(c, issue)
    if c != c:
        c = prior[k, 0] * min(1.0, dur / short_ns)
        est = True
    if dram == dram:
        m = dram * per_s * inv_hbm
    else:
        m = prior[k, 1] * min(1.0, dur / short_ns)
        est = True
    if stall == stall:
        s = stall
    else:
        s = prior[k, 2]
        if occ == occ and occ > 0.0:  # (0: Kineto's estimate not computed, not a kernel
            s = s * (1.5 - occ)  # with no warps) low occupancy exposes latency, high hides it
        est = True
    return c, m, s, est


@jit
def _bound(x: float, floor: float) -> float:
    if x != x:
        return floor
    return min(1.0, max(floor, x))


@jit
def observe(
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    klass: np.ndarray,
    flops: np.ndarray,
    dram_bytes: np.ndarray,
    issue_active: np.ndarray,
    stall_frac: np.ndarray,
    occupancy: np.ndarray,
    class_peak: np.ndarray,
    prior: np.ndarray,
    hbm_Bps: float,
    short_ns: float,
) -> tuple[np.ndarray, np.ndarray]:
    """O_θ: return raw pressures (n, 3) float64 and a per-row ESTIMATED flag (uint8 0/1)."""
    n = start_ns.shape[0]
    out = np.empty((n, 3), np.float64)
    est = np.zeros(n, np.uint8)
    inv_peak, inv_hbm = 1.0 / class_peak, 1.0 / hbm_Bps
    for i in range(n):
        c, m, s, e = _observe_row(
            float(end_ns[i] - start_ns[i]),
            klass[i],
            flops[i],
            dram_bytes[i],
            issue_active[i],
            stall_frac[i],
            occupancy[i],
            inv_peak,
            prior,
            inv_hbm,
            short_ns,
        )
        out[i, 0] = c
        out[i, 1] = m
        out[i, 2] = s
        est[i] = 1 if e else 0
    return out, est


_OBSERVE_CODE = python_of(observe)


@twin(observe)
def _observe_py(*args: object) -> tuple[np.ndarray, np.ndarray]:
    """``observe`` interpreted: its code on float64 copies of the float32 columns (numba widens
    a float32 before arithmetic with a float64; numpy 2 keeps float32, which changed the stall
    pressure's last digits)."""
    wide = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype == np.float32 else a
            for a in args]  # fmt: skip
    return _OBSERVE_CODE(*wide)


@jit
def bound(P: np.ndarray, floor: float) -> np.ndarray:
    """B_bounded: clip each pressure into [floor, 1]; NaN becomes floor. Returns a new array."""
    out = np.empty_like(P)
    for i in range(P.shape[0]):
        for d in range(P.shape[1]):
            out[i, d] = _bound(P[i, d], floor)
    return out


# ----------------------------------------------------------------------------- references
def observe_ref(
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    klass: np.ndarray,
    flops: np.ndarray,
    dram_bytes: np.ndarray,
    issue_active: np.ndarray,
    stall_frac: np.ndarray,
    occupancy: np.ndarray,
    class_peak: np.ndarray,
    prior: np.ndarray,
    hbm_Bps: float,
    short_ns: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Plain-numpy O_θ, the specification the numba kernel is tested against."""
    dur = np.maximum((end_ns - start_ns).astype(np.float64), 1.0)
    secs = dur * 1e-9
    shortness = np.minimum(1.0, dur / short_ns)
    k = klass.astype(np.intp)
    issue = issue_active.astype(np.float64)
    with np.errstate(invalid="ignore"):
        c_fl = flops / secs / class_peak[k]
    c = np.where(np.isnan(c_fl), issue, np.where(np.isnan(issue), c_fl, np.fmax(c_fl, issue)))
    c_est = np.isnan(c)
    c = np.where(c_est, prior[k, 0] * shortness, c)
    m_est = np.isnan(dram_bytes)
    m = np.where(m_est, prior[k, 1] * shortness, dram_bytes / secs / hbm_Bps)
    stall = stall_frac.astype(np.float64)
    s_est = np.isnan(stall)
    occ = occupancy.astype(np.float64)
    s_prior = np.where(np.isnan(occ) | (occ <= 0), prior[k, 2], prior[k, 2] * (1.5 - occ))
    s = np.where(s_est, s_prior, stall)
    est = (c_est | m_est | s_est).astype(np.uint8)
    return np.stack([c, m, s], axis=1), est


def bound_ref(P: np.ndarray, floor: float) -> np.ndarray:
    """Plain-numpy B_bounded."""
    return np.clip(np.nan_to_num(P, nan=floor), floor, 1.0)


# ----------------------------------------------------------------------------- stall evidence
@dataclass(frozen=True)
class Geometry:
    """What a device's size says about a launch: its SM (CU) count and per-SM limits."""

    sm_count: int
    max_threads_per_sm: int
    regs_per_sm: int
    smem_per_sm: int
    max_blocks_per_sm: int

    @classmethod
    def of(cls, hw: object) -> Geometry:
        """The geometry of a HardwareSpec or a catalogue GpuPeaks."""
        return cls(
            sm_count=int(hw.sm_count),  # type: ignore[attr-defined]
            max_threads_per_sm=int(hw.max_threads_per_sm),  # type: ignore[attr-defined]
            regs_per_sm=int(hw.regs_per_sm),  # type: ignore[attr-defined]
            smem_per_sm=int(hw.smem_per_sm),  # type: ignore[attr-defined]
            max_blocks_per_sm=int(hw.max_blocks_per_sm),  # type: ignore[attr-defined]
        )


def starved(
    klass: np.ndarray,
    grid: np.ndarray,
    block: np.ndarray,
    regs: np.ndarray,
    smem: np.ndarray,
    compute_side: np.ndarray,
    geo: Geometry,
) -> np.ndarray:
    """Per row, whether its launch geometry is evidence that it is parallelism-starved — the
    simulator's truth rule (engine/device/kernel_model.py) read from what a trace records:

    * a grid of less than half a wave (``STARVED_FILL`` of the resident-block slots of every
      SM/CU: most of the machine idle while its few warps wait on latency), or
    * on the memory side of the ridge, too few bytes in flight to saturate HBM (Little's law:
      ``BYTES_IN_FLIGHT_PER_SM`` per SM, each thread one 16-byte load, a tensor-class block
      its staged tile), under half of them, so latency and not bandwidth sets the time.

    Only what the trace shows counts as evidence, read at its most generous: without the
    kernel's registers (ROCm's Kineto rows, most Nsight exports) one block per SM is assumed for
    the wave (fewer slots: a grid is starved only if it is below half of even that), and the
    grid is read as a block count. ROCm's Kineto writes the global work size, in work-items,
    for kernels launched through hipModuleLaunchKernel/hipExtModuleLaunchKernel (Tensile and
    hipBLASLt GEMMs: an ``aten::addmm`` [8944, 1024] x [1024, 1024] on MT256x128 tiles, 280
    workgroups of 256, is recorded as grid 71680) and the block count for the others: work-items
    are never fewer than blocks, so the reading never calls a kernel starved that is not. A row
    with no grid (0) is never starved: its stall is the prior's, not a guess."""
    g = np.asarray(grid, np.float64)
    b = np.maximum(np.asarray(block, np.float64), 1.0)
    r = np.asarray(regs, np.float64)
    sm = np.asarray(smem, np.float64)
    known = g > 0
    by_threads = np.floor(geo.max_threads_per_sm / b)
    with np.errstate(divide="ignore", invalid="ignore"):
        by_regs = np.where(r > 0, np.floor(geo.regs_per_sm / np.maximum(r * b, 1.0)), np.inf)
        by_smem = np.where(sm > 0, np.floor(geo.smem_per_sm / np.maximum(sm, 1.0)), np.inf)
    bps = np.maximum(1.0, np.minimum(np.minimum(by_threads, by_regs), by_smem))
    bps = np.minimum(bps, float(geo.max_blocks_per_sm))
    # the fewest slots the device can have for it: its own limits where the trace gives its
    # registers, else one block per SM
    slots_lo = np.where(r > 0, bps, 1.0) * geo.sm_count
    starved_grid = known & (g / slots_lo < STARVED_FILL)
    tensor = np.isin(klass, np.array([Klass.GEMM, Klass.CONV, Klass.ATTENTION], np.uint8))
    per_block = b * BYTES_PER_THREAD
    staged = np.maximum(per_block, np.where(sm > 0, sm, TENSOR_STAGING_BYTES))
    per_block = np.where(tensor, staged, per_block)
    in_flight = np.minimum(g, bps * geo.sm_count) * per_block  # the most it can keep in flight
    latency = (
        known & ~compute_side & (in_flight < STARVED_FILL * BYTES_IN_FLIGHT_PER_SM * geo.sm_count)
    )
    return starved_grid | latency
