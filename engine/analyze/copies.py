"""Copies against the link they cross: host↔device over the host's PCIe link (pageable or
pinned), device↔device through HBM, peer-to-peer over NVLink / Infinity Fabric (or PCIe).

A copy is not a kernel: its rate says nothing about SMs, so it gets no regime. Comparing a
14 GB/s pageable host copy with 2 TB/s of HBM ("0.7 % of roofline") says nothing either; against
a PCIe 4.0 x16 link (31.5 GB/s per direction) it is 44 % — typical of a pageable copy, which
the driver stages through a pinned buffer.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from engine.analyze.model import CopyStats
from engine.planner.catalogue import GpuPeaks
from engine.trace.segments import Kind, NameTable, Segments

#: Kineto's (and our Nsight importer's) copy names: "Memcpy HtoD (Pageable -> Device)"
_NAME = re.compile(r"Memcpy (HtoD|DtoH|DtoD|HtoH|PtoP|[A-Za-z]+)(?: \((\w[\w ]*) -> (\w[\w ]*)\))?")


def parse_copy(name: str) -> tuple[str, str]:
    """Return (direction, 'src -> dst' memory kinds or '') of a copy's name; ('?', '') if not
    a recognised copy name."""
    m = _NAME.search(name)
    if not m:
        return "?", ""
    return m.group(1), f"{m.group(2)} -> {m.group(3)}" if m.group(2) else ""


def _link(direction: str, memory: str, hw: GpuPeaks | None) -> tuple[str | None, float | None, str]:
    """The link a copy crosses, its per-direction rate and what to read into the fraction."""
    if hw is None:
        return None, None, "hardware unknown: no link to compare with"
    if direction == "memset":
        return "HBM (write)", hw.hbm_bandwidth_Bps, "device memory fill"
    if direction in ("HtoD", "DtoH"):
        host = hw.host_link
        note = "pinned host memory: the link's rate is reachable"
        if "Pageable" in memory:
            note = (
                "pageable host memory: the driver stages it through a pinned buffer, typically "
                "half the link's rate or less — pin the memory (pin_memory=True)"
            )
        elif not memory:
            note = "host memory kind not recorded (pageable or pinned unknown)"
        return host.label, host.Bps_per_direction, note
    if direction == "DtoD":
        # each byte is read and written in HBM: the copy's ceiling is half the HBM bandwidth
        return "HBM (read + write)", hw.hbm_bandwidth_Bps / 2, "device-to-device through HBM"
    if direction == "PtoP":
        if hw.peer_link is not None:
            return hw.peer_link.label, hw.peer_link.Bps_per_direction, "GPU to GPU"
        return hw.host_link.label, hw.host_link.Bps_per_direction, "GPU to GPU over PCIe"
    return None, None, f"copy kind {direction}: no link modelled"


def copy_stats(rows: Segments, names: NameTable, hw: GpuPeaks | None) -> list[CopyStats]:
    """Copies and memsets grouped by direction and memory kinds, with their achieved rate
    against their link (link fields None when the hardware is unknown)."""
    sel = np.flatnonzero((rows.kind == Kind.MEMCPY) | (rows.kind == Kind.MEMSET))
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in sel.tolist():
        if rows.kind[i] == Kind.MEMSET:
            groups[("memset", "")].append(i)
        else:
            groups[parse_copy(names[int(rows.name[i])])].append(i)
    out = []
    for (direction, memory), idx in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        ix = np.asarray(idx)
        t = int(rows.duration_ns[ix].sum())
        b = rows.dram_bytes[ix]
        nbytes = int(np.nansum(b)) if np.isfinite(b).any() else 0
        rate = nbytes / (t * 1e-9) if t > 0 and nbytes else None
        link, link_bps, note = _link(direction, memory, hw)
        out.append(
            CopyStats(
                direction=direction,
                memory=memory,
                count=len(idx),
                bytes=nbytes,
                time_ns=t,
                achieved_Bps=rate,
                link=link,
                link_Bps=link_bps,
                fraction_of_link=rate / link_bps if rate and link_bps else None,
                note=note,
            )
        )
    return out
