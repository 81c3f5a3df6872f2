"""Importers on every shared trace, exact timestamps, taxonomy, bad inputs and fuzzing."""

from __future__ import annotations

import contextlib
import copy
import gzip
import itertools
import json
import sqlite3
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.trace.errors import TraceImportError
from engine.trace.kineto.kineto import read_kineto
from engine.trace.nsys.nsys import read_nsys
from engine.trace.segments import Kind, Klass, Provenance
from engine.trace.taxonomy import classify
from tests.paths import TRACES

KINETO = sorted((TRACES / "kineto").glob("*.json.gz"))
NSYS = TRACES / "nsys" / "a100_cloverleaf.sqlite"


def _events(path):
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


#: the device categories as Kineto wrote them until 2022 (libkineto output_json.cpp literals,
#: to 1679e50e): the names this independent parse counts them by
_SPELLED_BEFORE = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}


def _cat(e):
    """An event's category, today's spelling."""
    c = e.get("cat")
    return _SPELLED_BEFORE.get(c, c) if isinstance(c, str) else c


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_kineto_rows_match_an_independent_parse(path):
    tr = read_kineto(path)
    ev = _events(path)
    want = {
        c: sum(1 for e in ev if _cat(e) == c and e.get("ph") == "X")
        for c in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_profiler_range", "cuda_sync")
    }
    # MTIA device rows (on a stream): dma* copies, event_* (record / wait) syncs, others work
    mtia = [
        e
        for e in ev
        if e.get("cat") == "mtia_ccp_events" and e.get("ph") == "X" and "stream" in e["args"]
    ]
    of = {
        k: [e for e in mtia if (e["name"].startswith(p) if p else not e["name"].startswith(q))]
        for k, p, q in (("copy", "dma", ""), ("sync", "event", ""), ("work", "", ("dma", "event")))
    }
    s = tr.segments
    assert int((s.kind == Kind.KERNEL).sum()) == want["kernel"] + len(of["work"])
    assert int((s.kind == Kind.RANGE).sum()) == want["cuda_profiler_range"]  # not kernel time
    assert int((s.kind == Kind.MEMCPY).sum()) == want["gpu_memcpy"] + len(of["copy"])
    assert int((s.kind == Kind.MEMSET).sum()) == want["gpu_memset"]
    assert int((s.kind == Kind.SYNC).sum()) == want["cuda_sync"] + len(of["sync"])
    if mtia:  # a copy's bytes are its "size"; the rows keep their streams
        copies = s.kind == Kind.MEMCPY
        assert np.nansum(s.dram_bytes[copies]) == sum(e["args"]["size"] for e in of["copy"])
        assert sorted(set(s.stream.tolist())) == sorted({e["args"]["stream"] for e in mtia})
        assert tr.device_properties["platform"] == "mtia"
    # timestamps exact to the nanosecond: parse the JSON numbers as decimals
    with gzip.open(path) as f:
        exact = json.load(f, parse_float=Decimal)["traceEvents"]
    kts = sorted(
        int(Decimal(e["ts"]) * 1000)
        for e in exact
        if e.get("ph") == "X"
        and (
            _cat(e) in ("kernel", "cuda_profiler_range")
            or (
                e.get("cat") == "mtia_ccp_events"
                and "stream" in e["args"]
                and not e["name"].startswith(("dma", "event"))
            )
        )
    )
    timed = (s.kind == Kind.KERNEL) | (s.kind == Kind.RANGE)
    assert sorted(s.start_ns[timed].tolist()) == kts
    assert (s.end_ns >= s.start_ns).all()
    assert tr.device_properties["devices"]


def test_epoch_microsecond_timestamps_keep_their_nanoseconds(tmp_path):
    ev = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": "__TS__",
            "dur": 1.5,
            "args": {"stream": 7, "correlation": 1},
        }
    ]
    text = json.dumps({"traceEvents": ev}).replace('"__TS__"', "1712195495505582.988")
    p = tmp_path / "t.json"
    p.write_text(text)
    s = read_kineto(p).segments
    assert s.start_ns[0] == 1712195495505582988  # a float64 would give ...582988 ± 250 ns
    assert s.duration_ns[0] == 1500


