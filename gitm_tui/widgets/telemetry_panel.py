"""TelemetryPanel: sparklines of utilisation, power, SM clock and temperature, plus memory and throttle reasons."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.widgets import Static

from engine.telemetry.sample import TelemetrySample, reason_names
from gitm_tui.render import spark

_HISTORY = 240
# key, title, unit, sample field, fixed scale (lo, hi); hi None = the sample's own limit
_SERIES: tuple[tuple[str, str, str, str, float, str | float], ...] = (
    ("util", "GPU util", "%", "gpu_util", 0.0, 100.0),
    ("power", "power", "W", "power_w", 0.0, "power_limit_w"),
    ("clock", "SM clock", "MHz", "sm_clock_mhz", 0.0, 2000.0),
    ("temp", "temp", "°C", "temperature_c", 20.0, 100.0),
)


class TelemetryPanel(Static):
    """Rolling history of one device's state telemetry; a missing field shows '—', never 0."""

    def __init__(self, **kw: object) -> None:
        super().__init__("telemetry: waiting for the first sample…", **kw)  # type: ignore[arg-type]
        self._hist: dict[str, deque[float]] = {k[0]: deque(maxlen=_HISTORY) for k in _SERIES}
        self._last: TelemetrySample | None = None

    def add(self, s: TelemetrySample) -> None:
        """Append one sample and redraw."""
        self._last = s
        for key, _t, _u, field, _lo, _hi in _SERIES:
            v = getattr(s, field)
            if v is not None:
                self._hist[key].append(float(v))
        throttled = any(n != "GPU_IDLE" for n in reason_names(s.clock_event_reasons or 0))
        self.set_class(throttled, "-throttled")
        self.refresh()

    def render(self) -> Text:
        s = self._last
        if s is None:
            return Text("telemetry: waiting for the first sample…")
        width = max(8, self.size.width - 2)
        t = Text()
        t.append(f"telemetry  (device {s.device}, {s.source})\n", style="bold")
        for key, title, unit, field, lo, hi in _SERIES:
            v = getattr(s, field)
            top = getattr(s, hi) if isinstance(hi, str) else hi
            if v is None:
                t.append(f"{title}: — (not reported)\n\n", style="dim")
                continue
            t.append(f"{title}: ")
            t.append(f"{v:,.0f} {unit}\n", style="bold")
            t.append(spark(self._hist[key], lo, float(top or 1.0), width) + "\n", style="#5fafff")
        if s.memory_used_bytes is not None and s.memory_total_bytes:
            t.append(
                f"memory: {s.memory_used_bytes / 2**30:,.1f} / "
                f"{s.memory_total_bytes / 2**30:,.0f} GiB\n"
            )
        names = reason_names(s.clock_event_reasons or 0)
        bad = [n for n in names if n != "GPU_IDLE"]
        t.append("clocks: ")
        t.append(", ".join(names) if names else "not throttled", style="bold red" if bad else "")
        return t
