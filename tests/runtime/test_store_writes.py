"""Writes check their count, and outputs are made as open() makes them (issue 51: a short
os.write was taken as durable; every output was written 0600 whatever the umask)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from engine.store import runs


def test_a_short_write_is_finished_not_taken_as_done(tmp_path: Path, monkeypatch):
    real = os.write
    calls = []

    def short(fd: int, data: memoryview) -> int:
        calls.append(len(data))
        return real(fd, bytes(data)[: max(1, len(data) // 2)])  # half of it each time

    monkeypatch.setattr(runs.os, "write", short)
    path = tmp_path / "journal.jsonl"
    runs.append_bytes(path, b"0123456789" * 10 + b"\n")
    assert path.read_bytes() == b"0123456789" * 10 + b"\n" and len(calls) > 1


def test_a_write_that_writes_nothing_is_an_error_naming_the_file(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(runs.os, "write", lambda fd, data: 0)
    with pytest.raises(OSError, match=r"journal\.jsonl"):
        runs.append_bytes(tmp_path / "journal.jsonl", b"x\n")


def test_outputs_follow_the_umask(tmp_path: Path):
    old = os.umask(0o022)
    try:
        runs.atomic_write_text(tmp_path / "report.md", "# report\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "report.md").stat().st_mode) == 0o644
