"""State-telemetry backends behind one interface, discovered at run time (DESIGN §8).

* ``NvmlBackend`` — NVIDIA through nvidia-ml-py (``pynvml``): utilisation, memory, power and
  its limit, SM/memory clocks, temperature, clock-event reasons, PCIe and NVLink throughput,
  uncorrected ECC, process count, Hopper GPM metrics where supported.
* ``AmdSmiBackend`` — AMD through ``amdsmi``; ``PyrsmiBackend`` — the ``pyrsmi`` fallback.
* the simulated GPU's own model is ``engine.device.backend.SimBackend`` (the device layer sits
  above this one).

Every field may be unsupported on a given GPU: it is then ``None`` (absent), never 0, and the
other fields still flow. A GPU lost mid-run (NVML ``GpuIsLost``: an Xid, fell off the bus) is
reported once in ``lost`` and sampling goes on with the others. A backend that cannot start
raises ``BackendUnavailable`` with the reason and the exact remediation.

The library module is injectable (``nvml=``, ``amdsmi=``, ``rocml=``) so the tests drive the
real code paths with fakes that raise the libraries' own error classes.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from engine.errors import BackendUnavailable
from engine.telemetry.sample import TelemetrySample

__all__ = ["Backend", "BackendUnavailable", "open_backend"]


@dataclass
class DeviceInfo:
    index: int
    name: str
    uuid: str | None = None
    memory_total_bytes: int | None = None


@dataclass
class Backend:
    """Common state: the devices, the ones lost, and a label for headers."""

    name: str = ""
    devices: list[DeviceInfo] = field(default_factory=list)
    lost: dict[int, str] = field(default_factory=dict)  # device index -> why

    @property
    def label(self) -> str:
        live = [d for d in self.devices if d.index not in self.lost]
        names = sorted({d.name for d in live})
        return f"{self.name}: {len(live)}× {', '.join(names) or 'no device'}"

    def sample(self) -> list[TelemetrySample]:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------- NVIDIA
_NVML_START = {
    "NVMLError_LibraryNotFound": (
        "the NVML library (libnvidia-ml.so) was not found",
        "install the NVIDIA driver, or run where one is installed (a GPU node / `docker run --gpus all`)",
    ),
    "NVMLError_DriverNotLoaded": (
        "the NVIDIA kernel driver is not loaded",
        "load it (`sudo modprobe nvidia`) and check `nvidia-smi`",
    ),
    "NVMLError_NoPermission": (
        "no permission to open the GPU device files (/dev/nvidia*)",
        "add your user to the group that owns /dev/nvidia* (often `video`) or run in a container with --gpus",
    ),
    "NVMLError_LibRmVersionMismatch": (
        "the NVML library and the kernel driver versions differ",
        "reboot after the driver upgrade (or reload the nvidia modules)",
    ),
}
_FIELD_ABSENT = (
    "NVMLError_NotSupported",
    "NVMLError_NoPermission",
    "NVMLError_FunctionNotFound",
    "NVMLError_NotFound",
    "NVMLError_NoData",
    "NVMLError_InvalidArgument",
    "NVMLError_Unknown",
)


class NvmlBackend(Backend):
    """NVIDIA GPUs through NVML."""

    def __init__(self, nvml_module: Any | None = None) -> None:
        super().__init__(name="nvidia")
        nvml: Any = nvml_module
        if nvml is None:
            try:
                import pynvml

                nvml = pynvml
            except ImportError:
                raise BackendUnavailable(
                    "nvidia", "nvidia-ml-py is not installed", "pip install nvidia-ml-py"
                ) from None
        self.nvml = nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as e:
            reason, remedy = _NVML_START.get(
                type(e).__name__,
                (f"NVML failed to start ({e})", "check `nvidia-smi` on this machine"),
            )
            raise BackendUnavailable("nvidia", reason, remedy) from None
        self.handles: dict[int, Any] = {}
        self._gpm_prev: dict[int, Any] = {}
        for i in range(nvml.nvmlDeviceGetCount()):
            try:
                h = nvml.nvmlDeviceGetHandleByIndex(i)
            except nvml.NVMLError as e:
                self.lost[i] = f"cannot open device {i}: {e}"
                continue
            self.handles[i] = h
            name = self._get(i, nvml.nvmlDeviceGetName, h)
            mem = self._get(i, nvml.nvmlDeviceGetMemoryInfo, h)
            self.devices.append(
                DeviceInfo(
                    i,
                    name.decode() if isinstance(name, bytes) else str(name or f"GPU {i}"),
                    self._str(self._get(i, nvml.nvmlDeviceGetUUID, h)),
                    int(mem.total) if mem is not None else None,
                )
            )

    @staticmethod
    def _str(v: Any) -> str | None:
        return v.decode() if isinstance(v, bytes) else (str(v) if v is not None else None)

    def _get(self, index: int, fn: Any, *args: Any) -> Any:
        """Call one NVML getter: None when unsupported; a lost GPU is recorded and re-raised."""
        try:
            return fn(*args)
        except self.nvml.NVMLError as e:
            kind = type(e).__name__
            if kind == "NVMLError_GpuIsLost":
                self.lost[index] = (
                    "GPU is lost (Xid / fell off the bus): sampling continues with the others"
                )
                raise _Lost from None
            if kind in _FIELD_ABSENT:
                return None
            return None  # an error we do not know: the field is absent, the sample goes on

    def sample(self) -> list[TelemetrySample]:
        out = []
        for d in self.devices:
            if d.index in self.lost:
                continue
            try:
                out.append(self._sample_one(d))
            except _Lost:
                continue
        return out

    def _sample_one(self, d: DeviceInfo) -> TelemetrySample:
        n, h, i = self.nvml, self.handles[d.index], d.index
        g = self._get
        util = g(i, n.nvmlDeviceGetUtilizationRates, h)
        mem = g(i, n.nvmlDeviceGetMemoryInfo, h)
        power = g(i, n.nvmlDeviceGetPowerUsage, h)
        limit = g(i, n.nvmlDeviceGetEnforcedPowerLimit, h)
        reasons_fn = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            n, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        reasons = g(i, reasons_fn, h) if reasons_fn else None
        tx = g(i, n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_TX_BYTES)
        rx = g(i, n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_RX_BYTES)
        nvl = self._nvlink(i, h)
        ecc = g(
            i,
            n.nvmlDeviceGetTotalEccErrors,
            h,
            n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            n.NVML_VOLATILE_ECC,
        )
        procs = g(i, n.nvmlDeviceGetComputeRunningProcesses, h)
        return TelemetrySample(
            t_ns=time.time_ns(),
            device=i,
            source="nvml",
            gpu_util=float(util.gpu) if util is not None else None,
            mem_util=float(util.memory) if util is not None else None,
            memory_used_bytes=int(mem.used) if mem is not None else None,
            memory_total_bytes=int(mem.total) if mem is not None else None,
            power_w=power / 1000.0 if power is not None else None,
            power_limit_w=limit / 1000.0 if limit is not None else None,
            sm_clock_mhz=g(i, n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
            temperature_c=g(i, n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
            clock_event_reasons=int(reasons) if reasons is not None else None,
            name=d.name,
            uuid=d.uuid,
            mem_clock_mhz=g(i, n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
            pcie_tx_Bps=tx * 1024.0 if tx is not None else None,  # NVML reports KB/s
            pcie_rx_Bps=rx * 1024.0 if rx is not None else None,
            nvlink_tx_Bps=nvl[0],
            nvlink_rx_Bps=nvl[1],
            ecc_uncorrected=int(ecc) if ecc is not None else None,
            processes=len(procs) if procs is not None else None,
            gpm=self._gpm(i, h),
        )

    def _nvlink(self, i: int, h: Any) -> tuple[float | None, float | None]:
        """NVLink data throughput (KiB counters via field values; None if unsupported)."""
        n = self.nvml
        ids = [n.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, n.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX]
        vals = self._get(i, n.nvmlDeviceGetFieldValues, h, ids)
        if vals is None:
            return None, None
        out: list[float | None] = []
        for v in vals:
            if getattr(v, "nvmlReturn", 1) != 0:
                out.append(None)
                continue
            raw = getattr(v.value, "ullVal", None)
            out.append(float(raw) * 1024.0 if raw is not None else None)
        return ([*out, None, None])[0], ([*out, None, None])[1]

    def _gpm(self, i: int, h: Any) -> dict[str, float] | None:
        """Hopper+ GPM metrics from two consecutive samples (None where unsupported)."""
        n = self.nvml
        if not hasattr(n, "nvmlGpmQueryDeviceSupport"):
            return None
        sup = self._get(i, n.nvmlGpmQueryDeviceSupport, h)
        if sup is None or not getattr(sup, "isSupportedDevice", 0):
            return None
        try:
            cur = n.nvmlGpmSampleAlloc()
            n.nvmlGpmSampleGet(h, cur)
        except n.NVMLError:
            return None
        prev = self._gpm_prev.get(i)
        self._gpm_prev[i] = cur
        if prev is None:
            return None  # the first sample only primes the pair
        wanted = {
            "sm_util": n.NVML_GPM_METRIC_SM_UTIL,
            "sm_occupancy": n.NVML_GPM_METRIC_SM_OCCUPANCY,
            "tensor_util": n.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
            "dram_bw_util": n.NVML_GPM_METRIC_DRAM_BW_UTIL,
        }
        try:
            mg = n.c_nvmlGpmMetricsGet_t()
            mg.version = n.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = len(wanted)
            mg.sample1, mg.sample2 = prev, cur
            for k, mid in enumerate(wanted.values()):
                mg.metrics[k].metricId = mid
            n.nvmlGpmMetricsGet(mg)
        except n.NVMLError:
            return None
        finally:
            with contextlib.suppress(n.NVMLError):
                n.nvmlGpmSampleFree(prev)
        res = {
            name: float(mg.metrics[k].value)
            for k, name in enumerate(wanted)
            if mg.metrics[k].nvmlReturn == 0
        }
        return res or None

    def close(self) -> None:
        with contextlib.suppress(self.nvml.NVMLError):
            self.nvml.nvmlShutdown()


class _Lost(Exception):
    """Internal: the device just went away."""


# ---------------------------------------------------------------------------------- AMD
class AmdSmiBackend(Backend):
    """AMD GPUs through amdsmi (ROCm 6+)."""

    def __init__(self, amdsmi_module: Any | None = None) -> None:
        super().__init__(name="amd")
        amdsmi: Any = amdsmi_module
        if amdsmi is None:
            try:
                import amdsmi as _amdsmi

                amdsmi = _amdsmi
            except ImportError:
                raise BackendUnavailable(
                    "amd",
                    "amdsmi is not installed",
                    "pip install 'gitm-tui[amd]' (needs ROCm's libamd_smi)",
                ) from None
            except (OSError, KeyError) as e:  # the wheel is there, the ROCm library is not
                raise BackendUnavailable(
                    "amd", f"amdsmi cannot load libamd_smi ({e})", "install ROCm 6+"
                ) from None
        self.smi = amdsmi
        err = getattr(amdsmi, "AmdSmiException", Exception)
        try:
            amdsmi.amdsmi_init()
            handles = amdsmi.amdsmi_get_processor_handles()
        except err as e:
            raise BackendUnavailable(
                "amd", f"amdsmi failed to start ({e})", "check `amd-smi list` / the amdgpu driver"
            ) from None
        self.handles = dict(enumerate(handles))
        for i, h in self.handles.items():
            name = self._get(i, amdsmi.amdsmi_get_gpu_asic_info, h)
            vram = self._get(i, amdsmi.amdsmi_get_gpu_vram_usage, h)
            self.devices.append(
                DeviceInfo(
                    i,
                    str((name or {}).get("market_name") or f"AMD GPU {i}"),
                    str((name or {}).get("asic_serial")) if name else None,
                    int(vram["vram_total"]) * 2**20
                    if vram and vram.get("vram_total") is not None
                    else None,
                )
            )

    def _get(self, index: int, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except getattr(self.smi, "AmdSmiException", Exception):
            return None

    def sample(self) -> list[TelemetrySample]:
        s, out = self.smi, []
        for d in self.devices:
            if d.index in self.lost:
                continue
            h = self.handles[d.index]
            act = self._get(d.index, s.amdsmi_get_gpu_activity, h)
            vram = self._get(d.index, s.amdsmi_get_gpu_vram_usage, h)
            pw = self._get(d.index, s.amdsmi_get_power_info, h)
            clk = self._get(d.index, s.amdsmi_get_clock_info, h, s.AmdSmiClkType.GFX)
            mclk = self._get(d.index, s.amdsmi_get_clock_info, h, s.AmdSmiClkType.MEM)
            temp = self._get(
                d.index,
                s.amdsmi_get_temp_metric,
                h,
                s.AmdSmiTemperatureType.HOTSPOT,
                s.AmdSmiTemperatureMetric.CURRENT,
            )
            if act is None and vram is None and pw is None and clk is None:
                self.lost[d.index] = "no reading from the device any more: it may have been reset"
                continue
            power = _num((pw or {}).get("current_socket_power")) or _num(
                (pw or {}).get("average_socket_power")
            )
            out.append(
                TelemetrySample(
                    t_ns=time.time_ns(),
                    device=d.index,
                    source="amdsmi",
                    gpu_util=_num((act or {}).get("gfx_activity")),
                    mem_util=_num((act or {}).get("umc_activity")),
                    memory_used_bytes=_mib((vram or {}).get("vram_used")),
                    memory_total_bytes=_mib((vram or {}).get("vram_total")),
                    power_w=power,
                    power_limit_w=_num((pw or {}).get("power_limit")),
                    sm_clock_mhz=_int((clk or {}).get("clk")),
                    temperature_c=_num(temp),
                    name=d.name,
                    mem_clock_mhz=_int((mclk or {}).get("clk")),
                )
            )
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.smi.amdsmi_shut_down()


class PyrsmiBackend(Backend):
    """AMD GPUs through pyrsmi's rocml (the fallback when amdsmi is unavailable)."""

    def __init__(self, rocml_module: Any | None = None) -> None:
        super().__init__(name="amd")
        rocml: Any = rocml_module
        if rocml is None:
            try:
                from pyrsmi import rocml as _rocml

                rocml = _rocml
            except ImportError:
                raise BackendUnavailable(
                    "amd", "neither amdsmi nor pyrsmi is installed", "pip install 'gitm-tui[amd]'"
                ) from None
        self.rocml = rocml
        try:
            rocml.smi_initialize()
            count = rocml.smi_get_device_count()
        except Exception as e:
            raise BackendUnavailable(
                "amd", f"rocm-smi failed to start ({e})", "check `rocm-smi` and the amdgpu driver"
            ) from None
        for i in range(count):
            self.devices.append(
                DeviceInfo(i, str(self._get(rocml.smi_get_device_name, i) or f"AMD GPU {i}"))
            )

    @staticmethod
    def _get(fn: Any, *args: Any) -> Any:
        try:
            v = fn(*args)
        except Exception:
            return None
        return (
            None if v is None or (isinstance(v, int | float) and v < 0) else v
        )  # -1 = unsupported

    def sample(self) -> list[TelemetrySample]:
        r, out = self.rocml, []
        for d in self.devices:
            util = self._get(r.smi_get_device_utilization, d.index)
            used = self._get(r.smi_get_device_memory_used, d.index)
            total = self._get(r.smi_get_device_memory_total, d.index)
            power = self._get(r.smi_get_device_average_power, d.index)
            out.append(
                TelemetrySample(
                    t_ns=time.time_ns(),
                    device=d.index,
                    source="pyrsmi",
                    gpu_util=_num(util),
                    memory_used_bytes=_int(used),
                    memory_total_bytes=_int(total),
                    power_w=_num(power),
                    name=d.name,
                )
            )
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.rocml.smi_shutdown()


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, str):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None


