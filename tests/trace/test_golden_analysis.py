"""Every real trace under tests/data/traces analyses to exactly what it did when its golden was
written (tests/data/golden/<trace>.json, by tests/data/golden/regenerate.py): the JSON
`gitm-tui analyze TRACE --json --no-write` prints, field for field. A change that is not meant
to move any result — moving the importers' modules, a faster reader — must leave these alone; one
that is meant to regenerates them, and its diff shows what moved."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tests.paths import DATA

_SPEC = importlib.util.spec_from_file_location(
    "golden_regenerate", DATA / "golden" / "regenerate.py"
)
assert _SPEC is not None and _SPEC.loader is not None
golden = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(golden)

TRACES: list[Path] = golden.traces()


def _differences(want: Any, got: Any, at: str = "$") -> list[str]:
    """Where two JSON documents differ, as paths (``$[0].kernels``), the values beside them."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{at}.{k}: missing" for k in want if k not in got]
        out += [f"{at}.{k}: not in the golden" for k in got if k not in want]
        for k in want.keys() & got.keys():
            out += _differences(want[k], got[k], f"{at}.{k}")
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{at}: {len(want)} items in the golden, {len(got)} now"]
        return [
            d
            for i, (w, g) in enumerate(zip(want, got, strict=True))
            for d in _differences(w, g, f"{at}[{i}]")
        ]
    return [] if want == got else [f"{at}: golden {want!r:.120}, now {got!r:.120}"]


def test_every_trace_has_a_golden_and_every_golden_a_trace():
    names = {golden.golden_name(t) for t in TRACES}
    written = {p.name for p in (DATA / "golden").glob("*.json")}
    assert any(t.suffix == ".sqlite" for t in TRACES) and any(t.suffix == ".gz" for t in TRACES)
    assert names == written, "run tests/data/golden/regenerate.py (and read its diff)"


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES, ids=[golden.golden_name(t) for t in TRACES])
def test_the_analysis_is_its_golden(trace: Path):
    want = json.loads((DATA / "golden" / golden.golden_name(trace)).read_text())
    got = golden.analysis_json(trace)
    diff = _differences(want, got)
    assert not diff, f"{len(diff)} differences from the golden:\n" + "\n".join(sorted(diff)[:40])
    # and byte for byte as written (key order, float text)
    assert golden.render(got) == (DATA / "golden" / golden.golden_name(trace)).read_text()
