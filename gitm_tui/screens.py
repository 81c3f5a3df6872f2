"""Modal screens of the dashboard."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Static

from engine.regimes import Label
from gitm_tui.theme import regime_style

# paragraphs are one line each: the screen wraps them to its width (hard breaks made it
# re-wrap every line mid-sentence on a narrower terminal)
HELP = """[b]gitm-tui — live regime decoding[/b]

Each strip is one CUDA stream; each cell is one kernel or copy, newest on the right, coloured by the bottleneck regime EESM decoded for it:

{regimes}

A shaded cell ▒ lies in M_deg: the covariance of recent pressures is ill-conditioned (κ > K_max), so its label is low-confidence. Labels become final {lag} segments after they arrive on their stream.

[b]The optimize loop[/b] runs under the strips: profile → attribute → rank → apply → report, each with its share of the budget (bar under the header: gain against the target, noise floor). Interventions are proposed with a predicted gain (replayed on the trace) and the causes attribution found; nothing changes the workload until it is approved. Each applied lever is measured and kept only if it beats the noise floor and passes the workload's correctness check.

[b]Your own program[/b] (--workload command or torch) has no kernel trace: the strips, κ and kernel table give way to what the run measures — the baseline, the A/A spread (the noise floor) and each lever's trial — and its levers are measured only (no prediction). The header's clock says how long the run has waited for you.
"""


#: the regimes as the help screen explains them, two to a line
_MEANING = (
    ("COMPUTE", "tensor / ALU pipes busy"),
    ("MEMORY", "HBM bandwidth-bound"),
    ("STALL", "waiting on latency or deps"),
    ("IDLE", "launch-bound, tiny kernel"),
    ("COPY", "a memcpy / memset"),
    ("COMM", "a collective (NCCL / RCCL)"),
)


def regimes_text() -> str:
    """The regime lines of the help screen (markup), coloured from the theme."""
    cells = [
        f"[{regime_style(Label[name])}]{name}[/]{' ' * (9 - len(name))}{what:<28}"
        for name, what in _MEANING
    ]
    return "\n".join("  " + "".join(cells[i : i + 2]).rstrip() for i in range(0, len(cells), 2))


def keys_text(bindings: list[tuple[str, str]]) -> str:
    """The key list of the help screen, from the app's own bindings (never typed twice)."""
    keys = "   ".join(f"[b]{key}[/b] {what.lower()}" for key, what in bindings)
    return (
        f"Keys:  {keys}\n       [b]tab[/b] moves the focus; on the tab bar, [b]←/→[/b] switch "
        "tables (Interventions · Violations · Causes · Log), or click one\n"
    )


class HelpScreen(ModalScreen[None]):
    """What the dashboard shows and its keys."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, lag: int, bindings: list[tuple[str, str]]) -> None:
        """``bindings``: (key, what it does) of the app's keys, in the app's order."""
        super().__init__()
        self.lag = lag
        self.bindings = bindings

    def compose(self) -> ComposeResult:
        yield Static(
            HELP.format(lag=self.lag, regimes=regimes_text()) + "\n" + keys_text(self.bindings),
            id="help",
        )


class ConfirmScreen(ModalScreen[bool]):
    """Yes/no before an intervention changes the workload (approve) or is undone (roll back)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: Text) -> None:
        """``question`` is a Text, not a markup string: it names a lever and may quote a
        program's output."""
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        keys = Text.assemble("\n\n", ("y", "bold"), " yes    ", ("n", "bold"), " / escape no")
        yield Static(Text.assemble(self.question, keys), id="confirm")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class InterventionScreen(ModalScreen[None]):
    """Claim, evidence, replay prediction and measured delta of one intervention."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "dismiss", "Close")]

    def __init__(self, body: Text) -> None:
        """``body`` is a Text, not a markup string: evidence and notes come from outside."""
        super().__init__()
        self.body = body

    def compose(self) -> ComposeResult:
        yield Static(self.body, id="intervention-detail")
