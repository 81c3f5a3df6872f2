"""The hardware catalogue (manifests/hardware_catalogue.json) and device detection from traces.

The entries' schema (``GpuPeaks``, ``Link``) lives with the other manifest schemas in
engine/manifest.py, which also builds the simulated device from its catalogue entry: one model
of each GPU.

A trace lists its devices (Kineto ``deviceProperties``, Nsight ``TARGET_INFO_GPU``, rocprof
agents), each dict carrying ``id``: the device number its rows' ``device`` column holds (the
importers make it so). ``identify`` names one device: its catalogue entry when the name (or,
for a device with no usable name, its architecture, SM/CU count and memory) fits exactly one
entry; else an ESTIMATE scaled from the catalogue entry of its architecture; else nothing, with
the reason. Never a silent neighbour."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from engine.manifest import CLASS_PEAK, GpuPeaks, Link, load_catalogue

__all__ = [
    "CLASS_PEAK",
    "GpuPeaks",
    "Identified",
    "Link",
    "by_id",
    "catalogue",
    "describe",
    "detect",
    "estimate",
    "identify",
    "properties_of",
]

#: estimates made in this process, by id: ``by_id`` finds them as it finds catalogue entries
#: (an analysis' graph names its hardware by id)
_ESTIMATES: dict[str, GpuPeaks] = {}


def catalogue() -> tuple[GpuPeaks, ...]:
    """Return every GPU in the catalogue."""
    return load_catalogue()


def by_id(gpu_id: str) -> GpuPeaks:
    """Return the catalogue entry (or an estimate made in this process) ``gpu_id``; KeyError
    names the known ids."""
    for g in catalogue():
        if g.id == gpu_id:
            return g
    if gpu_id in _ESTIMATES:
        return _ESTIMATES[gpu_id]
    raise KeyError(f"unknown hardware {gpu_id!r}; known: {', '.join(g.id for g in catalogue())}")


def _number(v: Any) -> float | None:
    """A positive finite number from trace metadata (which may hold anything), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if 0 < v < 1e30 else None


