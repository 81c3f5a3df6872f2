"""What would help, for a trace people already have: each lever's replay transform applied to
the trace's own dependency graph (engine.schedule.dag) → predicted change of its span. Nothing
is applied: these are the counterfactuals `gitm-tui analyze` reports.

Each estimate says what it rests on (``LeverEstimate.basis``, one line) and how sure it is:

* **predicted** — the replay's point estimate with an interval (gain_low, gain_high). The
  interval comes from the stated ranges of the named priors the transform scales by
  (engine/levers/priors.py puts each range next to its prior, with its source): the transform
  is replayed at every corner of those ranges. A lever without a prior gets a zero-width
  interval: the replay of its own model, which is not a claim that the model is right.
  Predicted levers are ranked by gain_low, the conservative end.
* The host time *between* calls (the replay's gaps: framework dispatch, Python, autograd, the
  optimizer) is kept in every replay here: a trace cannot show which part of it a change would
  remove. Transforms that drop a launch call drop its gap with it (right for the simulated
  workloads, where that gap is the simulator's per-op framework cost); that gap is restored.
  ``cuda_graphs`` uses its imported-trace transform (launch-API time only, capturable regions
  only: ``CudaGraphs.transform_launch_api``).
* Collectives: where the cross-rank match says when each collective's last peer arrived
  (``peers``: engine.analyze.advice.peers), every replay here holds the collective to it, so a gain is
  what a change on this rank takes off its span with its peers arriving as observed — a rank
  that is never last gains at most what runs after its last collective. Without it, a
  collective "finishes" as soon as this rank arrives, and each estimate's ``peers`` says which
  collectives that holds for.
* **ceiling** — batch size: only an upper bound is known (memory use is not in a trace), so
  the interval is 0 to the formula's value and it ranks after every predicted lever.
* **not_judged** — the trace has the lever's target rows but cannot show whether the lever
  applies (allocator levers need a PyTorch caching-allocator program and allocator calls after
  warm-up); ``basis`` says why, and nothing is predicted.

Levers whose transform finds no target rows are left out.

The graph is replayed with each run of host calls that only take host time as one row
(``engine.schedule.dag.merge_idle_host_rows``: the same times within a few ulp, a smaller
graph). The levers are estimated on two threads (``lever_threads``): each lever's replays are
independent, read the shared graph and baseline without editing them (transforms edit copies),
and the replay kernel runs without the GIL. Their order in the result is the library's, as on
one thread, and the estimates are the same.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from engine.analyze.advice.ceilings import Observed, ceiling, observe
from engine.analyze.advice.peers import PeerBounds, alone_line, held_line, hold
from engine.analyze.breakdown.fidelity import TOLERANCE, fidelity
from engine.analyze.breakdown.in_use import already_fused, in_use
from engine.analyze.breakdown.model import InUse, LeverEstimate, ReplayFidelity
from engine.jit import interpreting, usable_cores
from engine.levers.applicable import fit
from engine.levers.base import Lever
from engine.levers.launch import CudaGraphs, GraphCapture, capture_cuts
from engine.levers.library import LEVERS
from engine.levers.model import Edit, Observation, Prior
from engine.levers.priors import GRAPH_LAUNCH, GRAPH_NODE, LAUNCH_OUTLIER, MIN_GRAPH_KERNELS
from engine.manifest import load_critical_path
from engine.planner.catalogue import GpuPeaks
from engine.schedule.critical import CriticalPath
from engine.schedule.dag import (
    NOP,
    ReplayDag,
    Schedule,
    build_dag,
    merge_idle_host_rows,
    schedule,
)
from engine.trace.framework import ATEN, framework_of
from engine.trace.import_memory import give_back
from engine.trace.segments import Kind, Klass
from engine.trace.trace import ApiKind, Trace

#: Allocator calls in the first share of the span are warm-up (see ``_allocator_warmup``)
WARMUP_SHARE = 0.10
#: kernels from ATen (PyTorch's op library): evidence the program runs PyTorch and therefore
#: its caching allocator (demangled as Kineto writes them, or mangled as Nsight may)
_ATEN = ATEN  # (engine.trace.framework: where the framework is read from the trace)
_ORDER = {"predicted": 0, "ceiling": 1, "not_judged": 2, "not_applicable": 3}
_TIMED = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM)  # the rows build_dag replays


def lever_threads() -> int:
    """Threads the levers are estimated on: 2 where the process may use two cores, else 1.
    ``OMP_NUM_THREADS``, where set, caps it (Dask's workers set it to 1: a cluster runs one
    analysis per core already), and so do interpreted kernels (a first run's: Python, which
    holds the GIL, so a second thread only contends for it)."""
    cores = usable_cores()
    cap = os.environ.get("OMP_NUM_THREADS", "").strip()
    n = min(2, cores or 1, int(cap) if cap.isdecimal() and int(cap) > 0 else 2)
    return 1 if interpreting() else n


@dataclass
class LeverReport:
    """What ``replay_levers`` found: the estimates, the no-lever replay's fidelity, and what the
    program already does."""

    estimates: list[LeverEstimate] = field(default_factory=list)
    replay: ReplayFidelity | None = None
    in_use: list[InUse] = field(default_factory=list)
    #: the no-lever graph and its replay (the critical path is read off them); None: none
    dag: ReplayDag | None = None
    base: Schedule | None = None
    #: the critical path of ``base`` (the ceilings read it; the analysis reports it)
    path: CriticalPath | None = None


def estimate_levers(
    trace: Trace, hw: GpuPeaks, regimes: np.ndarray, threads: int | None = None
) -> list[LeverEstimate]:
    """``replay_levers(...).estimates`` (the device known: ``hw`` is its catalogue entry)."""
    return replay_levers(trace, hw, regimes, threads).estimates


def replay_levers(
    trace: Trace,
    hw: GpuPeaks,
    regimes: np.ndarray,
    threads: int | None = None,
    device: GpuPeaks | Literal["same"] | None = "same",
    whole: Trace | None = None,
    peers: PeerBounds | None = None,
) -> LeverReport:
    """Every lever whose transform finds a target in ``trace``, estimated as the module
    docstring says, ranked by ``rank_estimates``; with the no-lever replay's fidelity (printed
    before any prediction) and what the program already does.

    ``regimes``: the decoded regime of every row of ``trace.segments`` (255 where none);
    ``threads``: how many levers are estimated at once (default ``lever_threads()``);
    ``device``: the trace's own device for the levers' capability checks — "same" (``hw``),
    or None where the catalogue does not know it (``hw`` is then only the replay's reference
    rates, and levers that depend on the device are not judged); ``whole``: the whole trace
    when ``trace`` is a replay window of it (what is already in use is counted over it);
    ``peers``: when this rank's peers arrived at its collectives (engine.analyze.advice.peers) — each
    lever is then replayed with its collectives held to them (``_held``), so its gain is what
    it takes off this rank's span with its peers as observed; every estimate's ``peers`` says
    what bounded it (or, without them, which collectives were replayed as if every peer
    arrived with this rank)."""
    if not len(trace.host):
        return LeverReport()  # no host rows: launch, sync and copy structure unknown
    if not np.isin(trace.segments.kind, _TIMED).any():
        return LeverReport()  # no timed device rows (kernels, copies): nothing to move
    dag = merge_idle_host_rows(build_dag(trace, hw, iterations=1, regimes=regimes))
    base = schedule(dag)
    if base.makespan_ns <= 0:
        return LeverReport()
    fid = fidelity(dag, base)
    used = in_use(whole if whole is not None else trace)
    steps = _steps_in(trace, dag)
    plain = dag
    dag, base, bound, room = _held(dag, base, peers, steps)
    ob = _observed(plain, dag, base)
    obs = Observation(dag, base, [], hw, 1)
    # already-fused kernels are not fused again: the fusion levers see them as OTHER
    fused = already_fused(dag)
    fusion_obs = obs
    if fused.any():
        fdag = dag.copy()
        fdag.d_klass[fused] = Klass.OTHER
        fusion_obs = replace(obs, dag=fdag)
    dev = hw if device == "same" else device
    rows = len(dag.api) + len(dag.d_stream)
    framework = framework_of(trace)

    def one(lv: Lever) -> LeverEstimate | None:
        o = fusion_obs if lv.fuses else obs
        fits = fit(lv.spec, dev)
        if fits.status != "fits":
            return _cannot(lv, o, fits.status, fits.reason)
        if lv.ml_only and framework is None:  # a batch, a loader: a framework's, unseen here
            edit = lv.transform(o)
            if edit.rows == 0:
                return None
            return _estimate(
                lv,
                "not_judged",
                "the trace shows no machine-learning framework (no PyTorch ATen, XLA or "
                "TensorFlow kernels, not a PyTorch profiler trace): whether the program has the "
                "batch or data loader this lever changes is unknown",
                edit,
            )
        lacking = lv.not_applicable(o)  # the program lacks what it tunes (the trace shows it)
        if lacking is not None:
            return _estimate(lv, "not_applicable", lacking[0], None).model_copy(
                update={"rows": lacking[1]}
            )
        if lv.estimate == "graphs" and isinstance(lv, CudaGraphs):
            est = _cuda_graphs(lv, o, ob)
        elif lv.estimate == "ceiling":
            est = _ceiling(lv, o, trace)
        elif lv.estimate == "allocator":
            est = _allocator(lv, o, trace, ob)
        else:
            est = _predicted(lv, o, lv.transform, ob)
        give_back(rows)  # each lever's replays free their graphs: the pages back (give_back)
        if est is not None and est.status == "predicted" and not fid.faithful:
            est = est.model_copy(update={"unfaithful_replay": True})
        if est is not None and lv.removes_syncs and steps:
            syncs = int((dag.api == ApiKind.SYNC).sum())
            est = est.model_copy(
                update={
                    "basis": f"{syncs} syncs over {steps} ProfilerSteps = {syncs / steps:.3g} "
                    f"per step; " + est.basis
                }
            )
        if est is not None and lv.spec.changes and est.status in ("predicted", "ceiling"):
            # what the gain would cost besides time: the reason for its safety class
            est = est.model_copy(
                update={"basis": f"{est.basis}; {lv.spec.safety.value}: {lv.spec.changes}"}
            )
        if est is not None and bound is not None and est.status in ("predicted", "ceiling"):
            est = est.model_copy(update={"peers": bound})
        if est is not None and room is not None and not lv.per_sample:
            # (batch size is per sample on every rank: more work per collective, not this
            # rank's span)
            est = _within_room(est, room / base.makespan_ns if base.makespan_ns else 0.0)
        return est

    n = lever_threads() if threads is None else max(1, threads)
    if n == 1:
        found = [one(lv) for lv in LEVERS]
    else:
        with ThreadPoolExecutor(n, thread_name_prefix="gitm-levers") as pool:
            found = list(pool.map(one, LEVERS))  # library order; a lever's error is raised here
    ranked = rank_estimates([e for e in found if e is not None])
    return LeverReport(ranked, fid, used, dag, base, ob.path)


def _observed(plain: ReplayDag, dag: ReplayDag, base: Schedule) -> Observed:
    """What the ceilings read (engine.analyze.advice.ceilings.observe): the critical path of the replay
    the levers are judged on (``base``: held to the peers, its peer waits are on the path, not
    host time capture could take), the observed times from the graph as built (a held
    collective's ``d_dur`` is its transfer, not the time it ran)."""
    ob = observe(dag, base)  # (its critical path holds whole-step capture: ceilings)
    if dag is plain:
        return ob
    seen = observe(plain)
    return replace(ob, host_room_ns=seen.host_room_ns, start=seen.start, end=seen.end)


def _within_room(est: LeverEstimate, room: float) -> LeverEstimate:
    """An estimate of a rank held to its peers, its ceiling and interval at most ``room`` (the
    share of the span a change on this rank can take off: after the held collectives' floor,
    which no change here moves) — a trace-wide ceiling of +50 % on a rank whose span ends when
    its peers arrive says nothing true."""
    upd: dict[str, object] = {}
    if est.ceiling is not None and est.ceiling > room:
        upd["ceiling"] = round(room, 6)
        upd["ceiling_basis"] = (
            est.ceiling_basis + f"; held to its peers: at most {room:+.1%} (the span after the "
            "held collectives' floor, which no change on this rank moves)"
        )
    for k in ("predicted_gain", "gain_low", "gain_high"):
        v = getattr(est, k)
        if v is not None and v > room:
            upd[k] = round(room, 6)
    return est.model_copy(update=upd) if upd else est


def _held(
    dag: ReplayDag, base: Schedule, peers: PeerBounds | None, steps: int
) -> tuple[ReplayDag, Schedule, str | None, float | None]:
    """(graph, its no-lever replay, what the peers bound) the levers are replayed on: with
    ``peers``, the graph whose collectives wait for their last peer (engine.analyze.advice.peers.hold),
    kept only where its no-lever replay still reproduces this one's span (within the fidelity
    TOLERANCE: held rows are fitted to end as observed, so it does unless the bounds are not
    this rank's); otherwise the graph as built, and a line saying which collectives its replay
    lets finish as if every peer arrived with this rank (None: it has none); and, held, the
    most a change on this rank can take off the span (ns; None: not held)."""
    alone = alone_line(dag)
    if peers is None or alone is None:
        return dag, base, alone, None
    hdag, held = hold(dag, peers)
    if not len(held.rows):  # (a group with ranks not given, or another window)
        return dag, base, f"no collective matched across the ranks given; {alone}", None
    hbase = schedule(hdag)
    span = base.makespan_ns
    if abs(hbase.makespan_ns - span) > TOLERANCE * span:
        why = (
            f"held to its peers its replay spans {_ms(hbase.makespan_ns)}, not {_ms(span)}: "
            "the peer bounds do not fit this trace and are not used"
        )
        return dag, base, why if alone is None else f"{why}; {alone}", None
    room = max(0.0, span - held.floor_ns)
    return hdag, hbase, held_line(peers, held, span, steps), room


def _steps_in(trace: Trace, dag: ReplayDag) -> int:
    """ProfilerSteps that overlap the replayed window by more than half their length (0 where
    the trace records none)."""
    t0, t1 = dag.t0_ns, dag.t0_ns + dag.observed_ns
    steps = trace.device_properties.get("profiler_steps") or []
    n = 0
    for s in steps:
        if isinstance(s, (list, tuple)) and len(s) == 2 and s[1] > s[0]:
            n += (min(t1, s[1]) - max(t0, s[0])) > 0.5 * (s[1] - s[0])
    return n


def _cannot(
    lv: Lever, obs: Observation, status: Literal["cannot", "unknown"], reason: str
) -> LeverEstimate | None:
    """A lever the device cannot do (not applicable) or that cannot be checked on an unknown
    device (not judged): no gain, no interval; listed only where the trace has its targets."""
    edit = lv.transform(obs)
    if edit.rows == 0:
        return None
    return _estimate(
        lv,
        "not_applicable" if status == "cannot" else "not_judged",
        f"{reason}; the trace has {edit.rows:,} rows it would act on, but nothing is predicted",
        edit,
    )


def rank_estimates(estimates: list[LeverEstimate]) -> list[LeverEstimate]:
    """Predicted levers by the conservative end of their interval (then the point estimate),
    best first; then ceilings (largest first); then those not judged, then those not applicable
    (library order)."""

    def key(e: LeverEstimate) -> tuple[int, float, float]:
        if e.status == "predicted":
            return (0, -(e.gain_low or 0.0), -(e.predicted_gain or 0.0))
        if e.status == "ceiling":
            return (1, -(e.gain_high or 0.0), 0.0)
        return (_ORDER[e.status], 0.0, 0.0)

    return sorted(estimates, key=key)


# ------------------------------------------------------------------ replay helpers
def _gain(
    obs: Observation, make_edit: Callable[[Observation], Edit], priors: dict[str, float]
) -> tuple[float, Edit]:
    """(replayed gain, edit) of one transform run with ``priors`` overriding named priors."""
    edit = make_edit(replace(obs, priors=priors))
    _keep_host_gaps(edit.dag, obs.dag)
    pred = schedule(edit.dag).makespan_ns / edit.sample_factor
    return 1.0 - pred / obs.baseline.makespan_ns, edit


def _keep_host_gaps(edit: ReplayDag, base: ReplayDag) -> None:
    """Give back every host gap a transform removed (module docstring), and of each launch call
    it dropped the part beyond ``LAUNCH_OUTLIER`` × the median launch (that thread was waiting
    then — the allocator, the GIL — not launching: dropping the launch does not remove the
    wait). Transforms that insert host rows (copy overlap) add rows with no gap and remove none,
    so only same-length graphs need the row-by-row restore."""
    if len(edit.gap_ns) == len(base.gap_ns):
        np.maximum(edit.gap_ns, base.gap_ns, out=edit.gap_ns)
        launch = np.isin(base.api, (ApiKind.LAUNCH, ApiKind.MEMCPY_ASYNC))
        dropped = launch & (edit.api == NOP)
        launches = base.dur_ns[base.api == ApiKind.LAUNCH]
        if dropped.any() and len(launches):
            clip = LAUNCH_OUTLIER * float(np.median(launches))
            edit.gap_ns[dropped] += np.maximum(0.0, base.dur_ns[dropped] - clip)


def _interval(
    obs: Observation, make_edit: Callable[[Observation], Edit], priors: tuple[Prior, ...]
) -> tuple[float, float, float, Edit, list[Edit]]:
    """(point, low, high, point edit, every edit): the replay at the priors' values and at every
    corner of their stated ranges (2 ** len(priors) more replays; no lever has more than two)."""
    point, edit = _gain(obs, make_edit, {})
    gains, edits = [point], [edit]
    if edit.rows:
        for corner in itertools.product(*((p.low, p.high) for p in priors)):
            g, e = _gain(obs, make_edit, {p.name: v for p, v in zip(priors, corner, strict=True)})
            gains.append(g)
            edits.append(e)
    return point, min(gains), max(gains), edit, edits


def _touched_ns(obs: Observation, edit: ReplayDag) -> tuple[float, float]:
    """(host ns, device ns) a transform acted on: the host time it took out of each call it
    changed (in the baseline replay, so a removed sync or blocking copy counts the wait it
    had; row by row where no row was inserted, net otherwise) and the observed duration of
    every device row it shortened, removed or moved. A replay cannot gain more than their sum:
    shortening or dropping work moves every later row by at most the time taken out."""
    base, sched = obs.dag, obs.baseline
    if len(edit.api) == len(base.api):
        busy = sched.h_end - sched.h_start  # a call's time in the baseline, waits included
        dur = np.where(edit.api == NOP, 0.0, edit.dur_ns)  # its own time after the edit
        changed = (edit.api != base.api) | (edit.dur_ns != base.dur_ns)
        host = float(np.maximum(0.0, base.gap_ns - edit.gap_ns).sum())
        host += float(np.where(changed, np.maximum(0.0, busy - dur), 0.0).sum())
    else:
        net = (base.gap_ns + base.dur_ns).sum() - (edit.gap_ns + edit.dur_ns).sum()
        host = max(0.0, float(net))
    moved = (
        (edit.d_dur != base.d_dur) | (edit.d_live != base.d_live) | (edit.d_stream != base.d_stream)
    )
    return host, float(base.d_dur[moved].sum())


def _ms(ns: float) -> str:
    ms = ns / 1e6
    if ms == 0:
        return "0 ms"
    return f"{ms:,.1f} ms" if ms >= 10 else f"{ms:.2f} ms" if ms >= 0.1 else f"{ms:.3f} ms"


def _num(x: float, unit: str) -> str:
    if unit == "ns":
        return f"{x / 1e3:g} µs"
    return f"{x:g}{unit}"


def _prior_text(priors: tuple[Prior, ...]) -> str:
    return "; ".join(
        f"prior: {p.name} {_num(p.value, p.unit)} (stated range {_num(p.low, p.unit)}–"
        f"{_num(p.high, p.unit)})"
        for p in priors
    )


def _estimate(
    lv: Lever,
    status: Literal["predicted", "ceiling", "not_judged", "not_applicable"],
    basis: str,
    edit: Edit | None,
    point: float | None = None,
    low: float | None = None,
    high: float | None = None,
    prior_based: bool = False,
) -> LeverEstimate:
    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 6)

    return LeverEstimate(
        lever=lv.id,
        title=lv.spec.title,
        safety=lv.spec.safety.value,
        causes=list(lv.spec.causes),
        status=status,
        predicted_gain=r(point),
        gain_low=r(low),
        gain_high=r(high),
        basis=basis,
        rows=edit.rows if edit is not None else 0,
        what=edit.what if edit is not None else "",
        prior_based=prior_based,
    )


