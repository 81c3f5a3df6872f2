"""The three built-in workloads as real PyTorch models (``--workload NAME --device cpu|cuda``),
small, on SYNTHETIC inputs generated in code (no downloads, no datasets):

* ``hft-lob`` — DeepLOB-style conv + inception + LSTM classifier on limit-order-book tensors,
  trained (Zhang, Zohren & Roberts, "DeepLOB", 2019: the architecture's shape, not its weights);
* ``af2`` — an Evoformer-style block (MSA row attention with pair bias, column attention,
  outer-product mean, triangle multiplicative updates, transitions), inference (Jumper et al.,
  2021: the block's structure at toy sizes);
* ``kitti`` — a PointPillars-style detector (pillar feature net, scatter to a BEV grid, a 2-D
  conv backbone, an SSD-style head) on random point clouds, inference (Lang et al., 2019).

``job(name, device)`` returns the engine.workloads.torch_job.TorchJob the optimize loop runs;
the simulator's manifests (manifests/workloads/*.json, ``real_model``) name which of these each
simulated workload stands for.
"""

from __future__ import annotations

from typing import Any

REAL_MODELS = ("hft-lob", "af2", "kitti")


def job(name: str, device: str = "cpu", size: str | None = None, seed: int = 0) -> Any:
    """The TorchJob of built-in workload ``name`` on ``device`` (cpu | cuda). ``size``:
    "small" (the default) or "tiny" (a quick run; ``GITM_MODEL_SIZE=tiny`` picks it for the
    command line)."""
    import os

    size = size or os.environ.get("GITM_MODEL_SIZE", "small")
    if size not in ("small", "tiny"):
        raise ValueError(f"GITM_MODEL_SIZE={size!r}: small or tiny")
    if name == "hft-lob":
        from engine.workloads.models.deeplob import job as make
    elif name == "af2":
        from engine.workloads.models.evoformer import job as make
    elif name == "kitti":
        from engine.workloads.models.pointpillars import job as make
    else:
        raise ValueError(f"no real model for {name!r}; one of {', '.join(REAL_MODELS)}")
    return make(device, size, seed)