def _int(v: Any) -> int | None:
    """An integer from trace metadata (bool and floats with a fraction are not), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**31:
        return int(v)
    return None


def _count(v: Any, most: int = 100_000) -> int | None:
    """A positive count from trace metadata within ``most`` (an SM count of 2**70 from a forged
    trace is no count), else None."""
    n = _int(v)
    return n if n is not None and 0 < n <= most else None


#: clocks and bandwidths believed from a trace: a GPU clock between 100 MHz and 10 GHz, a memory
#: bandwidth between 1 GB/s and 100 TB/s (outside these a value is corrupt, not a device)
_CLOCK_MHZ = (100.0, 10_000.0)
_BANDWIDTH_BPS = (1e9, 1e14)


def _within(v: Any, bounds: tuple[float, float]) -> float | None:
    x = _number(v)
    return x if x is not None and bounds[0] <= x <= bounds[1] else None


#: a reported memory size (GiB, as totalGlobalMem counts it) matches a nominal size within this
#: tolerance: a "40GB" A100 reports 39.4 GiB, an "80GB" 79.2 GiB, a "16GB" V100 15.8 GiB, a "48GB"
#: A40 44.6 GiB — the nearest other variant of any entry is at least 25 % away (MI300X 192 GB /
#: MI325X 256 GB, H100 80 GB / H20 96 GB), so 10 % never picks a neighbour
MEMORY_TOLERANCE = 0.10


#: device names that say the vendor (or only the ISA) but not the model: ROCm reports MI200s as
#: "AMD Radeon Graphics", rocprof an agent without a product name by its gfx target; such a
#: device is matched by its properties (architecture, CU count, memory), never by the name
_GENERIC = re.compile(r"^(AMD (Radeon Graphics|Instinct)|gfx[0-9a-f]{3,4})$", re.IGNORECASE)
#: a device name of a consumer card: its estimate scales a consumer entry of its architecture
#: where there is one (GeForce tensor cores run FP32 accumulate at half the professional rate)
_CONSUMER = re.compile(r"GeForce|\bRTX \d{4}\b|\bTITAN\b|Radeon RX", re.IGNORECASE)
_CONSUMER_ENTRY = re.compile(r"GeForce|Radeon RX", re.IGNORECASE)


def _name(dev: dict[str, Any]) -> str:
    v = dev.get("name")
    return v.strip() if isinstance(v, str) else ""


def _vendor(dev: dict[str, Any]) -> Literal["nvidia", "amd"] | None:
    """The vendor a device's properties show, else None: a gfx target or a 64-wide wavefront is
    AMD's (ROCm writes warpSize 64 and its gfx major/minor as computeMajor/Minor), a 32-wide
    warp with a compute capability NVIDIA's; the name's vendor word otherwise."""
    if isinstance(dev.get("gfx"), str) and dev["gfx"].lower().startswith("gfx"):
        return "amd"
    warp = _int(dev.get("warpSize"))
    if warp == 64:
        return "amd"
    if warp == 32 and _int(dev.get("computeMajor")) is not None:
        return "nvidia"
    name = _name(dev).lower()
    if any(w in name for w in ("nvidia", "geforce", "tesla", "quadro")):
        return "nvidia"
    if any(w in name for w in ("amd", "radeon", "instinct")):
        return "amd"
    return None


def _gfx_arch(gfx: str) -> tuple[int, int] | None:
    """(major, minor) of an AMD gfx target: gfx90a → (9, 0), gfx942 → (9, 4), gfx1100 → (11, 0)
    (the last two characters are minor and stepping, in hex; the rest is the major)."""
    m = re.fullmatch(r"gfx(\d{1,2})([0-9a-f])([0-9a-f])", gfx.strip().lower())
    return (int(m.group(1)), int(m.group(2), 16)) if m else None


def _entry_arch(g: GpuPeaks) -> tuple[int, int] | None:
    """(major, minor) of a catalogue entry's arch: sm_86 → (8, 6), sm_100 → (10, 0), gfx942 →
    (9, 4)."""
    if not g.arch:
        return None
    if g.arch.startswith("gfx"):
        return _gfx_arch(g.arch)
    m = re.fullmatch(r"sm_(\d+)(\d)", g.arch)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _arch(dev: dict[str, Any]) -> tuple[int, int] | None:
    """(major, minor) the device reports: its gfx target (rocprof) or its compute capability /
    gfx version (computeMajor, computeMinor: Kineto, Nsight)."""
    gfx = dev.get("gfx")
    if isinstance(gfx, str) and _gfx_arch(gfx):
        return _gfx_arch(gfx)
    major, minor = _int(dev.get("computeMajor")), _int(dev.get("computeMinor"))
    if major is not None and minor is not None and 0 < major < 100 and 0 <= minor < 16:
        return major, minor
    return None


def _arch_text(vendor: str | None, arch: tuple[int, int] | None, dev: dict[str, Any]) -> str:
    if arch is None:
        return ""
    gfx = dev.get("gfx")
    if isinstance(gfx, str) and _gfx_arch(gfx):
        return gfx.strip().lower()
    return f"gfx {arch[0]}.{arch[1]}" if vendor == "amd" else f"sm_{arch[0]}{arch[1]}"


def describe(dev: dict[str, Any]) -> str:
    """What a device's properties say, for a message: 'gfx 9.4, 304 CUs, 192 GiB' (never the
    claim that a device with properties has none)."""
    vendor = _vendor(dev)
    parts = []
    arch = _arch_text(vendor, _arch(dev), dev)
    if arch:
        parts.append(arch)
    sms = _count(dev.get("numSms"))
    if sms:
        parts.append(f"{sms} {'CUs' if vendor == 'amd' else 'SMs'}")
    mem = _number(dev.get("totalGlobalMem"))
    if mem:
        parts.append(f"{mem / 2**30:.0f} GiB")
    mhz = _within(dev.get("clock_mhz"), _CLOCK_MHZ)
    if mhz:
        parts.append(f"{mhz:.0f} MHz")
    bw = _within(dev.get("memoryBandwidth"), _BANDWIDTH_BPS)
    if bw:
        parts.append(f"{bw / 1e9:.0f} GB/s")
    return ", ".join(parts)


def properties_of(devices: list[dict[str, Any]], device_id: int) -> list[dict[str, Any]]:
    """The trace's properties of the device its rows call ``device_id``: the entries whose
    ``id`` is it. A list whose entries carry no ids is read by position (entry i is device i),
    and a single entry without an id describes every device. More than one entry can share an
    id (a multi-process Nsight capture where each process numbers its GPUs from 0)."""
    devs = [d for d in devices if isinstance(d, dict)]
    with_id = [d for d in devs if _int(d.get("id")) is not None]
    if with_id:
        return [d for d in with_id if _int(d.get("id")) == device_id]
    if len(devs) == 1:
        return devs
    return [devs[device_id]] if 0 <= device_id < len(devs) else []


def _fits(g: GpuPeaks, dev: dict[str, Any]) -> bool:
    """Whether the device's SM/CU count, memory and architecture (those it reports) are the
    entry's."""
    sms = _count(dev.get("numSms"))
    if sms and g.sm_count != sms:
        return False
    mem = _number(dev.get("totalGlobalMem"))
    if mem and abs(mem / 2**30 - g.memory_gb) > MEMORY_TOLERANCE * g.memory_gb:
        return False
    arch, want = _arch(dev), _entry_arch(g)
    return not (arch and want and arch != want)


