"""The simulated GPU as a telemetry backend: its power/thermal model, sampled on demand."""

from __future__ import annotations

from engine.device.simulator import SimulatedGPU
from engine.manifest import load_hardware, load_workload
from engine.telemetry.backends import Backend, DeviceInfo
from engine.telemetry.sample import TelemetrySample


class SimBackend(Backend):
    """The simulated GPU's telemetry (its power/thermal model), sampled on demand."""

    def __init__(self, workload: str = "hft-lob", seed: int = 0) -> None:
        super().__init__(name="sim")
        hw = load_hardware()
        self.gpu = SimulatedGPU(hw, load_workload(workload), seed=seed)
        self.devices.append(DeviceInfo(0, f"simulated {hw.name}", None, hw.memory_bytes))

    def sample(self) -> list[TelemetrySample]:
        return self.gpu.run(1).telemetry
