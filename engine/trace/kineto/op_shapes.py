"""The recorded shapes of a Kineto trace's framework ops (``record_shapes=True``): each distinct
(op name, ``Input Dims``, ``Input type``) and when each of its calls started — what a workload's
fingerprint (engine.optimizer.fingerprint) compares to tell a changed batch size, model width or
dtype from the same program.

One pass over the file with the readers' own byte stream, scanner and strict field parser
(every limit of engine.trace.limits, the same one-line errors). A training loop repeats the same
ops with the same shapes every step: the scanner's ``shape_keys`` hashes each op's name and
shape values without decoding them, and one op per distinct group is decoded (its bytes checked
equal by ``same_shapes``, a hash collision never trusted). An op whose values the kernel cannot
vouch for (a non-ASCII byte, a value of an odd kind) is decoded on its own.

Values are kept as compact JSON text, exactly as the values decode: ``[[32,64],[256,64],[]]``.
Nothing is interpreted here; a caller that shows them cleans them (engine.text.clean).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.trace.files import head
from engine.trace.kineto import json_scan as js
from engine.trace.kineto.chrome_stream import (
    extract_checked,
    stream_events,
)
from engine.trace.limits import ReadLimits

__all__ = ["MAX_GROUPS", "OpShapes", "from_derived_ops", "read_op_shapes"]

#: distinct (name, dims, types) groups kept: a training loop has tens to a few thousand; a
#: trace whose every op has shapes of its own (a hostile or a dynamic-shape one) stops adding
#: groups here and says so (``OpShapes.dropped``) rather than growing without bound
MAX_GROUPS = 1 << 14

_TOP, _TOPLENS = js.key_table(js.TOP_KEYS)
_ARGK, _ARGLENS = js.key_table(js.ARG_KEYS)
_PREFIX = np.frombuffer(js.FLOP_PREFIX, np.uint8).copy()
_SUFFIX = np.frombuffer(js.FLOP_SUFFIX, np.uint8).copy()
_SHAPES, _SHAPELENS = js.key_table(js.SHAPE_KEYS)
_KEYS = tuple(k.decode() for k in js.SHAPE_KEYS[:2])  # "Input Dims", "Input type" (quoted)
_DECODER = json.JSONDecoder()


@dataclass(eq=False)
class OpShapes:
    """Each distinct (op, dims, types) group and each call's group and start (ns)."""

    #: per group: the op's name, its Input Dims and Input type as compact JSON text
    ops: list[str]
    dims: list[str]
    types: list[str]
    #: per call with recorded dims: its group and its start (trace clock, ns)
    group: npt.NDArray[np.int64]
    start_ns: npt.NDArray[np.int64]
    #: framework ops seen (with or without shapes)
    calls: int = 0
    #: calls not kept: their group came after MAX_GROUPS others
    dropped: int = 0

    def __eq__(self, other: object) -> bool:  # (equal content: two reads of one file)
        if not isinstance(other, OpShapes):
            return NotImplemented
        return (
            (self.ops, self.dims, self.types, self.calls, self.dropped)
            == (other.ops, other.dims, other.types, other.calls, other.dropped)
            and np.array_equal(self.group, other.group)
            and np.array_equal(self.start_ns, other.start_ns)
        )

    @property
    def recorded(self) -> bool:
        """Whether any op carried Input Dims (``record_shapes=True``)."""
        return bool(len(self.group))

    @classmethod
    def empty(cls) -> OpShapes:
        return cls([], [], [], np.zeros(0, np.int64), np.zeros(0, np.int64))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _values(text: str) -> tuple[Any, Any]:
    """Input Dims and Input type of one event's text (each key's last occurrence, as json.loads
    keeps the last); None where absent or unreadable."""
    out: list[Any] = []
    for k in _KEYS:
        at = text.rfind(k)
        if at < 0:
            out.append(None)
            continue
        try:
            j = text.index(":", at + len(k)) + 1
            while text[j] in " \t\r\n":
                j += 1
            out.append(_DECODER.raw_decode(text, j)[0])
        except (ValueError, IndexError, RecursionError):
            out.append(None)
    return out[0], out[1]


