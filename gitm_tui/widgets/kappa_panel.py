"""KappaPanel: the identifiability gate per stream — current κ and the M_id / M_deg partition."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from engine.runtime.events import KappaUpdate
from gitm_tui.render import fmt_kappa


class KappaPanel(Static):
    """Shows the latest KappaUpdate of every stream; gains the ``-degenerate`` class when any stream is in M_deg."""

    def __init__(self, **kw: object) -> None:
        super().__init__("κ gate: waiting for the first window…", **kw)  # type: ignore[arg-type]
        self._rows: dict[int, KappaUpdate] = {}
        self._laid_out = -1  # streams shown at the last layout

    def update_kappa(self, ev: KappaUpdate) -> None:
        """Record one stream's update and redraw."""
        self._rows[ev.stream] = ev
        k_max = ev.k_max
        table = Table(
            box=None,
            pad_edge=False,
            expand=True,
            title_justify="left",
            title=f"κ gate  (M_deg when κ > {k_max:g})",
            title_style="bold",
        )
        for col in ("stream", "κ now", "M_id", "M_deg", "filling"):
            table.add_column(col, justify="right" if col != "stream" else "left")
        degenerate_now = False
        for s in sorted(self._rows):
            r = self._rows[s]
            now_deg = r.kappa == r.kappa and r.kappa > r.k_max
            degenerate_now |= now_deg
            table.add_row(
                str(s),
                Text(fmt_kappa(r.kappa), style="bold red" if now_deg else ""),
                f"{r.m_id:.0%}",
                f"{r.m_deg:.0%}",
                f"{r.undetermined:.0%}",
            )
        self.set_class(degenerate_now, "-degenerate")
        # a new height only when a stream appears: otherwise no layout of the whole screen
        self.update(table, layout=len(self._rows) != self._laid_out)
        self._laid_out = len(self._rows)
