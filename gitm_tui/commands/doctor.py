"""`gitm-tui doctor`: what this machine can do, with the remedy for each missing piece."""

from __future__ import annotations

from collections.abc import Sequence

from engine.text import clean
from gitm_tui.commands.common import PROG, Parser
from gitm_tui.exit_codes import ExitCode


def cmd_doctor(argv: Sequence[str]) -> ExitCode:
    import json

    from engine.doctor import run_checks

    p = Parser(
        prog=f"{PROG} doctor",
        description="What this machine can do: Python and packages, each GPU backend (found, or "
        "why not), CUPTI and counter permission, numba cache, scratch dir, S3 mirror, OTLP sink "
        "— with the exact remedy for each problem.",
    )
    p.add_argument("--json", action="store_true", help="the checks as JSON on stdout")
    ns = p.parse_args(argv)
    checks = run_checks()
    if ns.json:
        print(json.dumps([c.to_dict() for c in checks], indent=2))
        return ExitCode.OK
    for c in checks:
        mark = {True: "✓", False: "✗", None: "·"}[c.ok]
        line = f"{mark} {c.name}: {c.detail}"
        if c.ok is False and c.remedy:
            line += f" — fix: {c.remedy}"
        elif c.ok is None and c.remedy:
            line += f" — to enable: {c.remedy}"
        print(clean(line))  # details and remedies quote drivers and libraries
    problems = sum(c.ok is False for c in checks)
    print(f"{problems} problem(s); the simulated device is always available")
    return ExitCode.OK
