"""What every lever builds on: the ``Lever`` base class and the graph helpers that find launch
runs, fusable chains and precision/layout patterns in a trace's replay graph."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from engine.levers.model import Applicability, Edit, LeverSpec, Observation, Prior, lever_specs
from engine.levers.priors import FOREACH_MIN_RUN
from engine.manifest import KernelOp
from engine.planner.catalogue import GpuPeaks
from engine.schedule.dag import NOP, ReplayDag
from engine.trace.segments import Klass
from engine.trace.trace import ApiKind

if TYPE_CHECKING:  # (annotations only: the simulator is not imported to analyze a trace)
    from engine.workloads.sim import SimState

LAYOUT = re.compile(r"nchwtonhwc|nhwctonchw|transpose.*(nchw|nhwc)", re.IGNORECASE)


SOFTMAX = re.compile(r"softmax", re.IGNORECASE)


FUSABLE = (Klass.ELEMENTWISE, Klass.NORM)


LAUNCHES = (ApiKind.LAUNCH, ApiKind.GRAPH_NODE)


# ------------------------------------------------------------------ graph helpers
def kernel_floor(obs: Observation) -> float:
    return float(obs.hw.kernel_floor_ns)


def launch_runs(
    dag: ReplayDag, pred: Callable[[int], bool] | np.ndarray, min_len: int = 2
) -> list[list[int]]:
    """Runs of device rows launched back to back (consecutive host launch rows, one stream,
    nothing else on the host in between) that all satisfy ``pred`` (a function of the device
    row, or a boolean mask over device rows): program adjacency. Removed (NOP) host rows do not
    break a run."""
    off, flat = dag.launch_lists()
    rows = np.flatnonzero(dag.api != NOP)
    d0 = np.full(len(rows), -1, np.int64)
    cand = np.isin(dag.api[rows], LAUNCHES) & (np.diff(off)[rows] == 1)
    d0[cand] = flat[off[rows[cand]]]
    cand[cand] = dag.d_live[d0[cand]]
    ok = cand.copy()
    if callable(pred):
        ok[cand] = np.fromiter((pred(d) for d in d0[cand].tolist()), np.bool_, int(cand.sum()))
    else:
        ok[cand] = np.asarray(pred, np.bool_)[d0[cand]]
    idx = np.flatnonzero(ok)
    if not len(idx):
        return []
    stream = dag.d_stream[d0[idx]]
    start = np.ones(len(idx), np.bool_)
    start[1:] = (idx[1:] != idx[:-1] + 1) | (stream[1:] != stream[:-1])
    cuts = [*np.flatnonzero(start).tolist(), len(idx)]
    members = d0[idx].tolist()  # one list, sliced per run (an array per run cost 13 µs each)
    return [members[a:b] for a, b in itertools.pairwise(cuts) if b - a >= min_len]


def merge_rows(
    dag: ReplayDag,
    run: list[int],
    dur: float,
    flops: float,
    nbytes: float,
    host_of: np.ndarray | None = None,
) -> None:
    """Fuse ``run`` into its first row: new duration/counters; the others and their launch
    calls disappear. ``host_of``: ``dag.host_of()``, computed once by a caller merging many
    runs (merging does not change which host row launched a surviving row)."""
    merge_runs(dag, [run], np.array([dur]), np.array([flops]), np.array([nbytes]), host_of)


def merge_runs(
    dag: ReplayDag,
    runs: list[list[int]],
    dur: np.ndarray,
    flops: np.ndarray,
    nbytes: np.ndarray,
    host_of: np.ndarray | None = None,
) -> None:
    """``merge_rows`` for many disjoint runs (launch_runs'), at once: run i into its first row
    with dur[i], flops[i], nbytes[i]."""
    if not runs:
        return
    first = np.fromiter((r[0] for r in runs), np.int64, len(runs))
    dag.d_dur[first] = dur
    dag.d_flops[first] = flops
    dag.d_bytes[first] = nbytes
    rest = np.fromiter(itertools.chain.from_iterable(r[1:] for r in runs), np.int64)
    dag.remove_launched(rest, host_of)


def program_runs(ops: list[Any], pred: Callable[[Any], bool]) -> Iterator[tuple[int, int]]:
    """(start, end) index ranges of adjacent kernel ops on one stream satisfying ``pred``."""
    i = 0
    while i < len(ops):
        if isinstance(ops[i], KernelOp) and pred(ops[i]):
            j = i + 1
            while (
                j < len(ops)
                and isinstance(ops[j], KernelOp)
                and pred(ops[j])
                and ops[j].stream == ops[i].stream
            ):
                j += 1
            if j - i >= 2:
                yield i, j
            i = j
        else:
            i += 1


def fills(dag: ReplayDag, rows: np.ndarray, hw: GpuPeaks) -> np.ndarray:
    """Per device row of ``rows``: the share of one wave's resident-block slots its grid fills
    (1 when unknown); blocks per SM from the row's threads, registers and shared memory against
    the catalogue limits (integer arithmetic, as the hardware counts blocks)."""
    grid = dag.d_grid[rows].astype(np.int64)
    block = np.maximum(1, dag.d_block[rows].astype(np.int64))
    regs = dag.d_regs[rows].astype(np.int64)
    smem = dag.d_smem[rows].astype(np.int64)
    unbounded = 1 << 30
    per_sm = np.minimum.reduce(
        [
            np.full(len(grid), hw.max_blocks_per_sm, np.int64),
            hw.max_threads_per_sm // block,
            np.where(regs > 0, hw.regs_per_sm // np.maximum(1, regs * block), unbounded),
            np.where(smem > 0, hw.smem_per_sm // np.maximum(1, smem), unbounded),
        ]
    )
    share = grid.astype(np.float64) / (np.maximum(1, per_sm) * hw.sm_count).astype(np.float64)
    return np.where(grid > 0, share, 1.0)


# ------------------------------------------------------------------ base class
class Lever:
    """Base: subclasses set ``id`` and implement sites / transform / apply."""

    id: ClassVar[str]
    #: the named priors its transform scales by (their ranges give `analyze` its interval)
    priors: ClassVar[tuple[Prior, ...]] = ()
    #: how this lever can slow a program ("" where it only removes work: then no interval of
    #: it contains a slowdown, engine/analyze/advice/levers.py)
    can_slow: ClassVar[str] = ""

    # What the analysis, the ceilings and the loops need to know of a lever, declared here so
    # that no code outside engine/levers compares lever ids (a test greps for it):
    #: how `analyze` estimates its gain: "replay" (its transform replayed on the trace),
    #: "graphs" (whole-step capture, engine.levers.launch.GraphCapture), "ceiling" (more work
    #: per step: a ceiling only) or "allocator" (the allocator calls it takes off)
    estimate: ClassVar[str] = "replay"
    #: it fuses kernels: kernels already fused are not fused again (it sees them as OTHER)
    fuses: ClassVar[bool] = False
    #: it only shortens host calls in place: its ceiling is held to the critical path (a lever
    #: that removes rows also removes the waits on them, and keeps the observed counts)
    ceiling_on_path: ClassVar[bool] = False
    #: whole-step capture: also takes off the host time between captured launches on the path
    skips_host_between_launches: ClassVar[bool] = False
    #: it removes syncs: the host time it takes off is the syncs' whole observed time, and its
    #: basis counts them per ProfilerStep
    removes_syncs: ClassVar[bool] = False
    #: it moves copies off their streams: the device time it frees is the moved copies' own
    moves_copies: ClassVar[bool] = False
    #: its gain is per sample on every rank (more work per collective), not this rank's span:
    #: not held to the room this rank has before its peers arrive
    per_sample: ClassVar[bool] = False
    #: it changes what a machine-learning framework owns (a batch, a data loader): judged only
    #: where the trace shows one (engine.trace.framework), otherwise not judged
    ml_only: ClassVar[bool] = False
    #: the critical-path opportunities it answers (engine.analyze.breakdown.critical: "allocation",
    #: "data_loading", "host"), where the program is one it can act on
    answers: ClassVar[tuple[str, ...]] = ()
    #: what already in use (engine.analyze.breakdown.in_use) leaves it nothing to do: "cuda_graphs",
    #: "fused_kernels"; precision levers say it by ``precision_target``
    in_use_as: ClassVar[tuple[str, ...]] = ()
    #: the arithmetic it moves matmuls to ("tf32", "bf16"): rows already there or below are
    #: left alone (engine.trace.precision)
    precision_target: ClassVar[str] = ""

    @property
    def spec(self) -> LeverSpec:
        return lever_specs()[self.id]

    def sites(self, state: SimState) -> Applicability:
        raise NotImplementedError

    def transform(self, obs: Observation) -> Edit:
        raise NotImplementedError

    def not_applicable(self, obs: Observation) -> tuple[str, int] | None:
        """Where the trace shows the program lacks what this lever tunes (cudnn.benchmark with
        no cuDNN convolution, a prebuilt engine): (the reason, the rows it would otherwise act
        on); None where the lever may apply (the default: the device check and the
        transform decide)."""
        return None

    def apply(self, state: SimState) -> SimState:
        raise NotImplementedError


def same_name_run(dag: ReplayDag, run: list[int]) -> bool:
    return len(run) >= FOREACH_MIN_RUN and len({dag.d_name[d] for d in run}) == 1


def stem(name: str) -> str:
    m = re.search(r"<([^>]+)>", name)
    return re.sub(r"\W+", "_", m.group(1) if m else name)[:40]


@functools.lru_cache(maxsize=65536)
def is_layout_transform(name: str) -> bool:
    return LAYOUT.search(name) is not None


def state_hw(state: SimState) -> Any:
    """The simulated device's spec (for geometry-dependent sites)."""
    from engine.manifest import load_hardware

    return load_hardware()
