"""A built-in workload on the simulated GPU, in the state levers edit (program + exec config).

``SimState`` is everything a lever can change: the op program (flattened once a lever edits
it) and the ``ExecConfig``. ``SimWorkload.measure`` runs it on a fresh simulated GPU (warm-up
windows so the power governor settles, then measured windows) and returns time per sample and
the trace of the measured windows; ``correctness`` is the workload's own check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from engine.device.simulator import SimulatedGPU
from engine.eesm.pipeline import Decoded, EesmModel, decode_fused
from engine.manifest import (
    ExecConfig,
    HardwareSpec,
    KernelOp,
    SyncOp,
    WorkloadSpec,
    flatten_ops,
    load_hardware,
    load_workload,
)
from engine.telemetry.sample import TelemetrySample
from engine.trace.segments import Segments
from engine.trace.trace import HostEvents, Trace

#: lower-precision dtypes, in the order a downcast moves
_PRECISION = {"fp64": 3, "fp32": 2, "tf32": 1, "bf16": 0, "fp16": 0}


class SimState(BaseModel):
    """The program and execution settings of one simulated workload (JSON round-trips)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    spec: WorkloadSpec
    config: ExecConfig = ExecConfig()

    def program(self) -> list[Any]:
        """Return the flattened op list."""
        return flatten_ops(self.spec.iteration)

    def with_program(self, ops: list[Any], **spec_updates: Any) -> SimState:
        """Return a state whose iteration is ``ops`` (validated again)."""
        data = self.spec.model_dump()
        data["iteration"] = [o.model_dump() for o in ops]
        data.update(spec_updates)
        return SimState(spec=WorkloadSpec.model_validate(data), config=self.config)

    def with_config(self, **updates: Any) -> SimState:
        """Return a state with exec-config fields replaced."""
        cfg = ExecConfig.model_validate({**self.config.model_dump(), **updates})
        return SimState(spec=self.spec, config=cfg)


@dataclass
class Measurement:
    """One measurement: per-window time per sample (ns) and the measured windows' trace."""

    per_sample_ns: list[float]
    trace: Trace
    truth: np.ndarray
    telemetry: list[TelemetrySample]
    iterations: int
    window: tuple[int, int]
    samples_per_iteration: int
    _decoded: Decoded | None = field(default=None, repr=False, compare=False)

    @property
    def mean_ns(self) -> float:
        """Mean time per sample over the windows."""
        return float(np.mean(self.per_sample_ns))

    def decoded(self, model: EesmModel) -> Decoded:
        """The trace decoded — once: the analysis and the dashboard share it."""
        if self._decoded is None:
            self._decoded = decode_fused(self.trace.segments, model)
        return self._decoded


class SimWorkload:
    """A built-in workload on the simulated GPU."""

    kind = "simulated"

    def __init__(
        self,
        name: str,
        hardware: str = "h100_telemetry",
        machine_seed: int = 0,
        windows: int = 3,
        iterations_per_window: int = 4,
        warmup_windows: int = 12,
    ) -> None:
        self.name = name
        self.hw: HardwareSpec = load_hardware(hardware)
        self.base = SimState(spec=load_workload(name))
        self.machine_seed = machine_seed
        self.windows = windows
        self.iterations_per_window = iterations_per_window
        self.warmup_windows = warmup_windows

    @property
    def title(self) -> str:
        return self.base.spec.title

    def measure(self, state: SimState, seed: int) -> Measurement:
        """Run ``state`` on a fresh simulated GPU (noise seed ``seed``)."""
        gpu = SimulatedGPU(
            self.hw, state.spec, seed=seed, config=state.config, cost_seed=self.machine_seed
        )
        for _ in range(self.warmup_windows):
            gpu.run(self.iterations_per_window)
        per, segs, hosts, truth, tel = [], [], [], [], []
        t0 = gpu.now
        samples = state.spec.batch * state.config.batch_scale
        iters = 0
        for _ in range(self.windows):
            b = gpu.run(self.iterations_per_window)
            per.append((b.t_end_ns - b.t_start_ns) / (b.iterations * samples))
            segs.append(b.segments)
            hosts.append(b.host)
            truth.append(b.truth)
            tel.extend(b.telemetry)
            iters += b.iterations
        trace = Trace(
            segments=Segments.concat(segs),
            names=gpu.names,
            host=HostEvents.concat(hosts),
            device_properties={"devices": [{"name": self.hw.name}], "format": "simulated"},
            source=f"simulated {self.hw.name}: {self.name}",
            simulated=True,
        )
        return Measurement(
            per_sample_ns=per,
            trace=trace,
            truth=np.concatenate(truth),
            telemetry=tel,
            iterations=iters,
            window=(int(t0), int(gpu.now)),
            samples_per_iteration=samples,
        )

    def correctness(self, state: SimState) -> tuple[bool, str]:
        """The workload's own check: results the host reads are still synchronised, and ops
        the model needs in FP32 stayed FP32."""
        base_ops, ops = self.base.program(), state.program()
        need = sum(isinstance(o, SyncOp) and o.purpose == "required" for o in base_ops)
        have = sum(isinstance(o, SyncOp) and o.purpose == "required" for o in ops)
        if have < need:
            return False, (
                f"{need - have} sync(s) the host needs were removed: it reads a result before "
                "the device produced it"
            )
        for o in ops:
            if isinstance(o, KernelOp) and o.fp32_required:
                dt = o.dtype or "fp32"
                if _PRECISION.get(dt, 2) < 2:
                    return False, f"{o.name} must stay FP32 (runs {dt}): accuracy check fails"
        return True, "ok"
