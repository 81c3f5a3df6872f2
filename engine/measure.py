"""The measurement protocol every optimize loop shares: warm-up found and left out, baseline and
candidate measured interleaved in pairs, a gain with its interval, and a gate that keeps only
what clears it.

Why this shape. A busy machine's speed moves by tens of percent within a minute (another job
starts, the CPU's clock drops, the page cache is evicted). Measuring the baseline once and each
candidate later compares two different machines; the loop then keeps a slowdown measured in a
quiet minute against a baseline measured in a loaded one. So:

- **Warm-up** (first iterations, allocator, oneDNN/Inductor set-up, page faults) is detected in
  each series of step times by MSER truncation (White 1997; MSER-5 for long series): the start
  that minimises the standard error of what remains, searched over the first half
  (``warmup_max_share``). It is dropped, not counted.
- **Pairs**: blocks of A (the current configuration) and B (with the lever) alternate A B, B A,
  A B … so a load that rises or falls during the trial weighs on both arms alike; each pair
  gives one log-ratio. Block-to-block drift cancels within a pair; what is left is the pairs'
  spread.
- **Gain and interval**: the mean log-ratio with a Student-t interval over the pairs (the
  paired t-test on log-ratios, stated in the report), mapped to a relative gain (1 − B/A for a
  time, B/A − 1 for a metric to maximise). The interval is ``level`` two-sided.
- **Verdict**: kept only when the interval's lower end clears ``min_gain``; a slowdown when its
  upper end is below zero; otherwise "cannot tell" — never kept.
- **Noise gate** (``plan``): before any lever, the same pairs of A against A measure how much
  the machine moves. From their spread follows how many pairs a lever needs for the target to
  be measurable (half-width ≤ ``resolution`` × target); when that does not fit in the budget,
  the run says so at once with the figures instead of running trials that cannot pass.

Parameters: manifests/measurement.json (each with its reason). Pure numpy/scipy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from engine.manifest import MeasurementParams, load_measurement

Goal = Literal["min", "max"]


def params() -> MeasurementParams:
    return load_measurement()


# ---------------------------------------------------------------------- warm-up
def steady_start(
    xs: Sequence[float] | np.ndarray, batch: int | None = None, max_share: float | None = None
) -> int:
    """Index of the first sample of the steady state of ``xs`` (0 when there is no warm-up to
    drop): MSER truncation — the start ``d`` that minimises Σ_{i≥d}(x_i − x̄_d)² / (n − d)²,
    searched over the first ``max_share`` of the series. Series of 10 × ``batch`` samples or
    more are batched by ``batch`` first (MSER-5), so step-to-step jitter does not pick the
    start; the start returned is in samples."""
    p = params()
    batch = p.warmup_batch if batch is None else batch
    share = p.warmup_max_share if max_share is None else max_share
    x = np.asarray(xs, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = len(x)
    if n < 4:
        return 0
    m = batch if n >= 10 * batch else 1
    if m > 1:
        k = n // m
        y = x[: k * m].reshape(k, m).mean(axis=1)
    else:
        y = x
    k = len(y)
    # suffix sums give every truncation's SSE in one pass
    rev = y[::-1]
    s1 = np.cumsum(rev)[::-1]
    s2 = np.cumsum(rev * rev)[::-1]
    cnt = np.arange(k, 0, -1, dtype=np.float64)
    sse = s2 - s1 * s1 / cnt
    stat = sse / (cnt * cnt)
    last = max(1, int(k * share))
    d = int(np.argmin(stat[:last]))
    return d * m


def steady_mean(xs: Sequence[float] | np.ndarray) -> tuple[float, int]:
    """(mean of the steady part of ``xs``, how many leading samples were dropped as warm-up);
    NaN for an empty series."""
    if not len(xs):
        return math.nan, 0
    d = steady_start(xs)
    rest = np.asarray(xs[d:], dtype=np.float64)
    return float(rest.mean()), d


# ---------------------------------------------------------------------- warm-up across launches
def trend(xs: Sequence[float] | np.ndarray, level: float | None = None) -> tuple[float, float]:
    """(slope, the half-width of its interval at ``level``) of ``xs``, in log terms: the
    least-squares slope of log(x) against the sample's index (exp(slope) − 1 is the relative
    change per sample) with its Student-t interval (n − 2 degrees of freedom). (NaN, inf)
    under 3 positive values."""
    x = np.asarray(xs, dtype=np.float64)
    if len(x) < 3 or not (np.isfinite(x).all() and (x > 0).all()):
        return math.nan, math.inf
    y = np.log(x)
    i = np.arange(len(y), dtype=np.float64)
    i -= i.mean()
    sxx = float(i @ i)
    slope = float(i @ (y - y.mean())) / sxx
    resid = y - y.mean() - slope * i
    se = math.sqrt(float(resid @ resid) / (len(y) - 2) / sxx)
    lvl = params().level if level is None else level
    return slope, _t(len(y) - 2, lvl) * se


def settle_point(xs: Sequence[float], need: int) -> tuple[int, bool]:
    """Where a relaunched program's steady state starts in its launch values ``xs`` (in
    order), and whether it has been reached. MSER (``steady_start``, the rule for steps within
    a process) finds where the warm-up ends; the launches after it are steady when there are
    ``need`` of them, they show no trend (a slope whose interval holds zero, or one that moves
    them by less than ``min_gain`` over their length) and MSER's start is not at the edge of
    its search (there it may want to drop more: a warm-up still going on). The start returned
    is 0 when the launches before MSER's start do not differ from the rest beyond the noise
    (``warmed``): noise alone moves MSER's start on short series, and is no warm-up."""
    d = steady_start(xs)
    warm = warmed(xs, d)
    at_edge = warm and d >= _search_end(len(xs)) - 1  # it may want to drop more
    if not warm:
        d = 0  # a start that drops only noise: none
    tail = list(xs[d:])  # the trend is judged on what MSER keeps
    start = _back_to(xs, d) if warm else 0  # the warm-up's own launches
    if len(xs) - start < need:
        return start, False
    slope, half = trend(tail)
    if not math.isfinite(slope):
        return start, False
    moved = abs(math.expm1(slope * (len(tail) - 1)))  # first to last, along the slope
    flat = abs(slope) <= half or moved < params().min_gain
    return start, flat and not at_edge


