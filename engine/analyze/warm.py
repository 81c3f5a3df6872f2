"""`python -m engine.analyze.warm [analysis] [import]`: compile the kernels `analyze` uses into
numba's disk cache by running the production code on tiny inputs (engine.jit.compile_elsewhere
runs it in a child on a cold first run; see engine.jit)."""

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
    if not argv or any(k not in warmers for k in argv):
        print("usage: python -m engine.analyze.warm {analysis,import}…", file=sys.stderr)
        return 2
    from engine.jit import one_compiler

    with one_compiler("analyze"):  # a child already compiling: wait, then load what it compiled
        for kind in argv:
            warmers[kind]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
