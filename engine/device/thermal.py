"""First-order power/thermal model of the simulated GPU: load → power → temperature → clock."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.manifest import HardwareSpec
from engine.telemetry.sample import ClockEventReason

# Weights of the activity → dynamic power map. Tensor/ALU activity dominates board power on
# Hopper, HBM traffic is the next largest consumer, and a busy-but-stalled SM still draws some.
# These shares are priors chosen so that a dense BF16 GEMM at full clocks draws ~TDP.
_W_COMPUTE = 0.80
_W_MEMORY = 0.35
_W_BUSY = 0.10
#: governor hysteresis: clocks climb back only this far below the thermal / power limits
_HYSTERESIS_C = 3.0
_HYSTERESIS_POWER = 0.03


@dataclass
class ThermalState:
    """Integrates a GPU's temperature and clock governor over simulated time."""

    hw: HardwareSpec
    temperature_c: float
    sm_clock_mhz: int
    reasons: int = 0
    power_w: float = 0.0
    #: the power cap the governor enforces (W): the board's TDP unless the node sets a lower one
    power_cap_w: float = 0.0

    def __post_init__(self) -> None:
        if not self.power_cap_w:
            self.power_cap_w = self.hw.tdp_w

    @classmethod
    def cold(cls, hw: HardwareSpec) -> ThermalState:
        """Return an idle GPU at ambient temperature and maximum clock."""
        return cls(
            hw=hw,
            temperature_c=hw.thermal.ambient_c,
            sm_clock_mhz=hw.sm_clock_max_mhz,
            power_w=hw.idle_power_w,
        )

    @property
    def clock_factor(self) -> float:
        """Return current SM clock ÷ maximum: compute throughput scales with it."""
        return self.sm_clock_mhz / self.hw.sm_clock_max_mhz

    def power_for(self, busy: float, compute: float, memory: float) -> float:
        """Return board power (W) for activity fractions in [0, 1] at the current clock."""
        dyn = min(
            1.0, _W_COMPUTE * compute * self.clock_factor + _W_MEMORY * memory + _W_BUSY * busy
        )
        return self.hw.idle_power_w + (self.hw.tdp_w * 1.05 - self.hw.idle_power_w) * dyn

    def step(self, dt_s: float, busy: float, compute: float, memory: float) -> None:
        """Advance ``dt_s`` seconds of simulated time under the given activity."""
        th = self.hw.thermal
        self.power_w = self.power_for(busy, compute, memory)
        t_ss = th.ambient_c + th.r_th_c_per_w * self.power_w
        self.temperature_c = t_ss + (self.temperature_c - t_ss) * math.exp(-dt_s / th.tau_s)
        reasons = ClockEventReason.GPU_IDLE if busy < 0.05 else ClockEventReason.NONE
        below_max = self.sm_clock_mhz < self.hw.sm_clock_max_mhz
        # The governor walks one step per update and holds inside a hysteresis band, so clocks
        # do not hunt; a limiter that holds clocks below max is reported while it holds them.
        hot = self.temperature_c > th.slowdown_c
        warm = self.temperature_c > th.slowdown_c - _HYSTERESIS_C
        over = self.power_w > self.power_cap_w
        near = self.power_w > self.power_cap_w * (1 - _HYSTERESIS_POWER)
        if hot or (below_max and warm):
            reasons |= ClockEventReason.HW_THERMAL_SLOWDOWN
        if over or (below_max and near):
            reasons |= ClockEventReason.SW_POWER_CAP
        if hot or over:
            self.sm_clock_mhz = max(self.hw.sm_clock_min_mhz, self.sm_clock_mhz - th.clock_step_mhz)
        elif below_max and not (warm or near):
            self.sm_clock_mhz = min(self.hw.sm_clock_max_mhz, self.sm_clock_mhz + th.clock_step_mhz)
        self.reasons = int(reasons)
