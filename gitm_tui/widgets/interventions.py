"""Optimize-loop tables: pending/applied interventions, invariant violations, claimed causes;
and the one-line bar of phase progress against the budget and gain against the target."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from engine.runtime.budget import format_seconds
from engine.runtime.events import HypothesisView, InterventionUpdate, InvariantView
from gitm_tui.render import outside_text
from gitm_tui.theme import tone

#: how each lifecycle state and safety class is drawn: (emphasis, theme colour)
STATE_TONE = {
    "PROPOSED": ("bold ", "gitm-warn"),
    "APPROVED": ("", "gitm-info"),
    "APPLYING": ("bold ", "gitm-info"),
    "APPLIED": ("", "gitm-info"),
    "VERIFIED": ("bold ", "gitm-ok"),
    "ROLLED_BACK": ("", "gitm-bad"),
    "REJECTED": ("", "gitm-muted"),
    "SAFE": ("", "gitm-ok"),
    "NUMERICS": ("", "gitm-warn"),
    "PRIVILEGED": ("bold ", "gitm-bad"),
}


def _style(word: str) -> str:
    """Return the style of a state or safety class in the active theme ('' if unknown)."""
    emphasis, colour = STATE_TONE.get(word, ("", ""))
    return emphasis + tone(colour) if colour else ""


def _pct(x: float | None) -> str:
    return "—" if x is None or x != x else f"{x:+.1%}"


class InterventionTable(DataTable[object]):
    """One row per intervention, updated in place by id; the latest update is kept per id."""

    COLUMNS = (
        ("id", "id", 4),
        ("lever", "lever", 20),
        ("safety", "safety", 10),
        ("state", "state", 12),
        ("pred", "predicted", 9),
        ("conf", "conf", 5),
        ("meas", "measured", 9),
        ("note", "note", 48),
    )

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self.latest: dict[str, InterventionUpdate] = {}

    def on_mount(self) -> None:
        for key, label, width in self.COLUMNS:
            self.add_column(label, key=key, width=width)

    def update_iv(self, ev: InterventionUpdate) -> None:
        self.latest[ev.id] = ev
        # every text cell a Text: a str cell is read as markup, and a note quotes a program's
        # output or the --check pattern (a metric printed as "[/]" crashed the dashboard)
        cells = {
            "id": outside_text(ev.id),
            "lever": outside_text(ev.lever),
            "safety": outside_text(ev.safety, _style(ev.safety)),
            "state": outside_text(ev.state, _style(ev.state)),
            "pred": _pct(ev.predicted_gain)
            if ev.predicted_gain == ev.predicted_gain
            else "measured",
            "conf": f"{ev.confidence:.2f}" if ev.predicted_gain == ev.predicted_gain else "—",
            "meas": _pct(ev.measured_gain),
            "note": outside_text(ev.note or (f"by {ev.approved_by}" if ev.approved_by else "")),
        }
        if ev.id in self.rows:
            for key, value in cells.items():
                self.update_cell(ev.id, key, value)
        else:
            self.add_row(*cells.values(), key=ev.id)

    def selected(self) -> InterventionUpdate | None:
        """The intervention under the cursor."""
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return self.latest.get(str(key))


class ViolationTable(DataTable[object]):
    """Invariant violations of the latest analysis (and invariants that cannot be checked)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)

    def on_mount(self) -> None:
        for key, label, width in (
            ("inv", "invariant", 15),
            ("op", "op", 44),
            ("n", "rows", 5),
            ("obs", "observed", 11),
            ("pred", "predicted", 11),
            ("msg", "", 40),
        ):
            self.add_column(label, key=key, width=width)

    def show(self, results: tuple[InvariantView, ...]) -> None:
        self.clear()
        for r in results:
            if not r.checkable:
                self.add_row(
                    outside_text(r.invariant),
                    Text("not checkable", style="italic " + tone("gitm-muted")),
                    "",
                    "",
                    "",
                    outside_text(r.reason),
                )
                continue
            if not r.violations:
                self.add_row(
                    outside_text(r.invariant),
                    Text(f"holds on {r.checked} rows", style=tone("gitm-ok")),
                    "",
                    "",
                    "",
                    "",
                )
            for v in r.violations:
                unit = v.unit
                fmt = (
                    (lambda x: f"{x / 1e3:.1f} µs")
                    if unit == "ns"
                    else ((lambda x: f"{x:.3g} B") if unit == "bytes" else (lambda x: f"{x:.0%}"))
                )
                self.add_row(  # names and messages quote the trace: Text, never markup
                    outside_text(r.invariant),
                    outside_text(v.name, limit=44),
                    str(v.count),
                    fmt(v.observed),
                    fmt(v.predicted),
                    outside_text(v.message),
                )


class CauseTable(DataTable[object]):
    """Attribution's hypotheses: claimed causes first."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)

    def on_mount(self) -> None:
        for key, label, width in (
            ("cause", "cause", 20),
            ("imp", "impact", 7),
            ("conf", "conf", 5),
            ("claim", "claimed", 7),
            ("ev", "evidence", 80),
        ):
            self.add_column(label, key=key, width=width)

    def show(self, hyps: tuple[HypothesisView, ...]) -> None:
        self.clear()
        for h in hyps:
            claimed = (
                Text("yes", style="bold " + tone("gitm-ok"))
                if h.claimed
                else Text("no", style=tone("gitm-muted"))
            )
            ev = "; ".join(e.what for e in h.evidence[:2])
            self.add_row(
                outside_text(h.cause),
                f"{h.impact:.1%}",
                f"{h.confidence:.2f}",
                claimed,
                outside_text(ev),  # evidence quotes kernel names: Text, never markup
            )


PHASES = ("profile", "attribute", "rank", "apply", "report")


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
    unit = reactive("µs/sample")
    scale = reactive(1e3)

    def render(self) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
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
        if self.phase in PHASES and self.deadline:
            t.append(f" until {format_seconds(self.deadline)}/{format_seconds(self.budget)}")
        t.append(f" · {self.policy}", style="italic")
        if self.verdict in ("nothing kept", "not measurable"):
            t.append(" · ")
            t.append(
                f"target {self.target:.0%} {self.verdict}",
                style="bold " + tone("gitm-warn"),
            )
            t.append(f" · noise ±{self.noise:.1%}")
        elif self.baseline_ns:
            hit = self.verdict == "met" if self.verdict else self.gain >= self.target
            b, c = self.baseline_ns / self.scale, self.current_ns / self.scale
            fmt = ".1f" if self.unit.startswith("µs") else ".4g"  # µs: one decimal, as always
            t.append(f" · {b:{fmt}}→{c:{fmt}} {self.unit} · ")
            style = "bold " + tone("gitm-ok") if hit else "bold " + tone("gitm-warn")
            if self.verdict:  # the run's verdict, as the summary line has it
                t.append(f"gain {self.gain:+.1%} [{self.gain_low:+.1%}…{self.gain_high:+.1%}]")
                t.append(f" · target {self.target:.0%} {self.verdict}", style=style)
            else:
                t.append(f"gain {self.gain:+.1%}", style=style)
                t.append(f"/{self.target:.0%}")
            t.append(f" · noise ±{self.noise:.1%}")
        return t
