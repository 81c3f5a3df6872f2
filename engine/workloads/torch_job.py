"""A real PyTorch program optimized in its own process (``engine.optimize(job, …)``).

The user gives their step as a small protocol (``TorchJob``): a callable that runs one step on
a batch, where its batches come from (a factory or an iterable such as a DataLoader) and, where
levers need them, the model and the optimizer. This module measures that step for real and
keeps the program's state exact around every measurement:

* **time** — per-step wall time after warm-up steps (on a GPU the clock waits for the device
  first: ``torch.cuda.synchronize`` before reading it, so queued kernels are counted);
* **state** — a measurement never moves the user's training: the model's parameters and
  buffers, the optimizer's state and the RNG are snapshot before it and restored after, so
  the steps a measurement runs are thrown away (``Snapshot``); global torch flags are read
  with it, so a rollback can be checked flag by flag;
* **correctness** — the reference is one step on a fixed batch from the baseline state: what
  the step returned (loss or outputs) and the parameters it left. A lever's run of the same
  step from the same state must match within the tolerance of its safety class
  (``TOLERANCE``); a NaN, a shape change or a bigger difference fails it.

torch is imported only here and in the torch levers, never by the core install.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: (rtol, atol) a lever's check must meet, by safety class. SAFE levers keep numerics but may
#: reorder reductions (threads, fused kernels): float32 rounding-order differences stay far
#: below 1e-4 relative on one step. NUMERICS levers change precision on purpose (bf16 keeps 8
#: bits of mantissa, ~3 significant digits): 5e-2 relative is what one bf16 step of a small
#: model differs by, and a broken lever (wrong weights, skipped update) differs by far more.
TOLERANCE: dict[str, tuple[float, float]] = {
    "SAFE": (1e-4, 1e-6),
    "NUMERICS": (5e-2, 1e-3),
    "PRIVILEGED": (1e-4, 1e-6),
}


class TorchJobError(ValueError):
    """The job cannot be run or measured (one line for the user)."""


@dataclass
class TorchJob:
    """The user's program, as the loop needs it.

    ``step(batch)`` runs one training or inference step and returns its loss or outputs (a
    tensor, a number, or a tuple/dict of them). ``batches`` is a zero-argument factory or an
    iterable (a DataLoader is read as the program reads it, restarted when it ends). ``model``
    and ``optimizer`` are optional: levers that change them apply only when they are given.
    ``samples_per_step`` turns step time into time per sample in the report."""

    step: Callable[[Any], Any]
    batches: Callable[[], Any] | Iterable[Any]
    model: Any = None
    optimizer: Any = None
    name: str = "torch job"
    samples_per_step: int = 1
    #: step wrappers levers install (autocast, input memory format): outermost last
    wrappers: list[Callable[[Callable[[Any], Any]], Callable[[Any], Any]]] = field(
        default_factory=list
    )

    @classmethod
    def of(cls, obj: Any) -> TorchJob:
        """A TorchJob from what the user passed: a TorchJob, an object with ``step`` and
        ``batches`` (and optionally ``model``/``optimizer``), or a bare zero-argument callable
        (its own batches)."""
        if isinstance(obj, TorchJob):
            return obj
        if hasattr(obj, "step") and hasattr(obj, "batches"):
            return cls(
                obj.step,
                obj.batches,
                getattr(obj, "model", None),
                getattr(obj, "optimizer", None),
                getattr(obj, "name", type(obj).__name__),
                int(getattr(obj, "samples_per_step", 1)),
            )
        if callable(obj):
            return cls(lambda _b: obj(), lambda: None, name=getattr(obj, "__name__", "step"))
        raise TorchJobError(
            "optimize() needs a workload name, a TorchJob, an object with step(batch) and "
            "batches, or a zero-argument callable"
        )

    def run_step(self, batch: Any) -> Any:
        fn = self.step
        for wrap in self.wrappers:
            fn = wrap(fn)
        return fn(batch)


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - the [torch] extra is not installed
        raise TorchJobError(
            "this needs PyTorch: pip install 'gitm-tui[torch]' (torch is not in the core install)"
        ) from e
    return torch


def on_cuda(job: TorchJob) -> bool:
    """Whether the job's model lives on a CUDA device (else: the CPU)."""
    torch = _torch()
    if job.model is None or not torch.cuda.is_available():
        return False
    return any(p.is_cuda for p in job.model.parameters())


