"""`gitm-tui analyze TRACE…`: read the traces people already have (Kineto, Nsight), one or many."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from engine.text import clean
from gitm_tui.commands.common import (
    PROG,
    Parser,
    UsageError,
    error,
    loading_modules,
    need_terminal,
    stdout_console,
)
from gitm_tui.exit_codes import ExitCode

if TYPE_CHECKING:
    from engine.analyze.api import Analyzed, AnalyzeOptions
    from engine.analyze.compute import AnalysisResult
    from gitm_tui.app import GitmApp


def analyze_parser() -> Parser:
    from engine.trace.formats import help_text

    p = Parser(
        prog=f"{PROG} analyze",
        description=f"Decode the traces you already have ({help_text()}) into regimes per stream.",
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
        "--cluster",
        default=None,
        help="several files: 'local' (the default: a local Dask cluster of worker processes) or "
        "the address of a running Dask scheduler (tcp://HOST:8786, started with `dask "
        "scheduler` / `dask worker`); each file is analysed where a worker is, and only its "
        "analysis and a few-kB rank summary come back",
    )
    p.add_argument(
        "--ui",
        action="store_true",
        help="open the analysis screen (one file): timeline, kernel table, details",
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="print the whole counting rule (the first screen has its first clause)",
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


def cmd_analyze(argv: Sequence[str]) -> ExitCode:
    import json

    with loading_modules():
        # every analysis imports the levers and the steady window: here, while loading
        # (loading_modules), not in the middle of the analysis
        from engine.analyze.advice import levers  # noqa: F401
        from engine.analyze.api import Hooks, analyze
        from engine.analyze.breakdown import steady  # noqa: F401
        from engine.planner.catalogue import catalogue

    ns = analyze_parser().parse_args(argv)
    known = [g.id for g in catalogue()]
    if ns.hardware and ns.hardware not in known:
        raise UsageError(f"unknown hardware {ns.hardware!r}; known: {', '.join(known)}")
    if ns.top < 1 or (ns.workers is not None and ns.workers < 1):
        raise UsageError("--top and --workers must be >= 1")
    if ns.cluster not in (None, "local") and not re.fullmatch(
        r"(tcp|tls)://[^\s/]+:\d+/?", ns.cluster
    ):  # (other Dask transports, e.g. ucx://, need packages this install does not have)
        raise UsageError(
            f"--cluster {clean(ns.cluster, 80)!r}: expected 'local' or a scheduler's tcp:// or "
            "tls:// address with its port, such as tcp://HOST:8786"
        )
    if ns.ui:
        return analyze_ui(ns)

    live = sys.stderr.isatty()  # piped stderr keeps one line per error, nothing else

    def progress(done: int, total: int, path: str) -> None:
        if total > 1 and live:  # per rank, one line rewritten in place (stdout: the analysis)
            end = "\n" if done == total else ""
            name = clean(path, 120)
            print(f"\r\x1b[2K{PROG}: analysed {done}/{total}: {name}", end=end, file=sys.stderr)
            sys.stderr.flush()

    staged = False

    def stage(line: str) -> None:  # what one file is going through, on one line rewritten
        nonlocal staged
        if live:
            print(f"\r\x1b[2K{PROG}: {clean(line, 160)}", end="", file=sys.stderr, flush=True)
            staged = True

    def dashboard(link: str) -> None:  # a running cluster's own page: where to watch it
        if live:
            print(f"{PROG}: Dask dashboard: {clean(link, 200)}", file=sys.stderr)

    try:
        got = analyze(ns.paths, _options(ns), Hooks(stage, progress, dashboard))
    except ConnectionError as e:
        error(str(e))
        return ExitCode.INPUT
    finally:
        if staged:  # the stage line goes: the analysis follows on stdout
            print("\r\x1b[2K", end="", file=sys.stderr, flush=True)
    if ns.json:
        from engine.analyze.breakdown.cpu_trace import cpu_dict
        from engine.analyze.output.export import analysis_dict

        # ASCII JSON (every control character escaped), lone surrogates as in analysis.json; a
        # CPU-only trace's summary in its place ("kind": "cpu_only")
        docs: list[dict[str, object]] = []
        for o in got.outcomes:
            if o.analysis is not None:
                docs.append(analysis_dict(o.analysis))
            elif o.cpu is not None:
                docs.append(cpu_dict(o.cpu))
        print(json.dumps(docs, indent=2))
    else:
        _print_text(got, ns)
    if got.cross_failed is not None:
        error(got.cross_failed)
    for line in got.errors:
        error(line)
    return ExitCode.INPUT if got.failed else ExitCode.OK


def _options(ns: argparse.Namespace) -> AnalyzeOptions:
    """The command's options as the analysis takes them."""
    from engine.analyze.api import AnalyzeOptions

    return AnalyzeOptions(
        hardware=ns.hardware,
        top=ns.top,
        counting=ns.counting,
        out_root=None if ns.no_write else ns.out,
        workers=ns.workers,
        cluster=ns.cluster,
        ranks=not ns.json,  # --json prints each file's analysis, nothing crossed
    )


