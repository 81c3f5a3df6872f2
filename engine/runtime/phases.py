"""The optimize phases of a run — attribute, rank, apply (approvals, trials, the gate) and
report — over one optimize loop (whichever the run's target makes, engine/runtime/targets.py: a
simulated workload's, a command's, a live PyTorch program's or a relaunched script's), reached only
through the loops' one contract (engine/optimizer/contract.py); and the journal's last word
when the run ends or is cut short.

The engine (engine/runtime/engine.py) owns the run: its clock, its stop and pause, its bus —
offered here as engine.runtime.context.RunContext (this module never imports the Engine);
``OptimizePhases`` drives the optimizer through the phases and tells the bus what happened.
Numeric work runs in worker threads (``asyncio.to_thread``); the event loop only moves data.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import platform
import time
from typing import TYPE_CHECKING, Any

from engine.errors import write_refused
from engine.measure import NoisePlan, finite_or_none
from engine.runtime.events import (
    EvidenceView,
    GateDecided,
    HypothesesReport,
    HypothesisView,
    InterventionUpdate,
    InvariantsReport,
    InvariantView,
    OptimizeStatus,
    ReportWritten,
)
from engine.runtime.stream import final_rows
from engine.store.commands import CommandReader
from engine.store.journal import (
    UNFINISHED,
    Journal,
    State,
    _recover_run,
    decision_refused,
    recover,
    states,
)
from engine.trace.segments import Segments
from engine.workloads.sim import Measurement
from engine.workloads.torch_job import BudgetEnded

if TYPE_CHECKING:
    from engine.optimizer.contract import AnyLoop, LoopMeasurement
    from engine.optimizer.loop import Intervention, LoopAnalysis
    from engine.runtime.context import RunContext


def _score(iv: Intervention) -> float:
    """Sort key of approved interventions: best predicted gain × confidence first; those with
    no prediction (measured only) after, in the order they were proposed."""
    score = iv.predicted_gain * iv.confidence
    return -score if math.isfinite(score) else math.inf


class OptimizePhases:
    """Profile's measurements, then attribute → rank → apply → report, for one engine run."""

    def __init__(self, eng: RunContext) -> None:
        self.eng = eng
        self.opt: AnyLoop | None = None  # set by ``run``
        self._shown_state: dict[str, str] = {}
        #: the qualification gate ended the run in its profile phase (status "diagnosed")
        self.diagnosed = False
        #: measurements being streamed to the dashboard (``show``), one at a time
        self._showing = asyncio.Lock()
        self._shows: list[asyncio.Future[None]] = []
        self._closed = False  # the run is ending (stop_showing): no show starts any more

    @property
    def loop(self) -> AnyLoop:
        """The run's optimize loop, for the phases after ``run`` made it."""
        if self.opt is None:
            raise RuntimeError("the optimize loop is made by OptimizePhases.run")
        return self.opt

    # ------------------------------------------------------------------ the phases
    async def run(self) -> tuple[dict[str, Any], str]:
        """Run the optimize phases; return the result and the report's path."""
        eng, cfg = self.eng, self.eng.config
        await eng.await_warm()
        # heavy imports (scipy.stats) off the event loop: the dashboard keeps drawing
        await asyncio.to_thread(importlib.import_module, "engine.optimizer.loop")
        from engine.optimizer.report import write_run

        opt = eng.target.make_loop(eng)
        self.opt = eng.optimizer = opt
        opt.journal.append(run_started(eng, traced=bool(opt.traced)))
        loop = asyncio.get_running_loop()
        opt.target = cfg.target
        opt.time_left = lambda: eng.deadline("apply") - eng.elapsed()
        opt.budget_left = lambda: cfg.budget_s - eng.elapsed()
        opt.say = lambda message: loop.call_soon_threadsafe(eng.log, "info", message)
        # a trial's blocks of the current configuration reach the strips as they are measured
        opt.on_block = lambda raw: loop.call_soon_threadsafe(self._show_soon, raw)
        eng.log("info", "profile: warm-up, then the unchanged workload against itself (A/A)")
        noise = await asyncio.to_thread(opt.profile)
        if opt.current:
            await self.show(opt.current[0])
        self.status("profile")
        black_box = not opt.traced  # no device trace: measured only
        unit, scale = opt.unit, opt.scale
        if math.isfinite(opt.baseline_ns):
            eng.log("info", f"baseline {noise.mean_ns / scale:.4g} {unit}; {opt.noise_text()}")
        else:  # two speed modes: no one baseline (the plan says which blocks)
            seen = noise.plan.unsettled if noise.plan is not None else ""
            eng.log("warning", f"baseline: none — {seen}")
        # the qualification gate: commit to the target, or diagnose why not before any lever
        # is tried (engine/optimizer/gate.py); journaled by ``qualify`` before it is acted on
        gate = await asyncio.to_thread(opt.qualify, cfg.force)
        eng.bus.publish(GateDecided.of(eng.elapsed(), gate))
        if gate.diagnosed and opt.budget_left() > 0:
            eng.log("warning", gate.line)
            return await self.end_diagnosed()
        if gate.diagnosed:  # the budget ended inside the profile phase: it ends the run
            eng.log("warning", f"{gate.line} (the budget ended in the profile phase)")
        else:
            eng.log(
                "warning" if gate.forced else "info",
                gate.forced_line() if gate.forced else gate.line,
            )
        measurable = noise.plan is None or noise.plan.triable
        if noise.plan is not None and not noise.plan.measurable:
            eng.log("warning", f"{noise.plan.diagnosis}; {noise.plan.tried}")
        eng.phase(
            "attribute",
            "no device trace: nothing to decode or attribute"
            if black_box
            else "EESM, planner, invariants, replay graph, attribution",
        )
        a = await asyncio.to_thread(opt.analyse)
        self.publish_analysis(a)
        if eng.paused:
            await eng.wait_paused()
        eng.phase(
            "rank",
            "levers in the library's order, measured (no trace to replay)"
            if black_box
            else "replaying each lever on the trace",
        )
        cands = await asyncio.to_thread(opt.rank)
        proposed = opt.propose(cands)
        for iv in proposed:
            self.publish_iv(iv)
        eng.log(
            "info",
            f"{len(proposed)} interventions proposed; "
            f"{len(opt.not_applicable)} levers not applicable",
        )
        for lever, why in opt.not_applicable.items() if black_box else ():
            eng.log("info", f"{lever}: not applicable: {why}")
        if not eng.stopped and measurable:
            eng.phase("apply", f"approval policy {cfg.approve}")
            await self.apply()
        eng.phase(
            "report",
            "re-measuring the kept levers against the baseline, interleaved"
            if opt.kept
            else "nothing kept: the final configuration is the baseline",
        )
        result = await asyncio.to_thread(opt.finish, cfg.target)
        diffs = await asyncio.to_thread(self.kept_diffs)
        md, js = await asyncio.to_thread(write_run, opt, result, self.provenance(), diffs)
        self.status("report")
        self.report_written(result, md, js)
        return result, str(md)

    async def end_diagnosed(self) -> tuple[dict[str, Any], str]:
        """The gate diagnosed: the run ends here, in its profile phase — no attribute, rank or
        apply — with a report of what was measured, why the target cannot be committed to and
        what would make it reachable. Status ``diagnosed`` (exit 0, with the report)."""
        from engine.optimizer.report import write_run

        eng, opt = self.eng, self.loop
        self.diagnosed = True
        eng.phase("report", "the qualification gate diagnosed: no lever is tried")
        result = await asyncio.to_thread(opt.diagnose, eng.config.target)
        md, js = await asyncio.to_thread(write_run, opt, result, self.provenance())
        eng.log(
            "info",
            f"diagnosed in the profile phase after {eng.elapsed():.1f} s of the "
            f"{eng.config.budget_s:g} s budget: no lever is tried (--force goes on anyway)",
        )
        self.report_written(result, md, js)
        return result, str(md)

    def report_written(self, result: dict[str, Any], md: Any, js: Any) -> None:
        eng = self.eng
        eng.bus.publish(
            ReportWritten(
                t_wall=eng.elapsed(),
                path=str(md),
                json_path=str(js),
                target_met=result["target_met"],
                gain=result["gain"],
                summary=result["headline"],
                verdict=result.get("verdict", ""),
                gain_low=finite_or_none(result.get("gain_low")),
                gain_high=finite_or_none(result.get("gain_high")),
            )
        )

    def kept_diffs(self) -> dict[str, Any]:
        """For each kept lever whose trial has traces (the state before it, the trial): what
        changed between them (engine.analyze.diff.diff, as `gitm-tui diff` shows it) — the report's
        proof beside the measured gain. A diff that cannot be made is said, not skipped."""
        opt = self.loop
        out: dict[str, Any] = {}
        for iid in opt.kept:
            pair = opt.trial_traces.get(iid)
            if pair is None:
                continue
            from engine.analyze.diff.diff import diff_traces
            from engine.trace.errors import TraceImportError

            try:
                out[iid] = diff_traces(pair[0], pair[1], top=20)
            except TraceImportError as e:  # (a trace with no GPU row): the report says so
                out[iid] = f"no trace diff: {e}"[:300]
        return out

    async def apply(self) -> None:
        """Approve (policy or person), trial, gate; until the target, the candidates or the
        phase's share of the budget run out."""
        eng, opt, cfg = self.eng, self.loop, self.eng.config
        deadline = eng.deadline("apply")
        poller = asyncio.ensure_future(self.poll_commands())
        asked: set[str] = set()
        try:
            while not eng.stopped and not eng.apply_finished:
                # unattended policies stop at the target; with a person deciding (manual) the
                # phase stays open for more approvals or a roll back until its deadline or
                # until the operator finishes it
                met = opt.confirmed_gain() >= cfg.target
                if met and cfg.approve != "manual" and not eng.pending_decisions():
                    break
                if eng.elapsed() >= deadline:  # no trial starts after the phase's share
                    eng.log("info", "the apply phase's share of the budget is spent")
                    break
                pending = [iv for iv in opt.interventions.values() if iv.state == State.PROPOSED]
                ready = [iv for iv in opt.interventions.values() if iv.state == State.APPROVED]
                if cfg.approve in ("auto", "all"):
                    for iv in pending:
                        if opt.policy_allows(iv, cfg.approve):
                            await asyncio.to_thread(opt.approve, iv.iid, f"policy:{cfg.approve}")
                            self.publish_iv(iv)
                            ready.append(iv)
                            break
                        if iv.iid not in asked:
                            asked.add(iv.iid)
                            eng.log(
                                "info",
                                f"{iv.iid} {iv.lever_id} is {iv.safety}: it needs a person "
                                f"(gitm-tui approve {eng.run_id} {iv.iid})",
                            )
                if ready and (not met or cfg.approve == "manual"):
                    iv = sorted(ready, key=_score)[0]
                    await self.trial(iv.iid)
                    for upd in opt.propose(await asyncio.to_thread(opt.rank)):
                        self.publish_iv(upd)
                    continue
                # nothing left this policy may approve and no person is deciding: move on
                auto_done = cfg.approve in ("auto", "all") and not any(
                    opt.policy_allows(v, cfg.approve) for v in pending
                )
                idle = cfg.approve == "none" or auto_done or not (pending or ready)
                if idle and not eng.pending_decisions():
                    break
                if eng.paused:  # p in the apply phase: the budget clock stops, said as paused
                    await eng.wait_paused("apply")
                    continue
                left = deadline - eng.elapsed()
                if left <= 0:
                    break
                waits = cfg.approve == "manual" and bool(pending)
                t0 = time.monotonic()
                try:
                    action, iid, by = await asyncio.wait_for(
                        eng.decisions.get(), timeout=min(left, 0.5)
                    )
                except TimeoutError:
                    continue
                finally:
                    if waits:  # a proposal is up to a person and the run waits for them
                        eng.waited(time.monotonic() - t0)
                await self.handle(action, iid, by)
        finally:
            poller.cancel()

    async def handle(self, action: str, iid: str, by: str) -> None:
        """Carry out one operator decision (approve | reject | rollback) on ``iid``."""
        eng, opt = self.eng, self.loop
        if action in ("stop", "finish"):
            return
        iv = opt.interventions.get(iid)
        if iv is None:
            eng.log("warning", f"no intervention {iid!r} in this run")
            return
        why = decision_refused(action, iid, iv.state)
        if why is not None:
            eng.log("warning", why)
            return
        try:
            if action == "approve":
                await asyncio.to_thread(opt.approve, iid, by)
            elif action == "reject":
                await asyncio.to_thread(opt.reject, iid, by)
            else:
                eng.phase("apply", f"rolling back {iid}")
                await asyncio.to_thread(opt.rollback, iid, by)
                await self.show(opt.current[0])
                self.status("apply")
                for upd in opt.propose(await asyncio.to_thread(opt.rank)):
                    self.publish_iv(upd)
        except ValueError as e:
            eng.log("warning", str(e))
            return
        self.publish_iv(iv)

    async def trial(self, iid: str) -> None:
        """Apply ``iid``, measure it and let the gate keep it or roll it back."""
        eng, opt = self.eng, self.loop
        iv = opt.interventions[iid]
        eng.phase("apply", f"{iid} {iv.lever_id}: applying and measuring")
        fut = asyncio.ensure_future(asyncio.to_thread(opt.trial, iid))
        while not fut.done():  # show APPLYING while the trial runs
            if iv.state == State.APPLYING:
                self.publish_iv(iv)
                break
            await asyncio.sleep(0.01)
        try:
            await fut
        except BudgetEnded as e:  # the trial rolled its lever back; the report comes next
            eng.log("info", f"{iid} {iv.lever_id}: {e} — rolled back, no more trials")
            eng.apply_finished = True
        self.publish_iv(iv)
        for other in opt.interventions.values():  # e.g. an earlier value this one superseded
            if other is not iv and self._shown_state.get(other.iid) != other.state.value:
                self.publish_iv(other)
        if iv.state == State.VERIFIED:
            await self.show(opt.current[0])
            if opt.analysis is not None:
                self.publish_analysis(opt.analysis)
        self.status("apply")
        eng.log(
            "info",
            f"{iid} {iv.lever_id}: predicted {_pct(iv.predicted_gain)}, measured "
            f"{_pct(iv.measured_gain)} → {iv.state.value} ({iv.note})",
        )

    async def poll_commands(self) -> None:
        """Queue ``gitm-tui approve/reject/rollback`` decisions from the run's commands file."""
        reader = CommandReader(self.eng.run_dir)
        said = ""
        while True:
            try:  # off the event loop: a file system that stalls stalls a worker, not the run
                got = await asyncio.to_thread(reader.poll)
            except Exception as e:  # never the end of the reader: one line, then on
                got, reader.problem = [], f"commands file not read: {type(e).__name__}"
            if reader.problem and reader.problem != said:
                self.eng.log("warning", reader.problem)
            said = reader.problem
            for d in got:
                self.eng.decide(d.action, d.iid, d.by)
            await asyncio.sleep(0.2)

    # ------------------------------------------------------------------ what the bus is told
    def _show_soon(self, m: LoopMeasurement) -> None:
        """``show`` on the loop, in order (the measuring thread hands blocks over here). Once
        the run is stopped nothing more is shown: a block handed over while the dashboard quit
        started a show after the event loop's executor had shut down — a traceback on the
        terminal after the dashboard had closed."""
        if self.eng.stopped or self._closed:
            return
        self._shows.append(asyncio.ensure_future(self._show_quietly(m)))
        self._shows = [t for t in self._shows if not t.done()]

    async def _show_quietly(self, m: LoopMeasurement) -> None:
        """``show``, where the run may end under it: a show the loop's shutdown overtakes is
        dropped (what it would have drawn has no screen left), any other failure raised."""
        try:
            await self.show(m)
        except RuntimeError:
            if not (self.eng.stopped or self._closed):
                raise

    def stop_showing(self) -> None:
        """The run is ending: the shows still pending are cancelled and no new one starts."""
        self._closed = True
        for t in self._shows:
            t.cancel()
        self._shows = []

    async def show(self, m: LoopMeasurement) -> None:
        """Stream a measurement's trace to the dashboard (shifted after what was shown), tagged
        with the configuration it ran under. A measurement is a complete trace: it is decoded
        whole (batch Viterbi, exact labels), so every row reaches the strips and the kernel
        table at once instead of waiting behind the live decoder's fixed lag."""
        eng, opt = self.eng, self.loop
        # only a simulated workload's measurement has a device trace to decode and stream (a
        # command's or a PyTorch program's has none)
        if not isinstance(m, Measurement) or eng.gpu is None or opt.model is None:
            return
        async with self._showing:  # one at a time: each shifted after the one before it
            await self._show(m)

    async def _show(self, m: Measurement) -> None:
        eng, opt = self.eng, self.loop
        assert eng.gpu is not None and opt.model is not None
        seg = m.trace.segments
        if not len(seg):
            return
        kept = [opt.interventions[k].lever_id for k in opt.kept]
        eng.stream.config = config = " + ".join(["baseline", *kept])
        shift = eng.offset_ns - int(seg.start_ns.min()) + 1000
        # one name table for everything shown
        cols = seg.with_names_remapped(eng.gpu.names.remap_from(m.trace.names)).columns()
        cols["start_ns"] = cols["start_ns"] + shift  # new arrays: the trace itself is analysed
        cols["end_ns"] = cols["end_ns"] + shift
        seg = Segments(**cols)
        eng.offset_ns = int(seg.end_ns.max())
        eng.check_warm(eng.decoder)
        # the same decode the analysis reads (decoded once per measurement; shifting every row
        # by one offset changes no label)
        dec = await asyncio.to_thread(m.decoded, opt.model)
        finals = final_rows(seg, dec, m.truth)
        eng.stream.publish(finals, eng.gpu, config=config)
        eng.telemetry_out(m.telemetry)
        eng.stream.progress(eng.gpu, eng.config.budget_s)

    def status(self, phase: str) -> None:
        opt, eng = self.opt, self.eng
        if opt is None or opt.noise is None:
            return
        eng.bus.publish(
            OptimizeStatus(
                t_wall=eng.elapsed(),
                baseline_ns=opt.baseline_ns,
                current_ns=opt.current_value(),
                gain=opt.gain(),
                target=eng.config.target,
                noise_floor=opt.noise.floor,
                phase=phase,
                phase_deadline_s=eng.deadline(phase),
                unit=opt.unit,
                scale=opt.scale,
                aa_spread=_spread(opt.noise.plan),
            )
        )

    def publish_analysis(self, a: LoopAnalysis) -> None:
        t = self.eng.elapsed()
        self.eng.bus.publish(
            InvariantsReport(t_wall=t, results=tuple(InvariantView.of(r) for r in a.invariants))
        )
        self.eng.bus.publish(
            HypothesesReport(
                t_wall=t,
                hypotheses=tuple(
                    HypothesisView(
                        cause=h.cause.name,
                        description=h.cause.value,
                        impact=h.impact,
                        confidence=h.confidence,
                        claimed=h.claimed,
                        evidence=tuple(
                            EvidenceView(e.kind, e.what, e.value, e.p, e.p_adjusted)
                            for e in h.evidence
                        ),
                    )
                    for h in a.hypotheses.hypotheses
                    if h.impact > 0 or h.claimed
                ),
            )
        )

    def publish_iv(self, iv: Intervention) -> None:
        self._shown_state[iv.iid] = iv.state.value
        self.eng.bus.publish(
            InterventionUpdate(
                t_wall=self.eng.elapsed(),
                id=iv.iid,
                lever=iv.lever_id,
                title=iv.title,
                safety=iv.safety,
                state=iv.state.value,
                predicted_gain=iv.predicted_gain,
                confidence=iv.confidence,
                measured_gain=iv.measured_gain,
                approved_by=iv.approved_by,
                note=iv.note,
                replay=iv.what,
                evidence=tuple(iv.evidence),
            )
        )

    def provenance(self) -> dict[str, Any]:
        from engine.manifest import load_workload

        eng, cfg = self.eng, self.eng.config
        return {
            "run_id": eng.run_id,
            "workload": cfg.workload,
            "workload_title": eng.real_title or load_workload(cfg.workload).title,
            "device": eng.device_label,
            "simulated": eng.workload is not None and eng.backend is None,
            "traced": bool(self.opt.traced) if self.opt is not None else True,
            "budget_s": cfg.budget_s,
            "target": cfg.target,
            "approve": cfg.approve,
            "seed": cfg.seed,
            "repeats": cfg.repeats,
            "force": cfg.force,
            #: the operator stopped the run (q, Ctrl-C, SIGTERM, the stop command) before its end
            "stopped": eng.stopped,
            "python": platform.python_version(),
            "gitm_tui": _pkg_version(),
            "started": time.strftime(
                "%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - eng.elapsed())
            ),
        }

    # ------------------------------------------------------------------ the journal's last word
    def end_journal(self, status: str, report: str) -> tuple[str, str]:
        """Close the run's journal; return the final status and the report's path.

        A run cut short (stopped, quit, its program failing) in the middle of an apply is put
        back as recovery would put back a dead one — the state saved before the apply restored,
        ROLLED_BACK journalled — and ends ``interrupted``; a run cut short before its report
        phase still gets a report, written from its journal (what was done, and that it was
        cut short). Synchronous on purpose: it runs in a ``finally`` that a cancelled task
        may not await in."""
        from engine.optimizer.report import rewrite_recovered

        eng = self.eng
        rolled: list[str] = []
        unrestored: dict[str, str] = {}
        try:
            opt = self.loop
            # a trial still running in its worker thread (the task was cancelled around it)
            # must not journal after this
            opt.journal.close()
            if any(st in UNFINISHED for st in states(opt.journal.path).values()):
                rec = _recover_run(opt.journal.path)
                if rec is not None:
                    rolled, unrestored = rec.interventions, rec.unrestored
                status = "interrupted"
            else:
                Journal(opt.journal.path).append({"type": "run_finished", "status": status})
            if not report:
                report = str(
                    rewrite_recovered(
                        eng.run_dir, rolled, cut_short=status, not_restored=unrestored
                    )
                )
        except Exception as e:  # the journal itself cannot be written: say so, keep the status
            if not (eng.store_refused and write_refused(e)):  # (a full store: said once)
                eng.log("error", f"the run's journal or report could not be written ({e!r})")
        return status, report


