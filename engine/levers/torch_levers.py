"""Levers on a live PyTorch program (``engine.optimize(job)``): each changes the job's objects or
the process's torch settings, and hands back the exact undo.

Each lever says where it applies (device, torch version, what the model holds) and why not
elsewhere; its safety class sets the correctness tolerance (engine.workloads.torch_job). What
needs a restart (``PYTORCH_CUDA_ALLOC_CONF``) or the launcher (environment) is listed with
``needs="launcher"``: in-process it is not applicable, and it says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.jit import usable_cores
from engine.workloads.torch_job import TorchJob, on_cuda

Undo = Callable[[], None]


@dataclass(frozen=True)
class TorchLever:
    """One lever of the live program."""

    id: str
    title: str
    safety: str  # SAFE | NUMERICS | PRIVILEGED
    what: str
    #: "process": applied to the live objects here; "launcher": needs a fresh process
    needs: str = "process"
    #: untimed steps to run once after applying (compilation, autotuning), before measuring
    settle_steps: int = 0
    #: whether the reference-step check can judge it: a lever that changes only where batches
    #: come from leaves the step on the fixed reference batch as it was (not judged, said so)
    checkable: bool = True
    #: where the lever lives when it is not in the model, optimizer or process settings:
    #: "job.run_step" (a step wrapper) or "job.batches" (a new loader) — the user's own loop
    #: gets it only through that
    via: str = ""
    #: the library levers (engine/levers/library.py) whose replay on a captured trace predicts
    #: its gain (none: measured only)
    replayed_as: tuple[str, ...] = ()
    #: what the lever does to the arithmetic, which sets how close its step must come to the
    #: baseline's (manifests/correctness.json): exact | reordered | fused | reduced_precision
    numerics: str = "reordered"

    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        raise NotImplementedError

    def apply(self, job: TorchJob) -> Undo:
        raise NotImplementedError


def _torch() -> Any:
    import torch

    return torch


def _version() -> tuple[int, int]:
    v = _torch().__version__.split("+")[0].split(".")
    return int(v[0]), int(v[1])


def _has(job: TorchJob, *kinds: str) -> bool:
    if job.model is None:
        return False
    return any(type(m).__name__ in kinds for m in job.model.modules())


def _cuda_only(job: TorchJob) -> tuple[bool, str] | None:
    if not on_cuda(job):
        return False, "the model is not on a CUDA device (this setting acts on CUDA kernels only)"
    return None


# ---------------------------------------------------------------------- process-wide settings
class CpuThreads(TorchLever):
    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        torch = _torch()
        cores = usable_cores()
        if torch.get_num_threads() == (cores or 1):
            return False, f"intra-op threads already match the {cores} usable cores"
        return True, f"{torch.get_num_threads()} intra-op threads on {cores} usable cores"

    def apply(self, job: TorchJob) -> Undo:
        torch = _torch()
        before = torch.get_num_threads()
        cores = usable_cores()
        torch.set_num_threads(max(1, cores or 1))
        return lambda: torch.set_num_threads(before)


class Tf32(TorchLever):
    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        torch = _torch()
        if (no := _cuda_only(job)) is not None:
            return no
        major, _ = torch.cuda.get_device_capability()
        if major < 8:
            return False, "TF32 needs an Ampere or newer GPU"
        if torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32:
            return False, "TF32 is already on for matmuls and cuDNN"
        return True, "FP32 matmuls/convolutions on a GPU with TF32 tensor cores"

    def apply(self, job: TorchJob) -> Undo:
        torch = _torch()
        m, c = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        prec = torch.get_float32_matmul_precision()
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("high")

        def undo() -> None:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = m, c
            torch.set_float32_matmul_precision(prec)

        return undo


class CudnnBenchmark(TorchLever):
    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        if (no := _cuda_only(job)) is not None:
            return no
        if not _has(job, "Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "ConvTranspose3d"):
            return False, "the model has no convolution for cuDNN to autotune"
        if _torch().backends.cudnn.benchmark:
            return False, "cudnn.benchmark is already on"
        return True, "convolutions on a GPU: cuDNN may pick a faster algorithm per shape"

    def apply(self, job: TorchJob) -> Undo:
        torch = _torch()
        before = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = True
        return lambda: setattr(torch.backends.cudnn, "benchmark", before)


class SdpaFlash(TorchLever):
    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        if (no := _cuda_only(job)) is not None:
            return no
        if not _has(
            job, "MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer"
        ):
            return False, (
                "no attention module found (a model calling scaled_dot_product_attention "
                "directly is not visible from its modules)"
            )
        return True, "attention through SDPA on a GPU: the flash backend only"

    def apply(self, job: TorchJob) -> Undo:
        b = _torch().backends.cuda
        before = (b.flash_sdp_enabled(), b.mem_efficient_sdp_enabled(), b.math_sdp_enabled())
        b.enable_flash_sdp(True)
        b.enable_mem_efficient_sdp(False)
        b.enable_math_sdp(True)  # the fallback for shapes flash cannot take

        def undo() -> None:
            b.enable_flash_sdp(before[0])
            b.enable_mem_efficient_sdp(before[1])
            b.enable_math_sdp(before[2])

        return undo


# ---------------------------------------------------------------------- the step
class Bf16Autocast(TorchLever):
    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        torch = _torch()
        if job.model is None:
            return False, "no model given: autocast would change the step's own tensors blindly"
        if on_cuda(job):
            # emulated bf16 (PyTorch >= 2.3 reports Volta as "supported" by default) runs on
            # the FP32 pipeline: no tensor cores, so no gain to look for
            if getattr(torch.version, "hip", None) is None:
                major, _ = torch.cuda.get_device_capability()
                if major < 8:
                    return False, "this GPU has no BF16 tensor cores (Ampere or newer has them)"
            if not torch.cuda.is_bf16_supported():
                return False, "this GPU has no bf16"
            return True, "matmuls/convolutions in bf16 on the GPU's tensor cores"
        return True, "matmuls/convolutions in bf16 on the CPU (faster where the CPU has bf16 units)"

    def apply(self, job: TorchJob) -> Undo:
        torch = _torch()
        device = "cuda" if on_cuda(job) else "cpu"

        def wrap(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
            def step(batch: Any) -> Any:
                with torch.autocast(device, dtype=torch.bfloat16):
                    return fn(batch)

            return step

        job.wrappers.append(wrap)
        return lambda: job.wrappers.remove(wrap)


class ChannelsLast(TorchLever):
    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        if not _has(job, "Conv2d", "ConvTranspose2d"):
            return False, "the model has no 2-D convolution"
        torch = _torch()
        four = [p for p in job.model.parameters() if p.dim() == 4]
        if four and all(p.is_contiguous(memory_format=torch.channels_last) for p in four):
            return False, "the model's 4-D weights are already channels_last"
        return True, "2-D convolutions in NHWC (channels_last) memory format"

    def apply(self, job: TorchJob) -> Undo:
        torch = _torch()
        # each tensor's exact layout (strides), to put back as it was, whatever it was
        saved = {
            id(t): (t, tuple(t.stride()))
            for t in [*job.model.parameters(), *job.model.buffers()]
            if t.dim() == 4
        }
        job.model.to(memory_format=torch.channels_last)

        def to_nhwc(x: Any) -> Any:
            if isinstance(x, torch.Tensor) and x.dim() == 4:
                return x.contiguous(memory_format=torch.channels_last)
            if isinstance(x, list | tuple):
                return type(x)(to_nhwc(v) for v in x)
            if isinstance(x, dict):
                return {k: to_nhwc(v) for k, v in x.items()}
            return x

        def wrap(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
            return lambda batch: fn(to_nhwc(batch))

        job.wrappers.append(wrap)

        def undo() -> None:
            job.wrappers.remove(wrap)
            with torch.no_grad():
                for t, stride in saved.values():
                    if tuple(t.stride()) != stride:
                        back = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
                        back.copy_(t)
                        t.data = back

        return undo


# ---------------------------------------------------------------------- the optimizer
class ForeachOptimizer(TorchLever):
    """Multi-tensor (foreach) or fused optimizer step: one kernel per group of tensors instead
    of one per parameter."""

    def _mode(self, job: TorchJob) -> str | None:
        opt = job.optimizer
        if opt is None:
            return None
        defaults = getattr(opt, "defaults", {})
        if "fused" in defaults and type(opt).__name__ in ("Adam", "AdamW", "SGD", "Adagrad"):
            return "fused"
        if "foreach" in defaults:
            return "foreach"
        return None

    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        mode = self._mode(job)
        if mode is None:
            return False, "no torch.optim optimizer with a foreach/fused implementation given"
        groups = job.optimizer.param_groups
        if all(g.get(mode) for g in groups):
            return False, f"the optimizer already runs {mode}"
        n = sum(len(g["params"]) for g in groups)
        return True, f"{type(job.optimizer).__name__} over {n} parameter tensors, {mode} step"

    def apply(self, job: TorchJob) -> Undo:
        mode = self._mode(job)
        assert mode is not None
        groups = job.optimizer.param_groups
        before = [{k: v for k, v in g.items() if k != "params"} for g in groups]
        for g in groups:
            g[mode] = True
            if mode == "fused":
                g["foreach"] = False

        def undo() -> None:  # every key back as it was, present-but-None included
            for g, saved in zip(groups, before, strict=True):
                for k in [k for k in g if k != "params" and k not in saved]:
                    del g[k]
                g.update(saved)

        return undo


# ---------------------------------------------------------------------- the input pipeline
class LoaderWorkers(TorchLever):
    """Load batches in worker processes, a couple of batches ahead of the step."""

    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        dl: Any = job.batches
        if type(dl).__name__ != "DataLoader":
            return False, "the batches are not a torch DataLoader"
        if dl.num_workers > 0:
            return False, f"the DataLoader already has {dl.num_workers} workers"
        if getattr(dl, "_dataset_kind", 0) != 0:
            return False, "an IterableDataset: workers would each read the whole stream"
        return True, "batches loaded in the step's own process (num_workers=0)"

    def apply(self, job: TorchJob) -> Undo:
        old: Any = job.batches
        cores = usable_cores()
        new = rebuild_loader(
            old,
            num_workers=max(2, min(8, cores or 2)),
            prefetch_factor=2,
            persistent_workers=True,
            pin_memory=on_cuda(job),
        )
        job.batches = new

        def undo() -> None:
            job.batches = old
            shutdown_loader(new)

        return undo


class BatchSize(TorchLever):
    """Twice the samples per step: fewer, fuller steps (NUMERICS: what training computes
    changes — the learning rate is left as it is, and convergence is not judged here)."""

    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        dl: Any = job.batches
        if type(dl).__name__ != "DataLoader" or dl.batch_size is None:
            return False, "the batches are not a DataLoader with a batch_size to change"
        if job.samples_per_step != dl.batch_size:
            return False, (
                f"samples_per_step ({job.samples_per_step}) is not the loader's batch_size "
                f"({dl.batch_size}): time per sample could not be compared"
            )
        return True, f"batch_size {dl.batch_size} → {2 * dl.batch_size}"

    def apply(self, job: TorchJob) -> Undo:
        old: Any = job.batches
        samples = job.samples_per_step
        new = rebuild_loader(old, batch_size=2 * old.batch_size)
        job.batches, job.samples_per_step = new, 2 * samples

        def undo() -> None:
            job.batches, job.samples_per_step = old, samples
            shutdown_loader(new)

        return undo


def rebuild_loader(old: Any, **changes: Any) -> Any:
    """A DataLoader like ``old`` — dataset, how it batches (batch size and sampler, a custom
    batch sampler, or none), collate, workers and their set-up, generator, timeout — with
    ``changes`` applied."""
    torch = _torch()
    kw: dict[str, Any] = {
        "collate_fn": old.collate_fn,
        "num_workers": old.num_workers,
        "pin_memory": old.pin_memory,
        "timeout": old.timeout,
        "worker_init_fn": old.worker_init_fn,
        "generator": old.generator,
        "multiprocessing_context": old.multiprocessing_context,
    }
    if old.batch_size is not None:  # automatic batching from a sampler
        kw |= {"batch_size": old.batch_size, "sampler": old.sampler, "drop_last": old.drop_last}
    elif old.batch_sampler is not None:  # the user's own batch sampler
        kw |= {"batch_sampler": old.batch_sampler}
    else:  # no batching: samples one by one
        kw |= {"batch_size": None, "sampler": old.sampler}
    if old.num_workers > 0:
        kw |= {"prefetch_factor": old.prefetch_factor, "persistent_workers": old.persistent_workers}
    kw |= changes
    if kw.get("num_workers", 0) == 0:
        kw.pop("prefetch_factor", None)
        kw["persistent_workers"] = False
    return torch.utils.data.DataLoader(old.dataset, **kw)


def shutdown_loader(loader: Any) -> None:
    """End a DataLoader's persistent worker processes now (joined here), instead of whenever
    the garbage collector gets to its iterator — possibly in another thread, which then waits
    for the workers to exit."""
    it = getattr(loader, "_iterator", None)
    if it is not None:
        with contextlib.suppress(Exception):
            it._shutdown_workers()
        loader._iterator = None


class Compile(TorchLever):
    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        if job.model is None:
            return False, "no model given"
        if _version() < (2, 0):
            return False, "torch.compile needs torch 2.0 or newer"
        if getattr(job.model, "_compiled_call_impl", None) is not None:
            return False, "the model is already compiled (model.compile())"
        return True, (
            "torch.compile of the model (compile time is spent in untimed steps first; "
            "on a GPU with static shapes mode='reduce-overhead' also captures CUDA graphs)"
        )

    def apply(self, job: TorchJob) -> Undo:
        model = job.model
        before = getattr(model, "_compiled_call_impl", None)
        mode = "reduce-overhead" if on_cuda(job) else "default"
        # a model that draws random numbers (dropout) draws them, compiled, from Inductor's own
        # generator: the same RNG state gives other masks, and the correctness check compared
        # two different dropouts ("out differs by up to 0.0678"). Compiled with eager's random
        # ops instead, the masks are the baseline's (said in the lever's note).
        cfg = _inductor_config() if _draws_random(model) else None
        was = getattr(cfg, "fallback_random", None)
        if cfg is not None:
            cfg.fallback_random = True
        model.compile(mode=mode)  # in place: the user's references stay valid

        def undo() -> None:  # back to what it ran before; other compiled code is left alone
            model._compiled_call_impl = before
            if cfg is not None and was is not None:
                cfg.fallback_random = was

        return undo


def _draws_random(model: Any) -> bool:
    """Whether the model holds a dropout layer that draws in training (p > 0)."""
    torch = _torch()
    drop = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d,
            torch.nn.AlphaDropout, torch.nn.FeatureAlphaDropout)  # fmt: skip
    return any(isinstance(m, drop) and getattr(m, "p", 0) > 0 for m in model.modules())


def _inductor_config() -> Any:
    """torch._inductor.config, or None where this torch has none."""
    try:
        import torch._inductor.config as cfg
    except Exception:  # pragma: no cover - a torch without Inductor
        return None
    return cfg if hasattr(cfg, "fallback_random") else None


class LauncherOnly(TorchLever):
    """A setting read once at process start: the launcher sets it per trial."""

    def applicable(self, job: TorchJob) -> tuple[bool, str]:
        return False, (
            "read once when the process starts: only the launcher "
            "(gitm-tui --workload torch -- python SCRIPT) can try it, by relaunching"
        )

    def apply(self, job: TorchJob) -> Undo:  # pragma: no cover - never applicable in-process
        raise RuntimeError(self.applicable(job)[1])


#: the torch levers in the order the loop tries them (cheap and SAFE first)
TORCH_LEVERS: tuple[TorchLever, ...] = (
    CpuThreads(
        "cpu_threads",
        "Use every usable core for intra-op parallelism",
        "SAFE",
        "torch.set_num_threads(usable cores)",
    ),
    LoaderWorkers(
        "loader_workers",
        "Load batches in DataLoader worker processes",
        "SAFE",
        "num_workers, prefetch_factor=2, persistent workers (pin_memory on a GPU)",
        checkable=False,
        via="job.batches",
        replayed_as=("prefetch_depth",),
        numerics="exact",
    ),
    ForeachOptimizer(
        "fused_optimizer",
        "Multi-tensor (foreach) or fused optimizer step",
        "SAFE",
        "param_groups[...]['foreach'|'fused'] = True",
        replayed_as=("fused_optimizer",),
    ),
    CudnnBenchmark(
        "cudnn_benchmark",
        "cuDNN autotune",
        "SAFE",
        "torch.backends.cudnn.benchmark = True (autotuning runs in untimed steps first)",
        settle_steps=2,
        replayed_as=("cudnn_autotune",),
    ),
    ChannelsLast(
        "channels_last",
        "NHWC memory format for convolutions",
        "SAFE",
        "model.to(memory_format=torch.channels_last) and 4-D inputs converted",
        via="job.run_step",
        replayed_as=("channels_last",),
    ),
    SdpaFlash(
        "sdpa_flash",
        "Flash-attention SDPA backend",
        "SAFE",
        "torch.backends.cuda.enable_flash_sdp(True), mem-efficient off, math as fallback",
        replayed_as=("sdpa_flash",),
        numerics="fused",
    ),
    Tf32(
        "tf32",
        "TF32 tensor cores for FP32 matmuls and convolutions",
        "NUMERICS",
        "allow_tf32 for matmul and cuDNN; float32_matmul_precision('high')",
        replayed_as=("tf32_matmul",),
        numerics="reduced_precision",
    ),
    Bf16Autocast(
        "bf16_autocast",
        "bf16 autocast of the step",
        "NUMERICS",
        "torch.autocast(device, dtype=torch.bfloat16) around the step",
        via="job.run_step",
        replayed_as=("bf16_autocast",),
        numerics="reduced_precision",
    ),
    BatchSize(
        "batch_size",
        "Twice the batch per step",
        "NUMERICS",
        "DataLoader batch_size × 2 (learning rate unchanged)",
        checkable=False,
        via="job.batches",
        numerics="exact",
    ),
    Compile(
        "torch_compile",
        "Compile the model with torch.compile",
        "SAFE",
        "model.compile() (compilation runs in untimed steps first)",
        settle_steps=3,
        replayed_as=("cuda_graphs", "elementwise_fusion"),
        numerics="fused",
    ),
    LauncherOnly(
        "expandable_segments",
        "CUDA caching allocator with expandable segments",
        "SAFE",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        needs="launcher",
        numerics="exact",
    ),
)
