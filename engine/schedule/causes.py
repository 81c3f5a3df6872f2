"""The causes attribution can name and levers target (DESIGN §5 "attribution", §6)."""

from __future__ import annotations

from enum import Enum


class Cause(str, Enum):
    """A named reason a step deviates from what the hardware could do."""

    LAUNCH_OVERHEAD = "device idle while the host launches kernels one by one"
    HOST_SYNC = "host blocked on mid-step device synchronisations"
    PAGEABLE_COPY = "copies from pageable memory block the host at reduced bandwidth"
    SERIAL_COPY = "copies serialised with compute on the same stream"
    DATA_LOADING = "input loading on the launching thread's critical path"
    ALLOCATOR_CHURN = "cudaMalloc/cudaFree churn on the critical path"
    UNFUSED_ELEMENTWISE = "chains of memory-bound elementwise kernels re-reading DRAM"
    FP32_MATMUL = "matmuls on FP32 CUDA cores instead of tensor cores"
    UNFUSED_ATTENTION = "attention materialising its score matrix in DRAM"
    LAYOUT_TRANSFORM = "NCHW/NHWC transposes around tensor-core convolutions"
    CONV_ALGO = "convolutions below their roofline on a heuristic algorithm"
    LOW_OCCUPANCY = "kernels whose grid fills a fraction of one wave"
    OPTIMIZER_LAUNCHES = "one optimizer kernel per parameter tensor"
    POWER_CAP = "SM clocks held below maximum by a power or thermal limit"
    SMALL_BATCH = "per-step overhead amortised over few samples"
    HBM_CONTENTION = "concurrent kernels sharing HBM bandwidth"

    @property
    def label(self) -> str:
        """Return the identifier used in reports and JSON (the member name)."""
        return self.name
