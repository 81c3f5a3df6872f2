"""Which machine-learning framework a trace's program runs, read from what the trace records —
never assumed: advice that names a framework's API (torch.profiler(record_shapes=True), a
DataLoader, PyTorch's caching allocator) is given only where the trace shows that framework
(issue 50: a C/MPI program's Nsight export got PyTorch-only advice).

Evidence, in order: a PyTorch profiler trace (the Kineto format is PyTorch's); kernels named
from ATen or c10 (PyTorch's own kernels, in any profiler's export); XLA's fusion kernels (JAX,
TensorFlow with XLA); TensorFlow's and Eigen's kernels. None: no framework in evidence — the
program's own kernels (a simulation, a C/MPI code, a CUDA library)."""

from __future__ import annotations

import re

import numpy as np

from engine.trace.segments import Kind
from engine.trace.trace import Trace

#: a kernel named from ATen or c10: PyTorch's own kernels
ATEN = re.compile(r"\bat::|\bc10::|at_cuda_detail|_ZN2at6native")
_SIGNS = (
    ("PyTorch", ATEN),
    ("XLA", re.compile(r"^(?:loop_|input_)?[a-z_]*fusion(?:_\d+)?(?:\.\d+)?$")),
    ("TensorFlow", re.compile(r"\btensorflow::|\bEigen::")),
)


def framework_of(trace: Trace) -> str | None:
    """'PyTorch', 'XLA', 'TensorFlow', or None where the trace shows none of them."""
    if str(trace.device_properties.get("format", "")) == "kineto":
        return "PyTorch"
    seg = trace.segments
    ids = np.unique(seg.name[seg.kind == Kind.KERNEL]).tolist()
    names = [trace.names[int(i)] for i in ids]
    for fw, sign in _SIGNS:
        if any(sign.search(n) for n in names):
            return fw
    return None


_COUNTERS = (
    "hardware counters (Nsight Compute's FLOP and DRAM-byte metrics per kernel, or rocprof's "
    "counters)"
)


def shapes_hint(trace: Trace) -> str:
    """How this program's trace could give kernels their FLOPs and bytes (a clause)."""
    if framework_of(trace) == "PyTorch":
        return "record shapes, e.g. torch.profiler(record_shapes=True), or hardware counters"
    return _COUNTERS


def priors_note(trace: Trace) -> str:
    """The note for a trace whose kernel time rests mostly on kernel-name priors."""
    if framework_of(trace) == "PyTorch":
        how = (
            "record shapes (torch.profiler(record_shapes=True)) for FLOPs and bytes per kernel, "
            "or hardware counters"
        )
    else:
        how = f"{_COUNTERS} for FLOPs and bytes per kernel"
    return (
        f"most kernel time rests on kernel-name priors: {how}, and the labels will rest on evidence"
    )
