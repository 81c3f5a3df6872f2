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

import contextlib
import copy
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.measure import steady_mean

#: (rtol, atol) a lever's check must meet, by safety class. SAFE levers keep numerics but may
#: reorder reductions (threads, fused kernels): float32 rounding-order differences stay far
#: below 1e-4 relative on one step. NUMERICS levers change precision on purpose (bf16 keeps 8
#: bits of mantissa, ~3 significant digits): 5e-2 relative is what one bf16 step of a small
#: model differs by, and a broken lever (wrong weights, skipped update) differs by far more.
#: units in the last place of a parameter that an update may differ by from rounding alone:
#: after − before is a difference of two rounded values (½ + ½ ulp) and the optimizer's own
#: arithmetic (Adam's moments, a reassociated gradient sum) adds a few more; 8 is generous for
#: that and still far below a skipped or wrong update, which differs by the update itself
ROUNDING_ULPS = 8
TOLERANCE: dict[str, tuple[float, float]] = {
    "SAFE": (1e-4, 1e-6),
    "NUMERICS": (5e-2, 1e-3),
    "PRIVILEGED": (1e-4, 1e-6),
}


class TorchJobError(ValueError):
    """The job cannot be run or measured (one line for the user)."""


class BudgetEnded(TorchJobError):
    """The run's time budget ended before a measurement: not the program's failure. A trial it
    cuts short is rolled back and the loop goes on to its report."""


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
    #: learning-rate schedulers the step advances (snapshot and restored with the rest)
    schedulers: list[Any] = field(default_factory=list)
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
                list(getattr(obj, "schedulers", []) or []),
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


def _tensors(job: TorchJob) -> dict[str, Any]:
    """Every tensor of the job a step may change, by a stable name: the model's parameters
    and buffers (persistent or not) and their gradients, and any tensor the optimizer updates
    that the model does not register (a Python list of layers)."""
    torch = _torch()
    out: dict[str, Any] = {}
    seen: set[int] = set()
    if job.model is not None:
        for name, t in job.model.named_parameters(remove_duplicate=True):
            out[f"param {name}"] = t
            seen.add(id(t))
        for name, t in job.model.named_buffers(remove_duplicate=True):
            out[f"buffer {name}"] = t
            seen.add(id(t))
        for mod_name, mod in job.model.named_modules():  # plain tensor attributes (an EMA)
            for k, v in vars(mod).items():
                if isinstance(v, torch.Tensor) and not k.startswith("_") and id(v) not in seen:
                    out[f"attribute {mod_name + '.' if mod_name else ''}{k}"] = v
                    seen.add(id(v))
    if job.optimizer is not None:
        for gi, g in enumerate(job.optimizer.param_groups):
            for pi, t in enumerate(g["params"]):
                if id(t) not in seen:
                    out[f"optimizer param {gi}.{pi}"] = t
                    seen.add(id(t))
    for name, t in list(out.items()):
        if isinstance(t, torch.nn.Parameter | torch.Tensor) and t.grad is not None:
            out[f"grad of {name}"] = t.grad
    return out


def _layout(t: Any) -> tuple[Any, ...]:
    return (tuple(t.shape), t.dtype, tuple(t.stride()), t.device)


def _groups(opt: Any) -> list[dict[str, Any]]:
    """An optimizer's hyper-parameters per group (every key but ``params``)."""
    return [{k: copy.deepcopy(v) for k, v in g.items() if k != "params"} for g in opt.param_groups]


