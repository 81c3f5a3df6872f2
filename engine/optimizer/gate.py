"""The qualification gate (issue 39; DESIGN §5, §7): in the Profile phase, before any lever is
tried, the loop either **commits** to the target — it can be measured here and the levers that
apply could reach it — or **diagnoses** why not, with the figures, and ends the run there
(``--force`` overrides; the report says so).

Two halves, each judged only where the evidence can:

* **noise** (engine.measure.plan, from the interleaved A/A): is the target resolvable with the
  pairs per lever the budget allows (the interval's half-width at most ``resolution`` × the
  target)? A plan that says no — the A/A spread too wide, or the budget too short — is
  "not measurable"; an A/A that did not complete leaves the noise unknown, and nothing can be
  judged then either.
* **reach**: can the applicable levers' ceilings add up to the target? Each lever's ceiling is
  the most it could take off the baseline step (``LeverCeiling``): for a replayed loop, the
  time its transform takes out of the baseline's own replay graph — host calls (and the host
  time between them that the transform drops) and device rows — at the favourable end of the
  stated range of every prior it scales by (its interval then runs from the other end). How
  they combine, and why:

  - the time the levers take out of one baseline step **adds**: removing X₁ and then X₂ of a
    step T leaves T − X₁ − X₂ — the measured gains of the two trials, each relative to the state
    it changed, compose multiplicatively to exactly (X₁ + X₂) / T;
  - overlapping causes cannot both be removed: everything host-side (launch calls, syncs,
    pageable copies, the framework time between launches) can shorten the step by no more than
    the time the busiest device stream sits idle (below that, the device itself is the step):
    the host parts of all the levers together are capped there — the whole trace's ceiling of
    removing all idle/launch overhead;
  - a lever that changes the work per step (the batch size) gains per sample, not by removing
    time: its replayed gain composes multiplicatively with the rest.

  A lever with no ceiling (a black-box command's declared choice, a torch lever with no trace
  to replay) cannot be judged: where the judged ceilings fall short of the target and such a
  lever remains, reachability is **unknown** and the gate commits, saying so.

The arithmetic is accounting on the observed trace, not a prediction: it bounds the replay
(engine.analyze.advice.ceilings does the same per lever for `gitm-tui analyze`; the layers keep this
module from importing it, and this one also caps across levers).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from engine.levers.base import Lever
from engine.levers.library import LEVERS
from engine.levers.model import Observation
from engine.levers.priors import LAUNCH_OUTLIER
from engine.measure import NoisePlan, params
from engine.schedule.critical import critical_path, headline
from engine.schedule.dag import NOP, ReplayDag, schedule
from engine.text import clean
from engine.trace.trace import ApiKind

__all__ = [
    "GateDecision",
    "LeverCeiling",
    "Reach",
    "combine",
    "qualify",
    "replay_reach",
]

Decision = Literal["commit", "diagnose"]


def _per_sample(lever_id: str) -> bool:
    """Whether a ceiling's lever works per sample (a larger batch), by what it declares."""
    return any(lv.per_sample for lv in LEVERS if lv.id == lever_id)


@dataclass(frozen=True)
class LeverCeiling:
    """The most one lever could gain on the baseline (shares of its step), and on what basis.

    ``high`` None: unknown (no trace to bound it). ``host``/``device``: the shares of the step
    its transform takes out of host calls and of device rows (a time-removing lever: ``high``
    is ``min(host, room) + device``); ``per_sample``: a lever that changes the work per step
    (its ``high`` is its replayed gain per sample, composed multiplicatively). ``low``: the
    ceiling at the unfavourable end of its priors' stated ranges (None: no prior)."""

    lever: str
    high: float | None
    low: float | None = None
    host: float = 0.0
    device: float = 0.0
    per_sample: bool = False
    #: the named priors it rests on, with their stated ranges ('' when none)
    prior: str = ""
    basis: str = ""

    def text(self, full: bool = False) -> str:
        """'cuda_graphs ≤ 4.0%', with the prior's interval where it rests on one ('tf32_matmul ≤
        6.8% (prior: 5.7 … 6.8%)'); ``full``: the priors' names and ranges too."""
        name = clean(self.lever, 60)
        if self.high is None:
            return f"{name}: no ceiling (unknown)"
        out = f"{name} ≤ {self.high:.1%}" + ("/sample" if self.per_sample else "")
        if self.prior and self.low is not None and f"{self.low:.1%}" == f"{self.high:.1%}":
            # the prior's two ends give one figure (the trace's cap binds both): no interval
            out += " (prior: both ends of its range give this"
            out += f"; {clean(self.prior, 200)})" if full else ")"
        elif self.prior and self.low is not None:
            out += f" (prior: {self.low:.1%} … {self.high:.1%}"
            out += f" over {clean(self.prior, 200)})" if full else ")"
        elif self.prior:
            out += f" (prior: {clean(self.prior, 200)})" if full else " (prior)"
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "lever": self.lever,
            "high": _finite(self.high),
            "low": _finite(self.low),
            "host": _finite(self.host),
            "device": _finite(self.device),
            "per_sample": self.per_sample,
            "prior": self.prior,
            "basis": self.basis,
        }


