"""The JSON scanner's Python twin (engine.trace.kineto.json_twin), which a first run reads with
instead of compiling the scanner: on every input it reads the very trace the compiled reader
reads, or declines and leaves the file to it — never a different trace, never a different
error."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.analyze.ranks.synth_ranks import write_ranks
from engine.trace.errors import TraceImportError
from engine.trace.kineto import json_scan as js
from engine.trace.kineto import json_twin
from engine.trace.kineto.kineto import read_kineto
from engine.trace.limits import ReadLimits
from engine.trace.segments import COLUMNS
from engine.trace.trace import Trace
from tests.paths import TRACES
from tests.trace import hostile_inputs as hostile

KINETO = sorted((TRACES / "kineto").glob("*.json.gz"))


def assert_same(got: Trace, want: Trace) -> None:
    """Every column, name and property equal (NaN equal to NaN)."""
    for c in COLUMNS:
        a, b = getattr(got.segments, c), getattr(want.segments, c)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), c
    for f in dataclasses.fields(got.host):
        assert np.array_equal(getattr(got.host, f.name), getattr(want.host, f.name)), f.name
    assert got.names.names() == want.names.names()
    assert got.device_properties == want.device_properties


def both(path: Path) -> tuple[object, object, bool]:
    """(the compiled reader's trace or error line, the first-run reader's, whether the twin
    itself read the file)."""

    def read(interpreted: bool) -> object:
        try:
            return read_kineto(path, interpreted=interpreted)
        except TraceImportError as e:
            return str(e)

    try:
        took = json_twin.read(path, ReadLimits.from_env(path)) is not None
    except TraceImportError:
        took = False
    return read(False), read(True), took


def check(path: Path) -> bool:
    want, got, took = both(path)
    if isinstance(want, str):
        assert got == want  # the same error, from the compiled reader
    else:
        assert isinstance(got, Trace)
        assert_same(got, want)  # type: ignore[arg-type]
    return took


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_the_twin_reads_every_real_trace_as_the_compiled_reader_does(path):
    assert check(path)  # and it read them itself: none of them needs the compiled scanner


def test_the_twin_reads_generated_rank_traces_with_collectives_as_the_reader_does(tmp_path):
    for path in write_ranks(tmp_path, ranks=2, steps=3):
        assert check(path)


def test_hostile_inputs_get_the_compiled_readers_answer(tmp_path):
    """Bombs, deep nesting, duplicate traceEvents keys, truncated and trailing data, huge
    times: the same trace or the same one-line error as the compiled reader."""
    built = hostile.build_all(tmp_path / "corpus")
    for key, path in built.items():
        if key in ("fifo", "unreadable_dir", "odd_sqlite", "corrupt_sqlite"):
            continue  # not JSON: the format dispatch never hands them to the Kineto reader
        check(path)


def test_a_kept_event_with_an_escape_is_left_to_the_compiled_reader(tmp_path):
    evs = hostile.events()
    evs[1]["name"] = 'sgemm<"quoted">\\path'
    p = hostile.write(tmp_path / "esc.json", hostile.trace_bytes(evs))
    assert json_twin.read(p, ReadLimits()) is None
    assert not check(p)
    assert 'sgemm<"quoted">\\path' in list(read_kineto(p, interpreted=True).names)


def test_duplicate_keys_and_files_past_the_size_bound_are_declined(tmp_path, monkeypatch):
    text = hostile.trace_bytes().decode()
    dup = text.replace('"dur": 3,', '"dur": 3, "dur": "x",', 1)
    p = hostile.write(tmp_path / "dup.json", dup.encode())
    assert json_twin.read(p, ReadLimits()) is None
    assert not check(p)
    p = hostile.write(tmp_path / "plain.json", text.encode())
    assert json_twin.read(p, ReadLimits()) is not None
    monkeypatch.setattr(json_twin, "MAX_BYTES", len(text) - 1)
    assert json_twin.read(p, ReadLimits()) is None


def test_the_reader_says_when_the_twin_declines(tmp_path, monkeypatch):
    """A first run's reader calls ``declined`` before it compiles (the CLI says "compiling the
    trace reader"), and only then: a file the twin reads is not announced."""
    text = hostile.trace_bytes()
    p = hostile.write(tmp_path / "plain.json", text)
    said: list[bool] = []
    a = read_kineto(p, interpreted=True, declined=lambda: said.append(True))
    assert said == []
    monkeypatch.setattr(json_twin, "MAX_BYTES", len(text) - 1)
    b = read_kineto(p, interpreted=True, declined=lambda: said.append(True))
    assert said == [True] and len(a.segments) == len(b.segments)


