"""Events as the lines a person reads: the one renderer of run events as text.

``gitm-tui --no-ui`` narrates a run on stderr with these lines (gitm_tui/headless.py), the
dashboard's log shows them (gitm_tui/modes/dashboard.py), and ``engine.optimize`` logs them to
the ``engine`` logger — one wording everywhere, so a line a person saw in one place reads the
same in the others. Plain text, UI-free; each surface adds only its prefix and its styling.
Texts from outside (log messages quoting a program, notes quoting a trace) are not cleaned
here: every surface cleans what it writes (engine.text.clean).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.runtime.budget import format_seconds
from engine.runtime.events import (
    Event,
    InterventionUpdate,
    LogEvent,
    PhaseChanged,
    ReportWritten,
    RunFinished,
    RunStarted,
)

__all__ = ["MEASURED_ONLY", "Line", "event_lines", "prediction"]

#: what a lever with no prediction says instead of a number (never "nan")
MEASURED_ONLY = "measured only (no trace to predict from)"


@dataclass(frozen=True)
class Line:
    """One line of narration: its level ("info", "warning" or "error") and its text;
    ``emphasis`` marks the lines a run's end is read by (the report, the final status)."""

    level: str
    text: str
    emphasis: bool = False
    #: said before the text where the level is not shown otherwise ("warning: "): a logger,
    #: which has levels of its own, leaves it out
    prefix: str = ""

    @property
    def full(self) -> str:
        return self.prefix + self.text


def prediction(gain: float | None, confidence: float | None, what: str = "") -> str:
    """A proposal's prediction as a person reads it: the replayed gain (``what`` after it,
    e.g. " less time per sample") and its confidence — or, for a lever measured only (a
    program with no device trace), ``MEASURED_ONLY``: no "nan", no "confidence 0.00"."""
    if gain is None or not math.isfinite(gain):
        return MEASURED_ONLY
    conf = "" if confidence is None or not math.isfinite(confidence) else f"{confidence:.2f}"
    return f"predicted {gain:+.1%}{what}" + (f" (confidence {conf})" if conf else "")


def event_lines(ev: Event) -> list[Line]:
    """The lines a person following the run reads of ``ev`` (none for the events only a
    screen draws: rows, telemetry, progress)."""
    if isinstance(ev, RunStarted):
        where = f"{ev.device.upper()} (no GPU used)" if ev.simulated else ev.device
        return [
            Line(
                "info",
                f"run {ev.run_id}: {ev.workload} on {where}, "
                f"budget {format_seconds(ev.budget_s)}, seed {ev.seed}, target {ev.target:.0%}, "
                f"approvals {ev.approve}; run store {ev.run_dir}",
            )
        ]
    if isinstance(ev, InterventionUpdate):
        meas = f", measured {ev.measured_gain:+.1%}" if ev.measured_gain is not None else ""
        note = f" — {ev.note}" if ev.note else ""
        pred = prediction(ev.predicted_gain, ev.confidence)
        return [Line("info", f"{ev.id} {ev.lever} [{ev.safety}] {ev.state}: {pred}{meas}{note}")]
    if isinstance(ev, ReportWritten):
        level = "info" if ev.target_met else "warning"
        return [Line(level, f"{ev.summary}; report {ev.path}", emphasis=True)]
    if isinstance(ev, PhaseChanged) and ev.phase != "done":
        return [Line("info", f"phase {ev.phase}" + (f" — {ev.detail}" if ev.detail else ""))]
    if isinstance(ev, LogEvent):
        level = ev.level if ev.level in ("warning", "error") else "info"
        return [Line(level, ev.message, prefix=f"{ev.level}: ")]
    if isinstance(ev, RunFinished):
        return _finished(ev)
    return []


def _finished(ev: RunFinished) -> list[Line]:
    if not ev.segments:  # a run with no kernel trace: no "0 segments decoded (COMPUTE 0% …)"
        return [Line("info", f"{ev.status} in {format_seconds(ev.wall_s)}", emphasis=True)]
    shares = ", ".join(f"{k} {v:.0%}" for k, v in ev.regime_shares.items())
    out = [
        Line(
            "info",
            f"{ev.status}: {ev.segments} segments decoded in {format_seconds(ev.wall_s)} "
            f"({ev.iterations} iterations, {ev.sim_time_ns / 1e9:.2f}s device time): {shares}",
            emphasis=True,
        )
    ]
    v = ev.validation
    if v:
        out.append(
            Line(
                "info",
                f"vs {v['against']}: macro-F1 {v['macro_f1']:.3f}, accuracy {v['accuracy']:.3f}",
            )
        )
    return out