def _name(buf: np.ndarray, s: int, e: int, escaped: bool) -> str:
    raw = buf[s:e].tobytes() if s >= 0 else b""
    try:
        return str(json.loads(b'"' + raw + b'"')) if escaped else raw.decode("utf-8")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw.decode("utf-8", "replace")


class _Collect:
    def __init__(self) -> None:
        self.index: dict[tuple[str, str, str], int] = {}
        self.ops: list[str] = []
        self.dims: list[str] = []
        self.types: list[str] = []
        self.groups: list[np.ndarray] = []
        self.starts: list[np.ndarray] = []
        #: (name hash, dims bytes, types bytes) of a group decoded before → its group (-1: no
        #: tensor dims), so a training loop's repeated ops are decoded once per trace
        self.seen: dict[tuple[int, bytes | None, bytes | None], int] = {}
        self.calls = 0
        self.dropped = 0

    def _group(self, name: str, dims: Any, types: Any) -> int:
        """The group of one decoded op; -1 when it has no tensor dims or the table is full."""
        if not isinstance(dims, list) or not any(isinstance(d, list) and d for d in dims):
            return -1
        key = (name, _compact(dims), _compact(types if isinstance(types, list) else []))
        g = self.index.get(key)
        if g is None:
            if len(self.ops) >= MAX_GROUPS:
                return -2
            g = self.index[key] = len(self.ops)
            self.ops.append(key[0])
            self.dims.append(key[1])
            self.types.append(key[2])
        return g

    def add(
        self,
        buf: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        codes: np.ndarray,
        fields: tuple[Any, ...],
    ) -> None:
        _ints, ts, dur, _occ, _flops, ns, ne, esc, h = fields[:9]
        rows = np.flatnonzero(
            (codes == js.CAT_CPU_OP) & (ts != js.NO_TIME) & (ts != js.OUT_OF_RANGE) & (dur >= 0)
        )
        self.calls += int(rows.size)
        if not rows.size:
            return
        spans, hashes, sure = js.shape_keys(buf, starts, ends, rows, h, _SHAPES, _SHAPELENS)
        # one representative per vouched-for hash in this block, checked byte for byte
        known = np.flatnonzero(sure)
        rep = np.arange(rows.size)
        if known.size:
            _, first, inv = np.unique(hashes[known], return_index=True, return_inverse=True)
            rep[known] = known[first][inv.reshape(-1)]
            same = js.same_shapes(buf, spans, h[rows], rep)
            rep = np.where(sure & same, rep, np.arange(rows.size))
        leaders, of = np.unique(rep, return_inverse=True)
        got = np.full(len(leaders), -1, np.int64)
        mv = buf.data
        for j, p in enumerate(leaders.tolist()):
            r = int(rows[p])
            key = None
            if sure[p]:  # a group seen in an earlier block, known by its name and values' bytes
                a0, b0, a1, b1 = spans[p, :4].tolist()
                key = (int(h[r]), mv[a0:b0].tobytes() if a0 >= 0 else None,
                       mv[a1:b1].tobytes() if a1 >= 0 else None)  # fmt: skip
                if key in self.seen:
                    got[j] = self.seen[key]
                    continue
            name = _name(buf, int(ns[r]), int(ne[r]), bool(esc[r]))
            try:
                text = buf[int(starts[r]) : int(ends[r])].tobytes().decode("utf-8")
            except UnicodeDecodeError:
                text = buf[int(starts[r]) : int(ends[r])].tobytes().decode("utf-8", "replace")
            dims, types = _values(text)
            g = self._group(name, dims, types)
            got[j] = g
            if g == -2:
                self.dropped += int((of == j).sum())
            if key is not None and g != -2 and len(self.seen) < 4 * MAX_GROUPS:
                self.seen[key] = g
        per = got[of.reshape(-1)]
        keep = per >= 0
        if keep.any():
            self.groups.append(per[keep])
            self.starts.append(ts[rows][keep].astype(np.int64))

    def shapes(self) -> OpShapes:
        cat = np.concatenate
        return OpShapes(
            self.ops,
            self.dims,
            self.types,
            cat(self.groups) if self.groups else np.zeros(0, np.int64),
            cat(self.starts) if self.starts else np.zeros(0, np.int64),
            self.calls,
            self.dropped,
        )


