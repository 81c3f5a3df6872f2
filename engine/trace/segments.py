"""Columnar device-activity records (DESIGN §3): a struct of numpy arrays plus an interned name table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from enum import IntEnum, IntFlag
from typing import Any

import numpy as np
import numpy.typing as npt


class Kind(IntEnum):
    """What a segment is on the device."""

    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2
    SYNC = 3
    COMM = 4
    #: a CUPTI-profiler range: one kernel replayed once per counter pass; it carries measured
    #: counters, but its duration is the profiling range, not the kernel's execution time
    RANGE = 5


class Klass(IntEnum):
    """Kernel taxonomy (DESIGN §3)."""

    GEMM = 0
    CONV = 1
    ATTENTION = 2
    ELEMENTWISE = 3
    REDUCTION = 4
    NORM = 5
    COPY = 6
    COMM = 7
    OTHER = 8


class Provenance(IntFlag):
    """Which fields of a row were measured; an unset bit means unknown or estimated."""

    NONE = 0
    FLOPS = 1
    DRAM_BYTES = 2
    ISSUE_ACTIVE = 4
    STALL_FRAC = 8
    OCCUPANCY = 16
    GEOMETRY = 32
    #: FLOPs / DRAM bytes were *derived* from the launching op's recorded shapes and dtypes
    #: (engine/trace/kineto/shapes.py), not measured by hardware counters
    DERIVED = 64
    #: set by O_θ on its output when any pressure had to be estimated from priors
    ESTIMATED = 128


#: numeric type a kernel computes in (the ``dtype`` column): index = code, 0 = unknown. Names are
#: the hardware catalogue's ``peak_flops`` keys, so a code picks the peak its FLOPs run against.
DTYPES = ("", "fp32", "tf32", "bf16", "fp16", "fp64", "fp8", "int8")
DTYPE_CODE = {name: code for code, name in enumerate(DTYPES) if name}


def dtype_peaks(peak_flops: dict[str, float]) -> npt.NDArray[np.float64]:
    """Return a device's peak FLOP/s per DTYPES code (NaN where it lists none), for indexing by
    the ``dtype`` column."""
    return np.array([float(peak_flops.get(d, np.nan)) if d else np.nan for d in DTYPES])


#: column name -> dtype, in DESIGN §3 order. The single source of truth for the schema.
COLUMNS: dict[str, np.dtype[Any]] = {
    "start_ns": np.dtype(np.int64),
    "end_ns": np.dtype(np.int64),
    "stream": np.dtype(np.int32),
    "device": np.dtype(np.int16),
    "kind": np.dtype(np.uint8),
    "name": np.dtype(np.int32),
    "klass": np.dtype(np.uint8),
    "correlation": np.dtype(np.int64),
    "grid": np.dtype(np.int32),
    "block": np.dtype(np.int32),
    "regs": np.dtype(np.int32),
    "smem": np.dtype(np.int32),
    "occupancy": np.dtype(np.float32),
    "flops": np.dtype(np.float64),
    "dram_bytes": np.dtype(np.float64),
    "issue_active": np.dtype(np.float32),
    "stall_frac": np.dtype(np.float32),
    "provenance": np.dtype(np.uint8),
    "dtype": np.dtype(np.uint8),
}

#: value a column takes when a producer does not know it (NaN for floats, 0 for ints).
_MISSING: dict[str, float | int] = {
    name: (np.nan if dt.kind == "f" else 0) for name, dt in COLUMNS.items()
}


class SegmentsError(ValueError):
    """Raised when columns do not form a valid Segments table."""


class NameTable:
    """Interned strings: kernel names are stored once and referenced by int32 index."""

    __slots__ = ("_index", "_names")

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        for n in names:
            self.intern(n)

    def intern(self, name: str) -> int:
        """Return the index of ``name``, adding it if new."""
        idx = self._index.get(name)
        if idx is None:
            idx = len(self._names)
            self._names.append(name)
            self._index[name] = idx
        return idx

    def __getitem__(self, idx: int) -> str:
        return self._names[idx]

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def names(self) -> list[str]:
        """Return a copy of all interned names in index order."""
        return list(self._names)

    def remap_from(self, other: NameTable) -> npt.NDArray[np.int32]:
        """Intern every name of ``other``; return the array mapping other's indices to ours."""
        return np.array([self.intern(n) for n in other._names], dtype=np.int32)


