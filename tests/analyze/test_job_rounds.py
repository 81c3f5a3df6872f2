"""A job's ranks in two rounds (issue 49 item 3): each rank read for its summary, the ranks
crossed, then each rank analysed once, held to its peers — its trace kept from the first
round, not read again; and the merged Perfetto file made of parts, one gzip member. SYNTHETIC
rank traces (engine.analyze.ranks.synth_ranks)."""

from __future__ import annotations

import gzip
import json
import os
import random
import zlib

import pytest

from engine.analyze import run
from engine.analyze.api import AnalyzeOptions, analyze
from engine.analyze.output.rank_export import crc32_combine, merge_perfetto, perfetto_part
from engine.analyze.ranks.synth_ranks import write_ranks


def _spy(monkeypatch, name):
    calls = []
    real = getattr(run, name)

    def counted(*a, **k):
        calls.append(a[0] if a else None)
        return real(*a, **k)

    monkeypatch.setattr(run, name, counted)
    return calls


def _outputs(out):
    return {
        str(p.relative_to(out)): (
            gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        )
        for p in sorted(out.rglob("*"))
        if p.is_file()
    }


def test_each_rank_is_read_and_analysed_once_and_what_it_finds_does_not_change(
    tmp_path, monkeypatch
):
    write_ranks(tmp_path / "ranks", ranks=4, steps=2, straggler=2, slow_link=(0, 1))
    reads, analyses = _spy(monkeypatch, "load_trace"), _spy(monkeypatch, "analyze_trace")
    got = analyze(
        [str(tmp_path / "ranks")], AnalyzeOptions(workers=1, out_root=str(tmp_path / "kept"))
    )
    assert got.crossed is not None and got.straggler == 2
    assert len(reads) == 4 and len(analyses) == 4  # (the old second pass: 8 and 8)
    assert not run._kept  # the job is over: nothing kept
    assert "levers of 4 rank(s) replayed with their collectives held to their peers" in (
        got.crossed.notes
    )
    # nothing kept (a trace larger than the budget): each rank read again, the same answers
    monkeypatch.setattr(run, "KEEP_BYTES", 0)
    again = analyze(
        [str(tmp_path / "ranks")], AnalyzeOptions(workers=1, out_root=str(tmp_path / "read"))
    )
    assert len(reads) == 4 + 8 and len(analyses) == 4 + 4
    assert again.crossed is not None
    assert again.crossed.model_dump() == got.crossed.model_dump()
    kept, read = _outputs(tmp_path / "kept"), _outputs(tmp_path / "read")
    assert kept.keys() == read.keys() and len(kept) == 4 * 4 + 3
    for name in kept:
        if name.endswith(".json") and "perfetto" not in name:
            assert json.loads(kept[name]) == json.loads(read[name]), name
        else:
            assert kept[name] == read[name], name


def test_a_kept_trace_is_not_taken_for_a_file_changed_since(tmp_path):
    (path,) = write_ranks(tmp_path / "ranks", ranks=1, steps=1, straggler=None)
    options = AnalyzeOptions()
    trace = run.load_trace(str(path))
    assert run.keep_trace(str(path), options, trace)
    assert run.kept_trace(str(path), options) is trace
    assert run.kept_trace(str(path), options) is None  # taken once
    assert run.keep_trace(str(path), options, trace)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert run.kept_trace(str(path), options) is None  # rewritten since: read again
    assert run.forget_kept() == 1 and not run._kept


