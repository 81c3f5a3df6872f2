"""The optimize loop's steps (DESIGN §5–7), synchronous and UI-free; ``engine.runtime.engine``
runs them in worker threads, one phase after another, and handles approvals.

    profile   → ``Optimizer.profile``: repeated measurements of the unchanged workload; the
                A/A noise floor the rollback gate uses.
    attribute → ``Optimizer.analyse``: EESM regimes, predicted graph, residuals, invariants,
                replay graph, ranked hypotheses.
    rank      → ``Optimizer.rank``: each lever's applicability and its replayed gain on the
                trace; proposed only where attribution supports one of its causes.
    apply     → ``Optimizer.trial``: journal → apply → measure → gate (correctness, noise) →
                VERIFIED or ROLLED_BACK; after a kept lever the survivors are re-ranked on the
                new state's trace.
    report    → ``Optimizer.finish``: the kept levers re-measured together against the
                baseline; target met, or a diagnostic that says why not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.eesm.pipeline import EesmModel
from engine.levers.library import LEVERS, Lever
from engine.levers.library import by_id as lever_by_id
from engine.levers.model import Observation, Safety
from engine.optimizer.attribution import RankedHypotheses, attribute
from engine.optimizer.monitor import InvariantResult, check_invariants, residuals
from engine.planner.catalogue import GpuPeaks
from engine.planner.catalogue import by_id as hardware_by_id
from engine.planner.graph import predict_graph
from engine.schedule.causes import Cause
from engine.schedule.dag import build_dag, schedule
from engine.store.journal import Journal, State
from engine.store.runs import atomic_write_text
from engine.workloads.sim import Measurement, SimState, SimWorkload


@dataclass
class NoiseFloor:
    """Run-to-run noise of the unchanged workload (A/A)."""

    means_ns: list[float]
    aa_delta: float  # |mean(first half) / mean(second half) - 1|
    floor: float  # the smallest relative gain the gate accepts

    @property
    def mean_ns(self) -> float:
        return float(np.mean(self.means_ns))


@dataclass
class Analysis:
    """Everything the attribute phase learned about one state."""

    measurement: Measurement
    observation: Observation
    invariants: list[InvariantResult]
    hypotheses: RankedHypotheses
    regime_shares: dict[str, float]
    predicted_step_ns: float


@dataclass
class Candidate:
    """A lever considered for the current state."""

    lever: Lever
    applicable: bool
    reason: str
    predicted_gain: float = 0.0  # 1 - replayed / baseline, per sample
    confidence: float = 0.0
    supported_by: list[str] = field(default_factory=list)  # claimed causes it targets
    what: str = ""
    prior_based: bool = False

    @property
    def score(self) -> float:
        return self.predicted_gain * self.confidence

    @property
    def proposable(self) -> bool:
        return self.applicable and self.predicted_gain > 0 and bool(self.supported_by)


@dataclass
class Intervention:
    """A proposed lever's life in this run."""

    iid: str
    lever_id: str
    title: str
    safety: str
    predicted_gain: float
    confidence: float
    evidence: list[str]
    what: str
    state: State = State.PROPOSED
    approved_by: str = ""
    measured_gain: float | None = None  # vs the state it was applied to
    measured_ns: float | None = None
    predicted_ns: float | None = None
    note: str = ""


