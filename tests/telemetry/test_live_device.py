"""Live mode on a real GPU, driven through the NVML fake: the header says which device, every
GPU shows in the device panel, a lost GPU is reported and the run goes on; without a GPU,
`--device auto` falls back to the simulator and `--device nvidia` fails with one line."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

import engine.telemetry.backends as backends
from engine.runtime import Engine, RunConfig
from engine.runtime.events import LogEvent, RunStarted, TelemetryEvent
from engine.telemetry.sinks import read_jsonl
from tests.fakes import FakeNvml
from tests.paths import ROOT


@pytest.fixture
def fake_gpus(monkeypatch):
    fake = FakeNvml(n=2)
    fake.lose_after[1] = 3
    real = backends.NvmlBackend
    monkeypatch.setattr(backends, "NvmlBackend", lambda: real(fake))
    return fake


async def test_watching_two_gpus_one_lost(fake_gpus):
    eng = Engine(RunConfig(device="nvidia", budget_s=0.6, telemetry_interval_s=0.05))
    sub = eng.bus.subscribe()
    task = asyncio.ensure_future(eng.run())
    evs = [e async for e in sub]
    await task
    start = next(e for e in evs if isinstance(e, RunStarted))
    assert not start.simulated and start.device.startswith("nvidia: 2× NVIDIA H100")
    tel = [s for e in evs if isinstance(e, TelemetryEvent) for s in e.samples()]
    assert {s.device for s in tel} == {0, 1} and all(s.source == "nvml" for s in tel)
    assert sum(s.device == 1 for s in tel) == 3  # lost after its third sample
    assert sum(s.device == 0 for s in tel) > 3  # ... and device 0 went on
    assert any(
        isinstance(e, LogEvent) and "GPU 1" in e.message and "lost" in e.message for e in evs
    )
    assert evs[-1].status == "completed"
    assert len(read_jsonl(eng.run_dir / "telemetry.jsonl")) == len(tel)


async def test_auto_prefers_the_real_gpu(fake_gpus):
    eng = Engine(RunConfig(device="auto", budget_s=0.2, telemetry_interval_s=0.05))
    assert eng.backend is not None and eng.device_label.startswith("nvidia")


async def test_dashboard_shows_every_gpu(fake_gpus):
    from gitm_tui.app import Settings, make_app
    from gitm_tui.widgets.run_header import RunHeader
    from gitm_tui.widgets.telemetry_panel import TelemetryPanel

    eng = Engine(RunConfig(device="nvidia", budget_s=5, telemetry_interval_s=0.05))
    app = make_app(Settings(), eng)
    async with app.run_test(size=(130, 42)) as pilot:
        for _ in range(60):
            await pilot.pause(0.05)
            if len(app.query_one(TelemetryPanel)._lasts) == 2:
                break
        text = app.query_one(TelemetryPanel).render().plain
        assert "2 devices" in text and "GPU 0" in text and "GPU 1" in text
        header = app.query_one(RunHeader).render().plain
        assert "nvidia" in header and "SIMULATED" not in header
        await pilot.press("q")


@pytest.mark.slow
def test_without_a_gpu_nvidia_fails_with_one_line_and_auto_falls_back(tmp_path):
    try:
        backends.NvmlBackend()
        pytest.skip("a real NVIDIA GPU is present")
    except backends.BackendUnavailable:
        pass
    env = {**__import__("os").environ, "GITM_SCRATCH": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "gitm_tui", "--no-ui", "--device", "nvidia", "--budget", "1s"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert r.returncode == 4 and r.stderr.count("\n") == 1 and "fix:" in r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gitm_tui",
            "--no-ui",
            "--device",
            "auto",
            "--watch",
            "--budget",
            "1s",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert r.returncode == 0 and "no GPU found: running on the simulated H100" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "gitm_tui", "--no-ui", "--device", "tpu"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert r.returncode == 2 and "unknown device" in r.stderr


def test_doctor_names_every_missing_piece(tmp_path):
    env = {**__import__("os").environ, "GITM_SCRATCH": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "gitm_tui", "doctor"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    for name in (
        "backend nvidia (NVML)",
        "backend amd (amdsmi)",
        "backend sim",
        "cupti",
        "counter permission",
        "numba cache",
        "scratch dir",
        "s3 mirror",
    ):
        assert sum(line.split(":")[0].endswith(name) for line in lines) == 1, name
    for line in lines:
        if line.startswith("✗"):
            assert "fix:" in line  # every problem: one line with its remedy
    import json

    j = json.loads(
        subprocess.run(
            [sys.executable, "-m", "gitm_tui", "doctor", "--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
        ).stdout
    )
    assert {"name", "ok", "detail", "remedy"} <= set(j[0])