@dataclass
class Snapshot:
    """The job's numeric state at one moment, restored into the job's own tensors bit for bit:
    parameters, buffers (persistent or not), gradients, parameters only the optimizer holds,
    the optimizer's state and hyper-parameters, learning-rate schedulers (``job.schedulers``),
    torch's CPU/CUDA generators, Python's and NumPy's global RNGs, and the global torch flags.
    What it cannot see — a step's own Python counters, the user's own generator objects, files
    it writes — is outside its promise (the docs say so)."""

    tensors: dict[str, Any]
    layouts: dict[str, tuple[Any, ...]]
    grads_absent: set[str]
    opt_state: dict[int, dict[str, Any]]
    opt_groups: list[dict[str, Any]] | None
    schedulers: list[dict[str, Any]]
    rng: Any
    cuda_rng: Any
    py_rng: Any
    np_rng: Any
    flags: dict[str, Any]

    @classmethod
    def take(cls, job: TorchJob) -> Snapshot:
        import random

        import numpy as np

        torch = _torch()
        live = _tensors(job)
        absent = {n for n, t in live.items() if not n.startswith("grad of") and _grad_absent(t)}
        opt_state: dict[int, dict[str, Any]] = {}
        groups = None
        if job.optimizer is not None:
            opt_state = {id(p): _clone(st) for p, st in job.optimizer.state.items()}
            groups = _groups(job.optimizer)
        return cls(
            {n: _clone(t) for n, t in live.items()},
            {n: _layout(t) for n, t in live.items()},
            absent,
            opt_state,
            groups,
            [copy.deepcopy(s.state_dict()) for s in job.schedulers],
            torch.get_rng_state(),
            torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            random.getstate(),
            np.random.get_state(),
            global_flags(),
        )

    def restore(self, job: TorchJob) -> None:
        """Put the values back into the job's own tensors (identity and a lever's memory format
        stay: values are copied in place)."""
        import random

        import numpy as np

        torch = _torch()
        live = _tensors(job)
        with torch.no_grad():
            for n, v in self.tensors.items():
                if n in live and live[n].shape == v.shape:
                    live[n].copy_(v)
                elif n.startswith("grad of ") and n[8:] in live:  # zeroed to None meanwhile
                    live[n[8:]].grad = _clone(v)
            for n in self.grads_absent:  # a gradient the step created is dropped again
                t = live.get(n)
                if t is not None:
                    t.grad = None
            if job.optimizer is not None:
                params = {id(p): p for g in job.optimizer.param_groups for p in g["params"]}
                state = job.optimizer.state
                for p in [p for p in list(state) if id(p) not in self.opt_state]:
                    del state[p]
                for pid, saved in self.opt_state.items():
                    p = params.get(pid)
                    if p is None:
                        continue
                    cur = state.get(p)
                    if cur is None or set(cur) != set(saved):
                        state[p] = _clone(saved)
                        continue
                    for k, v in saved.items():  # in place: references to them stay valid
                        if isinstance(v, torch.Tensor) and cur[k].shape == v.shape:
                            cur[k].copy_(v)
                        else:
                            cur[k] = _clone(v)
                if self.opt_groups is not None:
                    for g, saved_g in zip(job.optimizer.param_groups, self.opt_groups, strict=True):
                        for k in [k for k in g if k != "params" and k not in saved_g]:
                            del g[k]
                        g.update(copy.deepcopy(saved_g))
        for sched, sd in zip(job.schedulers, self.schedulers, strict=True):
            sched.load_state_dict(copy.deepcopy(sd))
        torch.set_rng_state(self.rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)
        random.setstate(self.py_rng)
        np.random.set_state(self.np_rng)

    def differences(self, job: TorchJob) -> list[str]:
        """What differs, bit for bit, between this snapshot and the job now (empty: nothing):
        every tensor it saved (values and layout), gradients, the optimizer's state and
        hyper-parameters, the schedulers, the RNGs and the global flags."""
        import random

        import numpy as np

        torch = _torch()
        out: list[str] = []
        live = _tensors(job)
        for n, v in self.tensors.items():
            w = live.get(n)
            if w is None:
                out.append(f"{n} is gone")
            elif w.shape != v.shape or w.dtype != v.dtype or not torch.equal(w, v):
                out.append(n)
            elif _layout(w) != self.layouts[n]:
                out.append(f"memory layout of {n}")
        out += [f"{n} appeared" for n in live if n not in self.tensors]
        if job.optimizer is not None:
            params = {id(p): p for g in job.optimizer.param_groups for p in g["params"]}
            state = {id(p): st for p, st in job.optimizer.state.items()}
            if set(state) != set(self.opt_state):
                out.append("optimizer state entries")
            for pid, saved in self.opt_state.items():
                cur = state.get(pid, {})
                for k, v in saved.items():
                    w = cur.get(k)
                    same = (
                        isinstance(w, torch.Tensor) and w.shape == v.shape and torch.equal(w, v)
                        if isinstance(v, torch.Tensor)
                        else w == v
                    )
                    if not same:
                        out.append(f"optimizer state {k} of a parameter")
                        break
            if self.opt_groups is not None and _groups(job.optimizer) != self.opt_groups:
                out.append("optimizer hyper-parameters (param_groups)")
            del params
        for i, (sched, sd) in enumerate(zip(job.schedulers, self.schedulers, strict=True)):
            if sched.state_dict() != sd:
                out.append(f"scheduler {i}")
        if not torch.equal(torch.get_rng_state(), self.rng):
            out.append("torch RNG")
        if random.getstate() != self.py_rng:
            out.append("Python RNG")
        st: Any = np.random.get_state()
        if (
            st[0] != self.np_rng[0]
            or not np.array_equal(st[1], self.np_rng[1])
            or st[2:] != self.np_rng[2:]
        ):
            out.append("NumPy RNG")
        now = global_flags()
        out += [
            f"flag {k}: {self.flags[k]} → {now[k]}" for k in self.flags if now[k] != self.flags[k]
        ]
        return out


