"""The default command — `gitm-tui` (dashboard) and `gitm-tui --no-ui` (headless): its parser
and the RunConfig it builds, including `--workload command`."""

from __future__ import annotations

import argparse

from gitm_tui.commands.common import PROG, Parser, UsageError, package_version


def run_parser() -> Parser:
    p = Parser(
        prog=PROG,
        description="GPU kernel regimes, roofline deviations and safe interventions. Without "
        "a subcommand: the live dashboard on the embedded default (simulated H100, hft-lob).",
        epilog="subcommands: analyze (traces you have), validate (decoding vs simulator truth), "
        "doctor (what this machine can do), capture -- python train.py (live CUPTI capture), "
        "approve / reject / rollback RUN_ID ID (decide on a running optimize run). "
        "Run '%(prog)s SUBCOMMAND --help' for each.",
    )
    p.add_argument(
        "--no-ui", action="store_true", help="headless: JSON lines on stdout, narration on stderr"
    )
    p.add_argument("--workload", default="hft-lob", help="built-in workload (default: hft-lob)")
    p.add_argument("--budget", default="60s", help="time budget, e.g. 10s, 5m, 24h (default 60s)")
    p.add_argument("--seed", type=int, default=0, help="simulator seed (default 0)")
    p.add_argument(
        "--target", default="15%", help="gain to reach: less time per sample, e.g. 15%% or 0.15"
    )
    p.add_argument(
        "--approve",
        default="manual",
        help="approval policy: manual (a person decides; the default), auto (SAFE levers "
        "only), none (propose only)",
    )
    p.add_argument(
        "--keep-deciding",
        action="store_true",
        help="with --approve manual: time waiting for your decisions is not charged to the "
        "budget, so proposals stay open until you decide them or finish the apply phase",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="go on when the qualification gate diagnoses the target as not measurable or out "
        "of reach (the report says the gate was overridden)",
    )
    p.add_argument("--repeats", type=int, default=4, help="measurements per arm (default 4)")
    c = p.add_argument_group(
        "--workload command -- ARGV…",
        "optimize any real process: run without a shell, metric read from its output",
    )
    c.add_argument(
        "--metric", help="regex with one (group) around the number, e.g. 'time_s=([0-9.]+)'"
    )
    c.add_argument("--goal", default="min", help="min (default: a time) or max (a throughput)")
    c.add_argument(
        "--lever",
        action="append",
        default=[],
        help="NAME=env:VAR=v1,v2,… or NAME=arg:--flag=v1,v2,… (first value = baseline; repeatable)",
    )
    c.add_argument("--check", help="regex the output must contain (correctness check)")
    p.add_argument("argv", nargs="*", help=argparse.SUPPRESS)
    p.add_argument("--watch", action="store_true", help="profile and decode only; no optimize loop")
    p.add_argument(
        "--device",
        default="sim",
        help="sim (default: the simulated GPU), auto (a real GPU's telemetry when one works, "
        "else sim), nvidia, amd; cpu / cuda: run hft-lob, af2 or kitti as a real PyTorch model "
        "(the [torch] extra)",
    )
    p.add_argument("--interval", type=float, default=1.0, help="real-GPU sampling interval in s")
    p.add_argument(
        "--prometheus", type=int, metavar="PORT", help="serve Prometheus metrics on PORT"
    )
    p.add_argument(
        "--prometheus-addr", default="127.0.0.1", help="bind address (default 127.0.0.1)"
    )
    p.add_argument(
        "--otlp",
        nargs="?",
        const="",
        metavar="URL",
        help="send metrics over OTLP/HTTP to an OpenTelemetry collector, e.g. "
        "http://collector:4318 (URL left out: OTEL_EXPORTER_OTLP_ENDPOINT); the [otlp] extra",
    )
    p.add_argument("--hardware", default="h100_telemetry", help=argparse.SUPPRESS)
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    return p


