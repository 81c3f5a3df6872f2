"""`python -m engine.analyze.warm [analysis] [import]`: compile the kernels `analyze` uses into
numba's disk cache by running the production code on tiny inputs (engine.jit.compile_elsewhere
runs it in a child on a cold first run; see engine.jit). Where cores allow, each kind compiles
in a process of its own (`--part KIND`), side by side."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def kernels(kind: str) -> tuple[Any, ...]:
    """The kernels whose cache files say whether ``kind`` is compiled."""
    if kind == "import":
        from engine.trace import idle_calls, order
        from engine.trace.kineto import json_scan, shapes

        return (
            json_scan.scan_stream,
            json_scan.extract_fields,
            json_scan.shape_keys,
            json_scan.same_shapes,
            shapes._sweep,
            idle_calls._runs,
            order._stable_order,
        )
    from engine.eesm import embed, kappa, posterior, viterbi
    from engine.schedule import dag

    return (embed.observe, viterbi.viterbi_groups, posterior.posterior_groups,
            kappa._kappa_groups, dag._replay)  # fmt: skip


def warm_analysis() -> None:
    """Regime decoding, κ and every lever's replay (analyze_trace) on two simulated iterations."""
    from engine.analyze.compute import analyze_trace
    from engine.device.simulator import simulate
    from engine.trace.trace import Trace

    batch, names = simulate("hft-lob", 2)
    analyze_trace(Trace(segments=batch.segments, names=names, host=batch.host, source="warm-up"))


#: two framework ops of known work (engine.trace.kineto.shapes) and the kernel one launches: the
#: reader's shape kernels run only on such ops, which the generated ranks do not have
_OPS = [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1 + i, "dur": 9,
     "args": {"External id": i, "Input Dims": [[2, 2], [2, 2]], "Input type": ["float", "float"]}}
    for i in (1, 2)
] + [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 4,
     "dur": 2, "args": {"correlation": 1, "External id": 2}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 6, "dur": 3,
     "args": {"correlation": 1, "stream": 7, "device": 0}},
] + [  # calls that launch nothing, back to back: merged (engine.trace.idle_calls)
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaGetDevice", "pid": 1, "tid": 1, "ts": ts,
     "dur": 1, "args": {"correlation": c}}
    for ts, c in ((20, 5), (22, 6))
]  # fmt: skip


def warm_import() -> None:
    """The Kineto reader on a small generated trace, and on one with framework ops."""
    import json

    from engine.analyze.breakdown.steady import exact_at
    from engine.analyze.ranks.synth_ranks import write_ranks
    from engine.trace.kineto.kineto import read_kineto

    with tempfile.TemporaryDirectory(prefix="gitm-warm-") as d:
        (path,) = write_ranks(Path(d), ranks=1, steps=1)
        read_kineto(path, merge_idle=exact_at)  # as analyze reads: idle calls merged
        ops = Path(d) / "ops.json"
        ops.write_text(json.dumps({"traceEvents": _OPS}))
        read_kineto(ops, merge_idle=exact_at)
    # the run-merging sort runs only on long columns (engine.trace.order.SHORT)
    import numpy as np

    from engine.trace.order import _stable_order

    _stable_order(np.array([2, 1], np.int64), np.empty(2, np.int32), np.empty(2, np.int32))


def main(argv: list[str]) -> int:
    with contextlib.suppress(OSError, AttributeError):  # no nice() off POSIX
        os.nice(10)  # for the next run: the run that started it comes first on a busy core
    warmers = {"analysis": warm_analysis, "import": warm_import}
    part = argv[:1] == ["--part"]  # one kind of a warm-up whose parent holds the lock
    kinds = argv[1:] if part else argv
    if not kinds or any(k not in warmers for k in kinds) or (part and len(kinds) != 1):
        print("usage: python -m engine.analyze.warm {analysis,import}… | --part KIND",
              file=sys.stderr)  # fmt: skip
        return 2
    if part:
        if not _ends_with_parent():
            return 1  # its parent is gone (killed): the next run starts a warm-up of its own
        warmers[kinds[0]]()
        return 0
    from engine.jit import one_compiler

    with one_compiler("analyze"):  # a child already compiling: wait, then load what it compiled
        if len(kinds) > 1 and side_by_side_here() and _side_by_side(kinds):
            return 0
        for kind in kinds:  # one core (or a part failed): what is missing compiles here
            warmers[kind]()
    return 0


#: a warm-up of several kinds compiles them side by side (a process each) only on more cores
#: than this, so that the run that started it keeps a core of its own. On 2 cores, runs typed
#: one after another had the run and two compilers on them: each run of the window took as long
#: as before (4.2-5.2 s against 2.1-5.7 s), the window was no shorter (23.8 s against 22.1 s)
#: and the compilers held 632 MB against 358 MB (benchmarks/results/compile_window.md); alone,
#: the warm-up took 13.5 s instead of 24 s.
SIDE_BY_SIDE_CORES = 2


def _ends_with_parent() -> bool:
    """On Linux, have this process stopped (SIGTERM) when the warm-up that started it ends —
    killed by a run that gave up on it, the lock it held released: else this part would go on
    compiling beside the next run's warm-up. False when that parent is gone already."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    return parent != 1 and os.getppid() == parent


def side_by_side_here() -> bool:
    """Whether a warm-up of several kinds started from this process compiles them side by side
    (its reader's kernels in a process of their own from the start)."""
    from engine.jit import usable_cores

    return usable_cores() > SIDE_BY_SIDE_CORES


def _side_by_side(kinds: list[str]) -> bool:
    """Compile each kind in a process of its own, all at once (this one waits; numba's compiler
    holds the GIL: processes, not threads); whether every one succeeded. The reader's kernels
    and the analysis's share none of ours, so neither compiles what the other does: 13.5 s
    side by side instead of 24 s in turn, alone on this 2-core machine."""
    import subprocess

    quiet = subprocess.DEVNULL
    root = Path(__file__).resolve().parents[2]  # as compile_elsewhere: this checkout's engine
    children: list[subprocess.Popen[bytes]] = []
    try:
        for kind in kinds:
            argv = [sys.executable, "-m", "engine.analyze.warm", "--part", kind]
            children.append(
                subprocess.Popen(argv, stdin=quiet, stdout=quiet, stderr=quiet, cwd=root)
            )
    except OSError:
        pass
    ok = len(children) == len(kinds)
    return all([c.wait() == 0 for c in children]) and ok


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
