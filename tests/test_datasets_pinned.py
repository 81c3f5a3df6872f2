"""Benchmark inputs are pinned (benchmarks/datasets.json) and checked before a benchmark reads
them: every input a benchmark reads at its defaults has a pin, a copy whose bytes differ is
refused with one line (a real benchmark, run on a tampered copy), a generated input made again
is checked by what it holds, and the results say what was read."""

from __future__ import annotations

import ast
import contextlib
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.paths import ROOT, TRACES

BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import dataset_pins  # noqa: E402  (benchmarks/dataset_pins.py: what is pinned, --pin)
import datasets  # noqa: E402  (benchmarks/datasets.py, as the benchmarks import it)

SCRIPTS = sorted(BENCH.glob("bench_*.py"))
REAL = TRACES / "kineto" / "a100_training_3streams.json.gz"


@pytest.fixture(autouse=True)
def _fresh():
    """Each test starts with nothing read (the module keeps what a process verified)."""
    datasets._READ.clear()
    datasets._MEMO.clear()
    yield
    datasets._READ.clear()


@pytest.fixture(scope="module")
def pins() -> dict:
    return datasets.load_pins()


@pytest.fixture(scope="module")
def specs() -> list:
    return dataset_pins.specs()


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _defaults(path: Path) -> dict[str, Any]:
    """A benchmark's options and their defaults, read from its add_argument calls."""
    out: dict[str, Any] = {}
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            if not node.args or not isinstance(node.args[0], ast.Constant):
                continue
            for kw in node.keywords:
                if kw.arg == "default":
                    with contextlib.suppress(ValueError):  # a computed default (a path)
                        out[str(node.args[0].value)] = ast.literal_eval(kw.value)
    return out


def _constant(path: Path, name: str) -> Any:
    for node in _tree(path).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.name} has no {name}")


def test_every_benchmark_checks_its_inputs_and_writes_their_checksums():
    assert len(SCRIPTS) >= 9
    for script in SCRIPTS:
        text = script.read_text(encoding="utf-8")
        assert "datasets.write_inputs(" in text, script.name
        if '.md").write_text' in text:  # a table: its inputs named in it too
            assert "datasets.markdown(" in text, script.name
        if script.stem in datasets.NO_INPUTS:
            assert "datasets.verify(" not in text, script.name
        else:  # its own calls, or bench_import.traces() (which checks what it returns)
            checks = "datasets.verify(" in text or "from bench_import import" in text
            assert checks, f"{script.name} reads inputs it never checks"
    assert "datasets.verify(" in (BENCH / "bench_import.py").read_text()


def test_the_pins_are_the_inputs_the_benchmarks_read(pins, specs):
    assert [s.name for s in specs] == list(pins)  # each spec pinned, nothing stale
    benches = {p.stem for p in SCRIPTS}
    for s in specs:
        pin = pins[s.name]
        assert set(s.used_by) <= benches and pin["used_by"] == list(s.used_by)
        assert pin["digest_of"] == s.digest_of and pin.get("path") == s.path
        assert pin.get("generator") == s.generator and pin.get("params", {}) == dict(s.params)
        assert pin.get("seed") == s.seed
        assert len(pin["sha256"]) == 64 and int(pin["sha256"], 16) and pin["size"] > 0
        if s.digest_of == "files":
            assert len(pin["files"]) == s.params["ranks"]
    used = {b for s in specs for b in s.used_by}
    assert used | set(datasets.NO_INPUTS) == benches  # every benchmark accounted for


def test_what_the_benchmarks_read_at_their_defaults_is_pinned(pins):
    """The sizes and seeds each benchmark's options default to name pinned inputs (a changed
    default without a new pin fails here, not in the next figure)."""
    d = {p.stem: _defaults(p) for p in SCRIPTS}
    want = {datasets.REAL_TRACE, datasets.TRAIN_CNN}
    for b in ("bench_import", "bench_analyze", "bench_memory"):
        want.add(datasets.tiled_name(int(d[b]["--events"])))
    for b in ("bench_analyze", "bench_memory"):
        want.add(datasets.tiled_name(int(d[b]["--memory-events"])))
    ranks = max(64, *(int(x) for x in str(d["bench_ranks"]["--ranks"]).split(",")))
    want.add(datasets.ranks_name(ranks, int(d["bench_ranks"]["--events"])))
    want |= {datasets.segments_name(int(n)) for n in d["bench_decode"]["--sizes"]}
    sys.path.insert(0, str(BENCH))
    from bench_dashboard import rows_per_batch

    per = rows_per_batch(
        int(d["bench_dashboard"]["--rate"]), int(d["bench_dashboard"]["--streams"])
    )
    want.add(datasets.load_name(per))
    for b, repeats in (("bench_replay", 3), ("bench_search", 4)):
        workloads = _constant(BENCH / f"{b}.py", "WORKLOADS")
        for seed in range(int(d[b]["--seeds"])):
            for w in workloads:
                want.add(datasets.profile_name(w, seed, repeats))
                if b == "bench_replay":
                    want.add(datasets.measure_name(w, seed, seed * 100 + 1))
    assert sorted(want - set(pins)) == []