@dataclass(eq=False)
class Segments:
    """One row per device activity; every attribute is a 1-D numpy column of equal length.

    Build with :meth:`from_columns` (fills missing columns, casts, validates) rather than the
    constructor, which trusts its arguments.
    """

    start_ns: npt.NDArray[np.int64]
    end_ns: npt.NDArray[np.int64]
    stream: npt.NDArray[np.int32]
    device: npt.NDArray[np.int16]
    kind: npt.NDArray[np.uint8]
    name: npt.NDArray[np.int32]
    klass: npt.NDArray[np.uint8]
    correlation: npt.NDArray[np.int64]
    grid: npt.NDArray[np.int32]
    block: npt.NDArray[np.int32]
    regs: npt.NDArray[np.int32]
    smem: npt.NDArray[np.int32]
    occupancy: npt.NDArray[np.float32]
    flops: npt.NDArray[np.float64]
    dram_bytes: npt.NDArray[np.float64]
    issue_active: npt.NDArray[np.float32]
    stall_frac: npt.NDArray[np.float32]
    provenance: npt.NDArray[np.uint8]
    #: DTYPES code of the kernel's arithmetic (0 = unknown): from the launching op's input
    #: types (imported traces) or the op spec (simulator)
    dtype: npt.NDArray[np.uint8]

    # -- construction -------------------------------------------------------------------
    @classmethod
    def empty(cls, n: int = 0) -> Segments:
        """Return ``n`` rows with every column at its 'unknown' value."""
        return cls(**{c: np.full(n, _MISSING[c], dtype=dt) for c, dt in COLUMNS.items()})

    @staticmethod
    def unknown(column: str, n: int) -> np.ndarray:
        """``n`` rows of ``column``'s unknown value, read-only, holding no memory: for a column
        a source never has (Kineto has no hardware counters: 8 bytes a row otherwise)."""
        return np.broadcast_to(np.array(_MISSING[column], COLUMNS[column]), (n,))

    @classmethod
    def from_columns(cls, **cols: Any) -> Segments:
        """Build from array-likes; absent columns are filled as unknown (writable); a column
        given as ``unknown`` stays read-only; the result is validated."""
        unknown = set(cols) - set(COLUMNS)
        if unknown:
            raise SegmentsError(f"unknown columns: {sorted(unknown)}")
        if "start_ns" not in cols or "end_ns" not in cols:
            raise SegmentsError("start_ns and end_ns are required")
        n = len(cols["start_ns"])
        out: dict[str, np.ndarray] = {}
        for c, dt in COLUMNS.items():
            if c in cols:
                arr = np.asarray(cols[c])
                if arr.ndim != 1:
                    raise SegmentsError(f"column {c} must be 1-D, got shape {arr.shape}")
                if len(arr) != n:
                    raise SegmentsError(f"column {c} has {len(arr)} rows, start_ns has {n}")
                placeholder = arr.strides == (0,) and not arr.flags.writeable
                if (
                    placeholder
                    and arr.dtype == dt
                    and len(arr)
                    and np.array_equal(arr[:1], [_MISSING[c]], equal_nan=True)
                ):
                    out[c] = arr  # (Segments.unknown)
                else:
                    out[c] = np.ascontiguousarray(arr, dtype=dt)
            else:
                out[c] = np.full(n, _MISSING[c], dtype=dt)
        seg = cls(**out)
        seg.validate()
        return seg

    # -- checks -------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise :class:`SegmentsError` unless lengths, dtypes and time order are sound."""
        n = len(self.start_ns)
        for c, dt in COLUMNS.items():
            arr = getattr(self, c)
            if not isinstance(arr, np.ndarray) or arr.ndim != 1:
                raise SegmentsError(f"column {c} is not a 1-D numpy array")
            if arr.dtype != dt:
                raise SegmentsError(f"column {c} has dtype {arr.dtype}, expected {dt}")
            if len(arr) != n:
                raise SegmentsError(f"column {c} has {len(arr)} rows, expected {n}")
        bad = np.flatnonzero(self.end_ns < self.start_ns)
        if bad.size:
            i = int(bad[0])
            raise SegmentsError(
                f"{bad.size} rows end before they start (first: row {i}, "
                f"start {self.start_ns[i]} > end {self.end_ns[i]})"
            )
        for c in ("occupancy", "issue_active", "stall_frac"):
            v = getattr(self, c)
            finite = v[np.isfinite(v)]
            if finite.size and (finite.min() < 0 or finite.max() > 1):
                raise SegmentsError(f"column {c} must lie in [0, 1] or be NaN")

    # -- container protocol -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.start_ns)

    def columns(self) -> dict[str, np.ndarray]:
        """Return the columns as a dict (views, not copies)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def take(self, index: slice | npt.ArrayLike) -> Segments:
        """Return the rows selected by a slice, a boolean mask or an integer index array."""
        if not isinstance(index, slice):
            index = np.asarray(index)
            if index.dtype != np.bool_ and not np.issubdtype(index.dtype, np.integer):
                raise SegmentsError(f"cannot index Segments with dtype {index.dtype}")
        return Segments(**{c: np.ascontiguousarray(a[index]) for c, a in self.columns().items()})

    __getitem__ = take

    def take_only(self, index: npt.ArrayLike, keep: Iterable[str]) -> Segments:
        """The rows of ``index`` in the columns ``keep`` (copies); every other column is a
        read-only placeholder of the rows' count holding its unknown value, and costs no
        memory. For a consumer that reads a few columns of many rows: the decode of a 10 M-event
        trace's kernels took a full copy of 19 columns (65 MiB) to read 10."""
        i = np.asarray(index)
        n = int(i.sum()) if i.dtype == np.bool_ else len(i)
        wanted = set(keep)
        return Segments(
            **{
                c: np.ascontiguousarray(a[i])
                if c in wanted
                else np.broadcast_to(np.array(_MISSING[c], a.dtype), (n,))
                for c, a in self.columns().items()
            }
        )

    @property
    def duration_ns(self) -> npt.NDArray[np.int64]:
        """Return end − start per row."""
        return self.end_ns - self.start_ns

    def streams(self) -> npt.NDArray[np.int32]:
        """Return the distinct stream ids, ascending."""
        return np.unique(self.stream)

    @staticmethod
    def concat(parts: Sequence[Segments]) -> Segments:
        """Concatenate tables that share one name table (see :func:`concat_traces` otherwise)."""
        if not parts:
            return Segments.empty()
        return Segments(**{c: np.concatenate([getattr(p, c) for p in parts]) for c in COLUMNS})

    def with_names_remapped(self, mapping: npt.NDArray[np.int32]) -> Segments:
        """Return a copy whose ``name`` indices are translated through ``mapping``."""
        cols = self.columns()
        cols["name"] = mapping[self.name] if len(self) else self.name.copy()
        return Segments(**cols)


def concat_named(parts: Sequence[tuple[Segments, NameTable]]) -> tuple[Segments, NameTable]:
    """Concatenate tables that each carry their own name table into one table and one name table."""
    table = NameTable()
    remapped = [seg.with_names_remapped(table.remap_from(names)) for seg, names in parts]
    return Segments.concat(remapped), table