@dataclass(frozen=True)
class Reach:
    """What the reach half reads: the applicable levers' ceilings and the trace's cap."""

    ceilings: tuple[LeverCeiling, ...] = ()
    #: the share of the baseline step the busiest device stream idles: the most host-side
    #: changes together can take off it (None: unknown, no cap applied)
    room: float | None = None
    #: why no lever can be bounded at all ('' when some can)
    unknown: str = ""
    #: levers that do not apply here, and why (for the diagnosis)
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    #: what the ceilings were computed from, one line
    source: str = ""
    #: what bounds the baseline step: the headline of its replay's critical path
    #: (engine.schedule.critical; '' unknown) — the diagnosis says it first when the target
    #: is out of reach
    bound: str = ""


@dataclass(frozen=True)
class Combined:
    """The applicable levers' ceilings combined (``combine``)."""

    gain: float
    #: the host parts' sum when it exceeded ``room`` (the cap bit), else None
    capped_from: float | None
    room: float | None


def combine(ceilings: Iterable[LeverCeiling], room: float | None) -> Combined:
    """The judged ceilings together (module docstring): time removed adds, host parts capped at
    the device's idle ``room``, per-sample gains composed on top; at most 100 %."""
    host = dev = 0.0
    keep = 1.0
    for c in ceilings:
        if c.high is None:
            continue
        if c.per_sample:
            keep *= 1.0 - min(1.0, max(0.0, c.high))
        else:
            host += max(0.0, c.host)
            dev += max(0.0, c.device)
    capped = room is not None and host > room
    t = min(1.0, (min(host, room) if room is not None else host) + dev)
    return Combined(1.0 - (1.0 - t) * keep, host if capped else None, room)


@dataclass(frozen=True)
class GateDecision:
    """The gate's verdict, with the figures that say why (journaled, an event, the report's
    lead)."""

    decision: Decision
    target: float
    #: the target resolvable with the pairs the budget allows (None: the noise is unknown)
    measurable: bool | None
    #: the levers' ceilings can reach the target (None: cannot be judged)
    reachable: bool | None
    #: the judged ceilings combined (None: nothing judged)
    combined: float | None
    noise_line: str
    #: the reach half in full (every lever's ceiling, its priors, the cap) and in short
    reach_line: str
    reach_short: str
    #: the one line the optimize bar and headless narration print
    line: str
    #: what would make the target measurable or reachable (diagnose only)
    helps: tuple[str, ...] = ()
    ceilings: tuple[LeverCeiling, ...] = ()
    room: float | None = None
    #: the A/A's half-width with the pairs per lever (the noise floor), its pairs
    noise_floor: float | None = None
    forced: bool = False

    @property
    def diagnosed(self) -> bool:
        """The run ends with the diagnosis (diagnose, not overridden)."""
        return self.decision == "diagnose" and not self.forced

    @property
    def verdict(self) -> str:
        """The run's verdict when it ends here: 'not measurable' or 'out of reach'."""
        return "not measurable" if self.measurable is False else "out of reach"

    def why(self) -> str:
        """The reasons for a diagnosis (or the commitment), without the 'gate:' lead."""
        return self.line.split(" — ", 1)[-1]

    def forced_line(self) -> str:
        """What the report and the log say of an overridden diagnosis."""
        return f"the gate said diagnose ({self.why()}); overridden by --force"

    def to_json(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "forced": self.forced,
            "target": self.target,
            "measurable": self.measurable,
            "reachable": self.reachable,
            "combined_ceiling": _finite(self.combined),
            "noise_floor": _finite(self.noise_floor),
            "room": _finite(self.room),
            "noise": self.noise_line,
            "reach": self.reach_line,
            "reach_short": self.reach_short,
            "line": self.line,
            "helps": list(self.helps),
            "ceilings": [c.to_json() for c in self.ceilings],
        }


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# ------------------------------------------------------------------------------ the decision
def _noise(target: float, p: NoisePlan | None) -> tuple[bool | None, str, float | None]:
    """(measurable, its line, the noise floor) from the A/A's plan."""
    if p is None:
        return None, "noise unknown: no A/A was measured", None
    if p.unsettled:  # a trend across launches, or two modes: not noise, nothing to pair on
        return False, f"baseline: {p.unsettled}: not measurable", None
    aa = p.aa
    sd = aa.sd_log if aa.valid and aa.n >= 2 else math.nan
    if not math.isfinite(sd):
        return (
            False,
            "noise unknown: the A/A did not complete in the budget, so no lever's effect could "
            "be told from the machine's noise: not measurable",
            None,
        )
    res = params().resolution
    spread = f"A/A spread {sd:.1%} over {aa.n} pairs"
    if p.measurable:
        return (
            True,
            f"noise floor ±{p.half:.1%} with {p.pairs} pairs per lever ({spread}) ≤ "
            f"{res:.0%} of the {target:.0%} target: measurable",
            p.half,
        )
    if not math.isfinite(p.half) or p.pairs < 2:
        fits = "not even 2 pairs per lever fit in the time left"
        return (
            False,
            f"noise: {fits} ({spread}; one pair takes {p.pair_s:.3g} s): not measurable",
            None,
        )
    return (
        False,
        f"noise floor ±{p.half:.1%} with the {p.pairs} pairs per lever the budget allows "
        f"({spread}; the target needs {p.needed_pairs:,} pairs) > {res:.0%} of the "
        f"{target:.0%} target: not measurable",
        p.half,
    )