def test_many_tiny_events_grow_the_scan_arrays(tmp_path):
    """Regression: the scanner's arrays were sized for >= 8 bytes per event and numba does not
    bounds-check, so a stream of `{}` elements wrote past them (segfault)."""
    kernel = {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": 5,
        "dur": 2,
        "args": {"stream": 7, "correlation": 1},
    }
    body = "{}," * 400_000 + json.dumps(kernel) + "," + "{}," * 400_000 + "{}"
    p = tmp_path / "tiny.json"
    p.write_text('{"traceEvents": [' + body + "]}")
    s = read_kineto(p).segments
    assert len(s) == 1 and s.start_ns[0] == 5000 and s.duration_ns[0] == 2000


def test_profiler_range_flops_count_fma_twice():
    tr = read_kineto(TRACES / "kineto" / "a100_cupti_counters.json.gz")
    ev = [
        e
        for e in _events(TRACES / "kineto" / "a100_cupti_counters.json.gz")
        if e.get("cat") == "cuda_profiler_range"
    ]
    a = ev[0]["args"]
    pre = "smsp__sass_thread_inst_executed_op_"
    want = sum(
        a.get(f"{pre}{p}{o}_pred_on.sum", 0) * (2 if o == "fma" else 1)
        for p in "hfd"
        for o in ("add", "mul", "fma")
    )
    assert tr.segments.flops[0] == want > 0


def test_amd_trace_has_no_geometry_and_float_timestamps():
    tr = read_kineto(TRACES / "kineto" / "mi250_rocm62_minitoy.json.gz")
    s = tr.segments
    assert len(s) and (s.grid == 0).all() and set(s.stream.tolist()) == {0}
    assert s.start_ns[0] == 4203669603454206  # "ts": 4203669603454.206


def test_nsys_rows_match_the_database():
    tr = read_nsys(NSYS)
    con = sqlite3.connect(NSYS)
    n_k = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    n_m = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()[0]
    s = tr.segments
    assert int((s.kind == Kind.KERNEL).sum()) == n_k
    assert int((s.kind == Kind.MEMCPY).sum()) == n_m
    first = con.execute(
        "select start, end from CUPTI_ACTIVITY_KIND_KERNEL order by start limit 1"
    ).fetchone()
    k = s.take(s.kind == Kind.KERNEL)
    assert (int(k.start_ns[0]), int(k.end_ns[0])) == first
    assert tr.device_properties["devices"][0]["name"] == "NVIDIA A100-SXM4-80GB"
    assert (k.grid > 0).all() and len(tr.host) > 0


@pytest.mark.parametrize(
    "name,klass",
    [
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(x)", Klass.GEMM),
        ("ampere_sgemm_128x64_nn", Klass.GEMM),
        ("Cijk_Ailk_Bljk_SB_MT64x64x8", Klass.GEMM),
        ("sm90_xmma_fprop_implicit_gemm_bf16", Klass.CONV),
        ("cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", Klass.CONV),
        ("void fft2d_c2r_32x32<float, false, false, 0u, false, false>(float*)", Klass.CONV),
        ("flash_fwd_kernel<Flash_fwd_kernel_traits>", Klass.ATTENTION),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
            Klass.ELEMENTWISE,
        ),
        ("void at::native::reduce_kernel<128, 4>", Klass.REDUCTION),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>", Klass.NORM),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", Klass.COMM),
        ("Memcpy HtoD (Pinned -> Device)", Klass.COPY),
        ("triton_poi_fused_add_cos_sin_0", Klass.ELEMENTWISE),
        ("triton_red_fused_sum_1", Klass.REDUCTION),
        ("mystery_kernel", Klass.OTHER),
    ],
)
def test_taxonomy(name, klass):
    assert classify(name) == klass


def test_taxonomy_classifies_most_kernels_of_every_trace():
    for path in KINETO:
        tr = read_kineto(path)
        s = tr.segments
        k = s.klass[s.kind == Kind.KERNEL]
        if tr.device_properties.get("platform") == "mtia":
            # MTIA's rows (pe_exe, merge, remote …) are no CUDA / ROCm kernel names: no class
            # is made up for them (their regimes stay unknown)
            assert len(k) and (k == Klass.OTHER).all(), path.name
        elif len(k) > 10:
            assert (k != Klass.OTHER).mean() > 0.6, path.name