def _int(v: Any) -> int | None:
    f = _num(v)
    return int(f) if f is not None else None


def _mib(v: Any) -> int | None:
    f = _num(v)
    return int(f * 2**20) if f is not None else None


# ---------------------------------------------------------------------------------- discovery
def open_backend(kind: str = "auto") -> tuple[Backend | None, list[str]]:
    """Open a backend: ``nvidia`` or ``amd`` exactly (BackendUnavailable if it cannot start),
    ``sim`` (None: the caller simulates), or ``auto``: the first real one that works, else None.
    Returns the backend and notes (why each real backend was passed over). The simulated
    device's own telemetry is engine/device/backend.py's ``SimBackend``."""
    if kind == "sim":
        return None, []
    if kind == "nvidia":
        return NvmlBackend(), []
    if kind == "amd":
        try:
            return AmdSmiBackend(), []
        except BackendUnavailable as first:
            try:
                return PyrsmiBackend(), [f"amdsmi unavailable ({first.reason}); using pyrsmi"]
            except BackendUnavailable:
                raise first from None
    if kind != "auto":
        raise ValueError(f"unknown device {kind!r}; one of auto, nvidia, amd, sim")
    notes = []
    for opener in (NvmlBackend, AmdSmiBackend, PyrsmiBackend):
        try:
            b = opener()
        except BackendUnavailable as e:
            notes.append(f"{e.backend}: {e.reason}")
            continue
        if b.devices:
            return b, notes
        notes.append(f"{b.name}: the library works but reports no GPU")
        b.close()
    return None, notes
