"""``--workload torch -- python train.py ARGS``: an unmodified PyTorch script, optimized by
relaunching it with process-level levers.

The script runs directly (no shell, its own process group) with ``torch_boot/`` first on its
``PYTHONPATH``: that folder's ``sitecustomize`` hooks ``optimizer.step()`` once torch is
imported and writes each step's time to a pipe this module reads (engine/workloads/torch_boot/
sitecustomize.py says exactly what it does). A measurement is one launch: the first ``warmup``
steps are skipped, then the launch's warm-up (start-up, allocator, oneDNN/autotune set-up, page
faults) is *detected* in its step times (MSER truncation, engine.measure) and left
out; the launch is stopped once ``steps`` steady steps follow it (or at 4× the minimum) — a
training run is sampled, not run to its end. A script with no optimizer marks its steps with
``engine.step()``.

Levers are what a fresh process can be given without touching the code: torch's thread
counts, TF32, cuDNN autotune and denormal flushing (set by the step finder when torch loads)
and the CUDA caching allocator's ``expandable_segments``. A lever's rollback is simply the next
launch without it. What needs the live objects (channels_last, autocast, a fused optimizer,
DataLoader workers, torch.compile) needs the embedded API: ``engine.optimize(TorchJob(...))``.

Correctness: the step finder reports a checksum of the parameters after the first step. Two
baseline launches that agree make it a check (a lever's launch must agree within its safety
class's tolerance); a script that does not seed its RNG gives two different checksums, and then
the check is said to be unavailable rather than guessed.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.jit import usable_cores
from engine.measure import steady_mean, steady_start
from engine.workloads.command import (
    TERM_GRACE_S,
    ChoiceLever,
    CommandError,
    CommandRun,
    CommandSpec,
    CommandState,
    CommandWorkload,
    _OutputScanner,
    read_output,
)
from engine.workloads.torch_job import ROUNDING_ULPS, TOLERANCE

BOOT_DIR = Path(__file__).with_name("torch_boot")


@dataclass(frozen=True)
class LaunchLever:
    """A process-level lever: an environment variable and its candidate values."""

    name: str
    env: str
    values: tuple[str, ...]  # the first is the baseline ("default": left as the script has it)
    safety: str
    what: str
    cuda_only: bool = False


def launch_levers() -> tuple[LaunchLever, ...]:
    cores = usable_cores()
    threads = ("default", "1", str(cores)) if cores > 1 else ("default", "1")
    return (
        LaunchLever(
            "threads",
            "GITM_TORCH_THREADS",
            threads,
            "SAFE",
            "torch.set_num_threads: fewer threads win on small ops (less fork-join overhead)",
        ),
        LaunchLever(
            "interop_threads",
            "GITM_TORCH_INTEROP",
            ("default", "1"),
            "SAFE",
            "torch.set_num_interop_threads(1): no inter-op pool competing for the cores",
        ),
        LaunchLever(
            "flush_denormal",
            "GITM_TORCH_FLUSH_DENORMAL",
            ("default", "1"),
            "NUMERICS",
            "torch.set_flush_denormal(True): denormals become zero (slow paths on x86 avoided)",
        ),
        LaunchLever(
            "tf32",
            "GITM_TORCH_TF32",
            ("default", "1"),
            "NUMERICS",
            "TF32 tensor cores for FP32 matmuls and convolutions",
            cuda_only=True,
        ),
        LaunchLever(
            "cudnn_benchmark",
            "GITM_TORCH_CUDNN_BENCHMARK",
            ("default", "1"),
            "SAFE",
            "cuDNN autotune (torch.backends.cudnn.benchmark)",
            cuda_only=True,
        ),
        LaunchLever(
            "expandable_segments",
            "PYTORCH_CUDA_ALLOC_CONF",
            ("default", "expandable_segments:True"),
            "SAFE",
            "CUDA caching allocator with expandable segments (read once at start-up)",
            cuda_only=True,
        ),
    )


class TorchLaunchWorkload(CommandWorkload):
    """Runs the script for real, one launch per measurement; its metric is time per step."""

    kind = "torch"
    name = "torch"

    def __init__(self, argv: tuple[str, ...], warmup: int = 1, steps: int = 30) -> None:
        self.levers = {lv.name: lv for lv in launch_levers()}
        spec = CommandSpec(
            argv=argv,
            metric=r"(\d+)",  # unused: the metric is the step finder's clock
            levers=tuple(
                ChoiceLever(lv.name, "env", lv.env, lv.values) for lv in self.levers.values()
            ),
        )
        super().__init__(spec)
        self.warmup, self.steps = warmup, steps
        self.device: str | None = None  # cuda | cpu, once a launch has reported it
        #: lever values the baseline already runs with (its thread counts), once reported
        self.defaults: dict[str, str] = {}
        self.reference: tuple[float, float] | None = None
        #: the baseline's first gradients (Σ|g|, Σg²): what a trial's are held to
        self.grad_reference: tuple[float, float] | None = None
        self.check_note = ""  # why correctness cannot be checked ('' while it can)

    def safety(self, state: CommandState) -> str:
        """The strictest class among the levers ``state`` moves off their baseline."""
        changed = [n for n, v in state.choice if v != self.levers[n].values[0]]
        return "NUMERICS" if any(self.levers[n].safety != "SAFE" for n in changed) else "SAFE"

    def argv_env(self, state: CommandState) -> tuple[list[str], dict[str, str]]:
        argv, env = super().argv_env(state)
        for name, value in state.choice:
            if value == "default":  # as the script would have it
                key = self.levers[name].env
                if key in os.environ:
                    env[key] = os.environ[key]
                else:
                    env.pop(key, None)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(BOOT_DIR), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
        )
        return argv, env

    def run_once(self, state: CommandState) -> CommandRun:
        """One launch: step times read from the step finder's pipe until enough are seen."""
        refused = self.refusal()
        if refused is not None:
            return refused
        argv, env = self.argv_env(state)
        r, w = os.pipe()
        env["GITM_STEP_FD"] = str(w)
        t0 = time.monotonic()
        try:
            p = self.start(argv, env, pass_fds=(w,))
        except CommandError:
            os.close(r)
            raise
        finally:
            os.close(w)
        steps: list[int] = []
        info: dict[str, str] = {}

        def read_steps() -> None:
            buf = b""
            with os.fdopen(r, "rb", buffering=0) as f:
                for chunk in iter(lambda: f.read(4096), b""):
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        kind, _, rest = line.decode(errors="replace").partition(" ")
                        if kind == "S" and rest.isdigit():
                            steps.append(int(rest))
                        elif kind in ("C", "D", "E", "G", "T"):
                            info[kind] = rest

        sink, log = self.output_log()
        scan = _OutputScanner(self._metric, None, sink)
        step_reader = threading.Thread(target=read_steps, name="torch steps", daemon=True)
        step_reader.start()
        readers = [step_reader, read_output(p, scan)]
        need = self.warmup + self.steps + 1
        cap = 4 * need

        def enough() -> bool:
            n = len(steps)
            if n < need:
                return False
            if n >= cap:
                return True
            durations = np.diff(np.asarray(steps[self.warmup : n], dtype=np.float64))
            return len(durations) - steady_start(durations) >= self.steps

        ended = self.watch(p, t0, enough=enough)
        for t in readers:
            t.join(timeout=TERM_GRACE_S)
        scan.close()
        wall = time.monotonic() - t0
        tail = scan.tail
        if "D" in info:
            self.device = info["D"]
        if "T" in info and state == self.base:
            self.defaults = dict(
                zip(("threads", "interop_threads"), info["T"].split(), strict=False)
            )
        if ended and ended != "sampled":
            return CommandRun(None, wall, False, ended, tail, log)
        if not ended and p.returncode != 0:
            return CommandRun(None, wall, False, f"exit status {p.returncode}", tail, log)
        timed = steps[self.warmup :]
        if len(timed) < 2:
            return CommandRun(
                None,
                wall,
                False,
                f"{len(steps)} steps seen (need at least {self.warmup + 2}): no optimizer.step() "
                "or engine.step() reached the step finder"
                + (
                    f" (the step finder failed: {info['E']})"
                    if "E" in info
                    else ""
                    if steps
                    else " — does the script import torch and step an optimizer?"
                ),
                tail,
                log,
            )
        durations = np.diff(np.asarray(timed, dtype=np.float64))
        per_step, _dropped = steady_mean(durations)
        wrong = (
            self._check_grads(info["G"], state)
            if "G" in info
            else self._check_params(info.get("C"), state)
        )
        if wrong:
            return CommandRun(
                per_step, wall, False, f"correctness check failed: {wrong}", tail, log
            )
        return CommandRun(float(per_step), wall, True, "", tail, log)

    def _check_grads(self, line: str, state: CommandState) -> str:
        """'' when the first step's gradients (Σ|g| and Σg², which the step finder reports)
        match the baseline's within the tolerance of what the lever does to the arithmetic
        (manifests/correctness.json: SAFE levers reorder sums, NUMERICS ones reduce
        precision); else by how much. The gradients, not the update: an adaptive optimizer
        (Adam) makes a gradient of rounding noise a full-size step of either sign, so a
        correct lever's first update differed (threads=1 on a Conv+BatchNorm+Adam script)."""
        if self.check_note:
            return ""
        try:
            g1, g2 = (float(x) for x in line.split()[:2])
        except ValueError:
            return ""
        if self.grad_reference is None:
            if self.safety(state) == "SAFE":
                self.grad_reference = (g1, g2)
            return ""
        from engine.manifest import load_correctness

        name = "reordered" if self.safety(state) == "SAFE" else "reduced_precision"
        rtol = load_correctness().classes[name].rtol
        r1, r2 = self.grad_reference
        off = [
            (what, got, ref)
            for what, got, ref in (("Σ|g|", g1, r1), ("Σg²", g2, r2))
            if abs(got - ref) > rtol * max(abs(ref), 1e-300)
        ]
        if not off:
            return ""
        what, got, ref = off[0]
        if state == self.base:  # the baseline disagrees with itself: not deterministic
            self.check_note = (
                f"not checkable: two baseline launches' first gradients differ ({what} "
                f"{ref:.9g} vs {got:.9g}): the script does not seed its RNG, or its data order "
                "varies"
            )
            return ""
        return (
            f"the first gradients differ ({what} {got:.9g} vs baseline {ref:.9g}, "
            f"{abs(got - ref) / max(abs(ref), 1e-300):.2g} of it; {name} allows {rtol:g})"
        )

    def _check_params(self, checksum: str | None, state: CommandState) -> str:
        """'' when the first update's effect on the parameters (Δ of their sum and of their sum
        of squares) matches the baseline's within the safety class's tolerance, or when the
        check is unavailable (``check_note`` says why). A coarse check: two numbers, not every
        parameter — it sees a skipped or rescaled update, not every wrong one."""
        if checksum is None or self.check_note:
            return ""
        try:
            nums = [float(x) for x in checksum.split()]
            ds, dq = nums[0], nums[1]
        except (ValueError, IndexError):
            return ""
        # rounding alone (a reassociated gradient sum) moves the sums by up to ROUNDING_ULPS
        # units in the last place of every parameter: Σ eps|p| for the sum, 2 Σ eps p² for the
        # sum of squares (d(p²) = 2p dp); a skipped or rescaled update moves them far more
        r1, r2 = (nums[3], nums[4]) if len(nums) >= 5 else (0.0, 0.0)
        if self.reference is None:
            if self.safety(state) == "SAFE":
                self.reference = (ds, dq)
            return ""
        rtol, _atol = TOLERANCE[self.safety(state)]
        rs, rq = self.reference
        off = [
            (name, got, ref)
            for name, got, ref, slack in (
                ("Δsum", ds, rs, ROUNDING_ULPS * r1),
                ("Δsum of squares", dq, rq, 2 * ROUNDING_ULPS * r2),
            )
            if abs(got - ref) > rtol * max(abs(ref), 1e-300) + slack + 1e-12
        ]
        if not off:
            return ""
        if state == self.base:  # the baseline disagrees with itself: not deterministic
            self.check_note = (
                "not checkable: two baseline launches' first updates differ "
                f"({off[0][0]} {off[0][2]:.9g} vs {off[0][1]:.9g}): the script does not seed its "
                "RNG, or its data order varies"
            )
            return ""
        name, got, ref = off[0]
        return (
            f"the first update differs ({name} {got:.9g} vs baseline {ref:.9g}; "
            f"{self.safety(state)} allows rtol {rtol:g})"
        )
