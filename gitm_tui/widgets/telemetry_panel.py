"""TelemetryPanel: sparklines of utilisation, power, SM clock and temperature, plus memory and throttle reasons."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.widgets import Static

from engine.telemetry.sample import TelemetrySample, reason_names
from engine.text import clean
from gitm_tui.render import spark
from gitm_tui.theme import tone

_HISTORY = 240
# key, title, unit, sample field, fixed scale (lo, hi); hi None = the sample's own limit
_SERIES: tuple[tuple[str, str, str, str, float, str | float], ...] = (
    ("util", "GPU util", "%", "gpu_util", 0.0, 100.0),
    ("power", "power", "W", "power_w", 0.0, "power_limit_w"),
    ("clock", "SM clock", "MHz", "sm_clock_mhz", 0.0, 2000.0),
    ("temp", "temp", "°C", "temperature_c", 20.0, 100.0),
)


class TelemetryPanel(Static):
    """Rolling history of every device's state telemetry (one device: full sparklines; several:
    one block each, like nvitop's); a missing field shows '—', never 0."""

    def __init__(self, **kw: object) -> None:
        super().__init__("telemetry: waiting for the first sample…", **kw)  # type: ignore[arg-type]
        self._hists: dict[int, dict[str, deque[float]]] = {}
        self._lasts: dict[int, TelemetrySample] = {}

    @property
    def _hist(self) -> dict[str, deque[float]]:
        return self._hists[min(self._hists)]

    @property
    def _last(self) -> TelemetrySample | None:
        return self._lasts[min(self._lasts)] if self._lasts else None

    def add(self, s: TelemetrySample) -> None:
        """Append one sample and redraw."""
        self._lasts[s.device] = s
        hist = self._hists.setdefault(s.device, {k[0]: deque(maxlen=_HISTORY) for k in _SERIES})
        for key, _t, _u, field, _lo, _hi in _SERIES:
            v = getattr(s, field)
            if v is not None:
                hist[key].append(float(v))
        throttled = any(
            n != "GPU_IDLE"
            for x in self._lasts.values()
            for n in reason_names(x.clock_event_reasons or 0)
        )
        self.set_class(throttled, "-throttled")
        self.refresh()

    def render(self) -> Text:
        s = self._last
        if s is None:
            return Text("telemetry: waiting for the first sample…")
        if len(self._lasts) > 1:
            return self._render_many()
        width = max(8, self.size.width - 2)
        t = Text()
        t.append(f"telemetry  (device {s.device}, {clean(s.source, 40)})\n", style="bold")
        for key, title, unit, field, lo, hi in _SERIES:
            v = getattr(s, field)
            top = getattr(s, hi) if isinstance(hi, str) else hi
            if v is None:
                t.append(f"{title}: — (not reported)\n\n", style="dim")
                continue
            t.append(f"{title}: ")
            t.append(f"{v:,.0f} {unit}\n", style="bold")
            t.append(
                spark(self._hist[key], lo, float(top or 1.0), width) + "\n",
                style=tone("gitm-spark"),
            )
        if s.memory_used_bytes is not None and s.memory_total_bytes:
            t.append(
                f"memory: {s.memory_used_bytes / 2**30:,.1f} / "
                f"{s.memory_total_bytes / 2**30:,.0f} GiB\n"
            )
            t.append(
                _bar(s.memory_used_bytes / s.memory_total_bytes, width) + "\n",
                style=tone("gitm-info"),
            )
        names = reason_names(s.clock_event_reasons or 0)
        bad = [n for n in names if n != "GPU_IDLE"]
        t.append("clocks: ")
        t.append(", ".join(names) if names else "not throttled", style="bold red" if bad else "")
        return t

    def _render_many(self) -> Text:
        width = max(8, self.size.width - 2)
        t = Text()
        t.append(
            f"telemetry  ({len(self._lasts)} devices, {next(iter(self._lasts.values())).source})\n",
            style="bold",
        )
        for dev in sorted(self._lasts):
            s, h = self._lasts[dev], self._hists[dev]
            t.append(f"GPU {dev} ", style="bold")
            t.append(f"{clean(s.name or '', max(1, width - 8))}\n", style="dim")  # the driver's
            util = f"{s.gpu_util:.0f}%" if s.gpu_util is not None else "—"
            t.append(f" util {util:>4} ")
            t.append(
                spark(h["util"], 0.0, 100.0, max(4, width - 12)) + "\n", style=tone("gitm-spark")
            )
            mem = (
                f"{s.memory_used_bytes / 2**30:,.0f}/{s.memory_total_bytes / 2**30:,.0f}G"
                if s.memory_used_bytes is not None and s.memory_total_bytes
                else "—"
            )
            pw = f"{s.power_w:,.0f}W" if s.power_w is not None else "—"
            ck = f"{s.sm_clock_mhz}MHz" if s.sm_clock_mhz is not None else "—"
            tc = f"{s.temperature_c:.0f}°C" if s.temperature_c is not None else "—"
            if s.memory_used_bytes is not None and s.memory_total_bytes:
                t.append(" mem  ")
                t.append(
                    _bar(s.memory_used_bytes / s.memory_total_bytes, max(4, width - 12)) + "\n",
                    style=tone("gitm-info"),
                )
            t.append(f" {mem} {pw} {ck} {tc}\n")
            bad = [n for n in reason_names(s.clock_event_reasons or 0) if n != "GPU_IDLE"]
            if bad:
                t.append(f" {', '.join(bad)}\n", style="bold red")
        return t


def _bar(frac: float, width: int) -> str:
    """A filled bar (nvitop-style): █ for the used share, ░ for the rest."""
    n = max(0, min(width, round(frac * width)))
    return "█" * n + "░" * (width - n)
