"""Issue 47: where the op that launched a kernel is known, it decides the kernel's class
(engine/trace/kineto/derive.py → taxonomy.decide_by_op); auxiliary kernels keep theirs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from engine.trace.kineto.kineto import read_kineto
from engine.trace.segments import Kind, Klass
from engine.trace.taxonomy import klass_of_name
from tests.paths import TRACES

#: a name no rule of the taxonomy reads: only the launching op can say what the kernel is
UNNAMED = "k_0001"


def _kernel_classes(path: Path) -> dict[str, set[str]]:
    t = read_kineto(path)
    s, names = t.segments, t.names.names()
    out: dict[str, set[str]] = {}
    for n, k in zip(s.name[s.kind == Kind.KERNEL], s.klass[s.kind == Kind.KERNEL], strict=True):
        out.setdefault(names[n], set()).add(Klass(int(k)).name)
    return out


def test_a_kernel_with_an_unreadable_name_launched_by_aten_mm_is_a_gemm(tmp_path):
    """SYNTHETIC rows: one aten::mm (BF16 [512, 1024] x [1024, 2048], shapes recorded)
    launches a kernel whose name says nothing and a split-K reduction; one aten::convolution
    launches an unreadable kernel too. The first is GEMM and the last CONV by their ops; the
    reduction keeps its own class (REDUCTION), as an elementwise kernel of the same op would."""
    assert klass_of_name(UNNAMED) == Klass.OTHER
    aux = "void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>(cublasSplitKParams<float>)"
    assert klass_of_name(aux) not in (Klass.GEMM, Klass.OTHER)
    ev: list[dict] = []

    def op(name, ts, dur, dims, types, kernels, concrete=None):
        args = {"Input Dims": dims, "Input type": types}
        if concrete:
            args["Concrete Inputs"] = concrete
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
                   "dur": dur, "args": args})  # fmt: skip
        for i, kname in enumerate(kernels):
            corr = len(ev) + 100
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                       "tid": 1, "ts": ts + 1 + i, "dur": 1, "args": {"correlation": corr}})  # fmt: skip
            ev.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7,
                       "ts": ts + 10 + 20 * i, "dur": 15,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})  # fmt: skip

    bf = ["c10::BFloat16", "c10::BFloat16"]
    op("aten::mm", 0, 10, [[512, 1024], [1024, 2048]], bf, [UNNAMED, aux])
    op("aten::convolution", 100, 10,
       [[8, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], []],
       ["c10::BFloat16", "c10::BFloat16", "", "", "", "", "", "", ""], ["k_0002"],
       ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"])  # fmt: skip
    p = tmp_path / "synthetic_class_by_op.json"
    dev = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    p.write_text(json.dumps({"traceEvents": ev, "deviceProperties": dev}))
    got = _kernel_classes(p)
    assert got[UNNAMED] == {"GEMM"}, got
    assert got["k_0002"] == {"CONV"}, got
    assert got[aux] == {Klass(int(klass_of_name(aux))).name}, got


def test_on_a_real_trace_the_launching_op_names_the_gemms(tmp_path):
    """The H100 Qwen1.5-0.5B TraceLens trace with its sm90 GEMM kernels renamed to a name no
    rule reads (SYNTHETIC rename of a real trace; everything else byte for byte): the
    kernels whose launching aten::mm/addmm has recorded shapes are still GEMM, by their op."""
    src = TRACES / "kineto" / "h100_hf_qwen15_05b_chat.json.gz"
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    renamed = 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("sm90_xmma_gemm"):
            e["name"] = UNNAMED
            renamed += 1
    assert renamed > 100
    p = tmp_path / "h100_qwen_renamed.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(doc, f)
    t = read_kineto(p)
    s = t.segments
    mine = (s.kind == Kind.KERNEL) & (s.name == t.names.names().index(UNNAMED))
    derived = mine & np.isfinite(s.flops)
    assert derived.sum() >= 0.6 * mine.sum(), (int(derived.sum()), int(mine.sum()))  # 168 of 241
    assert (s.klass[derived] == Klass.GEMM).all()
    # rows whose op recorded no shapes have only their name: OTHER, not a guess
    assert (s.klass[mine & ~derived] == Klass.OTHER).all()


def test_the_evidence_note_says_how_many_classes_the_op_decided(tmp_path):
    """The basis names its evidence: the renamed H100 trace's analysis says how many kernels'
    class their launching op set or confirmed and how many it moved from the name's (the
    renamed sm90 GEMMs: OTHER by name, GEMM by op); the untouched trace moves none."""
    from engine.analyze.compute import analyze_trace

    src = TRACES / "kineto" / "h100_hf_qwen15_05b_chat.json.gz"
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("sm90_xmma_gemm"):
            e["name"] = UNNAMED
    p = tmp_path / "renamed.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(doc, f)
    renamed = read_kineto(p)
    moved = renamed.device_properties["class_by_op"]["changed"]
    assert moved >= 100  # the 168 derived rows of the renamed GEMMs (see above)
    note = analyze_trace(renamed).analysis.evidence.note
    assert f"{moved:,} of them moved from the name's class" in note
    plain = read_kineto(src).device_properties["class_by_op"]
    assert plain["decided"] > 0 and plain["changed"] == 0