def _bad_inputs(tmp_path):
    good = (TRACES / "kineto" / "a100_alexnet_2streams.json.gz").read_bytes()
    raw = gzip.decompress(good)
    cases = {
        "truncated.json.gz": (good[: len(good) // 2], "truncated gzip"),
        "corrupt.json.gz": (good[:100] + b"\x00" * 200 + good[300:], "corrupt gzip"),
        "invalid.json": (
            b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1,]',
            "invalid JSON",
        ),
        "noevents.json": (b'{"schemaVersion": 1, "other": []}', "no traceEvents"),
        "empty.json": (b"", "empty file"),
        # neither GPU rows nor CPU operators (a CPU-only trace with operators is read for
        # them: tests/analyze/test_cpu_trace.py)
        "no_activity.json": (
            json.dumps(
                {
                    "traceEvents": [
                        {"ph": "X", "cat": "python_function", "name": "f", "ts": 1, "dur": 2}
                    ]
                }
            ).encode(),
            "no GPU activity",
        ),
        "notjson.json": (b"hello world, not a trace", "not JSON"),
        "cut.json": (raw[: len(raw) * 2 // 3], "truncated"),
    }
    out = {}
    for name, (data, needle) in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        out[p] = needle
    db = tmp_path / "other.sqlite"
    con = sqlite3.connect(db)
    con.execute("create table t (x int)")
    con.commit()
    con.close()
    out[db] = "not an Nsight Systems export"
    return out


def test_bad_inputs_one_line_each_and_the_good_file_still_analysed(tmp_path, capsys):
    from gitm_tui.cli import main
    from gitm_tui.exit_codes import ExitCode

    bad = _bad_inputs(tmp_path)
    good = tmp_path / "good.json.gz"
    good.write_bytes((TRACES / "kineto" / "a100_event_sync_multistream.json.gz").read_bytes())
    missing = tmp_path / "missing.json"
    rc = main(["analyze", str(tmp_path), str(missing), "--json", "--no-write", "--workers", "1"])
    assert rc == ExitCode.INPUT
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert "Traceback" not in cap.err
    assert len(lines) == len(bad) + 1, cap.err
    for p, needle in bad.items():
        line = next(ln for ln in lines if str(p) in ln)
        assert needle in line, (p.name, line)
    assert any(str(missing) in ln and "no such file" in ln for ln in lines)
    analyses = json.loads(cap.out)
    assert [a["source"] for a in analyses] == [str(good)]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_fuzzed_real_traces_raise_only_the_importer_error(tmp_path, data):
    src = data.draw(st.sampled_from(KINETO[:3] + KINETO[4:]))
    raw = bytearray(gzip.decompress(src.read_bytes()))
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.sampled_from(list(b'{}[]",:0123456789.-e x\\')))
    cut = data.draw(st.integers(len(raw) // 2, len(raw)))
    p = tmp_path / "fuzz.json"
    p.write_bytes(bytes(raw[:cut]))
    try:
        tr = read_kineto(p)
    except TraceImportError:
        return
    s = tr.segments
    s.validate()
    assert np.isfinite(s.start_ns).all()


@pytest.mark.parametrize("body", [b"}", b"{}}", b"1, }", b'{"ts": 1e999}'])
def test_scanner_terminates_on_stray_closers_and_wild_numbers(tmp_path, body):
    """Regression: a '}' at array level once made the scanner spin forever (found by fuzzing)."""
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents": [' + body + b"]}")
    try:
        read_kineto(p)
    except TraceImportError as e:
        assert "t.json" in str(e)


def test_nsys_stream_synchronize_waits_for_its_own_stream(tmp_path):
    """The SYNCHRONIZATION table names the stream a cudaStreamSynchronize waited for; without
    it the replay would treat the call as a device-wide synchronize."""
    from engine.trace.nsys.nsys import read_nsys
    from engine.trace.trace import ApiKind

    db = tmp_path / "mini.sqlite"
    con = sqlite3.connect(db)
    con.executescript(
        """
        create table StringIds (id int, value text);
        insert into StringIds values (1, 'cudaLaunchKernel_v7000'), (2, 'k'),
            (3, 'cudaStreamSynchronize_v3020'), (4, 'cudaDeviceSynchronize_v3020');
        create table CUPTI_ACTIVITY_KIND_RUNTIME (start int, end int, correlationId int,
            nameId int);
        insert into CUPTI_ACTIVITY_KIND_RUNTIME values (0, 10, 1, 1), (20, 90, 2, 3),
            (100, 150, 3, 4);
        create table CUPTI_ACTIVITY_KIND_KERNEL (start int, end int, deviceId int,
            streamId int, correlationId int, demangledName int, shortName int);
        insert into CUPTI_ACTIVITY_KIND_KERNEL values (15, 80, 0, 7, 1, 2, 2);
        create table CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start int, end int, deviceId int,
            contextId int, streamId int, correlationId int, globalPid int, syncType int,
            eventId int);
        insert into CUPTI_ACTIVITY_KIND_SYNCHRONIZATION values
            (25, 85, 0, 1, 7, 2, 0, 3, 4294967295),
            (105, 145, 0, 1, 4294967295, 3, 0, 4, 4294967295);
        """
    )
    con.commit()
    con.close()
    h = read_nsys(db).host
    by_corr = {int(c): i for i, c in enumerate(h.correlation)}
    assert h.api[by_corr[2]] == ApiKind.SYNC and h.stream[by_corr[2]] == 7
    assert h.api[by_corr[3]] == ApiKind.SYNC and h.stream[by_corr[3]] == -1  # device-wide


def test_mutated_nsys_exports_raise_only_the_importer_error(tmp_path):
    """Wrong-typed, huge, negative and backwards values written into a real Nsight export:
    the importer either reads it (rows that end before they start are skipped and counted) or
    raises TraceImportError — never anything else."""
    import random
    import shutil

    from engine.trace.errors import TraceImportError
    from engine.trace.nsys.nsys import read_nsys

    con = sqlite3.connect(NSYS)
    tables = {
        t: [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
        if t.startswith("CUPTI_ACTIVITY_KIND_") or t in ("StringIds", "TARGET_INFO_GPU")
    }
    con.close()
    values = [None, -1, 0, 2**62, -(2**62), 1.5, "abc", "", b"\x00\xff", 1e300, 4294967295]
    rng = random.Random(7)
    p = tmp_path / "mutated.sqlite"
    skipped = 0
    for _ in range(40):
        shutil.copy(NSYS, p)
        con = sqlite3.connect(p)
        for _ in range(3):
            t = rng.choice(sorted(tables))
            c, v = rng.choice(tables[t]), rng.choice(values)
            with contextlib.suppress(sqlite3.DatabaseError):  # a typed column refusing it
                con.execute(
                    f"UPDATE {t} SET {c} = ? WHERE rowid IN "
                    f"(SELECT rowid FROM {t} ORDER BY random() LIMIT 3)",
                    (v,),
                )
        con.commit()
        con.close()
        try:
            tr = read_nsys(p)
        except TraceImportError:
            continue
        skipped += tr.device_properties["malformed_events"]
    assert skipped > 0  # some mutations made rows run backwards, and they were skipped


_ODD: list[object] = [
    None,
    -1,
    0,
    2**62,
    -(2**62),
    1.5,
    "abc",
    "",
    1e300,
    [],
    {},
    True,
    "0x1f",
    2**70,
]
_TOP = ["ts", "dur", "name", "cat", "ph", "pid", "tid", "args"]
_ARGS = ["stream", "correlation", "device", "grid", "block", "registers per thread",
         "shared memory", "est. achieved occupancy %", "bytes", "wait_on_stream",
         "wait_on_cuda_event_record_corr_id", "wait_on_cuda_event_id"]  # fmt: skip
_DEV = ["name", "numSms", "totalGlobalMem", "computeMajor"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_valid_json_with_odd_values_is_read_and_analysed(tmp_path, data):
    """Valid JSON whose fields hold the wrong types or absurd values (in events, their args,
    deviceProperties, distributedInfo): read and analysed, or the importer's error — nothing
    else escapes (found: non-dict distributedInfo / deviceProperties crashed analyze)."""
    from engine.analyze.compute import analyze_trace
    from engine.trace.errors import TraceImportError

    src = TRACES / "kineto" / "a100_event_sync_multistream.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = [e for e in doc["traceEvents"] if isinstance(e, dict)]
    for _ in range(data.draw(st.integers(1, 6))):
        e = data.draw(st.sampled_from(events))
        value = copy.deepcopy(data.draw(st.sampled_from(_ODD)))  # [] / {} are not shared
        if isinstance(e.get("args"), dict) and data.draw(st.booleans()):
            e["args"][data.draw(st.sampled_from(_ARGS))] = value
        else:
            e[data.draw(st.sampled_from(_TOP))] = value
    where = data.draw(st.sampled_from(["none", "deviceProperties", "distributedInfo", "device"]))
    if where == "device" and doc.get("deviceProperties"):
        doc["deviceProperties"][0][data.draw(st.sampled_from(_DEV))] = copy.deepcopy(
            data.draw(st.sampled_from(_ODD))
        )
    elif where != "none":
        doc[where] = copy.deepcopy(data.draw(st.sampled_from(_ODD)))
    p = tmp_path / "odd.json"
    p.write_text(json.dumps(doc))
    try:
        tr = read_kineto(p)
    except TraceImportError as e:
        assert str(e).strip() and "\n" not in str(e)  # the importer's one line
        return
    res = analyze_trace(tr)
    # every decoded row is labelled and counted once, whatever the odd values were
    assert res.analysis.segments == len(res.rows) == len(res.decoded.labels)


# ------------------------------------------------------------ strict parsing of the kept events
def _no_constants(name):
    raise ValueError(name)  # NaN / Infinity are not JSON


_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(max_codepoint=0x2FF), max_size=6)
)
_VALUE = st.recursive(
    _LEAF,
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3)
    ),
    max_leaves=10,
)
_EVENT = st.dictionaries(
    st.sampled_from(["name", "pid", "tid", "ts", "cat", "args", "x"]) | st.text(max_size=4),
    _VALUE | st.dictionaries(st.sampled_from(["stream", "correlation", "grid", "q"]), _VALUE),
    max_size=6,
)


