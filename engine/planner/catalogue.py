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


class Link(BaseModel):
    """A link a copy crosses: the host's PCIe link or the GPU-to-GPU fabric, with its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["pcie", "nvlink", "infinity_fabric"]
    Bps_per_direction: float = Field(gt=0)
    source: str
    gen: int | None = None
    lanes: int | None = None

    @property
    def label(self) -> str:
        """Return e.g. 'PCIe 4.0 x16' or 'NVLink'."""
        if self.kind == "pcie":
            return f"PCIe {self.gen}.0 x{self.lanes}"
        return {"nvlink": "NVLink", "infinity_fabric": "Infinity Fabric"}[self.kind]


class GpuPeaks(BaseModel):
    """Public peak rates of one GPU model, with the datasheet they come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    name: str
    vendor: Literal["nvidia", "amd"]
    match: str
    sm_count: int = Field(gt=0)
    #: nominal memory size (GB as marketed); a trace's totalGlobalMem must agree (see detect)
    memory_gb: float = Field(gt=0)
    peak_flops: dict[str, float]
    hbm_bandwidth_Bps: float = Field(gt=0)
    launch_latency_ns: int = Field(gt=0)
    source: str
    #: the PCIe link host<->device copies cross, and the GPU-to-GPU link (None: no fabric
    #: assumed, e.g. PCIe cards whose NVLink bridge is optional)
    host_link: Link
    peer_link: Link | None = None
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


#: a reported memory size (GiB, as totalGlobalMem counts it) matches a nominal size within this
#: tolerance: a "40GB" A100 reports 39.4 GiB, an "80GB" 79.2 GiB, a "16GB" V100 15.8 GiB — the
#: nearest other variant of any entry is at least 2x away, so 10 % never picks a neighbour
MEMORY_TOLERANCE = 0.10


def detect(devices: list[dict[str, Any]]) -> GpuPeaks | None:
    """Return the catalogue entry of a trace's first device, or None when it is not known.

    The name must match an entry's pattern, and where the trace reports them the SM (CU) count
    must be the entry's and the memory size its nominal size: a device the catalogue lacks
    (a V100 16GB when only the 32GB were listed, an unknown AMD part) is unknown, never the
    nearest neighbour. Two entries that still both fit are ambiguous: unknown too."""
    if not devices:
        return None
    dev = devices[0]
    name = str(dev.get("name") or "")
    sms = _number(dev.get("numSms"))
    mem = _number(dev.get("totalGlobalMem"))
    cands = [g for g in catalogue() if re.search(g.match, name, re.IGNORECASE)]
    if sms:
        cands = [g for g in cands if g.sm_count == int(sms)]
    if mem:
        gib = mem / 2**30
        cands = [g for g in cands if abs(gib - g.memory_gb) <= MEMORY_TOLERANCE * g.memory_gb]
    if len(cands) > 1:  # the name's own size ("16GB", "80GB") decides between variants
        sized = [g for g in cands if re.search(rf"\b{g.memory_gb:g}\s*GB", name, re.IGNORECASE)]
        cands = sized or cands
    return cands[0] if len(cands) == 1 else None
