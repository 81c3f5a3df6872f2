"""Decoded rows on their way to the subscribers: each tagged with the workload configuration it
ran under, counted into the run's totals, published as ``DecodedBatch`` / ``KappaUpdate``."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.eesm import metrics
from engine.eesm.kappa import partition_counts, partition_shares
from engine.eesm.live import FinalRows
from engine.eesm.pipeline import Decoded, row_labels
from engine.regimes import N_LABELS, N_REGIMES, Label
from engine.runtime.bus import EventBus
from engine.runtime.events import DecodedBatch, KappaUpdate, Progress
from engine.trace.segments import Segments


class Tracker:
    """Running totals for progress and the final summary (truth used for scoring only)."""

    def __init__(self, k_max: float) -> None:
        self.k_max = k_max
        self.rows = 0
        self.counts = np.zeros(N_LABELS, np.int64)
        self.exact = 0
        self.conf = np.zeros((N_REGIMES, N_REGIMES), np.int64)
        self.part: dict[int, np.ndarray] = {}  # stream -> [M_id, M_deg, undetermined]

    def add(self, f: FinalRows) -> None:
        self.rows += len(f.labels)
        self.counts += np.bincount(f.labels, minlength=N_LABELS)
        self.exact += int(f.exact.sum())
        p = self.part.setdefault(f.stream, np.zeros(3, np.int64))
        p += partition_counts(f.kappa, f.degenerate)
        if f.truth is not None:
            # scored on decoded rows only: a copy or collective is labelled by what it is
            dec = f.labels < N_REGIMES
            self.conf += metrics.confusion(f.truth[dec], f.labels[dec])

    def shares(self) -> dict[str, float]:
        """Share of rows per regime, and per COPY / COMM label where there are any."""
        n = max(1, self.rows)
        return {r.name: float(self.counts[r]) / n for r in Label if r < N_REGIMES or self.counts[r]}

    def stream_partition(self, stream: int) -> dict[str, float]:
        """One stream's κ partition, keyed as ``KappaUpdate``'s fields (m_id, m_deg, …)."""
        return {k.lower(): v for k, v in partition_shares(self.part[stream]).items()}

    def partition(self) -> dict[str, float]:
        return partition_shares(sum(self.part.values(), np.zeros(3, np.int64)))

    def exact_share(self) -> float:
        return self.exact / self.rows if self.rows else float("nan")

    def validation(self) -> dict[str, Any]:
        if not self.conf.sum():
            return {}
        return {
            "against": "simulator ground truth",
            "macro_f1": metrics.macro_f1(self.conf),
            "accuracy": metrics.accuracy(self.conf),
            "recall": metrics.recall(self.conf),
        }


class NamesHolder:
    """Gives a capture session's name table the ``.names`` shape ``DecodedStream.publish``
    reads (a simulated GPU has its own)."""

    names: Any = None


class DecodedStream:
    """The run's decoded rows: which configuration each ran under, the totals, the events.

    The live decoder releases rows a fixed lag after they were pushed — possibly after the
    configuration changed — so ``note_pushed`` records, per stream, how many rows went in under
    each configuration and ``configs_of`` splits released rows back along those counts."""

    def __init__(self, bus: EventBus, clock: Callable[[], float], k_max: float) -> None:
        self.bus = bus
        self.clock = clock
        self.tracker = Tracker(k_max)
        #: the configuration rows pushed now run under ("baseline", "baseline + cuda_graphs"…)
        self.config = ""
        # per stream: [configuration, rows] in push order
        self._pushed: dict[int, deque[list[Any]]] = {}

    def note_pushed(self, seg: Segments) -> None:
        """Record how many rows of each stream go to the decoder under the current
        configuration."""
        streams, counts = np.unique(seg.stream, return_counts=True)
        for sid, c in zip(streams.tolist(), counts.tolist(), strict=True):
            q = self._pushed.setdefault(sid, deque())
            if q and q[-1][0] == self.config:
                q[-1][1] += c
            else:
                q.append([self.config, c])

    def configs_of(self, stream: int, n: int) -> list[tuple[str, int, int]]:
        """Split the next n released rows of ``stream`` by the configuration they ran under."""
        q = self._pushed.get(stream)
        out, a = [], 0
        while a < n:
            if not q:  # rows never noted (cannot happen on the engine's paths): current config
                out.append((self.config, a, n))
                break
            cfg, left = q[0]
            take = min(left, n - a)
            if take == left:
                q.popleft()
            else:
                q[0][1] = left - take
            out.append((cfg, a, a + take))
            a += take
        return out

    def publish(self, finals: list[FinalRows], gpu: Any, config: str | None = None) -> None:
        """Publish final rows (``gpu.names`` names them); ``config`` names their configuration,
        else the rows are the live decoder's and ``configs_of`` says which each ran under."""
        tracker = self.tracker
        for f in finals:
            tracker.add(f)
            parts = (
                [(config, 0, len(f.labels))]
                if config is not None
                else self.configs_of(f.stream, len(f.labels))
            )
            for cfg, a, b in parts:
                self.bus.publish(
                    DecodedBatch(
                        t_wall=self.clock(),
                        stream=f.stream,
                        start_ns=f.start_ns[a:b],
                        end_ns=f.end_ns[a:b],
                        labels=f.labels[a:b],
                        degenerate=f.degenerate[a:b],
                        kappa=f.kappa[a:b],
                        names=tuple(gpu.names[int(i)] for i in f.name[a:b]),
                        config=cfg,
                    )
                )
            k = f.kappa[-1] if len(f.kappa) else np.nan
            part = tracker.stream_partition(f.stream)
            self.bus.publish(
                KappaUpdate(
                    t_wall=self.clock(),
                    stream=f.stream,
                    kappa=float(k),
                    k_max=tracker.k_max,
                    **part,
                )
            )

    def progress(self, gpu: Any, budget_s: float) -> None:
        """Publish the run's progress (rows decoded, iterations, simulated time)."""
        t = self.clock()
        self.bus.publish(
            Progress(
                t_wall=t,
                elapsed_s=t,
                budget_s=budget_s,
                segments=self.tracker.rows,
                iterations=gpu.iterations_done,
                sim_time_ns=int(gpu.now),
                regime_shares=self.tracker.shares(),
            )
        )


def final_rows(seg: Segments, dec: Decoded, truth: np.ndarray | None) -> list[FinalRows]:
    """A completely decoded trace as per-stream final rows (start order)."""
    order = np.lexsort((seg.start_ns, seg.stream))
    cuts = np.flatnonzero(np.diff(seg.stream[order])) + 1
    out = []
    for rows in np.split(order, cuts):
        if not len(rows):
            continue
        out.append(
            FinalRows(
                stream=int(seg.stream[rows[0]]),
                start_ns=seg.start_ns[rows],
                end_ns=seg.end_ns[rows],
                name=seg.name[rows],
                klass=seg.klass[rows],
                labels=row_labels(seg.kind[rows], seg.klass[rows], dec.labels[rows]),
                exact=np.ones(len(rows), np.bool_),
                kappa=dec.kappa[rows],
                degenerate=dec.degenerate[rows],
                truth=truth[rows] if truth is not None else None,
            )
        )
    return out