# ------------------------------------------------------------------ the estimates
def _bounded(
    lv: Lever,
    est: LeverEstimate,
    edits: list[Edit],
    obs: Observation,
    ob: Observed,
) -> LeverEstimate:
    """A predicted estimate under its ceiling (``engine.analyze.advice.ceilings``), and with no slowdown
    in its interval unless the lever can slow a program (``Lever.can_slow`` says how): a lever
    that only removes work cannot, so a negative replay is the replay's ordering, shown as 0."""
    c = ceiling(lv.id, obs.dag, edits, ob, obs.baseline.makespan_ns)
    upd: dict[str, object] = {}
    notes = []
    point, low, high = est.predicted_gain, est.gain_low, est.gain_high
    if not lv.can_slow and low is not None and low < 0:
        notes.append(
            f"the replay gave {low:+.1%} at one end, which a lever that only removes work "
            "cannot cause (the replay's ordering, not the lever): shown as 0"
        )
        low = 0.0
        point = max(0.0, point or 0.0)
        high = max(0.0, high or 0.0)
    elif lv.can_slow and low is not None and low < 0:
        notes.append(f"can slow a program: {lv.can_slow}")
    if c is not None:
        upd["ceiling"] = round(c.gain, 6)
        upd["ceiling_basis"] = c.basis
        if point is not None and point > c.gain + 1e-6:  # (estimates are rounded to 1e-6)
            notes.append(
                f"the replay predicted {point:+.1%}, above the ceiling: the gain shown is the "
                "ceiling (the replay over-counts here)"
            )
            upd["capped"] = True
            point = c.gain
            high = min(high if high is not None else c.gain, c.gain)
            low = min(low if low is not None else c.gain, c.gain)
        elif high is not None and high > c.gain:
            high = c.gain
    upd.update(
        predicted_gain=None if point is None else round(point, 6),
        gain_low=None if low is None else round(low, 6),
        gain_high=None if high is None else round(high, 6),
    )
    if notes:
        upd["basis"] = est.basis + "; " + "; ".join(notes)
    return est.model_copy(update=upd)


