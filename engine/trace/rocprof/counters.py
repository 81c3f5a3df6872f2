"""rocprofv3 counter values of a dispatch → the measured columns of its kernel row.

Only counters whose meaning rocprofiler-sdk defines as a pressure become a column (the
definitions: rocprofiler-sdk ``source/lib/rocprofiler-sdk/counters/xml/derived_counters.xml``):

* ``FETCH_SIZE`` + ``WRITE_SIZE`` (also spelled ``FetchSize``/``WriteSize``): *kilobytes*
  fetched from / written to video memory (``TCC_EA_RDREQ…*32/1024``, i.e. KiB) → ``dram_bytes``
  = (fetch + write) × 1024, measured. Both must be there: half the traffic is not the traffic.
* ``VALUBusy`` / ``SALUBusy``: percent of GPU time vector / scalar ALU instructions are issued
  (``100*SQ_ACTIVE_INST_VALU*4/SIMD_NUM/GRBM_GUI_ACTIVE``) → ``issue_active`` = the larger / 100.
* ``MemUnitStalled``: percent of GPU time the memory unit is stalled
  (``100*TCP_TCP_TA_DATA_STALL_CYCLES/GRBM_GUI_ACTIVE/SE_NUM``) → ``stall_frac`` = value / 100.

* the FLOP-counting counters (``SQ_INSTS_VALU_MFMA_MOPS_*``, ``SQ_INSTS_VALU_{ADD,MUL,TRANS,FMA}_F*``)
  → ``flops``, and the kernel's ``dtype`` from its largest FLOP term (``measured_flops``).

Every other counter (``SQ_WAVES``, ``GRBM_GUI_ACTIVE``, ``VALUUtilization`` — lanes active in
a wave, not issue —, ``MemUnitBusy``, ``TCC_HIT``…) is kept by name in the trace's properties
and counted, but sets no column: a regime is never guessed from a counter that does not measure
a pressure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from engine.trace.segments import DTYPE_CODE, Provenance

#: rocprofv3's KB is 1024 bytes (derived_counters.xml divides byte counts by 1024)
KIB = 1024.0
_FETCH = ("FETCH_SIZE", "FetchSize")
_WRITE = ("WRITE_SIZE", "WriteSize")
_ISSUE = ("VALUBusy", "SALUBusy")
_STALL = ("MemUnitStalled",)
#: counter names that set a measured column (the rest are kept but read as nothing)
PRESSURE_COUNTERS = frozenset(_FETCH + _WRITE + _ISSUE + _STALL)


def _first(values: Mapping[str, float], names: tuple[str, ...]) -> float | None:
    for n in names:
        v = values.get(n)
        if v is not None and math.isfinite(v):
            return v
    return None


def measured_columns(values: Mapping[str, float]) -> tuple[float, float, float, int]:
    """Return (dram_bytes, issue_active, stall_frac, provenance bits) of one dispatch's counter
    values; NaN and an unset bit for what its counters do not measure. Percentages are clipped
    to [0, 1] (a derived percentage can exceed 100 by rounding of its inputs)."""
    nan = float("nan")
    bits = 0
    fetch, write = _first(values, _FETCH), _first(values, _WRITE)
    dram = nan
    if fetch is not None and write is not None and fetch >= 0 and write >= 0:
        dram = (fetch + write) * KIB
        bits |= Provenance.DRAM_BYTES
    busy = [v for n in _ISSUE if (v := values.get(n)) is not None and math.isfinite(v)]
    issue = nan
    if busy:
        issue = min(max(max(busy) / 100.0, 0.0), 1.0)
        bits |= Provenance.ISSUE_ACTIVE
    stall = nan
    if (s := _first(values, _STALL)) is not None:
        stall = min(max(s / 100.0, 0.0), 1.0)
        bits |= Provenance.STALL_FRAC
    return dram, issue, stall, int(bits)


#: FLOP-counting counters (counter_defs.yaml, rocprofiler-sdk): MFMA "MOPs" are 512 FLOPs each
#: (``MfmaFlops = SQ_INSTS_VALU_MFMA_MOPS_* × 512``); vector instruction counts are per wave of
#: 64 lanes, an FMA two FLOPs (the convention ROCm Compute Profiler's roofline uses: an upper
#: bound where lanes are masked off). Each → the catalogue peak its FLOPs are read against.
#: Vector FP16 has no peak of its own in the catalogue (its fp16 is the matrix rate, 8x higher),
#: so it is read against the FP32 vector peak, which packed FP16 can double: its compute
#: pressure may be over-stated up to 2x, never under-stated.
MFMA_FLOPS_PER_MOP = 512
WAVE_LANES = 64
_MFMA = {
    "SQ_INSTS_VALU_MFMA_MOPS_F16": "fp16",
    "SQ_INSTS_VALU_MFMA_MOPS_BF16": "bf16",
    "SQ_INSTS_VALU_MFMA_MOPS_F32": "fp32",
    "SQ_INSTS_VALU_MFMA_MOPS_XF32": "tf32",
    "SQ_INSTS_VALU_MFMA_MOPS_F64": "fp64",
    "SQ_INSTS_VALU_MFMA_MOPS_F8": "fp8",
    "SQ_INSTS_VALU_MFMA_MOPS_I8": "int8",
}
_VALU = {
    f"SQ_INSTS_VALU_{op}_{p}": (key, per)
    for p, key in (("F16", "fp32"), ("F32", "fp32"), ("F64", "fp64"))
    for op, per in (("ADD", 1), ("MUL", 1), ("TRANS", 1), ("FMA", 2))
}
#: counter names that count FLOPs
FLOP_COUNTERS = frozenset(_MFMA) | frozenset(_VALU)


def measured_flops(values: Mapping[str, float]) -> tuple[float, int, int]:
    """Return (FLOPs, DTYPES code of the largest FLOP term, provenance bits) of one dispatch's
    counter values: NaN, 0, 0 when none of its counters counts FLOPs (negative or non-finite
    values count for nothing)."""
    per_key: dict[str, float] = {}
    for name, v in values.items():
        if not math.isfinite(v) or v < 0:
            continue
        if name in _MFMA:
            key, flops = _MFMA[name], v * MFMA_FLOPS_PER_MOP
        elif name in _VALU:
            key, per = _VALU[name]
            flops = v * WAVE_LANES * per
        else:
            continue
        per_key[key] = per_key.get(key, 0.0) + flops
    if not per_key:
        return float("nan"), 0, 0
    total = sum(per_key.values())
    top = max(per_key, key=lambda k: per_key[k])
    return total, DTYPE_CODE[top] if total > 0 else 0, int(Provenance.FLOPS)
