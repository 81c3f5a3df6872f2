"""The power-policy lever: raise the power cap where the clocks throttle on it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from engine.levers.base import Lever, kernel_floor, state_hw
from engine.levers.model import Applicability, Edit, Observation
from engine.regimes import Regime
from engine.telemetry.sample import ClockEventReason

if TYPE_CHECKING:  # (annotations only: the simulator is not imported to analyze a trace)
    from engine.workloads.sim import SimState


class PowerPolicy(Lever):
    id = "power_policy"

    def sites(self, state: SimState) -> Applicability:
        hw = state_hw(state)
        cap = state.config.power_limit_w or state.spec.power_limit_w or hw.tdp_w
        if cap >= hw.tdp_w:
            return Applicability(False, "the power cap is already the board's TDP")
        return Applicability(True, f"node power cap {cap:.0f} W below the {hw.tdp_w:.0f} W TDP")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        clocks = [s.sm_clock_mhz for s in obs.telemetry if s.sm_clock_mhz]
        cmax = obs.hw.sm_clock_max_mhz
        capped = [
            s
            for s in obs.telemetry
            if s.clock_event_reasons
            and s.clock_event_reasons
            & (
                ClockEventReason.SW_POWER_CAP
                | ClockEventReason.HW_THERMAL_SLOWDOWN
                | ClockEventReason.SW_THERMAL_SLOWDOWN
            )
        ]
        if not clocks or not cmax or len(capped) < len(obs.telemetry) / 2:
            return Edit(dag, 0, "clocks were not held down by a power/thermal limit")
        ratio = float(np.mean(clocks)) / cmax
        fl = kernel_floor(obs)
        sel = np.flatnonzero(dag.d_live & (dag.d_regime == Regime.COMPUTE))
        dag.d_dur[sel] = fl + (dag.d_dur[sel] - fl) * ratio
        return Edit(
            dag, len(sel), f"{len(sel)} compute-bound rows at max clock ({ratio:.0%} → 100%)"
        )

    def apply(self, state: SimState) -> SimState:
        return state.with_config(power_limit_w=state_hw(state).tdp_w)
