"""Fakes of the vendor libraries that reproduce their behaviour — their function names, return
shapes and *their own error classes* (pynvml's NVMLError_* built from real return codes) — so
the backends' real code paths run without a GPU."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pynvml


def nvml_error(code: int) -> pynvml.NVMLError:
    """The exception pynvml itself raises for an NVML return code (its subclass per code)."""
    return pynvml.NVMLError(code)


NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
LIBRARY_NOT_FOUND = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
NO_PERMISSION = pynvml.NVML_ERROR_NO_PERMISSION


class _Raise:
    """A field value meaning: raise this NVML error code."""

    def __init__(self, code: int) -> None:
        self.code = code


class FakeNvml(types.SimpleNamespace):
    """pynvml's surface for N devices. ``fields[i][name]`` is a value, or an int NVML error code
    to raise; ``lose_after[i] = k`` makes device i raise GPU_IS_LOST from its k-th sample on."""

    def __init__(self, n: int = 2, init_error: int | None = None, **overrides: Any) -> None:
        super().__init__()
        for k in dir(pynvml):  # constants and error classes exactly as the real module has them
            if k.startswith(("NVML_", "NVMLError")):
                setattr(self, k, getattr(pynvml, k))
        self.init_error = init_error
        self.fields: list[dict[str, Any]] = [
            {
                "name": b"NVIDIA H100 80GB HBM3",
                "uuid": f"GPU-fake-{i}",
                "util": types.SimpleNamespace(gpu=87, memory=41),
                "mem": types.SimpleNamespace(used=40 * 2**30, total=80 * 2**30, free=40 * 2**30),
                "power": 512_000,
                "limit": 700_000,
                "sm_clock": 1755,
                "mem_clock": 2619,
                "temp": 63,
                "reasons": 0x4,
                "pcie_tx": 1200,
                "pcie_rx": 900,
                "ecc": 0,
                "procs": [types.SimpleNamespace(pid=1234)],
                "fields": _Raise(NOT_SUPPORTED),
                "gpm": _Raise(NOT_SUPPORTED),
            }
            for i in range(n)
        ]
        self.lose_after: dict[int, int] = {}
        self.calls: dict[int, int] = dict.fromkeys(range(n), 0)
        self.shutdown = False
        for k, v in overrides.items():
            setattr(self, k, v)

    # -- library
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise nvml_error(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.fields)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    # -- getters
    def _field(self, h: int, key: str) -> Any:
        if key == "util":  # one call per sample: the loss clock
            self.calls[h] += 1
        k = self.lose_after.get(h)
        if k is not None and self.calls[h] > k:
            raise nvml_error(GPU_IS_LOST)
        v = self.fields[h][key]
        if isinstance(v, _Raise):
            raise nvml_error(v.code)
        return v

    def nvmlDeviceGetName(self, h: int) -> Any:
        return self._field(h, "name")

    def nvmlDeviceGetUUID(self, h: int) -> Any:
        return self._field(h, "uuid")

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        return self._field(h, "util")

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return self._field(h, "mem")

    def nvmlDeviceGetPowerUsage(self, h: int) -> Any:
        return self._field(h, "power")

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> Any:
        return self._field(h, "limit")

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> Any:
        return self._field(h, "sm_clock" if clock == pynvml.NVML_CLOCK_SM else "mem_clock")

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> Any:
        return self._field(h, "temp")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> Any:
        return self._field(h, "reasons")

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> Any:
        return self._field(h, "pcie_tx" if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else "pcie_rx")

    def nvmlDeviceGetTotalEccErrors(self, h: int, kind: int, counter: int) -> Any:
        return self._field(h, "ecc")

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> Any:
        return self._field(h, "procs")

    def nvmlDeviceGetFieldValues(self, h: int, ids: list[int]) -> Any:
        return self._field(h, "fields")

    def nvmlGpmQueryDeviceSupport(self, h: int) -> Any:
        return self._field(h, "gpm")


def raises(code: int) -> _Raise:
    return _Raise(code)


class AmdSmiException(Exception):
    """amdsmi's own exception base (the real one carries an error code)."""


