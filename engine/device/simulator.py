"""Deterministic discrete-event simulator of one GPU running a workload's kernel graph.

Model (calibrated by manifests/h100_telemetry.json, cost terms in kernel_model.py):

* A single **host thread** walks the workload's ops in program order. Each launched op costs the
  framework's per-op time plus the launch API time; the device may start it ``launch_latency_ns``
  after the API call began. Host work (``host`` ops) advances the host clock only. A **pageable**
  copy blocks the host until it completes (the driver stages it through a bounce buffer); a
  pinned copy is asynchronous. ``sync`` blocks the host until a stream (or the device) drains.
* Each **stream** is FIFO. ``record``/``wait`` follow CUDA event semantics: a wait depends on the
  latest record of that event enqueued before it, and is a no-op if there was none.
* Kernels on different streams run **concurrently** under processor sharing: each kernel's
  memory phase stretches by the total HBM demand of the running kernels, its compute phase by
  the total SM demand. Copies use the copy engine and PCIe (pinned vs pageable bandwidth).
* **Noise**: each kernel's duration and each launch's host cost get a seeded log-normal factor.
* The **power/thermal model** (thermal.py) runs on the simulated clock; its SM clock feeds back
  into compute time, so sustained load can throttle.

Emits Segments with CUPTI-like counters, the ground-truth regime of every segment (kept apart:
the decoding pipeline never sees it), host launch events and telemetry samples.
"""

from __future__ import annotations

import math
import zlib
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from engine.device.kernel_model import KernelCost, kernel_cost, limiter
from engine.device.program import graph_regions, scaled, streams_of
from engine.device.thermal import ThermalState
from engine.manifest import (
    CopyOp,
    ExecConfig,
    HardwareSpec,
    HostOp,
    KernelOp,
    RecordOp,
    SyncOp,
    WaitOp,
    WorkloadSpec,
    flatten_ops,
    load_lever_priors,
)
from engine.regimes import Regime
from engine.telemetry.sample import TelemetrySample
from engine.trace.segments import DTYPE_CODE, Kind, Klass, NameTable, Provenance, Segments
from engine.trace.trace import ApiKind, HostEvents

_MEASURED = int(
    Provenance.FLOPS
    | Provenance.DRAM_BYTES
    | Provenance.ISSUE_ACTIVE
    | Provenance.STALL_FRAC
    | Provenance.OCCUPANCY
    | Provenance.GEOMETRY
)
_COPY_MEASURED = int(
    Provenance.FLOPS | Provenance.DRAM_BYTES | Provenance.ISSUE_ACTIVE | Provenance.STALL_FRAC
)

# Counter synthesis (see _emit): share of issue slots a saturated tensor/ALU pipe keeps busy,
# share a memory-bound kernel spends issuing loads/stores, share of cycles a latency-bound
# kernel's warps report stalled, and the baseline stall of any kernel. Priors that mirror the
# ranges Nsight Compute reports for such kernels (sm__inst_issued, smsp__warp_issue_stalled_*).
_ISSUE_COMPUTE = 0.90
_ISSUE_MEMORY = 0.15
_STALL_LATENCY = 0.85
_STALL_BASE = 0.05


class SimulationError(RuntimeError):
    """The workload cannot run (deadlock in its event graph) — a bug in the spec, not user input."""


@dataclass(slots=True)
class _DevOp:
    kind: int  # Kind value, or -1 record, -2 wait
    stream: int
    ready_ns: float
    correlation: int = 0
    name: int = 0
    klass: int = 0
    op: KernelOp | CopyOp | None = None
    cost: KernelCost | None = None
    alone_ns: float = 0.0
    remaining: float = 1.0  # fraction of work left
    start_ns: float = 0.0
    bw_frac: float = 0.0
    sm_frac: float = 0.0
    integ_bw: float = 0.0  # ∫ max(1, HBM load) dt while running
    integ_sm: float = 0.0  # ∫ max(1, SM load) dt while running
    slow: float = 1.0
    bw_load: float = 1.0  # current max(1, HBM load) while running
    sm_load: float = 1.0  # current max(1, SM load) while running
    event: tuple[str, int] | None = None  # record: (name, generation); wait: awaited generation
    gap_ns: float = 0.0


