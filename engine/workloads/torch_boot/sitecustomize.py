"""gitm-tui's step finder, loaded by Python at start-up in a script the torch launcher runs
(``gitm-tui --workload torch -- python train.py``); the script itself is not changed.

When ``torch`` is imported it:

* applies the process-level settings the launcher asks for in the environment
  (``GITM_TORCH_THREADS``, ``GITM_TORCH_INTEROP``, ``GITM_TORCH_TF32``,
  ``GITM_TORCH_CUDNN_BENCHMARK``, ``GITM_TORCH_FLUSH_DENORMAL``; unset or "default": unchanged);
* registers a global optimizer-step post hook (``torch.optim.optimizer.
  register_optimizer_step_post_hook``) that writes one line per ``optimizer.step()`` to the file
  descriptor ``GITM_STEP_FD``: ``S <perf_counter_ns>``; after the first step also
  ``C <Δsum> <Δsum of squares> <sum of squares> <Σ eps|p|> <Σ eps p²>`` (what the first update did to the
  parameters of the optimizer) and ``G <Σ|g|> <Σg²> <max|g|>`` (the gradients it applied), for
  the launcher's correctness check, ``D cuda|cpu`` (where the
  parameters live) and ``T <threads> <interop threads>`` (what the process runs with). Only
  the first optimizer to step is timed (a GAN's second optimizer steps in the same step); only
  the launched process writes (not its children), and only while the descriptor is still the
  launcher's pipe. On CUDA the
  hook waits for the device before reading the clock (``GITM_STEP_SYNC``, on by default), so a
  step's time includes its kernels.

A script without an optimizer (inference) marks its steps itself with ``engine.step()``, which
writes the same ``S`` line. Only the standard library is used before torch is imported, and an
existing ``sitecustomize`` further on the path still runs.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import stat
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
# read once and removed from the environment: a child the script starts is not the process
# the launcher measures, and must not write into whatever file gets that descriptor number
_FD = os.environ.pop("GITM_STEP_FD", None)
_PID = os.getpid()
_state: dict[str, object] = {"steps": 0, "opt": None, "off": False}


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISFIFO(st.st_mode) else None


_PIPE = _identity(int(_FD)) if _FD is not None and _FD.isdigit() else None


def _write(line: str) -> None:
    """Write one line to the launcher's pipe — only from the launched process, only while the
    descriptor is still that pipe (a script may close it and reuse the number for a file)."""
    if _PIPE is None or _state["off"] or os.getpid() != _PID:
        return
    fd = int(_FD or -1)
    if _identity(fd) != _PIPE:
        _state["off"] = True  # the pipe is gone: stop for good, the script goes on
        return
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:  # the launcher stopped reading: measuring is over
        _state["off"] = True


def gitm_step() -> None:
    """``engine.step()`` lands here when this finder is loaded: one step, timed now."""
    _write(f"S {time.perf_counter_ns()}")


def _setting(name: str) -> str | None:
    v = os.environ.get(name, "default")
    return None if v in ("", "default") else v


def _configure(torch: object) -> None:
    """Settings, then the step hook; a failure is reported to the launcher (``E`` line) and
    the script runs on unchanged: finding steps must never break the user's program."""
    try:
        _settings_and_hook()
    except Exception as e:
        _fail(e)


