"""What `gitm-tui diff BEFORE AFTER` finds, as pydantic models: ``TraceDiff`` is what
engine.analyze.diff.diff returns and ``--json`` prints (its JSON Schema is committed as
manifests/schemas/diff.schema.json; docs/diff.md tells every field's meaning)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticSerializationError

from engine.text import clean, escape_json_text, map_strings, md_escape, valid_unicode

#: 1: the first diff (issue 39); 2: the two critical paths compared (``critical_path``)
SCHEMA_VERSION = 2

#: a name's change in count, in HTA TraceDiff's words (``ops_diff``: added, deleted,
#: increased, decreased, unchanged; "deleted" is "removed" here). Count only: a name whose count
#: did not move but whose time did is "unchanged" with a ``delta_ns``
Status = Literal["added", "removed", "increased", "decreased", "unchanged"]


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Side(_M):
    """One of the two traces, as far as the diff read it."""

    source: str
    format: str
    device: str = Field(description="the device as the analysis named it ('unknown' if not)")
    rank: int | None
    scope: str = Field(description="'whole trace', or 'ProfilerStep#N' (one step)")
    rows: int = Field(description="GPU rows compared: kernels, copies, memsets, collectives")
    kernels: int
    gpu_time_ns: int = Field(description="sum of the rows' durations")
    busy_ns: int = Field(description="time any row ran, per device, summed over devices")
    span_ns: int = Field(description="first row's start to last row's end")
    steps: int = Field(description="ProfilerSteps in scope (0: none found)")
    step_ids: list[int] = Field(description="their N (ProfilerStep#N), -1 where unnamed")
    rows_in_steps: int = Field(
        description="rows whose launch call starts inside a step (HTA's iteration rule)"
    )
    mean_step_ns: float | None = Field(description="mean ProfilerStep duration (None: no steps)")


class Figures(_M):
    """A group of rows (a kernel name, a class, a label, a copy direction) in one trace."""

    count: int
    total_ns: int
    mean_ns: float | None = Field(description="total_ns / count (None: no rows)")
    per_step_ns: float | None = Field(
        description="time of its rows launched inside a step, divided by the steps (None: "
        "the trace has no ProfilerStep)"
    )
    bytes: int | None = Field(
        default=None, description="copies and memsets: bytes moved (None: not recorded)"
    )
    label: str | None = Field(
        default=None, description="kernel names: the majority label of their time"
    )
    prior_share: float | None = Field(
        default=None,
        description="decoded regimes: the share of the time whose label rests on the kernel-name "
        "prior alone (evidence tier PRIOR); None where no label was decoded",
    )


class Change(_M):
    """One kernel name (class, label, copy kind) before and after."""

    key: str = Field(description="the kernel name as the trace wrote it, or the class / label")
    klass: str | None = Field(default=None, description="kernel names: their class")
    status: Status
    before: Figures
    after: Figures
    delta_count: int
    delta_ns: int = Field(description="after.total_ns - before.total_ns")
    delta_per_step_ns: float | None = Field(description="None unless both traces have steps")


class Metric(_M):
    """One whole-trace figure before and after: idle, launches, copies, collectives, …"""

    name: str
    unit: Literal["ns", "count", "bytes"]
    before: int | float | None = Field(description="None: the trace cannot say (note says why)")
    after: int | float | None
    delta: int | float | None
    note: str = ""


class FingerprintDiff(_M):
    """The two traces' workload fingerprints compared (engine.optimizer.fingerprint)."""

    available: bool = Field(description="False: no fingerprint could be computed (note: why)")
    value: float | None = None
    threshold: float | None = Field(default=None, description="documented same-workload bound")
    same: bool | None = Field(default=None, description="value within threshold")
    reasons: list[str] = Field(default_factory=list, description="what differs, one line each")
    parts: dict[str, float | None] = Field(
        default_factory=dict,
        description="each part's dissimilarity in [0, 1] (kernels, shapes, activity, …); null: "
        "one side cannot say",
    )
    unknown: list[str] = Field(default_factory=list, description="what could not be judged, why")
    note: str = ""


