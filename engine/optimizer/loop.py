"""The optimize loop's steps (DESIGN §5–7), synchronous and UI-free: ``LoopRun``, what every
loop keeps and does alike, and ``Optimizer``, the loop over a simulated workload. The other
loops (``command_loop``, ``torch_loop``) build on ``LoopRun`` too; all four keep one contract
(engine/optimizer/contract.py), through which engine/runtime/phases.py runs their steps in
worker threads, one phase after another, and handles approvals.

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

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.eesm.pipeline import EesmModel
from engine.levers.library import LEVERS, Lever
from engine.levers.library import by_id as lever_by_id
from engine.levers.model import Observation, Safety
from engine.measure import (
    Block,
    Comparison,
    Goal,
    NoisePlan,
    PairedRun,
    Settling,
    finite_or_none,
    interleave,
    pairs_to_decide,
    params,
    plan,
    verdict,
)
from engine.optimizer.attribution import RankedHypotheses, attribute
from engine.optimizer.fingerprint import (
    AllowedChange,
    Fingerprint,
    allowed_change_for,
    credit_trial,
    fingerprint_of_trace,
)
from engine.optimizer.gate import GateDecision, Reach, qualify, replay_reach
from engine.optimizer.monitor import INVARIANTS, InvariantResult, check_invariants, residuals
from engine.planner.catalogue import GpuPeaks
from engine.planner.catalogue import by_id as hardware_by_id
from engine.planner.graph import predict_graph
from engine.schedule.causes import Cause
from engine.schedule.dag import build_dag, schedule
from engine.store.journal import Journal, State
from engine.store.runs import atomic_write_text
from engine.text import clean
from engine.trace.trace import Trace
from engine.workloads.sim import Measurement, SimState, SimWorkload

#: what the journal and report say of a trial whose workload could not be compared
NOT_CHECKED = "workload identity not checked: no trace of the trial"


@dataclass
class NoiseFloor:
    """How much the unchanged workload moves (the interleaved A/A), and what follows for the
    trials: ``floor`` is the half-width of a lever's interval with the planned pairs."""

    means_ns: list[float]
    aa_delta: float  # |A/A gain|: what the unchanged workload "gained" on itself
    floor: float  # the interval half-width (as a gain) the planned pairs give
    plan: NoisePlan | None = None

    @property
    def mean_ns(self) -> float:
        return float(np.mean(self.means_ns))


@dataclass
class LoopAnalysis:
    """What a loop's attribute phase learned about one state: the invariants' verdicts and the
    ranked hypotheses — all a loop with no device trace has (every invariant unchecked, no
    hypothesis). A loop that learns more says it in a subclass (``SimAnalysis``,
    ``engine.optimizer.torch_loop.TorchAnalysis``)."""

    invariants: list[InvariantResult]
    hypotheses: RankedHypotheses


