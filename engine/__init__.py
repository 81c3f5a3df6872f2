"""gitm-tui engine: UI-free core.

Embedded API (DESIGN §9)::

    from engine import optimize
    result = optimize("hft-lob", budget="2m", target=0.15)   # a built-in, simulated GPU
    print(result.gain, result.target_met, result.report)
    kept = [iv["lever"] for iv in result.interventions.values() if iv["state"] == "VERIFIED"]

    from engine import TorchJob, optimize                      # your own PyTorch program
    job = TorchJob(step=train_step, batches=loader, model=model, optimizer=opt)
    result = optimize(job, budget="10m", target=0.15)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class OptimizeResult:
    """What an embedded optimize run produced.

    ``interventions``: every lever the run proposed, by intervention id (``"I1"``…), as its
    last update — the ``intervention`` event's JSON record (docs/events.md): ``lever``,
    ``title``, ``safety`` (SAFE | NUMERICS | PRIVILEGED), ``state`` where the run left it
    (VERIFIED: kept; ROLLED_BACK: tried and undone, ``note`` says why; REJECTED; PROPOSED:
    never decided — NUMERICS and PRIVILEGED levers wait for a person unless
    ``approve="all"``, and ``approve="none"`` decides nothing), ``predicted_gain`` (the
    replay's, or None: measured only, no trace to predict from) with its ``confidence``,
    ``measured_gain`` (None: not measured), ``approved_by`` (``policy:auto``, ``policy:all``,
    or who decided), ``note``, ``replay``, ``evidence``, and the record's ``v``, ``type``,
    ``t_wall``. Gains are time-per-sample fractions (0.1 = 10 % less). The journal and
    report.md under ``run_dir`` hold the whole history."""

    run_id: str
    status: str  # completed | diagnosed (the gate ended it in its profile phase) | stopped | failed
    gain: float | None  # time-per-sample gain vs the baseline, re-measured at the end
    target: float
    target_met: bool | None
    report: str  # path of report.md
    run_dir: str
    interventions: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> last update


def optimize(
    engine: Any,
    budget: str | float = "2m",
    target: float = 0.15,
    *,
    approve: str = "auto",
    seed: int = 0,
    repeats: int = 4,
    levers: tuple[Any, ...] | None = None,
    progress: Callable[[str], None] | None = None,
    force: bool = False,
) -> OptimizeResult:
    """Run the optimize loop and return its result.

    ``engine``: a built-in workload's name (``"hft-lob"``…: the simulated GPU), or your own
    PyTorch program — a ``TorchJob`` (or any object with ``step(batch)`` and ``batches``, and
    optionally ``model``/``optimizer``), measured for real in this process; its levers act on
    those objects and are undone exactly when they do not pay (engine.optimizer.torch_loop).
    ``levers``: for a program, the torch levers it may try (default: the library's).

    ``approve``: ``auto`` applies SAFE levers only (NUMERICS and PRIVILEGED ones are proposed
    and wait for a person: ``gitm-tui approve RUN ID`` from another terminal, or
    ``approve="all"`` here to let this call be that person); ``none`` only proposes. Runs as
    fast as the work allows and at most ``budget``. Journal and report are written like every
    run's (``result.run_dir``).

    Progress: every phase, decision and log line of the run goes to the ``logging`` module
    (logger ``"engine"``: warnings show by default, ``logging.basicConfig(level="INFO")``
    shows the rest) and, when given, to ``progress(line)`` — called from the run's own thread,
    one plain line at a time.

    The qualification gate (engine/optimizer/gate.py) may end the run in its profile phase with
    a diagnosis (``status == "diagnosed"``: the target cannot be measured here, or the levers
    that apply cannot reach it); ``force=True`` goes on anyway (the report says so)."""
    import asyncio
    import threading

    from engine.runtime import Engine, RunConfig, parse_budget
    from engine.runtime.events import InterventionUpdate, RunFinished, RunStarted
    from engine.runtime.narrate import event_lines

    if approve not in ("auto", "none", "all"):
        raise ValueError(
            "embedded runs have no person to ask: approve must be 'auto' (SAFE levers), "
            "'all' (this call approves every lever) or 'none' (propose only)"
        )
    log = logging.getLogger("engine")

    levels = {"warning": logging.WARNING, "error": logging.ERROR}

    def _progress_line(ev: Any, ivs: dict[str, dict[str, Any]]) -> tuple[int, str] | None:
        """What a person following the run reads of ``ev`` (engine.runtime.narrate, the one
        wording of events as text); None: nothing worth a line — a proposal's update that
        leaves its state as it was (a new prediction), the run's own start and end (the result
        says them)."""
        if isinstance(ev, (RunStarted, RunFinished)):
            return None
        if isinstance(ev, InterventionUpdate) and ivs.get(ev.id, {}).get("state") == ev.state:
            return None
        lines = event_lines(ev)
        if not lines:
            return None
        return levels.get(lines[0].level, logging.INFO), "; ".join(x.text for x in lines)

    job = None if isinstance(engine, str) else engine
    cfg = RunConfig(
        workload=engine if isinstance(engine, str) else "torch",
        budget_s=parse_budget(budget),
        target=target,
        approve=approve,
        seed=seed,
        repeats=repeats,
        realtime=False,
        max_windows=3,
        force=force,
    )

    async def _run() -> OptimizeResult:
        eng = Engine(cfg, job=job, torch_levers=levers)
        sub = eng.bus.subscribe()
        task = asyncio.ensure_future(eng.run())
        ivs: dict[str, dict[str, Any]] = {}
        fin: RunFinished | None = None
        async for ev in sub:
            line = _progress_line(ev, ivs)
            if line is not None:
                level, text = line
                log.log(level, text)
                if progress is not None:
                    progress(text)
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

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: no event loop in this thread
        return asyncio.run(_run())
    # called from inside an event loop (a notebook): run in a thread of its own
    out: list[OptimizeResult] = []
    err: list[BaseException] = []

    def runner() -> None:
        try:
            out.append(asyncio.run(_run()))
        except BaseException as e:  # re-raised in the caller's thread
            err.append(e)

    t = threading.Thread(target=runner, name="gitm-optimize")
    t.start()
    t.join()
    if err:
        raise err[0]
    return out[0]


def step() -> None:
    """Mark one step of a loop that has no optimizer (inference) for the torch launcher
    (``gitm-tui --workload torch -- python SCRIPT``); outside the launcher it does nothing."""
    import sys

    finder = getattr(sys.modules.get("sitecustomize"), "gitm_step", None)
    if finder is not None:  # the launcher's step finder is loaded in this process
        finder()


def __getattr__(name: str) -> Any:
    if name == "TorchJob":  # imported on use: the core install has no torch
        from engine.workloads.torch_job import TorchJob

        return TorchJob
    raise AttributeError(name)


__all__ = ["OptimizeResult", "TorchJob", "optimize", "step"]