def _candidates(dev: dict[str, Any]) -> tuple[list[GpuPeaks], str]:
    """The entries a device fits, and how they were chosen: 'name' (its model name matched an
    entry's pattern), or 'properties' (a device with no usable name: its SM/CU count with its
    architecture, or with a vendor-only name an entry lists, and its memory)."""
    name = _name(dev)
    generic = not name or bool(_GENERIC.match(name))
    sms = _count(dev.get("numSms"))
    if name and (sms or not generic):  # a vendor-only name alone tells nothing
        cands = [g for g in catalogue() if re.search(g.match, name, re.IGNORECASE)]
        cands = [g for g in cands if _fits(g, dev)]
        if len(cands) > 1:  # the name's own size ("16GB", "80GB") decides between variants
            sized = [g for g in cands if re.search(rf"\b{g.memory_gb:g}\s*GB", name, re.IGNORECASE)]
            cands = sized or cands
        if cands or not generic:
            return cands, "properties" if generic else "name"
    # no usable name: the properties alone, and only with the SM/CU count and the architecture
    # (a count alone fits too much), and of the vendor the properties show
    if not sms or _arch(dev) is None:
        return [], "properties"
    vendor = _vendor(dev)
    cands = [
        g
        for g in catalogue()
        if (vendor is None or g.vendor == vendor) and _entry_arch(g) and _fits(g, dev)
    ]
    return cands, "properties"


def detect(devices: list[dict[str, Any]], device_id: int | None = None) -> GpuPeaks | None:
    """Return the catalogue entry of the trace's device ``device_id`` (the first listed when
    None), or None when it is not known.

    A named device must match an entry's pattern, and where the trace reports them the SM (CU)
    count, architecture and memory size must be the entry's: a device the catalogue lacks (a V100
    16GB when only the 32GB were listed, an unknown AMD part) is unknown, never the nearest
    neighbour. A device without a usable name ('', 'AMD Radeon Graphics', 'gfx942') is matched
    by its architecture, SM/CU count and memory alone. Two entries that still both fit are
    ambiguous: unknown too."""
    devs = [d for d in devices if isinstance(d, dict)]
    if device_id is not None:
        devs = properties_of(devs, device_id)
    if not devs:
        return None
    found = identify(devs[0])
    return found.entry if found.kind == "catalogue" else None


