"""Command line: `gitm-tui` (dashboard), `--no-ui` (headless), and subcommands.

Every error a user can cause ends in one line on stderr and an ExitCode (README), never a
traceback; every line on stderr goes through engine.text.clean (file names, SQLite messages and
trace contents quoted in it cannot put an escape sequence on the terminal or break the line).
Textual is imported only on the dashboard path.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from engine.text import clean
from gitm_tui.exit_codes import ExitCode, write_refused

PROG = "gitm-tui"
#: the most characters of one stderr line: a path may be 4,096 bytes, with room for the rest
_LINE_CHARS = 8192


def _say(message: str) -> None:
    """Write ``gitm-tui: message`` to stderr as one cleaned line (engine.text.clean)."""
    print(f"{PROG}: {clean(message, _LINE_CHARS)}", file=sys.stderr)


def _first_line(e: Exception) -> str:
    """The first line of an exception's message (pydantic's run to many)."""
    return next(iter(str(e).splitlines()), repr(e))


def _error(message: str) -> None:
    """Write the one error line, ``gitm-tui: error: message`` (cleaned, one line)."""
    _say(f"error: {message}")


class UsageError(Exception):
    """A bad command line: the message is the one line the user sees."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse prints usage + exits 2; we want one line
        raise UsageError(f"{message} (see {self.prog} --help)")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gitm-tui")
    except PackageNotFoundError:  # running from a source tree without install
        return "0+unknown"


