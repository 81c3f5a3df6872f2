"""CUPTI capture against a fake of cupti-python's Activity API: records become Segments live,
an unsupported activity kind is noted and the rest flows, restricted profiling and a missing
library are one clear error with the fix, and the saved trace is what `analyze` reads."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.trace.cupti.cupti import CuptiUnavailable, capture, load_cupti
from engine.trace.kineto.kineto import read_kineto
from engine.trace.segments import Kind
from engine.trace.trace import ApiKind
from tests.fakes import FakeCupti
from tests.paths import ROOT


def test_capture_collects_kernels_copies_and_launches_live(tmp_path):
    fake = FakeCupti()
    batches = []
    out = tmp_path / "trace.json"
    with capture(
        out, flush_interval_s=0.02, cupti_module=fake, on_batch=lambda s, n: batches.append(len(s))
    ) as cap:
        assert fake.ActivityKind.CONCURRENT_KERNEL in fake.enabled
        fake.launch(1, "ampere_sgemm_128x64_nn", start=1_000_000, dur=50_000)
        fake.memcpy(2, start=1_100_000, dur=20_000, nbytes=1 << 20)
        for _ in range(100):  # the flusher thread delivers while the program runs
            if batches:
                break
            time.sleep(0.01)
        assert batches, "no live batch"
        fake.launch(3, "vectorized_elementwise_kernel", start=1_200_000, dur=5_000)
    assert not fake.enabled  # kinds disabled on exit
    tr = cap.trace()
    seg = tr.segments
    assert sorted(seg.kind.tolist()) == [Kind.KERNEL, Kind.KERNEL, Kind.MEMCPY]
    k = seg.kind == Kind.KERNEL
    assert set(seg.grid[k].tolist()) == {132} and set(seg.smem[k].tolist()) == {49152}
    assert seg.dram_bytes[seg.kind == Kind.MEMCPY][0] == 1 << 20
    assert (tr.host.api == ApiKind.LAUNCH).sum() == 2
    again = read_kineto(out)  # the saved trace is a Chrome/Kineto trace analyze can read
    assert len(again.segments) == 3 and sorted(again.segments.start_ns.tolist()) == sorted(
        seg.start_ns.tolist()
    )


def test_unsupported_kind_is_noted_and_the_rest_flows():
    fake = FakeCupti(unsupported={FakeCupti.ActivityKind.SYNCHRONIZATION})
    with capture(None, cupti_module=fake) as cap:
        fake.launch(1, "k", start=10_000, dur=1_000)
    assert any("SYNCHRONIZATION not supported" in n for n in cap.notes)
    assert len(cap.trace().segments) == 1


def test_restricted_profiling_is_one_error_with_the_fix():
    with (
        pytest.raises(CuptiUnavailable) as e,
        capture(None, cupti_module=FakeCupti(privileged=True)),
    ):
        pass
    assert "admin" in e.value.reason and "NVreg_RestrictProfilingToAdminUsers=0" in e.value.remedy


def test_missing_cupti_says_how_to_install():
    try:
        load_cupti()
        pytest.skip("cupti-python is installed here")
    except CuptiUnavailable as e:
        assert "gitm-tui[nvidia]" in e.remedy


def test_capture_command_without_cupti_is_one_line_exit_4(tmp_path):
    try:
        load_cupti()
        pytest.skip("cupti-python is installed here")
    except CuptiUnavailable:
        pass
    env = {**__import__("os").environ, "GITM_SCRATCH": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "gitm_tui", "capture", "--", sys.executable, "-c", "print(1)"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert r.returncode == 4 and r.stderr.count("\n") == 1 and "pip install" in r.stderr


def test_capture_command_runs_a_python_program_in_process(tmp_path, monkeypatch, capsys):
    """`gitm-tui capture -- python train.py`: the program runs here, its kernels stream out
    decoded, and the trace lands in the run store."""
    import json

    import engine.trace.cupti.cupti as cupti_mod
    from gitm_tui.cli import main

    fake = FakeCupti()
    monkeypatch.setattr(cupti_mod, "load_cupti", lambda module=None: fake)
    monkeypatch.setitem(sys.modules, "gitm_fake_cupti", fake)
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, gitm_fake_cupti as gpu\n"
        "assert sys.argv[1:] == ['--steps', '40']\n"
        "for i in range(int(sys.argv[2])):\n"
        "    gpu.launch(i + 1, 'ampere_sgemm_128x64_nn', start=1_000_000 + i * 20_000, dur=15_000)\n"
    )
    rc = main(["capture", "--flush", "0.01", "--", "python", str(script), "--steps", "40"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows and all(r["type"] == "decoded" for r in rows)
    assert sum(len(r["labels"]) for r in rows) == 40  # every kernel decoded exactly once
    trace = Path(err.split("analyze with: gitm-tui analyze ")[1].strip())
    assert trace.exists() and len(read_kineto(trace).segments) == 40


async def test_capture_streams_into_the_dashboard(tmp_path, monkeypatch):
    """`gitm-tui capture --ui -- python train.py`: the program runs in a thread under capture and
    its kernels reach the regime strips live."""
    import engine.trace.cupti.cupti as cupti_mod
    from engine.runtime import Engine, RunConfig
    from gitm_tui.app import Settings, make_app
    from gitm_tui.widgets.regime_strip import RegimeStrip
    from gitm_tui.widgets.run_header import RunHeader

    fake = FakeCupti()
    monkeypatch.setattr(cupti_mod, "load_cupti", lambda module=None: fake)
    monkeypatch.setitem(sys.modules, "gitm_fake_cupti", fake)
    script = tmp_path / "train.py"
    script.write_text(
        "import time, gitm_fake_cupti as gpu\n"
        "for i in range(120):\n"
        "    gpu.launch(i + 1, 'ampere_sgemm_128x64_nn', start=1_000_000 + i * 20_000, dur=15_000,"
        " stream=7 if i % 3 else 13)\n"
        "    time.sleep(0.002)\n"
    )
    eng = Engine(
        RunConfig(
            workload="capture",
            budget_s=60,
            capture_program=("python", str(script))[1:],
            capture_flush_s=0.02,
            optimize=False,
        )
    )
    app = make_app(Settings(), eng)
    async with app.run_test(size=(130, 42)) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            strips = {s.stream: s.segments for s in app.query(RegimeStrip)}
            if sum(strips.values()) == 120:
                break
        assert strips == {7: 80, 13: 40}  # every kernel decoded exactly once, per stream
        assert "CUPTI capture" in app.query_one(RunHeader).render().plain
        await pilot.press("q")
    assert (eng.run_dir / "trace.json").exists()
