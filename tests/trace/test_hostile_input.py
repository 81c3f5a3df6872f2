"""`gitm-tui analyze` against hostile inputs (synthetic, built by tests/trace/hostile_inputs.py): every
limit holds with one clear line and exit code 3, nothing hangs, nothing is silently misread, and
one bad file in a batch never stops the others."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from engine.trace.errors import TraceImportError
from engine.trace.kineto import json_scan as js
from engine.trace.kineto import kineto
from engine.trace.nsys.nsys import read_nsys
from gitm_tui.cli import main
from tests.trace import hostile_inputs as hi

NS_PER_KERNEL = hi.KERNEL_US * 1000


def _analyze(capsys, *paths: Path, workers: int = 1) -> tuple[int, list[dict], list[str]]:
    """Run `gitm-tui analyze --json --no-write`; return (exit code, analyses, stderr lines)."""
    code = main(["analyze", *map(str, paths), "--json", "--no-write", "--workers", str(workers)])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else []), err.splitlines()


def _one_error(capsys, path: Path, *words: str) -> str:
    """Analyse ``path`` alone: exit 3 and exactly one stderr line, naming the file and ``words``."""
    code, analyses, err = _analyze(capsys, path)
    assert code == 3 and not analyses, (code, err)
    assert len(err) == 1 and err[0].startswith("gitm-tui: error: "), err
    assert str(path) in err[0] and "Traceback" not in err[0]
    for w in words:
        assert w in err[0], err[0]
    return err[0]


def _same(a: dict, b: dict) -> None:
    """Two analyses of the same content (their source paths aside)."""
    a, b = dict(a), dict(b)
    a.pop("source"), b.pop("source")
    assert a == b


# ------------------------------------------------------------------ item 5: size limits, linear
def test_gzip_bomb_is_stopped_by_the_ratio_limit_with_default_limits(tmp_path, capsys):
    """A 24 MB blank run in a ~25 KB .gz (about 1000:1) passes no default limit but the ratio."""
    bomb = hi.gzip_bomb(tmp_path)
    assert bomb.stat().st_size < 100_000
    _one_error(capsys, bomb, "GITM_MAX_GZIP_RATIO", "gzip bomb")


def test_decompressed_size_limit_is_overridable(tmp_path, capsys, monkeypatch):
    """Lowered through GITM_MAX_TRACE_BYTES, the size limit stops a plain trace too; the
    same files pass at the defaults."""
    p = hi.plain(tmp_path)
    monkeypatch.setenv("GITM_MAX_TRACE_BYTES", "1K")
    _one_error(capsys, p, "GITM_MAX_TRACE_BYTES", "1 KiB")
    monkeypatch.delenv("GITM_MAX_TRACE_BYTES")
    code, analyses, _ = _analyze(capsys, p)
    assert code == 0 and analyses[0]["kernels"] == hi.KERNELS
    monkeypatch.setenv("GITM_MAX_TRACE_BYTES", "lots")
    _one_error(capsys, p, "GITM_MAX_TRACE_BYTES", "'lots'")


def _count_scanned(monkeypatch) -> list[int]:
    """Count the bytes the importer hands the event scanner (whichever entry point it calls)."""
    seen = [0]
    real = js.scan_events

    def counted(buf, pos, *rest):
        seen[0] += len(buf) - pos
        return real(buf, pos, *rest)

    monkeypatch.setattr(js, "scan_events", counted)
    if hasattr(js, "scan_stream"):
        real_stream = js.scan_stream

        def counted_stream(buf, pos, limit, *rest):
            out = real_stream(buf, pos, limit, *rest)
            seen[0] += out[4] - pos  # it scanned from pos to where it stopped
            return out

        monkeypatch.setattr(js, "scan_stream", counted_stream)
    return seen


@pytest.mark.parametrize("builder", [hi.unfinished_string, hi.unfinished_blanks])
def test_one_long_unfinished_element_is_scanned_once(tmp_path, monkeypatch, builder):
    """An element cut by many chunk boundaries is never rescanned: the scanner sees each byte
    about once (before: the whole unfinished element again at every chunk, quadratic)."""
    monkeypatch.setattr(kineto, "CHUNK", 4096)
    size = 400_000
    p = builder(tmp_path, size)
    seen = _count_scanned(monkeypatch)
    with pytest.raises(TraceImportError, match="truncated JSON"):
        kineto.read_kineto(p)
    assert size <= seen[0] <= 1.1 * p.stat().st_size + 4096, seen[0]


@pytest.mark.parametrize("builder", [hi.unfinished_string, hi.unfinished_blanks])
def test_element_size_limit(tmp_path, capsys, monkeypatch, builder):
    """One element larger than GITM_MAX_ELEMENT_BYTES is one line, naming where it starts."""
    monkeypatch.setenv("GITM_MAX_ELEMENT_BYTES", "64K")
    p = builder(tmp_path, 400_000)
    _one_error(capsys, p, "GITM_MAX_ELEMENT_BYTES", "64 KiB", "decompressed byte 17")


@pytest.mark.parametrize("chunk", [7, 100, 4096])
def test_a_long_valid_event_across_many_chunks_reads_as_in_one(tmp_path, monkeypatch, chunk):
    """A 200 KB kernel name spans many chunks: carried, not rescanned, and read exactly."""
    p = hi.long_event(tmp_path, 200_000)
    want = kineto.read_kineto(p)
    assert max(len(n) for n in want.names) == 200_000
    monkeypatch.setattr(kineto, "CHUNK", chunk)
    seen = _count_scanned(monkeypatch)
    got = kineto.read_kineto(p)
    assert 200_000 <= seen[0] <= 1.1 * p.stat().st_size + 4096
    for field in ("start_ns", "end_ns", "stream", "correlation"):
        assert np.array_equal(getattr(got.segments, field), getattr(want.segments, field))
    assert [got.names[i] for i in got.segments.name] == [want.names[i] for i in want.segments.name]
    assert np.array_equal(got.host.correlation, want.host.correlation)


@pytest.mark.parametrize("builder", [hi.deep_metadata, hi.deep_event])
def test_nesting_limit(tmp_path, capsys, builder):
    """1200 levels (a RecursionError in the metadata's reader before): one line, exit 3."""
    _one_error(capsys, builder(tmp_path), "nested more than 512", "GITM_MAX_JSON_DEPTH")


def test_nesting_limit_is_overridable(tmp_path, capsys, monkeypatch):
    p = hi.deep_metadata(tmp_path, depth=20)
    code, analyses, _ = _analyze(capsys, p)
    assert code == 0 and analyses[0]["kernels"] == hi.KERNELS
    monkeypatch.setenv("GITM_MAX_JSON_DEPTH", "10")
    _one_error(capsys, p, "nested more than 10")


# ----------------------------------------------------------------- item 10: silent misreads
def test_a_nested_trace_events_key_is_not_the_event_array(tmp_path, capsys):
    code, analyses, _ = _analyze(capsys, hi.nested_trace_events(tmp_path))
    assert code == 0
    a = analyses[0]
    assert a["kernels"] == hi.KERNELS and a["gpu_time_ns"] == hi.KERNELS * NS_PER_KERNEL
    assert all(k["name"] != "fake_kernel" for k in a["top_kernels"])


@pytest.mark.parametrize("builder", [hi.duplicate_trace_events, hi.escaped_duplicate_trace_events])
def test_two_top_level_trace_events_keys_are_refused(tmp_path, capsys, builder):
    _one_error(capsys, builder(tmp_path), "two top-level traceEvents keys")


def test_multi_member_gzip_reads_every_member(tmp_path, capsys):
    one, many = hi.multi_member_gzip(tmp_path)
    code, analyses, err = _analyze(capsys, one, many)
    assert code == 0, err
    _same(analyses[0], analyses[1])
    assert analyses[1]["kernels"] == hi.KERNELS


@pytest.mark.parametrize("garbage", [b"this is not gzip\n", b"\0" * 512, b"\x1f"])
def test_trailing_garbage_after_the_gzip_stream_is_corrupt(tmp_path, capsys, garbage):
    _one_error(capsys, hi.trailing_garbage_gzip(tmp_path, garbage), "trailing", "not gzip")


# ------------------------------------------------------------ item 11: times beyond int64 ns
@pytest.mark.parametrize(
    "field, literal",
    [("dur", "1000000000000000000"), ("ts", "1000000000000000000"), ("dur", "1e18"),
     ("ts", "1e18"), ("ts", "-1e18"), ("dur", "9223372036854775807")],
)  # fmt: skip
def test_a_time_beyond_int64_ns_is_a_malformed_event(tmp_path, capsys, field, literal):
    """The kernel is dropped and counted, never overflowed into a negative or wrapped total."""
    code, analyses, err = _analyze(capsys, hi.huge_times(tmp_path, field, literal))
    assert code == 0, err
    a = analyses[0]
    assert a["kernels"] == hi.KERNELS - 1
    assert a["gpu_time_ns"] == (hi.KERNELS - 1) * NS_PER_KERNEL
    assert all(s["kernel_time_ns"] >= 0 and s["span_ns"] >= 0 for s in a["streams"])
    assert any("1 malformed events were skipped" in n for n in a["notes"]), a["notes"]


@pytest.mark.parametrize("field", ["ts", "dur"])
def test_when_every_gpu_event_is_malformed_the_error_says_so(tmp_path, capsys, field):
    line = _one_error(capsys, hi.huge_times(tmp_path, field, "1e18", every=True), "malformed")
    assert "CPU-only" not in line and "out of range" in line


# -------------------------------------------------------- items 7, 8: hangs and batch-enders
@pytest.mark.timeout(20)
def test_a_fifo_is_refused_without_blocking(tmp_path, capsys):
    _one_error(capsys, hi.fifo(tmp_path), "not a regular file", "named pipe")


@pytest.mark.timeout(20)
def test_a_character_device_is_refused(capsys):
    _one_error(capsys, Path("/dev/zero"), "not a regular file", "device")


@pytest.mark.timeout(20)
def test_a_fifo_is_refused_by_the_readers_too(tmp_path):
    p = hi.fifo(tmp_path)
    for read in (kineto.read_kineto, read_nsys):
        with pytest.raises(TraceImportError, match="not a regular file"):
            read(p)


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists a mode-000 directory")
def test_an_unreadable_directory_is_one_error(tmp_path, capsys):
    d = hi.unreadable_dir(tmp_path)
    try:
        _one_error(capsys, d, "cannot list")
    finally:
        d.chmod(0o755)


def test_a_directory_that_cannot_be_listed_is_one_error(tmp_path, capsys, monkeypatch):
    """The same as the mode-000 directory above, for a root user too (listing made to fail)."""
    d = tmp_path / "locked"
    d.mkdir()
    hi.plain(d)
    real = Path.iterdir

    def denied(self):
        if self == d:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", denied)
    _one_error(capsys, d, "cannot list", "Permission denied")


def test_a_corrupt_sqlite_schema_is_one_error(tmp_path, capsys):
    _one_error(capsys, hi.corrupt_sqlite_schema(tmp_path), "SQLite")


# -------------------------------------------------------------------- item 12: SQLite paths
def test_sqlite_names_special_in_a_uri_read_as_the_original(tmp_path, capsys):
    code, ref, _ = _analyze(capsys, hi.NSYS)
    assert code == 0
    d = tmp_path / "odd"
    d.mkdir()
    paths = hi.odd_sqlite_names(d)
    before = sorted(os.listdir(d))
    for p in paths:
        code, analyses, err = _analyze(capsys, p)
        assert code == 0, err
        _same(analyses[0], ref[0])
    assert sorted(os.listdir(d)) == before  # no stray file ("we" from "we#ird.sqlite")


def test_a_missing_sqlite_file_is_not_created(tmp_path):
    p = tmp_path / "gone#.sqlite"
    with pytest.raises(TraceImportError):
        read_nsys(p)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------- one bad file of many
@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_hostile_file_in_a_batch_is_named_and_the_others_are_analysed(tmp_path, capsys, workers):
    good = hi.plain(tmp_path)
    good2 = tmp_path / "plain2.json"
    shutil.copyfile(good, good2)
    bad = {
        hi.fifo(tmp_path): "not a regular file",
        hi.deep_metadata(tmp_path): "nested more than",
        hi.corrupt_sqlite_schema(tmp_path): "SQLite",
        hi.duplicate_trace_events(tmp_path): "two top-level",
    }
    code, analyses, err = _analyze(capsys, good, *bad, good2, workers=workers)
    assert code == 3
    assert [a["source"] for a in analyses] == [str(good), str(good2)]
    assert all(a["kernels"] == hi.KERNELS for a in analyses)
    assert len(err) == len(bad), err
    for p, why in bad.items():
        (line,) = [ln for ln in err if str(p) in ln]
        assert why in line, line


def test_both_readers_judge_the_gzip_ratio_at_the_same_points(tmp_path):
    """The ratio limit is judged at each inflated chunk's end: the first-run twin and the
    compiled reader cut alike, so a file whose early bytes inflate like a bomb is refused by
    both (with 16 MiB chunks for the twin and 8 MiB for the compiled reader, the twin
    answered on a first run what every later run refused)."""
    import gzip

    from engine.trace.kineto import json_twin
    from engine.trace.limits import ReadLimits

    path = tmp_path / "early_bomb.json.gz"
    rng = np.random.default_rng(0)
    events = ",".join(
        json.dumps({"ph": "X", "cat": "kernel", "name": rng.bytes(48).hex(), "pid": 0,
                    "tid": 7, "ts": i, "dur": 1, "args": {"stream": 7}})
        for i in range(40_000)
    )  # fmt: skip
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(b'{"traceEvents": [' + b" " * (24 << 20) + events.encode() + b"]}")
    with pytest.raises(TraceImportError, match="inflates more than"):
        kineto.read_kineto(path)
    assert json_twin.read(path, ReadLimits()) is None  # it declines: the compiled reader says why


# -------------------------------------------------- issue 36: crashes and silent 0 ns kernels
def _no_error(capsys, path: Path) -> dict:
    """Analyse ``path`` alone: exit 0, nothing on stderr; return its analysis."""
    code, analyses, err = _analyze(capsys, path)
    assert code == 0 and err == [], (code, err)
    return analyses[0]


@pytest.mark.parametrize(
    "name, members", [("empty.json.gz", 1), ("two.json.gz", 2), ("gz.json", 1)]
)
def test_an_empty_gzip_stream_is_one_error(tmp_path, capsys, name, members):
    """A valid gzip stream that inflates to nothing (an UnboundLocalError, exit 1, before),
    whatever the file is called and however many empty members it has, from either reader."""
    import gzip

    p = tmp_path / name
    p.write_bytes(gzip.compress(b"", mtime=0) * members)
    _one_error(capsys, p, "empty file", "gzip")
    for interpreted in (False, True):
        with pytest.raises(TraceImportError, match="empty file"):
            kineto.read_kineto(p, interpreted=interpreted)


def _bad_dur(d: Path, literal: str | None, every: bool = False) -> Path:
    """The synthetic trace with the first kernel's ``dur`` (every kernel's when ``every``)
    written as ``literal``, or left out when None."""
    marker = -123456789  # replaced in the text, so the literal is written exactly as given
    evs = hi.events()
    for e in evs:
        if e["cat"] == "kernel":
            if literal is None:
                del e["dur"]
            else:
                e["dur"] = marker
            if not every:
                break
    text = json.dumps({"traceEvents": evs}).replace(str(marker), literal or "")
    return hi.write(d / f"bad_dur{'_all' if every else ''}.json", text.encode())


BAD_DURS = [None, "null", '"5"', '"five"', "-5", "-0.5", "true", "{}", "[1]"]


@pytest.mark.parametrize("literal", BAD_DURS)
def test_a_kernel_without_a_usable_dur_is_skipped_and_noted(tmp_path, capsys, literal):
    """A kernel whose dur is missing, null, a string, negative or not a number has no span:
    it is skipped and counted in the notes (before: a silent kernel of 0 ns, no note)."""
    a = _no_error(capsys, _bad_dur(tmp_path, literal))
    assert a["kernels"] == hi.KERNELS - 1
    assert a["gpu_time_ns"] == (hi.KERNELS - 1) * NS_PER_KERNEL
    assert any("1 malformed events were skipped" in n for n in a["notes"]), a["notes"]


@pytest.mark.parametrize("literal", [None, '"5"', "-5"])
def test_both_readers_skip_a_bad_dur_alike(tmp_path, literal):
    """The compiled reader and its first-run twin (json_twin) drop and count the same row."""
    p = _bad_dur(tmp_path, literal)
    got = [kineto.read_kineto(p, interpreted=i) for i in (False, True)]
    for t in got:
        assert len(t.segments) == hi.KERNELS - 1
        assert t.device_properties["malformed_events"] == 1
        assert (t.segments.end_ns > t.segments.start_ns).all()
    assert np.array_equal(got[0].segments.start_ns, got[1].segments.start_ns)


@pytest.mark.parametrize("literal", [None, '"5"', "-5"])
def test_when_no_gpu_event_has_a_usable_dur_the_error_says_so(tmp_path, capsys, literal):
    line = _one_error(capsys, _bad_dur(tmp_path, literal, every=True), "malformed")
    assert "CPU-only" not in line and "negative" in line


def _nsys_with(d: Path, *sql: str) -> Path:
    """A copy of the shipped Nsight export with ``sql`` run on it."""
    import sqlite3

    p = d / "hostile.sqlite"
    shutil.copyfile(hi.NSYS, p)
    con = sqlite3.connect(p)
    for s in sql:
        con.execute(s)
    con.commit()
    con.close()
    return p


_FIRST_KERNEL_NAME = "SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid LIMIT 1"


def test_nsys_strings_stored_as_blobs_read_as_text(tmp_path, capsys):
    """Every StringIds value a BLOB of the same UTF-8 bytes (a TypeError, exit 1, before):
    SQLite columns are not typed, so the names read as text and the analysis is the same."""
    code, ref, _ = _analyze(capsys, hi.NSYS)
    assert code == 0
    p = _nsys_with(tmp_path, "UPDATE StringIds SET value = CAST(value AS BLOB)")
    _same(_no_error(capsys, p), ref[0])


def test_nsys_blob_that_is_not_utf8_reads_with_replacement_characters(tmp_path, capsys):
    """A kernel name, an enum name and a sync label that are BLOBs of bytes that are not
    UTF-8, and a GPU name that is one: read with U+FFFD, as text that is not UTF-8 is."""
    p = _nsys_with(
        tmp_path,
        f"UPDATE StringIds SET value = X'6b65726e656cff' WHERE id = ({_FIRST_KERNEL_NAME})",
        "UPDATE ENUM_CUDA_MEMCPY_OPER SET name = X'ff'",
        "UPDATE ENUM_CUPTI_SYNC_TYPE SET label = X'41ff42'",
        "UPDATE TARGET_INFO_GPU SET name = X'41ff42'",
    )
    a = _no_error(capsys, p)
    assert a["hardware"]["reported_name"] == "A\ufffdB"
    names = read_nsys(p).names.names()
    assert "kernel\ufffd" in names and all(isinstance(n, str) for n in names)


@pytest.mark.parametrize("column", ["demangledName", "start", "streamId"])
def test_nsys_blob_in_an_integer_column_is_one_error(tmp_path, capsys, column):
    p = _nsys_with(
        tmp_path, f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET {column} = X'00ff' WHERE rowid = 1"
    )
    line = _one_error(capsys, p, "corrupt Nsight export", column, "BLOB (2 bytes)")
    assert "b'" not in line  # no Python bytes literal