def _extract(raw: bytes):
    from engine.trace.kineto import json_scan as js
    from engine.trace.kineto import kineto

    buf = np.frombuffer(raw, np.uint8)  # read-only, as the importer's chunks are
    return js.extract_fields(  # as a profiler range: its SASS counter keys are read too
        buf, np.zeros(1, np.int64), np.array([len(raw)]), np.array([js.CAT_PROFILER]),
        kineto._TOP, kineto._TOPLENS, kineto._ARGK, kineto._ARGLENS, kineto._PREFIX,
        kineto._SUFFIX,
    )  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    event=_EVENT,
    compact=st.booleans(),
    ascii_only=st.booleans(),
    edits=st.lists(
        st.tuples(
            st.floats(0, 1, exclude_max=True),
            st.sampled_from(["replace", "insert", "delete"]),
            st.sampled_from(list(b'{}[]",:\\/ \t\n0123456789.eE+-tfnrulsaxu\x01\x7f\xc3')),
        ),
        max_size=3,
    ),
)
def test_kept_events_are_parsed_exactly_as_strictly_as_json(event, compact, ascii_only, edits):
    """The kept events' parser (which replaced msgspec's validation) accepts an event exactly
    when Python's json does (NaN/Infinity refused), on valid events with random byte edits."""
    seps = (",", ":") if compact else (", ", ": ")
    raw = bytearray(json.dumps(event, separators=seps, ensure_ascii=ascii_only).encode())
    for where, op, byte in edits:
        i = int(where * len(raw))
        if op == "replace":
            raw[i] = byte
        elif op == "insert":
            raw.insert(i, byte)
        elif len(raw) > 2:
            del raw[i]
    raw = bytes(raw)
    if not (raw.startswith(b"{") and raw.endswith(b"}")):
        return  # the scanner hands the parser spans from '{' to its matching '}' only
    try:
        ref = json.loads(raw.decode("utf-8", "surrogateescape"), parse_constant=_no_constants)
        valid = isinstance(ref, dict)
    except ValueError:
        valid = False
    ints, ts, _, _, _, ns, ne, _, _, bad_row, _ = _extract(raw)
    assert (bad_row < 0) == valid, raw
    if valid and not edits:  # and the fields read are the json module's
        from engine.trace.kineto import json_scan as js

        for key, col in (("pid", js.F_PID), ("tid", js.F_TID)):
            v = event.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and 0 < abs(v) < 10**18:
                assert ints[0, col] == v
        args = event.get("args")
        if (
            isinstance(args, dict)
            and type(args.get("stream")) is int
            and abs(args["stream"]) < 10**18
        ):
            assert ints[0, js.F_STREAM] == args["stream"]
        if isinstance(event.get("name"), str):
            assert json.loads(b'"' + raw[ns[0] : ne[0]] + b'"') == event["name"]
        v = event.get("ts")
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 10**12:
            assert ts[0] == v * 1000