class LoopRun:
    """What both optimize loops (this simulated one and ``command_loop``'s real process) keep
    about a run, and the steps they take alike: the A/A noise floor, approvals, the gate's
    keep-or-roll-back verdict, the result's common fields and the state files."""

    #: the journal key of the noise floor's means ("means_ns"; a command's metric may be
    #: something else than a time)
    means_key = "means_ns"
    #: whether a measurement has a device trace (regimes, invariants, replay); else measured only
    traced = True
    #: how the log shows a measurement: value / scale, in unit
    unit, scale = "µs/sample", 1e3

    def __init__(self, run_dir: Path, repeats: int, state: Any) -> None:
        self.run_dir = run_dir
        self.repeats = max(2, repeats)
        self.state = state
        self.kept: list[str] = []  # intervention ids in the order they were kept
        self.interventions: dict[str, Intervention] = {}
        self.journal = Journal(run_dir / "journal.jsonl")
        self.noise: NoiseFloor | None = None
        self.current: list[Any] = []  # the measurements of the current state
        self.baseline_ns = math.nan
        self.baseline_invariants: list[InvariantResult] = []
        self.baseline_hypotheses: RankedHypotheses | None = None
        self.not_applicable: dict[str, str] = {}
        self.measurements = 0
        self.replay_errors: list[tuple[str, float, float]] = []  # lever, predicted, measured ns
        self._save_state("state.json", state)
        self._save_state("state_base.json", state)

    @staticmethod
    def mean_ns(ms: list[Any]) -> float:
        return float(np.mean([m.mean_ns for m in ms]))

    def _set_noise_floor(self, ms: list[Any]) -> NoiseFloor:
        """The A/A noise floor of the unchanged workload's measurements ``ms``, which become
        the baseline."""
        means = [m.mean_ns for m in ms]
        half = len(means) // 2
        aa = abs(float(np.mean(means[:half])) / float(np.mean(means[half:])) - 1)
        cv = float(np.std(means, ddof=1) / np.mean(means))
        # a gain must beat both the A/A split and a 95% interval of a difference of two means
        floor = max(aa, 1.96 * math.sqrt(2.0 / self.repeats) * cv, 0.002)
        self.noise = NoiseFloor(means, aa, floor)
        self.current = ms
        self.baseline_ns = float(np.mean(means))
        self.journal.append(
            {"type": "noise_floor", self.means_key: means, "aa_delta": aa, "floor": floor}
        )
        return self.noise

    def policy_allows(self, iv: Intervention, policy: str) -> bool:
        """Whether ``policy`` may approve ``iv`` without a person."""
        return policy == "all" or (policy == "auto" and iv.safety == Safety.SAFE.value)

    def approve(self, iid: str, by: str) -> None:
        iv = self.interventions[iid]
        self.journal.transition(iid, State.APPROVED, by=by)
        iv.state, iv.approved_by = State.APPROVED, by

    def reject(self, iid: str, by: str) -> None:
        iv = self.interventions[iid]
        self.journal.transition(iid, State.REJECTED, by=by)
        iv.state, iv.note = State.REJECTED, f"rejected by {by}"

    def _verdict(self, ok: bool, why: str, gain: float | None) -> tuple[State, str]:
        """The gate: a failed correctness check or a gain within the noise floor rolls back."""
        assert self.noise is not None
        floor = self.noise.floor
        if not ok:
            return State.ROLLED_BACK, f"correctness check failed: {why}"
        assert gain is not None
        if gain <= floor:
            return (
                State.ROLLED_BACK,
                f"not better beyond noise: {gain:+.1%} vs noise floor {floor:.1%}",
            )
        return State.VERIFIED, f"kept: {gain:+.1%} (noise floor {floor:.1%})"

    def _verified(self, iid: str) -> Intervention:
        """The intervention an operator rolls back, which must be VERIFIED."""
        iv = self.interventions[iid]
        if iv.state != State.VERIFIED:
            raise ValueError(
                f"{iid} is {iv.state.value}; only a VERIFIED intervention can be rolled back"
            )
        return iv

    def _result(self, final_ns: float, gain: float, target: float) -> dict[str, Any]:
        """The fields every run's result has. With nothing kept the final configuration is the
        baseline: whatever the re-measure shows is run-to-run noise, never a met target."""
        assert self.noise is not None
        out = {
            "baseline_ns_per_sample": self.baseline_ns,
            "final_ns_per_sample": final_ns,
            "gain": gain,
            "target": target,
            "target_met": bool(self.kept) and gain >= target,
            "noise_floor": self.noise.floor,
            "aa_delta": self.noise.aa_delta,
            "kept": [self.interventions[k].lever_id for k in self.kept],
            "measurements": self.measurements,
            "not_applicable": dict(self.not_applicable),
        }
        if not self.kept:
            out["note"] = (
                f"nothing kept: the final configuration is the baseline, and its {gain:+.1%} "
                "is run-to-run noise"
            )
        return out

    def measured_only_diagnostic(self, target: float, gain: float, note: str) -> dict[str, Any]:
        """Why the target was missed, for a loop with no trace to attribute (a command, a live
        or launched PyTorch program): what was tried, what waits for a person, what does not
        apply."""
        return {
            "short_by": target - gain,
            "tried": {
                iv.lever_id: f"{iv.state.value}: {iv.note}"
                for iv in self.interventions.values()
                if iv.state != State.PROPOSED
            },
            "awaiting_a_person": {
                iv.lever_id: f"{iv.safety}: not approved"
                for iv in self.interventions.values()
                if iv.state == State.PROPOSED
            },
            "not_applicable": dict(self.not_applicable),
            "causes_without_lever": [],
            "causes_without_applicable_lever": [],
            "note": note,
        }

    def _save_state(self, rel: str, state: Any) -> None:
        atomic_write_text(self.run_dir / rel, state.model_dump_json(indent=1))