# ---------------------------------------------------------------------- global flags
def global_flags() -> dict[str, Any]:
    """The process-wide torch settings levers may change (compared after a rollback)."""
    torch = _torch()
    return {
        "num_threads": torch.get_num_threads(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda.matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
        "sdp.flash": bool(torch.backends.cuda.flash_sdp_enabled()),
        "sdp.mem_efficient": bool(torch.backends.cuda.mem_efficient_sdp_enabled()),
        "sdp.math": bool(torch.backends.cuda.math_sdp_enabled()),
    }


# ---------------------------------------------------------------------- snapshots
def _clone(x: Any) -> Any:
    torch = _torch()
    if isinstance(x, torch.Tensor):
        return x.detach().clone(memory_format=torch.preserve_format)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_clone(v) for v in x)
    return copy.deepcopy(x)


@dataclass
class Snapshot:
    """The job's numeric state at one moment: restored exactly (bit for bit)."""

    model: dict[str, Any] | None
    optimizer: dict[Any, Any] | None
    rng: Any
    cuda_rng: Any
    flags: dict[str, Any]

    @classmethod
    def take(cls, job: TorchJob) -> Snapshot:
        torch = _torch()
        model = None if job.model is None else _clone(job.model.state_dict())
        opt = None
        if job.optimizer is not None:
            opt = {p: _clone(s) for p, s in job.optimizer.state.items()}
        cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        return cls(model, opt, torch.get_rng_state(), cuda_rng, global_flags())

    def restore(self, job: TorchJob) -> None:
        """Put the values back into the job's own tensors (a lever's memory format stays)."""
        torch = _torch()
        if self.model is not None:
            with torch.no_grad():
                live = job.model.state_dict()
                for k, v in self.model.items():
                    live[k].copy_(v)
        if self.optimizer is not None:
            job.optimizer.state.clear()
            for p, s in self.optimizer.items():
                job.optimizer.state[p] = _clone(s)
        torch.set_rng_state(self.rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)

    def differences(self, job: TorchJob) -> list[str]:
        """What differs, bit for bit, between this snapshot and the job now (empty: nothing)."""
        torch = _torch()
        out: list[str] = []
        if self.model is not None:
            live = job.model.state_dict()
            for k, v in self.model.items():
                w = live[k]
                if w.shape != v.shape or w.dtype != v.dtype or not torch.equal(w, v):
                    out.append(f"model {k}")
                elif w.is_contiguous() != v.is_contiguous():
                    out.append(f"memory format of {k}")
        now = global_flags()
        out += [
            f"flag {k}: {self.flags[k]} → {now[k]}" for k in self.flags if now[k] != self.flags[k]
        ]
        return out


# ---------------------------------------------------------------------- measuring
@dataclass
class TorchMeasurement:
    """Per-step times of one measurement (after warm-up); ``error`` when a step failed."""

    step_ns: list[float]
    samples_per_step: int
    error: str = ""
    trace: Any = None  # no device trace on the CPU
    telemetry: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.step_ns)

    @property
    def mean_ns(self) -> float:
        """Mean time per sample (ns); NaN when the measurement failed."""
        if not self.ok:
            return math.nan
        return sum(self.step_ns) / len(self.step_ns) / max(1, self.samples_per_step)


class Batches:
    """The job's batches, read the way the program reads them (restarted when they end)."""

    def __init__(self, job: TorchJob) -> None:
        self.job = job
        self._it: Iterator[Any] | None = None
        self._src: Any = job.batches

    def reset(self) -> None:
        self._it = None

    def next(self) -> Any:
        src = self.job.batches
        if callable(src) and not hasattr(src, "__iter__"):
            return src()
        if self._src is not src:  # a lever replaced the loader: read the new one
            self._it, self._src = None, src
        for _ in range(2):
            if self._it is None:
                self._it = iter(src)
            try:
                return next(self._it)
            except StopIteration:
                self._it = None
        raise TorchJobError("the job's batches are empty")