@pytest.mark.parametrize(
    "event, reason",
    [
        (b'{"cat": "kernel", "ts": 1, "dur": 2, "name": "k\x01"}', "invalid string"),
        (b'{"cat": "kernel", "ts": 1, "dur": 2, "args": {"stream": 07}}', "invalid number"),
        (b'{"cat": "kernel", "ts": 1, "dur": 2, "x": tru}', "invalid literal"),
        (b'{"cat": "kernel", "ts": 1, "dur": 2, "x" 1}', "expected ':'"),
        (b'{"cat": "kernel", "ts": 1, "dur": 2, "x": [1 2]}', "expected ','"),
        (b'{"cat": "kernel", "ts": 1, "dur": 2, "x": 1,}', "expected a key"),
        (b'{"cat": "kernel", "ts": 1, "dur": 2, "x": NaN}', "expected a value"),
        (
            b'{"cat": "kernel", "ts": 1, "dur": 2, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
            "nested more than",
        ),
    ],
    ids=["string", "number", "literal", "colon", "comma", "key", "value", "depth"],
)
def test_an_invalid_kept_event_names_the_problem_and_where(tmp_path, monkeypatch, event, reason):
    # the reader's nesting limit (engine.trace.limits, 512) raised: the parser's own is tested
    monkeypatch.setenv("GITM_MAX_JSON_DEPTH", "8192")
    good = (
        b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1, "a": '
        + (
            b"[" * 900 + b"]" * 900  # deep, but valid
        )
        + b"}"
    )
    p = tmp_path / "bad.json"
    head = b'{"traceEvents": [' + good + b",\n"
    p.write_bytes(head + event + b"]}")
    with pytest.raises(TraceImportError) as err:
        read_kineto(p)
    msg = str(err.value)
    assert "invalid JSON in traceEvents" in msg and reason in msg, msg
    at = int(msg.split("decompressed byte ")[1].split(")")[0].replace(",", ""))
    assert len(head) <= at < len(head) + len(event)