def _grad_absent(t: Any) -> bool:
    return getattr(t, "requires_grad", False) and t.grad is None


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
        """Mean time per sample (ns) over the steady steps (a warm-up left in the block, found
        by MSER truncation, is dropped); NaN when the measurement failed."""
        if not self.ok:
            return math.nan
        return steady_mean(self.step_ns)[0] / max(1, self.samples_per_step)


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
        if isinstance(src, Iterator):  # a generator or stream: measuring would eat its data
            raise TorchJobError(
                "the job's batches are a one-shot iterator (a generator or stream): give a "
                "re-iterable (a DataLoader, a list) or a zero-argument batch factory"
            )
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
        return TorchMeasurement(times, job.samples_per_step, f"the step raised {one_line(e)}")
    return TorchMeasurement(times, job.samples_per_step)


# ---------------------------------------------------------------------- correctness
def one_line(e: BaseException, limit: int = 240) -> str:
    """An exception as one short line: its type and the start of its message, whitespace
    collapsed (a compiler's error spans dozens of lines; the run folder's log has them all)."""
    text = " ".join(str(e).split())
    out = f"{type(e).__name__}: {text}" if text else type(e).__name__
    return out if len(out) <= limit else out[: limit - 1] + "…"


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

    @property
    def checkable(self) -> bool:
        """Whether the reference holds anything to compare (a step returning nothing, with no
        model given, cannot be judged: said so, never passed silently)."""
        return bool(self.values)

    def compare(self, got: dict[str, Any], numerics: str) -> str:
        """'' when ``got`` matches within the tolerance of the lever's ``numerics`` class
        (manifests/correctness.json), else why not and by how much."""
        return self.judge(got, numerics)[0]

    def judge(self, got: dict[str, Any], numerics: str) -> tuple[str, str]:
        """(why not, '' when it matches; what was measured, for the report): outputs and
        buffers within rtol/atol; gradients within rtol of themselves plus rtol of the model's
        largest gradient; updates where the gradient stands above that noise within rtol of the
        update plus the parameter's rounding, the rest counted (an adaptive optimizer turns a
        gradient of rounding noise into a full-size update of either sign)."""
        torch = _torch()
        from engine.manifest import load_correctness

        params = load_correctness()
        cls = params.classes.get(_CLASS_OF.get(numerics, numerics)) or params.classes["reordered"]
        name = _CLASS_OF.get(numerics, numerics)
        rtol, atol = cls.rtol, cls.atol
        if set(got) != set(self.values):
            return "the step returned different outputs", ""
        grads = {k: v for k, v in self.values.items() if k.startswith("grad of ")}
        g_max = max((float(v.abs().max()) for v in grads.values() if v.numel()), default=0.0)
        noise = rtol * g_max  # a gradient below this is rounding noise at this class
        worst_g = 0.0
        excused = checked = 0
        for k, ref in self.values.items():
            v = got[k]
            if v.shape != ref.shape:
                return f"{k}: shape {tuple(v.shape)} instead of {tuple(ref.shape)}", ""
            if not torch.isfinite(v).all() and torch.isfinite(ref).all():
                return f"{k}: not finite", ""
            if k.startswith("rounding of ") or not v.numel():
                continue
            if k.startswith("grad of "):
                diff = (v - ref).abs()
                bound = rtol * (ref.abs() + g_max) + 1e-30
                if bool((diff > bound).any()):
                    return (
                        f"{k} differs by up to {float(diff.max()):.3g}, "
                        f"{float(diff.max()) / max(g_max, 1e-30):.2g} of the model's largest "
                        f"gradient ({g_max:.3g}); {name} allows {rtol:g} of it",
                        "",
                    )
                worst_g = max(worst_g, float(diff.max()) / max(g_max, 1e-30))
                continue
            if k.startswith("update of "):
                scale = float(ref.abs().max())
                ulp = self.values.get("rounding of " + k[len("update of ") :])
                diff = (v - ref).abs()
                slack = params.rounding_ulps * ulp if ulp is not None else torch.zeros_like(diff)
                bound = rtol * scale + 1e-12 + slack
                grad = self.values.get("grad of " + k[len("update of ") :])
                judged = torch.ones_like(diff, dtype=torch.bool)
                if grad is not None and g_max > 0 and grad.shape == diff.shape:
                    judged = grad.abs() > noise  # where the gradient is more than noise
                excused += int((~judged).sum())
                checked += int(judged.sum())
                over = (diff > bound) & judged
                if bool(over.any()):
                    worst = int((diff - bound).masked_fill(~judged, -1).flatten().argmax())
                    d, b = float(diff.flatten()[worst]), float(bound.flatten()[worst])
                    return (
                        f"{k} differs by up to {d:.3g} where its gradient is more than rounding "
                        f"noise (the update is ≤ {scale:.3g}; {name} allows {rtol:g} of it plus "
                        f"{params.rounding_ulps} units in the last place of the parameter: "
                        f"{d:.3g} against {b:.3g} allowed)",
                        "",
                    )
                continue
            if not torch.allclose(v, ref, rtol=rtol, atol=atol, equal_nan=True):
                diff_v = (v - ref).abs().max().item()
                scale_v = ref.abs().max().item()
                return (
                    f"{k} differs by up to {diff_v:.3g} (|ref| ≤ {scale_v:.3g}; "
                    f"{name} allows rtol {rtol:g}, atol {atol:g})",
                    "",
                )
        said = f"within the {name} tolerance (rtol {rtol:g}, manifests/correctness.json)"
        if grads:
            said += f"; gradients within {worst_g:.2g} of the largest"
        if excused:
            said += (
                f"; {excused:,} of {excused + checked:,} update elements not compared: their "
                "gradient is inside that rounding noise (an adaptive optimizer makes any sign "
                "of it a full-size step)"
            )
        return "", said