def _run_parser() -> _Parser:
    p = _Parser(
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
        help="sim (default), auto (a real GPU when one works, else sim), nvidia, amd",
    )
    p.add_argument("--interval", type=float, default=1.0, help="real-GPU sampling interval in s")
    p.add_argument(
        "--prometheus", type=int, metavar="PORT", help="serve Prometheus metrics on PORT"
    )
    p.add_argument(
        "--prometheus-addr", default="127.0.0.1", help="bind address (default 127.0.0.1)"
    )
    p.add_argument("--hardware", default="h100_telemetry", help=argparse.SUPPRESS)
    # tests: hold each apply this many seconds between APPLYING and its measurement (kill window)
    p.add_argument("--hold-apply", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
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


def _validate_parser() -> _Parser:
    p = _Parser(
        prog=f"{PROG} validate",
        description="Score decoded regimes against the simulator's ground truth.",
    )
    p.add_argument("--iterations", type=int, default=200, help="iterations per run (default 200)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 1..N per workload (default 3)")
    p.add_argument("--workload", action="append", help="only this workload (repeatable)")
    p.add_argument("--write", type=Path, help="write the Markdown report to this path")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    return p


def _run_config(ns: argparse.Namespace):  # type: ignore[no-untyped-def]
    from engine.manifest import ManifestError, load_hardware, load_workload
    from engine.runtime import BudgetError, RunConfig, parse_budget

    try:
        budget = parse_budget(ns.budget)
        if ns.workload != "command":
            load_workload(ns.workload)
        load_hardware(ns.hardware)
    except (BudgetError, ManifestError) as e:
        raise UsageError(str(e)) from None
    if ns.seed < 0:
        raise UsageError(f"bad seed {ns.seed}: must be >= 0")
    if ns.approve not in ("manual", "auto", "none"):
        raise UsageError(f"unknown approval policy {ns.approve!r}; one of manual, auto, none")
    if not 2 <= ns.repeats <= 50:
        raise UsageError(f"bad --repeats {ns.repeats}: must be 2..50")
    if ns.device not in ("sim", "auto", "nvidia", "amd"):
        raise UsageError(f"unknown device {ns.device!r}; one of sim, auto, nvidia, amd")
    if not 0.05 <= ns.interval <= 3600:
        raise UsageError(f"bad --interval {ns.interval}: 0.05..3600 s")
    if ns.prometheus is not None and not 0 <= ns.prometheus <= 65535:
        raise UsageError(f"bad --prometheus port {ns.prometheus}")
    extra = {
        "device": ns.device,
        "telemetry_interval_s": ns.interval,
        "prometheus_port": ns.prometheus,
        "prometheus_addr": ns.prometheus_addr,
    }
    if ns.workload == "command":
        import dataclasses

        return dataclasses.replace(_command_config(ns, budget), **extra)
    if ns.argv:
        raise UsageError(
            f"unexpected argument {ns.argv[0]!r} (a program goes after '--' with --workload command)"
        )
    return RunConfig(
        workload=ns.workload,
        budget_s=budget,
        seed=ns.seed,
        hardware=ns.hardware,
        target=parse_target(ns.target),
        approve=ns.approve,
        repeats=ns.repeats,
        optimize=not ns.watch,
        hold_apply_s=max(0.0, ns.hold_apply),
        **extra,
    )


def _command_config(ns: argparse.Namespace, budget: float):  # type: ignore[no-untyped-def]
    from engine.runtime import RunConfig
    from engine.workloads.command import ChoiceLever, CommandError, CommandSpec

    if not ns.argv:
        raise UsageError("--workload command needs the program after '--', e.g. -- python job.py")
    if not ns.metric:
        raise UsageError("--workload command needs --metric REGEX (one group around the number)")
    if ns.goal not in ("min", "max"):
        raise UsageError(f"bad --goal {ns.goal!r}: min or max")
    if not ns.lever:
        raise UsageError("--workload command needs at least one --lever to try")
    import shutil

    if not shutil.which(ns.argv[0]):
        raise UsageError(
            f"cannot run {ns.argv[0]!r}: no such program (not on PATH / not executable)"
        )
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
    return RunConfig(
        workload="command",
        budget_s=budget,
        seed=ns.seed,
        target=parse_target(ns.target),
        approve=ns.approve,
        repeats=ns.repeats,
        optimize=True,
        hold_apply_s=max(0.0, ns.hold_apply),
        command=tuple(ns.argv),
        metric=ns.metric,
        goal=ns.goal,
        levers=tuple(ns.lever),
        check=ns.check,
    )


def _cmd_validate(argv: Sequence[str]) -> ExitCode:
    import json

    from engine.manifest import workload_names
    from engine.study.validity import render_markdown, run_validity, to_dict

    ns = _validate_parser().parse_args(argv)
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
            _error(f"cannot write {ns.write}: {e.strerror or e}")
            return ExitCode.INPUT
        _say(f"wrote {ns.write}")
    if ns.json:
        print(json.dumps(to_dict(results), indent=2))
    elif not ns.write:
        print(md)
    return ExitCode.OK


def _analyze_parser() -> _Parser:
    p = _Parser(
        prog=f"{PROG} analyze",
        description="Decode the traces you already have (PyTorch profiler / Kineto JSON, "
        "plain or .gz; Nsight Systems SQLite export) into regimes per stream.",
    )
    p.add_argument("paths", nargs="+", help="trace files or directories of rank traces")
    p.add_argument("--hardware", help="catalogue id when the trace does not say (e.g. a100-80gb)")
    p.add_argument(
        "--out",
        default="gitm-analysis",
        help="write analysis.json, report.md, perfetto.json per file under this "
        "directory (default: ./gitm-analysis)",
    )
    p.add_argument("--no-write", action="store_true", help="print only; write no files")
    p.add_argument("--json", action="store_true", help="print the analyses as JSON on stdout")
    p.add_argument("--top", type=int, default=20, help="kernels in the top-kernels table")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: cores)")
    p.add_argument(
        "--ui",
        action="store_true",
        help="open the analysis screen (one file): timeline, kernel table, details",
    )
    p.add_argument(
        "--counting",
        choices=("exact", "hta"),
        default="exact",
        help="what counts as GPU time. exact (default): every kernel, memcpy and memset row, no "
        "step filter, exact ns. hta: as Holistic Trace Analysis's default load counts, to "
        "compare with it: drops GPU rows launched at or after the last ProfilerStep's start "
        "and rows without a launch event (only when the trace has two or more ProfilerSteps), "
        "rounds fractional timestamps to whole µs",
    )
    return p


