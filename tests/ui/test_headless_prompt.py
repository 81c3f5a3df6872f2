"""Headless with a person at the terminal (issue 38): the narration of a decision landed on
the next question's line, after its cursor. A line written while a question waits now goes
under it, and the question is asked again below."""

from __future__ import annotations

import io

from gitm_tui.headless import _Narration, _say


def test_narration_never_lands_on_a_waiting_question():
    out = io.StringIO()
    n = _Narration(out)
    _say("gitm-tui: phase apply", n)
    n.ask("gitm-tui: approve I2 cuda_graphs [SAFE], predicted +35.3%? [y/n/s(kip)] ")
    _say("gitm-tui: I1 batch_size [NUMERICS] APPLIED: measured +40.0%", n)
    out.write("y\n")  # what the terminal echoes as the person answers
    n.answered()
    _say("gitm-tui: I2 cuda_graphs [SAFE] APPROVED", n)
    assert out.getvalue().splitlines() == [
        "gitm-tui: phase apply",
        "gitm-tui: approve I2 cuda_graphs [SAFE], predicted +35.3%? [y/n/s(kip)] ",
        "gitm-tui: I1 batch_size [NUMERICS] APPLIED: measured +40.0%",
        "gitm-tui: approve I2 cuda_graphs [SAFE], predicted +35.3%? [y/n/s(kip)] y",
        "gitm-tui: I2 cuda_graphs [SAFE] APPROVED",
    ]
