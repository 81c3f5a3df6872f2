"""Where the tests find the repository and its data, wherever a test module sits."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TRACES = DATA / "traces"
FIXTURES = ROOT / "tests" / "fixtures"
