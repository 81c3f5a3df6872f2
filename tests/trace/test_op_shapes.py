"""Framework ops that share a name and shape values share one decode (kineto._works, grouped by
json_scan.shape_keys / same_shapes): every op must get exactly the work that reading it alone
(kineto._op_work, what the Python twin's first run does) gives — on ordinary events and on the
odd ones: keys repeated, blanks around colons, a key's text inside a string, brackets inside
strings, values that are numbers, non-ASCII bytes, deep nesting, and forced hash collisions."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.trace.kineto import json_scan as js
from engine.trace.kineto import kineto
from engine.trace.kineto.shapes import op_work

NAMES = ["aten::mm", "aten::addmm", "aten::bmm", "aten::add", "aten::native_layer_norm"]


def _dims(rng: random.Random, name: str) -> list:
    a, b, c = (rng.choice([1, 2, 8, 64, 4096]) for _ in range(3))
    if name == "aten::bmm":
        return [[4, a, b], [4, b, c]]
    if name == "aten::addmm":
        return [[c], [a, b], [b, c], [], []]
    if name == "aten::native_layer_norm":
        return [[a, b], [b], [b], [b], []]
    return [[a, b], [a, b]] if name == "aten::add" else [[a, b], [b, c]]


def _event(rng: random.Random, i: int) -> tuple[str, bytes]:
    """One cpu_op event's text (valid JSON), of a random kind."""
    name = rng.choice(NAMES)
    dims = _dims(rng, name)
    types = [rng.choice(["float", "c10::Half", "c10::BFloat16", "Scalar"]) for _ in dims]
    args: list[tuple[str, str]] = [("External id", str(i))]
    kind = rng.randrange(12)
    sep = rng.choice([":", ": ", " : ", ":\n\t "])
    args.append(("Input Dims", json.dumps(dims)))
    if kind != 1:
        args.append(("Input type", json.dumps(types)))
    if kind == 2:
        args.append(("Concrete Inputs", json.dumps(["", "1", "[2, 3]"][: len(dims)])))
    if kind == 3:  # a key repeated: the last one counts
        args.append(("Input Dims", json.dumps(_dims(rng, name))))
    if kind == 4:  # the key's text inside a string that ends right after it
        args.append(("note", json.dumps('x "Input Dims')))
    if kind == 5:  # brackets and escaped quotes inside strings
        args.append(("Concrete Inputs", json.dumps(['a"]', "[[", "}{"])))
    if kind == 6:  # a value that is a number
        args.append(("Input type", "7"))
    if kind == 7:  # non-ASCII somewhere in the event
        args.append(("Module", json.dumps("módulo", ensure_ascii=False)))
    if kind == 8:  # nested deeper than the kernel follows
        args.append(("Concrete Inputs", "[" * 70 + "]" * 70))
    if kind == 9:  # an escaped key
        args.append(("Input \\u0044ims", json.dumps(dims)))
    if kind == 10:  # a byte that is not UTF-8 (extract_fields does not check UTF-8)
        args.append(("Module", '"\udcff"'))
    body = ", ".join(f'"{k}"{sep}{v}' for k, v in args)
    text = (
        f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 2, '
        f'"ts": {1000 + i}, "dur": 5, "args": {{{body}}}}}'
    )
    return name, text.encode("utf-8", "surrogateescape")