# ------------------------------------------------------------------------ the 64-byte scanner
_TEXT = st.text(st.sampled_from(list('{}[]",:\\ \n\tacktu\u00e9\u2603\x01')), max_size=80)
_CAT = st.sampled_from(
    ["kernel", "cuda_runtime", "gpu_memcpy", "cpu_op", "cat", "kernel2", "", "Kernel", "Operator"]
)  # (the last two: the 2021 spellings, json_scan.CATEGORY_ALIASES)
_MEMBER_VALUE = st.recursive(
    st.none() | st.integers() | st.floats(allow_nan=False) | _TEXT | _CAT,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_TEXT | _CAT, kids, max_size=3),
    max_leaves=8,
)
_ELEMENT = (
    st.dictionaries(
        st.sampled_from(["ph", "cat", "name", "args", "cat "]) | _TEXT, _MEMBER_VALUE, max_size=6
    )
    | _MEMBER_VALUE
)


@settings(max_examples=300, deadline=None)
@given(
    elements=st.lists(_ELEMENT, max_size=12),
    indent=st.sampled_from([None, 0, 2]),
    ascii_only=st.booleans(),
    cut=st.floats(0, 1),
    data=st.data(),
)
def test_scanner_finds_every_element_and_its_category_like_json(
    elements, indent, ascii_only, cut, data
):
    """scan_events (64 bytes at a time: quote, escape and bracket masks) against the json
    module: each object element's exact span and its top-level "cat" (kept categories only),
    the array's closing bracket; and scanning a prefix then the rest from ``resume``, as the
    importer does at chunk boundaries, finds the same elements."""
    from engine.trace.kineto import json_scan as js

    body = json.dumps(elements, indent=indent, ensure_ascii=ascii_only).encode()
    pad = data.draw(st.integers(0, 70))  # the array's position in the buffer varies
    raw = b" " * pad + body + b" " * data.draw(st.integers(0, 70))
    cats, catlens = js.category_table()

    def scan(buf_bytes, pos):
        buf = np.frombuffer(buf_bytes, np.uint8)
        s, e, c, _, resume, closed = js.scan_events(buf, pos, cats, catlens)
        return [(int(a), int(b), int(k)) for a, b, k in zip(s, e, c, strict=True)], resume, closed

    found, _, closed = scan(raw, pad + 1)
    assert closed == pad + len(body) - 1
    objects = [e for e in elements if isinstance(e, dict)]
    assert [json.loads(raw[a:b]) for a, b, _ in found] == objects
    for (_, _, code), obj in zip(found, objects, strict=True):
        cat = obj.get("cat")
        assert code == (js.CATEGORY_CODES.get(cat, -1) if isinstance(cat, str) else -1)
    # a prefix, then the rest from where the scanner says to resume
    k = pad + 1 + int(cut * (len(body) - 1))
    first, resume, closed = scan(raw[:k], pad + 1)
    if closed != -1:
        assert first == found
        return
    assert pad + 1 <= resume <= k
    rest, _, closed = scan(raw[resume:], 0)
    assert first + [(a + resume, b + resume, c) for a, b, c in rest] == found


