"""The OpenTelemetry sink: telemetry samples as OTLP/HTTP protobuf metrics to a collector (the
``[otlp]`` extra), named and measured as the Prometheus sink names them (``sinks.DCGM``), one
OTLP resource per GPU, exported by a thread of its own so a slow or dead collector never holds
the engine.

How it behaves, and why:

* **Where to.** The endpoint rules are engine/telemetry/otlp_endpoint.py's (``--otlp URL`` a
  base URL, ``--otlp`` alone the ``OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT`` variables). Headers,
  timeout, compression and TLS files come from the standard ``OTEL_EXPORTER_OTLP_[METRICS_]*``
  variables, read by the SDK's exporter itself; ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` are merged into each
  resource (``service.name`` is ``gitm-tui`` unless the environment names it).
* **What.** Every sample becomes one data point per reported field, at the wall-clock time it
  reached the sink (a simulated device's own clock is not Unix time); a field a device did not
  report is absent, never 0 — as on the Prometheus endpoint. Data points carry dcgm-exporter's
  labels (``gpu``, ``UUID``, ``modelName``, ``Hostname``, ``source``), so a collector's
  Prometheus exporter gives dcgm-exporter's series; the resource says host, device (``hw.*``:
  id, name, vendor, type), run id and whether the device is simulated.
* **When.** A daemon thread exports what arrived every ``interval_s`` (the run passes its
  sampling interval, at least a second); ``close`` wakes it for a last export and waits at most
  ``flush_timeout_s`` (2 s), counted from the start of the export under way, so a healthy
  collector gets every sample — and not at all when the collector is known to be down (its
  last request failed), so a dead one costs the run's end at most 2 s (nothing once an export
  has waited that long), never a hang.
* **When it fails.** ``write`` only appends under a lock (the event loop never waits on the
  network); an export that fails keeps its samples for the next one (``max_pending`` at most, the
  oldest dropped first and counted) and the run goes on. The first failed request (refused, an
  HTTP error — seen by our requests session as it happens, not after the exporter's retries) or
  an export without an answer for ``NO_ANSWER_S`` is said once, as one warning line through
  ``log``; the end of the run adds one line with what was delivered (the warning, if none was
  said yet).
  ``log`` is only called from the thread that calls ``write`` / ``close`` (the event loop's), so
  the engine's bus is never touched from the export thread. The exporter's own log records from
  that thread are kept off stderr: their text (a collector's reason phrase) is outside text, shown
  only cleaned, inside our warning.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from engine.telemetry.otlp_endpoint import (
    EXTRA,
    OtlpUnavailable,
    metrics_url,
    missing_extra,
    problem,
    resolve_endpoint,
    shown_url,
)
from engine.telemetry.sample import TelemetrySample
from engine.telemetry.sinks import DCGM, DCGM_LABELS, dcgm_labels
from engine.text import clean

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricsData

__all__ = [
    "EXTRA",
    "OtlpSink",
    "OtlpUnavailable",
    "metrics_url",
    "missing_extra",
    "problem",
    "resolve_endpoint",
    "shown_url",
    "start_otlp",
]

#: the longest the end of a run waits for the last export: a collector that accepted the
#: connection and never answers costs this, not the exporter's own timeout (10 s by default)
FLUSH_TIMEOUT_S = 2.0
#: an export without an answer this long is said (as the one warning) before it times out: a
#: collector answers a second's samples in milliseconds; the SDK's own timeout is 10 s
NO_ANSWER_S = 5.0
#: samples kept while the collector cannot be reached: about 20 minutes of 8 GPUs sampled once a
#: second; beyond it the oldest are dropped (and counted) so memory stays bounded
MAX_PENDING = 10_000
#: a run exports once per sampling interval but at most once a second: the simulator publishes a
#: sample every 0.1 s window and a collector needs no more than one request a second for that
MIN_EXPORT_INTERVAL_S = 1.0
#: the instrumentation scope of every metric (OTLP's ``ScopeMetrics.scope.name``)
SCOPE = "gitm-tui.telemetry"
#: the resource's vendor for each telemetry source (``TelemetrySample.source``)
VENDORS = {"nvml": "NVIDIA", "amdsmi": "AMD", "pyrsmi": "AMD", "simulated": "simulated"}
#: the loggers whose records from the export thread are kept off stderr (see the module doc)
_QUIET = ("opentelemetry", "urllib3", "requests")

Log = Callable[[str, str], None]


def _credential_provider() -> bool:
    """Return whether the environment names a credential provider for the exporter's session."""
    return any(
        os.environ.get(f"OTEL_PYTHON_EXPORTER_OTLP_HTTP_{kind}CREDENTIAL_PROVIDER")
        for kind in ("", "METRICS_")
    )