def _print_text(got: Analyzed, ns: argparse.Namespace) -> None:
    """The text output: each file's summary and what was written, then the ranks."""
    from rich.text import Text

    from gitm_tui.analyze_view import (
        cpu_summary,
        cross_rank_text,
        each_rank_table,
        rank_table,
        summary,
    )

    console = stdout_console()
    several = len(got.outcomes) > 1
    odd = got.not_one_job  # files of different jobs: refused with one line (exit 3)
    ranks = rank_table(got.analyses, got.straggler, got.judged)
    # the ranks of one job: a row each (each rank's whole analysis is its report.md)
    each = each_rank_table(got.analyses) if ranks is not None and not odd else None
    rank_outputs: list[str] = []
    for o in got.outcomes:
        if o.analysis is not None and each is not None:
            rank_outputs += o.outputs
            continue
        if o.analysis is not None:
            console.print(summary(o.analysis, explain=ns.explain))
        elif o.cpu is not None:  # a CPU-only trace: what its CPU events say
            console.print(cpu_summary(o.cpu))
            if several:
                console.print("a CPU-only trace: not compared with the ranks", style="dim")
        else:
            continue
        if o.outputs:
            # Text: a path is never read as markup (file names come from outside)
            console.print(Text(clean(f"wrote {', '.join(o.outputs)}"), style="dim"))
    if each is not None:
        table, foot = each
        console.print(table)
        for line in foot:
            console.print(Text(line, style="bold" if not line.startswith("*") else ""))
        whole = (
            f"each rank's whole analysis: report.md in its folder ({_folders(rank_outputs)})"
            if rank_outputs
            else "each rank's whole analysis: gitm-tui analyze FILE, or --json"
        )
        console.print(Text(clean(whole), style="dim"))
        console.print()
    if got.refused is not None:  # a directory of rank traces: one job, it says
        error(got.refused)
    elif odd:  # files named one by one: each analysed; only the comparison is refused
        console.print(Text(clean(f"ranks not compared: {odd}")), style="dim")
    elif ranks is not None:
        console.print(ranks)
        if got.crossed is not None:
            console.print(cross_rank_text(got.crossed))
            if not ns.no_write and got.cross_failed is None:  # (the failure: on stderr)
                written = ", ".join(map(str, got.cross_written))
                console.print(Text(clean(f"wrote {written}"), style="dim"))
            for line in got.cross_unwritten:
                console.print(Text(clean(line), style="dim"))
    elif len(got.good) > 1:  # several files but not the ranks of one job: say why no comparison
        console.print(
            "ranks not compared: the files do not carry distinct rank ids "
            "(distributedInfo.rank) — not the ranks of one job",
            style="dim",
            highlight=False,
        )


def _folders(outputs: list[str]) -> str:
    """The rank folders the outputs were written to, in a few words ('OUT/rank0000 … OUT/rank0127,
    128 folders, each: analysis.json, report.md, …')."""
    dirs = list(dict.fromkeys(str(Path(f).parent) for f in outputs))
    names = list(dict.fromkeys(Path(f).name for f in outputs))
    span = dirs[0] if len(dirs) == 1 else f"{dirs[0]} … {dirs[-1]}, {len(dirs)} folders"
    return f"{span}; each: {', '.join(names)}"


def _load_one(ns: argparse.Namespace, path: str, progress: Callable[[str], None]) -> AnalysisResult:
    """One trace read and analysed for a screen (the analysis screen, a rank opened), with its
    arrays and up to 200 kernels; nothing written. A first run answers as the command's does
    (FirstRun: the twin reader and interpreted kernels while a child compiles; the screen's
    worker thread runs it): it waited ~30 s for every kernel to compile, with only "reading…"
    on the screen. Raises AnalysisFailed (its line) when the file cannot be analysed."""
    from engine.analyze.api import AnalyzeOptions, Hooks, analyze

    here = AnalyzeOptions(  # one file, read here (never on Dask): what the screen draws
        hardware=ns.hardware, top=max(ns.top, 200), counting=ns.counting, ranks=False,
        keep_arrays=True,
    )  # fmt: skip
    return analyze([path], here, Hooks(stage=progress)).one()