@settings(max_examples=200, deadline=None)
@given(
    elements=st.lists(_ELEMENT, max_size=12), indent=st.sampled_from([None, 0, 2]), data=st.data()
)
def test_scanning_in_pieces_carries_the_state_and_scans_each_byte_once(elements, indent, data):
    """scan_stream over a buffer cut anywhere into pieces, its state carried from one piece to
    the next as the importer does (each piece scanned up to LOOKAHEAD from its end, the rest
    with the next piece): the same elements, categories and closing bracket as one scan of the
    whole, each byte scanned once. An element cut by a boundary is reported where it ends
    (first_end, first_code) and is its pieces joined."""
    from engine.trace.kineto import json_scan as js

    body = json.dumps(elements, indent=indent).encode()
    raw = body + b" " * data.draw(st.integers(0, 70))
    cats, catlens = js.category_table()
    s0, e0, c0, _, _, want_closed = js.scan_events(np.frombuffer(raw, np.uint8), 1, cats, catlens)
    want = [(int(a), int(b), int(c)) for a, b, c in zip(s0, e0, c0, strict=True)]
    cuts = sorted(data.draw(st.lists(st.integers(1, len(raw)), max_size=6)))
    state = js.new_scan_state()
    found: list[tuple[int, int, int]] = []
    scanned = 0
    pending = b""  # bytes not yet scanned
    at = 1  # file offset of pending[0]
    open_at = -1
    closed_at = -1
    bounds = [1, *cuts, len(raw)]
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        last = i == len(bounds) - 2
        buf_bytes = pending + raw[lo:hi]
        buf = np.frombuffer(buf_bytes, np.uint8)
        limit = len(buf) if last else len(buf) - js.LOOKAHEAD
        s, e, c, _, stop, _, closed, first_end, first_code = js.scan_stream(
            buf, 0, limit, state, cats, catlens, 1 << 30
        )
        scanned += max(stop, 0) if limit > 0 else 0
        if first_end >= 0:
            found.append((open_at, at + int(first_end), int(first_code)))
        found += [(at + int(a), at + int(b), int(k)) for a, b, k in zip(s, e, c, strict=True)]
        if closed >= 0:
            closed_at = at + int(closed)
            break
        if state[js.S_DEPTH] > 0 and state[js.S_EL_START] >= 0:
            open_at = at + int(state[js.S_EL_START])
        pending, at = buf_bytes[stop:], at + stop
    # objects only: a cut element that turned out to be an array is not one
    found = [f for f in found if raw[f[0] : f[0] + 1] == b"{"]
    assert found == want and closed_at == want_closed
    assert scanned <= len(raw) + 64


