"""The OTLP sink against a receiver in the test that decodes the real OTLP/HTTP wire format
(opentelemetry-proto's ExportMetricsServiceRequest): the Prometheus sink's names, units, help and
values for the same samples, the resource attributes, the OTEL_* environment, the final flush,
and collectors that refuse, never answer or answer with hostile text."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from prometheus_client.parser import text_string_to_metric_families

from engine.device.backend import SimBackend
from engine.runtime import RunConfig
from engine.runtime.engine import Engine
from engine.telemetry import otlp
from engine.telemetry.backends import NvmlBackend
from engine.telemetry.otlp import OtlpSink, OtlpUnavailable, metrics_url, resolve_endpoint
from engine.telemetry.sinks import DCGM, PrometheusSink
from gitm_tui.cli import main
from tests.fakes import NOT_SUPPORTED, FakeNvml, raises

SIM_NAME = "H100 SXM5 80GB"


class Receiver:
    """An OTLP/HTTP metrics receiver: decodes each request body as the collector does."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], ExportMetricsServiceRequest]] = []
        self.status, self.reason = 200, "OK"
        self.arrived = threading.Condition()
        rx = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                req = ExportMetricsServiceRequest()
                req.ParseFromString(body)  # raises on anything that is not the wire format
                with rx.arrived:  # kept before the answer: the sender's close sees it recorded
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    rx.requests.append((self.path, headers, req))
                    rx.arrived.notify_all()
                reply = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(rx.status, rx.reason)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:  # nothing on the test's stderr
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_port}"

    def wait_for(self, n: int, timeout: float = 20.0) -> None:
        """Wait until ``n`` requests arrived (a hang guard, not a timing)."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.requests) >= n, timeout)


@pytest.fixture(scope="module")
def server() -> Iterator[Receiver]:
    rx = Receiver()
    yield rx
    rx.server.shutdown()


@pytest.fixture
def receiver(server: Receiver) -> Receiver:
    server.requests.clear()
    server.status, server.reason = 200, "OK"
    return server


def _value(attrs: Any) -> Any:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in attrs}


Series = dict[str, dict[tuple[tuple[str, Any], ...], list[tuple[int, float]]]]


def decoded(rx: Receiver) -> tuple[list[dict[str, Any]], Series, dict[str, tuple[str, str]]]:
    """Every request's resources (their attributes), series (metric → labels → [(t, value)]) and
    metric metadata (name → (unit, description))."""
    resources: list[dict[str, Any]] = []
    series: Series = {}
    meta: dict[str, tuple[str, str]] = {}
    for _, _, req in rx.requests:
        for rm in req.resource_metrics:
            resources.append(_value(rm.resource.attributes))
            for sm in rm.scope_metrics:
                assert sm.scope.name == "gitm-tui.telemetry"
                for m in sm.metrics:
                    assert m.WhichOneof("data") == "gauge"
                    meta[m.name] = (m.unit, m.description)
                    for p in m.gauge.data_points:
                        labels = tuple(sorted(_value(p.attributes).items()))
                        series.setdefault(m.name, {}).setdefault(labels, []).append(
                            (p.time_unix_nano, p.as_double)
                        )
    return resources, series, meta


def _samples() -> list:
    """Two NVML GPUs (fake library; GPU 1 reports no power) and the simulated one."""
    fake = FakeNvml(n=2)
    fake.fields[1]["power"] = raises(NOT_SUPPORTED)
    return NvmlBackend(fake).sample() + SimBackend().sample()


def test_the_wire_carries_the_prometheus_names_units_and_values(receiver):
    samples = _samples()
    prom = PrometheusSink(port=0)
    try:
        prom.write(samples)
        url = f"http://127.0.0.1:{prom.port}/metrics"
        body = urllib.request.urlopen(url, timeout=5).read().decode()
    finally:
        prom.close()
    fams = {f.name: f for f in text_string_to_metric_families(body) if f.name.startswith("DCGM")}
    shown = {
        f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples}
        for f in fams.values()
        if f.samples
    }

    sink = OtlpSink(receiver.base, run_id="run-otlp-test", interval_s=60, sim_name=SIM_NAME)
    sink.write(samples)
    sink.close()  # the one export: the final flush

    (path, headers, _), *_ = receiver.requests
    assert path == "/v1/metrics" and headers["content-type"] == "application/x-protobuf"
    resources, series, meta = decoded(receiver)
    # the same series with the same values as the Prometheus endpoint: a field a GPU does not
    # report (GPU 1's power) is absent from both, never 0
    assert {name: {k: v[-1][1] for k, v in s.items()} for name, s in series.items()} == shown
    assert not any(dict(k)["gpu"] == "1" for k in series["DCGM_FI_DEV_POWER_USAGE"])
    # units from the one table, help texts as Prometheus shows them
    units = {f.name: f.unit for f in DCGM}
    assert {n: u for n, (u, _) in meta.items()} == {n: units[n] for n in meta}
    assert {n: d for n, (_, d) in meta.items()} == {n: fams[n].documentation for n in meta}
    assert meta["DCGM_FI_DEV_FB_USED"][0] == "MiBy" and meta["DCGM_FI_DEV_GPU_TEMP"][0] == "Cel"
    fb = {dict(k)["source"]: v[0][1] for k, v in series["DCGM_FI_DEV_FB_USED"].items()}
    assert fb["nvml"] == 40 * 1024  # 40 GiB used, in MiB as dcgm-exporter counts it
    # one resource per GPU: host, device, run, service
    by_dev = {(r["gitm.telemetry.source"], r["gitm.device.index"]): r for r in resources}
    assert set(by_dev) == {("nvml", 0), ("nvml", 1), ("simulated", 0)}
    host = socket.gethostname()
    for r in resources:
        assert r["service.name"] == "gitm-tui" and r["host.name"] == host
        assert r["gitm.run.id"] == "run-otlp-test" and r["hw.type"] == "gpu"
    nv = by_dev["nvml", 1]
    assert (nv["hw.name"], nv["hw.vendor"], nv["hw.id"]) == (
        "NVIDIA H100 80GB HBM3",
        "NVIDIA",
        "GPU-fake-1",
    )
    assert nv["gitm.device.uuid"] == "GPU-fake-1" and nv["gitm.device.simulated"] is False
    sim = by_dev["simulated", 0]
    assert (sim["hw.name"], sim["hw.vendor"], sim["hw.id"]) == (SIM_NAME, "simulated", "gpu0")
    assert sim["gitm.device.simulated"] is True and "gitm.device.uuid" not in sim
    assert sink.messages == [("info", f"OTLP: 3 samples exported to {receiver.base}/v1/metrics")]


def test_exports_while_running_and_flushes_the_rest_at_close(receiver):
    b = NvmlBackend(FakeNvml(n=1))
    sink = OtlpSink(receiver.base, run_id="r", interval_s=0.05)
    sink.write(b.sample())
    receiver.wait_for(1)  # exported by the thread, before any close
    sink.write(b.sample())
    sink.write(b.sample())
    sink.close()
    _, series, _ = decoded(receiver)
    (points,) = series["DCGM_FI_DEV_GPU_UTIL"].values()
    assert len(points) == 3 == sink.delivered  # nothing lost at the end
    assert [t for t, _ in points] == sorted(t for t, _ in points)
    assert abs(points[-1][0] - time.time_ns()) < 60e9  # Unix time, not a device clock


def test_the_standard_environment_variables(receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=gpu-lab,authorization=Bearer%20t0k")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "lab-gpus")
    sample = NvmlBackend(FakeNvml(n=1)).sample()
    sink = OtlpSink(None, run_id="r", interval_s=60)  # --otlp without a URL
    sink.write(sample)
    sink.close()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", f"{receiver.base}/custom/metrics")
    sink = OtlpSink(None, run_id="r", interval_s=60)
    sink.write(sample)
    sink.close()
    assert [p for p, _, _ in receiver.requests] == ["/v1/metrics", "/custom/metrics"]
    for _, headers, _ in receiver.requests:
        assert headers["x-tenant"] == "gpu-lab" and headers["authorization"] == "Bearer t0k"
    resources, _, _ = decoded(receiver)
    assert {r["service.name"] for r in resources} == {"lab-gpus"}


def test_endpoint_rules(monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert metrics_url("http://collector:4318") == "http://collector:4318/v1/metrics"
    assert metrics_url("http://collector:4318/") == "http://collector:4318/v1/metrics"
    assert metrics_url("https://gw.example/otlp") == "https://gw.example/otlp/v1/metrics"
    assert metrics_url("http://c:4318/v1/metrics") == "http://c:4318/v1/metrics"
    assert resolve_endpoint(None) == "http://localhost:4318/v1/metrics"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318")
    assert resolve_endpoint(None) == "http://base:4318/v1/metrics"
    assert resolve_endpoint("http://flag:4318") == "http://flag:4318/v1/metrics"  # the flag wins
    for bad in (
        "collector:4318",
        "ftp://c",
        "http://",
        "http://c:99999",
        "http://c/#x",
        "http://[::1",
    ):
        with pytest.raises(ValueError, match="bad OTLP endpoint"):
            metrics_url(bad)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "ftp://x\x1b[2J")
    with pytest.raises(ValueError) as e:
        resolve_endpoint(None)
    assert str(e.value).startswith("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: bad OTLP endpoint")
    assert "\x1b" not in str(e.value) and "'ftp://x\\x1b[2J'" in str(e.value)
    assert otlp.shown_url("http://user:secret@c:4318/v1/metrics") == "http://c:4318/v1/metrics"


def _dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return port


def _wait(cond: Any, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.01)


def test_a_refusing_collector_is_one_warning_and_memory_stays_bounded():
    b = NvmlBackend(FakeNvml(n=2))
    sink = OtlpSink(
        f"http://127.0.0.1:{_dead_port()}",
        interval_s=0.05,
        timeout_s=120,  # the exporter would retry the refused connection this long
        max_pending=3,
        flush_timeout_s=120,
    )
    sink.write(b.sample())
    # the refusal is said at the next write, on the caller's thread, while the exporter retries
    _wait(lambda: sink.write([]) or any(level == "warning" for level, _ in sink.messages))
    for _ in range(3):
        sink.write(b.sample())
    closing = threading.Thread(target=sink.close)
    closing.start()
    closing.join(60)  # a hang guard: a collector known to be down is not waited for (120 s)
    assert not closing.is_alive()
    warnings = [m for level, m in sink.messages if level == "warning"]
    assert len(warnings) == 1 and "Connection refused" in warnings[0]
    # the export the close cut short puts its 2 samples back, and the cap drops the oldest
    _wait(lambda: sink.pending + sink.dropped == sink.written == 8)
    assert sink.delivered == 0 and sink.pending == 3 and sink.dropped == 5
    assert sink.messages[-1] == (
        "info",
        f"OTLP: 0 of 8 samples delivered to {sink.shown_url} (the collector was failing when "
        "the run ended); telemetry.jsonl in the run store has them all",
    )


def test_a_collector_that_never_answers_cannot_hold_the_end():
    dead = socket.socket()  # accepts TCP connections (the kernel's backlog), never answers
    dead.bind(("127.0.0.1", 0))
    dead.listen(8)
    try:
        b = NvmlBackend(FakeNvml(n=1))
        sink = OtlpSink(
            f"http://127.0.0.1:{dead.getsockname()[1]}",
            interval_s=0.05,
            timeout_s=120,  # the exporter would wait this long for an answer
            flush_timeout_s=0.2,
        )
        sink.write(b.sample())
        _wait(lambda: sink.pending == 0)  # the export thread took it: a request hangs now
        sink.write(b.sample())  # the caller never waits on it
        closing = threading.Thread(target=sink.close)
        closing.start()
        closing.join(60)  # a hang guard: close waits flush_timeout_s, not the exporter's 120 s
        assert not closing.is_alive()
    finally:
        dead.close()
    (warning,) = sink.messages
    assert warning[0] == "warning" and "0 of 2 samples delivered" in warning[1]
    assert "an export had no answer after" in warning[1]


def test_hostile_collector_text_is_cleaned_and_the_sdk_log_stays_quiet(receiver, caplog):
    # an OSC that retitles the terminal and a C1 CSI: the status line is Latin-1
    receiver.status, receiver.reason = 400, "\x1b]0;owned\x07 Bad\x9b2JRequest"
    sink = OtlpSink(receiver.base, interval_s=60)
    sink.write(NvmlBackend(FakeNvml(n=1)).sample())
    sink.close()
    (warning,) = [m for level, m in sink.messages if level == "warning"]
    assert "HTTP 400" in warning and "\x1b" not in warning and "\x9b" not in warning
    assert "\\x1b]0;owned" in warning
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]


def test_missing_extra_or_bad_url_is_one_line_and_exit_2(monkeypatch, capsys):
    assert main(["--no-ui", "--otlp", "collector:4318"]) == 2
    assert "bad OTLP endpoint 'collector:4318'" in capsys.readouterr().err
    monkeypatch.setitem(
        __import__("sys").modules, "opentelemetry.exporter.otlp.proto.http.metric_exporter", None
    )
    assert main(["--no-ui", "--otlp", "http://collector:4318"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'gitm-tui[otlp]'" in err[0]
    with pytest.raises(OtlpUnavailable, match=r"gitm-tui\[otlp\]"):
        OtlpSink("http://collector:4318")
    said: list[tuple[str, str]] = []
    assert otlp.start_otlp("", "r", 1.0, lambda lvl, m: said.append((lvl, m))) == []
    assert len(said) == 1 and said[0][0] == "warning" and "gitm-tui[otlp]" in said[0][1]


async def _run(cfg: RunConfig) -> tuple[Engine, list]:
    eng = Engine(cfg)
    sub = eng.bus.subscribe()
    task = asyncio.ensure_future(eng.run())
    evs = [ev async for ev in sub]
    await asyncio.wait_for(task, 60)  # a hang guard
    return eng, evs


async def test_a_run_sends_its_telemetry_and_ends_with_a_dead_collector(
    receiver, monkeypatch, tmp_path
):
    monkeypatch.setattr(otlp, "FLUSH_TIMEOUT_S", 0.2)
    base = dict(workload="kitti", realtime=False, max_windows=4, optimize=False)
    eng, evs = await _run(RunConfig(**base, otlp_endpoint=receiver.base))
    resources, series, _ = decoded(receiver)
    assert {r["gitm.run.id"] for r in resources} == {eng.run_id}
    assert resources[0]["gitm.device.simulated"] is True and resources[0]["hw.name"] == SIM_NAME
    (points,) = series["DCGM_FI_DEV_GPU_UTIL"].values()
    published = [smp for e in evs if e.kind == "telemetry" for smp in e.samples()]
    assert len(points) == len(published) > 0  # every sample the run published reached it
    assert [v for _, v in points] == [smp.gpu_util for smp in published]

    # a store of its own: the next run would report the first (a watch run: no journal) as died
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path / "second"))
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead.listen(8)
    with contextlib.closing(dead):
        cfg = RunConfig(
            **{**base, "realtime": True, "max_windows": None},
            budget_s=1.0,
            tick_s=0.05,
            otlp_endpoint=f"http://127.0.0.1:{dead.getsockname()[1]}",
        )
        _, evs = await _run(cfg)
    fin = evs[-1]
    assert fin.kind == "run_finished" and fin.status == "completed"
    warnings = [e.message for e in evs if e.kind == "log" and e.level == "warning"]
    assert len(warnings) == 1 and "OTLP" in warnings[0]


def test_the_documented_table_is_the_code_s():
    from pathlib import Path

    doc = Path(__file__).parents[2] / "docs" / "telemetry.md"
    rows = [
        tuple(c.strip().strip("`") for c in line.strip("|").split("|"))
        for line in doc.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `DCGM_")
    ]
    assert rows == [(f.name, f.unit, f.field, f.help) for f in DCGM]


def test_a_collector_that_streams_an_endless_answer_is_read_to_a_limit():
    """An endpoint answering "Content-Length: 100000000000" and streaming grew the run's
    memory ~90 MB/s until the run ended (issue 51): its answer is read to MAX_RESPONSE_BYTES
    and the connection closed, each export."""
    sent = {"bytes": 0}

    class Flood(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "100000000000")
            self.end_headers()
            chunk = b"\0" * (1 << 20)
            with contextlib.suppress(OSError):
                for _ in range(64):  # 64 MiB offered; far more than any answer
                    self.wfile.write(chunk)
                    sent["bytes"] += len(chunk)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Flood)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        b = NvmlBackend(FakeNvml(n=1))
        sink = OtlpSink(
            f"http://127.0.0.1:{server.server_address[1]}", interval_s=0.05, flush_timeout_s=5
        )
        sink.write(b.sample())
        _wait(lambda: sink.delivered >= 1)
        closing = threading.Thread(target=sink.close)
        closing.start()
        closing.join(60)
        assert not closing.is_alive()
    finally:
        server.shutdown()
    # the client stopped reading early: the server could not push the 64 MiB it offered
    assert sent["bytes"] < 32 << 20, sent