def _block(seed: int, n: int, pool: int | None = 40):
    """n events; with ``pool``, each one of ``pool`` kinds (its name, shapes, blanks) with its own
    External id and ts — as a training loop repeats its ops — else each drawn afresh."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        ext = rng.randrange(1 << 40) if rng.random() < 0.5 else i
        kind = random.Random(seed * 1000 + rng.randrange(pool)) if pool else rng
        name, raw = _event(kind, ext)
        if rng.random() < 0.1:  # a byte that is not UTF-8 in an op that otherwise repeats
            raw = raw.replace(b'"pid": 1', b'"pid": 1, "m": "\xff"')
        events.append((name, raw))
    for _, raw in events:  # every event is valid JSON, as extract_fields guarantees
        json.loads(raw.decode("latin-1"))  # (UTF-8 aside, which it does not check)
    data = b",\n".join(raw for _, raw in events)
    starts, ends, at = [], [], 0
    for _, raw in events:
        starts.append(at)
        ends.append(at + len(raw))
        at += len(raw) + 2
    names = sorted(set(NAMES))
    h = np.array([names.index(nm) + 11 for nm, _ in events], np.uint64)  # a name hash per name
    buf = np.frombuffer(data, np.uint8)
    return buf, np.array(starts, np.int64), np.array(ends, np.int64), h, names


def _works(buf, starts, ends, h, names, grouped: bool) -> list:
    cols = kineto._Columns()
    cols.op_names = {i + 11: nm for i, nm in enumerate(names)}
    rows = np.arange(len(starts), dtype=np.int64)
    idx = kineto._works(cols, buf, starts, ends, rows, h, grouped)
    return [cols.work[i] if i >= 0 else None for i in idx.tolist()]


@pytest.mark.parametrize(("seed", "pool"), [(0, 40), (1, 40), (2, 5), (3, 200), (4, None)])
def test_grouped_ops_get_the_work_each_op_alone_gets(seed, pool):
    buf, starts, ends, h, names = _block(seed, 400, pool)
    alone = _works(buf, starts, ends, h, names, grouped=False)
    grouped = _works(buf, starts, ends, h, names, grouped=True)
    assert grouped == alone
    assert sum(w is not None for w in alone) > 100  # the events do carry work


def test_the_kernel_leaves_odd_values_to_python_and_groups_the_repeats():
    buf, starts, ends, h, _ = _block(1, 400)
    rows = np.arange(len(starts), dtype=np.int64)
    keys, lens = js.key_table(js.SHAPE_KEYS)
    spans, hashes, sure = js.shape_keys(buf, starts, ends, rows, h, keys, lens)
    text = [bytes(buf[s:e]).decode("latin-1") for s, e in zip(starts, ends, strict=True)]
    for i, t in enumerate(text):
        if not t.isascii() or '"Input type": 7' in t.replace(" :", ":").replace(":\n\t ", ": "):
            assert not sure[i]
    assert sure.mean() > 0.3  # (a third of the kinds are odd on purpose)
    assert len(np.unique(hashes[sure])) < sure.sum() / 2  # repeats share a hash
    for i in np.flatnonzero(sure)[:50]:  # each span is its key's last value, as json reads it
        args = json.loads(text[i])["args"]  # (ASCII: sure)
        for k, key in enumerate(("Input Dims", "Input type", "Concrete Inputs")):
            a, b = spans[i, 2 * k], spans[i, 2 * k + 1]
            if key not in args:
                assert a == -1
            elif a >= 0:
                assert json.loads(bytes(buf[a:b])) == args[key]


def test_a_hash_collision_is_caught_not_trusted(monkeypatch):
    """Every hash forced equal: same_shapes must still split the ops by their bytes."""
    buf, starts, ends, h, names = _block(2, 300)
    alone = _works(buf, starts, ends, h, names, grouped=False)
    real = js.shape_keys

    def colliding(*a):
        spans, hashes, sure = real(*a)
        return spans, np.zeros_like(hashes), sure

    monkeypatch.setattr(kineto.js, "shape_keys", colliding)
    assert _works(buf, starts, ends, h, names, grouped=True) == alone


# ------------------------------------------------------------------ hostile shapes
_VALUES = st.one_of(
    st.integers(-3, 8),
    st.sampled_from([2**31, 2**48, 2**49, 2**62, 2**1100, True, 1.5, "3", None]),
    st.lists(st.integers(-2, 2**50), max_size=5),
)
_OPS = [
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::convolution",
    "aten::_convolution", "aten::convolution_backward", "aten::native_layer_norm", "aten::add",
    "aten::_scaled_dot_product_flash_attention", "aten::copy_",
]  # fmt: skip
_CONCRETE = st.sampled_from(
    ["", "[1]", "[0]", "[-1]", "[2, 2]", "[0, 0]", "[1,1,1]", "[99999999999999999999]", "[", "x"]
)


@settings(max_examples=3000, deadline=None)
@given(
    name=st.sampled_from(_OPS),
    dims=st.lists(st.one_of(st.lists(_VALUES, max_size=5), _VALUES), max_size=6),
    types=st.lists(st.sampled_from(["float", "c10::Half", "c10::BFloat16", "long", "", None])),
    concrete=st.one_of(st.none(), st.lists(st.one_of(_CONCRETE, st.integers()), max_size=8)),
)
def test_op_work_never_raises_on_recorded_shapes(name, dims, types, concrete):
    """A trace's shapes are input from outside: a stride of 0 divided by zero, a dimension of
    2**1100 overflowed a float, three Concrete Inputs failed to unpack — each took the whole
    analysis down (an internal error). Now the op's work is unknown, or finite."""
    w = op_work(name, dims, types, concrete)
    assert w is None or (np.isfinite(w.flops) and np.isfinite(w.bytes) and w.flops >= 0)


def test_a_convolution_with_stride_zero_is_read_as_work_unknown():
    assert op_work(
        "aten::convolution",
        [[1, 3, 8, 8], [4, 3, 3, 3]],
        ["float", "float"],
        ["", "", "", "[0]", "[0]", "[1]"],
    ) is None  # fmt: skip
    ok = op_work(
        "aten::convolution",
        [[1, 3, 8, 8], [4, 3, 3, 3]],
        ["float", "float"],
        ["", "", "", "[1]", "[0]", "[1]"],
    )  # fmt: skip
    assert ok is not None and ok.flops == 2.0 * (1 * 4 * 6 * 6) * 3 * 9


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from(
            [
                b'"Input Dims"',
                b'"Input type"',
                b'"Concrete Inputs"',
                b'"Input',
                b'"I',
                b'"C',
                b'"',
                b"x",
                b" ",
                b"\\",
                b"\xc3\xa9",
                b"[1, 2]",
                b"a" * 61,
                b'"Input Dim"',
            ]
        ),
        max_size=40,
    ),
    lead=st.integers(0, 130),
    trail=st.integers(0, 130),
)
def test_last_keys_finds_what_rfind_finds(pieces, lead, trail):
    """Each key's last occurrence within [s, e), wherever the span lies in its buffer (at its
    very start or end too, where the 64-byte blocks do not fit) and whatever cuts a key."""
    body = b"".join(pieces)
    data = b'"' * lead + body + b"I" * trail
    buf = np.frombuffer(data, np.uint8)
    keys, lens = js.key_table(js.SHAPE_KEYS)
    found, hit = np.empty(3, np.int64), np.empty(3, np.int64)
    for s, e in ((lead, lead + len(body)), (0, len(data)), (lead // 2, len(data) - trail // 3)):
        js._last_keys(buf, s, e, keys, lens, found, hit)
        assert found.tolist() == [data.rfind(k, s, e) for k in js.SHAPE_KEYS]
