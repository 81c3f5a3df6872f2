"""Evidence tiers: what a row's regime label rests on, from its provenance bits and class.

* MEASURED — hardware counters (FLOPs, issue activity or stall fraction; CUPTI profiler, the
  simulator's CUPTI-like records);
* DERIVED — FLOPs and bytes computed from the launching operator's recorded shapes and dtypes
  (PyTorch profiler ``record_shapes``; engine/trace/kineto/shapes.py);
* PRIOR — only the kernel's name class (manifests/kernel_taxonomy.json) and its duration;
* NONE — a class the taxonomy does not know and nothing measured: the regime is unknown.

The tier is carried per row and reaches every output; the decoder weighs each row's emission
by its tier (manifests/eesm.json ``evidence_weight``), so a label resting on a prior is held
with the confidence a prior deserves.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import numpy.typing as npt

from engine.trace.segments import Kind, Klass, Provenance, Segments


class Tier(IntEnum):
    """Evidence behind a row's label, weakest first."""

    NONE = 0
    PRIOR = 1
    DERIVED = 2
    MEASURED = 3


#: counters that make a kernel row MEASURED (DRAM bytes of a copy are its size, not a counter).
#: Derived rows carry only the DERIVED bit: their flops/dram_bytes values are filled, the
#: FLOPS/DRAM_BYTES bits (measured) are not
_COUNTERS = int(Provenance.FLOPS | Provenance.ISSUE_ACTIVE | Provenance.STALL_FRAC)


def tiers(seg: Segments, derived_evidence: bool = True) -> npt.NDArray[np.uint8]:
    """Return the Tier of every row (uint8). ``derived_evidence`` False: shape-derived FLOPs
    and bytes count for nothing (the hardware is unknown, so there are no peaks to read them
    against: `gitm-tui analyze` decodes those rows on their class prior, and every output
    must say PRIOR for them, as its report does)."""
    prov = seg.provenance  # (uint8 flags, read as they are: no int64 copy of the column)
    kern = seg.kind == Kind.KERNEL
    measured = ((prov & np.uint8(_COUNTERS)) != 0) | (
        kern & ((prov & np.uint8(Provenance.DRAM_BYTES)) != 0)
    )
    derived = (prov & np.uint8(Provenance.DERIVED)) != 0
    if not derived_evidence:
        derived[:] = False
    known = seg.klass != Klass.OTHER
    out = np.full(len(seg), Tier.NONE, np.uint8)
    out[known] = Tier.PRIOR
    out[derived] = Tier.DERIVED
    out[measured] = Tier.MEASURED
    return out