def read_op_shapes(path: str | Path, limits: ReadLimits | None = None) -> OpShapes:
    """The recorded shapes of the framework ops in a Kineto / Chrome-trace JSON file (plain or
    gzip): empty (``recorded`` False) when the profile did not record shapes;
    TraceImportError (one line) for a file that cannot be read or passes a limit."""
    path = Path(path)
    limits = limits or ReadLimits.from_env(path)
    if head(path).startswith(b"SQLite format 3"):
        return OpShapes.empty()  # an Nsight Systems export records no framework op shapes
    got = _Collect()

    def parse(
        data: bytes, starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, base: int
    ) -> None:
        keep = codes == js.CAT_CPU_OP
        if not keep.any():
            return
        s, e, c = starts[keep], ends[keep], codes[keep]
        buf = np.frombuffer(data, np.uint8)
        fields = extract_checked(
            path, buf, (s, e, c), base, (_TOP, _TOPLENS, _ARGK, _ARGLENS, _PREFIX, _SUFFIX)
        )
        got.add(buf, s, e, c, fields)

    stream_events(path, limits, parse)
    return got.shapes()


def _compact_text(text: str) -> str:
    """A recorded value's text as compact JSON (the reader's raw slice may hold blanks)."""
    try:
        return _compact(json.loads(text))
    except (ValueError, RecursionError):
        return text


def from_derived_ops(
    memo: Mapping[tuple[str, ...], Any],
    work_index: Mapping[int, int],
    op_parts: Sequence[Mapping[str, np.ndarray]],
    calls: int = 0,
) -> OpShapes:
    """The shapes the Kineto importer already read, without a second pass: those of the ops
    whose work it derives (matmul, convolution, attention, norm and elementwise families:
    engine.trace.kineto.shapes.may_derive) — its memo of (name, Input Dims text, Input type
    text, …) → work, each work's index, and each kept op's work index and start (the op blocks,
    read, not consumed). A 2 M-event trace's ~150k such ops cost two arrays' concatenation."""
    groups: dict[tuple[str, str, str], int] = {}
    ops: list[str] = []
    dims: list[str] = []
    types: list[str] = []
    lut = np.full(len(work_index) + 1, -1, np.int64)
    for key, w in memo.items():
        k = work_index.get(id(w)) if w is not None else None
        if k is None or k >= len(lut) - 1 or len(key) < 3:
            continue
        g_key = (key[0], _compact_text(key[1]), _compact_text(key[2]))
        g = groups.get(g_key)
        if g is None:
            g = groups[g_key] = len(ops)
            ops.append(g_key[0])
            dims.append(g_key[1])
            types.append(g_key[2])
        lut[k] = g
    if not op_parts or not ops:
        return OpShapes(ops, dims, types, np.zeros(0, np.int64), np.zeros(0, np.int64), calls)
    work = np.concatenate([np.asarray(o["work"], np.int64) for o in op_parts])
    start = np.concatenate([np.asarray(o["start"], np.int64) for o in op_parts])
    group = lut[np.clip(work, 0, len(lut) - 1)]
    group[(work < 0) | (work >= len(lut) - 1)] = -1
    keep = group >= 0
    return OpShapes(ops, dims, types, group[keep], start[keep], calls)