# --------------------------------------------------------------------------- the estimate
def _reference(vendor: str, arch: tuple[int, int], sms: int, consumer: bool) -> GpuPeaks | None:
    """The catalogue entry an estimate scales: of the vendor and architecture (NVIDIA: the same
    compute capability, else the nearest minor of the same major — sm_87 from sm_86, sm_121 from
    sm_120; AMD: the same gfx major.minor only, CDNA generations differ within a major), of the
    same segment where there is one (consumer or datacenter), the nearest SM count."""
    same = [g for g in catalogue() if g.vendor == vendor and _entry_arch(g) == arch]
    if not same and vendor == "nvidia":
        sib = [
            g
            for g in catalogue()
            if g.vendor == vendor and (a := _entry_arch(g)) is not None and a[0] == arch[0]
        ]
        if sib:
            near = min(abs(_entry_arch(g)[1] - arch[1]) for g in sib)  # type: ignore[index]
            same = [g for g in sib if abs(_entry_arch(g)[1] - arch[1]) == near]  # type: ignore[index]
    if not same:
        return None
    seg = [g for g in same if bool(_CONSUMER_ENTRY.search(g.name)) == consumer]
    pool = seg or same
    return min(pool, key=lambda g: (abs(g.sm_count - sms), g.sm_count))


def estimate(dev: dict[str, Any]) -> tuple[GpuPeaks, str] | None:
    """Return peaks estimated from a device's own properties and the label that says how, or
    None when they cannot be (no SM/CU count, no architecture, or no catalogue entry of it).

    The entry of the device's architecture (``_reference``) is scaled by the SM/CU count and,
    where the trace gives the clock (Nsight's clockRate), by the clock; the memory bandwidth is
    the trace's where given (Nsight's memoryBandwidth), else the reference's scaled by SM count.
    Per-SM limits are the trace's where it gives them. The host link is the reference's (an
    assumption the label states) and no peer link is assumed. The result is an ESTIMATE: every
    figure that uses it says so (``source`` opens with 'ESTIMATE')."""
    sms = _count(dev.get("numSms"))
    arch = _arch(dev)
    vendor = _vendor(dev)
    if not sms or arch is None:
        return None
    if vendor is None:  # a compute capability with no vendor sign: CUDA's warp is 32
        vendor = "nvidia"
    name = _name(dev)
    ref = _reference(vendor, arch, sms, bool(_CONSUMER.search(name)))
    if ref is None:
        return None
    scale = sms / ref.sm_count
    mhz = _within(dev.get("clock_mhz"), _CLOCK_MHZ)
    clock = mhz / ref.sm_clock_max_mhz if mhz and ref.sm_clock_max_mhz else 1.0
    bw = _within(dev.get("memoryBandwidth"), _BANDWIDTH_BPS)
    mem = _number(dev.get("totalGlobalMem"))
    arch_txt = _arch_text(vendor, arch, dev)
    unit = "CUs" if vendor == "amd" else "SMs"
    how_clock = (
        f"x clock {mhz:.0f}/{ref.sm_clock_max_mhz} MHz (the trace's)"
        if mhz and ref.sm_clock_max_mhz
        else "at the reference's clock (the trace gives none)"
    )
    how_bw = (
        f"memory bandwidth {bw / 1e9:.0f} GB/s as the trace gives it"
        if bw
        else f"memory bandwidth the reference's {ref.hbm_bandwidth_Bps / 1e9:.0f} GB/s x "
        f"{sms}/{ref.sm_count} {unit} (the trace gives none)"
    )
    sibling = "" if _entry_arch(ref) == arch else f" (nearest of its major: {ref.arch})"
    label = (
        f"ESTIMATE from the trace's device properties ({describe(dev)}): peaks of catalogue "
        f"'{ref.id}' ({ref.name}, {ref.arch}{sibling}) x {sms}/{ref.sm_count} {unit} "
        f"{how_clock}; {how_bw}; host link as the reference's ({ref.host_link.label}), no "
        "peer link assumed; the reference's datasheet: " + ref.source.split(";")[0]
    )
    # the arch levers read: sm_XY, or the gfx target (the trace's, else the reference's, which
    # shares its major.minor)
    arch_id = (
        f"sm_{arch[0]}{arch[1]}"
        if vendor == "nvidia"
        else (
            arch_txt
            if arch_txt.startswith("gfx") and " " not in arch_txt
            else (ref.arch or arch_txt)
        )
    )
    est_id = f"estimate-{arch_id.replace(' ', '')}-{sms}"
    limits: dict[str, Any] = {}
    for key, field in (
        ("regsPerMultiprocessor", "regs_per_sm"),
        ("sharedMemPerMultiprocessor", "smem_per_sm"),
        ("maxThreadsPerMultiprocessor", "max_threads_per_sm"),
    ):
        v = _count(dev.get(key), 1 << 24)
        if v:
            limits[field] = v
    try:
        peaks = GpuPeaks(
            id=est_id,
            name=name or f"{arch_txt}, {sms} {unit}",
            vendor=ref.vendor,
            match=re.escape(name) if name else "(?!)",
            sm_count=sms,
            # (a size under 128 MiB is no GPU memory: the reference's nominal size then)
            memory_gb=round(mem / 2**30, 1) if mem and mem >= 2**27 else ref.memory_gb,
            peak_flops={k: v * scale * clock for k, v in ref.peak_flops.items()},
            matrix_peak_flops={k: v * scale * clock for k, v in ref.matrix_peak_flops.items()},
            hbm_bandwidth_Bps=bw if bw else ref.hbm_bandwidth_Bps * scale,
            launch_latency_ns=ref.launch_latency_ns,
            source=label,
            host_link=ref.host_link,
            peer_link=None,
            sm_clock_max_mhz=int(mhz) if mhz else ref.sm_clock_max_mhz,
            arch=arch_id,
            matrix_dtypes=ref.matrix_dtypes,
            features=ref.features,
            **limits,
        )
    except ValidationError:  # values no device has (the trace's metadata is untrusted)
        return None
    if not all(math.isfinite(v) and v > 0 for v in peaks.peak_flops.values()):
        return None
    _ESTIMATES[est_id] = peaks
    return peaks, label


