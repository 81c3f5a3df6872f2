"""The registry of trace formats (engine.trace.formats) is the one place a format is known:
every real trace goes to the format that names it, what a format says it carries is what its
traces hold, the docs' table is generated from it, refused kinds get their one line, and no
module outside engine/trace sniffs a file's format."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from engine.trace.errors import TraceImportError
from engine.trace.evidence import Tier, tiers
from engine.trace.formats import (
    CARRIES,
    FORMATS,
    REFUSED,
    format_of,
    is_trace_folder,
    listed,
    markdown_table,
    unknown_line,
)
from engine.trace.read import read_trace
from engine.trace.segments import Kind
from tests.paths import ROOT, TRACES


def _real_traces() -> list[Path]:
    files = sorted((TRACES / "kineto").glob("*.json.gz"))
    files += sorted((TRACES / "kineto" / "job128_two_ranks").glob("*.json.gz"))
    files += sorted((TRACES / "nsys").glob("*.sqlite"))
    files += sorted(p for p in (TRACES / "rocprof").iterdir() if p.is_dir() and is_trace_folder(p))
    files += sorted((TRACES / "rocprof").glob("*/*.json.gz"))
    return files


REAL = _real_traces()


def test_the_real_traces_cover_every_format_but_rocpd_and_pftrace() -> None:
    # rocpd has no real database in the repository (its tests build one from rocpd's schema),
    # nor rocprofv3's pftrace a real file (tests/trace/test_rocprof_pftrace.py writes its own)
    claimed = {format_of(p).name for p in REAL}
    assert claimed >= {f.name for f in FORMATS} - {"rocpd", "rocprofv3-pftrace"}


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_each_real_trace_goes_to_its_format_and_holds_only_what_it_carries(path: Path) -> None:
    fmt = format_of(path)
    try:
        trace = read_trace(path)
    except TraceImportError as e:  # a sample its importer refuses on purpose: its own line
        assert fmt.name.startswith("rocprof"), e
        assert "counters with no kernel" in str(e)
        return
    assert trace.device_properties["format"] == fmt.name
    seg = trace.segments
    holds = {
        "kernels": bool((seg.kind == Kind.KERNEL).any()),
        "copies": bool(np.isin(seg.kind, (Kind.MEMCPY, Kind.MEMSET)).any()),
        "host calls": len(trace.host) > 0,
        "shapes": bool((tiers(seg) == Tier.DERIVED).any()),
        "counters": bool((tiers(seg) == Tier.MEASURED).any()),
        "ranks": trace.device_properties.get("rank") is not None,
    }
    assert set(holds) <= set(CARRIES)
    over = sorted(k for k, v in holds.items() if v and k not in fmt.carries)
    assert not over, f"{path.name} holds {over}, which format {fmt.name} does not declare"


def test_the_docs_table_is_the_registry() -> None:
    doc = (ROOT / "docs" / "analyze.md").read_text()
    got = re.search(r"<!-- formats: begin \(generated\) -->\n(.*?)<!-- formats: end -->", doc, re.S)
    assert got is not None, "docs/analyze.md lost its formats table"
    assert got.group(1) == markdown_table()
    for fmt in FORMATS:
        assert fmt.title in got.group(1)


@pytest.mark.parametrize("refusal", REFUSED, ids=lambda r: r.suffixes[0])
def test_a_refused_kind_gets_its_one_line(tmp_path: Path, refusal: object) -> None:
    from engine.trace.formats import Refused

    assert isinstance(refusal, Refused)
    f = tmp_path / f"report{refusal.suffixes[0]}"
    f.write_bytes(b"\x00\x01 not a trace we read \x02")
    with pytest.raises(TraceImportError) as e:
        read_trace(f)
    assert refusal.line in str(e.value)
    assert "\n" not in str(e.value)
    assert listed(f)  # listed in a folder, so that it is told, not silently skipped


def test_an_nsys_rep_names_the_export_command(tmp_path: Path) -> None:
    f = tmp_path / "profile.nsys-rep"
    f.write_bytes(b"\x00" * 64)
    with pytest.raises(TraceImportError, match="nsys export --type sqlite"):
        read_trace(f)


def test_a_folder_lists_what_the_formats_take(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"traceEvents": []}')
    (tmp_path / "b.json.gz").write_bytes(b"")
    sqlite3.connect(tmp_path / "c.sqlite").close()
    other = sqlite3.connect(tmp_path / "d.db")  # an SQLite file that is not rocpd's
    other.execute("CREATE TABLE t (x)")
    other.commit()
    other.close()
    (tmp_path / "e.txt").write_text("notes")
    (tmp_path / "f.nsys-rep").write_bytes(b"\x00")
    got = sorted(p.name for p in tmp_path.iterdir() if listed(p))
    assert got == ["a.json", "b.json.gz", "c.sqlite", "f.nsys-rep"]
    assert not is_trace_folder(tmp_path)


def test_a_folder_nothing_claims_says_what_is_read(tmp_path: Path) -> None:
    with pytest.raises(TraceImportError) as e:
        read_trace(tmp_path)
    assert unknown_line() in str(e.value)
    for fmt in FORMATS:
        assert fmt.title in unknown_line()


#: what reading a file's first bytes to tell its format looks like in code
_SNIFFS = re.compile(
    r"SQLite format 3|\\x1f\\x8b|looks_like_rocprof|is_rocpd\(|is_rocprof_dir\(|"
    r"rocprofiler-sdk-tool|\.endswith\(\(?\"\.(json\.gz|sqlite|db|gz)"
)


def test_no_module_outside_engine_trace_sniffs_a_format() -> None:
    found = []
    for pkg in ("engine", "gitm_tui"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            rel = f.relative_to(ROOT).as_posix()
            if rel.startswith("engine/trace/"):
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if _SNIFFS.search(line):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "format sniffing outside engine/trace:\n" + "\n".join(found)