def analyze_ui(ns: argparse.Namespace) -> ExitCode:
    from engine.analyze.api import list_files

    need_terminal("analyze --ui")
    files, errors = list_files(ns.paths)
    if errors:
        error(errors[0])
        return ExitCode.INPUT
    if len(files) > 1:
        return ranks_ui(ns, files)
    if not files:
        raise UsageError("--ui: no trace file given")
    from engine.analyze.api import CpuOnlyTrace
    from gitm_tui.app import make_analysis_app

    cpu: list[CpuOnlyTrace] = []

    def load(progress: Callable[[str], None]) -> AnalysisResult:
        try:
            return _load_one(ns, files[0], progress)
        except CpuOnlyTrace as e:  # the screen closes (its loader failed); the text follows
            cpu.append(e)
            raise

    app = make_analysis_app(load=load, source=str(files[0]))
    app.run()
    if cpu:  # the analysis screen draws GPU rows: a CPU-only trace gets the command's text
        from gitm_tui.analyze_view import cpu_summary

        print(
            f"{PROG}: the analysis screen needs a GPU trace; {clean(files[0], 300)} is CPU-only, "
            "so here is its CPU summary",
            file=sys.stderr,
        )
        stdout_console().print(cpu_summary(cpu[0].cpu))
        return ExitCode.OK
    if app.analysis.error is not None:  # shown after the screen is gone: one line, like the CLI's
        error(app.analysis.error)
        return ExitCode.INPUT
    return ExitCode.OK


def ranks_ui(ns: argparse.Namespace, files: list[str]) -> ExitCode:
    """`analyze DIR --ui`: the ranks screen; the ranks are analysed as without --ui (on Dask),
    written under --out, and each rank opens in the analysis screen on request."""
    app, said, failures = ranks_app(ns, files)
    app.run()
    screen = app.ranks
    if screen.error is not None:
        error(screen.error)
        return ExitCode.INPUT
    if screen.outcomes is None:  # quit before the ranks were analysed
        error("stopped before the ranks were analysed: nothing written for the ranks")
        return ExitCode.INTERRUPTED
    for o in screen.outcomes or []:
        if o.error:
            error(o.error)
        elif o.cpu is not None:  # not an error: said, with where its summary is
            print(
                f"{PROG}: {clean(o.path, 300)}: a CPU-only trace, not among the ranks (`{PROG} "
                "analyze` on it alone prints its CPU summary)",
                file=sys.stderr,
            )
    for line in said + failures:
        error(line)
    failed = failures or any(o.error for o in screen.outcomes or [])
    return ExitCode.INPUT if failed else ExitCode.OK


def ranks_app(ns: argparse.Namespace, files: list[str]) -> tuple[GitmApp, list[str], list[str]]:
    """The ranks app of `analyze DIR --ui`, and the lists its loader fills with what was not
    written (why) and what failed — said once the screen is gone."""
    from dataclasses import replace
    from multiprocessing import resource_tracker

    from engine.analyze.api import Hooks, analyze
    from gitm_tui.app import make_ranks_app

    options = replace(_options(ns), ranks=True)  # the screen crosses the ranks, --json or not
    # what was not written and why: said once the screen is gone
    said: list[str] = []
    failures: list[str] = []

    def load(
        progress: Callable[[int, int, str], None],
        dashboard: Callable[[str], None],
        stage: Callable[[str], None],
    ) -> Analyzed:
        got = analyze(files, options, Hooks(stage=stage, progress=progress, dashboard=dashboard))
        said.extend(got.cross_unwritten)
        failures.extend([got.cross_failed] if got.cross_failed else [])
        return got

    def open_rank(path: str, progress: Callable[[str], None]) -> AnalysisResult:
        return _load_one(ns, path, progress)

    # Dask's worker processes start from the loader thread while Textual holds sys.stderr;
    # multiprocessing's resource tracker, started on first use, passes sys.stderr's fd to its
    # child and fails under the app ("bad value(s) in fds_to_keep"): start it now, before
    resource_tracker.ensure_running()
    return make_ranks_app(load, source=", ".join(ns.paths), open_rank=open_rank), said, failures
