"""``result.interventions`` (the embedded API's result) is documented (issue 38): every key of
an intervention's record is named in OptimizeResult's docstring and in docs/optimize.md."""

from __future__ import annotations

import math

from engine import OptimizeResult
from engine.runtime.events import InterventionUpdate
from tests.paths import ROOT


def test_every_key_of_an_intervention_record_is_documented():
    record = InterventionUpdate(
        t_wall=0.0, id="I1", lever="threads", title="threads", safety="SAFE",
        state="PROPOSED", predicted_gain=math.nan, confidence=0.0,
    ).to_json()  # fmt: skip
    doc = OptimizeResult.__doc__ or ""
    guide = (ROOT / "docs" / "optimize.md").read_text()
    missing = [k for k in record if k != "id" and f"``{k}``" not in doc]
    assert not missing, f"OptimizeResult's docstring does not name {missing}"
    for key in ("lever", "safety", "state", "predicted_gain", "measured_gain", "note"):
        assert f"`{key}`" in guide, key
    assert "result.interventions" in guide and record["predicted_gain"] is None