# found by an adversarial review of the twin (each read differently before its fix)
_REVIEWED = {
    # numba's float ** int squares and multiplies: 1e23 is not Python's 10.0 ** 23
    "flops_1e23": b'{"traceEvents":[{"cat":"cuda_profiler_range","name":"r","ts":1,"dur":1,'
    b'"args":{"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum":1e23}}]}',
    "flops_1.5e-24": b'{"traceEvents":[{"cat":"cuda_profiler_range","name":"r","ts":1,"dur":1,'
    b'"args":{"smsp__sass_thread_inst_executed_op_dfma_pred_on.sum":1.5e-24}}]}',
    "ts_long_mantissa": b'{"traceEvents":[{"cat":"kernel","name":"k","ts":'
    + b"5"
    + b"0" * 37
    + b'e-23,"dur":1}]}',
    # the metadata nests past GITM_MAX_JSON_DEPTH, before or after the array
    "deep_prefix": b'{"m":' + b"[" * 512 + b"]" * 512 + b',"traceEvents":[]}',
    "deep_suffix": b'{"traceEvents":[],"m":' + b"[" * 512 + b"]" * 512 + b"}",
    "deep_prefix_ok": b'{"m":' + b"[" * 500 + b"]" * 500 + b',"traceEvents":[]}',
    # an integer past Python's 4,300 digits: a one-line error (it was a ValueError traceback)
    "dup_then_bigint": b'{"traceEvents":[],"traceEvents":[],"x":' + b"1" * 5000 + b"}",
    "bigint_metadata": b'{"x":' + b"1" * 5000 + b',"traceEvents":[]}',
    # one element of tiny arrays: ~20x its bytes as Python objects (declined past 1 MB)
    "dense_arrays": b'{"traceEvents":[[' + b"[]," * 400_000 + b"[]]]}",
    # small elements of tiny arrays are read one at a time: no large element, read here
    "small_dense_elements": b'{"traceEvents":[' + b"[]," * 20_000 + b"[]]}",
}


@pytest.mark.parametrize("name", list(_REVIEWED))
def test_inputs_found_by_review_read_the_same_both_ways(tmp_path, name):
    p = tmp_path / f"{name}.json"
    p.write_bytes(_REVIEWED[name])
    took = check(p)
    if name == "dense_arrays":
        assert not took
    if name == "small_dense_elements":
        assert took
    if name == "bigint_metadata":
        with pytest.raises(TraceImportError, match="4,300 digits"):
            read_kineto(p)


@pytest.mark.parametrize("exp", [-400, -308, -24, -23, -1, 0, 1, 22, 23, 24, 100, 308, 400])
def test_powers_of_ten_are_numbas(exp):
    from numba import njit

    @njit
    def power(e: int) -> float:
        return 10.0**e

    assert json_twin._pow10(exp) == power(exp)


_NUMBER = st.from_regex(
    r"-?(0|[1-9][0-9]{0,39})(\.[0-9]{1,20})?([eE][+-]?(0|[1-9][0-9]{0,3}))?", fullmatch=True
)


@settings(max_examples=1500, deadline=None)
@given(_NUMBER)
def test_numbers_are_read_by_the_kernels_rules(text):
    """ts / dur in exact ns, integer fields and float fields: the twin's value of every JSON
    number spelling is the compiled parsers' (a review's 100k-spelling fuzz found exponents
    off before powers of ten were computed as numba computes them)."""
    v = json.loads(text, parse_int=json_twin._Int, parse_float=json_twin._Float)
    buf = np.frombuffer((text + ",").encode(), np.uint8)
    e = len(buf)
    assert json_twin._us_to_ns(v) == js._parse_us_to_ns(buf, 0, e)
    assert json_twin._int_of(v) == js._number_end(buf, 0, e)[1]
    a, b = js._parse_float(buf, 0, e), json_twin._float_of(v)
    assert a == b or (a != a and b != b)


def test_reading_errors_are_the_compiled_readers_whatever_comes_first(tmp_path):
    """A truncated or trailing-garbage gzip: the compiled reader reports what it meets first
    (here: not a trace at all), so the twin leaves the file to it."""
    z = gzip.compress(b"x" * 2000, mtime=0)
    (tmp_path / "trunc.json.gz").write_bytes(z[: len(z) // 2])
    (tmp_path / "trail.json.gz").write_bytes(gzip.compress(b"[]", mtime=0) + b"junk")
    bad = hostile.trace_bytes().replace(b'"dur": 3', b'"dur": 01', 1)
    zb = gzip.compress(bad, mtime=0)
    (tmp_path / "bad_then_trunc.json.gz").write_bytes(zb[: len(zb) - 40])
    for name in ("trunc.json.gz", "trail.json.gz", "bad_then_trunc.json.gz"):
        p = tmp_path / name
        assert json_twin.read(p, ReadLimits()) is None
        check(p)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80).filter(lambda b: b"\\" not in b))
