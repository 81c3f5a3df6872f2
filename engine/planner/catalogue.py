"""The hardware catalogue (manifests/hardware_catalogue.json) and device detection from traces.

The entries' schema (``GpuPeaks``, ``Link``) lives with the other manifest schemas in
engine/manifest.py, which also builds the simulated device from its catalogue entry: one model
of each GPU."""

from __future__ import annotations

import re
from typing import Any

from engine.manifest import CLASS_PEAK, GpuPeaks, Link, load_catalogue

__all__ = ["CLASS_PEAK", "GpuPeaks", "Link", "by_id", "catalogue", "detect"]


def catalogue() -> tuple[GpuPeaks, ...]:
    """Return every GPU in the catalogue."""
    return load_catalogue()


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


#: device names that say the vendor but not the model (ROCm reports MI200s so): matched to an
#: entry only together with the CU count the trace reports
_GENERIC = re.compile(r"^AMD (Radeon Graphics|Instinct)$", re.IGNORECASE)


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
    if _GENERIC.match(name.strip()) and not sms:
        return None  # a name without a model ("AMD Radeon Graphics"): only the CU count tells
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
