"""The optimize loop for a live PyTorch program (``engine.optimize(job)``): the same phases,
journal, approvals, gate and report as every other run; the levers act on the program's own
objects and settings (engine.levers.torch_levers) and every measurement is of its real steps.

What is measured and kept exact: each measurement restores the program's numeric state after
its steps (engine.workloads.torch_job.Snapshot), so the loop never moves the user's training;
a trial checks the lever's step against the baseline's reference step within its safety
class's tolerance; a rollback runs the lever's undo and restores the snapshot taken before the
trial, then checks bit for bit (parameters, buffers, memory format, global torch flags) that the
program is as it was — and says so in the journal.

On the CPU there is no device trace: no regimes, invariants or replay, and no predicted gain —
levers are tried in the library's order and measured (the report says so). On a GPU the
attribute phase captures a window of steps with ``torch.profiler`` (``profile.json`` in the run
folder) and runs it through the same importer, regimes, invariants and replay as ``gitm-tui
analyze``; each torch lever then carries the replay's estimate of the library lever it is
(``REPLAYED_AS``) with its interval, and is ranked by it; what the trace cannot judge stays
"measured only".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from engine.levers.torch_levers import TORCH_LEVERS, TorchLever, Undo
from engine.measure import Block, finite_or_none, steady_start
from engine.optimizer.attribution import RankedHypotheses
from engine.optimizer.command_loop import CommandCandidate, CommandOptimizer
from engine.optimizer.fingerprint import Fingerprint
from engine.optimizer.gate import LeverCeiling, Reach
from engine.optimizer.loop import (
    Intervention,
    LoopAnalysis,
    LoopRun,
    NoiseFloor,
    unchecked_invariants,
)
from engine.store.journal import State
from engine.workloads.framework_log import framework_output
from engine.workloads.torch_job import (
    Batches,
    BudgetEnded,
    Reference,
    Snapshot,
    TorchJob,
    TorchJobError,
    TorchMeasurement,
    capture,
    check_values,
    global_flags,
    on_cuda,
    one_line,
    run_steps,
)
from engine.workloads.torch_launch import TorchLaunchWorkload

NO_TRACE = "no device trace on the CPU (torch.profiler records no kernels to decode there)"
#: what a rollback's bit-for-bit check compares (engine.workloads.torch_job.Snapshot)
RESTORED = (
    "parameters, buffers, tensor attributes and gradients with their layouts, optimizer state "
    "and hyper-parameters, schedulers given, torch/Python/NumPy RNGs, torch flags"
)

#: which replayed library levers (engine/levers/library.py) predict each torch lever's gain on
#: a captured trace: each torch lever declares it (``TorchLever.replayed_as``); torch.compile
#: both fuses elementwise chains and (reduce-overhead) replays CUDA graphs: its estimate
#: combines the two as independent savings, 1 - (1 - a)(1 - b)
REPLAYED_AS: dict[str, tuple[str, ...]] = {lv.id: lv.replayed_as for lv in TORCH_LEVERS}


class TorchState(BaseModel):
    """The levers applied to the program (journaled as the run's state files)."""

    applied: list[str] = []
    flags: dict[str, Any] = {}


@dataclass
class TorchAnalysis(LoopAnalysis):
    """What the torch loop's attribute phase learned: on a GPU, the captured steps' analysis
    (``gitm-tui analyze``'s); on the CPU nothing device-side."""

    #: the replay's estimates on the captured trace, by library lever id (GPU only)
    estimates: dict[str, Any] = field(default_factory=dict)
    regime_shares: dict[str, float] = field(default_factory=dict)
    note: str = NO_TRACE


class TorchOptimizer(LoopRun):
    """``engine.optimizer.loop.Optimizer``'s steps for a live PyTorch program."""

    unit = "ms/sample"
    scale = 1e6
    state: TorchState
    current: list[TorchMeasurement]
    analysis: TorchAnalysis | None

    def __init__(
        self,
        job: TorchJob,
        run_dir: Path,
        repeats: int = 4,
        levers: tuple[TorchLever, ...] = TORCH_LEVERS,
        deadline: float = math.inf,
        analyze_capture: Callable[[Path], Any] | None = None,
        fingerprint_file: Callable[[Path], Fingerprint] | None = None,
    ) -> None:
        """``analyze_capture(path)``: what ``gitm-tui analyze`` makes of a trace file (the
        runtime passes engine.analyze's; that layer sits above this one);
        ``fingerprint_file(path)``: the workload fingerprint of a torch.profiler capture
        (engine.analyze.fingerprints'), which credits a trial only for the baseline's workload —
        None: identity not checked (said so)."""
        self.job = job
        self.analyze_capture = analyze_capture
        self.fingerprint_file = fingerprint_file
        #: each configuration's fingerprint (its levers, in order), captured once
        self._fps: dict[tuple[str, ...], Fingerprint | None] = {}
        #: the capture's analysis when the gate made it in the profile phase (GPU)
        self._early: TorchAnalysis | None = None
        self.levers = {lv.id: lv for lv in levers}
        self.batches = Batches(job)
        self.deadline = deadline  # time.monotonic() by which measuring must stop
        self.analysis = None
        self.reference: Reference | None = None
        #: the program's numeric state the reference step started from
        self._ref_state: Snapshot | None = None
        self.warmup, self.steps = 2, 5
        #: the levers live now, in the order applied, with their undo
        self._live: list[tuple[str, Undo]] = []
        self._before: dict[str, Snapshot] = {}  # each kept lever's snapshot from before it
        self.check_note = ""  # why correctness cannot be judged ('' while it can)
        self.check_said = ""  # what the last correctness check measured, when it passed
        self._lever_of: dict[str, str] = {}
        super().__init__(run_dir, repeats, TorchState(flags=global_flags()))

    @property
    def traced(self) -> bool:  # type: ignore[override]
        """On a GPU the attribute phase captures a device trace; on the CPU there is none."""
        return on_cuda(self.job)

    # ------------------------------------------------------------------ measuring
    def _check_time(self) -> None:
        if self.cancelled:
            raise TorchJobError("the run was stopped")
        if time.monotonic() > self.deadline:
            raise BudgetEnded("the budget ended before this measurement")

    def measure_once(self) -> TorchMeasurement:
        """One measurement of the live configuration; the program's state is restored."""
        self._check_time()
        snap = Snapshot.take(self.job)
        try:
            return run_steps(self.job, self.batches, self.warmup, self.steps)
        finally:
            snap.restore(self.job)

    def measure(self, state: Any = None) -> list[TorchMeasurement]:
        out = [self.measure_once() for _ in range(self.repeats)]
        self.measurements += len(out)
        return out

    def block(self, config: tuple[str, ...]) -> Block:
        """One block with exactly the levers ``config`` live (switched to it first)."""
        try:
            self._use(config)
            m = self.measure_once()
        except BudgetEnded as e:  # the pairs so far are judged; the caller says so
            return Block(math.nan, False, str(e))
        except TorchJobError:
            raise
        except Exception as e:  # the lever's apply or undo raised
            return Block(math.nan, False, f"switching levers failed: {e!r}"[:300])
        return Block(m.mean_ns, m.ok, m.error, m)

    def base_state(self) -> tuple[str, ...]:
        return ()

    def _use(self, config: tuple[str, ...] | TorchState, settle: bool = True) -> None:
        """Make exactly the levers ``config`` live: the newest undone until the live ones are a
        prefix of it, then the missing ones applied in order (each with its untimed settle
        steps: a compile, an autotune). The program's numbers are untouched (each block
        restores its own snapshot)."""
        want = tuple(config.applied) if isinstance(config, TorchState) else tuple(config)
        live = self._live
        while live and (
            len(live) > len(want) or tuple(lid for lid, _ in live) != want[: len(live)]
        ):
            _lid, undo = live.pop()
            undo()
        for lid in want[len(live) :]:
            lv = self.levers[lid]
            live.append((lid, lv.apply(self.job)))
            if settle and lv.settle_steps:  # compile / autotune once, untimed, same state
                self._check_time()
                kept = Snapshot.take(self.job)
                try:
                    run_steps(self.job, self.batches, lv.settle_steps, 0)
                finally:
                    kept.restore(self.job)

    def warm_up(self) -> str:
        """Run the unchanged program step by step until its step time is steady (MSER finds
        the warm-up: first iterations, allocator, oneDNN/Inductor set-up, page faults), at most
        200 steps or 20 s; size the blocks from the steady step time (~0.2 s each, 3 to 200
        steps) and record the reference step the correctness check compares with."""
        snap = Snapshot.take(self.job)
        times: list[float] = []
        t_end = time.monotonic() + max(2.0, min(20.0, 0.1 * self.time_left()))
        try:
            while True:
                self._check_time()
                m = run_steps(self.job, self.batches, 0, 1)
                if not m.ok:
                    raise TorchJobError(f"the program's baseline step failed: {m.error}")
                times.append(m.step_ns[0])
                n = len(times)
                if n >= 200 or (n >= 3 and time.monotonic() > t_end):
                    break
                if n >= 10 and steady_start(times) <= n // 4:
                    break
        finally:
            snap.restore(self.job)
        d = steady_start(times)
        per_step = sum(times[d:]) / len(times[d:])
        self.steps = int(min(200, max(3, round(0.2e9 / max(per_step, 1.0)))))
        self.warmup = max(1, min(d, self.steps // 5))
        self.batches.reset()
        ref_batch = self.batches.next()  # drawing it may use the RNG (a shuffling sampler)
        snap.restore(self.job)  # so the reference step starts from exactly this snapshot
        self.reference = Reference.record(self.job, ref_batch)
        snap.restore(self.job)
        self._ref_state = snap
        if not self.reference.checkable:
            self.check_note = (
                "the step returned nothing comparable (a tensor, a number, or a tuple/dict of "
                "them) and no model was given: correctness cannot be judged"
            )
            self.journal.append({"type": "check_unavailable", "reason": self.check_note})
        first = sum(times[:d]) / d if d else per_step
        return (
            f"{len(times)} untimed steps: warm-up over the first {d} (mean "
            f"{first / 1e6:.3g} ms) before a steady {per_step / 1e6:.3g} ms/step; blocks of "
            f"{self.steps} steps after {self.warmup} untimed"
        )

    def profile(self) -> NoiseFloor:
        """Warm up (detected), record the reference step, then the interleaved A/A of the
        unchanged program: the noise gate and the baseline."""
        run = self._aa()
        if run.failed is not None:
            raise TorchJobError(f"the program's baseline step failed: {run.failed.reason}")
        self.journal.append(
            {
                "type": "torch_job",
                "name": self.job.name,
                "device": "cuda" if on_cuda(self.job) else "cpu",
                "steps_per_measurement": self.steps,
                "warmup_steps": self.warmup,
                "samples_per_step": self.job.samples_per_step,
                "flags": global_flags(),
            }
        )
        return self._set_noise_floor(run)

    def analyse(self, m: Any = None) -> TorchAnalysis:
        early, self._early = self._early, None  # the gate's capture is the baseline's
        a = early or (self._captured() if on_cuda(self.job) else None)
        if a is None:
            a = TorchAnalysis(unchecked_invariants(NO_TRACE), RankedHypotheses([], 0))
        self.analysis = a
        self._keep_baseline(a)
        return a

    def _captured(self) -> TorchAnalysis | None:
        """Capture steps with torch.profiler and analyse the trace as ``gitm-tui analyze``
        does; None (and a journal line saying why) when that cannot be done."""
        from engine.trace.errors import TraceImportError

        if self.analyze_capture is None:
            return None
        path = self.run_dir / "profile.json"
        try:
            capture(self.job, self.batches, path, steps=max(3, min(self.steps, 20)))
            res = self.analyze_capture(path)
        except (TraceImportError, RuntimeError, OSError) as e:
            self.journal.append({"type": "capture_failed", "reason": str(e)[:300]})
            return None
        an = res.analysis
        # the verdicts as the capture's analysis found them: dropping the violations made the
        # report say "0 violating" of a trace that had some (they cite the capture's rows)
        inv = list(res.verdicts)
        shares = {
            k: v / max(1, sum(an.time_by_regime_ns.values()))
            for k, v in an.time_by_regime_ns.items()
        }
        return TorchAnalysis(
            inv,
            RankedHypotheses([], 0),
            {e.lever: e for e in an.interventions},
            shares,
            f"replayed on {path.name}: {an.segments:,} device rows of {an.hardware.name}",
        )

    def reach(self) -> Reach:
        """On a GPU, each applicable lever's ceiling from the captured baseline's replay (the
        library levers it is, ``REPLAYED_AS``: their ceilings, summed); on the CPU, or for a
        lever the trace cannot judge, none: reachability unknown there."""
        levers = []
        na: dict[str, str] = {}
        for lv in self.levers.values():
            ok, why = lv.applicable(self.job)
            if ok:
                levers.append(lv)
            else:
                na[lv.id] = why
        a = None
        if on_cuda(self.job) and self.analyze_capture is not None:
            a = self._early = self._captured()
        if a is None or not a.estimates:
            why = a.note if a is not None else NO_TRACE
            return Reach(
                tuple(LeverCeiling(lv.id, None, basis="measured only") for lv in levers),
                unknown=f"{why}: no lever's gain can be bounded before it is measured",
                not_applicable=na,
            )
        out = []
        for lv in levers:
            ests = [a.estimates.get(i) for i in REPLAYED_AS.get(lv.id, ())]
            highs = [
                e.ceiling if e.ceiling is not None else e.gain_high
                for e in ests
                if e is not None and e.status in ("predicted", "ceiling")
            ]
            if not ests or len(highs) != len(ests) or any(h is None for h in highs):
                out.append(LeverCeiling(lv.id, None, basis="the captured trace cannot bound it"))
                continue
            judged = [e for e in ests if e is not None]
            prior = "; ".join(e.lever for e in judged if e.prior_based)
            lows = [e.gain_low for e in judged]
            out.append(
                LeverCeiling(
                    lv.id,
                    float(sum(h or 0.0 for h in highs)),
                    float(sum(x or 0.0 for x in lows)) if prior else None,
                    device=float(sum(h or 0.0 for h in highs)),
                    prior=f"the priors of {prior}" if prior else "",
                    basis="; ".join(e.ceiling_basis or e.basis for e in judged)[:600],
                )
            )
        return Reach(tuple(out), None, "", na, a.note)

    def _fingerprint(self, config: tuple[str, ...]) -> Fingerprint | None:
        """The fingerprint of the program with exactly ``config``'s levers live: a short
        torch.profiler capture (``captures/`` in the run folder; the program's state restored),
        once per configuration. None when no capture can be made (said in the journal)."""
        if config in self._fps:
            return self._fps[config]
        fp = None
        if self.fingerprint_file is not None:
            from engine.trace.errors import TraceImportError

            name = "+".join(config) or "baseline"
            path = self.run_dir / "captures" / f"{name}.json"
            try:
                self._check_time()
                self._use(config)
                path.parent.mkdir(parents=True, exist_ok=True)
                capture(self.job, self.batches, path, steps=3)
                fp = self.fingerprint_file(path)
            except BudgetEnded as e:  # no time for a capture: the trial is judged without it
                self.journal.append({"type": "capture_failed", "config": name, "reason": str(e)})
            except TorchJobError:  # the run was stopped
                raise
            except (TraceImportError, RuntimeError, OSError) as e:
                self.journal.append(
                    {"type": "capture_failed", "config": name, "reason": one_line(e)[:300]}
                )
        self._fps[config] = fp
        return fp

    def estimate(self, lever_id: str) -> tuple[float, float, str]:
        """(predicted gain, confidence, evidence) of a torch lever from the captured trace's
        replay; (NaN, 0, why not) when it has none."""
        a = self.analysis
        ids = REPLAYED_AS.get(lever_id, ())
        if a is None or not a.estimates or not ids:
            return math.nan, 0.0, f"measured only: {a.note if a else NO_TRACE}"
        ests = [a.estimates[i] for i in ids if i in a.estimates]
        judged = [e for e in ests if e.status == "predicted" and e.predicted_gain is not None]
        if not judged:
            why = "; ".join(f"{e.lever}: {e.status} ({e.basis})" for e in ests) or (
                f"the trace shows no target for {', '.join(ids)}"
            )
            return math.nan, 0.0, f"measured only: {why}"
        keep = 1.0
        for e in judged:
            keep *= 1 - float(e.predicted_gain or 0.0)
        gain = 1 - keep
        prior = any(e.prior_based for e in judged)
        text = "; ".join(f"{e.lever} {e.gain_text()} — {e.basis}" for e in judged)
        return (
            gain,
            0.5 if prior else 0.8,
            f"replayed on the captured trace: {text}"
            + (" (rests on a prior: interval shown)" if prior else ""),
        )

    # ------------------------------------------------------------------ rank
    def rank(self, a: Any = None) -> list[TorchLever]:
        tried = self._tried()
        out = []
        self.not_applicable = {}
        for lv in self.levers.values():
            if lv.id in tried or lv.id in self.state.applied:
                continue
            ok, why = lv.applicable(self.job)
            if ok:
                out.append(lv)
            else:
                self.not_applicable[lv.id] = why
        # with a captured trace, by the replay's estimate (measured-only levers after, in order)
        pred = {lv.id: self.estimate(lv.id)[0] for lv in out}
        return sorted(out, key=lambda lv: -pred[lv.id] if math.isfinite(pred[lv.id]) else 1.0)

    def propose(self, cands: list[TorchLever]) -> list[Intervention]:
        by_lever = {iv.lever_id: iv for iv in self.interventions.values()}
        out = []
        for lv in cands:
            iv = by_lever.get(lv.id)
            if iv is None:
                iid = f"I{len(self.interventions) + 1}"
                _ok, why = lv.applicable(self.job)
                gain, conf, basis = self.estimate(lv.id)
                iv = Intervention(
                    iid, lv.id, lv.title, lv.safety, gain, conf, [f"applies: {why}", basis], lv.what
                )
                self.interventions[iid] = iv
                self._lever_of[iid] = lv.id
                self.journal.transition(
                    iid,
                    State.PROPOSED,
                    lever=lv.id,
                    predicted_gain=None if math.isnan(gain) else gain,
                    confidence=conf or None,
                    safety=lv.safety,
                    evidence=iv.evidence,
                    replay=lv.what,
                )
            out.append(iv)
        return out

    # ------------------------------------------------------------------ apply
    def _check(self, numerics: str) -> str:
        """'' when the reference step, run from the baseline's state (its RNG state too: the
        same dropout masks) under the current configuration, matches the baseline's within the
        tolerance of the lever's ``numerics`` class (manifests/correctness.json); what it
        measured goes in ``check_said`` for the lever's note."""
        assert self.reference is not None and self._ref_state is not None
        snap = Snapshot.take(self.job)
        try:
            self._ref_state.restore(self.job)
            got = check_values(self.job, self.reference.batch)
        except Exception as e:  # the lever broke the step itself
            return f"the step raised {e!r}"[:300]
        finally:
            snap.restore(self.job)
        why, self.check_said = self.reference.judge(got, numerics)
        return why

    def trial(self, iid: str) -> Intervention:
        """Apply, measure in interleaved pairs against the state before, check, keep or roll
        back. Whatever stops it midway (the budget, a stop, an error) rolls the lever back
        exactly before it propagates."""
        iv = self.interventions[iid]
        lv = self.levers[self._lever_of[iid]]
        before_state = self.state
        before = tuple(before_state.applied)
        self._fingerprint(before)  # the state the trial changes, as a workload (once)
        self._use(before)
        snap = Snapshot.take(self.job)
        self._save_state(f"states/{iid}_before.json", before_state)
        self.journal.transition(iid, State.APPLYING, lever=lv.id)
        iv.state = State.APPLYING
        # torch's own logging of the trial (an Inductor failure's tracebacks) goes to
        # logs/<iid>.log in the run folder; the note names it
        with framework_output(self.run_dir, iid) as log:
            out = self._apply_and_measure(iid, iv, lv, snap, before)
        if out.state == State.ROLLED_BACK and log.lines:
            out.note = f"{out.note}; framework output: {log.rel} ({log.lines} lines)"
        return out

    def _apply_and_measure(
        self, iid: str, iv: Intervention, lv: TorchLever, snap: Snapshot, before: tuple[str, ...]
    ) -> Intervention:
        try:
            try:
                self._use((*before, lv.id))
            except TorchJobError:  # the budget ended or the run was stopped while settling
                raise
            except Exception as e:
                self._use_safely(before)
                return self._rolled_back(
                    iv, snap, before, f"the lever could not be applied: {one_line(e)}"
                )
            return self._measure_trial(iid, iv, lv, snap, before)
        except BaseException as e:  # cut short: nothing of it may stay applied
            if iv.state in (State.APPLYING, State.APPLIED):
                self._use_safely(before)
                self._rolled_back(iv, snap, before, f"cut short ({e}): rolled back"[:300])
            raise

    def _use_safely(self, config: tuple[str, ...]) -> None:
        """``_use`` on the way out of a failure: a lever whose undo raises is reported by the
        bit-for-bit check that follows, not here."""
        try:
            self._use(config)
        except Exception:
            self._live.clear()

    def _measure_trial(
        self,
        iid: str,
        iv: Intervention,
        lv: TorchLever,
        snap: Snapshot,
        before: tuple[str, ...],
    ) -> Intervention:
        after = (*before, lv.id)
        self._save_state(
            f"states/{iid}_after.json", TorchState(applied=list(after), flags=global_flags())
        )
        run = self.paired(before, after)
        c = run.comparison
        self.comparisons[iid] = c
        self._use(after)
        after_state = TorchState(applied=list(after), flags=global_flags())
        unjudged = ident = ""
        why = ""
        if run.failed is not None and run.failed.reason.startswith("the budget ended"):
            run.failed = None  # not the lever's failure: the pairs measured are judged
        if run.failed is not None:
            why = (
                run.failed.reason
                if run.failed_arm == "B"
                else f"the configuration before it failed during the trial: {run.failed.reason}"
            )
        elif ident := self._identity(
            iid, self._fingerprint(before), self._fingerprint(after), lv.id
        ):
            why = ident
            checkable = lv.checkable and self.reference and self.reference.checkable
            if checkable and (bad := self._check(lv.numerics)):  # both said where both fail
                why = f"{ident}; correctness check failed too: {bad}"
        elif not lv.checkable:
            unjudged = "correctness not judged: the lever changes only where batches come from"
        elif not self.reference or not self.reference.checkable:
            unjudged = f"correctness not judged: {self.check_note}"
        else:
            why = self._check(lv.numerics)
            if not why and self.check_said:
                unjudged = f"correctness: {self.check_said}"
        gain = c.gain if run.failed is None else None
        iv.measured_gain, iv.measured_ns = gain, c.b_mean
        if math.isfinite(iv.predicted_gain) and gain is not None and c.valid:
            iv.predicted_ns = c.a_mean * (1 - iv.predicted_gain)  # the replay's error, kept
            self.replay_errors.append((lv.id, iv.predicted_gain, gain))  # gains, as Optimizer
        self.journal.transition(
            iid,
            State.APPLIED,
            measured=finite_or_none(c.b_mean),
            gain=finite_or_none(gain),
            pairs=c.to_json(),
            check=unjudged or "checked",
        )
        iv.state = State.APPLIED
        verdict, note = self._verdict(
            not why,
            why,
            c,
            "the step failed"
            if run.failed is not None
            else "workload changed"
            if ident
            else "correctness check failed",
        )
        if unjudged:
            note = f"{note}; {unjudged}"
        if verdict == State.ROLLED_BACK:
            self._use_safely(before)
            return self._rolled_back(iv, snap, before, note)
        if lv.via:
            note = f"{note}; in effect through {lv.via}: a loop of your own gets it only there"
        self._before[iid] = snap
        self.state = after_state
        self.current = [b.raw for b in run.b_blocks]
        self._save_state("state.json", after_state)
        self.journal.transition(iid, verdict, reason=note)
        iv.state, iv.note = verdict, note
        self.kept.append(iid)
        return iv

    def _rolled_back(
        self, iv: Intervention, snap: Snapshot, before: tuple[str, ...], note: str
    ) -> Intervention:
        """With the lever undone (the live levers are ``before``), restore the snapshot taken
        before it and check the program is bit for bit what it was (journaled with the
        verdict)."""
        note = " ".join(note.split())  # an exception's text may span lines: one line here
        snap.restore(self.job)
        diffs = snap.differences(self.job)
        self.journal.transition(
            iv.iid, State.ROLLED_BACK, reason=note, restored_exactly=not diffs, differences=diffs
        )
        iv.state = State.ROLLED_BACK
        iv.note = (
            f"{note}; restored exactly ({RESTORED})"
            if not diffs
            else f"{note}; NOT restored exactly: {', '.join(diffs[:3])}"
        )
        return iv

    def rollback(self, iid: str, by: str) -> Intervention:
        """An operator's rollback of a kept lever: undone, the program put back as it was
        before that trial, checked bit for bit and journaled like the gate's rollbacks."""
        iv = self._verified(iid)
        lever = self._lever_of[iid]
        applied = list(self.state.applied)
        at = applied.index(lever)
        # levers kept after this one are undone first (newest first) and applied again after,
        # so the program can be compared with the snapshot taken before this one
        self._use(tuple(applied[:at]))
        snap = self._before.pop(iid)
        snap.restore(self.job)
        diffs = snap.differences(self.job)
        if iid in self.kept:
            self.kept.remove(iid)
        rest = tuple(x for x in applied if x != lever)
        iid_of = {self._lever_of[k]: k for k in self.kept}
        for i in range(at, len(rest)):  # the later ones again, each after its own snapshot
            if rest[i] in iid_of:
                self._before[iid_of[rest[i]]] = Snapshot.take(self.job)
            self._use(rest[: i + 1])
        self.state = TorchState(applied=list(rest), flags=global_flags())
        self._save_state("state.json", self.state)
        note = f"rolled back by {by}"
        self.journal.transition(
            iid, State.ROLLED_BACK, reason=note, restored_exactly=not diffs, differences=diffs
        )
        iv.state = State.ROLLED_BACK
        iv.note = (
            f"{note}; restored exactly ({RESTORED})"
            if not diffs
            else f"{note}; NOT restored exactly: {', '.join(diffs[:3])}"
        )
        self.current = self.measure()
        return iv

    def finish(self, target: float) -> dict[str, Any]:
        try:
            final, note = self.final_comparison()
        except TorchJobError as e:  # the budget ended: the trials' estimate stands in
            final, note = None, f"final re-measure not done ({e}); the trials' estimate is used"
        self._use(tuple(self.state.applied), settle=False)  # as the program keeps it
        res = self._result(final, target, note)
        res["final_choice"] = {"applied": list(self.state.applied)}
        res["correctness"] = self.check_note or correctness_line()
        self.batches.reset()  # the program's loader is its own again
        if not res["target_met"]:
            res["diagnostic"] = self.measured_only_diagnostic(target, res["gain"], NO_TRACE)
        return res


class TorchLaunchOptimizer(CommandOptimizer):
    """The loop for an unmodified script (``--workload torch -- python SCRIPT``): each lever
    is one process-level setting, tried by relaunching (engine.workloads.torch_launch)."""

    unit = "ms/step"
    scale = 1e6
    wl: TorchLaunchWorkload
    no_trace = "an unmodified script, relaunched per trial: no device trace is recorded"

    def __init__(self, workload: TorchLaunchWorkload, run_dir: Path, repeats: int = 4) -> None:
        super().__init__(workload, run_dir, repeats)
        self.unit, self.scale = "ms/step", 1e6

    def rank(self, a: Any = None) -> list[CommandCandidate]:
        self.not_applicable = {}
        out = []
        for c in super().rank(a):
            lv = self.wl.levers[c.lever]
            if lv.cuda_only and self.wl.device != "cuda":
                where = self.wl.device or "an unknown device (no step reported it)"
                self.not_applicable[lv.name] = (
                    f"acts on CUDA only; the script's model is on {where}"
                )
                continue
            if self.wl.defaults.get(c.lever) == c.value:  # what the baseline already runs with
                continue
            out.append(c)
        return out

    def safety_of(self, c: CommandCandidate) -> str:
        return self.wl.levers[c.lever].safety

    def evidence_of(self, c: CommandCandidate) -> str:
        return f"process-level setting ({NO_TRACE})"

    def what_of(self, c: CommandCandidate) -> str:
        lv = self.wl.levers[c.lever]
        return f"{lv.env}={c.value}: {lv.what} (relaunched; measured only)"

    def finish(self, target: float) -> dict[str, Any]:
        res = super().finish(target)
        res.pop("metric", None)  # time per step, not a metric read from the output
        res["per"] = "step"
        res["correctness"] = self.wl.check_note or (
            "the first step's gradients (Σ|g| and Σg², which the step finder reports) match the "
            "baseline's within the tolerance of what the lever does to the arithmetic (SAFE "
            "levers reorder sums, NUMERICS ones reduce precision: manifests/correctness.json, "
            "settable with GITM_CHECK_RTOL) — a coarse check; a script whose step finder "
            "reports no gradients is held to the first update's Δ of the parameters' sum and "
            "sum of squares"
        )
        return res


def correctness_line() -> str:
    """How a live program's trials are checked, with the tolerances in force (the report's
    Correctness line)."""
    from engine.manifest import load_correctness

    classes = load_correctness().classes
    tol = ", ".join(f"{k} rtol {c.rtol:g}" for k, c in classes.items())
    return (
        "each trial's step on the reference batch, from the baseline's state and RNG state (the "
        "same dropout masks; a compiled model draws them from eager's generator), against the "
        f"baseline's: outputs, gradients, updates and buffers within the tolerance of what the "
        f"lever does to the arithmetic ({tol}: manifests/correctness.json, settable with "
        "GITM_CHECK_RTOL); update elements whose gradient is rounding noise are counted, not "
        "compared"
    )