@dataclass
class SimAnalysis(LoopAnalysis):
    """Everything the simulated workload's attribute phase learned about one state."""

    measurement: Measurement
    observation: Observation
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
    """What every optimize loop (this simulated one, ``command_loop``'s real process, the torch
    loops) keeps about a run, and the steps they take alike — one measurement protocol
    (engine.measure): an untimed warm-up, the interleaved A/A that sets how many
    pairs each lever gets (or says at once that the target cannot be measured), each trial
    measured in interleaved pairs against the state it changes, the gate's keep-or-roll-back
    verdict from the pairs' interval, and the final re-measure of baseline against the kept
    configuration, paired too.

    A loop supplies ``block(config)``: one measured block of a configuration (a state), and
    may override ``warm_up()``; and the phases' own steps (``profile``, ``analyse``, ``rank``,
    ``propose``, ``trial``, ``rollback``, ``finish``) the runtime calls through the loops' one
    contract (engine/optimizer/contract.py)."""

    #: the journal key of the noise floor's means ("means_ns"; a command's metric may be
    #: something else than a time)
    means_key = "means_ns"
    #: whether a measurement has a device trace (regimes, invariants, replay); else measured only
    traced = True
    #: how the log shows a measurement: value / scale, in unit
    unit, scale = "µs/sample", 1e3
    #: "min" for a time; a program's metric may be one to maximise
    goal: Goal = "min"
    #: the EESM model the dashboard decodes a measurement's device trace with; None where the
    #: measurements carry none to decode (only the simulated workload's do)
    model: EesmModel | None = None

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
        self.replay_errors: list[tuple[str, float, float]] = []  # lever, predicted, measured gain
        #: set by the phases before ``profile``: the target (for the noise gate's plan), the
        #: seconds left for trials, and a thread-safe narration hook
        self.target = 0.0
        self.time_left: Callable[[], float] = lambda: math.inf
        self.budget_left: Callable[[], float] = lambda: math.inf  # the whole run's
        self.say: Callable[[str], object] = lambda message: None
        #: each block of the configuration a trial compares with (arm A: the current one), as
        #: it is measured — the dashboard streams its trace, so the strips move during a trial
        #: (called from the measuring thread; the runtime hands it to its loop)
        self.on_block: Callable[[Any], object] = lambda raw: None
        #: set by the engine's stop: a loop that measures in this process (a live PyTorch
        #: program) starts no new measurement once it is
        self.cancelled = False
        #: pairs per lever (the noise gate's plan; ``repeats`` is the floor)
        self.pairs = max(params().min_pairs, self.repeats)
        #: (pairs first measured, pairs in all) when the final re-measure was extended
        self.final_extended: tuple[int, int] | None = None
        #: each trial's comparison against the state it changed, by intervention id
        self.comparisons: dict[str, Comparison] = {}
        #: the qualification gate's decision (``qualify``, in the profile phase)
        self.gate: GateDecision | None = None
        #: each kept trial's traces (the state before, the trial), where the loop has them:
        #: the report shows what changed between them
        self.trial_traces: dict[str, tuple[Trace, Trace]] = {}
        #: a relaunched program's warm-up across launches (the command loops' ``_aa``)
        self.settling: Settling | None = None
        self._save_state("state.json", state)
        self._save_state("state_base.json", state)

    # ------------------------------------------------------------------ the protocol
    def block(self, config: Any) -> Block:
        """One measured block of ``config`` (a state of this loop)."""
        raise NotImplementedError

    def warm_up(self) -> str:
        """Untimed work before the A/A (first launches, caches); what was done, for the
        journal ('' for nothing)."""
        return ""

    def paired(
        self,
        before: Any,
        after: Any,
        pairs: int | None = None,
        time_left: Callable[[], float] | None = None,
        at_least: int = 0,
        start: int = 0,
    ) -> PairedRun:
        """``after`` against ``before`` in interleaved pairs (A B, B A, …), no new pair
        started once ``time_left()`` (default: the apply phase's) is spent; ``start``: the
        pairs already measured when this continues an earlier run."""
        n = pairs or self.pairs
        left = time_left or self.time_left

        def arm_a() -> Block:
            blk = self.block(before)
            if blk.ok and blk.raw is not None:
                self.on_block(blk.raw)
            return blk

        run = interleave(
            arm_a,
            lambda: self.block(after),
            n,
            self.goal,
            keep_going=lambda: left() > 0,
            at_least=at_least,
            start=start,
        )
        self.measurements += len(run.a_blocks) + len(run.b_blocks) + (run.failed is not None)
        if run.comparison.n < n and left() <= 0:
            self.say(f"the budget ended after {run.comparison.n} of {n} pairs")
        return run

    def _aa(self) -> PairedRun:
        """The warm-up, then the interleaved A/A of the unchanged workload."""
        import time

        did = self.warm_up()
        if did:
            self.journal.append({"type": "warm_up", "what": did})
        t0 = time.monotonic()
        # the baseline needs an interval however short the budget: 2 pairs at least
        run = self.paired(self.state, self.state, params().aa_pairs, self.budget_left, 2)
        self._pair_s = (time.monotonic() - t0) / max(1, run.comparison.n)
        return run

    def _set_noise_floor(self, run: PairedRun) -> NoiseFloor:
        """The noise gate from the A/A ``run``: how many pairs each lever gets and whether the
        target can be measured at all; its blocks become the baseline."""
        aa = run.comparison
        means = [*aa.a, *aa.b]
        p = plan(
            aa, self.target, getattr(self, "_pair_s", 0.0), self.time_left(), settling=self.settling
        )
        self.pairs = max(self.pairs, p.pairs) if p.measurable else max(2, p.pairs)
        aa_gain = aa.gain if math.isfinite(aa.gain) else math.nan
        # an A/A cut short by the budget has no interval: its floor is unknown (NaN), never
        # a number past 100 %
        self.noise = NoiseFloor(
            means, abs(aa_gain), p.half if math.isfinite(p.half) else math.nan, p
        )
        self.current = [b.raw for b in run.a_blocks + run.b_blocks]
        # blocks in two speed modes have no one baseline: a mean of them describes neither
        two = p.unsettled.startswith("two speed modes")
        self.baseline_ns = math.nan if two or not means else float(np.mean(means))
        self.journal.append(
            {
                "type": "noise_floor",
                self.means_key: means,
                "aa_delta": finite_or_none(abs(aa_gain)),
                "floor": finite_or_none(p.half),
                "plan": p.to_json(),
            }
        )
        return self.noise

    # ------------------------------------------------------------------ the gate
    def reach(self) -> Reach:
        """What the gate's reach half reads: the ceilings of the levers that apply. A loop with
        no trace to bound a lever by says so (reachability unknown)."""
        return Reach(unknown="no trace to bound any lever's gain", source="")

    def qualify(self, force: bool = False) -> GateDecision:
        """The qualification gate (engine/optimizer/gate.py), after the A/A: commit or
        diagnose; journaled before the run acts on it. ``force``: the operator overrides a
        diagnosis (the loop goes on, the report says so)."""
        assert self.noise is not None, "qualify follows profile"
        g = qualify(self.target, self.noise.plan, self.reach(), force)
        self.gate = g
        self.journal.append({"type": "gate", **g.to_json()})
        return g

    def diagnose(self, target: float) -> dict[str, Any]:
        """The result of a run the gate ended in its profile phase: nothing tried, nothing kept,
        the baseline as measured, and why the target could not be committed to."""
        g = self.gate
        assert g is not None and g.diagnosed
        res = self._result(None, target, "diagnosed in the profile phase: no lever was tried")
        res["verdict"] = g.verdict
        res["diagnosed"] = True
        res["headline"] = self.headline(res)
        res["diagnostic"] = {
            "short_by": None,
            "gate": g.why(),
            "what_would_help": list(g.helps),
            "not_applicable": dict(self.not_applicable),
        }
        return res

    def _identity(
        self, iid: str, before: Fingerprint | None, after: Fingerprint | None, lever: str
    ) -> str:
        """Whether a trial ran the workload of the state it changed (its fingerprint against
        that state's, allowing the change ``lever`` is meant to make: engine/optimizer/
        fingerprint.py); journaled. Returns '' when credited or not checkable, else why not
        (the caller rolls the trial back as "workload changed: …")."""
        if before is None or after is None:
            self.journal.append(
                {"type": "identity", "id": iid, "credited": None, "reason": NOT_CHECKED}
            )
            return ""
        allowed = trial_allowance(lever)
        if allowed.spec.operators and allowed.spec.shapes == "same":
            before, after = _common_ops(before, after)
        credit = credit_trial(before, after, allowed)
        gone = work_skipped(before, after, allowed)
        if credit.credited and gone:
            credit = dataclasses.replace(
                credit,
                credited=False,
                reason=f"not the baseline's workload ({clean(lever, 40)} allows {allowed.what}): "
                + gone,
            )
        self.journal.append(
            {
                "type": "identity",
                "id": iid,
                "credited": credit.credited,
                "reason": credit.reason,
                "distance": finite_or_none(credit.distance.value),
                "threshold": credit.distance.threshold,
                "allowed": credit.allowed.what,
            }
        )
        return "" if credit.credited else credit.reason

    def noise_text(self) -> str:
        """One line: the A/A and the plan it led to."""
        assert self.noise is not None and self.noise.plan is not None
        p = self.noise.plan
        if not p.triable:
            return f"A/A {p.aa.text()}; no lever can be measured in the time left"
        return (
            f"A/A {p.aa.text()}; each lever gets {p.pairs} interleaved pair"
            f"{'s' if p.pairs != 1 else ''} (resolution ±{p.half:.1%})"
        )

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

    def _tried(self) -> set[str]:
        """The levers of the interventions past PROPOSED: tried (or being tried), not again."""
        return {iv.lever_id for iv in self.interventions.values() if iv.state != State.PROPOSED}

    def _keep_baseline(self, a: LoopAnalysis) -> None:
        """The first analysis is the baseline's: its invariants and hypotheses go in the
        report."""
        if not self.baseline_invariants:
            self.baseline_invariants = a.invariants
            self.baseline_hypotheses = a.hypotheses

    def _verdict(
        self, ok: bool, why: str, c: Comparison | None, failed: str = "correctness check failed"
    ) -> tuple[State, str]:
        """The gate: a failed check (or run) rolls back; otherwise the pairs' interval must
        clear the threshold (engine.measure.verdict)."""
        if not ok:
            return State.ROLLED_BACK, f"{failed}: {why}"
        assert c is not None
        v = verdict(c)
        return (State.VERIFIED if v.keep else State.ROLLED_BACK), v.note

    def _verified(self, iid: str) -> Intervention:
        """The intervention an operator rolls back, which must be VERIFIED."""
        iv = self.interventions[iid]
        if iv.state != State.VERIFIED:
            raise ValueError(
                f"{iid} is {iv.state.value}; only a VERIFIED intervention can be rolled back"
            )
        return iv

    # ------------------------------------------------------------------ gains
    def _combined(self, which: int) -> float:
        """The kept trials' gains combined as independent savings (point, lower or upper)."""
        keep = 1.0
        for k in self.kept:
            c = self.comparisons.get(k)
            if c is None or not c.valid:
                continue
            g = (c.gain, *c.interval)[which]
            keep *= (1 - g) if self.goal == "min" else (1 + g)
        return (1 - keep) if self.goal == "min" else (keep - 1)

    def gain(self) -> float:
        """The kept levers' measured gain so far (each trial's paired estimate, combined)."""
        return self._combined(0)

    def confirmed_gain(self) -> float:
        """The same from each kept trial's interval's lower end: what is shown beyond doubt."""
        return self._combined(1)

    def current_value(self) -> float:
        """The baseline moved by the kept gain (what the dashboard's bar shows)."""
        g = self.gain()
        return self.baseline_ns * ((1 - g) if self.goal == "min" else (1 + g))

    # ------------------------------------------------------------------ the final word
    def final_comparison(self) -> tuple[Comparison | None, str]:
        """Baseline against the kept configuration, interleaved (None when nothing was kept:
        the final configuration is the baseline). Loops override ``block`` only."""
        if not self.kept:
            return None, ""
        run = self.paired(self.base_state(), self.state, time_left=self.budget_left)
        first = run.comparison
        want = pairs_to_decide(first, self.target) if run.failed is None else first.n
        if want > first.n and self.budget_left() > 0:
            # the interval straddles the target: the time left buys the pairs that decide it
            self.say(
                f"final re-measure {first.text()} straddles the {self.target:.0%} target: "
                f"measuring up to {want - first.n} more pairs"
            )
            more = self.paired(
                self.base_state(), self.state, want - first.n, self.budget_left, start=first.n
            )
            run = run.joined(more)
            self.final_extended = (first.n, run.comparison.n)
            self.journal.append(
                {
                    "type": "final_extended",
                    "from_pairs": first.n,
                    "to_pairs": run.comparison.n,
                    "first": first.to_json(),
                    "why": f"the first {first.n} pairs' interval straddled the target",
                }
            )
        if run.failed is not None:
            return run.comparison if run.comparison.n >= 2 else None, (
                f"final re-measure cut short ({run.failed.reason})"
            )
        if run.comparison.n < 2:
            return None, "final re-measure not done (the budget ended)"
        return run.comparison, ""

    def base_state(self) -> Any:
        """The configuration the run started from."""
        raise NotImplementedError

    def _result(self, final: Comparison | None, target: float, note: str = "") -> dict[str, Any]:
        """The fields every run's result has, and its one verdict (``headline``) that the
        summary line, the JSON event, the dashboard and report.md all carry.

        With nothing kept the final configuration is the baseline: no gain is claimed.
        Otherwise the gain is the final paired re-measure's, with its interval: the target is
        met only when the interval's lower end reaches it."""
        assert self.noise is not None
        p = self.noise.plan
        kept = [self.interventions[k].lever_id for k in self.kept]
        if final is not None and final.valid:
            gain, (lo, hi) = final.gain, final.interval
            base_v, final_v = final.a_mean, final.b_mean
        elif kept:  # the final re-measure did not complete: the trials' combined estimate
            gain, lo, hi = self.gain(), self.confirmed_gain(), self._combined(2)
            base_v, final_v = self.baseline_ns, self.current_value()
        else:  # the final configuration is the baseline: no gain, and no interval to give
            gain, lo, hi = 0.0, math.nan, math.nan
            base_v = final_v = self.baseline_ns
        if p is not None and not p.measurable and not kept:
            verdict_ = "not measurable"
        elif not kept:
            verdict_ = "nothing kept"
        elif lo >= target:
            verdict_ = "met"
        elif hi < target:
            verdict_ = "not met"
        else:
            verdict_ = "not confirmed"
        out = {
            "baseline_ns_per_sample": base_v,
            "final_ns_per_sample": final_v,
            "gain": gain,
            "gain_low": lo,
            "gain_high": hi,
            "gain_pairs": final.n if final is not None else 0,
            "level": params().level,
            "target": target,
            "target_met": verdict_ == "met",
            "verdict": verdict_,
            "noise_floor": self.noise.floor,
            "aa_delta": self.noise.aa_delta,
            "noise": p.to_json() if p is not None else {},
            "pairs_per_lever": self.pairs,
            "kept": kept,
            "measurements": self.measurements,
            "not_applicable": dict(self.not_applicable),
            "method": (
                "interleaved pairs (A B, B A, …) of the configuration before and after; "
                "warm-up detected (MSER) and left out; gain = mean log-ratio with a Student-t "
                f"{params().level:.0%} interval; kept only when its lower end clears "
                f"{params().min_gain:.0%}"
            ),
        }
        if self.settling is not None:  # a relaunched program: its warm-up across launches
            out["warm_up"] = self.settling.to_json()
        if final is not None and final.valid:
            out["final"] = final.to_json()
            if self.final_extended is not None:
                out["final_extended_from"] = self.final_extended[0]
        if note:
            out["note"] = note
        elif not kept:
            out["note"] = "nothing kept: the final configuration is the baseline"
        out["headline"] = self.headline(out)
        return out

    def headline(self, res: dict[str, Any]) -> str:
        """The run's verdict in one line (the summary, the JSON event and the report share it)."""
        t = f"target {res['target']:.0%}"
        v = res["verdict"]
        tried = [iv for iv in self.interventions.values() if iv.state == State.ROLLED_BACK]
        verdicts = "; ".join(f"{iv.lever_id}: {_short(iv.note)}" for iv in tried[:4])
        if v == "out of reach" and self.gate is not None:
            why = self.gate.reach_short
            if " > " in why:  # "target 90% > the levers' combined ceiling …: out of reach"
                why = "above " + why.split(" > ", 1)[1].removesuffix(": out of reach")
            return f"{t} out of reach: {why} — diagnosed in the profile phase, no lever tried"
        if v == "not measurable":
            diag = (res.get("noise") or {}).get("diagnosis") or "the machine is too noisy"
            return (
                f"{t} not measurable here: {diag.split(' here: ', 1)[-1]}"
                + (f" (tried anyway, for a large effect: {verdicts})" if verdicts else "")
                + (
                    " — diagnosed in the profile phase, no lever tried"
                    if res.get("diagnosed")
                    else ""
                )
            )
        if v == "nothing kept":
            return f"{t} NOT met: nothing kept, the final configuration is the baseline" + (
                f" ({verdicts})" if verdicts else " (no lever was tried)"
            )
        b, f = res["baseline_ns_per_sample"], res["final_ns_per_sample"]
        gain = f"{res['gain']:+.1%} [{res['gain_low']:+.1%} … {res['gain_high']:+.1%}]" + (
            f" ({res['level']:.0%}, {res['gain_pairs']} pairs)" if res.get("gain_pairs") else ""
        )
        if self.scale == 1.0:
            what = f"on the metric ({b:.4g} → {f:.4g})"
        else:
            what = f"{b / self.scale:.4g} → {f / self.scale:.4g} {self.unit}"
        word = {"met": "met", "not met": "NOT met", "not confirmed": "not confirmed"}[v]
        tail = ""
        if v == "not confirmed":
            tail = f"; the interval reaches below {res['target']:.0%}"
        return f"{t} {word}: {gain}, {what}, kept {', '.join(res['kept'])}{tail}"

    def measured_only_diagnostic(self, target: float, gain: float, note: str) -> dict[str, Any]:
        """Why the target was missed, for a loop with no trace to attribute (a command, a live
        or launched PyTorch program): what was tried, what waits for a person, what does not
        apply."""
        return {
            "short_by": _short_by(self, target, gain),
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


def trial_allowance(lever: str) -> AllowedChange:
    """What a trial of ``lever`` may change in the fingerprint: the manifest's allowance
    (engine.optimizer.fingerprint.allowed_change_for), and — for a lever allowed to change the
    kernels of some classes or the host operators — the dtype mix too: it counts kernels (CPU:
    operator inputs) per arithmetic type over everything, what the lever may fuse, replace or
    move to another process included, so fusing elementwise kernels moves it (0.11-0.20 on the
    simulated workloads, past the 0.1 a trial may move a part) and loader workers taking the
    collate ops out of the traced process move it 0.17, with no change of arithmetic type at
    all. A changed type elsewhere still shows in the kernel mix of the classes the lever may not
    change, and in the recorded input types of the operators both sides run (``_common_ops``)."""
    a = allowed_change_for(lever)
    if (a.spec.classes or a.spec.operators) and not a.spec.dtypes:
        spec = a.spec.model_copy(
            update={"dtypes": True, "what": f"{a.spec.what} (and so the dtype mix's counts)"}
        )
        return AllowedChange(a.lever, spec)
    return a


def _common_ops(a: Fingerprint, b: Fingerprint) -> tuple[Fingerprint, Fingerprint]:
    """Both fingerprints with their recorded shapes limited to the operators both run: a lever
    allowed to change the host operators (move them to worker processes, fuse them) takes their
    shapes along, while the shapes of every operator that stays must hold (a changed batch
    still shows there)."""
    both = {r.op for r in a.shapes} & {r.op for r in b.shapes}
    return (
        dataclasses.replace(a, shapes=tuple(r for r in a.shapes if r.op in both)),
        dataclasses.replace(b, shapes=tuple(r for r in b.shapes if r.op in both)),
    )


def work_skipped(before: Fingerprint, after: Fingerprint, allowed: AllowedChange) -> str:
    """What the baseline runs every step that the trial does not run at all, outside what the
    lever may change ('' when nothing): a kernel (or, on the CPU, an operator) gone from every
    step is work the trial skipped, however small its share — the fingerprint's distance weighs
    it by its share of the calls (two reductions of fifty kernels a step move it 0.04, under the
    threshold), which is right for how *similar* two programs are, not for whether a trial ran
    the whole step."""
    free = set(allowed.spec.classes)
    kb = {r.name for r in after.kernels if r.per_step > 0}
    gone = [
        r.name
        for r in before.kernels
        if r.per_step >= 1 and r.klass not in free and r.name not in kb
    ]
    if not allowed.spec.operators and after.operators:
        ob = {r.name for r in after.operators if r.per_step > 0}
        gone += [r.name for r in before.operators if r.per_step >= 1 and r.name not in ob]
    if not gone:
        return ""
    names = ", ".join(clean(g, 80) for g in gone[:3]) + (
        f" and {len(gone) - 3} more" if len(gone) > 3 else ""
    )
    return f"work skipped: {names} ran every step of the baseline and not once in the trial"


def unchecked_invariants(why: str) -> list[InvariantResult]:
    """Every invariant, not checkable for ``why`` (a loop with no device trace to check)."""
    return [InvariantResult(name, False, 0, why) for name in INVARIANTS]


def _short_by(opt: LoopRun, target: float, gain: float) -> float | None:
    """How far the kept gain is from the target; None when nothing was kept (a shortfall
    computed from noise would be arithmetic on noise)."""
    return target - gain if opt.kept else None


def _short(note: str) -> str:
    """A lever's verdict in a few words ("slower", "cannot tell", "correctness check failed"),
    without its figures: a run that kept nothing prints no gain."""
    return note.partition(":")[0][:60]


class Optimizer(LoopRun):
    """One optimize run over a simulated workload (the engine drives it)."""

    state: SimState
    current: list[Measurement]
    analysis: SimAnalysis | None
    model: EesmModel

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
        self._obs: tuple[Measurement, Observation] | None = None
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

    def block(self, config: SimState) -> Block:
        m = self.wl.measure(config, seed=self._next_seed())
        return Block(m.mean_ns, True, "", m)

    def base_state(self) -> SimState:
        return self.wl.base

    def profile(self) -> NoiseFloor:
        """The interleaved A/A of the unchanged workload: the noise gate and the baseline."""
        return self._set_noise_floor(self._aa())

    # ------------------------------------------------------------------ attribute
    def observation(self, m: Measurement) -> Observation:
        """The replay graph of a measurement and its no-lever schedule (built once per
        measurement: the gate and the attribute phase read the same)."""
        if self._obs is not None and self._obs[0] is m:
            return self._obs[1]
        dec = m.decoded(self.model)
        dag = build_dag(m.trace, self.hw, m.iterations, regimes=dec.labels, window=m.window)
        obs = Observation(dag, schedule(dag), m.telemetry, self.hw, m.samples_per_iteration)
        self._obs = (m, obs)
        return obs

    def reach(self) -> Reach:
        """Each lever that applies to the current state, bounded on the baseline's replay
        graph (engine.optimizer.gate.replay_reach)."""
        m = self.current[0]
        sites = {lv.id: lv.sites(self.state) for lv in LEVERS}
        return replay_reach(
            self.observation(m),
            [lv for lv in LEVERS if sites[lv.id].ok],
            {k: a.reason for k, a in sites.items() if not a.ok},
            f"the baseline's replay graph: {m.iterations} steps of the simulated trace",
        )

    def analyse(self, m: Measurement | None = None) -> SimAnalysis:
        """Decode, predict, check invariants, build the replay graph, attribute."""
        m = m or self.current[0]
        dec = m.decoded(self.model)
        obs = self.observation(m)
        dag, base = obs.dag, obs.baseline
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
        a = SimAnalysis(
            invariants=inv,
            hypotheses=hyp,
            measurement=m,
            observation=obs,
            regime_shares=dec.regime_shares(),
            predicted_step_ns=graph.step_ns,
        )
        self.analysis = a
        self._keep_baseline(a)
        return a

    # ------------------------------------------------------------------ rank
    def rank(self, a: SimAnalysis | None = None) -> list[Candidate]:
        """Every lever not yet tried, with its replayed gain and support; best first."""
        a = a or self.analysis
        assert a is not None
        tried = self._tried()
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
    def trial(self, iid: str) -> Intervention:
        """Apply an APPROVED intervention, measure it, and keep it or roll it back."""
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
        run = self.paired(before, after)
        c = run.comparison
        ms = [b.raw for b in run.b_blocks]
        new_ns, cur_ns = c.b_mean, c.a_mean
        gain = c.gain
        self.comparisons[iid] = c
        iv.measured_gain, iv.measured_ns, iv.predicted_ns = gain, new_ns, pred_ns
        self.journal.transition(
            iid,
            State.APPLIED,
            measured_ns=finite_or_none(new_ns),
            baseline_ns=finite_or_none(cur_ns),
            gain=finite_or_none(gain),
            pairs=c.to_json(),
        )
        iv.state = State.APPLIED
        if pred_ns is not None and a is not None and math.isfinite(gain):
            base_pred = a.observation.per_sample_ns(a.observation.baseline)
            # replay error: predicted vs measured *change*, both relative to this state's time
            self.replay_errors.append((iv.lever_id, 1 - pred_ns / base_pred, gain))
        # the trial is credited only for the workload the state before it ran (its lever's
        # own change allowed): the first block of each arm, fingerprinted
        pair = (run.a_blocks[0].raw, run.b_blocks[0].raw) if run.a_blocks and run.b_blocks else None
        fps = [fingerprint_of_trace(m.trace) for m in pair] if pair else [None, None]
        changed = self._identity(iid, fps[0], fps[1], iv.lever_id)
        ok, why = self.wl.correctness(after)
        if changed:
            verdict, note = State.ROLLED_BACK, f"workload changed: {changed}"
        else:
            verdict, note = self._verdict(ok, why, c)
        if verdict == State.ROLLED_BACK:
            self._save_state("state.json", before)
            self.state = before
        self.journal.transition(iid, verdict, reason=note)
        iv.state, iv.note = verdict, note
        if verdict == State.VERIFIED:
            self.kept.append(iid)
            if pair is not None:
                self.trial_traces[iid] = (pair[0].trace, pair[1].trace)
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

    # ------------------------------------------------------------------ report
    def finish(self, target: float) -> dict[str, Any]:
        """Re-measure the kept levers together against the baseline, interleaved; return the
        result summary."""
        final, note = self.final_comparison()
        result = self._result(final, target, note)
        if not result["target_met"]:
            result["diagnostic"] = self.diagnostic(target, result["gain"])
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
            "short_by": _short_by(self, target, gain),
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