def run_started(eng: RunContext, traced: bool) -> dict[str, Any]:
    """The journal's first record: what the run is (the report's heading reads it)."""
    cfg = eng.config
    return {
        "type": "run_started",
        "run_id": eng.run_id,
        "workload": cfg.workload,
        "budget_s": cfg.budget_s,
        "target": cfg.target,
        "approve": cfg.approve,
        "seed": cfg.seed,
        "device": eng.device_label,
        "simulated": eng.workload is not None and eng.backend is None,
        "traced": traced,
        "keep_deciding": eng.keep_deciding,
    }


def end_early(eng: RunContext, status: str) -> str:
    """A run cut short before its optimize loop began (Ctrl-C in its first seconds): still a
    journal that says how it ended and a report that says nothing was measured or applied (a
    stop must never leave an unmarked folder). Returns the report's path ('' if it could not
    be written: said in the log)."""
    from engine.optimizer.report import rewrite_recovered

    try:
        journal = Journal(eng.run_dir / "journal.jsonl")
        journal.append(run_started(eng, traced=False))
        journal.append(
            {
                "type": "run_finished",
                "status": status,
                "note": "ended before the optimize loop began: nothing measured or applied",
            }
        )
        journal.close()
        return str(rewrite_recovered(eng.run_dir, [], cut_short=status))
    except Exception as e:  # the run store cannot be written: say so, keep the status
        if not (eng.store_refused and write_refused(e)):  # (a full store: said once)
            eng.log("error", f"the run's journal or report could not be written ({e!r})")
        return ""


