"""`gitm-tui validate`: the decoder's validity study on the simulated corpus."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gitm_tui.commands.common import PROG, Parser, UsageError, error, say
from gitm_tui.exit_codes import ExitCode


def validate_parser() -> Parser:
    p = Parser(
        prog=f"{PROG} validate",
        description="Score decoded regimes against the simulator's ground truth.",
    )
    p.add_argument("--iterations", type=int, default=200, help="iterations per run (default 200)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 1..N per workload (default 3)")
    p.add_argument("--workload", action="append", help="only this workload (repeatable)")
    p.add_argument("--write", type=Path, help="write the Markdown report to this path")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    return p


def cmd_validate(argv: Sequence[str]) -> ExitCode:
    import json

    from engine.manifest import workload_names
    from engine.study.validity import render_markdown, run_validity, to_dict

    ns = validate_parser().parse_args(argv)
    if ns.iterations < 1 or ns.seeds < 1:
        raise UsageError("--iterations and --seeds must be >= 1")
    unknown = set(ns.workload or ()) - set(workload_names())
    if unknown:
        raise UsageError(
            f"unknown workload {sorted(unknown)[0]!r}; known: {', '.join(workload_names())}"
        )
    results = run_validity(ns.iterations, ns.seeds, ns.workload)
    md = render_markdown(results, ns.iterations, ns.seeds)
    if ns.write:
        from engine.store.runs import atomic_write_text

        try:
            atomic_write_text(ns.write, md)
        except OSError as e:
            error(f"cannot write {ns.write}: {e.strerror or e}")
            return ExitCode.INPUT
        say(f"wrote {ns.write}")
    if ns.json:
        print(json.dumps(to_dict(results), indent=2))
    elif not ns.write:
        print(md)
    return ExitCode.OK
