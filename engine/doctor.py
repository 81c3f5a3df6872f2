"""`gitm-tui doctor`: what this machine can do, and for each problem the exact remedy.

Each check is a ``Check(name, ok, detail, remedy)``; ``ok`` is None for facts that are not
problems either way (a setting that is simply off).
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

CORE = (
    "textual",
    "rich",
    "numpy",
    "scipy",
    "numba",
    "pydantic",
    "platformdirs",
    "nvidia-ml-py",
    "isal",
    "prometheus-client",
    "fsspec",
)
OPTIONAL = {
    "cupti-python": "pip install 'gitm-tui[nvidia]' (live CUPTI capture)",
    "amdsmi": "pip install 'gitm-tui[amd]' (AMD telemetry; needs ROCm's libamd_smi)",
    "pyrsmi": "pip install 'gitm-tui[amd-fallback]' (AMD telemetry through rocm-smi)",
    "s3fs": "pip install 'gitm-tui[s3]' (mirroring the run store to GITM_S3_ROOT)",
}
PARAMS = Path("/proc/driver/nvidia/params")


@dataclass
class Check:
    name: str
    ok: bool | None
    detail: str
    remedy: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _ver(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def run_checks() -> list[Check]:
    """Every check, in the order a person reads them."""
    out: list[Check] = []
    py = platform.python_version()
    out.append(
        Check(
            "python",
            sys.version_info >= (3, 10),
            f"{py} ({sys.executable})",
            "" if sys.version_info >= (3, 10) else "use Python 3.10 or newer",
        )
    )
    out.append(Check("gitm-tui", True, _ver("gitm-tui") or "running from a source tree"))
    from engine.trace.formats import doctor_line

    out.append(Check("trace formats", True, doctor_line()))
    for pkg in CORE:
        v = _ver(pkg)
        out.append(
            Check(
                f"package {pkg}",
                v is not None,
                v or "not installed",
                "" if v else f"pip install {pkg} (a core dependency: reinstall gitm-tui)",
            )
        )
    for pkg, remedy in OPTIONAL.items():
        v = _ver(pkg)
        out.append(
            Check(
                f"package {pkg}",
                True if v else None,
                v or "not installed (optional)",
                "" if v else remedy,
            )
        )
    out += _backends()
    out += _cupti()
    out += _dirs()
    out.append(_otlp())
    return out


def _otlp() -> Check:
    """The OTLP sink: whether ``--otlp`` can start, and where it sends when no URL is given."""
    from engine.telemetry.otlp import EXTRA, missing_extra, resolve_endpoint, shown_url

    name = "otlp sink"
    if missing_extra() is not None:
        return Check(name, None, "the [otlp] extra is not installed: no --otlp", EXTRA)
    try:
        url = resolve_endpoint(None)
    except ValueError as e:
        return Check(
            name, False, str(e), "set OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT to an http(s) URL"
        )
    return Check(
        name,
        True,
        f"--otlp URL sends OTLP/HTTP metrics (opentelemetry-exporter-otlp-proto-http "
        f"{_ver('opentelemetry-exporter-otlp-proto-http') or '?'}); --otlp alone sends to "
        f"{shown_url(url)}",
    )


def _backends() -> list[Check]:
    from engine.telemetry.backends import (
        AmdSmiBackend,
        BackendUnavailable,
        NvmlBackend,
        PyrsmiBackend,
    )

    out = []
    for label, opener in (
        ("backend nvidia (NVML)", NvmlBackend),
        ("backend amd (amdsmi)", AmdSmiBackend),
        ("backend amd (pyrsmi)", PyrsmiBackend),
    ):
        try:
            b = opener()
        except BackendUnavailable as e:
            out.append(Check(label, False, e.reason, e.remedy))
            continue
        n = len(b.devices)
        out.append(
            Check(
                label,
                n > 0,
                f"{n} GPU(s): {', '.join(d.name for d in b.devices) or '—'}",
                ""
                if n
                else "the library works but sees no GPU: check the container's device access",
            )
        )
        b.close()
    out.append(
        Check(
            "backend sim",
            True,
            "the simulated H100 is always available (--device sim / auto fallback)",
        )
    )
    return out


def _cupti() -> list[Check]:
    out = []
    try:
        from cupti import cupti  # noqa: F401
    except ImportError:
        out.append(
            Check(
                "cupti",
                False,
                "cupti-python is not installed: no live kernel capture",
                "pip install 'gitm-tui[nvidia]' (needs a CUDA 12+ driver)",
            )
        )
    except OSError as e:  # the wheel is there, libcupti is not loadable
        out.append(
            Check(
                "cupti",
                False,
                f"libcupti cannot be loaded ({e})",
                "install the CUDA toolkit's CUPTI or the nvidia-cuda-cupti wheel matching your driver",
            )
        )
    else:
        out.append(Check("cupti", True, f"cupti-python {_ver('cupti-python') or '?'} imports"))
    out.append(_profiling_permission())
    return out


def _profiling_permission() -> Check:
    """NVIDIA restricts GPU performance counters to admins unless the driver allows users."""
    name = "counter permission"
    if not PARAMS.exists():
        return Check(
            name,
            None,
            "no NVIDIA driver here (/proc/driver/nvidia/params absent): nothing to check",
        )
    try:
        text = PARAMS.read_text()
    except OSError as e:
        return Check(name, None, f"cannot read {PARAMS}: {e}")
    for line in text.splitlines():
        if line.startswith("RmProfilingAdminOnly"):
            admin_only = line.split(":")[-1].strip() == "1"
            if admin_only and os.geteuid() != 0:
                return Check(
                    name,
                    False,
                    "GPU performance counters are restricted to admins (RmProfilingAdminOnly: 1)",
                    "echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee "
                    "/etc/modprobe.d/gitm-profiling.conf && reboot (or run as root)",
                )
            return Check(name, True, "counters available to this user")
    return Check(name, None, "RmProfilingAdminOnly not reported by this driver")


def _writable(p: Path) -> str | None:
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p):
            pass
    except OSError as e:
        return str(e.strerror or e)
    return None


def _dirs() -> list[Check]:
    from engine.store.runs import scratch_dir

    out = []
    scratch = scratch_dir()
    err = _writable(scratch)
    src = "GITM_SCRATCH" if os.environ.get("GITM_SCRATCH") else "platformdirs default"
    out.append(
        Check(
            "scratch dir",
            err is None,
            f"{scratch} ({src})" + (f": {err}" if err else ""),
            "" if err is None else "set GITM_SCRATCH to a writable directory",
        )
    )
    nb = os.environ.get("NUMBA_CACHE_DIR")
    pkg_cache = Path(__file__).parent / "eesm" / "__pycache__"
    target = Path(nb) if nb else pkg_cache
    err = _writable(target)
    out.append(
        Check(
            "numba cache",
            err is None or nb is None,
            f"{target}"
            + (" (NUMBA_CACHE_DIR)" if nb else " (next to the package)")
            + (f": not writable ({err}); numba falls back to its user cache dir" if err else ""),
            ""
            if err is None
            else "set NUMBA_CACHE_DIR to a writable directory to keep compiled kernels",
        )
    )
    root = os.environ.get("GITM_S3_ROOT")
    if not root:
        out.append(Check("s3 mirror", None, "GITM_S3_ROOT not set: runs stay in the scratch dir"))
    else:
        proto = root.split("://", 1)[0] if "://" in root else "file"
        try:
            import fsspec

            fsspec.get_filesystem_class(proto)
            out.append(
                Check(
                    "s3 mirror", True, f"runs are mirrored to {root} ({proto} filesystem available)"
                )
            )
        except (ImportError, ValueError) as e:
            out.append(
                Check(
                    "s3 mirror",
                    False,
                    f"GITM_S3_ROOT={root} but the {proto} filesystem is unavailable ({e})",
                    "pip install 'gitm-tui[s3]'"
                    if proto in ("s3", "s3a")
                    else f"install the fsspec backend for {proto}",
                )
            )
    return out
