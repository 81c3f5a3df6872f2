"""Effect-model priors of the lever library: every constant a transform scales by, with the
range its interval uses and where it comes from (manifests/levers.json states the same)."""

from __future__ import annotations

from engine.levers.model import Prior

# ------------------------------------------------------------------ effect-model priors
# Each prior a transform scales by carries the range its source states (a Prior): the loop
# replays at the value; `gitm-tui analyze` also replays at the range's ends for an interval.
FUSED_SIDE_INPUT_SHARE = 0.25  # fused traffic = largest member + this share of the rest


# range 0-0.5: engineering prior, not measured by us. 0 = a pure chain (each op reads only the
# previous op's output: fused traffic is the first input plus the last output); 0.5 = half of
# every member's traffic is side inputs (bias, residual, mask) that the fused kernel still reads
SIDE_INPUT = Prior("fused side-input share", FUSED_SIDE_INPUT_SHARE, 0.0, 0.5)


MEM_EFFICIENCY = 0.8  # achieved share of HBM bandwidth assumed for new memory-bound kernels


# range 0.6-0.9: engineering prior, not measured by us (streaming kernels commonly reach 80-90 %
# of HBM peak; multi-tensor kernels with many small tensors less)
MEM_EFF = Prior("achieved share of HBM bandwidth", MEM_EFFICIENCY, 0.6, 0.9)


AUTOTUNE_SPEEDUP = 1.25  # cuDNN benchmark mode vs heuristic pick, compute-bound convs


# range 1.1-1.4: levers.json's own statement ("cuDNN benchmark mode commonly gains 10-40 % on
# convs"), an engineering prior, not measured by us
AUTOTUNE = Prior("cuDNN autotune speedup", AUTOTUNE_SPEEDUP, 1.1, 1.4, "x")


# share of the catalogue's peak ratio (peak_target / peak_source) a converted matmul/conv
# realises: 1 = it reaches the same fraction of its new peak as it did of the old one (the
# transform's model); 0.5 = half of that. Engineering prior, not measured by us: tensor-core
# kernels usually reach a smaller share of their much higher peak than SIMT FP32 kernels do
# (tile quantisation, epilogues and memory weigh more), so the ratio is an upper end
PEAK_RATIO = Prior("share of the peak-ratio speedup realised", 1.0, 0.5, 1.0)


MAX_SPLIT = 8  # split-K / grid multiplier ceiling


FLASH_EFFICIENCY = 0.55  # FlashAttention-2/3 share of dense BF16 peak on Hopper


# range 0.5-0.75: FlashAttention-2 (Dao, 2023) reaches 50-73 % of A100's peak FLOP/s in the
# forward pass; FlashAttention-3 (Shah et al., 2024) up to 75 % of H100's FP16 peak
FLASH = Prior("flash attention share of BF16 peak", FLASH_EFFICIENCY, 0.5, 0.75)


ALLOC_FACTOR = 0.1  # allocator host time left with expandable segments


# range 0-1: engineering prior, not measured by us. Expandable segments remove the cudaFree /
# cudaMalloc pairs of segment resizing but not allocations of new memory; which of the two an
# allocator call was is not in a trace, so anything from all (0) to none (1) of it may remain
ALLOC = Prior("allocator time left", ALLOC_FACTOR, 0.0, 1.0)


FOREACH_MIN_RUN = 16  # launches of one kernel in a row that look like a per-parameter loop


# CUDA graphs on an imported trace (CudaGraphs.transform_launch_api). Host cost of one
# cudaGraphLaunch and what each captured launch still costs on the host: the catalogue's
# defaults (graph_launch_api_ns 8 us, graph_node_ns 1 us) with the ranges its sources state
# ("a few to ~10 us regardless of node count", "~1 us or less": NVIDIA blog 'Getting Started
# with CUDA Graphs', 2019, as cited in manifests/h100_telemetry.json); not measured by us
GRAPH_LAUNCH = Prior("cudaGraphLaunch host cost", 8000.0, 3000.0, 10000.0, "ns")


GRAPH_NODE = Prior("host cost per captured launch", 1000.0, 0.0, 1000.0, "ns")


# A region needs at least this many kernel launches to count: below it the launch-API time a
# graph saves (a few us per launch) is of the order of the graph launch's own cost plus the
# static-buffer copies a capture needs, and nobody captures it; 5 is "a handful"
MIN_GRAPH_KERNELS = 5


# A launch call longer than this multiple of the trace's median launch is waiting, not
# launching: for room in the launch queue while the device is behind, or for lazy module
# loading on a kernel's first launch (milliseconds); a graph launch waits for those as well,
# so only this much of such a call counts as launch-API time. In the real A100 training trace
# launches take 5-17 us (p10-p99, median 6 us): 4x the median keeps that spread and clips 0.1 %
LAUNCH_OUTLIER = 4.0