def test_the_name_hash_is_the_scanners(raw):
    buf = np.frombuffer(b"x" + raw + b"x", np.uint8)
    h, esc = js._name_hash(buf, 1, 1 + len(raw))
    assert not esc
    assert json_twin.name_hash(raw) == int(h)


# ------------------------------------------------------------------------ differential fuzzing
_ODD: list[object] = [None, -1, 0, -0.0, 2**62, -(2**62), 1.5, -2.5, 1e300, 1e-7, 12.3456789, 1.5e3, "abc",
        "", "12", "-7", "0x1f", "0X", " 5", "1e3", "12abc", [], {}, True, False, 2**70,
        10**18, 10**18 - 1, -(10**18), [8, 16, 5], [1.5, 2], ["4", 2], [2**40, 2**40],
        [-1, 3], [[2], 3], 1234567890123.4567, 5965023945364.5396, 0.0005, 0.0004999]  # fmt: skip
_TOP = ["ts", "dur", "name", "cat", "ph", "pid", "tid", "args", "x"]
_ARGS = ["stream", "correlation", "device", "grid", "block", "registers per thread",
         "shared memory", "est. achieved occupancy %", "bytes", "wait_on_stream",
         "wait_on_cuda_event_record_corr_id", "wait_on_cuda_event_id", "cat", "name",
         "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
         "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum"]  # fmt: skip
_CATS = ["kernel", "cuda_runtime", "cuda_sync", "cpu_op", "user_annotation", "gpu_memcpy",
         "cuda_profiler_range", "python_function", "Kernel", "kernel "]  # fmt: skip


def _base_events() -> list[dict[str, object]]:
    out = []
    for name in ("a100_event_sync_multistream", "a100_cupti_counters"):
        with gzip.open(TRACES / "kineto" / f"{name}.json.gz") as f:
            out += [e for e in json.load(f)["traceEvents"] if isinstance(e, dict)][:60]
    return out


_BASE = _base_events()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_odd_values_edits_and_layouts_read_the_same_both_ways(tmp_path, data):
    """Real events with odd values (types, magnitudes, exponents, hex strings), odd
    categories, extra elements, raw byte edits and other layouts: the first-run reader gives
    the compiled reader's trace or error, always."""
    evs: list[object] = copy.deepcopy(_BASE)
    for _ in range(data.draw(st.integers(0, 8))):
        e = data.draw(st.sampled_from(evs))
        assert isinstance(e, dict)
        value = copy.deepcopy(data.draw(st.sampled_from(_ODD + _CATS)))
        if isinstance(e.get("args"), dict) and data.draw(st.booleans()):
            e["args"][data.draw(st.sampled_from(_ARGS))] = value
        else:
            e[data.draw(st.sampled_from(_TOP))] = value
    if data.draw(st.booleans()):
        evs.insert(
            data.draw(st.integers(0, len(evs))), data.draw(st.sampled_from([1, "x", [], {}]))
        )
    indent = data.draw(st.sampled_from([None, 0, 2]))
    seps = data.draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]))
    meta = {"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA A100-SXM4-80GB"}]}
    doc = {**meta, "traceEvents": evs} if data.draw(st.booleans()) else {"traceEvents": evs, **meta}
    raw = bytearray(json.dumps(doc, indent=indent, separators=seps).encode())
    for _ in range(data.draw(st.integers(0, 2))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i : i + 1] = data.draw(
            st.sampled_from([b"", b" ", b",", b"}", b"\\", b'"', b"1", b"e"])
        )
    if data.draw(st.booleans()):
        raw = bytearray(b"\xef\xbb\xbf") + raw
    check(hostile.write(tmp_path / "odd.json", bytes(raw), gz=data.draw(st.booleans())))


def test_the_fuzzed_documents_are_mostly_read_by_the_twin_itself(tmp_path):
    """The differential test above is worth something only if the twin reads most plain
    variants itself: odd values without byte edits are read, not declined."""
    took = 0
    rng = np.random.default_rng(7)
    for k in range(40):
        evs = copy.deepcopy(_BASE)
        for _ in range(4):
            e = evs[int(rng.integers(len(evs)))]
            key = _ARGS[int(rng.integers(len(_ARGS)))]
            value = copy.deepcopy(_ODD[int(rng.integers(len(_ODD)))])
            if isinstance(e.get("args"), dict):
                e["args"][key] = value
        p = hostile.write(tmp_path / f"v{k}.json", json.dumps({"traceEvents": evs}).encode())
        took += check(p)
    assert took >= 30
