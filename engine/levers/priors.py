"""Effect-model priors and thresholds of the lever library, from manifests/lever_priors.json
(each with the range its source states and the source itself: the manifest is the one place
they are written; the simulator reads the same file)."""

from __future__ import annotations

from engine.manifest import LeverPrior, load_lever_priors

#: a named effect-model constant a transform scales by (value, stated range, source)
Prior = LeverPrior

_M = load_lever_priors()
_P, _T = _M.priors, _M.thresholds

# ------------------------------------------------------------------ effect-model priors
# The loop replays at the value; `gitm-tui analyze` also replays at the range's ends.
SIDE_INPUT = _P["SIDE_INPUT"]  # fused traffic = largest member + this share of the rest
MEM_EFF = _P["MEM_EFF"]  # achieved share of HBM bandwidth of new memory-bound kernels
AUTOTUNE = _P["AUTOTUNE"]  # cuDNN benchmark mode vs heuristic pick, compute-bound convs
PEAK_RATIO = _P["PEAK_RATIO"]  # share of the peak-ratio speedup a converted GEMM realises
FLASH = _P["FLASH"]  # FlashAttention share of dense BF16 peak
ALLOC = _P["ALLOC"]  # allocator host time left with expandable segments
GRAPH_LAUNCH = _P["GRAPH_LAUNCH"]  # host cost of one cudaGraphLaunch
GRAPH_NODE = _P["GRAPH_NODE"]  # host cost each captured launch still has

# ------------------------------------------------------------------ decision thresholds
MAX_SPLIT = int(_T["MAX_SPLIT"].value)  # split-K / grid multiplier ceiling
FOREACH_MIN_RUN = int(_T["FOREACH_MIN_RUN"].value)  # same kernel in a row: a per-param loop
MIN_GRAPH_KERNELS = int(_T["MIN_GRAPH_KERNELS"].value)  # launches a graph region needs
LAUNCH_OUTLIER = float(_T["LAUNCH_OUTLIER"].value)  # × median launch: waiting, not launching

# the values the simulator's mechanistic models share with the transforms
FUSED_SIDE_INPUT_SHARE = SIDE_INPUT.value
MEM_EFFICIENCY = MEM_EFF.value
AUTOTUNE_SPEEDUP = AUTOTUNE.value
FLASH_EFFICIENCY = FLASH.value
ALLOC_FACTOR = ALLOC.value
