"""Limits on what one trace file may make the readers do, each with a default no real trace
reaches and an environment variable to move it.

A Chrome/Kineto trace is read as a stream, so its size costs time, not memory; what would cost
memory or never end is bounded here:

* ``GITM_MAX_ELEMENT_BYTES`` (default 64 MiB): one element read whole — one event of the
  ``traceEvents`` array (strings in it included), or the file's metadata outside that array.
  The repository's real traces have events of at most 6 KB (``tests/data/traces``; a kernel
  event is ~300 bytes, a CPU op with recorded shapes a few KB) and metadata of a few KB; an
  event of several MB (a huge Python stack) still passes.
* ``GITM_MAX_TRACE_BYTES`` (default 64 GiB): the decompressed size of the file. Real Kineto
  traces reach several GB (a 2 M-event trace is ~0.5 GB of text).
* ``GITM_MAX_GZIP_RATIO`` (default 200): decompressed bytes per compressed byte, checked once
  more than 16 MiB came out — a gzip bomb (deflate reaches ~1000:1 on blank runs) is stopped
  after 16 MiB instead of inflating to gigabytes. Real traces compress 7-20:1 (the shipped ones:
  7.5 to 19.7).
* ``GITM_MAX_JSON_DEPTH`` (default 512): nesting of arrays and objects, counted from the file's
  top-level object (an event is at depth 3, its ``args`` at 4; real traces stay under 10).
  Python's json module recurses once per level and fails near 1000, so the limit is below.

Sizes take a K, M, G or T suffix (powers of 1024): ``GITM_MAX_ELEMENT_BYTES=256M``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.trace.errors import TraceImportError

#: a time (ts, dur, start, end) must be below this in magnitude, in nanoseconds: 2**62 ns is 146
#: years, so epoch-ns timestamps fit until 2116 and ``ts + dur`` of two such values still fits
#: int64. A trace whose rows together span or sum past it is refused (see check_times): every
#: total the analysis adds up is then below int64's limit too.
MAX_TIME_NS = 1 << 62

#: the ratio is judged only past this many decompressed bytes: a small file that inflates
#: a lot (a few KB of JSON) is harmless, and the reader holds a few chunks (8 MiB each) anyway
RATIO_FLOOR = 16 << 20

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


def size_text(n: int) -> str:
    """``n`` bytes for a message: "64 MiB", "1 KiB", or "1,000 bytes"."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n:,} bytes"


@dataclass(frozen=True)
class ReadLimits:
    """What one trace may make the readers do (see the module docstring for each default)."""

    max_element_bytes: int = 64 << 20
    max_trace_bytes: int = 64 << 30
    max_gzip_ratio: float = 200.0
    max_json_depth: int = 512

    @classmethod
    def from_env(cls, path: str | Path) -> ReadLimits:
        """The defaults, with any ``GITM_MAX_*`` variable set in the environment applied;
        TraceImportError naming ``path`` (the file being read) and the variable if one is not
        a valid value."""
        d = cls()
        return cls(
            max_element_bytes=_env_size(path, "GITM_MAX_ELEMENT_BYTES", d.max_element_bytes),
            max_trace_bytes=_env_size(path, "GITM_MAX_TRACE_BYTES", d.max_trace_bytes),
            max_gzip_ratio=float(_env_size(path, "GITM_MAX_GZIP_RATIO", int(d.max_gzip_ratio))),
            max_json_depth=_env_size(path, "GITM_MAX_JSON_DEPTH", d.max_json_depth, minimum=3),
        )


def _env_size(path: str | Path, name: str, default: int, minimum: int = 1) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    m = _SIZE.fullmatch(raw)
    value = int(m.group(1)) * _UNITS[m.group(2).upper()] if m else 0
    if value < minimum:
        raise TraceImportError(
            path,
            f"{name}={raw!r} is not a valid limit (a whole number of at least {minimum}, "
            "optionally with a K, M, G or T suffix)",
        )
    return value


def check_times(
    path: str | Path,
    starts: np.ndarray | Sequence[np.ndarray],
    ends: np.ndarray | Sequence[np.ndarray],
) -> None:
    """TraceImportError if the rows (start and end ns, each below MAX_TIME_NS in magnitude)
    together span or add up to MAX_TIME_NS or more: then some total of the analysis would
    overflow int64 (found: durations of 1e18 µs gave negative GPU time). ``starts`` and
    ``ends`` may be lists of arrays (row sets checked together, never concatenated)."""
    s_list = [starts] if isinstance(starts, np.ndarray) else list(starts)
    e_list = [ends] if isinstance(ends, np.ndarray) else list(ends)
    pairs = [(s, e) for s, e in zip(s_list, e_list, strict=True) if len(s)]
    if not pairs:
        return
    span = max(float(e.max()) for _, e in pairs) - min(float(s.min()) for s, _ in pairs)
    total = 0.0
    for s, e in pairs:  # in float64, block by block: a difference of two int64s may overflow
        for k in range(0, len(s), 1 << 20):
            total += float(
                np.sum(np.subtract(e[k : k + (1 << 20)], s[k : k + (1 << 20)], dtype=np.float64))
            )
    if span >= MAX_TIME_NS or total >= MAX_TIME_NS:
        raise TraceImportError(
            path,
            "times out of range: the trace's rows span or add up to more than 2**62 ns (146 years)",
        )
