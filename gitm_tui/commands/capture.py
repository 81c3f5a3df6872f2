"""`gitm-tui capture -- python PROGRAM`: run a program under CUPTI and stream its kernels."""

from __future__ import annotations

import os
from collections.abc import Sequence

from gitm_tui.commands.common import PROG, Parser, UsageError, error, say
from gitm_tui.exit_codes import ExitCode


def cmd_capture(argv: Sequence[str]) -> ExitCode:
    """Run a Python program in-process under CUPTI capture (like `python -m cProfile`)."""
    import json

    from engine.trace.cupti.cupti import CuptiUnavailable, capture, load_cupti, run_python_program

    p = Parser(
        prog=f"{PROG} capture",
        description="Run a Python program in this process under CUPTI capture: its kernels, copies "
        "and syncs stream out decoded into regimes (JSON lines on stdout), and the trace is saved in "
        "the run store for `gitm-tui analyze` (and its --ui screen).",
    )
    p.add_argument("--flush", type=float, default=0.5, help="seconds between CUPTI flushes")
    p.add_argument("--ui", action="store_true", help="stream into the dashboard instead of stdout")
    p.add_argument("program", nargs="+", help="after '--': python script.py ARGS | -m module ARGS")
    ns = p.parse_args(argv)
    prog = list(ns.program)
    if os.path.basename(prog[0]).startswith("python"):
        prog = prog[1:]
    if not prog:
        raise UsageError("capture needs a Python program: -- python train.py ARGS")
    if prog[0] == "-m" and len(prog) < 2:
        raise UsageError("-m needs a module name")
    if prog[0] not in ("-m", "-c") and not prog[0].endswith(".py") and not os.path.isfile(prog[0]):
        raise UsageError(
            f"capture runs a Python program in-process; {prog[0]!r} is not one "
            "(for other programs: nsys profile + gitm-tui analyze)"
        )
    try:
        load_cupti()
    except CuptiUnavailable as e:
        error(f"capture: {e.reason} — fix: {e.remedy}")
        return ExitCode.BACKEND
    if ns.ui:
        from engine.runtime import RunConfig
        from gitm_tui.app import run_dashboard

        cfg = RunConfig(
            workload="capture",
            budget_s=24 * 3600.0,
            capture_program=tuple(prog),
            capture_flush_s=ns.flush,
            optimize=False,
            device="auto",
        )
        return run_dashboard(cfg)
    from engine.eesm.live import LiveDecoder
    from engine.regimes import label_name
    from engine.store.runs import new_run_id, run_path

    run_dir = run_path(new_run_id())
    out = run_dir / "trace.json"
    decoder = LiveDecoder(use_numba=False)

    def emit(finals, names):  # type: ignore[no-untyped-def]
        for f in finals:
            rec = {
                "v": 1,
                "type": "decoded",
                "stream": f.stream,
                "labels": [label_name(int(x)) for x in f.labels],
                "names": [names[int(i)] for i in f.name],
            }
            print(json.dumps(rec), flush=True)

    def on_batch(seg, names):  # type: ignore[no-untyped-def]
        emit(decoder.push(seg), names)

    say(f"capturing {' '.join(prog)}; trace → {out}")
    try:
        with capture(out, flush_interval_s=ns.flush, on_batch=on_batch) as cap:
            code = run_python_program(prog)
    except CuptiUnavailable as e:
        error(f"capture: {e.reason} — fix: {e.remedy}")
        return ExitCode.BACKEND
    emit(decoder.flush(), cap.names)  # the rows the fixed lag still held
    for note in cap.notes:
        say(note)
    n = len(cap.trace().segments)
    say(f"captured {n} device rows; analyze with: {PROG} analyze {out}")
    return code  # type: ignore[return-value]  # the program's own exit status