def _cmd_analyze(argv: Sequence[str]) -> ExitCode:
    import json

    from engine.analyze.run import analyze_paths
    from engine.planner.catalogue import catalogue

    ns = _analyze_parser().parse_args(argv)
    known = [g.id for g in catalogue()]
    if ns.hardware and ns.hardware not in known:
        raise UsageError(f"unknown hardware {ns.hardware!r}; known: {', '.join(known)}")
    if ns.top < 1 or (ns.workers is not None and ns.workers < 1):
        raise UsageError("--top and --workers must be >= 1")
    if ns.ui:
        return _analyze_ui(ns)
    outcomes = analyze_paths(
        ns.paths,
        hardware=ns.hardware,
        out_root=None if ns.no_write else ns.out,
        top=ns.top,
        workers=ns.workers,
        counting=ns.counting,
    )
    good = [o for o in outcomes if o.analysis is not None]
    if ns.json:
        from engine.text import map_strings, valid_unicode

        dumps = [o.analysis.model_dump(mode="json") for o in good if o.analysis is not None]
        # ASCII JSON (every control character escaped), lone surrogates as in analysis.json
        print(json.dumps(map_strings(dumps, valid_unicode), indent=2))
    else:
        from rich.console import Console
        from rich.text import Text

        from gitm_tui.analyze_view import rank_table, summary

        # piped output is not 80 columns of wrapped cells: tables get room to stay tables
        console = Console(width=None if sys.stdout.isatty() else 140)
        for o in good:
            assert o.analysis is not None
            console.print(summary(o.analysis))
            if o.outputs:
                # Text: a path is never read as markup (file names come from outside)
                console.print(Text(clean(f"wrote {', '.join(o.outputs)}"), style="dim"))
        ranks = rank_table([o.analysis for o in good if o.analysis is not None])
        if ranks is not None:
            console.print(ranks)
        elif len(good) > 1:  # several files but not the ranks of one job: say why no comparison
            console.print(
                "ranks not compared: the files do not carry distinct rank ids "
                "(distributedInfo.rank) — not the ranks of one job",
                style="dim",
                highlight=False,
            )
    for o in outcomes:
        if o.error:
            _error(o.error)
    return ExitCode.INPUT if any(o.error for o in outcomes) else ExitCode.OK


def _analyze_ui(ns: argparse.Namespace) -> ExitCode:
    from engine.analyze.compute import AnalysisResult, analyze_trace
    from engine.analyze.run import expand, read_trace

    files, errors = expand(ns.paths)
    if errors:
        _error(errors[0].error or "")
        return ExitCode.INPUT
    if len(files) != 1:
        raise UsageError(f"--ui opens one trace; got {len(files)} files")
    from gitm_tui.analysis_app import make_analysis_app

    def load(progress: Callable[[str], None]) -> AnalysisResult:
        progress(f"reading {files[0].name}…")
        trace = read_trace(files[0])
        progress(f"{len(trace.segments):,} GPU rows: decoding regimes, replaying levers…")
        return analyze_trace(
            trace, hardware=ns.hardware, top=max(ns.top, 200), counting=ns.counting
        )

    app = make_analysis_app(load=load, source=str(files[0]))
    app.run()
    if app.error is not None:  # shown after the screen is gone: one line, like the CLI's
        _error(app.error)
        return ExitCode.INPUT
    return ExitCode.OK


def _decision_parser(action: str) -> _Parser:
    p = _Parser(
        prog=f"{PROG} {action}",
        description=f"{action.capitalize()} an intervention of a running optimize run (headless or "
        "dashboard) from another terminal.",
    )
    p.add_argument(
        "run_id", help="the run's id, e.g. 20261201-145253-1a2b3c (printed when it starts)"
    )
    p.add_argument("id", help="the intervention id, e.g. I2")
    return p


