"""The optimize loop's one-line bar: phase progress against the budget, and the measured gain
against the target.

"gain" here is always the **kept** gain — the configuration the run keeps against the baseline,
the figure report.md's result line gives. A lever measured faster but not kept (rolled back by
the gate) is not part of it: it shows apart as "best trial … not kept", the figure report.md's
interventions table gives in its "measured Δ" column."""

from __future__ import annotations

import math

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from engine.runtime.budget import format_seconds
from gitm_tui.theme import tone

PHASES = ("profile", "attribute", "rank", "apply", "report")


def noise_text(noise: float) -> str:
    """'noise ±1.7%', or 'noise unknown' where the A/A gave no finite spread (a run diagnosed
    before its pairs resolved it): never 'nan'."""
    return f"noise ±{noise:.1%}" if math.isfinite(noise) else "noise unknown"


class OptimizeBar(Static):
    """Phase progress against the budget and the measured gain against the target."""

    phase = reactive("starting")
    elapsed = reactive(0.0)
    budget = reactive(0.0)
    deadline = reactive(0.0)
    baseline_ns = reactive(0.0)
    current_ns = reactive(0.0)
    gain = reactive(0.0)
    target = reactive(0.0)
    noise = reactive(0.0)
    #: the run's verdict once its report is written (met, not met, not confirmed, nothing
    #: kept, not measurable) and the final gain's interval: the same as the summary line
    verdict = reactive("")
    gain_low = reactive(0.0)
    gain_high = reactive(0.0)
    policy = reactive("manual")
    #: the best measured gain of a trial that was not kept (rolled back, superseded) and its
    #: intervention id; NaN while there is none above the kept gain
    best_trial = reactive(float("nan"))
    best_trial_id = reactive("")
    #: the qualification gate's decision ("commit", "diagnose", "diagnose, forced"; '' before)
    gate = reactive("")
    unit = reactive("µs/sample")
    scale = reactive(1e3)

    def render(self) -> Text:
        """The phases, then the figures; where the whole line is wider than the bar (120
        columns), the phases shrink to the current one and its place (apply 4/5) and the
        phase's deadline to "ends 33.3s" (the budget is in the header) so that no figure is
        cut."""
        full = self._phases(compact=False)
        tail = self._figures(compact=False)
        if self.size.width and full.cell_len + tail.cell_len > self.size.width:
            full, tail = self._phases(compact=True), self._figures(compact=True)
        if self.size.width and full.cell_len + tail.cell_len > self.size.width:
            tail = self._figures(compact=True, tight=True)  # 120 columns: 146 cells otherwise
        full.append_text(tail)
        return full

    def _phases(self, compact: bool) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        if compact:
            if self.phase in PHASES:
                t.append(f" {self.phase} ", style="bold reverse")
                t.append(f" {PHASES.index(self.phase) + 1}/{len(PHASES)}")
            else:
                t.append(f" {self.phase} ", style="bold reverse")
            return t
        for p in PHASES:
            done = (
                PHASES.index(p) < PHASES.index(self.phase)
                if self.phase in PHASES
                else self.phase == "done"
            )
            style = (
                "bold reverse"
                if p == self.phase
                else (tone("gitm-ok") if done else tone("gitm-muted"))
            )
            t.append(f" {p} ", style=style)
        return t

    def _figures(self, compact: bool, tight: bool = False) -> Text:
        """The figures after the phases; ``tight``: the words a figure can do without go (the
        policy, "gain", "not kept"), every figure stays."""
        t = Text()
        if self.phase in PHASES and self.deadline:
            t.append(
                f" ends {format_seconds(self.deadline)}"
                if compact
                else f" until {format_seconds(self.deadline)}/{format_seconds(self.budget)}"
            )
        if not tight:
            t.append(f" · {self.policy}", style="italic")
        if self.gate:
            warn = self.gate.startswith("diagnose")
            if not tight:
                t.append(f" · gate {self.gate}", style=tone("gitm-warn") if warn else "")
            elif warn:  # tight: a commitment goes unsaid, a diagnosis shortly
                forced = " forced" if "forced" in self.gate else ""
                t.append(f" · gate ✗{forced}", style=tone("gitm-warn"))
        if self.verdict in ("nothing kept", "not measurable"):
            t.append(" · ")
            t.append(
                f"target {self.target:.0%} {self.verdict}",
                style="bold " + tone("gitm-warn"),
            )
            self._best_trial(t, tight)
            t.append(f" · {noise_text(self.noise)}")
        elif self.baseline_ns and math.isfinite(self.baseline_ns):
            hit = self.verdict == "met" if self.verdict else self.gain >= self.target
            b, c = self.baseline_ns / self.scale, self.current_ns / self.scale
            fmt = ".1f" if self.unit.startswith("µs") else ".4g"  # µs: one decimal, as always
            t.append(f" · {b:{fmt}}→{c:{fmt}} {self.unit} · ")
            style = "bold " + tone("gitm-ok") if hit else "bold " + tone("gitm-warn")
            kept = "kept" if tight else "kept gain"
            if self.verdict:  # the run's verdict, as the summary line has it
                t.append(f"{kept} {self.gain:+.1%} [{self.gain_low:+.1%}…{self.gain_high:+.1%}]")
                t.append(f" · target {self.target:.0%} {self.verdict}", style=style)
            else:
                t.append(f"{kept} {self.gain:+.1%}", style=style)
                t.append(f"/{self.target:.0%}")
            self._best_trial(t, tight)
            t.append(f" · {noise_text(self.noise)}")
        return t

    def _best_trial(self, t: Text, tight: bool = False) -> None:
        """A trial measured faster than what is kept, but not kept: said apart, labelled."""
        best = self.best_trial
        if best == best and best > (self.gain if self.verdict != "nothing kept" else 0.0):
            if tight:
                t.append(f" · {self.best_trial_id} {best:+.1%} not kept")
            else:
                t.append(f" · best trial {best:+.1%} {self.best_trial_id} not kept")