def _predicted(
    lv: Lever,
    obs: Observation,
    make_edit: Callable[[Observation], Edit],
    ob: Observed,
    evidence: str = "",
) -> LeverEstimate | None:
    """The general case: replay at the priors' values and range ends; basis = the time the
    transform acted on, its share of the replayed span, and the priors."""
    point, low, high, edit, edits = _interval(obs, make_edit, lv.priors)
    if edit.rows == 0:
        return None  # no target in this trace
    host, dev = _touched_ns(obs, edit.dag)
    span = obs.baseline.makespan_ns
    parts = [
        f"{evidence}{edit.what}: acts on {_ms(host)} of host calls and {_ms(dev)} of device "
        f"rows ({(host + dev) / span:.2%} of the {_ms(span)} replayed span); host time between "
        "calls kept",
        _prior_text(lv.priors)
        if lv.priors
        else "no named prior, so a zero-width interval (the replay of its model alone)",
    ]
    est = _estimate(
        lv,
        "predicted",
        "; ".join(parts),
        edit,
        point,
        low,
        high,
        prior_based=bool(lv.priors) or edit.prior_based,
    )
    return _bounded(lv, est, edits, obs, ob)


def _cuda_graphs(lv: CudaGraphs, obs: Observation, ob: Observed) -> LeverEstimate | None:
    """Launch-API time only, in capturable regions only (``CudaGraphs.transform_launch_api``);
    the interval spans the graph launch's and each captured launch's stated host costs.
    Kernels already launched from graphs are not captured again."""
    caps: list[GraphCapture] = []

    def make(o: Observation) -> Edit:
        edit, cap = lv.transform_launch_api(o)
        caps.append(cap)
        return edit

    graph_priors = (GRAPH_LAUNCH, GRAPH_NODE)
    point, low, high, edit, edits = _interval(obs, make, graph_priors)
    if edit.rows == 0:
        return None
    cap = caps[0]  # the point replay's
    cut, _ = capture_cuts(obs.dag)
    api = obs.dag.api
    n_sync = int((cut & (api == ApiKind.SYNC)).sum())
    n_alloc = int((cut & (api == ApiKind.MALLOC)).sum())
    n_copy = int((cut & np.isin(api, (ApiKind.MEMCPY_SYNC, ApiKind.MEMCPY_ASYNC))).sum())
    n_graph = int((api == ApiKind.GRAPH_LAUNCH).sum())
    already = (
        f"; {n_graph} cudaGraphLaunch calls already in the trace: their kernels are not counted"
        if n_graph
        else ""
    )
    span = obs.baseline.makespan_ns
    n_threads = 1 if obs.dag.h_thread is None else len(np.unique(obs.dag.h_thread))
    threads = f" (summed over {n_threads} host threads)" if n_threads > 1 else ""
    basis = (
        f"{cap.regions} capturable regions, {cap.launches} launches (at least "
        f"{MIN_GRAPH_KERNELS} kernels each; cut at {n_sync} syncs, {n_alloc} allocator calls, "
        f"{n_copy} host-visible copies){already}: removes {_ms(cap.removed_ns)} of launch-API "
        f"time beyond a graph node's cost ({cap.removed_ns / span:.2%} of the {_ms(span)} "
        f"replayed span; a call counts up to {cap.clip_ns / 1e3:.1f} µs, {LAUNCH_OUTLIER:g}x "
        f"the median launch); the {_ms(cap.between_ns)} of host time between those launches "
        f"is kept{threads}; " + _prior_text(graph_priors)
    )
    est = _estimate(lv, "predicted", basis, edit, point, low, high)
    return _bounded(lv, est, edits, obs, ob)