def end_watch(eng: RunContext, status: str) -> None:
    """A watch run (``--watch``, or a real device's telemetry): it measures and applies
    nothing, but its folder still gets a journal that says it started and how it ended, so the
    next start does not take it for a run that died before its first record."""
    try:
        journal = Journal(eng.run_dir / "journal.jsonl")
        journal.append(run_started(eng, traced=False))
        journal.append(
            {"type": "run_finished", "status": status, "note": "watch only: nothing applied"}
        )
        journal.close()
    except Exception as e:  # the run store cannot be written: say so, keep the status
        if not (eng.store_refused and write_refused(e)):  # (a full store: said once)
            eng.log("error", f"the run's journal could not be written ({e!r})")


async def recover_earlier_runs(eng: RunContext) -> None:
    """Put back every dead run of this run store (DESIGN §6) and say what was done."""
    from engine.optimizer.report import rewrite_recovered

    for rec in await asyncio.to_thread(recover, eng.run_dir.parent):
        if rec.ended_program:
            eng.log("warning", f"run {rec.run_dir.name}: {rec.ended_program}")
        if rec.error is not None:
            eng.log(
                "warning",
                f"run {rec.run_dir.name}: its journal or saved state cannot be read "
                f"({rec.error}); left as it is",
            )
            continue
        try:
            await asyncio.to_thread(
                rewrite_recovered,
                rec.run_dir,
                rec.interventions,
                not_restored=rec.unrestored,
                died=True,
            )
        except Exception as e:  # the journal is put right; only its report stays stale
            eng.log("warning", f"run {rec.run_dir.name}: report not rewritten ({e!r})")
        what = (
            f"rolled back {', '.join(rec.interventions)}"
            if rec.interventions
            else "it died before its first journal record"
            if rec.unstarted
            else "nothing was being applied"
        )
        if rec.broken:
            what += f"; its {rec.broken} — only believed records were acted on"
        if rec.unrestored:
            what += (
                "; NOT restored ("
                + "; ".join(f"{iid}: {why}" for iid, why in rec.unrestored.items())
                + ") — check its state by hand"
            )
        eng.log(
            "warning",
            f"run {rec.run_dir.name} had died before it finished: {what} "
            "(journal and report updated)",
        )


def _pct(x: float | None) -> str:
    return "—" if x is None or x != x else f"{x:+.1%}"


def _pkg_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gitm-tui")
    except PackageNotFoundError:
        return "0+unknown"


def _spread(plan: NoisePlan | None) -> float:
    """The A/A's pair-to-pair spread in log terms (NaN where it gave none)."""
    if plan is None or not plan.aa.valid or plan.aa.n < 2:
        return math.nan
    return plan.aa.sd_log
