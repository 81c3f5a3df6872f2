"""A scripted stand-in for the Engine: publishes a fixed, deterministic event sequence.

Used by Pilot and snapshot tests so that what the screen shows depends on nothing but this file
(no wall clock, no simulator, no thread timing). ``run_shown`` waits until a dashboard has shown
the whole script.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np

from engine.regimes import Label, Regime
from engine.runtime import EventBus, RunConfig
from engine.runtime.events import (
    DecodedBatch,
    EvidenceView,
    HypothesesReport,
    HypothesisView,
    InterventionUpdate,
    InvariantsReport,
    InvariantView,
    KappaUpdate,
    KernelsReady,
    LogEvent,
    OptimizeStatus,
    PhaseChanged,
    Progress,
    ReportWritten,
    RunFinished,
    RunStarted,
    TelemetryEvent,
    ViolationView,
)
from engine.telemetry.sample import ClockEventReason, TelemetrySample
from gitm_tui.widgets.interventions import InterventionTable
from gitm_tui.widgets.kernel_table import KernelTable
from tests.ui.waiting import until

NAMES = {
    7: (
        "sm90_xmma_gemm_bf16_qkv_proj",
        "layer_norm_fwd<pair>",
        "softmax_warp_forward",
        "vectorized_elementwise_kernel<add>",
    ),
    13: ("Memcpy HtoD (Pinned)", "nms_kernel"),
}
PATTERN = {
    7: [Regime.COMPUTE] * 5 + [Regime.MEMORY] * 4 + [Regime.STALL] * 2 + [Regime.IDLE] * 3,
    13: [Regime.IDLE] * 3 + [Regime.STALL] * 4,
}


class ScriptedEngine:
    """Publishes one run's worth of events, then waits until stopped."""

    def __init__(self, batches: int = 12) -> None:
        self.bus = EventBus()
        self.config = RunConfig(workload="af2", budget_s=60.0)
        self.batches = batches
        self.commands: list[str] = []
        self.keep_deciding = False
        self.ivs: dict[str, InterventionUpdate] = {}
        self._stopped = asyncio.Event()

    def pause(self) -> None:
        self.commands.append("pause")
        self.bus.publish(PhaseChanged(t_wall=12.5, phase="paused"))

    def resume(self) -> None:
        self.commands.append("resume")
        self.bus.publish(PhaseChanged(t_wall=12.5, phase="profile"))

    def stop(self) -> None:
        self.commands.append("stop")
        self._stopped.set()

    def finish_apply(self, by: str = "operator") -> None:
        self.commands.append(f"finish {by}")
        self.apply_finished = True

    def keep_deciding_on(self, by: str = "operator") -> bool:
        self.commands.append("keep_deciding")
        self.keep_deciding = True
        return True

    def decide(self, action: str, iid: str, by: str = "operator") -> None:
        """Record the decision and answer as the engine would: approve → VERIFIED, reject →
        REJECTED, rollback → ROLLED_BACK (no simulator: the figures are scripted)."""
        self.commands.append(f"{action} {iid}")
        iv = self.ivs[iid]
        state, meas, note = {
            "approve": ("VERIFIED", iv.predicted_gain - 0.01, "kept (scripted)"),
            "reject": ("REJECTED", None, f"rejected by {by}"),
            "rollback": ("ROLLED_BACK", iv.measured_gain, f"rolled back by {by}"),
        }[action]
        self._iv(iid, iv.lever, iv.safety, state, iv.predicted_gain, meas, note, by)

    def _iv(self, iid, lever, safety, state, pred, meas=None, note="", by=""):
        ev = InterventionUpdate(
            t_wall=13.0,
            id=iid,
            lever=lever,
            title=lever.replace("_", " "),
            safety=safety,
            state=state,
            predicted_gain=pred,
            confidence=0.9,
            measured_gain=meas,
            approved_by=by,
            note=note,
            replay=f"{lever}: scripted replay",
            evidence=("SCRIPTED: evidence line",),
        )
        self.ivs[iid] = ev
        self.bus.publish(ev)

    async def run(self) -> None:
        self.script()
        await self._stopped.wait()

    def script(self) -> None:
        """Publish the scripted run's events, up to its apply phase waiting for decisions."""
        pub = self.bus.publish
        pub(
            RunStarted(
                t_wall=0.0,
                run_id="20261129-000000-abcdef",
                workload="af2",
                workload_title="AlphaFold2 Evoformer block (scripted)",
                device="simulated H100 SXM5 80GB",
                simulated=True,
                budget_s=60.0,
                seed=1,
                streams=(7, 13),
                regimes=tuple(r.name for r in Regime),
            )
        )
        pub(PhaseChanged(t_wall=0.0, phase="profile", detail="simulated H100 SXM5 80GB"))
        pub(KernelsReady(t_wall=1.0, backend="numba", seconds=2.5))
        for b in range(self.batches):
            for s in (7, 13):
                pat = PATTERN[s]
                labels = np.array([pat[(b * 3 + i) % len(pat)] for i in range(6)], np.uint8)
                deg = np.array([s == 7 and b % 4 == 3 and i < 2 for i in range(6)])
                start = np.arange(6, dtype=np.int64) * 10_000 + b * 100_000
                names = tuple(NAMES[s][(b + i) % len(NAMES[s])] for i in range(6))
                # a copy is labelled for what it is, as the engine's row_labels does
                copy = np.array([n.startswith("Memcpy") for n in names])
                labels[copy] = Label.COPY
                pub(
                    DecodedBatch(
                        t_wall=1.0 + b,
                        stream=s,
                        start_ns=start,
                        end_ns=start + 4_000 * (1 + np.arange(6) % 3),
                        labels=labels,
                        degenerate=deg,
                        kappa=np.full(6, 12.0 + b, np.float32),
                        names=names,
                    )
                )
                pub(
                    KappaUpdate(
                        t_wall=1.0 + b,
                        stream=s,
                        kappa=12.0 + b if s == 7 else 75.0,
                        m_id=0.9,
                        m_deg=0.05,
                        undetermined=0.05,
                        k_max=60.0,
                    )
                )
            pub(
                TelemetryEvent(
                    t_wall=1.0 + b,
                    sample=TelemetrySample(
                        t_ns=b * 10**8,
                        device=0,
                        source="simulated",
                        gpu_util=60.0 + 3 * b,
                        mem_util=40.0,
                        memory_used_bytes=40 * 2**30,
                        memory_total_bytes=80 * 2**30,
                        power_w=300.0 + 20 * b,
                        power_limit_w=700.0,
                        sm_clock_mhz=1980 - 15 * b,
                        temperature_c=40.0 + 2 * b,
                        clock_event_reasons=int(ClockEventReason.SW_POWER_CAP) if b > 9 else 0,
                    ),
                )
            )
        pub(
            Progress(
                t_wall=12.5,
                elapsed_s=12.5,
                budget_s=60.0,
                segments=144,
                iterations=12,
                sim_time_ns=10**9,
                regime_shares={r.name: 0.25 for r in Regime},
            )
        )
        pub(LogEvent(t_wall=12.5, level="info", message="scripted run [bold]not markup[/bold]"))
        pub(PhaseChanged(t_wall=12.6, phase="apply", detail="approval policy manual"))
        pub(
            OptimizeStatus(
                t_wall=12.6,
                baseline_ns=3_400_000.0,
                current_ns=2_450_000.0,
                gain=0.279,
                target=0.15,
                noise_floor=0.005,
                phase="apply",
                phase_deadline_s=50.0,
            )
        )
        pub(
            InvariantsReport(
                t_wall=12.6,
                results=(
                    InvariantView(
                        "kernel_time",
                        checkable=True,
                        checked=93,
                        reason="",
                        violations=(
                            ViolationView(
                                name="adam_update_kernel<param>",
                                message="48 rows over the roofline's allowance",
                                count=48,
                                observed=3952.0,
                                predicted=2062.0,
                                residual=1890.0,
                                unit="ns",
                                rows=(1, 2),
                            ),
                        ),
                    ),
                    InvariantView(
                        "concurrency",
                        checkable=False,
                        checked=0,
                        reason="the plan predicts no concurrent kernels",
                    ),
                ),
            )
        )
        pub(
            HypothesesReport(
                t_wall=12.6,
                hypotheses=(
                    HypothesisView(
                        cause="UNFUSED_ATTENTION",
                        description="",
                        impact=0.156,
                        confidence=1.0,
                        claimed=True,
                        evidence=(
                            EvidenceView("structural", "24 GEMM→softmax→GEMM attentions", 0.156),
                        ),
                    ),
                ),
            )
        )
        self._iv("I1", "sdpa_flash", "SAFE", "VERIFIED", 0.276, 0.277, "kept: +27.7%", "tui")
        self._iv("I2", "copy_overlap", "SAFE", "PROPOSED", 0.132)
        self._iv("I3", "bf16_autocast", "NUMERICS", "PROPOSED", 0.098)