def _sync(cuda: bool) -> None:
    if cuda:
        _torch().cuda.synchronize()


def run_steps(job: TorchJob, batches: Batches, warmup: int, steps: int) -> TorchMeasurement:
    """Time ``steps`` steps after ``warmup`` untimed ones; the job's state is left changed
    (callers restore a Snapshot)."""
    cuda = on_cuda(job)
    times: list[float] = []
    try:
        for _ in range(warmup):
            job.run_step(batches.next())
        _sync(cuda)
        for _ in range(steps):
            t0 = time.perf_counter_ns()
            job.run_step(batches.next())
            _sync(cuda)
            times.append(float(time.perf_counter_ns() - t0))
    except TorchJobError:
        raise
    except Exception as e:  # the user's step raised under this configuration
        return TorchMeasurement(times, job.samples_per_step, f"the step raised {e!r}"[:300])
    return TorchMeasurement(times, job.samples_per_step)


# ---------------------------------------------------------------------- correctness
def _flatten(x: Any, prefix: str = "out") -> dict[str, Any]:
    torch = _torch()
    if isinstance(x, torch.Tensor):
        return {prefix: x.detach().float().cpu()}
    if isinstance(x, int | float):
        return {prefix: torch.tensor(float(x))}
    if isinstance(x, dict):
        out: dict[str, Any] = {}
        for k, v in x.items():
            out |= _flatten(v, f"{prefix}.{k}")
        return out
    if isinstance(x, list | tuple):
        out = {}
        for i, v in enumerate(x):
            out |= _flatten(v, f"{prefix}[{i}]")
        return out
    return {}


@dataclass
class Reference:
    """One step on a fixed batch from the baseline state: what it returned and left."""

    batch: Any
    values: dict[str, Any]

    @classmethod
    def record(cls, job: TorchJob, batch: Any) -> Reference:
        return cls(batch, check_values(job, batch))

    def compare(self, got: dict[str, Any], safety: str) -> str:
        """'' when ``got`` matches within the safety class's tolerance, else why not."""
        torch = _torch()
        rtol, atol = TOLERANCE.get(safety, TOLERANCE["SAFE"])
        if set(got) != set(self.values):
            return "the step returned different outputs"
        for k, ref in self.values.items():
            v = got[k]
            if v.shape != ref.shape:
                return f"{k}: shape {tuple(v.shape)} instead of {tuple(ref.shape)}"
            if not torch.isfinite(v).all() and torch.isfinite(ref).all():
                return f"{k}: not finite"
            if not torch.allclose(v, ref, rtol=rtol, atol=atol, equal_nan=True):
                diff = (v - ref).abs().max().item()
                scale = ref.abs().max().item()
                return (
                    f"{k} differs by up to {diff:.3g} (|ref| ≤ {scale:.3g}; "
                    f"{safety} allows rtol {rtol:g}, atol {atol:g})"
                )
        return ""


def check_values(job: TorchJob, batch: Any) -> dict[str, Any]:
    """Run one step on ``batch`` and return what it returned and the parameters it left."""
    out = _flatten(job.run_step(batch))
    if job.model is not None:
        for k, v in job.model.state_dict().items():
            if v.is_floating_point():
                out[f"param {k}"] = v.detach().float().cpu().clone()
    return out


# ---------------------------------------------------------------------- device trace
def capture(job: TorchJob, batches: Batches, path: Any, steps: int = 10) -> None:
    """Write a Kineto trace of ``steps`` steps to ``path`` (torch.profiler, CPU + CUDA, shapes
    and FLOPs recorded, one ``ProfilerStep#`` range per step); the job's state is restored."""
    _torch()  # the one-line error when torch is missing
    from torch.profiler import ProfilerActivity, profile

    cuda = on_cuda(job)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    snap = Snapshot.take(job)
    try:
        run_steps(job, batches, 2, 0)  # warm: allocator, autotune, lazy modules
        with profile(activities=acts, record_shapes=True, with_flops=True) as prof:
            for _ in range(steps):
                job.run_step(batches.next())
                _sync(cuda)
                prof.step()
        prof.export_chrome_trace(str(path))
    finally:
        snap.restore(job)
