"""The devices a trace's rows ran on, each read against the trace's device list: one choice
shared by the analysis (its roofline, links and invariants, per device), a rank's summary (its
peer link) and the workload fingerprint (its device).

How a row's device number meets the list depends on who wrote each (issue 47):

* **By id.** CUPTI's ``deviceId`` (Kineto on CUDA, Nsight's CUDA device numbers) is the CUDA
  runtime's device ordinal, the number Kineto's ``deviceProperties[].id`` carries too: PyTorch's
  Kineto lists ``cudaGetDeviceCount`` devices as ids 0..N-1 (libkineto DeviceProperties.cpp),
  both remapped alike by ``CUDA_VISIBLE_DEVICES``. rocprofiler-sdk (Kineto's ROCm tracer since
  2026: ``rocprofiler-sdk_version``) numbers a dispatch by its agent's ``logical_node_type_id``,
  the GPU index; rocprof's CSVs and Nsight's importers number their GPUs as their rows.
* **Not by id: roctracer.** Kineto's ROCm traces written with roctracer (``roctracer_version``)
  carry roctracer's ``device_id``, the GPU's HSA agent node: CPU agents are numbered first (one
  per NUMA node), so on a two-socket host GPU 0 is device 2 (ROCm/roctracer#98,
  pytorch/kineto#925/#926), and ``HIP_VISIBLE_DEVICES`` does not renumber it — while the list
  holds only the devices the HIP runtime shows the process (``hipGetDeviceCount``: one, id 0, for
  a rank pinned to its GPU). Its device number says nothing of which listed device ran it.

So: a device listed under the row's number, where the numbering is the list's; otherwise, where
every listed device is one model — the process could run only on a device it lists — that model,
said as the inference it is; otherwise unknown, said why. (Kineto's ``process_labels`` "GPU 0" …
"GPU 15" are written for every id a GPU might have, not for the GPUs there are: no evidence.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.planner.catalogue import GpuPeaks, Identified, describe, identify, properties_of
from engine.text import clean
from engine.trace.segments import Kind, Segments
from engine.trace.trace import Trace

#: the row kinds that run on a device: kernels, copies, memsets, collectives
TIMED = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMM)
#: rows whose devices ``device_use`` tallies at a time: a few MB of transients per chunk, never
#: a copy of a whole trace's columns
_CHUNK = 1 << 20


@dataclass(frozen=True)
class DeviceUse:
    """The timed rows one device number ran: how many and their summed time."""

    id: int
    rows: int
    time_ns: int


def device_use(seg: Segments) -> list[DeviceUse]:
    """Timed rows (kernels, copies, memsets, collectives) per device number, most GPU time
    first (ties by id)."""
    timed = np.array(TIMED, np.uint8)
    acc: dict[int, list[int]] = {}
    for a in range(0, len(seg), _CHUNK):
        b = min(len(seg), a + _CHUNK)
        k = np.isin(seg.kind[a:b], timed)
        if not k.any():
            continue
        dev = seg.device[a:b][k]
        dur = seg.end_ns[a:b][k] - seg.start_ns[a:b][k]
        for d in np.unique(dev).tolist():
            m = dev == d
            e = acc.setdefault(int(d), [0, 0])
            e[0] += int(m.sum())
            e[1] += int(dur[m].sum())
    return sorted(
        (DeviceUse(d, r, t) for d, (r, t) in acc.items()), key=lambda u: (-u.time_ns, u.id)
    )


@dataclass(frozen=True)
class Device:
    """One device the rows ran on, as the trace describes it and the catalogue names it."""

    id: int
    props: dict[str, Any] | None  # the trace's properties of it (None: not known)
    found: Identified | None  # None: no properties, or two processes' different GPUs
    label: str  # the device as the trace names it, sanitised, with what its peaks are
    problem: str | None = None  # why it has no model, where that is not the catalogue's reason
    shown: str = ""  # the device as the trace names it, sanitised ('' when it names none)
    #: how the rows' number was matched to the list where that is an inference (None: by id)
    inferred: str | None = None

    @property
    def model(self) -> str:
        """What tells two devices' models apart: the entry's id, else the reported facts."""
        if self.found is not None and self.found.entry is not None:
            return self.found.entry.id
        p = self.props or {}
        return f"?{p.get('name')!r}/{p.get('numSms')!r}/{p.get('totalGlobalMem')!r}/{self.id}"

    @property
    def peaks(self) -> GpuPeaks | None:
        """The peaks its rows are judged by: its catalogue entry or estimate (None: unknown)."""
        return self.found.entry if self.found is not None else None


def _facts(p: dict[str, Any]) -> str:
    # (repr: trace metadata may hold unhashable values where numbers belong)
    return repr((p.get("name"), p.get("numSms"), p.get("totalGlobalMem")))


def numbered_by_id(props: dict[str, Any]) -> bool:
    """Whether the rows' device numbers are the device list's ids (see the module docstring):
    every format but Kineto's roctracer traces."""
    return props.get("gpu_tracer") != "roctracer"