#: the safety classes the check once took, read as numerics classes (the torch launcher's
#: coarse Δsum check and older callers still pass them)
_CLASS_OF = {"SAFE": "reordered", "PRIVILEGED": "reordered", "NUMERICS": "reduced_precision"}


def check_values(job: TorchJob, batch: Any) -> dict[str, Any]:
    """Run one step on ``batch``; return what it returned, the update it made to each
    parameter (after − before: a skipped or wrong update shows here, whatever the weights'
    size) and the floating buffers it left (running statistics)."""
    params: dict[str, Any] = {}
    if job.model is not None:
        params = dict(job.model.named_parameters())
    before = {k: p.detach().float().cpu().clone() for k, p in params.items()}
    out = _flatten(job.run_step(batch))
    for k, p in params.items():
        after = p.detach().float().cpu()
        out[f"update of {k}"] = after - before[k]
        if p.grad is not None and p.grad.layout == _torch().strided:  # as the step left it
            out[f"grad of {k}"] = p.grad.detach().float().cpu().clone()
        # one unit in the last place of each parameter in its own dtype (the update check's
        # rounding allowance; engine.workloads.torch_job.Reference.compare)
        out[f"rounding of {k}"] = after.abs() * float(_torch().finfo(p.dtype).eps)
    if job.model is not None:
        for k, b in job.model.named_buffers():
            if b.is_floating_point():
                out[f"buffer {k}"] = b.detach().float().cpu().clone()
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
        quiet = _profiler_chatter_kept_off_the_terminal()
        with quiet, profile(activities=acts, record_shapes=True, with_flops=True) as prof:
            for _ in range(steps):
                job.run_step(batches.next())
                _sync(cuda)
                prof.step()
        prof.export_chrome_trace(str(path))
    finally:
        snap.restore(job)


#: what libkineto writes straight to file descriptor 2 on every capture (torch 2.13 on the CPU,
#: and from a worker thread): start/stop probes and a thread-affinity complaint about its own
#: init callback — no message for the user, and on the dashboard it would paint over the screen
_KINETO_CHATTER = re.compile(
    rb"^(USDT:.*SyncActivityProfilerHandler|ERROR: External init callback)"
)


@contextlib.contextmanager
def _profiler_chatter_kept_off_the_terminal() -> Iterator[None]:
    """While the profiler runs, file descriptor 2 points at a temporary file (libkineto's C++
    writes there, under Python's sys.stderr); afterwards every line of it but libkineto's
    chatter is written back to the real stderr, in order — another thread's line written in
    the meantime is delayed by the capture (under a second), never lost."""
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 (a daemon): nothing to keep off
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [
                ln for ln in tmp.read().splitlines(keepends=True) if not _KINETO_CHATTER.match(ln)
            ]
            if kept:
                with contextlib.suppress(OSError):
                    os.write(2, b"".join(kept))