def _package_version() -> str:
    try:
        return version("gitm-tui")
    except PackageNotFoundError:
        return "unknown"


def _exception_reason(e: BaseException) -> str:
    """A short reason for a transport error: the operating system's words where one is in the
    chain (``Connection refused``, ``Name or service not known``), else whether it timed out."""
    seen: list[BaseException] = []
    todo = [e]
    while todo and len(seen) < 16:
        x = todo.pop(0)
        if any(x is y for y in seen):
            continue
        seen.append(x)
        # urllib3 keeps the cause in .reason, requests in .args; Python in __cause__/__context__
        more = (getattr(x, "reason", None), x.__cause__, x.__context__, *x.args)
        todo += [y for y in more if isinstance(y, BaseException)]
    for x in seen:
        if isinstance(x, OSError) and not isinstance(x, TimeoutError) and x.strerror:
            return f"{x.strerror} ({type(e).__name__})"
    if any(isinstance(x, TimeoutError) or "Timeout" in type(x).__name__ for x in seen):
        return f"no answer in time ({type(e).__name__})"
    return type(e).__name__


class _ThreadRecords(logging.Filter):
    """Keeps one thread's log records (the export thread's) off the handlers, remembering the
    last one's message: the exporter's own words when nothing better says why an export failed."""

    def __init__(self) -> None:
        super().__init__()
        self.ident: int | None = None
        self.last: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.ident:
            return True
        if record.levelno >= logging.WARNING:
            try:
                self.last = record.getMessage()
            except Exception:  # a malformed record: say what we can
                self.last = str(record.msg)
        return False


#: the most of a collector's response body read (an OTLP answer is a few bytes of protobuf)
MAX_RESPONSE_BYTES = 64 << 10


