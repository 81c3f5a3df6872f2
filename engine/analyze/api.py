"""The analysis's one front door: trace files in — one, several, or a directory of one job's
rank traces — with ``AnalyzeOptions``; out, ``Analyzed``: each file's outcome (its analysis,
or its one error line) and, for the ranks of one job, what crossing them found, with the
cross-rank outputs written.

Every analysis goes through ``analyze``: `gitm-tui analyze` (text, ``--json``, ``--ui``: the
analysis screen's loader and the ranks screen's), and a live program's captured steps
(engine.runtime.sources). The callers only render what it returns. Underneath:
engine.analyze.run (files here, the first run), engine.analyze.cluster (files on Dask),
engine.analyze.ranks.ranks (crossing the ranks), engine.analyze.output.rank_export (the cross-rank outputs).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.analyze.options import AnalyzeOptions, Hooks

if TYPE_CHECKING:
    from engine.analyze.breakdown.cpu_trace import CpuSummary
    from engine.analyze.breakdown.model import Analysis
    from engine.analyze.compute import AnalysisResult
    from engine.analyze.output.rank_export import Made, PartRunner
    from engine.analyze.ranks.ranks import CrossRank, RankSummary
    from engine.analyze.run import FileOutcome, Part

__all__ = [
    "AnalysisFailed",
    "AnalyzeOptions",
    "Analyzed",
    "CpuOnlyTrace",
    "Hooks",
    "analyze",
    "list_files",
]


class AnalysisFailed(RuntimeError):
    """The one file asked for was not analysed; ``str(e)`` is its error line (as the command
    prints it: a TraceImportError's own line for a file that cannot be read)."""


class CpuOnlyTrace(AnalysisFailed):
    """The one file asked for holds no GPU row, only CPU events: ``cpu`` is what they say
    (engine.analyze.breakdown.cpu_trace); there is no GPU analysis, nor arrays, to show."""

    def __init__(self, path: str, cpu: CpuSummary) -> None:
        super().__init__(
            f"{path}: a CPU-only trace (no GPU rows): nothing for the GPU analysis to show"
        )
        self.cpu = cpu


@dataclass(frozen=True)
class Analyzed:
    """What ``analyze`` found: every file's outcome in input order (the files that could not
    be listed first), and, where the files are the ranks of one job, the ranks crossed."""

    outcomes: list[FileOutcome]
    #: the ranks crossed (None: fewer than two distinct ranks, files of different jobs, or
    #: ``AnalyzeOptions.ranks`` off)
    crossed: CrossRank | None = None
    #: one directory was named: its files claim to be one job's ranks (files of another job
    #: there are then an input error, ``refused``)
    one_job_claimed: bool = False
    #: the cross-rank outputs written under ``out_root`` (cross_rank.json, .md, merged Perfetto)
    cross_written: tuple[Path, ...] = ()
    #: what of them was not written, and why (one line each)
    cross_unwritten: tuple[str, ...] = ()
    #: the error line when none of them could be written
    cross_failed: str | None = None
    #: the paths named, as given
    paths: tuple[str, ...] = field(default=())
    #: files of several jobs (``not_one_job``): each job's ranks crossed on their own
    #: (engine.analyze.ranks.ranks.job_groups), largest first — never merged into one
    jobs: tuple[CrossRank, ...] = ()

    @property
    def good(self) -> list[FileOutcome]:
        """The outcomes that carry an analysis (a file whose outputs failed to write included)."""
        return [o for o in self.outcomes if o.analysis is not None]

    @property
    def analyses(self) -> list[Analysis]:
        return [o.analysis for o in self.outcomes if o.analysis is not None]

    @property
    def cpu_only(self) -> list[FileOutcome]:
        """The outcomes of Kineto traces with no GPU row, each with its CPU summary (``cpu``)
        in place of an analysis: not errors, and never among the ranks crossed."""
        return [o for o in self.outcomes if o.cpu is not None]

    @property
    def summaries(self) -> list[RankSummary]:
        """The rank summaries of the files analysed (``AnalyzeOptions.ranks``, several files)."""
        return [o.summary for o in self.good if o.summary is not None]

    @functools.cached_property
    def not_one_job(self) -> str | None:
        """The line naming the files that are not of one job with the others (None: nothing
        says so, or no summaries were kept)."""
        sums = self.summaries
        if len(sums) < 2:
            return None
        from engine.analyze.ranks.ranks import not_one_job

        return not_one_job(sums)

    @property
    def refused(self) -> str | None:
        """The input error of a directory whose files are not one job's ranks (its line)."""
        return self.not_one_job if self.one_job_claimed else None

    @property
    def straggler(self) -> int | None:
        """The rank named straggler in most steps (None: none named)."""
        if self.crossed is None:
            return None
        from engine.analyze.ranks.ranks import most_waited_for

        return most_waited_for(self.crossed)

    @property
    def judged(self) -> bool:
        """The collectives were compared and a verdict given (a rank, none, or why not)."""
        return self.crossed is not None and bool(self.crossed.straggler)

    @property
    def errors(self) -> list[str]:
        """Each file's error line, in input order."""
        return [o.error for o in self.outcomes if o.error]

    @property
    def failed(self) -> bool:
        """Whether anything was an input error: a file, the cross-rank outputs, a refusal."""
        return bool(self.errors) or self.cross_failed is not None or self.refused is not None

    def one(self) -> AnalysisResult:
        """The analysis, with its arrays, of the one file analysed (``keep_arrays``);
        AnalysisFailed with its line when it was not analysed (CpuOnlyTrace, with its CPU
        summary, when it is a CPU-only trace)."""
        if len(self.outcomes) != 1:
            raise AnalysisFailed(f"expected one trace file, got {len(self.outcomes)}")
        (o,) = self.outcomes
        if o.error is not None and o.analysis is None:
            raise AnalysisFailed(o.error)
        if o.cpu is not None:
            raise CpuOnlyTrace(o.path, o.cpu)
        if o.result is None:
            raise ValueError("analysed without AnalyzeOptions(keep_arrays=True): no arrays kept")
        return o.result


def list_files(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """The trace files ``paths`` name or hold (one directory level, URLs listed through
    fsspec), each once, and the error line of each path that cannot be listed."""
    from engine.analyze.run import expand

    files, errors = expand(list(paths))
    return files, [o.error or "" for o in errors]


def analyze(
    paths: Sequence[str], options: AnalyzeOptions | None = None, hooks: Hooks | None = None
) -> Analyzed:
    """Analyse the trace files ``paths`` name (files, directories of rank traces, fsspec URLs)
    as ``options`` say; ``hooks`` hear the stages and the progress. Never raises for bad input
    (each file's error is its outcome's line), except ConnectionError (one line) when a Dask
    scheduler cannot be reached; a bug met in the only file raises (the command's crash
    report), one met in a file of several is that file's line.

    A Kineto trace with no GPU row is read for its CPU events instead (engine.analyze.breakdown.cpu_trace):
    its outcome carries that summary (``FileOutcome.cpu``), is no error, and is never crossed.

    Several files with ``options.ranks``: the ranks are crossed (engine.analyze.ranks.ranks) and,
    under ``options.out_root``, cross_rank.json, cross_rank.md and ranks.perfetto.json.gz are
    written (engine.analyze.output.rank_export)."""
    from engine.analyze.run import analyze_listed, expand

    options = options or AnalyzeOptions()
    hooks = hooks or Hooks()
    files, listed = expand(list(paths))
    claimed = len(paths) == 1 and Path(paths[0]).is_dir()
    if not options.ranks or len(files) < 2:  # a file alone never imports the cross-rank module
        outcomes = listed + analyze_listed(files, options, hooks)
        return Analyzed(outcomes, one_job_claimed=claimed, paths=tuple(paths))
    return _job(files, listed, options, hooks, claimed, tuple(paths))


def _job(
    files: list[str],
    listed: list[FileOutcome],
    options: AnalyzeOptions,
    hooks: Hooks,
    claimed: bool,
    paths: tuple[str, ...],
) -> Analyzed:
    """Several files, ranks crossed, in two rounds on one set of workers (engine.analyze.job):
    each file read for its rank summary; the ranks crossed; each rank analysed once, held to its
    peers where they are known; the cross-rank outputs written, the merged Perfetto file's parts
    made by the workers."""
    from dataclasses import replace

    from engine.analyze.cluster import Workers
    from engine.analyze.job import held_note, peers_by_file
    from engine.analyze.run import analyze_listed, forget_kept, output_names

    names = output_names(files)
    try:
        with Workers(options, len(files), hooks.dashboard) as pool:
            first = analyze_listed(
                files, options, _reading(hooks), names=names, pool=pool, summary_only=True
            )
            sums = [o.summary for o in first if o.summary is not None]
            crossed: CrossRank | None = None
            jobs: tuple[CrossRank, ...] = ()
            if len(sums) >= 2:
                from engine.analyze.ranks.ranks import cross_rank, job_groups, not_one_job

                crossed = cross_rank(sums)
                if crossed is None and not_one_job(sums) is not None:
                    jobs = tuple(c for g in job_groups(sums) if (c := cross_rank(g)) is not None)
            peers = peers_by_file(first, crossed) if crossed is not None else {}
            todo = [o.path for o in first if o.summary is not None]
            if hooks.stage is not None and peers:
                hooks.stage(
                    f"{len(todo):,} ranks: analysing each, its collectives held to its peers…"
                )
            settled = len(first) - len(todo)  # files the first round ended (an error, CPU-only)
            said = hooks.progress

            def counted(done: int, _total: int, path: str) -> None:  # of all the files
                if said is not None:
                    said(settled + done, len(files), path)

            if not todo and said is not None and files:
                said(len(files), len(files), files[-1])
            hooked = replace(hooks, progress=counted)
            parts = _parts(first, crossed, options)
            done = analyze_listed(
                todo, options, hooked, names=names, pool=pool, peers=peers, summaries=False,
                parts=parts,
            )  # fmt: skip
            second = iter(done)
            outcomes = listed + [
                replace(next(second), summary=o.summary) if o.summary is not None else o
                for o in first
            ]
            made = {
                parts[o.path][0]: (Path(parts[o.path][2]), *o.part)
                for o in outcomes
                if o.path in parts and o.part is not None
            }
            if crossed is not None:
                crossed.notes.append(held_note(outcomes, crossed, peers))
            got = Analyzed(outcomes, crossed, claimed, paths=paths, jobs=jobs)
            if crossed is None or options.out_root is None:
                return got
            run = pool.map if pool.started and pool.local else None  # (remote: files elsewhere)
            written, unwritten, failed = _write_cross_rank(
                crossed, options.out_root, got.good, run, made
            )  # fmt: skip
        return Analyzed(outcomes, crossed, claimed, written, unwritten, failed, paths)
    finally:
        forget_kept()  # what the first round kept here and the second did not take
        if options.out_root is not None:  # parts the merge did not take (it was not reached)
            from engine.analyze.output.rank_export import forget_parts

            forget_parts(Path(options.out_root) / "ranks.perfetto.json.gz")


def _parts(
    first: list[FileOutcome], crossed: CrossRank | None, options: AnalyzeOptions
) -> dict[str, Part]:
    """Per file, its part of the merged Perfetto file for the second round to make from its
    analysis: where the ranks were crossed, outputs are written here or by local workers (a
    running cluster's write where they run), and each file is a rank of its own."""
    if crossed is None or options.out_root is None or options.cluster not in (None, "local"):
        return {}
    from engine.analyze.output.rank_export import part_path

    ranks = {o.path: o.summary.rank for o in first if o.summary is not None}
    if None in ranks.values() or len(set(ranks.values())) != len(ranks) or not ranks:
        return {}
    merged = Path(options.out_root) / "ranks.perfetto.json.gz"
    try:
        part_path(merged, 0).parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return {}  # the merge says why it cannot be written, if it cannot
    offsets = {p.rank: p.clock_offset_ns for p in crossed.per_rank}
    low = min(r for r in ranks.values() if r is not None)
    return {
        path: (r, offsets.get(r, 0), str(part_path(merged, r)), r != low)
        for path, r in ranks.items()
        if r is not None
    }


def _reading(hooks: Hooks) -> Hooks:
    """The job's first round as the listeners hear it: its progress is a stage line (the
    analysis's own progress is the second round's)."""
    stage = hooks.stage

    def read(done: int, total: int, _path: str) -> None:
        if stage is not None:
            stage(f"collectives: {done:,} of {total:,} ranks read…")

    return Hooks(stage=stage, progress=read, dashboard=hooks.dashboard)


def _write_cross_rank(
    crossed: CrossRank,
    out: str,
    good: list[FileOutcome],
    run: PartRunner | None = None,
    made: Made | None = None,
) -> tuple[tuple[Path, ...], tuple[str, ...], str | None]:
    """OUT/cross_rank.json (schema: manifests/schemas/cross_rank.schema.json), cross_rank.md and
    ranks.perfetto.json.gz (engine.analyze.output.rank_export). Returns what was written, the lines
    saying what was not and why, and the error line when nothing could be written."""
    from engine.analyze.output.rank_export import write_rank_outputs

    perfetto = [
        (o.analysis.rank, Path(p))
        for o in good
        if o.analysis is not None and o.analysis.rank is not None
        for p in o.outputs
        if p.endswith("perfetto.json")
    ]
    try:
        written, problems = write_rank_outputs(crossed, Path(out), perfetto, run, made)
    except OSError as e:
        return (), (), f"cannot write the cross-rank outputs to {out}: {e.strerror or e}"
    return tuple(written), tuple(problems), None
