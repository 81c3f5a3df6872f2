"""The optimize loop for ``--workload command``: the same phases, journal, approvals and gate
as the simulated workloads, for a black-box process whose levers are declared choices.

What differs, and is said so in the report: there is no device trace, so no regimes, no
invariants and no causal attribution; each candidate (one lever set to one of its values) has
no replayed prediction, so candidates are tried in declaration order (coordinate search: each
lever's values in turn, keeping the best that beats the noise floor).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.optimizer.attribution import RankedHypotheses
from engine.optimizer.loop import Intervention, LoopRun, NoiseFloor
from engine.optimizer.monitor import InvariantResult
from engine.store.journal import State
from engine.workloads.command import (
    CommandError,
    CommandMeasurement,
    CommandState,
    CommandWorkload,
)

NO_TRACE = "a command workload has no device trace"


@dataclass
class CommandAnalysis:
    """What the attribute phase can say about a black box: nothing device-side."""

    invariants: list[InvariantResult]
    hypotheses: RankedHypotheses


@dataclass
class CommandCandidate:
    lever: str
    value: str

    @property
    def key(self) -> str:
        return f"{self.lever}={self.value}"


class CommandOptimizer(LoopRun):
    """``engine.optimizer.loop.Optimizer``'s steps for a real process."""

    means_key = "means"  # of the program's metric, whatever its unit
    traced = False
    scale = 1.0
    state: CommandState
    current: list[CommandMeasurement]
    analysis: CommandAnalysis | None

    def __init__(self, workload: CommandWorkload, run_dir: Path, repeats: int = 4) -> None:
        self.wl = workload
        self.analysis = None
        self._cands: dict[str, CommandCandidate] = {}
        self.unit = f"(metric, goal {workload.spec.goal})"
        super().__init__(run_dir, repeats, workload.base)

    # ------------------------------------------------------------------ measuring
    def _gain(self, base: float, new: float) -> float:
        if self.wl.spec.goal == "min":
            return 1 - new / base
        return new / base - 1

    def measure(self, state: CommandState) -> list[CommandMeasurement]:
        out = [self.wl.measure(state, 1) for _ in range(self.repeats)]
        self.measurements += len(out)
        return out

    def profile(self) -> NoiseFloor:
        ms = self.measure(self.state)
        bad = [r for m in ms for r in m.runs if not r.ok]
        if bad:
            tail = (bad[0].output_tail.strip().splitlines() or [""])[-1][:160]
            raise CommandError(
                f"the program's baseline run failed: {bad[0].reason}"
                + (f" (last output line: {tail})" if tail else "")
            )
        return self._set_noise_floor(ms)

    def analyse(self, m: Any = None) -> CommandAnalysis:
        inv = [
            InvariantResult(name, False, 0, NO_TRACE)
            for name in ("kernel_time", "memory_traffic", "concurrency")
        ]
        a = CommandAnalysis(inv, RankedHypotheses([], 0))
        self.analysis = a
        if not self.baseline_invariants:
            self.baseline_invariants = inv
            self.baseline_hypotheses = a.hypotheses
        return a

    # ------------------------------------------------------------------ rank
    def rank(self, a: Any = None) -> list[CommandCandidate]:
        tried = {iv.lever_id for iv in self.interventions.values() if iv.state != State.PROPOSED}
        out = []
        for lv in self.wl.spec.levers:
            for v in lv.values:
                c = CommandCandidate(lv.name, v)
                # the baseline value was measured by the profile phase; the current one is on
                if v not in (self.state.get(lv.name), lv.values[0]) and c.key not in tried:
                    out.append(c)
        return out

    def propose(self, cands: list[CommandCandidate]) -> list[Intervention]:
        by_lever = {iv.lever_id: iv for iv in self.interventions.values()}
        out = []
        for c in cands:
            iv = by_lever.get(c.key)
            if iv is None:
                iid = f"I{len(self.interventions) + 1}"
                what = self.what_of(c)
                iv = Intervention(
                    iid,
                    c.key,
                    f"{c.lever} = {c.value}",
                    self.safety_of(c),
                    math.nan,  # no replay for a black box: measured only
                    0.0,
                    [self.evidence_of(c)],
                    what,
                )
                self.interventions[iid] = iv
                self._cands[iid] = c
                self.journal.transition(
                    iid,
                    State.PROPOSED,
                    lever=c.key,
                    predicted_gain=None,
                    confidence=None,
                    safety=iv.safety,
                    evidence=iv.evidence,
                    replay=what,
                )
            out.append(iv)
        return out

    def safety_of(self, c: CommandCandidate) -> str:
        """A declared choice changes nothing but what the user declared: SAFE."""
        return "SAFE"

    def evidence_of(self, c: CommandCandidate) -> str:
        return "user-declared lever (no device trace to attribute)"

    def what_of(self, c: CommandCandidate) -> str:
        return f"set {c.lever} to {c.value} (no replay for a black-box process: measured only)"

    # ------------------------------------------------------------------ apply
    def trial(self, iid: str, hold_s: float = 0.0) -> Intervention:
        import time

        iv, c = self.interventions[iid], self._cands[iid]
        before, after = self.state, self.state.with_choice(c.lever, c.value)
        bfile, afile = f"states/{iid}_before.json", f"states/{iid}_after.json"
        self._save_state(bfile, before)
        self._save_state(afile, after)
        self.journal.transition(iid, State.APPLYING, state_before=bfile, state_after=afile)
        iv.state = State.APPLYING
        self._save_state("state.json", after)
        self.state = after
        if hold_s:
            time.sleep(hold_s)
        ms = self.measure(after)
        failed = [r for m in ms for r in m.runs if not r.ok]
        new_ns = self.mean_ns(ms) if not failed else math.nan
        gain = self._gain(self.mean_ns(self.current), new_ns) if not failed else None
        iv.measured_gain, iv.measured_ns = gain, new_ns
        self.journal.transition(iid, State.APPLIED, measured=new_ns, gain=gain)
        iv.state = State.APPLIED
        verdict, note = self._verdict(not failed, failed[0].reason if failed else "", gain)
        if verdict == State.ROLLED_BACK:
            self._save_state("state.json", before)
            self.state = before
        else:
            self.current = ms
        self.journal.transition(iid, verdict, reason=note)
        iv.state, iv.note = verdict, note
        if verdict == State.VERIFIED:
            # a kept value replaces this lever's earlier kept value: that one is undone
            for k in list(self.kept):
                if self._cands[k].lever == c.lever:
                    self.kept.remove(k)
                    why = f"superseded by {iid} ({c.key}, {gain:+.1%} better)"
                    self.journal.transition(k, State.ROLLED_BACK, reason=why)
                    self.interventions[k].state, self.interventions[k].note = State.ROLLED_BACK, why
            self.kept.append(iid)
        return iv

    def rollback(self, iid: str, by: str) -> Intervention:
        iv = self._verified(iid)
        c = self._cands[iid]
        self.journal.transition(iid, State.ROLLED_BACK, reason=f"rolled back by {by}")
        self.state = self.state.with_choice(c.lever, self.wl.base.get(c.lever))
        self._save_state("state.json", self.state)
        if iid in self.kept:
            self.kept.remove(iid)
        iv.state, iv.note = State.ROLLED_BACK, f"rolled back by {by}"
        self.current = self.measure(self.state)
        return iv

    def gain(self) -> float:
        return self._gain(self.baseline_ns, self.mean_ns(self.current))

    def finish(self, target: float) -> dict[str, Any]:
        final = self.measure(self.state)
        ok = all(m.ok for m in final)
        note = ""
        if not ok and self.current and all(m.ok for m in self.current):
            # the budget ended (or the run was stopped) before the final re-measure: the last
            # measurement of this same configuration stands in, and the report says so
            why = next((r.reason for m in final for r in m.runs if not r.ok), "")
            note = (
                f"final re-measure not done ({why}); the last measurement of the final "
                "configuration is used"
            )
            final, ok = self.current, True
        final_v = self.mean_ns(final) if ok else math.nan
        gain = self._gain(self.baseline_ns, final_v) if ok else 0.0
        res = self._result(final_v, gain, target)
        if note:
            res["note"] = note
        res["metric"] = {"pattern": self.wl.spec.metric, "goal": self.wl.spec.goal}
        res["final_choice"] = dict(self.state.choice)
        if not res["target_met"]:
            res["diagnostic"] = self.measured_only_diagnostic(
                target, gain, "no device trace: the declared levers are all the loop can try"
            )
        return res
