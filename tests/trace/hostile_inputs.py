"""Hostile inputs for the trace readers: synthetic, generated here (nothing in them was recorded).

Each builder writes one input into a directory and returns its path. They are scaled down so
the suite stays fast: a bomb of a few MB tested against a limit lowered through its environment
variable, a long element of a few hundred KB read in small chunks, and so on. Used by
``tests/trace/test_hostile_input.py``; runnable on its own to leave the corpus in a directory:
``python -m tests.trace.hostile_inputs DIR``.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

from tests.paths import ROOT

NSYS = ROOT / "tests" / "data" / "traces" / "nsys" / "a100_cloverleaf.sqlite"

#: kernels in the synthetic trace; each lasts KERNEL_US µs (so the GPU time is known)
KERNELS = 30
KERNEL_US = 5


def events(n: int = KERNELS, stream: int = 7, name: str = "ampere_sgemm_128x64_nn") -> list[Any]:
    """``n`` kernels on one stream, each with the runtime call that launched it."""
    out: list[Any] = []
    for i in range(n):
        t = 1000 + 20 * i
        out.append(
            {
                "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                "ts": t, "dur": 3, "args": {"correlation": i + 1},
            }
        )  # fmt: skip
        out.append(
            {
                "ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream,
                "ts": t + 4, "dur": KERNEL_US,
                "args": {"stream": stream, "device": 0, "correlation": i + 1},
            }
        )  # fmt: skip
    return out


def trace_bytes(evs: list[Any] | None = None, **meta: Any) -> bytes:
    """A Kineto-shaped document: the metadata keys first, then ``traceEvents``."""
    doc = dict(meta)
    doc["traceEvents"] = events() if evs is None else evs
    return json.dumps(doc).encode()


def write(path: Path, data: bytes, gz: bool = False) -> Path:
    """Write ``data`` (gzip'd if ``gz``) to ``path`` and return it."""
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def plain(d: Path) -> Path:
    """A well-formed trace: the control the hostile ones are compared with."""
    return write(d / "plain.json", trace_bytes())


def gzip_bomb(d: Path, blank_mb: int = 24) -> Path:
    """A valid trace whose event array opens with ``blank_mb`` MB of blanks: ~1000:1 on disk."""
    data = (
        b'{"traceEvents": [' + b" " * (blank_mb << 20) + trace_bytes()[len(b'{"traceEvents": [') :]
    )
    return write(d / "bomb.json.gz", data, gz=True)


def unfinished_string(d: Path, size: int) -> Path:
    """An event whose name string opens and never closes (``size`` bytes of it)."""
    head = b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "'
    return write(d / "unfinished.json", head + b"a" * size)


def unfinished_blanks(d: Path, size: int) -> Path:
    """An event left open after its ``cat`` key, followed by ``size`` blanks."""
    head = b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, '
    return write(d / "blanks.json", head + b" " * size)


def long_event(d: Path, size: int) -> Path:
    """A valid trace whose first kernel's name is ``size`` bytes long."""
    evs = events()
    evs[1]["name"] = "k" * size
    return write(d / "long_event.json", trace_bytes(evs))


def deep_metadata(d: Path, depth: int = 1200) -> Path:
    """Device properties nested ``depth`` deep (RecursionError in a recursive JSON reader)."""
    meta = b'{"deviceProperties": ' + b"[" * depth + b"]" * depth + b", "
    return write(d / "deep_meta.json", meta + trace_bytes()[1:])


def deep_event(d: Path, depth: int = 1200) -> Path:
    """A kernel event whose args hold a list nested ``depth`` deep."""
    deep = "[" * depth + "]" * depth
    evs = json.dumps(events())
    data = '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, '
    data += f'"args": {{"x": {deep}}}}}, ' + evs[1:] + "}"
    return write(d / "deep_event.json", data.encode())


def nested_trace_events(d: Path) -> Path:
    """A ``traceEvents`` key inside the metadata (one fake kernel), before the real array."""
    fake = events(1, stream=99, name="fake_kernel")
    return write(d / "nested_key.json", trace_bytes(meta={"traceEvents": fake}))


def duplicate_trace_events(d: Path) -> Path:
    """Two top-level ``traceEvents`` keys (JSON readers differ on which one counts)."""
    first = json.dumps(events()).encode()
    second = json.dumps(events(1, stream=99, name="second_array_kernel")).encode()
    return write(
        d / "dup_key.json", b'{"traceEvents": ' + first + b', "traceEvents": ' + second + b"}"
    )


def escaped_duplicate_trace_events(d: Path) -> Path:
    """A second top-level key spelled with an escape (``trace\\u0045vents``) after the array."""
    first = json.dumps(events()).encode()
    second = json.dumps(events(1, stream=99, name="second_array_kernel")).encode()
    data = b'{"traceEvents": ' + first + b', "trace\\u0045vents": ' + second + b"}"
    return write(d / "dup_escaped_key.json", data)


def multi_member_gzip(d: Path) -> tuple[Path, Path]:
    """The same trace as one gzip member and as three concatenated members (``cat a.gz b.gz``)."""
    data = trace_bytes()
    one = write(d / "one_member.json.gz", data, gz=True)
    cuts = (0, len(data) // 3, 2 * len(data) // 3, len(data))
    parts = [gzip.compress(data[a:b], mtime=0) for a, b in itertools.pairwise(cuts)]
    many = d / "three_members.json.gz"
    many.write_bytes(b"".join(parts))
    return one, many


def trailing_garbage_gzip(d: Path, garbage: bytes = b"this is not gzip\n") -> Path:
    """A valid gzip'd trace followed by bytes that are not a gzip member."""
    p = d / "trailing.json.gz"
    p.write_bytes(gzip.compress(trace_bytes(), mtime=0) + garbage)
    return p


def huge_times(d: Path, field: str, literal: str, every: bool = False) -> Path:
    """Kernels whose ``field`` (``ts`` or ``dur``) is written as ``literal`` µs —
    ``1000000000000000000`` or ``1e18``, beyond int64 nanoseconds: the first kernel only, or
    every kernel when ``every``."""
    marker = -123456789  # replaced in the text, so the literal is written exactly as given
    evs = events()
    for e in evs:
        if e["cat"] == "kernel":
            e[field] = marker
            if not every:
                break
    text = json.dumps({"traceEvents": evs}).replace(str(marker), literal)
    kind = "exp" if "e" in literal else "int"
    return write(d / f"huge_{field}_{kind}_{'all' if every else 'one'}.json", text.encode())


def fifo(d: Path) -> Path:
    """A named pipe with a trace's name (opening it for reading blocks until a writer comes)."""
    p = d / "pipe.json"
    os.mkfifo(p)
    return p


def unreadable_dir(d: Path) -> Path:
    """A directory holding a trace that its owner cannot list (mode 000)."""
    p = d / "locked"
    p.mkdir()
    plain(p)
    p.chmod(0)
    return p


def odd_sqlite_names(d: Path) -> list[Path]:
    """The shipped Nsight export under names that are special in a URI: ``#``, ``?``, ``%``."""
    out = []
    for name in ("we#ird.sqlite", "a?b.sqlite", "100%.sqlite", "sp ace%20.sqlite"):
        p = d / name
        shutil.copyfile(NSYS, p)
        out.append(p)
    return out


def corrupt_sqlite_schema(d: Path) -> Path:
    """The Nsight export with one more table whose schema entry holds a 0xFF byte (not UTF-8)
    and whose CREATE statement no longer parses."""
    p = d / "corrupt_schema.sqlite"
    shutil.copyfile(NSYS, p)
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE Zzzqq (a INTEGER)")
    con.commit()
    con.close()
    raw = p.read_bytes()
    raw = raw.replace(b"CREATE TABLE Zzzqq", b"CREATE TABLX Zzzqq").replace(b"Zzzqq", b"Z\xffzqq")
    p.write_bytes(raw)
    return p


def build_all(d: Path) -> dict[str, Any]:
    """Every input above in ``d`` (the FIFO and the unreadable directory included)."""
    d.mkdir(parents=True, exist_ok=True)
    one, many = multi_member_gzip(d)
    return {
        "plain": plain(d),
        "gzip_bomb": gzip_bomb(d),
        "unfinished_string": unfinished_string(d, 1 << 20),
        "unfinished_blanks": unfinished_blanks(d, 1 << 20),
        "long_event": long_event(d, 1 << 20),
        "deep_metadata": deep_metadata(d),
        "deep_event": deep_event(d),
        "nested_trace_events": nested_trace_events(d),
        "duplicate_trace_events": duplicate_trace_events(d),
        "escaped_duplicate_trace_events": escaped_duplicate_trace_events(d),
        "one_member": one,
        "multi_member": many,
        "trailing_garbage": trailing_garbage_gzip(d),
        "huge_dur_int": huge_times(d, "dur", "1000000000000000000"),
        "huge_ts_exp": huge_times(d, "ts", "1e18"),
        "huge_ts_exp_all": huge_times(d, "ts", "1e18", every=True),
        "fifo": fifo(d),
        "unreadable_dir": unreadable_dir(d),
        "odd_sqlite": odd_sqlite_names(d),
        "corrupt_sqlite": corrupt_sqlite_schema(d),
    }


if __name__ == "__main__":  # pragma: no cover - a helper for probing by hand
    for k, v in build_all(Path(sys.argv[1])).items():
        print(k, v)