@pytest.mark.parametrize("n", [0, 1, 3, 1000, 65_537, 1 << 20])
def test_crc32_combine_is_the_crc_of_the_two_parts_joined(n):
    rng = random.Random(n)
    a, b = rng.randbytes(rng.randrange(0, 5000)), rng.randbytes(n)
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_the_merged_file_is_one_gzip_member_whatever_order_the_parts_are_made_in(tmp_path):
    """Perfetto reads one gzip member only (google/perfetto#872): the parts are raw deflate
    joined into one. Made in turn or in reverse (workers finish in any order), the file is the
    same events; its scratch folder is gone."""
    from gitm_tui.cli import main

    write_ranks(tmp_path / "ranks", ranks=3, steps=2, straggler=1)
    out = tmp_path / "out"
    assert main(["analyze", str(tmp_path / "ranks"), "--out", str(out), "--workers", "1"]) == 0
    merged = (out / "ranks.perfetto.json.gz").read_bytes()
    d = zlib.decompressobj(31)
    text = d.decompress(merged) + d.flush()
    assert d.eof and not d.unused_data  # one member: zlib (as Perfetto runs it) reads it all
    doc = json.loads(text)
    assert {e["pid"] for e in doc["traceEvents"]} == {0, 1, 2}
    assert not list(out.glob(".*")) and not list(out.glob("*.tmp"))

    parts = [(r, out / f"rank{r:04d}" / "perfetto.json") for r in range(3)]
    offsets = {0: 0, 1: -12_345, 2: 987_654_321}

    def reverse(fn, jobs):
        made = [fn(*j) for j in reversed(jobs)]
        return made[::-1]

    a = merge_perfetto(parts, offsets, tmp_path / "a.json.gz")
    b = merge_perfetto(parts, offsets, tmp_path / "b.json.gz", run=reverse)
    assert gzip.decompress(a.read_bytes()) == gzip.decompress(b.read_bytes())
    events = json.loads(gzip.decompress(a.read_bytes()))["traceEvents"]
    own = json.loads(parts[2][1].read_text())["traceEvents"]
    first = next(e for e in own if e["ph"] == "X")
    moved = next(e for e in events if e["ph"] == "X" and e["pid"] == 2)
    assert float(moved["ts"]) == pytest.approx(float(first["ts"]) + 987_654.321, abs=1e-3)


def test_a_part_of_a_file_not_ours_is_refused(tmp_path):
    src = tmp_path / "perfetto.json"
    src.write_text('{"traceEvents":[\n{"ph": "B", "name": "x", "pid": 0, "ts": 1}\n]}\n')
    with pytest.raises(ValueError, match=r"not a perfetto\.json written by gitm-tui"):
        perfetto_part(0, str(src), 0, str(tmp_path / "p.deflate"))


def _merged(out):
    return gzip.decompress((out / "ranks.perfetto.json.gz").read_bytes())


def test_the_second_round_makes_each_ranks_part_from_its_analysis(tmp_path, monkeypatch):
    """The parts are made from the analyses (export.perfetto_placed, in one pass with the rank's
    own perfetto.json), not by converting the files back: the same bytes as converting them, no file converted, no
    scratch folder left. A part that cannot be written is converted from the file instead."""
    from engine.analyze.output import rank_export

    write_ranks(tmp_path / "ranks", ranks=3, steps=2, straggler=0)
    converted = []
    real_part = rank_export.perfetto_part
    monkeypatch.setattr(
        rank_export, "perfetto_part", lambda *a: converted.append(a[0]) or real_part(*a)
    )
    out = tmp_path / "made"
    got = analyze([str(tmp_path / "ranks")], AnalyzeOptions(workers=1, out_root=str(out)))
    assert got.crossed is not None and not got.cross_unwritten
    assert converted == []  # every part made by the second round
    assert not list(out.glob(".*"))
    offsets = {p.rank: p.clock_offset_ns for p in got.crossed.per_rank}
    assert any(offsets.values())  # the clocks differ: the parts are moved
    files = [(r, out / f"rank{r:04d}" / "perfetto.json") for r in range(3)]
    ref = merge_perfetto(files, offsets, tmp_path / "ref.json.gz")
    assert converted == [0, 1, 2]
    assert _merged(out) == gzip.decompress(ref.read_bytes())

    def cannot(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rank_export, "write_part", cannot)
    converted.clear()
    again = tmp_path / "converted"
    got = analyze([str(tmp_path / "ranks")], AnalyzeOptions(workers=1, out_root=str(again)))
    assert not got.cross_unwritten and converted == [0, 1, 2]
    assert _merged(again) == _merged(out)
    assert not list(again.glob(".*"))
