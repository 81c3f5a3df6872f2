"""Live CUPTI capture with cupti-python (the ``[nvidia]`` extra): kernels, copies, memsets,
synchronisations and runtime calls of the process, as Segments batches while it runs.

    with engine.trace.capture("run/trace.json") as cap:   # DESIGN §9
        train()
    trace = cap.trace()

CUPTI calls ``buffer_completed`` from its own thread; a flusher thread forces a flush every
``flush_interval_s`` so batches arrive live (``on_batch``). On exit everything is flushed, the
activity kinds are disabled, and the trace is written (Chrome-trace JSON that ``gitm-tui
analyze`` reads). Where CUPTI is missing, or profiling is restricted to admins, ``capture``
raises ``CuptiUnavailable`` with the reason and the exact fix.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import BackendUnavailable
from engine.trace.segments import Kind, NameTable, Provenance, Segments
from engine.trace.taxonomy import classify
from engine.trace.trace import HostEvents, Trace, api_kind_from_name

BUFFER_BYTES = 8 << 20


class CuptiUnavailable(BackendUnavailable):
    """CUPTI cannot capture here (library missing, restricted counters, unsupported)."""

    def __init__(self, reason: str, remedy: str) -> None:
        super().__init__("cupti", reason, remedy)


def load_cupti(module: Any | None = None) -> Any:
    """Return ``cupti.cupti`` (or the injected module); CuptiUnavailable if it cannot load."""
    if module is not None:
        return module
    try:
        from cupti import cupti
    except ImportError:
        raise CuptiUnavailable(
            "cupti-python is not installed",
            "pip install 'gitm-tui[nvidia]' (needs a CUDA 12+ driver)",
        ) from None
    except OSError as e:
        raise CuptiUnavailable(
            f"libcupti cannot be loaded ({e})",
            "install the CUPTI matching your driver (CUDA toolkit, or the nvidia-cuda-cupti wheel)",
        ) from None
    return cupti


def _api_kind(name: str) -> int:
    return api_kind_from_name(name)


class CaptureSession:
    """Receives CUPTI activity records and keeps them as columns (thread-safe)."""

    def __init__(
        self, cupti: Any, on_batch: Callable[[Segments, NameTable], None] | None = None
    ) -> None:
        self.cupti = cupti
        self.on_batch = on_batch
        self.names = NameTable()
        self.parts: list[Segments] = []
        self.host: list[tuple[int, int, int, int, int]] = []  # corr, stream, start, end, api
        self.notes: list[str] = []
        self.dropped = 0
        self._lock = threading.Lock()

    # CUPTI's callbacks --------------------------------------------------------------
    def buffer_requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def buffer_completed(self, activities: list[Any]) -> None:
        K = self.cupti.ActivityKind
        rows: dict[str, list[Any]] = {
            k: []
            for k in (
                "start_ns",
                "end_ns",
                "stream",
                "device",
                "kind",
                "name",
                "klass",
                "correlation",
                "grid",
                "block",
                "regs",
                "smem",
                "dram_bytes",
                "provenance",
            )
        }
        host = []
        for a in activities:
            kind = a.kind
            if kind in (K.RUNTIME, getattr(K, "DRIVER", -1)):
                name = _cbid_name(self.cupti, a)
                host.append((int(a.correlation_id), -1, int(a.start), int(a.end), _api_kind(name)))
                continue
            if kind == K.CONCURRENT_KERNEL:
                name = str(a.name)
                k, grid = Kind.KERNEL, int(a.grid_x) * int(a.grid_y) * int(a.grid_z)
                block = int(a.block_x) * int(a.block_y) * int(a.block_z)
                regs = int(getattr(a, "registers_per_thread", 0))
                smem = int(getattr(a, "static_shared_memory", 0)) + int(
                    getattr(a, "dynamic_shared_memory", 0)
                )
                nbytes, prov = np.nan, int(Provenance.GEOMETRY)
            elif kind in (K.MEMCPY, K.MEMSET):
                k = Kind.MEMCPY if kind == K.MEMCPY else Kind.MEMSET
                name = "Memcpy" if kind == K.MEMCPY else "Memset"
                grid = block = regs = smem = 0
                nbytes, prov = float(a.bytes), int(Provenance.DRAM_BYTES)
            elif kind == getattr(K, "SYNCHRONIZATION", -1):
                k, name = Kind.SYNC, "cudaSynchronize"
                grid = block = regs = smem = 0
                nbytes, prov = np.nan, 0
            else:
                continue
            nid = self.names.intern(name)
            rows["start_ns"].append(int(a.start))
            rows["end_ns"].append(max(int(a.start), int(a.end)))
            rows["stream"].append(int(getattr(a, "stream_id", 0)))
            rows["device"].append(int(getattr(a, "device_id", 0)))
            rows["kind"].append(int(k))
            rows["name"].append(nid)
            rows["klass"].append(int(classify(name)))
            rows["correlation"].append(int(getattr(a, "correlation_id", 0)))
            rows["grid"].append(grid)
            rows["block"].append(block)
            rows["regs"].append(regs)
            rows["smem"].append(smem)
            rows["dram_bytes"].append(nbytes)
            rows["provenance"].append(prov)
        seg = Segments.from_columns(**rows) if rows["start_ns"] else None
        with self._lock:
            if seg is not None:
                self.parts.append(seg)
            self.host.extend(host)
        if seg is not None and self.on_batch is not None:
            self.on_batch(seg, self.names)

    # results -------------------------------------------------------------------------
    def trace(self) -> Trace:
        """Everything captured so far, as one Trace."""
        with self._lock:
            seg = Segments.concat(self.parts) if self.parts else Segments.empty()
            h = np.array(self.host, np.int64).reshape(-1, 5)
        host = HostEvents(
            correlation=h[:, 0],
            stream=h[:, 1].astype(np.int32),
            api_start_ns=h[:, 2],
            api_end_ns=h[:, 3],
            api=h[:, 4].astype(np.uint8),
        )
        return Trace(
            segments=seg,
            names=self.names,
            host=host,
            source="cupti capture",
            device_properties={"format": "cupti", "notes": list(self.notes)},
        )


def _cbid_name(cupti: Any, a: Any) -> str:
    enum = getattr(cupti, "runtime_api_trace_cbid", None)
    try:
        return str(enum(int(a.cbid)).name) if enum is not None else ""
    except (ValueError, TypeError):
        return ""


def _kinds(cupti: Any) -> list[tuple[str, Any]]:
    K = cupti.ActivityKind
    return [
        (n, getattr(K, n))
        for n in ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION", "RUNTIME")
        if hasattr(K, n)
    ]


@contextmanager
def capture(
    out_path: str | Path | None = None,
    *,
    flush_interval_s: float = 0.5,
    on_batch: Callable[[Segments, NameTable], None] | None = None,
    cupti_module: Any | None = None,
) -> Iterator[CaptureSession]:
    """Capture this process's GPU activity (module docstring)."""
    cupti = load_cupti(cupti_module)
    sess = CaptureSession(cupti, on_batch)
    enabled = []
    stop = threading.Event()
    flusher: threading.Thread | None = None
    try:
        cupti.activity_register_callbacks(sess.buffer_requested, sess.buffer_completed)
        for name, kind in _kinds(cupti):
            try:
                cupti.activity_enable(kind)
            except Exception as e:
                cls = type(e).__name__
                if "Privilege" in cls or "Permission" in cls:
                    raise CuptiUnavailable(
                        "GPU profiling is restricted to admin users on this machine",
                        "echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee "
                        "/etc/modprobe.d/gitm-profiling.conf && reboot (or run as root)",
                    ) from None
                if "NotSupported" in cls or "NotCompatible" in cls:
                    sess.notes.append(f"activity {name} not supported here: its rows are absent")
                    continue
                raise CuptiUnavailable(
                    f"CUPTI could not enable {name} ({cls}: {e})", "run `gitm-tui doctor`"
                ) from None
            enabled.append(kind)

        def flush_loop() -> None:
            while not stop.wait(flush_interval_s):
                try:
                    cupti.activity_flush_all(0)
                except Exception:
                    continue

        flusher = threading.Thread(target=flush_loop, name="gitm-cupti-flush", daemon=True)
        flusher.start()
        yield sess
    finally:
        stop.set()
        if flusher is not None:
            flusher.join(timeout=5)
        with suppress(Exception):
            cupti.activity_flush_all(1)
        for kind in enabled:
            with suppress(Exception):
                cupti.activity_disable(kind)
        if out_path is not None and (sess.parts or sess.host):
            write_chrome_trace(sess.trace(), Path(out_path))


