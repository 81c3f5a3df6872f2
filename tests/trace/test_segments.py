"""Segments: schema, validation, slicing, concatenation, interned names."""

from __future__ import annotations

import numpy as np
import pytest

from engine.trace.segments import COLUMNS, NameTable, Segments, SegmentsError, concat_named


def _seg(n=5, **kw):
    start = np.arange(n, dtype=np.int64) * 10
    return Segments.from_columns(start_ns=start, end_ns=start + 5, stream=np.arange(n) % 2, **kw)


def test_from_columns_fills_unknown_with_nan_or_zero():
    s = _seg()
    assert len(s) == 5
    assert np.isnan(s.flops).all() and np.isnan(s.occupancy).all()
    assert (s.grid == 0).all() and (s.provenance == 0).all()
    for c, dt in COLUMNS.items():
        assert getattr(s, c).dtype == dt


def test_validation_rejects_bad_tables():
    with pytest.raises(SegmentsError, match="end before they start"):
        Segments.from_columns(start_ns=[10, 20], end_ns=[15, 19])
    with pytest.raises(SegmentsError, match="rows"):
        Segments.from_columns(start_ns=[1, 2], end_ns=[3, 4], stream=[1])
    with pytest.raises(SegmentsError, match="unknown columns"):
        Segments.from_columns(start_ns=[1], end_ns=[2], bogus=[1])
    with pytest.raises(SegmentsError, match=r"\[0, 1\]"):
        Segments.from_columns(start_ns=[1], end_ns=[2], issue_active=[1.5])
    s = _seg()
    s.stream = s.stream.astype(np.int64)
    with pytest.raises(SegmentsError, match="dtype"):
        s.validate()


def test_take_slice_mask_and_index():
    s = _seg(6, flops=np.arange(6.0))
    assert s[1:3].flops.tolist() == [1.0, 2.0]
    assert s.take(s.stream == 1).flops.tolist() == [1.0, 3.0, 5.0]
    assert s.take([5, 0]).start_ns.tolist() == [50, 0]
    assert s.take([5, 0]).start_ns.flags.c_contiguous
    with pytest.raises(SegmentsError):
        s.take(np.array([0.5]))


def test_concat_and_duration():
    a, b = _seg(3), _seg(2)
    c = Segments.concat([a, b])
    assert len(c) == 5 and c.duration_ns.tolist() == [5] * 5
    c.validate()
    assert len(Segments.concat([])) == 0


def test_name_table_interns_and_remaps():
    t = NameTable(["a", "b"])
    assert t.intern("a") == 0 and t.intern("c") == 2 and len(t) == 3 and "b" in t
    s1 = Segments.from_columns(start_ns=[0, 1], end_ns=[1, 2], name=[0, 1])
    s2 = Segments.from_columns(start_ns=[0], end_ns=[1], name=[0])
    merged, names = concat_named([(s1, NameTable(["x", "y"])), (s2, NameTable(["y"]))])
    assert [names[i] for i in merged.name] == ["x", "y", "y"]


def test_a_column_given_as_unknown_holds_no_memory_and_stays_read_only():
    n = 1000
    seg = Segments.from_columns(
        start_ns=np.arange(n, dtype=np.int64),
        end_ns=np.arange(n, dtype=np.int64) + 5,
        issue_active=Segments.unknown("issue_active", n),
        stall_frac=np.full(n, np.nan, np.float32),
    )
    assert seg.issue_active.strides == (0,) and not seg.issue_active.flags.writeable
    assert np.isnan(seg.issue_active).all() and len(seg.issue_active) == n
    assert seg.stall_frac.flags.writeable and seg.stall_frac.strides == (4,)  # given: a copy
    assert seg.dtype.flags.writeable  # absent: filled, writable (an importer writes it)
    # a read-only broadcast of something else is a value, copied as any column is
    ones = np.broadcast_to(np.float32(0.5), (n,))
    assert Segments.from_columns(start_ns=seg.start_ns, end_ns=seg.end_ns,
                                 occupancy=ones).occupancy.flags.writeable  # fmt: skip
    taken = seg.take(np.arange(0, n, 2))
    assert taken.issue_active.flags.writeable and np.isnan(taken.issue_active).all()