def _recording_session(on_outcome: Callable[[str | None], None]) -> Any:
    """A requests Session (the exporter's transport) that tells ``on_outcome`` how each request
    went — None, or why not: the exception, the HTTP status and reason phrase — which the
    exporter only logs, and only once its retries are over."""
    import requests

    class Session(requests.Session):
        def request(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["stream"] = True  # the body read here, to a limit, never whole
            try:
                r = super().request(*args, **kwargs)
                # an endpoint that answers "Content-Length: 100000000000" and streams grew the
                # run's memory ~90 MB/s (issue 51): a collector's answer is a few bytes
                body = r.raw.read(MAX_RESPONSE_BYTES, decode_content=True) or b""
                r._content, r._content_consumed = body, True
                r.close()
            except Exception as e:
                on_outcome(_exception_reason(e))
                raise
            on_outcome(None if r.ok else f"HTTP {r.status_code} {r.reason or ''}".strip())
            return r

    return Session()


class OtlpSink:
    """Telemetry samples to an OpenTelemetry collector over OTLP/HTTP protobuf; the same
    ``write`` / ``close`` as the other sinks. Raises OtlpUnavailable without the extra and
    ValueError for a bad endpoint."""

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        run_id: str = "",
        interval_s: float = 1.0,
        log: Log | None = None,
        sim_name: str | None = None,
        timeout_s: float | None = None,
        flush_timeout_s: float = FLUSH_TIMEOUT_S,
        max_pending: int = MAX_PENDING,
    ) -> None:
        """``endpoint``: a base URL, or None for the environment's (``resolve_endpoint``);
        ``interval_s``: seconds between exports; ``log(level, message)``: where the warning and
        the closing line go (kept in ``messages`` when None); ``sim_name``: the model name of a
        simulated device (its samples carry none); ``timeout_s``: one export's limit (None: the
        ``OTEL_EXPORTER_OTLP_[METRICS_]TIMEOUT`` variables, else the SDK's 10 s)."""
        why = missing_extra()
        if why is not None:
            raise OtlpUnavailable(why)
        if not interval_s > 0 or not flush_timeout_s >= 0 or max_pending < 1:
            raise ValueError("interval_s and max_pending must be positive, flush_timeout_s >= 0")
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self.url = resolve_endpoint(endpoint)
        self.shown_url = shown_url(self.url)
        self.run_id = run_id
        self.interval_s = interval_s
        self.flush_timeout_s = flush_timeout_s
        self.max_pending = max_pending
        self.sim_name = sim_name
        self.messages: list[tuple[str, str]] = []
        self._log = log or (lambda level, msg: self.messages.append((level, msg)))
        self.host = socket.gethostname()
        # our own session tells why an export failed (the exporter returns only FAILURE); an
        # OTEL_PYTHON_EXPORTER_OTLP_HTTP_*CREDENTIAL_PROVIDER session is left to the exporter
        self._session = None if _credential_provider() else _recording_session(self._outcome)
        self._exporter = OTLPMetricExporter(
            endpoint=self.url, timeout=timeout_s, session=self._session
        )
        self._scope = InstrumentationScope(SCOPE, _package_version())
        # the environment's service name wins over ours (OTEL_SERVICE_NAME, or service.name in
        # OTEL_RESOURCE_ATTRIBUTES); Resource.create names an unnamed service "unknown_service"
        env_name = str(Resource.create({}).attributes.get("service.name", ""))
        self.service_name = "gitm-tui" if env_name.startswith("unknown_service") else env_name
        #: what every device's resource shares (created once: the SDK adds one
        #: service.instance.id per process, and the environment's attributes)
        self._base = Resource.create(
            {
                "service.name": self.service_name,
                "service.version": _package_version(),
                "host.name": self.host,
                "gitm.run.id": run_id,
            }
        )
        self._resources: dict[tuple[Any, ...], Any] = {}
        #: samples written and not yet delivered, with the wall-clock ns they arrived at
        self._pending: deque[tuple[int, TelemetrySample]] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.written = 0
        self.delivered = 0
        self.dropped = 0
        self.failed_exports = 0
        self._failure: str | None = None  # the first failure's reason, until it is said
        self._warned = False
        #: the last request failed (and none succeeded since): the collector is down
        self._failing = False
        #: monotonic time the export now under way started (None: none is)
        self._inflight_since: float | None = None
        self._closed = False
        self._records = _ThreadRecords()
        self._quieted: list[logging.Logger] = []
        self._thread = threading.Thread(target=self._export_loop, name="gitm-otlp", daemon=True)
        self._quiet_exporter_logs()
        self._thread.start()
        self._records.ident = self._thread.ident

    # ------------------------------------------------------------------ the caller's side
    def write(self, samples: list[TelemetrySample]) -> None:
        """Queue samples for the next export (never waits on the network)."""
        if self._closed:
            return
        now = time.time_ns()
        with self._lock:
            self._pending.extend((now, s) for s in samples)
            self.written += len(samples)
            self._trim()
        self._say_failure()

    def close(self) -> None:
        """Export what is left and stop. Waits at most ``flush_timeout_s`` counted from the
        start of the export under way (from now when none is), and not at all when the
        collector is known to be down (its last request failed); then the export thread, a
        daemon, is left behind."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            now = time.monotonic()
            # an export that has waited already spent that part of its time: a collector that
            # never answers costs the run's end nothing once its first export is that old
            start = self._inflight_since if self._inflight_since is not None else now
            wait = 0.0 if self._failing else max(0.0, start + self.flush_timeout_s - now)
        self._stop.set()
        self._thread.join(wait)
        finished = not self._thread.is_alive()
        # ends the exporter's retry waits at once and closes its connections
        with contextlib.suppress(Exception):  # nothing is left to send through it anyway
            self._exporter.shutdown()
        self._say_failure()
        with self._lock:
            lost = self.written - self.delivered
            since = self._inflight_since
        if lost == 0:
            self._log("info", f"OTLP: {self.delivered} samples exported to {self.shown_url}")
            return
        if finished or since is None:
            why = "exports failed"
        elif self._failing:
            why = "the collector was failing when the run ended"
        else:
            why = f"an export had no answer after {time.monotonic() - since:.1f} s"
        # a warning when nothing was said yet (a collector that never answered): one per run
        self._log(
            "info" if self._warned else "warning",
            clean(
                f"OTLP: {self.delivered} of {self.written} samples delivered to "
                f"{self.shown_url} ({why}); telemetry.jsonl in the run store has them all",
                400,
            ),
        )

    @property
    def pending(self) -> int:
        """Return how many samples wait for the next export."""
        with self._lock:
            return len(self._pending)

    def _trim(self) -> None:
        """Drop the oldest samples beyond ``max_pending`` (lock held)."""
        over = len(self._pending) - self.max_pending
        for _ in range(over):
            self._pending.popleft()
        if over > 0:
            self.dropped += over

    def _say_failure(self) -> None:
        """Say the first failed request — or an export without an answer for ``NO_ANSWER_S`` —
        once, as one warning line (on the caller's thread)."""
        with self._lock:
            reason = None if self._warned else self._failure
            since = self._inflight_since
            if reason is None and not self._warned and since is not None:
                age = time.monotonic() - since
                if age >= NO_ANSWER_S:
                    reason = f"no answer for {age:.0f} s"
            if reason is not None:
                self._warned = True
        if reason is not None:
            self._log(
                "warning",
                clean(
                    f"OTLP export to {self.shown_url} failed ({reason}); the run goes on, "
                    f"keeping up to {self.max_pending} samples and retrying every "
                    f"{self.interval_s:g} s",
                    400,
                ),
            )

    # ------------------------------------------------------------------ the export thread
    def _outcome(self, why: str | None) -> None:
        """How one HTTP request went (the session's callback, on the export thread)."""
        with self._lock:
            self._failing = why is not None
            if why is not None and self._failure is None:
                self._failure = why

    def _quiet_exporter_logs(self) -> None:
        names = [
            n
            for n, lg in logging.root.manager.loggerDict.items()
            if isinstance(lg, logging.Logger) and n.split(".", 1)[0] in _QUIET
        ]
        for n in (*_QUIET, *names):
            lg = logging.getLogger(n)
            lg.addFilter(self._records)
            self._quieted.append(lg)

    def _export_loop(self) -> None:
        self._records.ident = threading.get_ident()
        try:
            while True:
                stopping = self._stop.wait(self.interval_s)
                self._export_pending()
                if stopping:
                    return
        finally:  # the filter goes with the thread, whenever it ends
            for lg in self._quieted:
                lg.removeFilter(self._records)

    def _export_pending(self) -> None:
        with self._lock:
            batch = list(self._pending)
            self._pending.clear()
            if batch:
                self._inflight_since = time.monotonic()
        if not batch:
            return
        from opentelemetry.sdk.metrics.export import MetricExportResult

        self._records.last = None
        try:
            data = self._metrics_data(batch)
            ok = (
                not data.resource_metrics
                or self._exporter.export(data) == MetricExportResult.SUCCESS
            )
            reason = self._records.last or "the collector did not accept the request"
        except Exception as e:  # a transport error an exporter version raises instead of logging
            ok, reason = False, f"{type(e).__name__}: {e}"
        with self._lock:
            self._inflight_since = None
            if ok:
                self.delivered += len(batch)
                self._failing = False
                return
            self.failed_exports += 1
            self._failing = True
            if self._failure is None:  # (the session's reason, when it had one, came first)
                self._failure = reason
            # kept for the next export, before what arrived meanwhile; the oldest go first
            self._pending.extendleft(reversed(batch))
            self._trim()

    def _metrics_data(self, batch: list[tuple[int, TelemetrySample]]) -> MetricsData:
        """One OTLP request's data: a resource per device, a gauge per reported field with a
        data point per sample."""
        from opentelemetry.sdk.metrics.export import (
            Gauge,
            Metric,
            MetricsData,
            NumberDataPoint,
            ResourceMetrics,
            ScopeMetrics,
        )

        by_device: dict[tuple[int, str], list[tuple[int, TelemetrySample]]] = {}
        for t, s in batch:
            by_device.setdefault((s.device, s.source), []).append((t, s))
        out = []
        for rows in by_device.values():
            metrics = []
            for f in DCGM:
                points = []
                for t, s in rows:
                    v = f.value(s)
                    if v is not None:
                        labels = dict(zip(DCGM_LABELS, dcgm_labels(s, self.host), strict=True))
                        points.append(
                            NumberDataPoint(
                                attributes=labels,
                                start_time_unix_nano=0,  # a gauge has no start (OTLP data model)
                                time_unix_nano=t,
                                value=v,
                            )
                        )
                if points:
                    metrics.append(
                        Metric(
                            name=f.name,
                            description=f.help,
                            unit=f.unit,
                            data=Gauge(data_points=points),
                        )
                    )
            if metrics:
                out.append(
                    ResourceMetrics(
                        resource=self._resource(rows[-1][1]),
                        scope_metrics=[
                            ScopeMetrics(scope=self._scope, metrics=metrics, schema_url="")
                        ],
                        schema_url="",
                    )
                )
        return MetricsData(resource_metrics=out)

    def _resource(self, s: TelemetrySample) -> Any:
        """The OTLP resource of the device that took ``s`` (cached per device identity)."""
        key = (s.device, s.source, s.name, s.uuid)
        res = self._resources.get(key)
        if res is None:
            from opentelemetry.sdk.resources import Resource

            res = self._resources[key] = self._base.merge(Resource(self.device_attributes(s)))
        return res

    def device_attributes(self, s: TelemetrySample) -> dict[str, str | int | bool]:
        """The resource attributes of the device that took ``s``, added to the host, run and
        service ones (``hw.*`` are OpenTelemetry's hardware semantic conventions; ``gitm.*`` are
        ours)."""
        simulated = s.source == "simulated"
        attrs: dict[str, str | int | bool] = {
            "hw.type": "gpu",
            # unique on the host: the GPU's UUID where the library reports one
            "hw.id": s.uuid or f"gpu{s.device}",
            "hw.vendor": VENDORS.get(s.source, "unknown"),
            "gitm.device.index": s.device,
            "gitm.device.simulated": simulated,
            "gitm.telemetry.source": s.source,
        }
        name = s.name or (self.sim_name if simulated else None)
        if name:
            attrs["hw.name"] = name
        if s.uuid:
            attrs["gitm.device.uuid"] = s.uuid
        return attrs


def start_otlp(
    endpoint: str,
    run_id: str,
    interval_s: float,
    log: Log,
    sim_name: str | None = None,
) -> list[OtlpSink]:
    """The run's OTLP sink (``endpoint`` '' = the environment's), exporting once per sampling
    interval but at most once a second; none, after one warning line, when it cannot start."""
    try:
        sink = OtlpSink(
            endpoint or None,
            run_id=run_id,
            interval_s=max(MIN_EXPORT_INTERVAL_S, interval_s),
            log=log,
            sim_name=sim_name,
            flush_timeout_s=FLUSH_TIMEOUT_S,
        )
    except (OtlpUnavailable, ValueError, RuntimeError, OSError) as e:
        log("warning", clean(f"OTLP sink not started: {e}", 400))
        return []
    log("info", f"OTLP metrics to {sink.shown_url} every {sink.interval_s:g} s")
    return [sink]
