"""What changed between two CPU-only traces (`gitm-tui diff BEFORE AFTER` where neither holds a
GPU row, issue 50: a CPU user could not compare batch 32 with batch 64). The figures are the
CPU summary's (engine.analyze.breakdown.cpu_trace): the ProfilerSteps' time, each operator's
calls and self time per step (per window where a trace has no steps), and the shares of data
loading, the optimizer and the gaps no operator covers. Plain data and its text; the JSON has
``"kind": "cpu_only"``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.analyze.breakdown.cpu_trace import CpuSummary
from engine.text import clean

#: operators kept per trace for the diff (a CPU trace has tens to hundreds of names)
ALL_OPS = 100_000


@dataclass(frozen=True)
class OpChange:
    """One operator name: calls and self time per step (or per window) on each side."""

    name: str
    status: str  # changed | appeared | disappeared
    calls_before: int
    calls_after: int
    self_before_ns: float  # per step where both traces have steps, else in the window
    self_after_ns: float

    @property
    def delta_ns(self) -> float:
        return self.self_after_ns - self.self_before_ns


@dataclass(frozen=True)
class CpuDiff:
    before: CpuSummary
    after: CpuSummary
    per: str  # "step" | "window"
    ops: tuple[OpChange, ...]  # by |Δ self time|, largest first

    def to_json(self, indent: int | None = 2) -> str:
        """JSON text (ASCII: every control character in a name escaped, inert on a terminal)."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=True)

    def to_dict(self) -> dict[str, Any]:
        def side(c: CpuSummary) -> dict[str, Any]:
            s = c.steps
            return {
                "source": c.source,
                "window_ns": c.window_ns,
                "steps": s.count if s else 0,
                "step_median_ns": s.median_ns if s else None,
                "data_loading_share": c.data_loading.share,
                "optimizer_share": c.optimizer.share,
                "collectives_share": c.collectives.share if c.collectives else 0.0,
                "gaps_share": c.gaps.share,
                "op_share": c.op_share,
            }

        return {
            "kind": "cpu_only",
            "before": side(self.before),
            "after": side(self.after),
            "per": self.per,
            "operators": [
                {
                    "name": o.name,
                    "status": o.status,
                    "calls_before": o.calls_before,
                    "calls_after": o.calls_after,
                    f"self_before_ns_per_{self.per}": o.self_before_ns,
                    f"self_after_ns_per_{self.per}": o.self_after_ns,
                    "delta_ns": o.delta_ns,
                }
                for o in self.ops
            ],
        }


def diff_cpu(before: CpuSummary, after: CpuSummary) -> CpuDiff:
    """The operators of two CPU summaries (each with every operator: ``ALL_OPS``) compared per
    step where both have ProfilerSteps, else per window (said in ``per``)."""
    steps = bool(before.steps and after.steps and before.steps.count and after.steps.count)
    per = "step" if steps else "window"

    def scale(c: CpuSummary) -> float:
        return 1.0 / c.steps.count if steps and c.steps else 1.0

    b = {o.name: o for o in before.top}
    a = {o.name: o for o in after.top}
    out = []
    for name in dict.fromkeys([*b, *a]):
        ob, oa = b.get(name), a.get(name)
        status = "changed" if ob and oa else "appeared" if oa else "disappeared"
        out.append(
            OpChange(
                name,
                status,
                ob.calls if ob else 0,
                oa.calls if oa else 0,
                ob.self_ns * scale(before) if ob else 0.0,
                oa.self_ns * scale(after) if oa else 0.0,
            )
        )
    out.sort(key=lambda o: -abs(o.delta_ns))
    return CpuDiff(before, after, per, tuple(out))


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _pct(b: float, a: float) -> str:
    return f"{(a - b) / b:+.1%}" if b else "—"


def cpu_diff_lines(d: CpuDiff, top: int = 25, width: int = 120) -> list[str]:
    """The diff as text (names cleaned: they come from the traces)."""
    bs, as_ = d.before.steps, d.after.steps
    lines = [
        "gitm-tui diff — CPU-only traces (no GPU rows): operators on the CPU",
        f"before: {clean(d.before.source, 200)}",
        f"after:  {clean(d.after.source, 200)}",
    ]
    if bs and as_:
        lines.append(
            f"ProfilerStep median: {_ms(bs.median_ns)} → {_ms(as_.median_ns)} "
            f"({_pct(bs.median_ns, as_.median_ns)}); steps {bs.count} → {as_.count}"
        )
    else:
        lines.append(
            f"window: {_ms(d.before.window_ns)} → {_ms(d.after.window_ns)} (a trace without "
            "ProfilerSteps: operators compared over each whole window, not per step)"
        )
    cb, ca = d.before.collectives, d.after.collectives
    for what, b, a in (
        ("data loading", d.before.data_loading.share, d.after.data_loading.share),
        ("collectives", cb.share if cb else 0.0, ca.share if ca else 0.0),
        ("optimizer", d.before.optimizer.share, d.after.optimizer.share),
        ("gaps no operator covers", d.before.gaps.share, d.after.gaps.share),
    ):
        lines.append(f"{what}: {b:.1%} → {a:.1%} of the window")
    lines.append("")
    name_w = max(20, width - 62)
    lines.append(
        f"{'operator':<{name_w}}  {'calls in all':>13}  {'self per ' + d.per:>25}  {'Δ':>12}"
    )
    for o in d.ops[:top]:
        name = clean(o.name, 400)
        if len(name) > name_w:
            name = name[: name_w - 1] + "…"
        calls = f"{o.calls_before}→{o.calls_after}"
        times = f"{_ms(o.self_before_ns)}→{_ms(o.self_after_ns)}"
        mark = {"appeared": " (new)", "disappeared": " (gone)"}.get(o.status, "")
        lines.append(
            f"{name:<{name_w}}  {calls:>13}  {times:>25}  {o.delta_ns / 1e6:>+9.3f} ms{mark}"
        )
    if len(d.ops) > top:
        lines.append(f"… {len(d.ops) - top} more operators (--top N, or --json for all)")
    return lines