# --------------------------------------------------------------------------- one device
@dataclass(frozen=True)
class Identified:
    """What is known of one device: its catalogue entry, an estimate, or nothing — and why."""

    kind: Literal["catalogue", "estimate", "none"]
    entry: GpuPeaks | None
    #: how it was found ('name', 'properties'), or why nothing was
    why: str
    #: the entries that fit equally (ambiguous), by name
    ambiguous: tuple[str, ...] = ()


def identify(dev: dict[str, Any]) -> Identified:
    """Name one device from its properties (see the module docstring)."""
    cands, how = _candidates(dev)
    if len(cands) == 1:
        return Identified("catalogue", cands[0], how)
    found = estimate(dev)
    amb = tuple(g.name for g in cands) if len(cands) > 1 else ()
    if found is not None:
        return Identified("estimate", found[0], found[1], amb)
    name, props = _name(dev), describe(dev)
    if amb:
        why = f"it fits {len(amb)} catalogue entries equally ({', '.join(amb)})"
    elif name and not _GENERIC.match(name):
        why = f"device {name!r} (as the trace reports it) is not in the hardware catalogue"
    else:
        why = "the trace names no device model"
    if props:
        why += (
            f"; its properties ({props}) are too few to estimate peaks from"
            if not (_count(dev.get("numSms")) and _arch(dev))
            else f"; its properties ({props}) match no catalogue architecture to scale"
        )
    else:
        why += "; it gives no properties (SM/CU count, architecture, memory)"
    return Identified("none", None, why, amb)
