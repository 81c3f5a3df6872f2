"""Online EESM decoding for live data: per-stream fixed-lag Viterbi and a trailing κ window.

Segments arrive in batches; a row's label becomes final L rows later on its stream (L =
``fixed_lag`` in manifests/eesm.json). Until the numba kernels are compiled (``use_numba``
False) the numpy references do the same work, so the dashboard shows regimes at once. The
embedding and the emissions are numpy either way (vectorised, a small share of a push).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from dataclasses import dataclass

import numpy as np

from engine.eesm import emission, kappa, viterbi
from engine.eesm.pipeline import EesmModel, pressures, row_labels
from engine.jit import cold, compile_elsewhere, prepare_loading, wait_compiled
from engine.trace.segments import Segments


@dataclass(frozen=True)
class FinalRows:
    """Rows of one stream whose labels became final, in stream order."""

    stream: int
    start_ns: np.ndarray
    end_ns: np.ndarray
    name: np.ndarray
    klass: np.ndarray
    #: uint8 Label: the decoded regime, or COPY / COMM for what is not a kernel's regime
    labels: np.ndarray
    exact: np.ndarray  # bool: provably the batch Viterbi's label on the same emissions
    kappa: np.ndarray  # float32
    degenerate: np.ndarray  # bool
    truth: np.ndarray | None = None  # simulator ground truth, for validation only


#: the only kernels live decoding compiles: the per-row loops numpy cannot vectorise
LIVE_KERNELS = (viterbi.fixed_lag_push, viterbi.fixed_lag_flush, kappa._kappa_groups)

_META = ("start_ns", "end_ns", "name", "klass", "kind")


class _StreamState:
    def __init__(self, S: int, L: int, window: int) -> None:
        self.delta = np.zeros(S)
        self.ring = np.zeros((L, S), np.int8)
        self.seen = 0
        self.window = window
        self.hist = np.zeros((0, 3))
        self.pending: dict[str, np.ndarray] = {}

    def append(self, cols: dict[str, np.ndarray]) -> None:
        for k, v in cols.items():
            old = self.pending.get(k)
            self.pending[k] = v if old is None else np.concatenate([old, v])

    def pop(self, n: int) -> dict[str, np.ndarray]:
        out = {k: v[:n] for k, v in self.pending.items()}
        self.pending = {k: v[n:] for k, v in self.pending.items()}
        return out


class LiveDecoder:
    """Fixed-lag decoder over a stream of Segments batches (one instance per device)."""

    def __init__(self, model: EesmModel | None = None, use_numba: bool = False) -> None:
        self.model = model or EesmModel.build()
        self.use_numba = use_numba
        self.lag = self.model.params.fixed_lag
        self._streams: dict[int, _StreamState] = {}

    @property
    def pending_rows(self) -> int:
        """Return how many rows wait for their label (at most L per stream)."""
        return sum(len(s.pending.get("start_ns", ())) for s in self._streams.values())

    def push(self, seg: Segments, truth: np.ndarray | None = None) -> list[FinalRows]:
        """Feed a batch (any order); return the rows per stream whose labels became final."""
        m, kp = self.model, self.model.params.kappa
        # numpy whether or not numba is ready: vectorised, these take ~0.1 ms of a 4k-row push
        # (the numba path's 3 ms is the κ and Viterbi loops), and leaving them out of the live
        # kernels makes the first dashboard's compile ~1 s shorter
        P, _ = pressures(seg, m, use_numba=False)
        E = emission.emissions_affine_ref(P, m.W, m.c)
        order = np.lexsort((seg.start_ns, seg.stream))
        out: list[FinalRows] = []
        streams = seg.stream[order]
        cuts = np.flatnonzero(np.diff(streams)) + 1
        for rows in np.split(order, cuts):
            if rows.size == 0:
                continue
            sid = int(seg.stream[rows[0]])
            st = self._streams.get(sid)
            if st is None:
                st = self._streams[sid] = _StreamState(len(m.logpi), self.lag, kp.window)
            # κ over the trailing window: history + new rows, assigned to the new rows
            win = np.concatenate([st.hist, P[rows]])
            kfn = kappa.kappa_groups if self.use_numba else kappa.kappa_groups_ref
            k_all = kfn(
                win,
                np.arange(len(win), dtype=np.int64),
                np.array([0, len(win)], np.int64),
                kp.window,
                kp.stride,
                kp.min_count,
                kp.ridge,
            )
            st.hist = win[-(kp.window - 1) :] if kp.window > 1 else win[:0]
            cols = {c: getattr(seg, c)[rows] for c in _META}
            cols["kappa"] = k_all[-len(rows) :]
            if truth is not None:
                cols["truth"] = truth[rows]
            st.append(cols)
            labels = np.empty(len(rows), np.uint8)
            exact = np.empty(len(rows), np.bool_)
            push = viterbi.fixed_lag_push if self.use_numba else viterbi.fixed_lag_push_ref
            k = push(
                np.ascontiguousarray(E[rows]),
                m.logA,
                m.logpi,
                st.delta,
                st.ring,
                st.seen,
                labels,
                exact,
            )
            st.seen += len(rows)
            if k:
                out.append(self._final(sid, st.pop(k), labels[:k], exact[:k]))
        return out

    def flush(self) -> list[FinalRows]:
        """Finalise every pending row (end of the streams): labels equal the batch tail.

        The streams end here: a second flush has nothing to release, and a later push starts
        each stream afresh (before, a second flush re-released the last L labels with no rows).
        """
        out = []
        for sid, st in self._streams.items():
            labels = np.empty(self.lag, np.uint8)
            fl = viterbi.fixed_lag_flush if self.use_numba else viterbi.fixed_lag_flush_ref
            k = fl(st.delta, st.ring, st.seen, labels)
            if k:
                out.append(self._final(sid, st.pop(k), labels[:k], np.ones(k, np.bool_)))
        self._streams.clear()
        return out

    def _final(
        self, sid: int, cols: dict[str, np.ndarray], labels: np.ndarray, exact: np.ndarray
    ) -> FinalRows:
        with np.errstate(invalid="ignore"):
            deg = cols["kappa"] > self.model.params.kappa.k_max
        return FinalRows(
            stream=sid,
            start_ns=cols["start_ns"],
            end_ns=cols["end_ns"],
            name=cols["name"],
            klass=cols["klass"],
            labels=row_labels(cols["kind"], cols["klass"], labels),
            exact=exact.copy(),
            kappa=cols["kappa"],
            degenerate=deg,
            truth=cols.get("truth"),
        )


def warm_up() -> float:
    """Compile (or load from cache) the kernels live decoding uses; return the seconds taken.

    Only the live path: the batch kernels (``decode``, ``decode_fused``) compile on first use,
    so the dashboard switches to numba as early as possible.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    n = 64
    start = np.sort(rng.integers(0, 10_000, n)).astype(np.int64)
    seg = Segments.from_columns(
        start_ns=start,
        end_ns=start + 100,
        stream=rng.integers(0, 2, n),
        klass=rng.integers(0, 9, n),
        flops=rng.random(n) * 1e6,
        dram_bytes=rng.random(n) * 1e5,
        issue_active=rng.random(n),
        stall_frac=rng.random(n),
        occupancy=rng.random(n),
    )
    live = LiveDecoder(use_numba=True)
    live.push(seg)
    live.flush()
    return time.perf_counter() - t0


