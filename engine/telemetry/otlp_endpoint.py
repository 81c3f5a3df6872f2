"""Where the OTLP sink sends and whether it can: the ``[otlp]`` extra's presence, and the
OTLP/HTTP metrics URL of ``--otlp [URL]`` or of the environment, by the OpenTelemetry exporter
specification's rules. No OpenTelemetry import at module level: the CLI checks a flag with it
before any run starts.

``--otlp URL`` is a base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is (``http://collector:4318`` →
``…/v1/metrics``), except that a URL already ending in ``/v1/metrics`` is kept; ``--otlp`` alone
takes ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` as it is, else ``OTEL_EXPORTER_OTLP_ENDPOINT``
plus ``/v1/metrics``, else ``http://localhost:4318/v1/metrics``. Every URL, given or from the
environment, is checked (http or https, a host, a port in range) and shown only cleaned and
without credentials.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

from engine.text import clean

#: the one remedy for a missing SDK or exporter
EXTRA = "pip install 'gitm-tui[otlp]'"
#: OTLP/HTTP's metrics path, appended to a base URL (OTLP specification, "OTLP/HTTP Request")
METRICS_PATH = "/v1/metrics"
#: OTLP/HTTP's default endpoint (port 4318: the OTLP specification's default for OTLP/HTTP)
DEFAULT_BASE = "http://localhost:4318"


class OtlpUnavailable(Exception):
    """The ``[otlp]`` extra is not installed: the message is the one line to show."""


def missing_extra() -> str | None:
    """Return one line saying what is missing when the SDK or its OTLP/HTTP exporter cannot be
    imported, else None."""
    try:
        import opentelemetry.exporter.otlp.proto.http.metric_exporter
        import opentelemetry.sdk.metrics.export
        import opentelemetry.sdk.resources  # noqa: F401
    except ImportError as e:
        what = e.name or "the OpenTelemetry SDK"
        return (
            f"--otlp needs the OpenTelemetry SDK and its OTLP/HTTP exporter ({what} cannot be "
            f"imported): {EXTRA}"
        )
    return None


def metrics_url(url: str, keep_metrics_path: bool = True) -> str:
    """Return the OTLP/HTTP metrics URL of a base URL (``http://collector:4318`` →
    ``http://collector:4318/v1/metrics``); with ``keep_metrics_path`` a URL already ending in
    ``/v1/metrics`` is kept as it is. ValueError (one line) unless it is an http(s) URL with a
    host and a valid port."""
    bad = ValueError(
        f"bad OTLP endpoint '{clean(url, 200)}': use http(s)://HOST[:PORT], e.g. "
        "http://collector:4318"
    )
    try:
        parts = urlsplit(url.strip())  # raises ValueError for a bad [IPv6] host
        _ = parts.port  # raises ValueError for a port that is not a number in 0..65535
    except ValueError:
        raise bad from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise bad
    if parts.fragment:
        raise ValueError(f"bad OTLP endpoint '{clean(url, 200)}': a URL with a #fragment")
    path = parts.path.rstrip("/")
    if not (keep_metrics_path and path.endswith(METRICS_PATH)):
        path += METRICS_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def resolve_endpoint(url: str | None) -> str:
    """Return the metrics URL the sink posts to: ``url`` (a base URL, see ``metrics_url``), else
    ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` as it is, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` plus
    ``/v1/metrics``, else ``http://localhost:4318/v1/metrics`` (the OpenTelemetry exporter
    specification's order). ValueError (one line) for a URL that is not http(s)."""
    if url:
        return metrics_url(url)
    for var in ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        value = os.environ.get(var, "").strip()
        if not value:
            continue
        try:
            full = metrics_url(value, keep_metrics_path=False)
        except ValueError as e:
            raise ValueError(f"{var}: {e}") from None
        # the signal's own variable is used as it is, the base one gets the path (the spec)
        return value if var == "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT" else full
    return metrics_url(DEFAULT_BASE)


def shown_url(url: str) -> str:
    """The endpoint as it may be shown: credentials in it (``user:pass@``) left out, cleaned."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return clean(urlunsplit((parts.scheme, host + port, parts.path, "", "")), 200)


def problem(url: str | None) -> str | None:
    """The one line that stops ``--otlp [URL]`` before a run starts — the extra missing, a bad
    URL (given, or in the environment) — or None when the sink can start."""
    why = missing_extra()
    if why is not None:
        return why
    try:
        resolve_endpoint(url or None)
    except ValueError as e:
        return str(e)
    return None
