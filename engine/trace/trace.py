"""A Trace: Segments plus host launch events, device properties and where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.trace.segments import NameTable, Segments


@dataclass(eq=False)
class HostEvents:
    """Launch API calls on the host, linked to device rows by ``correlation``."""

    correlation: npt.NDArray[np.int64]
    stream: npt.NDArray[np.int32]
    api_start_ns: npt.NDArray[np.int64]
    api_end_ns: npt.NDArray[np.int64]

    @classmethod
    def empty(cls) -> HostEvents:
        """Return a table with no rows."""
        return cls(
            np.zeros(0, np.int64),
            np.zeros(0, np.int32),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
        )

    def __len__(self) -> int:
        return len(self.correlation)

    @staticmethod
    def concat(parts: list[HostEvents]) -> HostEvents:
        """Concatenate host-event tables."""
        if not parts:
            return HostEvents.empty()
        return HostEvents(
            *(
                np.concatenate([getattr(p, f) for p in parts])
                for f in ("correlation", "stream", "api_start_ns", "api_end_ns")
            )
        )


@dataclass(eq=False)
class Trace:
    """What an importer or a live source hands to the pipeline."""

    segments: Segments
    names: NameTable
    host: HostEvents = field(default_factory=HostEvents.empty)
    device_properties: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    simulated: bool = False