#: the live kernels' compile child and when it started (compile_early), None before any
_child: tuple[subprocess.Popen[bytes] | None, float] | None = None


def compile_early() -> None:
    """Start the child of ``warm_up_elsewhere`` now when the live kernels are cold and no
    child is compiling them: the dashboard calls this before Textual starts (~1.5 s of the
    app's start-up the child would otherwise wait for); the warm-up thread waits for it."""
    global _child
    running = _child is not None and _child[0] is not None and _child[0].poll() is None
    if not running and cold(LIVE_KERNELS):
        _child = (compile_elsewhere("engine.eesm.live"), time.perf_counter())


def warm_up_elsewhere() -> float:
    """``warm_up``, its compiling done by a child process when the kernels are not in numba's
    cache yet (``python -m engine.eesm.live``): on the other core, without holding this
    process's GIL — compiling in the dashboard's thread took 6.6 s to "numba ✓" here, the UI
    and the engine sharing the GIL with numba's type inference. Then this process loads what the
    child compiled; a child that fails leaves the compiling to ``warm_up`` here, as before.

    The seconds count from the compile's start: the child's, when one is still compiling (one
    started by ``compile_early`` included), else this call's."""
    t0 = time.perf_counter()
    compile_early()  # unless one is compiling already
    child, started = _child if _child is not None else (None, t0)
    if child is not None and child.poll() is None:
        t0 = min(t0, started)
        with contextlib.suppress(Exception):  # numba's internals changed: the loads pay it
            prepare_loading()  # meanwhile: the loads after the child then take milliseconds
        wait_compiled(child)
    warm_up()
    return time.perf_counter() - t0


if __name__ == "__main__":  # the child of warm_up_elsewhere: fill the cache
    from engine.jit import one_compiler

    with one_compiler("live"):  # another child compiling: wait, then load what it compiled
        warm_up()