def _settings_and_hook() -> None:
    import torch as t  # loaded by now
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    if (v := _setting("GITM_TORCH_THREADS")) is not None:
        t.set_num_threads(int(v))
    if (v := _setting("GITM_TORCH_INTEROP")) is not None:
        # already started by the time we run: it stays as it is
        with contextlib.suppress(RuntimeError):
            t.set_num_interop_threads(int(v))
    if (v := _setting("GITM_TORCH_TF32")) is not None:
        t.backends.cuda.matmul.allow_tf32 = t.backends.cudnn.allow_tf32 = v == "1"
    if (v := _setting("GITM_TORCH_CUDNN_BENCHMARK")) is not None:
        t.backends.cudnn.benchmark = v == "1"
    if (v := _setting("GITM_TORCH_FLUSH_DENORMAL")) is not None:
        t.set_flush_denormal(v == "1")
    sync = os.environ.get("GITM_STEP_SYNC", "1") == "1"

    def moments(params: list) -> tuple[float, float]:
        """Sum and sum of squares of every parameter, in float64 where the device has it
        (float32 otherwise: MPS has no float64)."""
        with t.no_grad():
            try:
                xs = [p.detach().double() for p in params]
            except (RuntimeError, TypeError):
                xs = [p.detach().float() for p in params]
            return sum(float(x.sum()) for x in xs), sum(float(x.pow(2).sum()) for x in xs)

    def rounding(params: list) -> tuple[float, float]:
        """Σ eps·|p| and Σ eps·p² over every parameter, eps of its own dtype: one unit in the
        last place of each, summed — the scale by which rounding alone (a reassociated
        gradient sum) can move the two sums above."""
        with t.no_grad():
            r1 = r2 = 0.0
            for p in params:
                eps = float(t.finfo(p.dtype).eps) if p.is_floating_point() else 0.0
                x = p.detach().float().abs()
                r1 += eps * float(x.sum())
                r2 += eps * float(x.pow(2).sum())
            return r1, r2

    def grad_moments(params: list) -> tuple[float, float, float]:
        """Σ|g|, Σg² and max|g| of the gradients the first step is about to apply: what the
        launcher's check compares (an adaptive optimizer turns a gradient of rounding noise
        into a full-size update of either sign, so updates differ where gradients agree)."""
        with t.no_grad():
            g1 = g2 = gm = 0.0
            for p in params:
                g = p.grad
                if g is None or g.is_sparse:
                    continue
                try:
                    x = g.detach().double().abs()
                except (RuntimeError, TypeError):
                    x = g.detach().float().abs()
                g1 += float(x.sum())
                g2 += float(x.pow(2).sum())
                gm = max(gm, float(x.max())) if x.numel() else gm
            return g1, g2, gm

    def before_step(opt, args, kwargs):  # type: ignore[no-untyped-def]
        try:
            if _state["opt"] is None:  # the first optimizer to step is the one timed
                _state["opt"] = id(opt)
            if id(opt) == _state["opt"] and _state["steps"] == 0:
                params = [p for g in opt.param_groups for p in g["params"]]
                _state["before"] = moments(params)
                _state["grads"] = grad_moments(params)
        except Exception as e:  # never into the user's step
            _fail(e)

    def after_step(opt, args, kwargs):  # type: ignore[no-untyped-def]
        try:
            if id(opt) != _state["opt"]:  # a second optimizer (a GAN's): same step, not timed
                return
            params = [p for g in opt.param_groups for p in g["params"]]
            cuda = bool(params) and params[0].is_cuda
            if cuda and sync:
                t.cuda.synchronize()
            _write(f"S {time.perf_counter_ns()}")
            _state["steps"] = int(_state["steps"]) + 1
            if _state["steps"] == 1 and params:
                b = _state.get("before") or (0.0, 0.0)
                s, q = moments(params)
                r1, r2 = rounding(params)
                # what the first update did to the parameters' sum and sum of squares, and how
                # much of that rounding alone can move
                _write(f"C {s - b[0]!r} {q - b[1]!r} {q!r} {r1!r} {r2!r}")
                g = _state.get("grads")
                if g is not None:
                    _write(f"G {g[0]!r} {g[1]!r} {g[2]!r}")
                _write(f"D {'cuda' if cuda else 'cpu'}")
                _write(f"T {t.get_num_threads()} {t.get_num_interop_threads()}")
        except Exception as e:  # never into the user's step
            _fail(e)

    register_optimizer_step_pre_hook(before_step)
    register_optimizer_step_post_hook(after_step)


def _fail(e: Exception) -> None:
    """Report the finder's own failure once and stop timing; the script runs on."""
    _write(f"E {type(e).__name__}: {e}".replace("\n", " ")[:300])
    _state["off"] = True


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Runs _configure once ``torch`` itself has finished importing."""

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module):  # type: ignore[no-untyped-def]
            run(module)
            _configure(module)

        loader.exec_module = exec_module
        return spec


if _PIPE is not None:
    sys.meta_path.insert(0, _AfterTorch())


def _chain() -> None:
    """Run the next sitecustomize on the path (a site's own), as if we were not here."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_chain()
