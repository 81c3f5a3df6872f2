"""Whether the device can do what a lever needs (DESIGN §5: "a lever checks the device's
capabilities before it claims anything").

A lever's ``requires`` (manifests/levers.json) names tensor/matrix-core types (any of them) and
catalogue features (all of them); the device's catalogue entry lists its ``matrix_dtypes`` and
``features`` (manifests/hardware_catalogue.json, with the datasheets they come from). Three
answers: the device can (None), it cannot (the reason, naming the device and what it lacks),
or the device is unknown (the reason: what could not be checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.levers.model import LeverSpec
from engine.manifest import GpuPeaks


@dataclass(frozen=True)
class Fit:
    """A lever against a device: it fits (or needs nothing of it), the device cannot do it, or
    the device is unknown; ``reason`` says which capability, on which device."""

    status: Literal["fits", "cannot", "unknown"]
    reason: str


def fit(spec: LeverSpec, hw: GpuPeaks | None) -> Fit:
    """Can the device ``hw`` (None: not in the catalogue) do what lever ``spec`` needs?"""
    req = spec.requires
    if req is None:
        return Fit("fits", "")
    if hw is None:
        return Fit(
            "unknown",
            f"the device is not in the hardware catalogue, so whether it has {req.needs} "
            "cannot be checked (give --hardware ID where the trace does not name it)",
        )
    where = f"{hw.name}" + (f" ({hw.arch})" if hw.arch else "")
    if req.matrix_dtypes_any and not set(req.matrix_dtypes_any) & set(hw.matrix_dtypes):
        has = "/".join(t.upper() for t in hw.matrix_dtypes) or "no types"
        return Fit(
            "cannot",
            f"not applicable on {where}: it lacks {req.needs} (its matrix units take {has})",
        )
    missing = [f for f in req.features if f not in hw.features]
    if missing:
        return Fit("cannot", f"not applicable on {where}: it lacks {req.needs}")
    return Fit("fits", "")


__all__ = ["Fit", "fit"]
