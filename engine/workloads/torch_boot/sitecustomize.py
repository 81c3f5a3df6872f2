"""gitm-tui's step finder, loaded by Python at start-up in a script the torch launcher runs
(``gitm-tui --workload torch -- python train.py``); the script itself is not changed.

When ``torch`` is imported it:

* applies the process-level settings the launcher asks for in the environment
  (``GITM_TORCH_THREADS``, ``GITM_TORCH_INTEROP``, ``GITM_TORCH_TF32``,
  ``GITM_TORCH_CUDNN_BENCHMARK``, ``GITM_TORCH_FLUSH_DENORMAL``; unset or "default": unchanged);
* registers a global optimizer-step post hook (``torch.optim.optimizer.
  register_optimizer_step_post_hook``) that writes one line per ``optimizer.step()`` to the file
  descriptor ``GITM_STEP_FD``: ``S <perf_counter_ns>``; after the first step also
  ``C <checksum>`` (the sum and absolute sum of every parameter the optimizer holds, for the
  launcher's correctness check), ``D cuda|cpu`` (where the parameters live) and
  ``T <threads> <interop threads>`` (what the process runs with). On CUDA the
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
import sys
import time

_FD = os.environ.get("GITM_STEP_FD")
_HERE = os.path.dirname(os.path.abspath(__file__))
_state = {"steps": 0}


def _write(line: str) -> None:
    if _FD is None:
        return
    # the launcher stopped reading: measuring is over, the script goes on
    with contextlib.suppress(OSError):
        os.write(int(_FD), (line + "\n").encode())


def _setting(name: str) -> str | None:
    v = os.environ.get(name, "default")
    return None if v in ("", "default") else v


def _configure(torch: object) -> None:
    """Settings, then the step hook; a failure is reported to the launcher (``E`` line) and
    the script runs on unchanged: finding steps must never break the user's program."""
    try:
        _settings_and_hook()
    except Exception as e:
        _write(f"E {type(e).__name__}: {e}".replace("\n", " ")[:300])


def _settings_and_hook() -> None:
    import torch as t  # loaded by now
    from torch.optim.optimizer import register_optimizer_step_post_hook

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

    def after_step(opt: object, args: object, kwargs: object) -> None:
        params = [p for g in opt.param_groups for p in g["params"]]  # type: ignore[attr-defined]
        cuda = bool(params) and params[0].is_cuda
        if cuda and sync:
            t.cuda.synchronize()
        _write(f"S {time.perf_counter_ns()}")
        _state["steps"] += 1
        if _state["steps"] == 1 and params:
            with t.no_grad():
                s = sum(float(p.detach().double().sum()) for p in params)
                a = sum(float(p.detach().double().abs().sum()) for p in params)
            _write(f"C {s!r} {a!r}")
            _write(f"D {'cuda' if cuda else 'cpu'}")
            _write(f"T {t.get_num_threads()} {t.get_num_interop_threads()}")

    register_optimizer_step_post_hook(after_step)


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


if _FD is not None:
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
