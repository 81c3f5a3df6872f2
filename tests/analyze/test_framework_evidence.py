"""Advice names a framework's API only where the trace shows that framework (issue 50: a C/MPI
program's Nsight export — CloverLeaf, kernels named clover::… — got PyTorch-only advice:
torch.profiler(record_shapes=True), a doubled batch, PyTorch's caching allocator)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from engine.analyze.run import load_trace
from engine.trace.framework import framework_of
from engine.trace.segments import Kind
from tests.paths import ROOT

TRACES = ROOT / "tests" / "data" / "traces"
CLOVERLEAF = TRACES / "nsys" / "a100_cloverleaf.sqlite"


def test_the_framework_is_read_from_the_trace():
    assert framework_of(load_trace(str(CLOVERLEAF))) is None  # the program's own kernels
    kineto = TRACES / "kineto" / "a100_training_3streams.json.gz"
    assert framework_of(load_trace(str(kineto))) == "PyTorch"  # a PyTorch profiler trace


def test_framework_signs_in_kernel_names():
    from engine.trace.trace import Trace

    t = load_trace(str(CLOVERLEAF))
    k = np.flatnonzero(t.segments.kind == Kind.KERNEL)[0]
    for name, fw in (
        ("void at::native::vectorized_elementwise_kernel<4>", "PyTorch"),
        ("loop_add_fusion_3", "XLA"),
        ("input_reduce_fusion", "XLA"),
        ("void Eigen::internal::EigenMetaKernel<>", "TensorFlow"),
        ("void clover::par_ranged2d_kernel<PdV_kernel>", None),
        ("diffusion_step", None),  # a word ending in "fusion"-like text is not XLA's
    ):
        names = list(t.names)
        names[int(t.segments.name[k])] = name
        other = Trace(
            segments=t.segments, names=type(t.names)(names) if not isinstance(t.names, list)
            else names, host=t.host, source=t.source, device_properties={"format": "nsys"},
        )  # fmt: skip
        assert framework_of(other) == fw or (fw is None and framework_of(other) is None), name


def test_a_c_mpi_programs_nsight_export_gets_no_pytorch_advice():
    p = subprocess.run(
        [sys.executable, "-m", "gitm_tui", "analyze", str(CLOVERLEAF), "--json", "--no-write"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    one = doc[0] if isinstance(doc, list) else doc
    text = json.dumps(one)
    assert "record_shapes" not in text and "torch.profiler" not in text
    levers = {e["lever"]: e for e in one["interventions"]}
    assert levers["batch_size"]["status"] == "not_judged"
    assert "no machine-learning framework" in levers["batch_size"]["basis"]
    assert levers["expandable_segments"]["status"] == "not_applicable"
