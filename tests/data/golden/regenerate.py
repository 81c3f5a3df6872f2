"""Write tests/data/golden/<trace>.json: what `gitm-tui analyze <trace> --json --no-write` prints
for every trace under tests/data/traces (Kineto *.json.gz, Nsight *.sqlite; a CPU-only Kineto
trace's CPU summary, ``"kind": "cpu_only"``), held by tests/trace/test_golden_analysis.py.

Run it only when a change of the analysis is meant (`python tests/data/golden/regenerate.py`),
and read the diff: a golden that moves is a result that moved. ``source`` (the trace's path,
which depends on where the repository is checked out) is written relative to the repository;
nothing else varies from run to run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
TRACES = ROOT / "tests" / "data" / "traces"
GOLDEN = ROOT / "tests" / "data" / "golden"


def traces() -> list[Path]:
    """Every real trace: Kineto JSON (gzipped, in subfolders too) and Nsight SQLite exports."""
    found = [*TRACES.rglob("*.json.gz"), *TRACES.rglob("*.sqlite")]
    return sorted(found, key=lambda p: p.relative_to(TRACES).as_posix())


def golden_name(trace: Path) -> str:
    """tests/data/golden/<name>.json: the trace's path under tests/data/traces, suffixes off,
    folders joined by "__" (two ranks' ``rank-0.json.gz`` do not share one golden)."""
    rel = trace.relative_to(TRACES).as_posix()
    rel = rel.removesuffix(".gz").removesuffix(".json").removesuffix(".sqlite")
    return rel.replace("/", "__") + ".json"


def analysis_json(trace: Path) -> Any:
    """The analysis as `gitm-tui analyze TRACE --json --no-write` prints it (one file: the
    command's list of one), ``source`` made relative to the repository."""
    from engine.analyze.api import AnalyzeOptions, analyze
    from engine.analyze.breakdown.cpu_trace import cpu_dict
    from engine.analyze.output.export import analysis_dict

    # the command's front door and its JSON form; compiled kernels only (no first-run child)
    (outcome,) = analyze([str(trace)], AnalyzeOptions(first_run=False, ranks=False)).outcomes
    if outcome.analysis is not None:
        dump = analysis_dict(outcome.analysis)
    elif outcome.cpu is not None:  # a CPU-only trace: its CPU summary, as --json prints it
        dump = cpu_dict(outcome.cpu)
    else:
        raise RuntimeError(f"{trace}: {outcome.error}")
    dump["source"] = trace.relative_to(ROOT).as_posix()
    return json.loads(json.dumps([dump]))


def render(doc: Any) -> str:
    """The golden's text: as the command prints it, with a final newline."""
    return json.dumps(doc, indent=2) + "\n"


def main() -> int:
    sys.path.insert(0, str(ROOT))
    for trace in traces():
        out = GOLDEN / golden_name(trace)
        out.write_text(render(analysis_json(trace)))
        print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