class PathSide(_M):
    """One trace's critical path as the diff compares it, or why it has none."""

    known: bool = Field(description="False: this trace has no critical path here (why: window)")
    total_ns: int | None = Field(description="the path's length: its groups add up to it")
    window: str = Field(
        description="what the path covers (the replayed window, or one ProfilerStep of it); "
        "where unknown, why"
    )
    headline: str = Field(description="the analysis's headline ('bound by …'), or 'unknown'")
    bound_by: str | None = Field(description="the group with most time (None: unknown)")


class GroupChange(_M):
    """One headline group of the critical path (engine.analyze.breakdown.critical.GROUPS) before and
    after; None on a side with no critical path (unknown, never 0)."""

    group: str = Field(description="'exposed communication', 'host/framework', …")
    parts: list[str] = Field(description="the critical-path parts it adds up")
    before_ns: int | None
    after_ns: int | None
    before_share: float | None = Field(description="of before's critical path")
    after_share: float | None = Field(description="of after's critical path")
    delta_ns: int | None = Field(description="after_ns - before_ns")
    delta_share: float | None = Field(description="after_share - before_share")


class CriticalDiff(_M):
    """The two traces' critical paths (``Analysis.critical_path``) compared by headline group:
    what bounds each, and which share moved."""

    available: bool = Field(description="both traces have a critical path in scope")
    before: PathSide
    after: PathSide
    headline: str = Field(
        description="the groups that moved most, 'exposed communication 38% → 12%; …', or why "
        "the paths cannot be compared"
    )
    groups: list[GroupChange] = Field(
        description="every headline group, the largest share on either side first"
    )
    note: str = Field(default="", description="how the scope maps onto the paths")


