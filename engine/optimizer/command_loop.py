"""The optimize loop for ``--workload command``: the same phases, journal, approvals and gate
as the simulated workloads, for a black-box process whose levers are declared choices.

What differs, and is said so in the report: there is no device trace, so no regimes, no
invariants and no causal attribution; each candidate (one lever set to one of its values) has
no replayed prediction, so candidates are tried in declaration order (coordinate search: each
lever's values in turn, keeping the best whose interval clears the threshold). Measured as
every loop is (engine.measure): one untimed run first, then runs of the current and
the candidate configuration interleaved in pairs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.measure import (
    Block,
    Comparison,
    LaunchSeries,
    PairedRun,
    Settling,
    finite_or_none,
    params,
)
from engine.optimizer.attribution import RankedHypotheses
from engine.optimizer.gate import LeverCeiling, Reach
from engine.optimizer.loop import (
    Intervention,
    LoopAnalysis,
    LoopRun,
    NoiseFloor,
    unchecked_invariants,
)
from engine.store.journal import State
from engine.workloads.command import (
    CommandError,
    CommandMeasurement,
    CommandRun,
    CommandState,
    CommandWorkload,
)

NO_TRACE = "a command workload has no device trace"


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
    #: what the attribute phase can say about a black box: nothing device-side
    analysis: LoopAnalysis | None

    def __init__(self, workload: CommandWorkload, run_dir: Path, repeats: int = 4) -> None:
        self.wl = workload
        self.analysis = None
        self._cands: dict[str, CommandCandidate] = {}
        self.unit = f"(metric, goal {workload.spec.goal})"
        self.goal = workload.spec.goal
        workload.log_dir = run_dir  # each run's output: logs/run-NNNN.log in the run folder
        super().__init__(run_dir, repeats, workload.base)

    # ------------------------------------------------------------------ measuring
    def block(self, config: CommandState) -> Block:
        """One run of the program under ``config``."""
        r = self.wl.run_once(config)
        v = r.value if r.value is not None and r.ok else float("nan")
        why = f"{r.reason} (its output: {r.log})" if not r.ok and r.log else r.reason
        return Block(v, r.ok, why, CommandMeasurement([r]))

    def base_state(self) -> CommandState:
        return self.wl.base

    def _aa(self) -> PairedRun:
        """The warm-up across launches and the A/A in one series of baseline launches
        (engine.measure.LaunchSeries): launched until steady by MSER, then 4 pairs more that
        test it; the A/A pairs every launch after the warm-up. Capped in launches and in time
        (manifests/measurement.json), never under the 4 launches of 2 pairs: a series that
        ends unsettled pairs its last launches, and says which it was (``settling``)."""
        p = params()
        series = LaunchSeries()
        blocks: list[Block] = []
        walls: list[float] = []
        t0 = time.monotonic()
        cap_s = p.launch_warmup_max_share * max(0.0, self.budget_left())
        why = ""
        while True:
            t = time.monotonic()
            blk = self.block(self.state)
            walls.append(time.monotonic() - t)
            self.measurements += 1
            if not blk.ok and _budget_ended(blk.reason):
                # the budget, not the program: the launches so far are what the gate judges
                # (too few for an A/A is a diagnosis: noise unknown, never "the baseline failed")
                why = "the budget"
                break
            if not blk.ok or not (math.isfinite(blk.value) and blk.value > 0):
                r = blk.raw.runs[0] if blk.raw else CommandRun(None, 0, False, blk.reason)
                if blk.ok:  # a value the pairs cannot take (zero, negative)
                    r = CommandRun(None, 0, False, f"measured {blk.value!r}, not a positive number")
                self._baseline_failed(r)
            blocks.append(blk)
            if series.add(blk.value):
                break
            n = len(blocks)
            if n >= p.launch_warmup_max_launches:
                why = f"the cap of {p.launch_warmup_max_launches} launches"
                break
            if n >= series.FIRST and time.monotonic() - t0 >= cap_s:
                why = f"the cap of {p.launch_warmup_max_share:.0%} of the budget"
                break
            if n >= series.FIRST and self.budget_left() <= 0:
                why = "the budget"
                break
        first, end = series.aa()
        settled: bool | None = series.done
        if not series.done and len(blocks) - series.start < 2 * p.aa_pairs:
            settled = None  # too few launches after the warm-up to judge a trend
        self.settling = Settling(
            tuple(b.value for b in blocks),
            series.start,
            settled,
            time.monotonic() - t0,
            self.goal,
            why,
        )
        # pair i in interleave's order (A B, B A, …): engine.measure.in_time_order reads it so
        a = [blocks[j + (i % 2)] for i, j in enumerate(range(first, end - 1, 2))]
        b = [blocks[j + 1 - (i % 2)] for i, j in enumerate(range(first, end - 1, 2))]
        if not a:  # one launch fit: no pair (the noise is unknown), its value the baseline's
            a = blocks[-1:]
        took = walls[first:end] or walls[: len(blocks)] or walls  # (none finished: its wall)
        self._pair_s = 2 * float(np.mean(took)) if took else 0.0
        self.journal.append({"type": "warm_up", "what": self.settling.text(),
                             **self.settling.to_json()})  # fmt: skip
        self.say(self.settling.text())
        return PairedRun(
            Comparison(tuple(x.value for x in a), tuple(x.value for x in b), self.goal, p.level),
            a,
            b,
        )

    def _baseline_failed(self, r: CommandRun) -> None:
        tail = (r.output_tail.strip().splitlines() or [""])[-1][:160]
        raise CommandError(
            f"the program's baseline run failed: {r.reason}"
            + (f" (last output line: {tail})" if tail else "")
        )

    def measure(self, state: CommandState) -> list[CommandMeasurement]:
        out = [self.wl.measure(state, 1) for _ in range(self.repeats)]
        self.measurements += len(out)
        return out

    def profile(self) -> NoiseFloor:
        run = self._aa()
        if run.failed is not None:
            blk = run.failed
            self._baseline_failed(
                blk.raw.runs[0] if blk.raw else CommandRun(None, 0, False, blk.reason)
            )
        return self._set_noise_floor(run)

    #: why the invariants cannot be checked (the report says it; a subclass says its own)
    no_trace = NO_TRACE

    def analyse(self, m: Any = None) -> LoopAnalysis:
        a = LoopAnalysis(unchecked_invariants(self.no_trace), RankedHypotheses([], 0))
        self.analysis = a
        self._keep_baseline(a)
        return a

    def reach(self) -> Reach:
        """A black box's declared choices have no ceiling: reachability cannot be judged (the
        gate commits on the noise alone, and says so)."""
        cands = self.rank()
        return Reach(
            tuple(LeverCeiling(c.key, None, basis="measured only") for c in cands),
            unknown=f"{self.no_trace}: no lever's gain can be bounded before it is measured",
            not_applicable=dict(self.not_applicable),
        )

    # ------------------------------------------------------------------ rank
    def rank(self, a: Any = None) -> list[CommandCandidate]:
        tried = self._tried()
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
    def trial(self, iid: str) -> Intervention:
        iv, cand = self.interventions[iid], self._cands[iid]
        before, after = self.state, self.state.with_choice(cand.lever, cand.value)
        bfile, afile = f"states/{iid}_before.json", f"states/{iid}_after.json"
        self._save_state(bfile, before)
        self._save_state(afile, after)
        self.journal.transition(iid, State.APPLYING, state_before=bfile, state_after=afile)
        iv.state = State.APPLYING
        self._save_state("state.json", after)
        self.state = after
        run = self.paired(before, after)
        c = run.comparison
        self.comparisons[iid] = c
        ms = [b.raw for b in run.b_blocks]
        bad = run.failed
        gain = c.gain if bad is None else None
        iv.measured_gain, iv.measured_ns = gain, c.b_mean
        self.journal.transition(
            iid, State.APPLIED, measured=finite_or_none(c.b_mean), gain=gain, pairs=c.to_json()
        )
        iv.state = State.APPLIED
        why = ""
        if bad is not None:
            why = (
                bad.reason
                if run.failed_arm == "B"
                else f"the current configuration's own run failed during the trial: {bad.reason}"
            )
        self._identity(iid, None, None, cand.key)  # no trace of either arm: said, not guessed
        kind, _, rest = why.partition(": ")
        if kind == "correctness check failed":
            verdict, note = self._verdict(False, rest, c)
        else:
            verdict, note = self._verdict(bad is None, why, c, "the run failed")
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
                if self._cands[k].lever == cand.lever:
                    self.kept.remove(k)
                    why = f"superseded by {iid} ({cand.key}, {c.gain:+.1%} better)"
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

    def finish(self, target: float) -> dict[str, Any]:
        final, note = self.final_comparison()
        res = self._result(final, target, note)
        res["metric"] = {"pattern": self.wl.spec.metric, "goal": self.wl.spec.goal}
        res["final_choice"] = dict(self.state.choice)
        if not res["target_met"]:
            res["diagnostic"] = self.measured_only_diagnostic(
                target, res["gain"], "no device trace: the declared levers are all the loop can try"
            )
        return res


def _budget_ended(reason: str) -> bool:
    """Whether a run failed because the run's budget ended (it was stopped, or not started),
    not by the program's own doing (engine.workloads.command: ``_limit``, ``refusal``)."""
    return "the run's budget ended" in reason or "the run's budget had ended" in reason
