"""gitm-tui engine: UI-free core.

Embedded API (DESIGN §9)::

    from engine import optimize
    result = optimize("hft-lob", budget="2m", target=0.15)
    print(result.gain, result.target_met, result.report)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class OptimizeResult:
    """What an embedded optimize run produced."""

    run_id: str
    status: str  # completed | stopped | failed
    gain: float | None  # time-per-sample gain vs the baseline, re-measured at the end
    target: float
    target_met: bool | None
    report: str  # path of report.md
    run_dir: str
    interventions: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> last update


def optimize(
    workload: str,
    budget: str | float = "2m",
    target: float = 0.15,
    *,
    approve: str = "auto",
    seed: int = 0,
    repeats: int = 4,
) -> OptimizeResult:
    """Run the optimize loop on a built-in workload (simulated GPU) and return its result.

    ``approve``: ``auto`` applies SAFE levers only (NUMERICS and PRIVILEGED ones are proposed
    and wait for a person); ``none`` only proposes. Runs as fast as the work allows (no
    dashboard pacing) and at most ``budget``."""
    import asyncio

    from engine.runtime import Engine, RunConfig, parse_budget
    from engine.runtime.events import InterventionUpdate, RunFinished

    if approve not in ("auto", "none"):
        raise ValueError("embedded runs have no person to ask: approve must be 'auto' or 'none'")
    cfg = RunConfig(
        workload=workload,
        budget_s=parse_budget(budget),
        target=target,
        approve=approve,
        seed=seed,
        repeats=repeats,
        realtime=False,
        max_windows=3,
    )

    async def _run() -> OptimizeResult:
        eng = Engine(cfg)
        sub = eng.bus.subscribe()
        task = asyncio.ensure_future(eng.run())
        ivs: dict[str, dict[str, Any]] = {}
        fin: RunFinished | None = None
        async for ev in sub:
            if isinstance(ev, InterventionUpdate):
                ivs[ev.id] = ev.to_json()
            elif isinstance(ev, RunFinished):
                fin = ev
        await task
        assert fin is not None
        return OptimizeResult(
            run_id=eng.run_id,
            status=fin.status,
            gain=fin.gain,
            target=target,
            target_met=fin.target_met,
            report=fin.report,
            run_dir=str(eng.run_dir),
            interventions=ivs,
        )

    return asyncio.run(_run())


__all__ = ["OptimizeResult", "optimize"]
