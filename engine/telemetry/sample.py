"""One state-telemetry reading of one device; a field the device does not report is None, never 0."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import IntFlag
from typing import Any


class ClockEventReason(IntFlag):
    """Why clocks are below maximum; bit values follow NVML's nvmlClocksEventReason* constants."""

    NONE = 0
    GPU_IDLE = 0x1
    APPLICATIONS_CLOCKS_SETTING = 0x2
    SW_POWER_CAP = 0x4
    HW_SLOWDOWN = 0x8
    SYNC_BOOST = 0x10
    SW_THERMAL_SLOWDOWN = 0x20
    HW_THERMAL_SLOWDOWN = 0x40
    HW_POWER_BRAKE_SLOWDOWN = 0x80


def reason_names(mask: int) -> list[str]:
    """Return the names of the set bits of a clock-event-reason mask."""
    return [r.name for r in ClockEventReason if r.value and mask & r.value and r.name]


@dataclass(frozen=True, slots=True)
class TelemetrySample:
    """State of one GPU at ``t_ns`` (device clock of its source)."""

    t_ns: int
    device: int
    source: str
    gpu_util: float | None = None  # percent
    mem_util: float | None = None  # percent of HBM bandwidth
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    temperature_c: float | None = None
    clock_event_reasons: int | None = None
    # richer NVML / AMD SMI fields (None where the device or library does not report them)
    name: str | None = None
    uuid: str | None = None
    mem_clock_mhz: int | None = None
    pcie_tx_Bps: float | None = None
    pcie_rx_Bps: float | None = None
    nvlink_tx_Bps: float | None = None
    nvlink_rx_Bps: float | None = None
    ecc_uncorrected: int | None = None
    processes: int | None = None
    #: Hopper+ GPM metrics where present: sm_util, sm_occupancy, tensor_util, dram_bw_util (%)
    gpm: dict[str, float] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TelemetrySample:
        """Inverse of ``to_dict`` (derived keys such as reason names are ignored)."""
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (reasons also as names)."""
        d = asdict(self)
        if self.clock_event_reasons is not None:
            d["clock_event_reason_names"] = reason_names(self.clock_event_reasons)
        return d
