"""Parse human time budgets ('10s', '5m', '1h30m', '24h', '90') into seconds."""

from __future__ import annotations

import re

_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|min|s|m|h|d)")


class BudgetError(ValueError):
    """The budget string is not a positive duration."""


def parse_budget(text: str | float | int) -> float:
    """Return the budget in seconds; a bare number means seconds. Raise BudgetError otherwise."""
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        s = text.strip().lower()
        if re.fullmatch(r"\d+(?:\.\d+)?", s):
            seconds = float(s)
        else:
            pos, seconds = 0, 0.0
            for m in _PART.finditer(s):
                if s[pos : m.start()].strip():
                    break
                seconds += float(m.group(1)) * _UNITS[m.group(2)]
                pos = m.end()
            if pos == 0 or s[pos:].strip():
                raise BudgetError(f"bad budget {text!r}: use a duration like 10s, 5m, 1h30m or 24h")
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise BudgetError(f"bad budget {text!r}: must be a positive duration")
    return seconds


def format_seconds(s: float) -> str:
    """Return a compact human duration: '4.2s', '3m05s', '2h10m'."""
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int((s % 3600) // 60):02d}m"
