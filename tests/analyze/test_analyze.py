"""`gitm-tui analyze` outputs: schema, Perfetto regime tracks, report, numbers that add up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.analyze.breakdown.model import Analysis
from engine.analyze.output.export import schema_json
from engine.regimes import Label
from gitm_tui.cli import main
from tests.paths import ROOT, TRACES

ALL = sorted((TRACES / "kineto").glob("*.json.gz")) + sorted((TRACES / "nsys").glob("*.sqlite"))


def test_committed_schema_is_current():
    committed = (ROOT / "manifests" / "schemas" / "analysis.schema.json").read_text()
    assert committed == schema_json(), (
        "regenerate: python -c 'from engine.analyze.output.export import schema_json'"
    )


def test_analyze_every_shared_trace(tmp_path, capsys):
    assert main(["analyze", *map(str, ALL), "--out", str(tmp_path), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "GPU time by label" in out
    for path in ALL:
        stem = path.name.removesuffix(".gz").removesuffix(".json").removesuffix(".sqlite")
        d = tmp_path / stem
        a = Analysis.model_validate_json((d / "analysis.json").read_text())
        # every shipped trace names a catalogued device but the MTIA one (in no catalogue): the
        # MI300X ones too, whose rows carry roctracer's HSA agent number (engine.planner.devices)
        unnamed = a.format == "kineto" and "MTIA" in a.hardware.name
        assert (a.hardware.id is None) == unnamed, (path.name, a.hardware)
        assert a.counting and a.evidence is not None
        assert sum(a.time_by_regime_ns.values()) == a.gpu_time_ns
        if a.profiler_ranges is not None and a.segments == 0:  # CUPTI-profiler mode: ranges only
            continue
        assert sum(a.time_by_class_ns.values()) == a.gpu_time_ns
        for s in a.streams:
            assert s.idle.total_ns == s.idle.host_wait_ns + s.idle.kernel_wait_ns + s.idle.other_ns
        trace = json.loads((d / "perfetto.json").read_text())  # valid Chrome-trace JSON
        ev = trace["traceEvents"]
        names = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
        for s in a.streams:
            assert f"stream {s.stream} · regime" in names
        regimes = [e for e in ev if e.get("cat") == "regime"]
        assert regimes and {e["name"] for e in regimes} <= {r.name for r in Label}
        assert sum(e["args"]["segments"] for e in regimes) == a.segments
        assert "# gitm-tui analysis" in (d / "report.md").read_text()


def test_counters_trace_measures_flops_and_says_times_are_ranges(capsys):
    path = TRACES / "kineto" / "a100_cupti_counters.json.gz"
    assert main(["analyze", str(path), "--json", "--no-write"]) == 0
    a = json.loads(capsys.readouterr().out)[0]
    # ranges are not kernels: no GPU time, their measured FLOPs reported as ranges
    assert a["gpu_time_ns"] == 0 and a["profiler_ranges"]["ranges"] == 77
    assert a["profiler_ranges"]["measured_flops"] > 0
    assert any("CUPTI-profiler mode" in n for n in a["notes"])


def test_hardware_flag_and_unknown_hardware(capsys):
    path = TRACES / "kineto" / "a100_triton_one_kernel.json.gz"
    assert main(["analyze", str(path), "--json", "--no-write", "--hardware", "h100-sxm"]) == 0
    a = json.loads(capsys.readouterr().out)[0]
    assert a["hardware"]["id"] == "h100-sxm" and a["hardware"]["detected_from"] == "flag"
    assert main(["analyze", str(path), "--hardware", "tpu-v9"]) == 2
    assert "unknown hardware 'tpu-v9'" in capsys.readouterr().err


def test_unknown_device_is_unknown_and_says_so(tmp_path, capsys):
    ev = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ampere_sgemm_128x64_nn",
            "pid": 0,
            "tid": 7,
            "ts": 10,
            "dur": 5,
            "args": {"stream": 7, "device": 0, "correlation": 1},
        }
    ]
    doc = {
        "deviceProperties": [{"id": 0, "name": "Mystery Accelerator 9000", "numSms": 7}],
        "traceEvents": ev,
    }
    p = tmp_path / "mystery.json"
    p.write_text(json.dumps(doc))
    assert main(["analyze", str(p), "--json", "--no-write"]) == 0
    a = json.loads(capsys.readouterr().out)[0]
    assert a["hardware"]["id"] is None and a["hardware"]["detected_from"] == "none"
    assert a["hardware"]["reported_name"] == "Mystery Accelerator 9000"
    # named as the trace names it (issue 47): the first screen says which device is unknown
    assert a["hardware"]["name"] == "Mystery Accelerator 9000"
    assert any("hardware unknown" in n and "not in the hardware catalogue" in n for n in a["notes"])


def test_analysis_replays_the_levers_on_the_trace():
    """`analyze` says what would help: each lever's replay on the trace's own dependency graph,
    best first, with the host API kinds read from the runtime names."""
    from engine.trace.trace import ApiKind

    path = TRACES / "kineto" / "a100_training_3streams.json.gz"
    from engine.analyze.compute import analyze_trace
    from engine.trace.kineto.kineto import read_kineto

    tr = read_kineto(path)
    kinds = set(tr.host.api.tolist())
    assert {ApiKind.LAUNCH, ApiKind.MEMCPY_ASYNC, ApiKind.SYNC, ApiKind.STREAM_WAIT} <= kinds
    a = analyze_trace(tr).analysis
    # ranked by the conservative end of each interval (tests/analyze/test_analyze_levers.py)
    lows = [e.gain_low for e in a.interventions if e.status == "predicted"]
    assert a.interventions and lows == sorted(lows, reverse=True)
    top = {e.lever: e for e in a.interventions}
    # launch-bound stretches: graphs help, by no more than the trace's launch time allows
    g = top["cuda_graphs"]
    assert g.status == "predicted" and g.ceiling is not None
    assert 0.01 < g.predicted_gain <= g.ceiling
    assert all(e.rows > 0 and e.what for e in a.interventions)


def _rank_copy(dst: Path, rank: int, stretch: float) -> None:
    """The real A100 trace as rank ``rank`` of a job, every duration × ``stretch`` (synthetic)."""
    import gzip

    doc = json.loads(
        gzip.decompress((TRACES / "kineto" / "a100_training_3streams.json.gz").read_bytes())
    )
    doc["distributedInfo"] = {"rank": rank, "world_size": 3}
    t0 = min(e["ts"] for e in doc["traceEvents"] if isinstance(e, dict) and "ts" in e)
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and isinstance(e.get("dur"), (int, float)):
            e["dur"] = e["dur"] * stretch
            if isinstance(e.get("ts"), (int, float)):  # stretched from the trace's start
                e["ts"] = t0 + (e["ts"] - t0) * stretch
    dst.write_text(json.dumps(doc))


@pytest.mark.slow
def test_rank_directory_names_the_straggler(tmp_path, capsys):
    """A directory of one job's rank traces gets the per-rank table (regime mix per rank) and
    the straggler verdict; copies with one rank id get a note instead."""
    job = tmp_path / "job"
    job.mkdir()
    for rank, stretch in ((0, 1.0), (1, 1.3), (2, 1.0)):
        _rank_copy(job / f"rank{rank}.json", rank, stretch)
    assert main(["analyze", str(job), "--no-write", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("ranks") :]
    table = table[: table.index("collectives across ranks")] if "collectives" in table else table
    rows = {ln.split()[0]: ln for ln in table.splitlines()[1:] if ln.strip()[:1].isdigit()}
    assert set(rows) == {"0", "1", "2"}
    # rank 1 is the same trace stretched 1.3x: its collectives cannot end with the others', so
    # the clocks are not trusted and no rank is named, not even the longest span (issue 35)
    assert not any("straggler" in r for r in rows.values())
    assert "straggler: cannot tell" in out
    dup = tmp_path / "dup"
    dup.mkdir()
    for i in range(2):
        _rank_copy(dup / f"copy{i}.json", 0, 1.0)
    # a directory is taken as one job's ranks: two files of rank 0 cannot be that (exit 3);
    # named one by one, each is analysed and only the comparison is refused
    assert main(["analyze", str(dup), "--no-write", "--workers", "1"]) == 3
    assert "not one job" in capsys.readouterr().err
    files = [str(p) for p in sorted(dup.iterdir())]
    assert main(["analyze", *files, "--no-write", "--workers", "1"]) == 0
    assert "ranks not compared" in capsys.readouterr().out