def _list(ceilings: Sequence[LeverCeiling], most: int, full: bool) -> str:
    judged = sorted((c for c in ceilings if c.high is not None), key=lambda c: -(c.high or 0.0))
    bits = [c.text(full) for c in judged[:most]]
    if len(judged) > most:
        bits.append(f"{len(judged) - most} more")
    return ", ".join(bits)


def _reach(target: float, r: Reach) -> tuple[bool | None, str, str, float | None]:
    """(reachable, its short line, its full line, the combined ceiling) from the levers'
    ceilings."""
    judged = [c for c in r.ceilings if c.high is not None]
    unknown = [c for c in r.ceilings if c.high is None]
    if r.unknown and not judged:
        line = f"reachability unknown: {r.unknown}"
        return None, line, line, None
    if not r.ceilings:
        line = f"no lever applies here: target {target:.0%} out of reach"
        return False, line, line, 0.0
    comb = combine(judged, r.room)
    cap = cap_full = ""
    if comb.capped_from is not None and comb.room is not None:
        cap = f"; host-side parts capped at the {comb.room:.1%} the device idles"
        cap_full = (
            f"; their host-side parts add to {comb.capped_from:.1%} (overlapping causes counted "
            f"once per lever), capped at the {comb.room:.1%} of the step the busiest device "
            "stream idles"
        )
    how = "the time each removes from one baseline step, added" + cap_full
    short, full = _list(judged, 3, False) + cap, _list(judged, 99, True) + "; " + how
    src = f" [{r.source}]" if r.source else ""
    if comb.gain >= target:
        head = f"target {target:.0%} ≤ the levers' combined ceiling {comb.gain:.1%}"
        return True, f"{head} ({short}): reachable", f"{head} ({full}){src}: reachable", comb.gain
    if unknown:
        names = ", ".join(clean(c.lever, 40) for c in unknown[:4])
        has = "has" if len(unknown) == 1 else "have"
        head = (
            f"reachability unknown: the judged ceilings combine to {comb.gain:.1%} < target "
            f"{target:.0%}, but {names} {has} no ceiling"
        )
        return None, f"{head} ({short})", f"{head} ({full}){src}", comb.gain
    head = f"target {target:.0%} > the levers' combined ceiling {comb.gain:.1%}"
    return (
        False,
        f"{head} ({short}): out of reach",
        f"{head} ({full}){src}: out of reach",
        comb.gain,
    )


