"""The critical path of one trace as ``analysis.json`` carries it (``Analysis.critical_path``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CriticalPart(_M):
    """One kind of time on the critical path."""

    part: str = Field(description="key of engine.schedule.critical.PARTS (kernel, host, …)")
    label: str = Field(description="what the part is, in words")
    ns: int
    share: float = Field(description="of the critical path (the replayed window's span)")
    hta: str = Field(description="HTA's bound_by category this part falls in")


class PathRow(_M):
    """A kernel (by name) or a kind of host call with time on the critical path."""

    name: str
    part: str
    ns: int
    rows: int = Field(description="rows of the trace with time on the path")


class CriticalStep(_M):
    """The critical path inside one ProfilerStep's window."""

    step: int = Field(description="N of ProfilerStep#N (-1: not named)")
    ns: int = Field(description="the step's length on the host clock (its window)")
    parts_ns: dict[str, int]
    headline: str


class Opportunity(_M):
    """A large share of the critical path, named whether or not a lever can change it."""

    what: str = Field(
        description="exposed_communication | allocation | data_loading | host | device_gaps"
    )
    ns: int = Field(
        description="what it could take off the span: its time on the path, or "
        "for a host-side part at most the span less the busiest stream's busy time"
    )
    share: float = Field(description="ns as a share of the critical path")
    path_ns: int = Field(default=0, description="its time on the critical path")
    evidence: str = Field(description="what in the trace shows it")
    suggestion: str = Field(description="what an engineer would try")
    levers: list[str] = Field(
        description="levers of the library that act on it ([]: none does — the analysis "
        "names it all the same)"
    )

    def size_text(self, total_ns: int) -> str:
        """'67% of the path (827.70 ms)', or with what can come off where that is less:
        '98% of the path (454.69 ms), at most 40% (184.57 ms) off the span'."""
        on = self.path_ns or self.ns
        head = f"{on / total_ns:.0%} of the path ({on / 1e6:,.2f} ms)" if total_ns else ""
        if self.ns < on:
            head += f", at most {self.share:.0%} ({self.ns / 1e6:,.2f} ms) off the span"
        return head


class CriticalPath(_M):
    """What sets the end of the replayed window: every nanosecond of its span given to one part
    (engine/schedule/critical.py says how the path is found)."""

    total_ns: int = Field(description="the replayed window's span: the parts add up to it")
    window: str = Field(description="what was replayed (the whole trace, or its steady window)")
    headline: str
    parts: list[CriticalPart] = Field(description="largest first; parts with no time left out")
    kernels_by_class_ns: dict[str, int]
    kernels_by_regime_ns: dict[str, int]
    top_rows: list[PathRow] = Field(description="kernels and calls with most time on the path")
    host_ops: list[PathRow] = Field(
        default_factory=list,
        description="the path's host part by the top-level CPU operator it was spent in (rows: "
        "its calls), the rest as time outside any operator; [] where the trace records none",
    )
    host_waits: list[PathRow] = Field(
        default_factory=list,
        description="the host part outside any operator by what another launching thread ran "
        "then (a thread waiting for another: the other's operator is what the path waits for)",
    )
    steps: list[CriticalStep] = Field(description="per ProfilerStep ([]: the trace has none)")
    hta_bound_by_ns: dict[str, int] = Field(
        description="the path in HTA's categories (cpu_bound, gpu_compute_bound, …)"
    )
    opportunities: list[Opportunity] = Field(description="largest first")
    peers: str = Field(
        description="whether the peers' arrivals held the collectives (cross-rank) or are unknown"
    )
    notes: list[str] = Field(default_factory=list)