class Optimizer(LoopRun):
    """One optimize run over a simulated workload (the engine drives it)."""

    state: SimState
    current: list[Measurement]
    analysis: Analysis | None

    def __init__(
        self,
        workload: str,
        run_dir: Path,
        seed: int = 0,
        repeats: int = 4,
        hardware: str = "h100_telemetry",
    ) -> None:
        self.wl = SimWorkload(workload, hardware=hardware, machine_seed=seed)
        # the planner's model of the device is the simulated device's own catalogue entry
        self.hw: GpuPeaks = hardware_by_id(self.wl.hw.id)
        self._seed = seed * 1000
        self.model = EesmModel.build(self.wl.hw)
        self.analysis = None
        super().__init__(run_dir, repeats, self.wl.base)

    # ------------------------------------------------------------------ measuring
    def _next_seed(self) -> int:
        self._seed += 1
        return self._seed

    def measure(self, state: SimState, n: int | None = None) -> list[Measurement]:
        """``n`` (default: repeats) independent measurements of ``state``."""
        out = [self.wl.measure(state, seed=self._next_seed()) for _ in range(n or self.repeats)]
        self.measurements += len(out)
        return out

    def profile(self) -> NoiseFloor:
        """Measure the unchanged workload ``repeats`` times; derive the A/A noise floor."""
        return self._set_noise_floor(self.measure(self.state, max(4, self.repeats)))

    # ------------------------------------------------------------------ attribute
    def analyse(self, m: Measurement | None = None) -> Analysis:
        """Decode, predict, check invariants, build the replay graph, attribute."""
        m = m or self.current[0]
        dec = m.decoded(self.model)
        dag = build_dag(m.trace, self.hw, m.iterations, regimes=dec.labels, window=m.window)
        base = schedule(dag)
        obs = Observation(dag, base, m.telemetry, self.hw, m.samples_per_iteration)
        graph = predict_graph(self.state.spec, self.hw)
        res = residuals(m.trace, graph)
        inv = check_invariants(res)
        hyp = attribute(
            res,
            graph,
            dag=dag,
            schedule=base,
            telemetry=m.telemetry,
            clock_max_mhz=self.hw.sm_clock_max_mhz,
        )
        a = Analysis(m, obs, inv, hyp, dec.regime_shares(), graph.step_ns)
        self.analysis = a
        if not self.baseline_invariants:
            self.baseline_invariants = inv
            self.baseline_hypotheses = hyp
        return a

    # ------------------------------------------------------------------ rank
    def rank(self, a: Analysis | None = None) -> list[Candidate]:
        """Every lever not yet tried, with its replayed gain and support; best first."""
        a = a or self.analysis
        assert a is not None
        tried = {iv.lever_id for iv in self.interventions.values() if iv.state != State.PROPOSED}
        claimed = {h.cause: h for h in a.hypotheses.claimed}
        base_ns = a.observation.per_sample_ns(a.observation.baseline)
        out = []
        self.not_applicable = {}
        for lv in LEVERS:
            if lv.id in tried:
                continue
            site = lv.sites(self.state)
            if not site.ok:
                self.not_applicable[lv.id] = site.reason
                out.append(Candidate(lv, False, site.reason))
                continue
            edit = lv.transform(a.observation)
            if edit.rows == 0:
                self.not_applicable[lv.id] = f"the trace shows no target for it ({edit.what})"
                out.append(Candidate(lv, False, self.not_applicable[lv.id], what=edit.what))
                continue
            pred = a.observation.per_sample_ns(schedule(edit.dag), edit.sample_factor)
            gain = 1 - pred / base_ns
            sup = [c for c in lv.spec.cause_set() if c in claimed]
            conf = max((claimed[c].confidence for c in sup), default=0.0)
            if edit.prior_based:
                conf *= 0.5
            out.append(
                Candidate(
                    lv,
                    True,
                    site.reason,
                    gain,
                    conf,
                    [c.name for c in sup],
                    edit.what,
                    edit.prior_based,
                )
            )
        out.sort(key=lambda c: (not c.proposable, -c.score))
        return out

    def propose(self, cands: list[Candidate]) -> list[Intervention]:
        """Journal PROPOSED for each proposable candidate not yet proposed; update the others'
        predictions (after a kept lever the replay runs on the new state)."""
        by_lever = {iv.lever_id: iv for iv in self.interventions.values()}
        out = []
        a = self.analysis
        assert a is not None
        for c in cands:
            if not c.proposable:
                continue
            iv = by_lever.get(c.lever.id)
            ev = []
            for name in c.supported_by:
                h = a.hypotheses.get(Cause[name])
                if h:
                    ev.append(
                        f"{name}: {h.impact:.1%} of the window, confidence {h.confidence:.2f} — "
                        + "; ".join(e.what for e in h.evidence[:2])
                    )
            if iv is None:
                iid = f"I{len(self.interventions) + 1}"
                iv = Intervention(
                    iid,
                    c.lever.id,
                    c.lever.spec.title,
                    c.lever.spec.safety.value,
                    c.predicted_gain,
                    c.confidence,
                    ev,
                    c.what,
                )
                self.interventions[iid] = iv
                self.journal.transition(
                    iid,
                    State.PROPOSED,
                    lever=c.lever.id,
                    predicted_gain=c.predicted_gain,
                    confidence=c.confidence,
                    safety=iv.safety,
                    evidence=ev,
                    replay=c.what,
                )
            elif iv.state == State.PROPOSED:
                iv.predicted_gain, iv.confidence, iv.evidence, iv.what = (
                    c.predicted_gain,
                    c.confidence,
                    ev,
                    c.what,
                )
            out.append(iv)
        return out

    # ------------------------------------------------------------------ apply
    def trial(self, iid: str, hold_s: float = 0.0) -> Intervention:
        """Apply an APPROVED intervention, measure it, and keep it or roll it back."""
        import time

        iv = self.interventions[iid]
        lever = lever_by_id(iv.lever_id)
        before, after = self.state, lever.apply(self.state)
        bfile, afile = f"states/{iid}_before.json", f"states/{iid}_after.json"
        self._save_state(bfile, before)
        self._save_state(afile, after)
        a = self.analysis
        pred_ns = None
        if a is not None:
            edit = lever.transform(a.observation)
            pred_ns = a.observation.per_sample_ns(schedule(edit.dag), edit.sample_factor)
        self.journal.transition(iid, State.APPLYING, state_before=bfile, state_after=afile)
        iv.state = State.APPLYING
        self._save_state("state.json", after)  # the workload now runs the lever
        self.state = after
        if hold_s:  # tests: a window in which the run can be killed mid-apply
            time.sleep(hold_s)
        ms = self.measure(after)
        new_ns, cur_ns = self.mean_ns(ms), self.mean_ns(self.current)
        gain = 1 - new_ns / cur_ns
        iv.measured_gain, iv.measured_ns, iv.predicted_ns = gain, new_ns, pred_ns
        self.journal.transition(
            iid, State.APPLIED, measured_ns=new_ns, baseline_ns=cur_ns, gain=gain
        )
        iv.state = State.APPLIED
        if pred_ns is not None and a is not None:
            base_pred = a.observation.per_sample_ns(a.observation.baseline)
            # replay error: predicted vs measured *change*, both relative to this state's time
            self.replay_errors.append((iv.lever_id, 1 - pred_ns / base_pred, gain))
        ok, why = self.wl.correctness(after)
        verdict, note = self._verdict(ok, why, gain)
        if verdict == State.ROLLED_BACK:
            self._save_state("state.json", before)
            self.state = before
        self.journal.transition(iid, verdict, reason=note)
        iv.state, iv.note = verdict, note
        if verdict == State.VERIFIED:
            self.kept.append(iid)
            self.current = ms
            self.analyse(ms[0])
        return iv

    def rollback(self, iid: str, by: str) -> Intervention:
        """An operator rolls back a VERIFIED intervention: rebuild the state without it."""
        iv = self._verified(iid)
        state = self.wl.base
        for k in self.kept:
            if k != iid:
                state = lever_by_id(self.interventions[k].lever_id).apply(state)
        self.journal.transition(iid, State.ROLLED_BACK, reason=f"rolled back by {by}")
        self._save_state("state.json", state)
        self.state = state
        self.kept.remove(iid)
        iv.state, iv.note = State.ROLLED_BACK, f"rolled back by {by}"
        self.current = self.measure(state)
        self.analyse(self.current[0])
        return iv

    def gain(self) -> float:
        """Current measured gain vs the baseline."""
        return 1 - self.mean_ns(self.current) / self.baseline_ns

    # ------------------------------------------------------------------ report
    def finish(self, target: float) -> dict[str, Any]:
        """Re-measure the kept levers together; return the result summary."""
        final_ns = self.mean_ns(self.measure(self.state))
        gain = 1 - final_ns / self.baseline_ns
        result = self._result(final_ns, gain, target)
        if not result["target_met"]:
            result["diagnostic"] = self.diagnostic(target, gain)
        return result

    def diagnostic(self, target: float, gain: float) -> dict[str, Any]:
        """Why the target was not met: levers tried and their fate, levers not applicable and
        why, claimed causes no lever covers, and what the replay says of what is left."""
        a = self.analysis
        covered = {c for lv in LEVERS for c in lv.spec.cause_set()}
        claimed = [h for h in a.hypotheses.claimed] if a else []
        pending = [
            iv for iv in self.interventions.values() if iv.state in (State.PROPOSED, State.APPROVED)
        ]
        return {
            "short_by": target - gain,
            "tried": {
                iv.lever_id: f"{iv.state.value}: {iv.note}"
                for iv in self.interventions.values()
                if iv.state not in (State.PROPOSED,)
            },
            "awaiting_a_person": {
                iv.lever_id: f"{iv.safety}: predicted {iv.predicted_gain:+.1%}" for iv in pending
            },
            "not_applicable": dict(self.not_applicable),
            "causes_without_lever": [h.cause.name for h in claimed if h.cause not in covered],
            "causes_without_applicable_lever": [
                h.cause.name
                for h in claimed
                if h.cause in covered
                and all(
                    lv.id in self.not_applicable for lv in LEVERS if h.cause in lv.spec.cause_set()
                )
            ],
        }