def _helps(
    target: float,
    p: NoisePlan | None,
    measurable: bool | None,
    reachable: bool | None,
    combined: float | None,
    r: Reach,
) -> tuple[str, ...]:
    out: list[str] = []
    if measurable is False:
        if p is not None and "What would help: " in p.diagnosis:
            out.append(p.diagnosis.split("What would help: ", 1)[1])
        if p is not None and math.isfinite(p.half) and p.pairs >= 2:
            least = p.half / params().resolution
            if least < 1:
                out.append(
                    f"a target of {math.ceil(least * 100):.0f}% or more is measurable with the "
                    f"{p.pairs} pairs per lever that fit"
                )
    if reachable is False:
        if r.bound:
            out.append(f"first, what bounds the step: {r.bound}")
        if combined is not None and combined > 0:
            out.append(f"a target at or below {combined:.1%} (the levers' combined ceiling)")
        if not any(_per_sample(c.lever) for c in r.ceilings):
            out.append(
                "a larger batch per step where the program allows it (per-step overhead "
                "amortised over more samples)"
            )
        na = list(r.not_applicable.items())[:5]
        if na:
            out.append(
                "levers that do not apply here: "
                + "; ".join(f"{clean(k, 40)} ({clean(v, 80)})" for k, v in na)
            )
    return tuple(out)


def qualify(
    target: float, plan: NoisePlan | None, reach: Reach, forced: bool = False
) -> GateDecision:
    """Commit or diagnose (module docstring). ``forced``: the operator overrides a diagnosis
    (``--force``): the decision stays what the figures say, marked forced."""
    measurable, noise_line, floor = _noise(target, plan)
    reachable, reach_short, reach_line, comb = _reach(target, reach)
    diagnose = measurable is False or reachable is False
    if diagnose:
        why = "; ".join(
            ln
            for ln, bad in ((noise_line, measurable is False), (reach_short, reachable is False))
            if bad
        )
    elif reachable is None:
        why = f"{reach_short}: committing on the noise alone ({noise_line})"
    else:
        why = f"{reach_short}; {noise_line}"
    decision: Decision = "diagnose" if diagnose else "commit"
    return GateDecision(
        decision=decision,
        target=target,
        measurable=measurable,
        reachable=reachable,
        combined=comb,
        noise_line=clean(noise_line, 1000),
        reach_line=clean(reach_line, 4000),
        reach_short=clean(reach_short, 1000),
        line=clean(f"gate: {decision} — {why}", 1000),
        helps=_helps(target, plan, measurable, reachable, comb, reach) if diagnose else (),
        ceilings=reach.ceilings,
        room=reach.room,
        noise_floor=floor,
        forced=forced and diagnose,
    )


# ------------------------------------------------------------------------------ replayed ceilings
def idle_room(dag: ReplayDag) -> float:
    """The share of the observed window the busiest device stream idles: the most host-side
    changes can take off the step (below that, the stream's own work is the step)."""
    span = float(dag.observed_ns)
    if span <= 0 or not len(dag.d_stream):
        return 0.0
    start = dag.d_start_obs.astype(np.float64) - float(dag.t0_ns)
    end = start + dag.d_dur
    busiest = 0.0
    for st in np.unique(dag.d_stream).tolist():
        m = dag.d_stream == st
        busiest = max(busiest, _union(start[m], end[m]))
    return max(0.0, span - busiest) / span


def _union(start: np.ndarray, end: np.ndarray) -> float:
    """Length of the union of the intervals [start, end)."""
    if not len(start):
        return 0.0
    o = np.argsort(start, kind="stable")
    s, e = start[o], np.maximum.accumulate(end[o])
    # a new run starts where an interval begins after everything before it ended
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > e[:-1]
    idx = np.flatnonzero(new)
    ends = np.append(idx[1:] - 1, len(s) - 1)
    return float(np.sum(e[ends] - s[idx]))