def _back_to(xs: Sequence[float], d: int) -> int:
    """MSER's start moved back over the launches just before it that look like the steady
    ones (within 4 standard deviations of the steady launches' logs: a warm-up launch lies
    far outside, a steady one almost never): MSER often drops a steady launch or two with the
    warm-up, and the report names the warm-up's launches."""
    y = np.log(np.asarray(xs, dtype=np.float64))
    rest = y[d:]
    if len(rest) < 3:
        return d
    mid, sd = float(rest.mean()), float(rest.std(ddof=1))
    reach = 4.0 * sd
    while d > 0 and abs(y[d - 1] - mid) <= reach:
        d -= 1
    return d


def _search_end(n: int) -> int:
    """The first start, in samples, that ``steady_start`` does not search on ``n`` samples."""
    p = params()
    m = p.warmup_batch if n >= 10 * p.warmup_batch else 1
    return max(1, int((n // m) * p.warmup_max_share)) * m


def warmed(xs: Sequence[float], d: int) -> bool:
    """Whether the first ``d`` values differ from the rest beyond the rest's own spread (a t
    test on logs at ``level``, the rest's spread taken for both) and by at least ``min_gain``."""
    x = np.asarray(xs, dtype=np.float64)
    if d <= 0 or len(x) - d < 3 or not (np.isfinite(x).all() and (x > 0).all()):
        return False
    y = np.log(x)
    warm, rest = y[:d], y[d:]
    diff = float(warm.mean() - rest.mean())
    sd = float(rest.std(ddof=1))
    se = sd * math.sqrt(1 / len(warm) + 1 / len(rest))
    if abs(math.expm1(diff)) < params().min_gain:
        return False
    return se == 0 or abs(diff) > _t(len(rest) - 1, params().level) * se


class LaunchSeries:
    """A relaunched program's baseline launches, judged as they come: launched until they look
    steady (``settle_point`` over at least ``FIRST``, the 2 pairs an A/A needs at the least),
    then ``aa_pairs`` pairs more. Those later launches test the warm-up too: MSER over every
    launch must still find the series steady, else the warm-up was longer than it looked (a
    program slow for its first 8 launches looks steady at launch 4) and launching goes on until
    the whole series settles. The A/A is then every launch after the warm-up (the latest, an
    even count). ``add`` each launch's value; ``done`` once the A/A is complete."""

    FIRST = 4

    def __init__(self) -> None:
        self.values: list[float] = []
        self.steady_at: int | None = None  # how many launches there were when first steady
        self.start = 0  # the first steady launch (0-based), as last judged
        self.done = False

    def add(self, value: float) -> bool:
        """One more launch; True once the A/A is complete."""
        self.values.append(value)
        if self.steady_at is None:
            self.start, ok = settle_point(self.values, self.FIRST)
            if ok:
                self.steady_at = len(self.values)
            return False
        need = 2 * params().aa_pairs
        if len(self.values) - self.steady_at < need:
            return False
        self.start, self.done = settle_point(self.values, need)
        return self.done

    def aa(self) -> tuple[int, int]:
        """(first, end) indices of the launches the A/A pairs: those after the warm-up, the
        latest of them an even count, at least the last ``FIRST`` (a series that ended
        unsettled has no steady part to speak of)."""
        n = len(self.values)
        first = min(self.start, max(0, n - self.FIRST))
        return first + (n - first) % 2, n


@dataclass(frozen=True)
class Settling:
    """A relaunched program's baseline launches until they were steady: their values in
    order, the first steady launch (0-based: the ones before it are the warm-up), and whether
    the steady state was reached (None: too few launches fit to tell)."""

    values: tuple[float, ...]
    start: int
    settled: bool | None
    seconds: float = 0.0  # the launches' wall time in all
    goal: Goal = "min"
    why: str = ""  # what ended the search when it did not settle

    @property
    def ratio(self) -> float:
        """The warm-up's mean over the steady launches' (NaN with no warm-up)."""
        warm, rest = self.values[: self.start], self.values[self.start :]
        if not warm or not rest:
            return math.nan
        return float(np.mean(warm) / np.mean(rest))

    def text(self) -> str:
        """What the report and the log say of the warm-up, in launches (1-based)."""
        n, d = len(self.values), self.start
        if self.settled is None:
            if n == 0:
                return (
                    f"no launch finished within the time ({self.seconds:.1f} s): the baseline "
                    "is unknown"
                )
            fit = "only 1 launch fits" if n == 1 else f"only {n} launches fit"
            return (
                f"{fit} in the time ({self.seconds:.1f} s): whether the program's launch times "
                "settle cannot be told; the A/A takes the last of them"
            )
        if self.settled is False:
            slope, _ = trend(self.values)
            way = "rising" if slope > 0 else "falling"
            moved = math.expm1(slope * (n - 1))
            return (
                f"the program's metric did not settle over {n} launches ({self.seconds:.1f} s, "
                f"{self.why}): it kept {way}, by {abs(math.expm1(slope)):.1%} per launch "
                f"({moved:+.0%} from the first to the last along the trend) — a trend, not noise"
            )
        if d == 0:
            return f"launches steady from the first ({n} launched, no trend)"
        which = "launch 1 was" if d == 1 else f"launches 1–{d} were"
        r = self.ratio
        worse = r >= 1 if self.goal == "min" else r <= 1
        if self.goal == "min":
            how = f"{r:.2g}× slower" if r >= 1 else f"{1 / r:.2g}× faster"
        else:
            how = f"{1 / r:.2g}× lower" if r <= 1 else f"{r:.2g}× higher"
        what = "a warm-up" if worse else "not a warm-up: the program or the machine changed"
        return f"{which} {how} than the rest: {what}; measuring from launch {d + 1}"

    def to_json(self) -> dict[str, Any]:
        return {
            "launches": len(self.values),
            "warmup_launches": self.start,
            "settled": self.settled,
            "seconds": self.seconds,
            "values": [finite_or_none(x) for x in self.values],
            "ratio": finite_or_none(self.ratio),
            "text": self.text(),
        }


def in_time_order(c: Comparison) -> list[float]:
    """The blocks of ``c`` in the order they were measured (``interleave``: A B, B A, …)."""
    out: list[float] = []
    for i in range(c.n):
        out += [c.a[i], c.b[i]] if i % 2 == 0 else [c.b[i], c.a[i]]
    return out


# ---------------------------------------------------------------------- two speed modes
#: modes this far apart (ratio of their medians) are two modes, not noise
MODES_APART = 1.5


def two_modes(values: Sequence[float], goal: Goal = "min") -> str:
    """'' unless the blocks ``values`` (in the order measured) fall in two groups: the widest
    gap between their sorted logs at least MODES_APART wide and more than 3 times either
    group's own spread, with at least 2 blocks on each side (one block apart is an outlier,
    not a mode). Else what was seen — which blocks, how far apart, what their pattern in time
    points to — for the report: a mean over two modes describes neither."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 4 or not (np.isfinite(x).all() and (x > 0).all()):
        return ""
    y = np.log(x)
    order = np.argsort(y, kind="stable")
    ys = y[order]
    gaps = np.diff(ys)
    k = int(np.argmax(gaps))
    low, high = ys[: k + 1], ys[k + 1 :]
    if len(low) < 2 or len(high) < 2 or gaps[k] < math.log(MODES_APART):
        return ""
    spread = max(float(low.std(ddof=1)), float(high.std(ddof=1)), 0.01)
    if gaps[k] <= 3 * spread:
        return ""
    hi_blocks = sorted(int(i) + 1 for i in order[k + 1 :])  # 1-based, in time order
    lo_blocks = sorted(int(i) + 1 for i in order[: k + 1])
    ratio = math.exp(float(np.median(high) - np.median(low)))
    slow = hi_blocks if goal == "min" else lo_blocks
    fast = lo_blocks if goal == "min" else hi_blocks
    first, last = slow[0], slow[-1]
    if last - first + 1 == len(slow):
        where = (
            "they are consecutive: something changed during the run (another job started or "
            "stopped, the clock or thermal state changed)"
        )
    elif all(b % 2 == slow[0] % 2 for b in slow) and len(slow) == len(x) // 2:
        where = (
            "they alternate with the others: something the measuring itself does every other block"
        )
    else:
        where = (
            "they are scattered: something some blocks hit and others do not (a recompile or "
            "re-autotune on a new shape, a cache or page-cache miss, a data-dependent path such "
            "as another batch size, or another process taking the cores in bursts)"
        )

    def _list(b: list[int]) -> str:
        return ", ".join(map(str, b[:12])) + ("…" if len(b) > 12 else "")

    return (
        f"two speed modes: A/A blocks {_list(slow)} are {ratio:.3g}× slower than blocks "
        f"{_list(fast)} (medians {float(np.median(x[[i - 1 for i in slow]])):.4g} and "
        f"{float(np.median(x[[i - 1 for i in fast]])):.4g}); {where} — no mean of the two is a "
        "baseline"
    )


# ---------------------------------------------------------------------- pairs
def _t(df: int, level: float) -> float:
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.5 + level / 2))


def _to_gain(log_gain: float, goal: Goal) -> float:
    """A mean log-ratio (positive = better) as a relative gain: 1 − B/A for a time (``min``),
    B/A − 1 for a metric to maximise."""
    if goal == "min":
        return 1.0 - math.exp(-log_gain) if log_gain > -700 else -math.inf
    return math.exp(log_gain) - 1.0 if log_gain < 700 else math.inf


@dataclass(frozen=True)
class Comparison:
    """B against A over interleaved pairs (each pair one A block and one B block)."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    goal: Goal = "min"
    level: float = 0.95

    @property
    def n(self) -> int:
        return min(len(self.a), len(self.b))

    @property
    def log_gains(self) -> np.ndarray:
        """Per pair: log(A/B) for a time, log(B/A) for a metric to maximise (positive =
        better)."""
        a = np.asarray(self.a[: self.n], dtype=np.float64)
        b = np.asarray(self.b[: self.n], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(a / b) if self.goal == "min" else np.log(b / a)
        return r

    @property
    def valid(self) -> bool:
        """Whether the pairs give a finite mean (every value positive and finite)."""
        a = np.asarray(self.a[: self.n], dtype=np.float64)
        b = np.asarray(self.b[: self.n], dtype=np.float64)
        return (
            self.n > 0
            and bool(np.isfinite(a).all() and np.isfinite(b).all())
            and bool((a > 0).all() and (b > 0).all())
        )

    @property
    def mean_log(self) -> float:
        return float(self.log_gains.mean()) if self.valid else math.nan

    @property
    def sd_log(self) -> float:
        """The pairs' spread of log-ratios (sample standard deviation); NaN under 2 pairs."""
        if not self.valid or self.n < 2:
            return math.nan
        return float(self.log_gains.std(ddof=1))

    @property
    def half_log(self) -> float:
        """Half-width of the interval of the mean log-ratio; inf under 2 pairs."""
        if not self.valid:
            return math.nan
        if self.n < 2:
            return math.inf
        return _t(self.n - 1, self.level) * self.sd_log / math.sqrt(self.n)

    @property
    def gain(self) -> float:
        return _to_gain(self.mean_log, self.goal) if self.valid else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        """(lower, upper) of the gain at ``level``."""
        if not self.valid:
            return math.nan, math.nan
        m, h = self.mean_log, self.half_log
        return _to_gain(m - h, self.goal), _to_gain(m + h, self.goal)

    @property
    def a_mean(self) -> float:
        return float(np.mean(self.a)) if self.a else math.nan

    @property
    def b_mean(self) -> float:
        return float(np.mean(self.b)) if self.b else math.nan

    def text(self) -> str:
        """'+12.3 % [+8.1 … +16.2] (95 %, 6 pairs)'."""
        if not self.valid:
            return "no valid pairs"
        lo, hi = self.interval
        return (
            f"{_pct(self.gain)} [{_pct(lo)} … {_pct(hi)}] "
            f"({self.level:.0%}, {self.n} pair{'s' if self.n != 1 else ''})"
        )

    def to_json(self) -> dict[str, Any]:
        lo, hi = self.interval
        return {
            "gain": finite_or_none(self.gain),
            "low": finite_or_none(lo),
            "high": finite_or_none(hi),
            "pairs": self.n,
            "level": self.level,
            "a": [finite_or_none(x) for x in self.a],
            "b": [finite_or_none(x) for x in self.b],
            "method": "paired t interval on log-ratios of interleaved blocks",
        }


def finite_or_none(x: object) -> float | None:
    """A number for JSON (which has no NaN or Infinity): the float, or None."""
    if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x):
        return float(x)
    return None


def _pct(x: float) -> str:
    """A relative gain as a percentage; a time more than doubled (a gain of −100 % or less)
    reads as a factor ("3.4× slower"), which a person takes in where "−240 %" is opaque."""
    if not math.isfinite(x):
        return "−∞ %" if x < 0 else "+∞ %" if x > 0 else "n/a"
    if x <= -1.0:
        return f"{1 - x:.3g}× slower"
    return f"{x:+.1%}"


@dataclass
class Block:
    """One measured block: its value (time per sample, or the program's metric), or why it
    failed; ``raw`` is the loop's own measurement object (a trace, step times)."""

    value: float
    ok: bool = True
    reason: str = ""
    raw: Any = None


@dataclass
class PairedRun:
    """What ``interleave`` measured: the comparison, every block, and the first failure."""

    comparison: Comparison
    a_blocks: list[Block] = field(default_factory=list)
    b_blocks: list[Block] = field(default_factory=list)
    failed: Block | None = None
    failed_arm: str = ""  # "A" | "B"

    def joined(self, more: PairedRun) -> PairedRun:
        """This run followed by ``more`` (measured with ``interleave(..., start=n)``): one
        comparison over every pair, the later run's failure if any."""
        c = self.comparison
        return PairedRun(
            Comparison(c.a + more.comparison.a, c.b + more.comparison.b, c.goal, c.level),
            self.a_blocks + more.a_blocks,
            self.b_blocks + more.b_blocks,
            more.failed,
            more.failed_arm,
        )


def interleave(
    run_a: Callable[[], Block],
    run_b: Callable[[], Block],
    pairs: int,
    goal: Goal = "min",
    keep_going: Callable[[], bool] | None = None,
    at_least: int = 0,
    start: int = 0,
) -> PairedRun:
    """Measure ``pairs`` pairs in the order A B, B A, A B, … (each pair one block of each arm;
    the arm that ends one pair starts the next, so each switch serves two blocks). Stops at the
    first failed block (``failed``) or when ``keep_going()`` turns false before a pair (the
    budget) — except for the first ``at_least`` pairs: the comparison holds the pairs
    completed. ``start``: the pairs already measured, when this run continues another (the
    order goes on where it left off)."""
    out = PairedRun(Comparison((), (), goal, params().level))
    a_vals: list[float] = []
    b_vals: list[float] = []
    for i in range(pairs):
        if i >= at_least and keep_going is not None and not keep_going():
            break
        first_a = (i + start) % 2 == 0
        order = (("A", run_a), ("B", run_b)) if first_a else (("B", run_b), ("A", run_a))
        got: dict[str, Block] = {}
        for arm, run in order:
            blk = run()
            if not blk.ok or not (math.isfinite(blk.value) and blk.value > 0):
                if blk.ok:
                    blk = Block(blk.value, False, f"measured {blk.value!r}, not a positive number")
                out.failed, out.failed_arm = blk, arm
                break
            got[arm] = blk
        if out.failed is not None:
            break
        out.a_blocks.append(got["A"])
        out.b_blocks.append(got["B"])
        a_vals.append(got["A"].value)
        b_vals.append(got["B"].value)
    out.comparison = Comparison(tuple(a_vals), tuple(b_vals), goal, params().level)
    return out


# ---------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    """The gate's reading of one comparison."""

    keep: bool
    kind: Literal["faster", "slower", "cannot tell", "below threshold", "invalid"]
    note: str


def verdict(c: Comparison, min_gain: float | None = None) -> Verdict:
    """Keep only when the interval's lower end clears ``min_gain``; a slowdown when its upper
    end is below zero; otherwise say it cannot be told (not kept)."""
    mg = params().min_gain if min_gain is None else min_gain
    if not c.valid or c.n < 2:
        return Verdict(
            False,
            "invalid",
            f"cannot tell: {c.n} pair(s) measured before the time ran out, at least 2 needed",
        )
    lo, hi = c.interval
    if lo > mg:
        return Verdict(True, "faster", f"kept: {c.text()}, clear of the {mg:.0%} threshold")
    if hi < 0:
        return Verdict(False, "slower", f"slower: {c.text()}")
    if lo > 0:
        return Verdict(
            False,
            "below threshold",
            f"faster but by less than the {mg:.0%} worth keeping: {c.text()}",
        )
    return Verdict(False, "cannot tell", f"cannot tell: {c.text()} includes no change")


# ---------------------------------------------------------------------- the noise gate
@dataclass(frozen=True)
class NoisePlan:
    """What the A/A says: how many pairs each lever gets, and whether the target can be
    measured at all in the time left."""

    aa: Comparison
    pairs: int  # per lever
    half: float  # the interval's half-width (as a gain) expected with ``pairs`` pairs
    pair_s: float  # seconds one pair took in the A/A
    measurable: bool
    needed_pairs: int  # for the target (may exceed max_pairs)
    diagnosis: str = ""  # why not measurable, with what would help
    #: whether a trial can pass at all with ``pairs`` (an effect a lever can have clears the
    #: interval); False: no lever is tried
    triable: bool = True
    tried: str = ""  # what follows for the trials when the target is not measurable
    #: a baseline with no one value to measure against — a relaunched program whose launches
    #: did not settle, or blocks in two speed modes: what was seen (else '')
    unsettled: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "unsettled": self.unsettled,
            "aa": self.aa.to_json(),
            "pairs": self.pairs,
            "half_width": finite_or_none(self.half),
            "pair_s": self.pair_s,
            "measurable": self.measurable,
            "needed_pairs": self.needed_pairs,
            "diagnosis": self.diagnosis,
            "triable": self.triable,
            "tried": self.tried,
        }


def half_width(sd_log: float, n: int, level: float, goal: Goal = "min") -> float:
    """The half-width, as a gain, of the interval ``n`` pairs with spread ``sd_log`` give
    around no change."""
    if n < 2 or not math.isfinite(sd_log):
        return math.inf
    h = _t(n - 1, level) * sd_log / math.sqrt(n)
    return abs(_to_gain(h, goal))


def pairs_to_decide(c: Comparison, threshold: float, margin: float = 0.8) -> int:
    """How many pairs in all (at most ``max_pairs``) the comparison ``c`` needs for its
    interval to fall on one side of the gain ``threshold`` (a run's target), from its own mean
    and spread: the fewest whose half-width is at most ``margin`` × the distance between the
    mean and the threshold, in log terms (the margin allows for a spread estimated from few
    pairs). ``c.n`` when the interval already decides, or when it cannot be told (under 2
    valid pairs).

    One extension sized this way is a two-stage design: the second look uses every pair, so
    the stated level holds only approximately (the chance of a wrong call rises a little over
    the nominal 5 %, Pocock 1977); a run that extends says so in its report."""
    p = params()
    if not c.valid or c.n < 2 or not math.isfinite(c.sd_log):
        return c.n
    lo, hi = c.interval
    if not lo < threshold <= hi:
        return c.n
    g = threshold if c.goal == "max" else -threshold
    t_log = math.log1p(g) * (1 if c.goal == "max" else -1) if g > -1 else math.inf
    d = abs(c.mean_log - t_log) * margin
    n = c.n
    while n < p.max_pairs and (d <= 0 or _t(n - 1, c.level) * c.sd_log / math.sqrt(n) > d):
        n += 1
    return max(n, c.n)


def _untriable(
    aa: Comparison, pair_s: float, diagnosis: str, because: str, unsettled: str = ""
) -> NoisePlan:
    """A plan under which no lever is tried (``because``), whatever the target."""
    p = params()
    return NoisePlan(
        aa, p.min_pairs, math.inf, pair_s, False, p.max_pairs, diagnosis, False,
        f"no lever is tried: {because}", unsettled,
    )  # fmt: skip


def plan(
    aa: Comparison,
    target: float,
    pair_s: float,
    time_left_s: float,
    trials: int = 1,
    settling: Settling | None = None,
) -> NoisePlan:
    """Pairs per lever from the A/A's spread: the fewest (at least ``min_pairs``) whose
    interval half-width is at most ``resolution`` × ``target``. Not measurable when that needs
    more than ``max_pairs``, or more time than ``time_left_s`` holds for one trial and the
    final re-measure; the diagnosis then gives the figures and what would help, and levers are
    tried with the pairs that fit only when an effect of up to ``max_plausible_gain`` could
    clear their interval (``triable``). A relaunched program whose launches did not settle
    (``settling``) is not measurable whatever the A/A says: a trend is not noise, and pairs
    measured on it compare two moments of the trend."""
    p = params()
    goal = aa.goal
    modes = two_modes(in_time_order(aa), goal) if aa.valid else ""
    if modes or (settling is not None and settling.settled is False):
        seen = modes or (settling.text() if settling is not None else "")
        helps = (
            "a machine where every block runs alike (stop what else runs on it), a fixed "
            "input shape per step, or warm caches and compiled code before the run"
            if modes
            else "a program whose launches reach a steady time (warm its caches before the "
            "run, or make each launch do the same work), or a larger --budget if it settles later"
        )
        return _untriable(
            aa,
            pair_s,
            f"a {target:.0%} gain cannot be measured here: {seen}. What would help: {helps}",
            "two speed modes" if modes else "the launches never settled",
            seen,
        )
    sd = aa.sd_log if aa.valid and aa.n >= 2 else math.nan
    want = p.resolution * target
    if not math.isfinite(sd):
        return _untriable(
            aa,
            pair_s,
            "the A/A measurement did not complete, so the machine's noise is unknown",
            "the machine's noise is unknown",
        )
    # the spread of the A/A is itself estimated from few pairs: its upper confidence bound
    # would be more cautious still; the trial's own interval is what the gate reads, so the
    # plan takes the point estimate and the verdict stays honest either way
    needed = p.min_pairs
    while needed < 10_000 and half_width(sd, needed, p.level, goal) > want:
        needed += 1
    pairs = min(max(p.min_pairs, needed), p.max_pairs)
    half = half_width(sd, pairs, p.level, goal)
    per_trial = time_left_s / max(pair_s, 1e-9) / max(1, trials + 1)
    fits = int(min(per_trial, 1e9)) if per_trial > 0 else 0
    aa_text = (
        f"the A/A moves {aa.text()} (pair-to-pair spread {sd:.1%} in log terms; one pair of "
        f"blocks takes {pair_s:.3g} s)"
    )
    if needed > p.max_pairs or needed > fits:
        count = f"{needed:,}" if needed < 10_000 else "over 10,000"
        why = (
            f"needs {count} pairs per lever"
            + (f" (more than the {p.max_pairs} allowed)" if needed > p.max_pairs else "")
            + (f"; the time left holds about {fits} per trial" if needed > fits else "")
        )
        # levers are still tried with the pairs that fit, when an effect a lever can have
        # could clear the wider interval they give: only such a large effect is kept
        pairs = min(pairs, fits)
        half = half_width(sd, pairs, p.level, goal)
        triable = pairs >= 2 and half < p.max_plausible_gain
        diag = (
            f"a {target:.0%} gain cannot be measured here: {aa_text}; resolving {target:.0%} to "
            f"±{want:.1%} {why}. What would help: a quieter machine (stop other work on it), "
            "longer blocks (more steps or a longer run per measurement), a larger --budget, "
            "or a larger --target"
        )
        tried = (
            f"levers are tried with {pairs} pairs each: only an effect beyond about "
            f"±{half:.0%} can show"
            if triable
            else "no lever is tried: with the pairs that fit, not even a lever that removed "
            f"{p.max_plausible_gain:.0%} of the time could show"
        )
        return NoisePlan(aa, pairs, half, pair_s, False, needed, diag, triable, tried)
    return NoisePlan(aa, pairs, half, pair_s, True, needed)