def _ceiling(lv: Lever, obs: Observation, trace: Trace) -> LeverEstimate | None:
    """Batch size: the formula's gain is an upper bound. Whether twice the batch fits needs the
    program's memory use, which no trace we read carries (Kineto gives the device's memory,
    not its use), so it stays a ceiling: 0 to the formula's value, never ranked by it."""
    gain, edit = _gain(obs, lv.transform, {})
    if edit.rows == 0:
        return None
    mems = [
        d.get("totalGlobalMem")
        for d in trace.device_properties.get("devices", [])
        if isinstance(d, dict)
    ]
    mem = next((m for m in mems if isinstance(m, int) and m > 0), None)
    known = f"the device's {mem / 2**30:.1f} GiB are known, " if mem else ""
    basis = (
        f"twice the batch per step (kernels and copies doing twice the work as far as their "
        f"grids allow, per-step host cost unchanged) gives {gain:+.1%} per sample at most; "
        f"{known}the program's memory use is not in the trace, so whether twice the batch "
        "fits cannot be checked and the gain lies between 0 and that"
    )
    return _estimate(lv, "ceiling", basis, edit, None, 0.0, max(0.0, gain))


def _allocator(lv: Lever, obs: Observation, trace: Trace, ob: Observed) -> LeverEstimate | None:
    """Allocator levers (expandable segments) configure PyTorch's caching allocator: judged only
    on a PyTorch profiler trace (Kineto format with ATen kernels), and only on the allocator
    calls of the steady state (``_allocator_warmup``); otherwise not judged, with the reason."""
    first = lv.transform(obs)
    if first.rows == 0:
        return None
    fmt = str(trace.device_properties.get("format", ""))
    if fmt != "kineto" and framework_of(trace) is None:
        return _estimate(
            lv,
            "not_applicable",
            "the trace shows no PyTorch (no ATen or c10 kernels): its "
            f"{first.rows} allocator calls are the program's own (cudaMalloc/cudaFree, context "
            "creation), which PyTorch's caching-allocator setting does not reach — allocate "
            "once and reuse instead",
            first,
        )
    if fmt != "kineto":
        what = "an Nsight export" if fmt == "nsys" else f"a '{fmt or 'unknown'}' trace"
        return _estimate(
            lv,
            "not_judged",
            f"{what} does not show that the PyTorch caching allocator (which this "
            f"lever configures) is in use; its {first.rows} allocator calls may be the "
            "program's own cudaMalloc/cudaFree or CUDA context creation",
            first,
        )
    if not is_pytorch(trace):
        return _estimate(
            lv,
            "not_judged",
            "no PyTorch (ATen) kernels in this profiler trace, so nothing shows the "
            f"PyTorch caching allocator (which this lever configures) behind its {first.rows} "
            "allocator calls",
            first,
        )
    malloc = obs.dag.api == ApiKind.MALLOC
    assert obs.dag.h_start_obs is not None  # a graph built from the trace (build_dag)
    start = obs.dag.h_start_obs.astype(np.float64)
    begin, end = _allocator_warmup(trace, obs.dag)
    outside = malloc & ((start < begin) | (start > end))
    steady = malloc & ~outside
    t0 = obs.dag.t0_ns
    window = (
        f"steady state = from {_ms(begin - t0)} (the later of the first kernel's end and "
        f"{WARMUP_SHARE:.0%} of the span) to {_ms(end - t0)} (the last kernel's end)"
    )
    if not steady.any():
        return _estimate(
            lv,
            "not_judged",
            f"all {int(malloc.sum())} allocator calls "
            f"({_ms(float(obs.dag.dur_ns[malloc].sum()))}) are set-up or teardown, none in the "
            f"{window}: first allocations (or CUDA context creation) are not allocator churn",
            first,
        )
    off = _pool_off(int(steady.sum()), _steps_in(trace, obs.dag))
    if off:  # the pool this lever configures is not in use: that is the finding, not a tuning
        return _estimate(lv, "not_applicable", off, first)
    # the set-up / teardown calls are relabelled OTHER, which the replay times the same way
    # (host time only), so the transform edits the steady-state calls alone
    dag = obs.dag.copy()
    dag.api[outside] = ApiKind.OTHER
    evidence = (
        f"{int(steady.sum())} of {int(malloc.sum())} allocator calls "
        f"({_ms(float(obs.dag.dur_ns[steady].sum()))}) lie in the {window}; "
    )
    return _predicted(lv, replace(obs, dag=dag), lv.transform, ob, evidence)


