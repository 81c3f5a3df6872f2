"""What an analysis is asked to do (``AnalyzeOptions``) and who hears how it goes (``Hooks``):
one value each, passed whole from the front door (engine.analyze.api) down to each file's
analysis — here, on a Dask worker (engine.analyze.cluster) or for a screen — instead of a
handful of flags repeated in every signature on the way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.analyze.breakdown.semantics import COUNTING_MODES


@dataclass(frozen=True)
class AnalyzeOptions:
    """How to analyse files. Plain data (a Dask task takes it to its worker): the listeners
    are ``Hooks``."""

    #: the hardware catalogue id, when the trace does not say (None: as the trace says)
    hardware: str | None = None
    #: kernels kept in the top-kernels table
    top: int = 20
    #: what counts as GPU time: "exact" or "hta" (engine.analyze.breakdown.semantics)
    counting: str = "exact"
    #: write each file's analysis.json, report.md and perfetto.json under this folder (and,
    #: for the ranks of one job, the cross-rank outputs); None: nothing is written
    out_root: str | None = None
    #: several files: Dask worker processes (None: one per core); 1: every file here
    workers: int | None = None
    #: several files: "local" (a local Dask cluster, the default) or a scheduler's address
    cluster: str | None = None
    #: a first run after an install answers without waiting for numba: the JSON scanner's
    #: Python twin and interpreted kernels while a child compiles (engine.analyze.run.FirstRun);
    #: and a small file is analysed without numba at all (engine.analyze.run.lean). False:
    #: compiled kernels only, no child (what a program's own capture analyses with: its other
    #: threads may be running kernels, which an interpreted analysis would swap to Python)
    first_run: bool = True
    #: several files: keep each file's rank summary and cross the ranks (engine.analyze.ranks.ranks)
    ranks: bool = True
    #: keep each file's rows, decoded labels and trace beside its analysis (``FileOutcome.result``,
    #: what a screen draws); only for files analysed in this process, never on Dask
    keep_arrays: bool = False

    def __post_init__(self) -> None:
        # a bad mode is the caller's error, not a file's: said before any file is read
        if self.counting not in COUNTING_MODES:
            raise ValueError(
                f"unknown counting mode {self.counting!r}: expected one of {COUNTING_MODES}"
            )


@dataclass(frozen=True)
class Hooks:
    """Who hears how an analysis goes (each optional; called from the analysing thread)."""

    #: what one file is going through, in a line ("reading x.json.gz…")
    stage: Callable[[str], None] | None = None
    #: (files done, files in all, the file just done), as each file finishes
    progress: Callable[[int, int, str], None] | None = None
    #: the address of a running Dask cluster's own page, when it serves one
    dashboard: Callable[[str], None] | None = None
