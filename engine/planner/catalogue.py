"""The hardware catalogue (manifests/hardware_catalogue.json) and device detection from traces."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from engine.trace.segments import Klass

#: peak used per kernel class when the trace does not say the dtype: tensor-core classes are
#: bounded by the dense BF16 rate (the fastest common training dtype: a lower bound on time),
#: everything else by the FP32 vector rate.
CLASS_PEAK = {Klass.GEMM: "bf16", Klass.CONV: "bf16", Klass.ATTENTION: "bf16"}


class GpuPeaks(BaseModel):
    """Public peak rates of one GPU model, with the datasheet they come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    name: str
    vendor: Literal["nvidia", "amd"]
    match: str
    sm_count: int = Field(gt=0)
    memory_gb_max: float = Field(gt=0)
    peak_flops: dict[str, float]
    hbm_bandwidth_Bps: float = Field(gt=0)
    launch_latency_ns: int = Field(gt=0)
    source: str
    # engineering priors shared by every entry unless it says otherwise (see the manifest's _doc)
    launch_api_ns: int = Field(default=2500, gt=0)
    graph_launch_api_ns: int = Field(default=8000, gt=0)
    graph_node_ns: int = Field(default=1000, gt=0)
    kernel_floor_ns: int = Field(default=1500, gt=0)
    h2d_pinned_Bps: float = Field(default=50e9, gt=0)
    h2d_pageable_Bps: float = Field(default=18e9, gt=0)
    regs_per_sm: int = Field(default=65536, gt=0)
    smem_per_sm: int = Field(default=233472, gt=0)
    max_blocks_per_sm: int = Field(default=32, gt=0)
    max_threads_per_sm: int = Field(default=2048, gt=0)
    #: maximum SM clock (MHz) where the datasheet gives it: telemetry clocks are read against it
    sm_clock_max_mhz: int | None = None

    def class_peak_flops(self) -> np.ndarray:
        """Return the FLOP/s bound per kernel class, indexed by ``Klass``."""
        return np.array([self.peak_flops[CLASS_PEAK.get(k, "fp32")] for k in Klass])

    @property
    def label(self) -> str:
        """Return the display name."""
        return self.name


@lru_cache(maxsize=1)
def catalogue() -> tuple[GpuPeaks, ...]:
    """Return every GPU in the catalogue."""
    data = json.loads(resources.files("manifests").joinpath("hardware_catalogue.json").read_text())
    return tuple(GpuPeaks.model_validate(g) for g in data["gpus"])


def by_id(gpu_id: str) -> GpuPeaks:
    """Return the catalogue entry ``gpu_id``; KeyError names the known ids."""
    for g in catalogue():
        if g.id == gpu_id:
            return g
    raise KeyError(f"unknown hardware {gpu_id!r}; known: {', '.join(g.id for g in catalogue())}")


def _number(v: Any) -> float | None:
    """A positive finite number from trace metadata (which may hold anything), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if 0 < v < 1e30 else None


def detect(devices: list[dict[str, Any]]) -> GpuPeaks | None:
    """Return the catalogue entry matching a trace's first device description, or None."""
    if not devices:
        return None
    dev = devices[0]
    name = str(dev.get("name") or "")
    sms = _number(dev.get("numSms"))
    mem = _number(dev.get("totalGlobalMem"))
    cands = [g for g in catalogue() if re.search(g.match, name, re.IGNORECASE)]
    if sms:
        exact = [g for g in cands if g.sm_count == int(sms)]
        cands = exact or cands
    if mem and len(cands) > 1:
        gb = mem / 1e9
        fitting = sorted((g for g in cands if gb <= g.memory_gb_max), key=lambda g: g.memory_gb_max)
        cands = fitting[:1] or cands
    return cands[0] if cands else None