def _pool_off(calls: int, steps: int) -> str | None:
    """Why an allocator lever does not apply where the caching allocator looks off: device
    allocation calls every step in the steady state (a pool that reuses its memory calls
    cudaMalloc only to grow). Thresholds: manifests/critical_path.json, the same the critical
    path's allocation opportunity names the pool off by; None where the pool looks in use."""
    prm = load_critical_path()
    per = calls / steps if steps else None
    if (per is not None and per < prm.pool_off_calls_per_step) or (
        per is None and calls < prm.pool_off_calls
    ):
        return None
    rate = f"{per:,.0f} per step" if per is not None else "in the window"
    return (
        f"not applicable: {calls:,} device allocation calls in the steady state ({rate}) — the "
        "caching allocator looks off or not reused (a pool that reuses its memory allocates "
        "only to grow), and this lever configures that pool: re-enable it first (unset "
        "PYTORCH_NO_CUDA_MEMORY_CACHING); the critical path names the allocation it costs"
    )


def _allocator_warmup(trace: Trace, dag: ReplayDag) -> tuple[float, float]:
    """(begin, end) of the steady state, absolute ns. Allocator calls before ``begin`` are
    warm-up: CUDA context creation shows as one long first cudaMalloc, and the caching
    allocator fills its cache in the first step; before the first kernel has even finished
    nothing ran yet, and ``WARMUP_SHARE`` of the span is a heuristic for the first step (a
    profiler schedule's recorded window usually starts at a step; the Kineto importer now keeps
    ``profiler_steps``, which could replace this heuristic where a trace has them). Calls after the last kernel's end are teardown (freeing the cache at exit)."""
    seg = trace.segments
    k = seg.kind == Kind.KERNEL
    if not k.any():
        return np.inf, -np.inf  # no kernels: no steady state to judge
    begin = max(float(seg.end_ns[k].min()), dag.t0_ns + WARMUP_SHARE * dag.observed_ns)
    return begin, float(seg.end_ns[k].max())


def is_pytorch(trace: Trace) -> bool:
    """Any kernel named from ATen: the program runs PyTorch (see ``_ATEN``)."""
    seg = trace.segments
    ids = np.unique(seg.name[seg.kind == Kind.KERNEL]).tolist()
    return any(_ATEN.search(trace.names[int(i)]) for i in ids)


__all__ = [
    "WARMUP_SHARE",
    "LeverReport",
    "estimate_levers",
    "lever_threads",
    "rank_estimates",
    "replay_levers",
]