def parse_target(text: str) -> float:
    """'15%' or '0.15' → 0.15; UsageError otherwise (0 < target < 1)."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UsageError(
            f"bad target {text!r}: use a percentage like 15% or a fraction like 0.15"
        ) from None
    if not 0 < v < 1:
        raise UsageError(f"bad target {text!r}: must be between 0% and 100%")
    return v


def run_config(ns: argparse.Namespace):  # type: ignore[no-untyped-def]
    from engine.manifest import ManifestError, load_hardware, load_workload
    from engine.runtime import BudgetError, RunConfig, parse_budget

    try:
        budget = parse_budget(ns.budget)
        if ns.workload not in ("command", "torch"):
            load_workload(ns.workload)
        load_hardware(ns.hardware)
    except (BudgetError, ManifestError) as e:
        raise UsageError(str(e)) from None
    if not 0 <= ns.seed < 2**63:  # numpy takes any size; a 400-digit seed is a mistake
        shown = str(ns.seed) if len(str(ns.seed)) <= 20 else f"of {len(str(ns.seed))} digits"
        raise UsageError(f"bad seed {shown}: must be between 0 and 2^63 - 1")
    if ns.approve not in ("manual", "auto", "none"):
        raise UsageError(f"unknown approval policy {ns.approve!r}; one of manual, auto, none")
    if ns.keep_deciding and ns.approve != "manual":
        raise UsageError(
            f"--keep-deciding waits for a person: it needs --approve manual, not {ns.approve!r}"
        )
    if not 2 <= ns.repeats <= 50:
        raise UsageError(f"bad --repeats {ns.repeats}: must be 2..50")
    if ns.device not in ("sim", "auto", "nvidia", "amd", "cpu", "cuda"):
        raise UsageError(f"unknown device {ns.device!r}; one of sim, auto, nvidia, amd, cpu, cuda")
    if ns.device in ("cpu", "cuda") and ns.workload not in ("hft-lob", "af2", "kitti"):
        raise UsageError(
            f"--device {ns.device} runs a built-in workload's real PyTorch model "
            "(hft-lob, af2 or kitti); for your own script use --workload torch -- python SCRIPT"
        )
    if not 0.05 <= ns.interval <= 3600:
        raise UsageError(f"bad --interval {ns.interval}: 0.05..3600 s")
    if ns.prometheus is not None and not 0 <= ns.prometheus <= 65535:
        raise UsageError(f"bad --prometheus port {ns.prometheus}")
    if ns.otlp is not None:
        from engine.telemetry.otlp import problem

        if (why := problem(ns.otlp)) is not None:  # the extra missing, a bad URL: one line
            raise UsageError(why)
    extra = {
        "force": ns.force,
        "device": ns.device,
        "telemetry_interval_s": ns.interval,
        "prometheus_port": ns.prometheus,
        "prometheus_addr": ns.prometheus_addr,
        "otlp_endpoint": ns.otlp,
    }
    if ns.workload == "command":
        import dataclasses

        return dataclasses.replace(command_config(ns, budget), **extra)
    if ns.workload == "torch":
        return torch_config(ns, budget, force=ns.force)
    if ns.argv:
        raise UsageError(
            f"unexpected argument {ns.argv[0]!r} (a program goes after '--' with --workload "
            "command or torch)"
        )
    return RunConfig(
        workload=ns.workload,
        budget_s=budget,
        seed=ns.seed,
        hardware=ns.hardware,
        target=parse_target(ns.target),
        approve=ns.approve,
        keep_deciding=ns.keep_deciding,
        repeats=ns.repeats,
        optimize=not ns.watch,
        **extra,
    )


def torch_config(ns: argparse.Namespace, budget: float, force: bool = False):  # type: ignore[no-untyped-def]
    """`--workload torch -- python SCRIPT ARGS`: an unmodified PyTorch script, relaunched per
    trial with process-level levers (engine/workloads/torch_launch.py)."""
    _runnable(ns, "--workload torch needs the script after '--', e.g. -- python train.py")
    return _program_config(ns, budget, "torch", force=force)


def _runnable(ns: argparse.Namespace, missing: str) -> None:
    """The program after '--' exists and can be run (else one usage line)."""
    import shutil

    if not ns.argv:
        raise UsageError(missing)
    if not shutil.which(ns.argv[0]):
        raise UsageError(
            f"cannot run {ns.argv[0]!r}: no such program (not on PATH / not executable)"
        )


def _program_config(ns: argparse.Namespace, budget: float, workload: str, **more: object):  # type: ignore[no-untyped-def]
    """The RunConfig of a real program's run (a command or a launched PyTorch script)."""
    from engine.runtime import RunConfig

    return RunConfig(
        workload=workload,
        budget_s=budget,
        seed=ns.seed,
        target=parse_target(ns.target),
        approve=ns.approve,
        keep_deciding=ns.keep_deciding,
        repeats=ns.repeats,
        optimize=True,
        command=tuple(ns.argv),
        **more,  # type: ignore[arg-type]
    )


def command_config(ns: argparse.Namespace, budget: float):  # type: ignore[no-untyped-def]
    from engine.workloads.command import ChoiceLever, CommandError, CommandSpec

    if not ns.argv:
        raise UsageError("--workload command needs the program after '--', e.g. -- python job.py")
    if not ns.metric:
        raise UsageError("--workload command needs --metric REGEX (one group around the number)")
    if ns.goal not in ("min", "max"):
        raise UsageError(f"bad --goal {ns.goal!r}: min or max")
    if not ns.lever:
        raise UsageError("--workload command needs at least one --lever to try")
    _runnable(ns, "")
    try:
        CommandSpec(
            argv=tuple(ns.argv),
            metric=ns.metric,
            goal=ns.goal,
            levers=tuple(ChoiceLever.parse(x) for x in ns.lever),
            check=ns.check,
        )
    except CommandError as e:
        raise UsageError(str(e)) from None
    return _program_config(
        ns,
        budget,
        "command",
        metric=ns.metric,
        goal=ns.goal,
        levers=tuple(ns.lever),
        check=ns.check,
    )
