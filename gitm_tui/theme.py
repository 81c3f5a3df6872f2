"""The dashboard's colours: one table of theme variables, read by the stylesheet (``$gitm-…``)
and by the Rich renderables the widgets build (``tone``).

They are the app's theme variable defaults (``GitmApp.get_theme_variable_defaults``): a Textual
theme may override any of them in its ``variables``; the app passes the active theme's values to
``use`` whenever the theme changes. Without an app (tests, the terminal summary) the defaults
apply.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.regimes import Label

#: name → colour. Regimes keep one hue each everywhere (strips, legend, tables, help).
DEFAULTS: dict[str, str] = {
    "gitm-compute": "#5fd75f",
    "gitm-memory": "#5fafff",
    "gitm-stall": "#ff8700",
    "gitm-idle": "#8a8a8a",
    "gitm-unknown": "#d7d7af",
    "gitm-comm": "#d787ff",
    "gitm-copy": "#00d7d7",
    "gitm-ok": "#5fd75f",
    "gitm-warn": "#ffd75f",
    "gitm-bad": "#ff5f5f",
    "gitm-info": "#87afff",
    "gitm-muted": "#8a8a8a",
    "gitm-faint": "#444444",
    "gitm-shaded": "#bcbcbc",
    "gitm-border": "#5f5f87",
    "gitm-spark": "#5fafff",
    "gitm-real-device": "#87d787",
    # the dashboard header's background while numba warms up, while paused, once done
    "gitm-header-warming": "#3a3a00",
    "gitm-header-paused": "#5f0000",
    "gitm-header-done": "#003a00",
}

_current: dict[str, str] = dict(DEFAULTS)

#: regimes drawn bold (IDLE and UNKNOWN stay plain: they are the absence of a bottleneck)
_BOLD = {Label.COMPUTE, Label.MEMORY, Label.STALL, Label.COMM, Label.COPY}


def use(variables: Mapping[str, str]) -> None:
    """Take the active theme's values of our variables (the app calls this on a theme change)."""
    for name in DEFAULTS:
        value = variables.get(name)
        _current[name] = value if value else DEFAULTS[name]


def tone(name: str) -> str:
    """Return the colour of ``name`` (a key of DEFAULTS) in the active theme."""
    return _current[name]


def regime_style(label: int) -> str:
    """Return the Rich style of a regime or label (by value: Label extends Regime)."""
    try:
        lab = Label(int(label))
    except ValueError:  # not a label this version knows: drawn faint, never an error
        return tone("gitm-faint")
    colour = tone(f"gitm-{lab.name.lower()}")
    return f"bold {colour}" if lab in _BOLD else colour