def removed_ns(base: ReplayDag, edit: ReplayDag) -> tuple[float, float]:
    """(host ns, device ns) an edit takes out of the baseline graph, as observed: each host call
    it removes (a launch up to ``LAUNCH_OUTLIER`` × the median launch — beyond that the thread
    was waiting, not launching; a sync or blocking copy its whole observed time, waits
    included) or shortens, the host time before calls it drops, and each device row it removes,
    shortens or moves off its stream (the time the stream is freed of)."""
    launches = base.dur_ns[base.api == ApiKind.LAUNCH]
    clip = LAUNCH_OUTLIER * float(np.median(launches)) if len(launches) else math.inf
    obs = base.h_dur_obs if base.h_dur_obs is not None else base.dur_ns
    blocking = np.isin(base.api, (ApiKind.SYNC, ApiKind.MEMCPY_SYNC))
    launch = np.isin(base.api, (ApiKind.LAUNCH, ApiKind.MEMCPY_ASYNC, ApiKind.GRAPH_NODE))
    own = np.where(launch, np.minimum(base.dur_ns, clip), base.dur_ns)
    own = np.where(blocking, np.maximum(own, obs), own)
    own = np.where(base.api == NOP, 0.0, own)
    if len(edit.api) == len(base.api):
        gone = (edit.api == NOP) & (base.api != NOP)
        shorter = np.maximum(0.0, base.dur_ns - edit.dur_ns)
        took = np.where(gone, own, np.where(base.api == NOP, 0.0, shorter))
        unblocked = blocking & ~np.isin(edit.api, (ApiKind.SYNC, ApiKind.MEMCPY_SYNC)) & ~gone
        took = np.where(unblocked, np.maximum(took, obs), took)
        host = float(took.sum()) + float(np.maximum(0.0, base.gap_ns - edit.gap_ns).sum())
    else:  # rows inserted (a side stream's record/wait): the net of calls and gaps
        b_own = np.where(base.api == NOP, 0.0, base.dur_ns)
        e_own = np.where(edit.api == NOP, 0.0, edit.dur_ns)
        host = max(0.0, float(b_own.sum() + base.gap_ns.sum() - e_own.sum() - edit.gap_ns.sum()))
    n = len(base.d_dur)
    before = np.where(base.d_live, base.d_dur, 0.0)
    after = np.where(edit.d_live[:n], edit.d_dur[:n], 0.0)
    dev = float(np.maximum(0.0, before - after).sum())
    moved = base.d_live & edit.d_live[:n] & (edit.d_stream[:n] != base.d_stream)
    dev += float(before[moved].sum())
    if base.d_delay is not None:  # a removed row takes its observed delay before it along
        dev += float(base.d_delay[base.d_live & ~edit.d_live[:n]].sum())
    added = edit.d_live[n:] if len(edit.d_live) > n else np.zeros(0, bool)
    if added.any():  # rows a transform added (a fused kernel) give back their time
        dev = max(0.0, dev - float(edit.d_dur[n:][added].sum()))
    return host, dev


def _prior_text(lv: Lever) -> str:
    return "; ".join(f"{p.name} {p.low:g}–{p.high:g}{p.unit}" for p in lv.priors)


def replay_reach(
    obs: Observation,
    levers: Iterable[Lever],
    not_applicable: Mapping[str, str] | None = None,
    source: str = "",
) -> Reach:
    """Each lever's ceiling on the baseline's replay graph ``obs`` (``levers``: those that apply;
    a lever whose transform finds no target is not applicable here): its transform at its
    priors' values and at every corner of their stated ranges; the ceiling is the most any of
    them removes, the interval (a prior's) from the least to the most."""
    base = obs.dag
    span = float(base.observed_ns)
    room = idle_room(base)
    base_per = obs.per_sample_ns(obs.baseline)
    out: list[LeverCeiling] = []
    na = dict(not_applicable or {})
    for lv in levers:
        first = lv.transform(obs)
        if first.rows == 0:
            na[lv.id] = f"the trace shows no target for it ({first.what})"
            continue
        corners: list[dict[str, float]] = [{}] + [
            {p.name: v for p, v in zip(lv.priors, c, strict=True)}
            for c in itertools.product(*((p.low, p.high) for p in lv.priors))
        ]
        figures: list[tuple[float, float, float]] = []  # (ceiling, host, device)
        per_sample = first.sample_factor != 1.0
        for i, pri in enumerate(corners):
            e = first if i == 0 else lv.transform(replace(obs, priors=pri))
            if per_sample:  # more work per step: its replayed gain per sample
                g = 1.0 - obs.per_sample_ns(schedule(e.dag), e.sample_factor) / base_per
                figures.append((max(0.0, g), 0.0, 0.0))
            else:
                h, d = removed_ns(base, e.dag)
                hs, ds = h / span, d / span
                figures.append((min(1.0, min(hs, room) + ds), hs, ds))
        hi = max(figures, key=lambda f: f[0])
        lo = min(f[0] for f in figures)
        prior = _prior_text(lv)
        out.append(
            LeverCeiling(
                lv.id,
                hi[0],
                lo if prior else None,
                host=hi[1],
                device=hi[2],
                per_sample=per_sample,
                prior=prior,
                basis=(
                    f"{first.what}; "
                    + (
                        "replayed gain per sample (more work per step)"
                        if per_sample
                        else f"removes {hi[1]:.1%} host-side and {hi[2]:.1%} device time of the "
                        "baseline step"
                    )
                ),
            )
        )
    cp = critical_path(base, obs.baseline)
    bound = clean(headline(cp.by_part(), cp.makespan_ns), 400)
    return Reach(tuple(out), room, "", na, source, bound)