@pytest.mark.parametrize("chunk", [3, 100, 300, 997, 4096, 1 << 16])
@pytest.mark.parametrize("name", ["a100_event_sync_multistream", "mi250_rocm62_minitoy"])
def test_chunk_boundaries_anywhere_give_the_same_trace(monkeypatch, chunk, name):
    """The importer scans each inflated chunk in place, carrying the scanner's state to the
    next one (the last LOOKAHEAD bytes of a chunk are scanned with the head of the next, and
    chunks shorter than that are carried whole): any chunk size gives the same trace."""
    from engine.trace.kineto import kineto

    path = TRACES / "kineto" / f"{name}.json.gz"
    want = read_kineto(path)
    monkeypatch.setattr(kineto, "CHUNK", chunk)
    got = read_kineto(path)
    for field in ("start_ns", "end_ns", "stream", "kind", "correlation", "grid", "name"):
        assert np.array_equal(getattr(got.segments, field), getattr(want.segments, field))
    # names are interned in the order they first appear, however the file falls into blocks
    # (the first-run twin reads it as one block: engine.trace.kineto.json_twin)
    assert list(got.names) == list(want.names)
    assert np.array_equal(got.host.correlation, want.host.correlation)
    assert got.device_properties == want.device_properties


def test_ids_and_durations_past_int32_survive_the_narrowed_blocks(tmp_path):
    """The reader holds thread ids, correlation ids and durations as int32 while a block's
    values fit (memory): values that do not fit keep all their bits. The real training trace
    read as it is (every value fits) and with correlation ids and thread ids moved past 2**32
    and one kernel lasting 3 s must give the same columns, moved by the same amounts — and the
    same shape-derived FLOPs, which link kernels to ops by thread."""
    src = TRACES / "kineto" / "a100_training_3streams.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    ref = read_kineto(src)
    big = 1 << 33
    long_kernel = None
    for e in doc["traceEvents"]:
        if not isinstance(e, dict):
            continue
        args = e.get("args")
        if isinstance(args, dict) and isinstance(args.get("correlation"), int):
            args["correlation"] += big
        if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver") and isinstance(
            e.get("tid"), int
        ):
            e["tid"] += big
        if long_kernel is None and e.get("cat") == "kernel":
            long_kernel = e
            e["dur"] = 3_000_000  # µs: 3 s, past int32 nanoseconds
    p = tmp_path / "wide.json"
    p.write_text(json.dumps(doc))
    got = read_kineto(p)
    s, r = got.segments, ref.segments
    linked = r.correlation >= 0
    assert linked.any()
    np.testing.assert_array_equal(s.correlation[linked], r.correlation[linked] + big)
    np.testing.assert_array_equal(got.host.correlation, ref.host.correlation + big)
    np.testing.assert_array_equal(got.host.api_end_ns, ref.host.api_end_ns)
    three_s = s.end_ns - s.start_ns == 3_000_000_000
    assert three_s.sum() == 1
    same = ~three_s
    np.testing.assert_array_equal(s.end_ns[same], r.end_ns[same])
    derived = (r.provenance & Provenance.DERIVED) != 0
    assert derived.sum() > 100
    np.testing.assert_array_equal((s.provenance & Provenance.DERIVED) != 0, derived)
    np.testing.assert_array_equal(s.dtype, r.dtype)
    ok = same & derived
    np.testing.assert_array_equal(s.flops[ok], r.flops[ok])
