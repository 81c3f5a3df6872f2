"""Where telemetry goes: JSON lines in the run store, a Prometheus endpoint (off by default,
127.0.0.1 unless told otherwise, dcgm-exporter metric names), an OpenTelemetry collector over
OTLP (engine/telemetry/otlp.py, the same names and units from ``DCGM`` here), and a mirror of the
run store to ``$GITM_S3_ROOT`` through fsspec."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from engine.telemetry.sample import TelemetrySample


class JsonlSink:
    """Append each sample as one JSON line (``TelemetrySample.to_dict``)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._f = path.open("a", encoding="utf-8")

    def write(self, samples: list[TelemetrySample]) -> None:
        for s in samples:
            self._f.write(json.dumps(s.to_dict(), separators=(",", ":")) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def read_jsonl(path: Path) -> list[TelemetrySample]:
    """Read samples back (a torn last line is skipped)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(TelemetrySample.from_dict(json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue
    return out


def _same(v: float) -> float:
    return v


def _mib(v: float) -> float:
    return v / 2**20


class DcgmField(NamedTuple):
    """One exported metric: dcgm-exporter's name (a DCGM field identifier), the sample field it
    reads, its help text, its unit (UCUM, as OpenTelemetry writes units) and the conversion from
    the sample's unit to that one."""

    name: str
    field: str
    help: str
    unit: str
    convert: Callable[[float], float]

    def value(self, s: TelemetrySample) -> float | None:
        """The sample's value in this metric's unit; None when the device did not report it."""
        v = getattr(s, self.field)
        return None if v is None else float(self.convert(v))


#: the one table of names and units both metric sinks export (Prometheus here, OTLP in
#: engine/telemetry/otlp.py): dcgm-exporter's names for what we sample, so a dashboard built for
#: dcgm-exporter reads either; units in UCUM ("MiBy" = mebibytes, "Cel" = degrees Celsius,
#: "1" = dimensionless, "{error}" = a count of errors)
DCGM: tuple[DcgmField, ...] = (
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "gpu_util", "GPU utilization (in %).", "%", _same),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "mem_util", "Memory utilization (in %).", "%", _same),
    DcgmField(
        "DCGM_FI_DEV_FB_USED",
        "memory_used_bytes",
        "Framebuffer memory used (in MiB).",
        "MiBy",
        _mib,
    ),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "power_w", "Power draw (in W).", "W", _same),
    DcgmField(
        "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        "power_limit_w",
        "Power management limit (in W).",
        "W",
        _same,
    ),
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", "SM clock frequency (in MHz).", "MHz", _same),
    DcgmField(
        "DCGM_FI_DEV_MEM_CLOCK",
        "mem_clock_mhz",
        "Memory clock frequency (in MHz).",
        "MHz",
        _same,
    ),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "temperature_c", "GPU temperature (in C).", "Cel", _same),
    DcgmField(
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "clock_event_reasons",
        "Current clock throttle reasons (bitmask).",
        "1",
        _same,
    ),
    DcgmField(
        "DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_Bps", "PCIe transmit rate (in B/s).", "By/s", _same
    ),
    DcgmField(
        "DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_Bps", "PCIe receive rate (in B/s).", "By/s", _same
    ),
    DcgmField(
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "nvlink_tx_Bps",
        "NVLink transmit rate (in B/s).",
        "By/s",
        _same,
    ),
    DcgmField(
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "nvlink_rx_Bps",
        "NVLink receive rate (in B/s).",
        "By/s",
        _same,
    ),
    DcgmField(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "ecc_uncorrected",
        "Volatile uncorrectable ECC errors.",
        "{error}",
        _same,
    ),
)

#: dcgm-exporter's labels of each series (Prometheus labels, OTLP data-point attributes)
DCGM_LABELS = ("gpu", "UUID", "modelName", "Hostname", "source")


def dcgm_labels(s: TelemetrySample, host: str) -> tuple[str, str, str, str, str]:
    """The values of ``DCGM_LABELS`` for a sample of one device on ``host``."""
    return (str(s.device), s.uuid or "", s.name or "", host, s.source)


class PrometheusSink:
    """A Prometheus endpoint with dcgm-exporter-style gauges; a field a device did not report is
    not exported for that device (absent, not 0)."""

    def __init__(self, port: int, addr: str = "127.0.0.1") -> None:
        from prometheus_client import CollectorRegistry, Gauge, start_http_server

        self.registry = CollectorRegistry()
        self.gauges = {
            f.name: Gauge(f.name, f.help, DCGM_LABELS, registry=self.registry) for f in DCGM
        }
        self.host = socket.gethostname()
        started = start_http_server(port, addr=addr, registry=self.registry)
        self.server = started[0] if isinstance(started, tuple) else None
        self.port = self.server.server_port if self.server is not None else port
        self.addr = addr

    def write(self, samples: list[TelemetrySample]) -> None:
        for s in samples:
            lab = dcgm_labels(s, self.host)
            for f in DCGM:
                v = f.value(s)
                g = self.gauges[f.name]
                if v is None:
                    with contextlib.suppress(KeyError):
                        g.remove(*lab)
                else:
                    g.labels(*lab).set(v)

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()


def mirror_run(run_dir: Path, root: str | None = None) -> list[str]:
    """Copy a run's files to ``<root>/runs/<run_id>/`` (root: $GITM_S3_ROOT) with fsspec;
    return the paths written. Nothing is removed locally."""
    root = root or os.environ.get("GITM_S3_ROOT")
    if not root:
        return []
    import fsspec

    # S3's client retries an unreachable endpoint for ~30 s: one short try, a bounded read
    opts = (
        {"config_kwargs": {"connect_timeout": 5, "read_timeout": 10,
                           "retries": {"max_attempts": 1}}}
        if root.startswith(("s3://", "s3a://"))
        else {}
    )  # fmt: skip
    fs, base = fsspec.core.url_to_fs(root.rstrip("/"), **opts)
    dest = f"{base}/runs/{run_dir.name}"
    written = []
    for p in sorted(run_dir.rglob("*")):
        # a regular file of the run's own: never a link someone put in its folder (its target
        # may be anything on this machine)
        if p.is_file() and not p.is_symlink():
            target = f"{dest}/{p.relative_to(run_dir).as_posix()}"
            fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            fs.put_file(str(p), target)
            written.append(target)
    return written
