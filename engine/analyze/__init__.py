"""`gitm-tui analyze`: what the traces people already have say, one file or thousands of ranks.

The front door is ``engine.analyze.api`` (``analyze(paths, options)``, ``list_files``); what runs
under it is here, one concern a sub-package, each importing only those below it (an
import-linter contract in pyproject.toml):

* ``diff/`` — two analyses compared (``gitm-tui diff``).
* ``output/`` — analysis.json, report.md and perfetto.json of a file; cross_rank.json/.md and
  the merged Perfetto file of a job.
* ``ranks/`` — many ranks of one job: collectives matched, stragglers, waits, the job's
  verdict; SYNTHETIC ranks to try it on.
* ``advice/`` — what would help: every lever replayed on the trace, its ceiling, held to what
  its peers allow.
* ``breakdown/`` — one trace taken apart: the Analysis model, GPU time by class and regime,
  idle, copies, launches, the critical path, what is already in use, CPU-only traces.

At this level: ``compute`` (one trace through breakdown and advice: ``analyze_trace``),
``run`` / ``cluster`` / ``job`` (files read here or on Dask, a job's second pass),
``options``, ``remote`` (fsspec URLs), ``warm`` (the first run's compile), ``fingerprints``.
"""
