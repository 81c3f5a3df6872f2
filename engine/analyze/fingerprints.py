"""The workload fingerprint of a trace file (engine.optimizer.fingerprint): a device trace's
kernels, or a CPU-only PyTorch trace's operators (engine.analyze.breakdown.cpu_trace), with the op shapes
the profile recorded (engine.trace.kineto.op_shapes). What `gitm-tui analyze` writes to
analysis.json, what the optimize loops compare a trial's capture with, and what the ranks of one
job are checked by."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.analyze.breakdown.cpu_trace import _nesting
from engine.optimizer.fingerprint import (
    Fingerprint,
    OperatorCalls,
    fingerprint_of_cpu,
    fingerprint_of_trace,
)
from engine.trace.formats import carries, format_of
from engine.trace.kineto.cpu_events import CpuEvents, read_cpu_events
from engine.trace.kineto.op_shapes import OpShapes, read_op_shapes
from engine.trace.limits import ReadLimits
from engine.trace.trace import Trace

__all__ = ["fingerprint_file", "operator_calls", "shapes_of", "trace_fingerprint"]

_STEP = "ProfilerStep#"


def operator_calls(ev: CpuEvents, source: str = "") -> OperatorCalls:
    """A CPU-only trace's operator calls with their self time (cpu_trace's per-thread nesting)
    and its ProfilerStep spans, as engine.optimizer.fingerprint takes them."""
    self_ns, _top = _nesting(ev)
    ops = np.flatnonzero(ev.is_op)
    is_step = np.array([n.startswith(_STEP) for n in ev.names], bool)
    rng = np.flatnonzero(~ev.is_op & is_step[ev.name]) if len(ev) else np.zeros(0, np.int64)
    return OperatorCalls(
        names=ev.names,
        name=ev.name[ops],
        start_ns=ev.start[ops],
        self_ns=self_ns[ops],
        steps=[(int(ev.start[i]), int(ev.end[i])) for i in rng.tolist()],
        source=source,
    )


def shapes_of(path: str | Path, limits: ReadLimits | None = None) -> OpShapes | None:
    """The op shapes recorded in a Kineto JSON trace; None for a format that has none (Nsight
    Systems SQLite). TraceImportError (one line) as the readers raise it."""
    p = Path(path)
    if "shapes" not in format_of(p).carries:
        return None
    return read_op_shapes(p, limits)


def trace_fingerprint(trace: Trace) -> Fingerprint:
    """The fingerprint of an imported device trace, with the shapes its importer kept (a Kineto
    trace's: the ops whose work it derives; none from Nsight exports or CUPTI captures)."""
    return fingerprint_of_trace(trace)


def fingerprint_file(path: str | Path, limits: ReadLimits | None = None) -> Fingerprint:
    """The fingerprint of a trace file: its kernels where it has device rows, else (a Kineto
    trace with no GPU row) its CPU operators. TraceImportError (one line) for a file that cannot
    be read."""
    from engine.trace.read import read_trace

    p = Path(path)
    trace = read_trace(p)
    props = trace.device_properties
    if len(trace.segments) or not carries(props.get("format"), "cpu operators"):
        return fingerprint_of_trace(trace)
    ev = read_cpu_events(p, limits)
    # every op's shapes (a CPU trace's ops are its workload; the importer kept only those whose
    # work it derives): one more pass over a CPU trace, which is small
    fp = fingerprint_of_cpu(operator_calls(ev, str(p)), shapes_of(p, limits))
    rank, world = props.get("rank"), props.get("world_size")
    if rank is None and world is None:
        return fp
    from dataclasses import replace

    return replace(fp, process=replace(fp.process, rank=rank, world_size=world))


def main(argv: list[str] | None = None) -> int:
    """``python -m engine.analyze.fingerprints TRACE [OTHER]``: each trace's fingerprint in a
    line and, given two, their distance and what differs. Exit 2 for bad arguments, 3 for a
    file that cannot be read (one line on stderr; gitm_tui/exit_codes.py's USAGE and INPUT)."""
    import argparse
    import sys

    from engine.optimizer.fingerprint import distance
    from engine.text import clean
    from engine.trace.errors import TraceImportError

    ap = argparse.ArgumentParser(
        prog="python -m engine.analyze.fingerprints", description=main.__doc__
    )
    ap.add_argument("traces", nargs="+", metavar="TRACE")
    ap.add_argument("--json", action="store_true", help="the fingerprints as JSON lines")
    ns = ap.parse_args(argv)
    if len(ns.traces) > 2:
        ap.error("one trace, or two to compare")
    fps = []
    for path in ns.traces:
        try:
            fps.append(fingerprint_file(path))
        except (TraceImportError, OSError) as e:
            print(f"fingerprints: error: {clean(str(e), 400)}", file=sys.stderr)
            return 3
    for path, fp in zip(ns.traces, fps, strict=True):
        if ns.json:
            print(fp.to_json())
        else:
            print(f"{clean(path, 120)}: {fp.summary_line()}")
    if len(fps) == 2 and not ns.json:
        d = distance(fps[0], fps[1])
        print(
            d.line().split(": ", 1)[0] + ": " + ("same workload" if d.same else "another workload")
        )
        for r in d.reasons:
            print(f"  {r}")
        for u in d.unknown:
            print(f"  unknown: {u}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
