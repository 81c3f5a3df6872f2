"""`gitm-tui audit`: the EESM audit ledger, its verification, its screen and the paper."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from engine.text import clean
from gitm_tui.commands.common import (
    PROG,
    Parser,
    UsageError,
    error,
    first_line,
    need_terminal,
    say,
)
from gitm_tui.exit_codes import ExitCode

LEDGER_NAME = "audit_ledger.json"


def cmd_audit(argv: Sequence[str]) -> ExitCode:
    """EESM audit: do-operators × pipeline variants → a ledger; --verify re-runs one."""
    from engine.study.audit import MAX_SEEDS, read_ledger, run_audit, verify, write_ledger

    p = Parser(
        prog=f"{PROG} audit",
        description="Perturb a corpus with the do-operators (timestamp jitter, stream "
        "re-interleaving, kernel fusion), decode it with the full pipeline, its ablations and the "
        "raw baseline, and write audit_ledger.json; --verify re-runs a ledger and names every "
        "number that differs.",
    )
    p.add_argument(
        "traces", nargs="*", help="trace files (default: the calibrated synthetic corpus)"
    )
    p.add_argument("--corpus", default=None, help="'calibrated' (synthetic, from the simulator)")
    p.add_argument("--seeds", type=int, default=5, help="seeds per corpus item (default 5)")
    p.add_argument(
        "--out",
        default=LEDGER_NAME,
        help=f"ledger file, or a directory to write {LEDGER_NAME} into (default: ./{LEDGER_NAME})",
    )
    p.add_argument("--verify", type=Path, metavar="LEDGER", help="re-run this ledger and compare")
    p.add_argument(
        "--paper",
        action="store_true",
        help="regenerate paper/EESM_GPU_TELEMETRY.md and paper/reference_tables.json "
        "(calibrated corpus + the shared real traces)",
    )
    p.add_argument("--paper-dir", type=Path, default=Path("paper"), help=argparse.SUPPRESS)
    p.add_argument("--ui", type=Path, metavar="LEDGER", help="open the audit screen on a ledger")
    ns = p.parse_args(argv)
    if ns.ui:
        need_terminal("audit --ui")
        try:
            ledger = read_ledger(ns.ui)
        except (OSError, ValueError) as e:
            error(f"{ns.ui}: not a readable audit ledger ({first_line(e)})")
            return ExitCode.INPUT
        from gitm_tui.app import make_audit_app

        make_audit_app(ledger, str(ns.ui)).run()
        return ExitCode.OK
    if ns.paper:
        from engine.study.paper import default_traces, write_paper

        traces = [Path(t) for t in ns.traces] or default_traces(Path(__file__).resolve().parents[1])
        md, tables = write_paper(ns.paper_dir, traces, ns.seeds)
        say(f"wrote {md} and {tables} ({len(traces)} real traces)")
        return ExitCode.OK
    if ns.verify:
        try:
            ledger = read_ledger(ns.verify)
        except (OSError, ValueError) as e:
            error(f"{ns.verify}: not a readable audit ledger ({first_line(e)})")
            return ExitCode.INPUT
        from engine.study.audit import claims_problem
        from engine.trace.errors import TraceImportError

        problem = claims_problem(ledger)
        if problem is not None:  # said before any work is redone
            error(f"{ns.verify}: REJECTED — {problem}")
            return ExitCode.INPUT
        items, seeds = len(ledger.corpus), ledger.seeds
        say(f"{ns.verify}: re-running its audit ({items} corpus item(s) × {seeds} seed(s))…")
        try:
            diffs = verify(ledger)
        except (TraceImportError, OSError) as e:  # the ledger names a corpus we cannot read
            error(f"{ns.verify}: its corpus cannot be read: {first_line(e)}")
            return ExitCode.INPUT
        if diffs:
            say(
                f"{ns.verify}: REJECTED — {len(diffs)} value(s) differ from a fresh run; "
                f"first: {diffs[0]}"
            )
            for d in diffs[:20]:
                print(clean(d))  # quotes the ledger's values
            return ExitCode.INPUT
        say(f"{ns.verify}: verified — a fresh run reproduces every value")
        return ExitCode.OK
    if not 1 <= ns.seeds <= MAX_SEEDS:
        raise UsageError(f"--seeds must be between 1 and {MAX_SEEDS}")
    spec = ([ns.corpus] if ns.corpus else []) + list(ns.traces)
    if ns.corpus not in (None, "calibrated"):
        raise UsageError(f"unknown corpus {ns.corpus!r}: 'calibrated', or give trace paths")
    spec = spec or ["calibrated"]
    from engine.trace.errors import TraceImportError

    try:
        ledger = run_audit(spec, ns.seeds)
    except TraceImportError as e:
        error(str(e))
        return ExitCode.INPUT
    out = ledger_path(ns.out)
    try:
        write_ledger(ledger, out)
    except OSError as e:
        error(f"cannot write {out}: {e.strerror or e}")
        return ExitCode.INPUT
    say(f"wrote {out} ({len(ledger.results)} operator × variant rows)")
    return ExitCode.OK


def ledger_path(out: str) -> Path:
    """``audit --out``: a directory (an existing one, or a path ending in a separator) gets
    ``audit_ledger.json`` inside it, as ``analyze --out DIR`` writes into its directory; any
    other path is the ledger file itself."""
    if out.endswith((os.sep, "/")) or Path(out).is_dir():
        return Path(out) / LEDGER_NAME
    return Path(out)
