"""Sinks and the sampler: JSON lines round-trip, the Prometheus endpoint parsed by
prometheus_client's own text parser, the run store mirrored through fsspec (memory://)."""

from __future__ import annotations

import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from engine.device.backend import SimBackend
from engine.telemetry.backends import NvmlBackend
from engine.telemetry.sampler import Sampler
from engine.telemetry.sinks import JsonlSink, PrometheusSink, mirror_run, read_jsonl
from tests.fakes import NOT_SUPPORTED, FakeNvml, raises


def test_jsonl_round_trips(tmp_path):
    b = NvmlBackend(FakeNvml(n=2))
    sink = JsonlSink(tmp_path / "telemetry.jsonl")
    first, second = b.sample(), b.sample()
    sink.write(first)
    sink.write(second)
    sink.close()
    with (tmp_path / "telemetry.jsonl").open("a") as f:
        f.write('{"t_ns": 1, "dev')  # a torn last line: skipped
    back = read_jsonl(tmp_path / "telemetry.jsonl")
    assert back == first + second


def test_prometheus_endpoint_scraped_and_parsed():
    fake = FakeNvml(n=2)
    fake.fields[1]["power"] = raises(NOT_SUPPORTED)
    b = NvmlBackend(fake)
    sink = PrometheusSink(port=0)  # an ephemeral port, on 127.0.0.1
    try:
        assert sink.addr == "127.0.0.1"
        sink.write(b.sample())
        body = (
            urllib.request.urlopen(f"http://127.0.0.1:{sink.port}/metrics", timeout=5)
            .read()
            .decode()
        )
    finally:
        sink.close()
    fams = {f.name: f for f in text_string_to_metric_families(body)}
    util = {s.labels["gpu"]: s.value for s in fams["DCGM_FI_DEV_GPU_UTIL"].samples}
    assert util == {"0": 87.0, "1": 87.0}
    power = {s.labels["gpu"]: s.value for s in fams["DCGM_FI_DEV_POWER_USAGE"].samples}
    assert power == {"0": 512.0}  # device 1 does not report power: absent, not 0
    fb = next(iter(fams["DCGM_FI_DEV_FB_USED"].samples))
    assert fb.value == 40 * 1024 and fb.labels["modelName"] == "NVIDIA H100 80GB HBM3"


def test_mirror_to_an_fsspec_root(tmp_path, monkeypatch):
    import fsspec

    run = tmp_path / "runs" / "20261129-000000-abc123"
    (run / "states").mkdir(parents=True)
    (run / "journal.jsonl").write_text('{"seq": 1}\n')
    (run / "states" / "I1_before.json").write_text("{}")
    written = mirror_run(run, "memory://bucket/gitm")
    fs = fsspec.filesystem("memory")
    assert sorted(written) == [
        "/bucket/gitm/runs/20261129-000000-abc123/journal.jsonl",
        "/bucket/gitm/runs/20261129-000000-abc123/states/I1_before.json",
    ]
    assert fs.cat("/bucket/gitm/runs/20261129-000000-abc123/journal.jsonl") == b'{"seq": 1}\n'
    monkeypatch.delenv("GITM_S3_ROOT", raising=False)
    assert mirror_run(run) == []  # not configured: nothing leaves the machine


async def test_sampler_never_blocks_and_reports_a_lost_gpu(tmp_path):
    fake = FakeNvml(n=2)
    fake.lose_after[0] = 1
    got, lost = [], []
    sink = JsonlSink(tmp_path / "t.jsonl")
    s = Sampler(
        NvmlBackend(fake),
        interval_s=0.01,
        sinks=[sink],
        publish=got.extend,
        on_lost=lambda i, why: lost.append((i, why)),
    )
    ticks = 0

    async def ticker():  # the event loop keeps turning while the sampler works
        nonlocal ticks
        for _ in range(20):
            ticks += 1
            await asyncio.sleep(0.001)

    await asyncio.gather(s.run(rounds=4), ticker())
    sink.close()
    assert ticks == 20 and len(s.cost_s) == 4
    assert [x.device for x in got] == [0, 1, 1, 1, 1]
    assert lost == [(0, fake_reason := lost[0][1])] and "lost" in fake_reason
    assert len(read_jsonl(tmp_path / "t.jsonl")) == 5


def test_sim_backend_samples():
    (s,) = SimBackend().sample()
    assert s.source == "simulated" and s.power_w > 0


def test_the_mirror_copies_no_link_out_of_the_run(tmp_path):
    """Issue 51: a link put in a run's folder was followed — its target, anything on the
    machine, copied to the mirror."""
    import fsspec

    run = tmp_path / "runs" / "20261129-000000-abc124"
    run.mkdir(parents=True)
    (run / "journal.jsonl").write_text('{"seq": 1}\n')
    secret = tmp_path / "secret.txt"
    secret.write_text("not the run's")
    (run / "secret.txt").symlink_to(secret)
    written = mirror_run(run, "memory://bucket/links")
    assert written == ["/bucket/links/runs/20261129-000000-abc124/journal.jsonl"]
    assert not fsspec.filesystem("memory").exists(
        "/bucket/links/runs/20261129-000000-abc124/secret.txt"
    )


async def test_a_mirror_that_never_answers_does_not_hold_the_runs_end(tmp_path, monkeypatch):
    """Issue 51: an unreachable S3 root held a 2 s run to 32.9 s. The run waits for its mirror
    at most mirror_bound_s (2 s for a 2 s budget), says so, and its exit is not held either
    (the copy runs in a daemon thread)."""
    import threading
    from types import SimpleNamespace

    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    from engine.runtime import sources

    never = threading.Event()

    class Unreachable(MemoryFileSystem):
        protocol = "unreachable"

        def put_file(self, *args, **kwargs):
            never.wait()  # an endpoint that accepts and never answers

    fsspec.register_implementation("unreachable", Unreachable, clobber=True)
    run = tmp_path / "runs" / "20261129-000000-abc125"
    run.mkdir(parents=True)
    (run / "journal.jsonl").write_text("{}\n")
    monkeypatch.setenv("GITM_S3_ROOT", "unreachable://bucket")
    said: list[tuple[str, str]] = []
    eng = SimpleNamespace(run_dir=run, config=SimpleNamespace(budget_s=2.0),
                          log=lambda level, msg: said.append((level, msg)))  # fmt: skip
    try:
        await asyncio.wait_for(sources.mirror(eng), 60)  # (a hang check, not a timing)
    finally:
        never.set()
    assert said and said[0][0] == "warning"
    assert "did not finish within 2 s" in said[0][1] and str(run) in said[0][1]