@dataclass
class SimBatch:
    """What one call of :meth:`SimulatedGPU.run` produced."""

    segments: Segments
    truth: np.ndarray  # uint8 Regime per segment — validation only
    host: HostEvents
    telemetry: list[TelemetrySample]
    t_start_ns: int
    t_end_ns: int
    iterations: int


@dataclass
class _Acc:
    cols: dict[str, list[float | int]] = field(
        default_factory=lambda: {
            c: []
            for c in (
                "start_ns",
                "end_ns",
                "stream",
                "kind",
                "name",
                "klass",
                "correlation",
                "grid",
                "block",
                "regs",
                "smem",
                "occupancy",
                "flops",
                "dram_bytes",
                "issue_active",
                "stall_frac",
                "provenance",
                "dtype",
            )
        }
    )
    truth: list[int] = field(default_factory=list)
    host: dict[str, list[int]] = field(
        default_factory=lambda: {
            "correlation": [],
            "stream": [],
            "api_start_ns": [],
            "api_end_ns": [],
            "api": [],
            "event": [],
        }
    )


class SimulatedGPU:
    """One simulated GPU executing a workload iteration after iteration, deterministically by seed."""

    def __init__(
        self,
        hw: HardwareSpec,
        workload: WorkloadSpec,
        seed: int = 0,
        device: int = 0,
        config: ExecConfig | None = None,
        cost_seed: int | None = None,
    ) -> None:
        """``seed`` draws run-to-run noise; ``cost_seed`` (default: ``seed``) draws each
        kernel's achieved efficiency — a property of the machine and library build, so repeated
        measurements on one machine share it."""
        self.hw = hw
        self.workload = workload
        self.config = config or ExecConfig()
        self.seed = seed
        self.cost_seed = seed if cost_seed is None else cost_seed
        self.device = device
        self.names = NameTable()
        self.rng = np.random.default_rng(seed)
        self.program = scaled(flatten_ops(workload.iteration), self.config.batch_scale)
        self._region_of = graph_regions(self.program) if self.config.cuda_graphs else None
        self._event_id: dict[str, int] = {}
        cap = self.config.power_limit_w or workload.power_limit_w or hw.tdp_w
        self.thermal = ThermalState.cold(hw)
        self.thermal.power_cap_w = min(hw.tdp_w, cap)
        self.host_ns = 0.0
        self.now = 0.0
        self.iterations_done = 0
        self._corr = 0
        self._consume_times: list[float] = []  # when each prefetched batch was taken
        self._loader_free = 0.0
        self._queues: dict[int, deque[_DevOp]] = {
            s: deque() for s in streams_of(workload, self.program)
        }
        self._active: dict[int, _DevOp] = {}  # stream -> running op
        self._last_end: dict[int, float] = dict.fromkeys(self._queues, 0.0)
        self._event_gen: dict[str, int] = {}
        self._event_done: dict[tuple[str, int], float] = {}
        self._costs = self._draw_costs()
        self._acc = _Acc()

    # ---------------------------------------------------------------- calibration draws
    def _draw_costs(self) -> dict[int, KernelCost]:
        """Draw each distinct kernel's achieved efficiencies once (stable per name and seed).

        A convolution on cuDNN's heuristic algorithm lands in the lower half of its class's
        efficiency range, an autotuned one in the upper half (the autotuner keeps the fastest
        of the candidates it times)."""
        costs: dict[int, KernelCost] = {}
        for i, op in enumerate(self.program):
            if not isinstance(op, KernelOp):
                continue
            self.names.intern(op.name)
            h = zlib.crc32(f"{op.name}|{self.cost_seed}".encode())
            r = np.random.default_rng(h)
            eff = self.hw.class_efficiency[op.klass]
            lo, hi = eff.compute
            if op.algo == "heuristic":
                hi = (lo + hi) / 2
            elif op.algo == "tuned":
                lo = (lo + hi) / 2
            ec = r.uniform(lo, hi)
            em = r.uniform(*eff.memory)
            costs[i] = kernel_cost(self.hw, op, ec, em)
        return costs

    # ---------------------------------------------------------------- public API
    def run(self, iterations: int) -> SimBatch:
        """Simulate ``iterations`` more iterations; the batch ends when the device has drained."""
        t0 = self.now
        for _ in range(iterations):
            self._host_iteration()
            self.iterations_done += 1
        self._advance(math.inf, drain=set(self._queues))
        self.host_ns = max(self.host_ns, self.now)
        batch = self._flush(t0, iterations)
        return batch

    def run_for(self, sim_ns: float, max_iterations: int = 100_000) -> SimBatch:
        """Simulate whole iterations until at least ``sim_ns`` of device time has passed."""
        t0 = self.now
        n = 0
        while self.host_ns - t0 < sim_ns and n < max_iterations:
            self._host_iteration()
            self.iterations_done += 1
            n += 1
        self._advance(math.inf, drain=set(self._queues))
        self.host_ns = max(self.host_ns, self.now)
        return self._flush(t0, n)

    # ---------------------------------------------------------------- host thread
    def _lognormal(self, sigma: float) -> float:
        return float(math.exp(self.rng.normal(0.0, sigma))) if sigma > 0 else 1.0

    def _host_row(
        self,
        api: ApiKind,
        start: float,
        end: float,
        stream: int = -1,
        corr: int = 0,
        event: int = -1,
    ) -> None:
        acc = self._acc.host
        acc["correlation"].append(corr)
        acc["stream"].append(stream)
        acc["api_start_ns"].append(int(start))
        acc["api_end_ns"].append(int(max(start, end)))
        acc["api"].append(int(api))
        acc["event"].append(event)

    def _event(self, name: str) -> int:
        return self._event_id.setdefault(name, len(self._event_id))

    def _host_iteration(self) -> None:
        hw, noise, cfg = self.hw, self.hw.noise, self.config
        graph_t = 0.0
        node = 0
        for i, op in enumerate(self.program):
            region = self._region_of[i] if self._region_of is not None else -1
            in_graph = region >= 0
            if in_graph and (i == 0 or self._region_of[i - 1] != region):  # type: ignore[index]
                # one cudaGraphLaunch replays the whole captured region
                api_start = self.host_ns + self.workload.framework_ns * self._lognormal(
                    noise.launch_sigma
                )
                api_end = api_start + hw.graph_launch_api_ns * self._lognormal(noise.launch_sigma)
                graph_t, node = api_start, 0
                self._host_row(ApiKind.GRAPH_LAUNCH, api_start, api_end)
                self.host_ns = api_end
            if isinstance(op, HostOp):
                t0 = self.host_ns
                cost = op.ns * self._lognormal(noise.launch_sigma)
                if op.kind == "alloc" and cfg.allocator == "expandable_segments":
                    # the lever library's ALLOC prior: the value its replay transform uses
                    cost *= load_lever_priors().priors["ALLOC"].value
                if op.kind == "data_loading" and cfg.prefetch_depth > 0:
                    self.host_ns = max(self.host_ns, self._prefetched_batch(cost))
                    self._consume_times.append(self.host_ns)
                else:
                    self.host_ns += cost
                api = {
                    "work": ApiKind.HOST_WORK,
                    "data_loading": ApiKind.DATA_LOADING,
                    "alloc": ApiKind.MALLOC,
                }[op.kind]
                self._host_row(api, t0, self.host_ns)
            elif isinstance(op, KernelOp | CopyOp):
                if in_graph:  # a node of the graph launched above
                    ready = graph_t + hw.launch_latency_ns + node * hw.graph_node_ns
                    node += 1
                    self._corr += 1
                    corr = self._corr
                    self._host_row(ApiKind.GRAPH_NODE, self.host_ns, self.host_ns, op.stream, corr)
                else:
                    api_start = self.host_ns + self.workload.framework_ns * self._lognormal(
                        noise.launch_sigma
                    )
                    api_end = api_start + hw.launch_api_ns * self._lognormal(noise.launch_sigma)
                    ready = api_start + hw.launch_latency_ns
                    self._corr += 1
                    corr = self._corr
                d = _DevOp(
                    kind=int(Kind.KERNEL if isinstance(op, KernelOp) else Kind.MEMCPY),
                    stream=op.stream,
                    ready_ns=ready,
                    correlation=corr,
                    op=op,
                )
                if isinstance(op, KernelOp):
                    d.name = self.names.intern(op.name)
                    d.klass = int(Klass[op.klass])
                    d.cost = self._costs[i]
                else:
                    d.name = self.names.intern(
                        f"Memcpy {'HtoD' if op.direction == 'h2d' else 'DtoH'} "
                        f"({'Pinned' if op.pinned else 'Pageable'})"
                    )
                    d.klass = int(Klass.COPY)
                self._queues[op.stream].append(d)
                if in_graph:
                    continue
                self.host_ns = api_end
                if isinstance(op, CopyOp) and not op.pinned:
                    self._advance(math.inf, until_done=d)  # pageable: host waits for the copy
                    self.host_ns = max(self.host_ns, self.now)
                    self._host_row(ApiKind.MEMCPY_SYNC, api_start, self.host_ns, op.stream, corr)
                else:
                    api = ApiKind.LAUNCH if isinstance(op, KernelOp) else ApiKind.MEMCPY_ASYNC
                    self._host_row(api, api_start, api_end, op.stream, corr)
            elif isinstance(op, RecordOp):
                gen = self._event_gen.get(op.event, 0) + 1
                self._event_gen[op.event] = gen
                ready = graph_t + hw.launch_latency_ns if in_graph else self.host_ns
                self._queues[op.stream].append(
                    _DevOp(kind=-1, stream=op.stream, ready_ns=ready, event=(op.event, gen))
                )
                eid = self._event(op.event)
                self._host_row(
                    ApiKind.EVENT_RECORD, self.host_ns, self.host_ns, op.stream, event=eid
                )
            elif isinstance(op, WaitOp):
                gen = self._event_gen.get(op.event, 0)
                if gen:
                    ready = graph_t + hw.launch_latency_ns if in_graph else self.host_ns
                    self._queues[op.stream].append(
                        _DevOp(kind=-2, stream=op.stream, ready_ns=ready, event=(op.event, gen))
                    )
                eid = self._event(op.event)
                self._host_row(
                    ApiKind.STREAM_WAIT, self.host_ns, self.host_ns, op.stream, event=eid
                )
            elif isinstance(op, SyncOp):
                t0 = self.host_ns
                streams = set(self._queues) if op.stream is None else {op.stream}
                self._advance(math.inf, drain=streams)
                self.host_ns = max(self.host_ns, self.now)
                self._host_row(
                    ApiKind.SYNC, t0, self.host_ns, -1 if op.stream is None else op.stream
                )

    def _prefetched_batch(self, cost: float) -> float:
        """Return when this iteration's prefetched batch is ready.

        The loader thread loads batch c as soon as it has finished batch c-1 and one of the
        ``prefetch_depth`` slots is free (batch c - depth was consumed); its cost is this
        iteration's draw."""
        c, depth = len(self._consume_times), self.config.prefetch_depth
        release = self._consume_times[c - depth] if c >= depth else 0.0
        self._loader_free = max(self._loader_free, release) + cost
        return self._loader_free

    # ---------------------------------------------------------------- device
    def _startable(self, d: _DevOp) -> bool:
        if d.ready_ns > self.now:
            return False
        if d.kind == -2:
            assert d.event is not None
            return d.event in self._event_done and self._event_done[d.event] <= self.now
        return True

    def _start_ready(self) -> bool:
        """Start every stream head that can start now; return whether the running set changed."""
        changed = True
        any_change = False
        while changed:
            changed = False
            for s, q in self._queues.items():
                if s in self._active or not q or not self._startable(q[0]):
                    continue
                d = q.popleft()
                changed = any_change = True
                if d.kind == -1:
                    assert d.event is not None
                    self._event_done[d.event] = self.now
                    continue
                if d.kind == -2:
                    continue
                self._begin(d)
        return any_change

    def _begin(self, d: _DevOp) -> None:
        d.start_ns = self.now
        d.gap_ns = self.now - self._last_end[d.stream]
        factor = self._lognormal(self.hw.noise.duration_sigma)
        if d.cost is not None:
            d.alone_ns = d.cost.alone_ns(self.thermal.clock_factor) * factor
            d.bw_frac = d.cost.t_memory / d.alone_ns
            d.sm_frac = d.cost.fill
        else:
            assert isinstance(d.op, CopyOp)
            bw = self.hw.h2d_pinned_Bps if d.op.pinned else self.hw.h2d_pageable_Bps
            d.alone_ns = max(self.hw.kernel_floor_ns, d.op.bytes / bw * 1e9) * factor
        self._active[d.stream] = d
        self._rebalance()

    def _rebalance(self) -> None:
        """Recompute each running kernel's slowdown under processor sharing of HBM and SMs."""
        kernels = [d for d in self._active.values() if d.cost is not None]
        load_bw = sum(d.bw_frac for d in kernels)
        load_sm = sum(d.sm_frac for d in kernels)
        for d in kernels:
            c = d.cost
            assert c is not None
            mem_share = c.t_memory / d.alone_ns
            sm_share = c.t_compute / self.thermal.clock_factor / d.alone_ns
            d.slow = max(1.0, mem_share * load_bw, sm_share * load_sm)
            d.bw_load = max(1.0, load_bw)
            d.sm_load = max(1.0, load_sm)

    def _advance(
        self, until_ns: float, drain: set[int] | None = None, until_done: _DevOp | None = None
    ) -> None:
        """Run the device until ``until_ns``, until ``drain`` streams are empty, or ``until_done`` ends."""
        while True:
            self._start_ready()
            if drain is not None and all(
                not self._queues[s] and s not in self._active for s in drain
            ):
                return
            if until_done is not None and until_done.remaining <= 0.0:
                return
            t_next = until_ns
            for d in self._active.values():
                t_next = min(t_next, self.now + d.remaining * d.alone_ns * d.slow)
            for s, q in self._queues.items():
                if s not in self._active and q and q[0].ready_ns > self.now:
                    t_next = min(t_next, q[0].ready_ns)
            if t_next == math.inf:
                raise SimulationError(
                    f"device deadlock at t={self.now:.0f} ns in {self.workload.name}"
                )
            dt = t_next - self.now
            self.now = t_next
            finished = []
            for d in self._active.values():
                d.remaining -= dt / (d.alone_ns * d.slow)
                if d.cost is not None:
                    d.integ_bw += dt * d.bw_load
                    d.integ_sm += dt * d.sm_load
                if d.remaining <= 1e-9:
                    d.remaining = 0.0
                    finished.append(d)
            for d in finished:
                del self._active[d.stream]
                self._last_end[d.stream] = self.now
                self._emit(d)
            if finished:
                self._rebalance()
            if self.now >= until_ns:
                return

    # ---------------------------------------------------------------- output
    def _emit(self, d: _DevOp) -> None:
        cols = self._acc.cols
        noise = self.hw.noise.counter_sigma
        dur = max(1.0, self.now - d.start_ns)
        cols["start_ns"].append(int(d.start_ns))
        cols["end_ns"].append(int(max(d.start_ns + 1, self.now)))
        cols["stream"].append(d.stream)
        cols["kind"].append(d.kind)
        cols["name"].append(d.name)
        cols["klass"].append(d.klass)
        cols["correlation"].append(d.correlation)
        r = self.rng.normal(0.0, noise, 4)
        if d.cost is None:
            assert isinstance(d.op, CopyOp)
            for col in ("grid", "block", "regs", "smem"):
                cols[col].append(0)
            cols["occupancy"].append(math.nan)
            cols["flops"].append(0.0)
            cols["dram_bytes"].append(d.op.bytes)
            cols["issue_active"].append(0.0)
            cols["stall_frac"].append(_clip(_STALL_BASE + r[3]))
            cols["provenance"].append(_COPY_MEASURED)
            cols["dtype"].append(0)
            self._acc.truth.append(int(Regime.IDLE))  # SMs idle while the copy engine works
            return
        c, op = d.cost, d.op
        assert isinstance(op, KernelOp)
        t_c = c.t_compute / self.thermal.clock_factor * (d.integ_sm / dur)
        t_m = c.t_memory * (d.integ_bw / dur)
        t_l, t_f = c.t_latency, c.t_floor
        truth = limiter(t_c, t_m, t_l, t_f, c.fill)
        t_stall = t_l + (t_c * (1.0 - c.fill) if truth == Regime.STALL and t_c >= t_l else 0.0)
        cols["grid"].append(op.grid)
        cols["block"].append(op.block)
        cols["regs"].append(op.regs)
        cols["smem"].append(op.smem)
        cols["occupancy"].append(c.occupancy)
        cols["flops"].append(max(0.0, op.flops * (1.0 + 0.005 * r[0])))
        cols["dram_bytes"].append(max(0.0, op.bytes * (1.0 + r[1])))
        cols["issue_active"].append(
            _clip(
                _ISSUE_COMPUTE * c.fill * min(1.0, t_c / dur)
                + _ISSUE_MEMORY * min(1.0, t_m / dur)
                + r[2]
            )
        )
        cols["stall_frac"].append(
            _clip(_STALL_LATENCY * min(1.0, t_stall / dur) + _STALL_BASE + r[3])
        )
        cols["provenance"].append(_MEASURED)
        # the arithmetic the op's cost was computed in (kernel_cost's peak key)
        cols["dtype"].append(DTYPE_CODE[op.dtype or self.hw.class_efficiency[op.klass].peak])
        self._acc.truth.append(int(truth))

    def _flush(self, t0: float, iterations: int) -> SimBatch:
        acc = self._acc
        n = len(acc.truth)
        segs = Segments.from_columns(**acc.cols, device=np.full(n, self.device, np.int16))
        order = np.lexsort((segs.start_ns, segs.stream))  # completion order → (stream, start)
        segs = segs.take(order)
        truth = np.asarray(acc.truth, dtype=np.uint8)[order]
        host = HostEvents(
            correlation=np.asarray(acc.host["correlation"], dtype=np.int64),
            stream=np.asarray(acc.host["stream"], dtype=np.int32),
            api_start_ns=np.asarray(acc.host["api_start_ns"], dtype=np.int64),
            api_end_ns=np.asarray(acc.host["api_end_ns"], dtype=np.int64),
            api=np.asarray(acc.host["api"], dtype=np.uint8),
            event=np.asarray(acc.host["event"], dtype=np.int64),
        )
        telemetry = self._telemetry(segs, t0)
        self._acc = _Acc()
        return SimBatch(
            segments=segs,
            truth=truth,
            host=host,
            telemetry=telemetry,
            t_start_ns=int(t0),
            t_end_ns=int(self.now),
            iterations=iterations,
        )

    def _telemetry(self, segs: Segments, t0: float) -> list[TelemetrySample]:
        """Integrate the thermal model over the batch and return one sample at its end."""
        span = max(1.0, self.now - t0)
        kern = segs.kind == Kind.KERNEL
        busy = min(1.0, _union_ns(segs.start_ns[kern], segs.end_ns[kern]) / span)
        peak = np.array([self.hw.peak_flops[self.hw.class_efficiency[k.name].peak] for k in Klass])
        with np.errstate(invalid="ignore", divide="ignore"):
            comp = np.nansum(segs.flops[kern] / peak[segs.klass[kern]]) / (span * 1e-9)
            mem = np.nansum(segs.dram_bytes[kern]) / self.hw.hbm_bandwidth_Bps / (span * 1e-9)
        self.thermal.step(span * 1e-9, busy, min(1.0, float(comp)), min(1.0, float(mem)))
        jitter = 1.0 + 0.002 * self.rng.normal()
        return [
            TelemetrySample(
                t_ns=int(self.now),
                device=self.device,
                source="simulated",
                gpu_util=round(100.0 * busy, 1),
                mem_util=round(100.0 * min(1.0, float(mem)), 1),
                memory_used_bytes=int(self.workload.memory_used_bytes * jitter),
                memory_total_bytes=self.hw.memory_bytes,
                power_w=round(self.thermal.power_w, 1),
                power_limit_w=self.thermal.power_cap_w,
                sm_clock_mhz=self.thermal.sm_clock_mhz,
                temperature_c=round(self.thermal.temperature_c, 1),
                clock_event_reasons=self.thermal.reasons,
            )
        ]


def _clip(x: float) -> float:
    return min(1.0, max(0.0, float(x)))


def _union_ns(start: np.ndarray, end: np.ndarray) -> float:
    """Return the length of the union of intervals (device busy time across streams)."""
    if start.size == 0:
        return 0.0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    run_end = np.maximum.accumulate(e)
    gaps = np.maximum(0, s[1:] - run_end[:-1])
    return float(run_end[-1] - s[0] - gaps.sum())


def simulate(
    workload: str, iterations: int, seed: int = 0, hardware: str = "h100_telemetry"
) -> tuple[SimBatch, NameTable]:
    """Convenience: simulate ``iterations`` of a built-in workload; return the batch and names."""
    from engine.manifest import load_hardware, load_workload

    gpu = SimulatedGPU(load_hardware(hardware), load_workload(workload), seed=seed)
    batch = gpu.run(iterations)
    return batch, gpu.names


__all__ = ["SimBatch", "SimulatedGPU", "SimulationError", "simulate"]