class TraceDiff(_M):
    """What changed from one trace (before) to another (after)."""

    schema_version: int = SCHEMA_VERSION
    before: Side
    after: Side
    scope: str = Field(description="what was compared, in a line")
    counting: str = Field(description="what counts as a row and its time (analyze's rule)")
    totals: list[Metric]
    kernels: list[Change] = Field(description="per kernel name, largest |delta_ns| first")
    kernels_total: int = Field(description="names in either trace (kernels may hold the top)")
    kernels_by_status: dict[str, int] = Field(
        description="names per status, over all names (HTA ops_diff's five lists, counted)"
    )
    classes: list[Change] = Field(description="per kernel class, largest |delta_ns| first")
    labels: list[Change] = Field(
        description="per label (decoded regime, or COPY / COMM / UNKNOWN), largest |delta_ns| first"
    )
    copies: list[Change] = Field(description="per copy direction and memory kinds; memsets")
    fingerprint: FingerprintDiff
    critical_path: CriticalDiff = Field(
        description="the two critical paths by headline group (docs/critical_path.md)"
    )
    notes: list[str]

    def metric(self, name: str) -> Metric:
        """The total called ``name``; KeyError if there is none."""
        for m in self.totals:
            if m.name == name:
                return m
        raise KeyError(name)

    def to_dict(self) -> dict[str, object]:
        """Plain JSON data: the names as they were in the traces, a lone surrogate (which UTF-8
        cannot hold) as U+FFFD."""
        out: dict[str, object] = map_strings(self.model_dump(mode="json"), valid_unicode)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """JSON text: the names as they were, every control, bidi and line-separator character a
        JSON escape (engine.text.escape_json_text): inert on a terminal that shows it."""
        try:
            text = self.model_dump_json(indent=indent)
        except PydanticSerializationError:  # a lone surrogate in a name
            fixed = TraceDiff.model_validate(map_strings(self.model_dump(), valid_unicode))
            text = fixed.model_dump_json(indent=indent)
        return escape_json_text(text)

    def cleaned(self, limit: int | None = None) -> TraceDiff:
        """A copy with every string through engine.text.clean (one line, no escape sequence, at
        most ``limit`` characters): what a terminal or a screen shows."""
        return TraceDiff.model_validate(map_strings(self.model_dump(), lambda s: clean(s, limit)))

    def markdown(self, top: int = 10) -> str:
        """A report section (Markdown): the headline totals before → after and the ``top``
        kernel names with the largest |Δ time|; every string from a trace cleaned and
        Markdown-escaped (engine.text), names cut at 120 characters. What the optimize report
        shows for a kept lever (baseline trace vs trial trace)."""
        lines = [
            f"Compared: {_md(self.scope)}; before {_md(self.before.source)} "
            f"({_md(self.before.device)}), after {_md(self.after.source)} "
            f"({_md(self.after.device)}).",
            "",
            "| total | before | after | Δ |",
            "|---|---:|---:|---:|",
        ]
        for name in ("gpu_time", "gpu_time_per_step", "busy", "idle", "launch_calls",
                     "copies", "collective_time"):  # fmt: skip
            m = self.metric(name)
            cells = [_md_value(m.unit, v) for v in (m.before, m.after)]
            delta = _md_value(m.unit, m.delta, signed=True)
            lines.append(f"| {name.replace('_', ' ')} | {cells[0]} | {cells[1]} | {delta} |")
        f = self.fingerprint
        if f.available and f.value is not None:
            verdict = "same workload" if f.same else "different workload"
            lines += ["", f"Fingerprint distance {f.value:.3g} (threshold {f.threshold:.3g}): "
                      f"{verdict}" + "".join(f"; {_md(r, 240)}" for r in f.reasons[:3])]  # fmt: skip
        else:
            lines += ["", f"Fingerprint: {_md(f.note or 'unknown')}."]
        cp = self.critical_path
        lines += ["", f"Critical path (each trace's share of its own path): {_md(cp.headline)}."]
        by = ", ".join(f"{n} {k}" for k, n in self.kernels_by_status.items() if n)
        lines += [
            "",
            f"Kernels: {self.kernels_total:,} names ({by}); the largest changes in time:",
            "",
            "| change | kernel | calls | total ms | Δ ms |",
            "|---|---|---:|---:|---:|",
        ]
        for c in self.kernels[:top]:
            lines.append(
                f"| {c.status} | `{_code(c.key, 120)}` | {c.before.count:,} → {c.after.count:,} | "
                f"{c.before.total_ns / 1e6:,.3f} → {c.after.total_ns / 1e6:,.3f} | "
                f"{c.delta_ns / 1e6:+,.3f} |"
            )
        lines += [f"- {_md(n)}" for n in ([""] if self.notes else []) + self.notes if n]
        return "\n".join(lines) + "\n"


def _md(text: str, limit: int = 2000) -> str:
    """Outside text for Markdown: one line, no escape sequence, markup characters escaped."""
    return md_escape(clean(text, limit))


def _code(name: str, limit: int) -> str:
    """A name for a code span in a Markdown table (as engine.analyze.output.export.md_code): cleaned,
    cut, no pipe or backtick (markup inside a code span is shown, never rendered)."""
    return clean(name, limit).replace("|", "\\|").replace("`", "'")


def _md_value(unit: str, v: float | None, signed: bool = False) -> str:
    if v is None:
        return "unknown"
    sign = "+" if signed else ""
    if unit == "ns":
        return f"{v / 1e6:{sign},.3f} ms"
    if unit == "bytes":
        return f"{v / 1e6:{sign},.1f} MB"
    return f"{v:{sign},.0f}"


def diff_schema_json() -> str:
    """The JSON Schema of ``TraceDiff`` (committed as manifests/schemas/diff.schema.json)."""
    import json

    return json.dumps(TraceDiff.model_json_schema(), indent=2) + "\n"
