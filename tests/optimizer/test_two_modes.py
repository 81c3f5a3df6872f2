"""Two speed modes named as two modes (issue 50): blocks that fall in two groups far apart are
reported with which blocks, how far apart and what their pattern points to, and no mean of
them is taken for a baseline; noise and a single outlier are neither. SYNTHETIC series, and the
SYNTHETIC program tests/fixtures/known_effect.py through the real command loop."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from engine.measure import Comparison, in_time_order, plan, two_modes


def test_blocks_25x_apart_are_two_modes_with_their_blocks_named():
    said = two_modes([6.5, 6.7, 160, 6.6, 170, 6.4, 6.8, 165])
    assert said.startswith("two speed modes: A/A blocks 3, 5, 8 are 25× slower than blocks 1, 2,")
    assert "scattered" in said and "no mean of the two is a baseline" in said
    run = two_modes([6.5, 6.7, 6.6, 6.4, 16, 17, 16.5, 16.2])
    assert "blocks 5, 6, 7, 8 are 2.5× slower" in run and "consecutive" in run


def test_noise_and_one_outlier_are_not_modes():
    rng = np.random.default_rng(0)
    for sd in (0.03, 0.1, 0.3):
        for _ in range(20):
            assert two_modes(list(np.exp(rng.normal(0, sd, 8)))) == "", sd
    assert two_modes([6.5, 6.7, 16, 6.6, 7.0, 6.4, 6.8, 6.5]) == ""  # one block: an outlier


def test_a_plan_on_two_modes_is_not_measurable_and_tries_nothing():
    a, b = (6.5, 160.0, 6.6, 6.4), (6.7, 6.6, 170.0, 165.0)
    c = Comparison(a, b)
    assert in_time_order(c) == [6.5, 6.7, 6.6, 160.0, 6.6, 170.0, 165.0, 6.4]
    p = plan(c, 0.1, 0.5, 60.0)
    assert not p.measurable and not p.triable and p.unsettled.startswith("two speed modes")
    assert "What would help" in p.diagnosis


@pytest.mark.slow
@pytest.mark.quiet
def test_a_program_with_two_speed_modes_has_no_averaged_baseline(tmp_path: Path):
    from tests.optimizer.test_measurement import _run

    p, fin, journal, _ivs, _runs = _run(
        tmp_path, ("fast",), "10%", {"KE_MODES": "25", "KE_SEED": "3"}
    )
    assert fin["verdict"] == "not measurable"
    assert not any(e.get("to") == "APPLYING" for e in journal)
    assert "two speed modes: A/A blocks" in fin["headline"] and "25" in fin["headline"]
    report = Path(fin["report"]).read_text()
    assert "- Baseline: none — two speed modes" in report
    assert not re.search(r"\bnan\b", report, re.IGNORECASE)  # no averaged, no NaN baseline
    assert "baseline: none — two speed modes" in p.stderr
