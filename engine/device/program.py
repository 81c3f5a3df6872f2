"""A workload's program as the simulated device runs it: the streams it uses, the program at k ×
the batch, and the regions a CUDA graph can capture. Pure functions of the manifest's ops."""

from __future__ import annotations

from typing import Any

from engine.manifest import CopyOp, HostOp, KernelOp, RecordOp, WaitOp, WorkloadSpec


def streams_of(workload: WorkloadSpec, program: list[Any]) -> list[int]:
    """Declared streams plus any a lever added (a side stream for copies)."""
    out = list(workload.streams)
    for op in program:
        s = getattr(op, "stream", None)
        if s is not None and s not in out:
            out.append(s)
    return out


def scaled(program: list[Any], k: int) -> list[Any]:
    """The program at ``k`` × the batch: kernels do k × the work over k × the blocks, copies
    move k × the bytes, per-sample host work takes k × as long; per-step costs stay."""
    if k == 1:
        return program
    out: list[Any] = []
    for op in program:
        if isinstance(op, KernelOp):
            flash = op.flash_bytes * k if op.flash_bytes else None
            op = op.model_copy(
                update={
                    "flops": op.flops * k,
                    "bytes": op.bytes * k,
                    "grid": op.grid * k,
                    "flash_bytes": flash,
                }
            )
        elif isinstance(op, CopyOp):
            op = op.model_copy(update={"bytes": op.bytes * k})
        elif isinstance(op, HostOp) and op.per_sample:
            op = op.model_copy(update={"ns": op.ns * k})
        out.append(op)
    return out


def graph_regions(program: list[Any]) -> list[int]:
    """Region id per op for CUDA-graph replay (-1: runs eagerly). A region is a maximal run of
    kernels, pinned copies and event record/wait; host work, syncs and pageable copies (which
    block the host) end it: they cannot be captured."""
    out: list[int] = []
    region, open_ = -1, False
    for op in program:
        capturable = isinstance(op, KernelOp | RecordOp | WaitOp) or (
            isinstance(op, CopyOp) and op.pinned
        )
        if capturable:
            if not open_:
                region += 1
                open_ = True
            out.append(region)
        else:
            open_ = False
            out.append(-1)
    return out
