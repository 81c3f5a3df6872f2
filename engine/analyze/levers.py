"""What would help, for a trace people already have: each lever's replay transform applied to
the trace's own dependency graph (engine.optimizer.dag) → predicted change of its span. Nothing
is applied: these are the counterfactuals `gitm-tui analyze` reports."""

from __future__ import annotations

import numpy as np

from engine.analyze.model import LeverEstimate
from engine.levers.library import LEVERS
from engine.levers.model import Observation
from engine.optimizer.dag import build_dag, schedule
from engine.planner.catalogue import GpuPeaks
from engine.trace.trace import Trace


def estimate_levers(trace: Trace, hw: GpuPeaks, regimes: np.ndarray) -> list[LeverEstimate]:
    """Replayed gain of every lever whose transform finds a target in ``trace`` (best first).

    ``regimes``: the decoded regime of every row of ``trace.segments`` (255 where none)."""
    if not len(trace.host):
        return []  # no host rows: launch, sync and copy structure unknown; nothing to replay
    dag = build_dag(trace, hw, iterations=1, regimes=regimes)
    base = schedule(dag)
    if base.makespan_ns <= 0:
        return []
    obs = Observation(dag, base, [], hw, 1)
    out = []
    for lv in LEVERS:
        edit = lv.transform(obs)
        if edit.rows == 0:
            continue
        pred = schedule(edit.dag).makespan_ns / edit.sample_factor
        out.append(
            LeverEstimate(
                lever=lv.id,
                title=lv.spec.title,
                safety=lv.spec.safety.value,
                causes=list(lv.spec.causes),
                predicted_gain=round(1 - pred / base.makespan_ns, 6),
                rows=edit.rows,
                what=edit.what,
                prior_based=edit.prior_based,
            )
        )
    return sorted(out, key=lambda e: -e.predicted_gain)