class FakeAmdSmi(types.SimpleNamespace):
    """amdsmi's surface: dict-returning getters, AmdSmiException on failure."""

    AmdSmiException = AmdSmiException
    AmdSmiClkType = types.SimpleNamespace(GFX="GFX", MEM="MEM")
    AmdSmiTemperatureType = types.SimpleNamespace(HOTSPOT="HOTSPOT", EDGE="EDGE")
    AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT="CURRENT")

    def __init__(self, n: int = 1, fail: set[str] | None = None, init_fails: bool = False) -> None:
        super().__init__()
        self.n, self.fail, self.init_fails = n, fail or set(), init_fails

    def _call(self, name: str, value: Any) -> Any:
        if name in self.fail:
            raise AmdSmiException(f"{name}: AMDSMI_STATUS_NOT_SUPPORTED")
        return value

    def amdsmi_init(self) -> None:
        if self.init_fails:
            raise AmdSmiException("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    def amdsmi_shut_down(self) -> None:
        pass

    def amdsmi_get_processor_handles(self) -> list[int]:
        return list(range(self.n))

    def amdsmi_get_gpu_asic_info(self, h: int) -> Any:
        return self._call(
            "asic", {"market_name": "AMD Instinct MI300X", "asic_serial": f"0x{h:04x}"}
        )

    def amdsmi_get_gpu_vram_usage(self, h: int) -> Any:
        return self._call("vram", {"vram_used": 1024, "vram_total": 196592})

    def amdsmi_get_gpu_activity(self, h: int) -> Any:
        return self._call(
            "activity", {"gfx_activity": 73, "umc_activity": 20, "mm_activity": "N/A"}
        )

    def amdsmi_get_power_info(self, h: int) -> Any:
        return self._call(
            "power", {"current_socket_power": 410, "average_socket_power": 400, "power_limit": 750}
        )

    def amdsmi_get_clock_info(self, h: int, kind: str) -> Any:
        return self._call("clock", {"clk": 2100 if kind == "GFX" else 1300})

    def amdsmi_get_temp_metric(self, h: int, sensor: str, metric: str) -> Any:
        return self._call("temp", 55)


class FakeRocml(types.SimpleNamespace):
    """pyrsmi.rocml: ints, -1 where the device cannot report."""

    def __init__(self, n: int = 1, unsupported: set[str] | None = None) -> None:
        super().__init__()
        self.n, self.unsupported = n, unsupported or set()

    def smi_initialize(self) -> None: ...
    def smi_shutdown(self) -> None: ...
    def smi_get_device_count(self) -> int:
        return self.n

    def _v(self, name: str, v: Any) -> Any:
        return -1 if name in self.unsupported else v

    def smi_get_device_name(self, i: int) -> str:
        return "AMD Instinct MI250X"

    def smi_get_device_utilization(self, i: int) -> int:
        return self._v("util", 55)

    def smi_get_device_memory_used(self, i: int) -> int:
        return self._v("used", 2**30)

    def smi_get_device_memory_total(self, i: int) -> int:
        return self._v("total", 64 * 2**30)

    def smi_get_device_average_power(self, i: int) -> float:
        return self._v("power", 300.0)


Factory = Callable[..., Any]


# ----------------------------------------------------------------------------- CUPTI
class cuptiError(Exception):
    """cupti-python's error base; subclasses per CUptiResult (as cuda-python's bindings do)."""


class NotSupportedError(cuptiError):
    pass


class InsufficientPrivilegesError(cuptiError):
    pass


class FakeCupti(types.SimpleNamespace):
    """cupti.cupti's Activity API: register callbacks, enable kinds, flush → records delivered
    to ``func_buffer_completed`` as objects with the bindings' snake_case fields."""

    ActivityKind = types.SimpleNamespace(
        MEMCPY=1, MEMSET=2, CONCURRENT_KERNEL=10, RUNTIME=5, DRIVER=4, SYNCHRONIZATION=38
    )
    cuptiError = cuptiError
    NotSupportedError = NotSupportedError
    InsufficientPrivilegesError = InsufficientPrivilegesError

    def __init__(self, unsupported: set[int] | None = None, privileged: bool = False) -> None:
        super().__init__()
        self.unsupported, self.privileged = unsupported or set(), privileged
        self.enabled: set[int] = set()
        self.pending: list[Any] = []
        self.completed: Callable[[list[Any]], None] | None = None
        self.flushes = 0

    def runtime_api_trace_cbid(self, cbid: int) -> Any:
        names = {
            211: "cudaLaunchKernel_v7000",
            41: "cudaMemcpyAsync_v3020",
            165: "cudaStreamSynchronize_v3020",
        }
        return types.SimpleNamespace(name=names[cbid])

    def activity_register_callbacks(
        self, requested: Callable[[], tuple[int, int]], completed: Callable[[list[Any]], None]
    ) -> None:
        size, _ = requested()
        assert size > 0
        self.completed = completed

    def activity_enable(self, kind: int) -> None:
        if self.privileged:
            raise InsufficientPrivilegesError("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")
        if kind in self.unsupported:
            raise NotSupportedError("CUPTI_ERROR_NOT_SUPPORTED")
        self.enabled.add(kind)

    def activity_disable(self, kind: int) -> None:
        self.enabled.discard(kind)

    def activity_flush_all(self, flag: int) -> None:
        self.flushes += 1
        if self.pending and self.completed is not None:
            batch, self.pending = self.pending, []
            self.completed(batch)

    # what a program's CUDA calls would produce
    def launch(self, corr: int, name: str, start: int, dur: int, stream: int = 7) -> None:
        K = self.ActivityKind
        if K.RUNTIME in self.enabled:
            self.pending.append(
                types.SimpleNamespace(
                    kind=K.RUNTIME,
                    cbid=211,
                    start=start - 3000,
                    end=start - 500,
                    correlation_id=corr,
                )
            )
        if K.CONCURRENT_KERNEL in self.enabled:
            self.pending.append(
                types.SimpleNamespace(
                    kind=K.CONCURRENT_KERNEL,
                    name=name,
                    start=start,
                    end=start + dur,
                    stream_id=stream,
                    device_id=0,
                    correlation_id=corr,
                    grid_x=132,
                    grid_y=1,
                    grid_z=1,
                    block_x=256,
                    block_y=1,
                    block_z=1,
                    registers_per_thread=64,
                    static_shared_memory=0,
                    dynamic_shared_memory=49152,
                )
            )

    def memcpy(self, corr: int, start: int, dur: int, nbytes: int, stream: int = 7) -> None:
        K = self.ActivityKind
        if K.MEMCPY in self.enabled:
            self.pending.append(
                types.SimpleNamespace(
                    kind=K.MEMCPY,
                    start=start,
                    end=start + dur,
                    stream_id=stream,
                    device_id=0,
                    correlation_id=corr,
                    bytes=nbytes,
                    copy_kind=1,
                )
            )


def rows_trace(
    host: list[tuple],
    dev: list[tuple],
    names: Any = None,
    props: dict[str, Any] | None = None,
    source: str = "SYNTHETIC",
) -> Any:
    """A SYNTHETIC Trace from rows written by a test. ``host``: (api, start, end, correlation,
    stream, event, thread); ``dev``: (start, end, stream, correlation, name, klass, kind),
    sorted here; ``names``: the NameTable to intern into (a new one by default)."""
    import numpy as np

    from engine.trace.segments import NameTable, Segments
    from engine.trace.trace import HostEvents, Trace

    names = NameTable() if names is None else names
    dev = sorted(dev)
    seg = Segments.from_columns(
        start_ns=np.array([r[0] for r in dev], np.int64),
        end_ns=np.array([r[1] for r in dev], np.int64),
        stream=np.array([r[2] for r in dev], np.int32),
        correlation=np.array([r[3] for r in dev], np.int64),
        name=np.array([names.intern(r[4]) for r in dev], np.int32),
        klass=np.array([r[5] for r in dev], np.uint8),
        kind=np.array([r[6] for r in dev], np.uint8),
    )
    col = list(zip(*host, strict=True))
    h = HostEvents(
        api=np.array(col[0], np.uint8),
        api_start_ns=np.array(col[1], np.int64),
        api_end_ns=np.array(col[2], np.int64),
        correlation=np.array(col[3], np.int64),
        stream=np.array(col[4], np.int32),
        event=np.array(col[5], np.int64),
        thread=np.array(col[6], np.int32),
    )
    return Trace(segments=seg, names=names, host=h, device_properties=props or {}, source=source)