def _cmd_decision(action: str, argv: Sequence[str]) -> ExitCode:
    from engine.store.commands import operator, send

    ns = _decision_parser(action).parse_args(argv)
    try:
        send(ns.run_id, action, ns.id, operator())
    except ValueError as e:  # not a run id, not running, finished, a state it cannot apply to
        raise UsageError(str(e)) from None
    _say(f"{action} {ns.id} sent to run {ns.run_id}")
    return ExitCode.OK


def _cmd_doctor(argv: Sequence[str]) -> ExitCode:
    import json

    from engine.doctor import run_checks

    p = _Parser(
        prog=f"{PROG} doctor",
        description="What this machine can do: Python and packages, each GPU backend (found, or "
        "why not), CUPTI and counter permission, numba cache, scratch dir, S3 mirror — with the "
        "exact remedy for each problem.",
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


def _cmd_capture(argv: Sequence[str]) -> ExitCode:
    """Run a Python program in-process under CUPTI capture (like `python -m cProfile`)."""
    import json
    import os

    from engine.trace.cupti import CuptiUnavailable, capture, load_cupti, run_python_program

    p = _Parser(
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
        _error(f"capture: {e.reason} — fix: {e.remedy}")
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

    _say(f"capturing {' '.join(prog)}; trace → {out}")
    try:
        with capture(out, flush_interval_s=ns.flush, on_batch=on_batch) as cap:
            code = run_python_program(prog)
    except CuptiUnavailable as e:
        _error(f"capture: {e.reason} — fix: {e.remedy}")
        return ExitCode.BACKEND
    emit(decoder.flush(), cap.names)  # the rows the fixed lag still held
    for note in cap.notes:
        _say(note)
    n = len(cap.trace().segments)
    _say(f"captured {n} device rows; analyze with: {PROG} analyze {out}")
    return code  # type: ignore[return-value]  # the program's own exit status


LEDGER_NAME = "audit_ledger.json"


def _cmd_audit(argv: Sequence[str]) -> ExitCode:
    """EESM audit: do-operators × pipeline variants → a ledger; --verify re-runs one."""
    from engine.study.audit import read_ledger, run_audit, verify, write_ledger

    p = _Parser(
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
        try:
            ledger = read_ledger(ns.ui)
        except (OSError, ValueError) as e:
            _error(f"{ns.ui}: not a readable audit ledger ({_first_line(e)})")
            return ExitCode.INPUT
        from gitm_tui.audit_app import make_audit_app

        make_audit_app(ledger, str(ns.ui)).run()
        return ExitCode.OK
    if ns.paper:
        from engine.study.paper import default_traces, write_paper

        traces = [Path(t) for t in ns.traces] or default_traces(Path(__file__).resolve().parents[1])
        md, tables = write_paper(ns.paper_dir, traces, ns.seeds)
        _say(f"wrote {md} and {tables} ({len(traces)} real traces)")
        return ExitCode.OK
    if ns.verify:
        try:
            ledger = read_ledger(ns.verify)
        except (OSError, ValueError) as e:
            _error(f"{ns.verify}: not a readable audit ledger ({_first_line(e)})")
            return ExitCode.INPUT
        diffs = verify(ledger)
        if diffs:
            _say(
                f"{ns.verify}: REJECTED — {len(diffs)} value(s) differ from a fresh run; "
                f"first: {diffs[0]}"
            )
            for d in diffs[:20]:
                print(clean(d))  # quotes the ledger's values
            return ExitCode.INPUT
        _say(f"{ns.verify}: verified — a fresh run reproduces every value")
        return ExitCode.OK
    if ns.seeds < 1:
        raise UsageError("--seeds must be >= 1")
    spec = ([ns.corpus] if ns.corpus else []) + list(ns.traces)
    if ns.corpus not in (None, "calibrated"):
        raise UsageError(f"unknown corpus {ns.corpus!r}: 'calibrated', or give trace paths")
    spec = spec or ["calibrated"]
    from engine.trace.errors import TraceImportError

    try:
        ledger = run_audit(spec, ns.seeds)
    except TraceImportError as e:
        _error(str(e))
        return ExitCode.INPUT
    out = _ledger_path(ns.out)
    try:
        write_ledger(ledger, out)
    except OSError as e:
        _error(f"cannot write {out}: {e.strerror or e}")
        return ExitCode.INPUT
    _say(f"wrote {out} ({len(ledger.results)} operator × variant rows)")
    return ExitCode.OK


def _ledger_path(out: str) -> Path:
    """``audit --out``: a directory (an existing one, or a path ending in a separator) gets
    ``audit_ledger.json`` inside it, as ``analyze --out DIR`` writes into its directory; any
    other path is the ledger file itself."""
    if out.endswith((os.sep, "/")) or Path(out).is_dir():
        return Path(out) / LEDGER_NAME
    return Path(out)


SUBCOMMANDS = {
    "audit": _cmd_audit,
    "capture": _cmd_capture,
    "doctor": _cmd_doctor,
    "validate": _cmd_validate,
    "analyze": _cmd_analyze,
    "approve": lambda argv: _cmd_decision("approve", argv),
    "reject": lambda argv: _cmd_decision("reject", argv),
    "rollback": lambda argv: _cmd_decision("rollback", argv),
}


def _main(argv: Sequence[str]) -> ExitCode:
    if argv and argv[0] in SUBCOMMANDS:
        return SUBCOMMANDS[argv[0]](argv[1:])
    ns = _run_parser().parse_args(argv)
    config = _run_config(ns)
    from engine.errors import BackendUnavailable

    try:
        if ns.no_ui:
            from gitm_tui.headless import run_headless

            return asyncio.run(run_headless(config))
        from gitm_tui.app import run_dashboard

        return run_dashboard(config)
    except BackendUnavailable as e:
        _error(f"--device {config.device}: {e.reason} — fix: {e.remedy}")
        return ExitCode.BACKEND


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `gitm-tui` console script; returns the process exit code."""
    try:
        code = int(_main(list(sys.argv[1:] if argv is None else argv)))
        sys.stdout.flush()  # a full disk under a redirected stdout says so here, not at exit
        return code
    except UsageError as e:
        _error(str(e))
        return int(ExitCode.USAGE)
    except KeyboardInterrupt:
        _say("interrupted")
        return int(ExitCode.INTERRUPTED)
    except Exception as e:
        if write_refused(e):  # a full disk (an output, the run store, stdout): not a bug
            _write_refused_line(e)
            return int(ExitCode.INPUT)
        return int(_internal_error(e))  # a bug: one line here, the traceback in a file


def _write_refused_line(e: BaseException) -> None:
    """The one line for a write the file system refused (see exit_codes.write_refused)."""
    assert isinstance(e, OSError)
    if e.filename is None:  # no file named: a print to stdout failed
        _error(f"cannot write stdout: {e.strerror or e}")
        _drop_stdout()
    else:
        _error(f"cannot write {e.filename}: {e.strerror or e}")


def _drop_stdout() -> None:
    """After stdout refused a write: point it at /dev/null, so the interpreter's last flush of
    what is still buffered does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file behind stdout (tests)
        pass


def _internal_error(e: Exception) -> ExitCode:
    import time
    import traceback

    where = "(could not be saved)"
    try:
        from engine.store.runs import scratch_dir

        crash = scratch_dir() / "crashes" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
        crash.parent.mkdir(parents=True, exist_ok=True)
        crash.write_text("".join(traceback.format_exception(e)), encoding="utf-8")
        where = str(crash)
    except OSError:
        pass
    _say(
        f"internal error: {e!r} — a bug in gitm-tui; the traceback is in {where} "
        "(please include it in a report)"
    )
    return ExitCode.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