class EndedEngine(ScriptedEngine):
    """The script, then a run that ends with its target not met and two proposals nobody
    decided: I1 measured +2.5% but rolled back (not kept), so the report says nothing kept."""

    async def run(self) -> None:
        self.script()
        pub = self.bus.publish
        self._iv("I1", "sdpa_flash", "SAFE", "ROLLED_BACK", 0.276, 0.025, "rolled back: +2.5%")
        pub(PhaseChanged(t_wall=50.0, phase="report", detail="nothing kept"))
        pub(
            OptimizeStatus(
                t_wall=50.0,
                baseline_ns=3_400_000.0,
                current_ns=3_400_000.0,
                gain=0.0,
                target=0.15,
                noise_floor=0.005,
                phase="report",
                phase_deadline_s=60.0,
            )
        )
        headline = "target 15% NOT met: nothing kept, the final configuration is the baseline"
        report = "runs/20261129-000000-abcdef/report.md"
        pub(
            ReportWritten(
                t_wall=58.0,
                path=report,
                json_path=report.replace(".md", ".json"),
                target_met=False,
                gain=0.0,
                summary=headline,
                verdict="nothing kept",
            )
        )
        pub(PhaseChanged(t_wall=58.5, phase="done", detail="completed"))
        pub(
            RunFinished(
                t_wall=58.5,
                status="completed",
                segments=144,
                iterations=12,
                sim_time_ns=10**9,
                wall_s=58.5,
                regime_shares={r.name: 0.25 for r in Regime},
                kappa_partition={},
                fixed_lag_exact=1.0,
                validation={},
                dropped_events=0,
                kernels="numba",
                gain=0.0,
                target_met=False,
                report=report,
                verdict="nothing kept",
                headline=headline,
            )
        )
        await self._stopped.wait()


