"""Copies against the link they cross: host↔device over the host's PCIe link (pageable or
pinned), device↔device through HBM, peer-to-peer over NVLink / Infinity Fabric (or PCIe).

A copy is not a kernel: its rate says nothing about SMs, so it gets no regime. Comparing a
14 GB/s pageable host copy with 2 TB/s of HBM ("0.7 % of roofline") says nothing either; against
a PCIe 4.0 x16 link (31.5 GB/s per direction) it is 44 % — typical of a pageable copy, which
the driver stages through a pinned buffer.
"""

from __future__ import annotations

import re

import numpy as np

from engine.analyze.breakdown.model import CopyStats
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
    if not len(sel):
        return []
    # one parse per distinct (name, memset or not), not per row: a long trace has ~50k copies
    is_set = rows.kind[sel] == Kind.MEMSET
    uniq, inv = np.unique(rows.name[sel].astype(np.int64) * 2 + is_set, return_inverse=True)
    group_ids: dict[tuple[str, str], int] = {}
    gid_of = [
        group_ids.setdefault(("memset", "") if u & 1 else parse_copy(names[u >> 1]), len(group_ids))
        for u in uniq.tolist()
    ]
    gid = np.asarray(gid_of, np.int64)[inv.reshape(-1)]
    count = np.bincount(gid, minlength=len(group_ids))
    first = np.full(len(group_ids), len(gid), np.int64)
    np.minimum.at(first, gid, np.arange(len(gid)))
    out = []
    # the largest groups first; equal ones in the order their first row comes
    for (direction, memory), g in sorted(
        group_ids.items(), key=lambda kv: (-int(count[kv[1]]), int(first[kv[1]]))
    ):
        ix = sel[gid == g]
        t = int(rows.duration_ns[ix].sum())
        b = rows.dram_bytes[ix]
        nbytes = int(np.nansum(b)) if np.isfinite(b).any() else 0
        rate = nbytes / (t * 1e-9) if t > 0 and nbytes else None
        link, link_bps, note = _link(direction, memory, hw)
        out.append(
            CopyStats(
                direction=direction,
                memory=memory,
                count=len(ix),
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
