"""`gitm-tui approve|reject|rollback RUN_ID ID`: decide on a running run from another terminal."""

from __future__ import annotations

from collections.abc import Sequence

from gitm_tui.commands.common import PROG, Parser, UsageError, say
from gitm_tui.exit_codes import ExitCode


def decision_parser(action: str) -> Parser:
    p = Parser(
        prog=f"{PROG} {action}",
        description=f"{action.capitalize()} an intervention of a running optimize run (headless or "
        "dashboard) from another terminal.",
    )
    p.add_argument(
        "run_id", help="the run's id, e.g. 20261201-145253-1a2b3c (printed when it starts)"
    )
    p.add_argument("id", help="the intervention id, e.g. I2")
    return p


def cmd_decision(action: str, argv: Sequence[str]) -> ExitCode:
    from engine.store.commands import operator, send

    ns = decision_parser(action).parse_args(argv)
    try:
        send(ns.run_id, action, ns.id, operator())
    except ValueError as e:  # not a run id, not running, finished, a state it cannot apply to
        raise UsageError(str(e)) from None
    say(f"{action} {ns.id} sent to run {ns.run_id}")
    return ExitCode.OK