def test_every_real_file_a_benchmark_names_is_pinned(pins):
    """A trace or program named in a benchmark's source (a string constant) that exists among
    the real traces or the benchmark programs has a pin of its path."""
    homes = [ROOT.parent / "shared" / "traces", TRACES, BENCH / "programs"]
    real = {p.name for h in homes if h.exists() for p in h.rglob("*") if p.is_file()}
    pinned = {Path(p["path"]).name for p in pins.values() if p.get("path")}
    named = set()
    for script in SCRIPTS:
        for node in ast.walk(_tree(script)):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and value in real and "." in value:
                named.add(value)
    assert named and named <= pinned, named - pinned


def test_a_real_benchmark_refuses_a_tampered_copy(tmp_path, pins):
    """bench_import.py, copied with its pins; the real trace beside it one byte off."""
    main = tmp_path / "main" / "benchmarks"
    main.mkdir(parents=True)
    for f in [*BENCH.glob("*.py"), BENCH / "datasets.json"]:
        shutil.copy(f, main / f.name)
    bad = tmp_path / "shared" / "traces" / "kineto" / REAL.name
    bad.parent.mkdir(parents=True)
    data = bytearray(REAL.read_bytes())
    data[len(data) // 2] ^= 0x01
    bad.write_bytes(bytes(data))
    out = tmp_path / "results"
    p = subprocess.run(
        [sys.executable, str(main / "bench_import.py"), "--events", "1000", "--repeat", "1",
         "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 3, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    want = pins[datasets.REAL_TRACE]["sha256"]
    actual = hashlib.sha256(bytes(data)).hexdigest()
    assert str(bad) in lines[0] and f"expected sha256 {want}" in lines[0]
    assert f"actual {actual}" in lines[0]
    assert not out.exists() and not (main / ".cache").exists()  # refused before reading it
    # the untampered file passes the same check
    assert datasets.verify(datasets.REAL_TRACE, at=REAL, pins=main / "datasets.json").sha256 == want


def _pins_file(tmp_path: Path, entries: dict) -> Path:
    f = tmp_path / "pins.json"
    f.write_text(json.dumps({"about": "", "datasets": entries}))
    return f


def test_a_generated_gzip_is_checked_by_what_it_holds(tmp_path, capsys):
    """Made again (a new gzip header: another write time), it passes; its content changed, it
    is refused with the file, the expected and the actual sha256."""
    body = b'{"traceEvents": []}\n' * 100
    gz = tmp_path / "made.json.gz"
    gz.write_bytes(gzip.compress(body, mtime=1))
    sha = hashlib.sha256(body).hexdigest()
    pins = _pins_file(tmp_path, {"made": {
        "kind": "generated", "digest_of": "gunzip", "path": str(gz), "generator": "m:f",
        "params": {"n": 1}, "seed": 7, "sha256": sha, "size": len(body)}})  # fmt: skip
    first = datasets.verify("made", pins=pins)
    assert first.pinned and first.sha256 == sha and first.file_sha256 is not None
    gz.write_bytes(gzip.compress(body, mtime=2))  # made again: other bytes, same content
    os.utime(gz, ns=(1, 1))
    assert datasets.verify("made", pins=pins).sha256 == sha
    gz.write_bytes(gzip.compress(body + b" ", mtime=2))
    with pytest.raises(datasets.Refused) as e:
        datasets.verify("made", pins=pins)
    assert e.value.code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(gz) in err[0] and f"expected sha256 {sha}" in err[0]
    assert hashlib.sha256(body + b" ").hexdigest() in err[0] and "made by m:f(n=1)" in err[0]


def test_a_rank_directory_names_the_file_that_differs(tmp_path, capsys):
    full = tmp_path / "ranks"
    full.mkdir()
    per = {}
    for r in range(3):
        body = f'{{"rank": {r}}}'.encode()
        (full / f"rank{r:04d}.json.gz").write_bytes(gzip.compress(body))
        per[f"rank{r:04d}.json.gz"] = [hashlib.sha256(body).hexdigest(), len(body)]
    listing = "".join(f"{s}  {n}\n" for n, (s, _) in sorted(per.items()))
    pins = _pins_file(tmp_path, {"ranks": {
        "kind": "generated", "digest_of": "files", "path": str(full), "files": per,
        "sha256": hashlib.sha256(listing.encode()).hexdigest(), "size": 1}})  # fmt: skip
    assert datasets.verify("ranks", at=full, pins=pins).files == per
    sub = tmp_path / "first2"  # a run on fewer ranks: links to the first files
    sub.mkdir()
    for n in sorted(per)[:2]:
        (sub / n).symlink_to(full / n)
    assert sorted(datasets.verify("ranks", at=sub, pins=pins).files) == sorted(per)[:2]
    (full / "rank0001.json.gz").write_bytes(gzip.compress(b'{"rank": 9}'))
    with pytest.raises(datasets.Refused):
        datasets.verify("ranks", at=sub, pins=pins)
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "rank0001.json.gz differs" in err[0]
        and per["rank0001.json.gz"][0] in err[0]
    )
    (tmp_path / "empty").mkdir()
    with pytest.raises(datasets.Refused):  # nothing to check is not a pass
        datasets.verify("ranks", at=tmp_path / "empty", pins=pins)
    assert "holds none of its files" in capsys.readouterr().err
    (full / "rank0001.json.gz").write_bytes(gzip.compress(b'{"rank": 1}'))
    (full / "rank0003.json.gz").write_bytes(gzip.compress(b"{}"))
    with pytest.raises(datasets.Refused):
        datasets.verify("ranks", at=full, pins=pins)
    assert "rank0003.json.gz" in capsys.readouterr().err


def test_data_made_in_memory_is_checked_and_an_unpinned_input_recorded(tmp_path, capsys):
    labels = np.arange(10, dtype=np.uint8)
    chunks = list(datasets.array_chunks(labels=labels, names=["a", "b"]))
    sha = hashlib.sha256(b"".join(bytes(c) for c in chunks)).hexdigest()
    pins = _pins_file(tmp_path, {"load": {
        "kind": "generated", "digest_of": "columns", "generator": "m:g", "params": {},
        "seed": 0, "sha256": sha, "size": 1}})  # fmt: skip
    assert datasets.verify("load", data=iter(chunks), pins=pins).sha256 == sha
    changed = labels.copy()  # (the chunks are views of labels)
    changed[3] = 9
    with pytest.raises(datasets.Refused):
        datasets.verify(
            "load", data=datasets.array_chunks(labels=changed, names=["a", "b"]), pins=pins
        )
    assert "expected sha256 " + sha in capsys.readouterr().err
    other = datasets.verify("load-999", data=iter(chunks), pins=pins)  # a size with no pin
    assert not other.pinned and other.sha256 == sha
    assert "not pinned" in capsys.readouterr().err


def test_the_results_carry_what_was_read(tmp_path):
    datasets.verify(datasets.REAL_TRACE, at=REAL)  # the same bytes as the pinned file
    path = datasets.write_inputs(tmp_path, "table")
    doc = json.loads(path.read_text())
    assert path.name == "table.inputs.json" and doc["pins"] == "benchmarks/datasets.json"
    (rec,) = doc["inputs"]
    assert rec["name"] == datasets.REAL_TRACE and rec["pinned"] is True
    assert rec["sha256"] == hashlib.sha256(REAL.read_bytes()).hexdigest()
    assert rec["size"] == REAL.stat().st_size and rec["path"] == str(REAL)
    md = "\n".join(datasets.markdown("table"))
    assert rec["sha256"] in md and "table.inputs.json" in md
    assert datasets.Dataset.from_record(rec).record() == rec  # a worker's record, handed back


def test_pin_regenerates_writes_and_shows_the_diff(tmp_path, capsys, pins):
    """`--pin NAME` makes the input afresh (the dashboard's seeded load: the committed pin is
    made again here), writes only that pin, prints the diff; `--check` compares."""
    name = datasets.load_name(dataset_pins.LOAD_PER)
    f = _pins_file(tmp_path, {name: {**pins[name], "sha256": "0" * 64}})
    assert dataset_pins.main(["--check", name, "--pins", str(f)]) == 3
    capsys.readouterr()
    assert dataset_pins.main(["--pin", name, "--pins", str(f)]) == 0
    out = capsys.readouterr().out
    assert f'-   "sha256": "{"0" * 64}"' in out and f'+   "sha256": "{pins[name]["sha256"]}"' in out
    assert datasets.load_pins(f)[name] == pins[name]  # the committed pin, made again
    assert dataset_pins.main(["--pin", name, "--pins", str(f)]) == 0
    assert "no change" in capsys.readouterr().out
    assert dataset_pins.main(["--check", name, "--pins", str(f)]) == 0
    assert dataset_pins.main(["--pin", "no-such-input", "--pins", str(f)]) == 2