def write_chrome_trace(trace: Trace, path: Path) -> None:
    """The captured trace as Chrome-trace/Kineto JSON (what ``gitm-tui analyze`` reads)."""
    seg, names = trace.segments, trace.names
    cat = {
        Kind.KERNEL: "kernel",
        Kind.MEMCPY: "gpu_memcpy",
        Kind.MEMSET: "gpu_memset",
        Kind.SYNC: "cuda_sync",
    }
    ev: list[dict[str, Any]] = []
    for i in range(len(seg)):
        args: dict[str, Any] = {
            "stream": int(seg.stream[i]),
            "correlation": int(seg.correlation[i]),
            "device": int(seg.device[i]),
        }
        if seg.kind[i] == Kind.KERNEL:
            args.update(
                {
                    "grid": [int(seg.grid[i]), 1, 1],
                    "block": [int(seg.block[i]), 1, 1],
                    "registers per thread": int(seg.regs[i]),
                    "shared memory": int(seg.smem[i]),
                }
            )
        if seg.dram_bytes[i] == seg.dram_bytes[i]:
            args["bytes"] = int(seg.dram_bytes[i])
        ev.append(
            {
                "ph": "X",
                "cat": cat.get(Kind(int(seg.kind[i])), "kernel"),
                "name": names[int(seg.name[i])],
                "pid": int(seg.device[i]),
                "tid": int(seg.stream[i]),
                "ts": seg.start_ns[i] / 1000.0,
                "dur": (seg.end_ns[i] - seg.start_ns[i]) / 1000.0,
                "args": args,
            }
        )
    h = trace.host
    for i in range(len(h)):
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": f"api{int(h.api[i])}",
                "pid": 0,
                "tid": 0,
                "ts": h.api_start_ns[i] / 1000.0,
                "dur": (h.api_end_ns[i] - h.api_start_ns[i]) / 1000.0,
                "args": {"correlation": int(h.correlation[i])},
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev, "deviceProperties": []}))


def run_python_program(prog: list[str]) -> int:
    """Run ``prog`` (``script.py ARGS`` | ``-m module ARGS`` | ``-c CODE ARGS``) in this process
    as ``__main__``, like ``python`` would; return its exit status. ``sys.argv`` is restored."""
    import runpy
    import sys

    saved = sys.argv
    try:
        if prog[0] == "-m":
            sys.argv = prog[1:]
            runpy.run_module(prog[1], run_name="__main__", alter_sys=True)
        elif prog[0] == "-c":
            sys.argv = ["-c", *prog[2:]]
            exec(compile(prog[1], "<capture -c>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = list(prog)
            runpy.run_path(prog[0], run_name="__main__")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved
    return 0