class NoTraceEngine(ScriptedEngine):
    """A real program measured from outside (``--workload torch`` on the CPU): no kernel
    trace, no telemetry; its levers are measured only (no prediction)."""

    #: the A/A spread it reports
    noise_floor = 0.021

    async def run(self) -> None:
        pub = self.bus.publish
        pub(
            RunStarted(
                t_wall=0.0,
                run_id="20261204-000000-abcdef",
                workload="torch",
                workload_title="an unmodified PyTorch script (scripted)",
                device="this machine's CPU",
                simulated=False,
                budget_s=40.0,
                seed=0,
                streams=(),
                regimes=(),
            )
        )
        pub(PhaseChanged(t_wall=0.0, phase="profile", detail="this machine's CPU"))
        pub(
            OptimizeStatus(
                t_wall=8.0,
                baseline_ns=3_949_000.0,
                current_ns=3_949_000.0,
                gain=0.0,
                target=0.15,
                noise_floor=self.noise_floor,
                phase="apply",
                phase_deadline_s=33.3,
                unit="ms/step",
                scale=1e6,
            )
        )
        pub(PhaseChanged(t_wall=8.0, phase="apply", detail="approval policy manual"))
        self._iv("I1", "threads=1", "SAFE", "ROLLED_BACK", math.nan, 0.031, "within noise")
        self._iv("I2", "interop_threads=1", "SAFE", "PROPOSED", math.nan)
        self._iv("I3", "channels_last", "SAFE", "PROPOSED", math.nan)
        await self._stopped.wait()


class KeepDecidingEngine(ScriptedEngine):
    """The script with an engine clock: 14 s of the budget used, 75 s waiting for a person
    (not charged once the operator keeps deciding)."""

    waiting_s = 75.0

    def elapsed(self) -> float:
        return 14.0


async def run_shown(pilot, last: str = "I3") -> None:
    """Wait until the dashboard has shown the scripted run's every event (its last one is the
    intervention ``last``), then have the kernel table rewrite its rows at once (its own timer
    would do it some 100 ms later)."""
    table = pilot.app.query_one(InterventionTable)
    await until(pilot, lambda: last in table.latest, what=f"the scripted run's last event ({last})")
    pilot.app.query_one(KernelTable).flush()