def _ids(devices: list[dict[str, Any]]) -> str:
    ids = sorted({i for d in devices if isinstance(i := d.get("id"), int)})
    return ", ".join(map(str, ids))


def _sole_model(
    devices: list[dict[str, Any]], dev_id: int, why: str
) -> tuple[dict[str, Any] | None, str]:
    """The properties of every listed device where they are all one model, with the sentence
    that says it was inferred (``why``: why the number is not matched by id); else None and
    the reason no device can be named."""
    n = len(devices)
    ids = _ids(devices)
    listed = f"the trace lists {n} device{'s' if n != 1 else ''}" + (
        f" (id{'s' if n != 1 else ''} {ids})" if ids else ""
    )
    if n and len({_facts(d) for d in devices}) == 1:
        name = devices[0].get("name")
        shown = clean(name.strip(), 60) if isinstance(name, str) and name.strip() else "unnamed"
        one = "taken as that one" if n == 1 else f"all {shown}: taken as that model"
        return devices[0], f"rows on device {dev_id}{why}; {listed}: {one}"
    models = len({_facts(d) for d in devices})
    return None, (
        f"rows ran on device {dev_id}{why}, and {listed}"
        + (f" of {models} models" if models > 1 else "")
        + ": which of them ran the rows is unknown"
    )


_ROCTRACER = " (roctracer's number: the GPU's HSA agent node, CPU agents first)"


def describe_device(devices: list[dict[str, Any]], dev_id: int, by_id: bool = True) -> Device:
    """The device rows call ``dev_id``: its properties (by id where ``by_id``:
    ``properties_of``; else, or where the list lacks the id, the sole model the list holds), its
    catalogue entry or estimate, and its label."""
    devs = [d for d in devices if isinstance(d, dict)]
    listed = properties_of(devs, dev_id) if by_id else []
    inferred = None
    if not listed:
        props, said = _sole_model(devs, dev_id, "" if by_id else _ROCTRACER)
        if props is None:
            return Device(dev_id, None, None, f"device {dev_id} (unknown: {said})", said)
        listed, inferred = [props], said
    props = listed[0]
    if len({_facts(p) for p in listed}) > 1:
        names = " / ".join(clean(str(p.get("name") or "unnamed"), 60) for p in listed)
        return Device(
            dev_id,
            props,
            None,
            f"device {dev_id}: {names}",
            f"device {dev_id} is a different GPU in different processes ({names}: "
            "TARGET_INFO_CUDA_DEVICE) and its rows do not say their process",
        )
    found = identify(props)
    name = props.get("name")
    named = clean(name.strip(), 80) if isinstance(name, str) and name.strip() else ""
    facts = describe(props)
    shown = named or (f"unnamed device ({facts})" if facts else "unknown")
    if found.kind == "catalogue" and found.entry is not None:
        label = f"{shown} · catalogue {found.entry.name}"
    elif found.kind == "estimate":
        label = f"{shown} · ESTIMATED peaks ({facts})"
    else:
        label = shown
    return Device(dev_id, props, found, label, shown=named, inferred=inferred)


def ran_on(trace: Trace) -> list[tuple[Device, DeviceUse]]:
    """The devices the trace's timed rows ran on with what each ran, most GPU time first; a
    trace with no timed row (a CUPTI-profiler trace of ranges only): its first listed device,
    with no use. Empty where the trace describes no device."""
    props = trace.device_properties
    devices = [d for d in props.get("devices") or [] if isinstance(d, dict)]
    if not devices:
        return []
    by_id = numbered_by_id(props)
    use = device_use(trace.segments)
    if use:
        return [(describe_device(devices, u.id, by_id), u) for u in use]
    first = devices[0].get("id")
    dev_id = first if isinstance(first, int) and not isinstance(first, bool) else 0
    return [(describe_device(devices, dev_id), DeviceUse(dev_id, 0, 0))]


def main_device(trace: Trace) -> Device | None:
    """The device that ran most of the trace's GPU time (None: the trace describes none)."""
    ran = ran_on(trace)
    return ran[0][0] if ran else None
