"""Levers on kernels: elementwise fusion, TF32 / BF16 precision, channels_last, cuDNN
autotune, flash attention."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from engine.levers.base import (
    FUSABLE,
    SOFTMAX,
    Lever,
    is_layout_transform,
    kernel_floor,
    launch_runs,
    merge_rows,
    merge_runs,
    program_runs,
    same_name_run,
    stem,
)
from engine.levers.model import Applicability, Edit, Observation
from engine.levers.priors import (
    AUTOTUNE,
    FLASH,
    FUSED_SIDE_INPUT_SHARE,
    MEM_EFF,
    PEAK_RATIO,
    SIDE_INPUT,
)
from engine.manifest import KernelOp
from engine.regimes import Regime
from engine.schedule.dag import ReplayDag
from engine.trace.precision import Basis, row_precisions
from engine.trace.segments import Kind, Klass
from engine.trace.taxonomy import library

if TYPE_CHECKING:  # (annotations only: the simulator is not imported to analyze a trace)
    from engine.workloads.sim import SimState


class ElementwiseFusion(Lever):
    id = "elementwise_fusion"
    fuses = True
    in_use_as = ("fused_kernels",)
    priors = (SIDE_INPUT,)

    @staticmethod
    def _op_ok(o: KernelOp) -> bool:
        return o.klass in ("ELEMENTWISE", "NORM") and o.role == "compute"

    def sites(self, state: SimState) -> Applicability:
        runs = list(program_runs(state.program(), self._op_ok))
        if not runs:
            return Applicability(False, "no adjacent elementwise/norm kernels to fuse")
        return Applicability(True, f"{len(runs)} chains of adjacent elementwise/norm kernels")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl = kernel_floor(obs)

        ok = np.isin(dag.d_klass, FUSABLE) & (dag.d_kind == Kind.KERNEL)
        runs = [
            run
            for run in launch_runs(dag, ok)
            if not same_name_run(dag, run)  # a per-parameter loop: the fused optimizer's job
        ]
        if runs:
            side = obs.prior(SIDE_INPUT)
            work, total, most, flops = _run_sums(dag, runs, fl)
            fused = np.where(total != 0, most + side * (total - most), 0.0)
            # bytes not measured (a profiler trace without counters): members of equal
            # traffic, so the same side-input share applies to the k - 1 others
            k = np.fromiter(map(len, runs), np.float64, len(runs))
            ratio = (1.0 + side * (k - 1)) / k
            np.divide(fused, total, out=ratio, where=total > 0)
            merge_runs(dag, runs, fl + work * ratio, flops, fused)
        n = sum(len(r) for r in runs)
        return Edit(dag, n, f"{n} kernels in {len(runs)} adjacent elementwise/norm chains fused")

    def apply(self, state: SimState) -> SimState:
        ops = state.program()
        out: list[Any] = []
        i = 0
        for s, e in program_runs(ops, self._op_ok):
            out.extend(ops[i:s])
            run = ops[s:e]
            b = [o.bytes for o in run]
            fused = max(b) + FUSED_SIDE_INPUT_SHARE * (sum(b) - max(b))
            out.append(
                run[0].model_copy(
                    update={
                        "name": f"triton_poi_fused_{len(run)}_{stem(run[0].name)}",
                        "flops": sum(o.flops for o in run),
                        "bytes": fused,
                        "grid": max(o.grid for o in run),
                        "latency_ns": max(o.latency_ns for o in run),
                        "repeat": 1,
                    }
                )
            )
            i = e
        out.extend(ops[i:])
        return state.with_program(out)


def _run_sums(
    dag: ReplayDag, runs: list[list[int]], floor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per run of device rows: the time above the kernel floor, the bytes (unmeasured: 0), the
    largest member's bytes and the FLOPs (NaN: 0), for all runs at once — a loop over ~1,700
    chains of a long trace's window took 80 ms a replay. (np.add.reduceat associates the sums
    differently from np.sum on each run: the last bit may differ.)"""
    rows = np.fromiter(itertools.chain.from_iterable(runs), np.int64)
    at = np.zeros(len(runs), np.int64)
    np.cumsum(np.fromiter(map(len, runs[:-1]), np.int64, len(runs) - 1), out=at[1:])
    b = np.nan_to_num(dag.d_bytes[rows])
    f = dag.d_flops[rows]
    work = np.add.reduceat(np.maximum(0.0, dag.d_dur[rows] - floor), at)
    flops = np.add.reduceat(np.where(np.isnan(f), 0.0, f), at)  # np.nansum's: an inf stays
    return work, np.add.reduceat(b, at), np.maximum.reduceat(b, at), flops


class _Precision(Lever):
    """Shared by TF32 and BF16: rescale compute time of matmul/conv rows by peak ratios. A row's
    precision is engine.trace.precision's (the launching op's recorded input type first, then
    the kernel name's type tokens): the same reading "already in use" makes, so a row it counts
    as already TF32/BF16 is never a source here; rows of unknown precision are left alone."""

    target: ClassVar[str]
    sources: ClassVar[tuple[str, ...]]
    bytes_factor: ClassVar[float]
    new_prefix: ClassVar[str]
    priors = (PEAK_RATIO,)

    def sites(self, state: SimState) -> Applicability:
        ops = [
            o
            for o in state.program()
            if isinstance(o, KernelOp) and o.klass in ("GEMM", "CONV") and o.dtype in self.sources
        ]
        if not ops:
            return Applicability(False, f"no {'/'.join(self.sources).upper()} matmuls or convs")
        return Applicability(
            True, f"{len(ops)} {'/'.join(self.sources).upper()} matmul/conv launches"
        )

    def source_rows(self, dag: ReplayDag) -> tuple[np.ndarray, list[str], str]:
        """(live matmul/conv rows this lever acts on, their precisions, what the evidence was)."""
        cand = np.flatnonzero(dag.d_live & np.isin(dag.d_klass, (Klass.GEMM, Klass.CONV)))
        codes = dag.d_dtype[cand] if dag.d_dtype is not None else np.zeros(len(cand), np.uint8)
        prec, basis = row_precisions(codes, [dag.d_name[d] for d in cand.tolist()])
        mine = np.fromiter((p in self.sources for p in prec), np.bool_, len(prec))
        picked = [p for p, m in zip(prec, mine.tolist(), strict=True) if m]
        by = Counter(
            "the launching op's recorded input type"
            if b in (Basis.RECORDED, Basis.RECORDED_AND_NAME)
            else "the kernel name"
            for b, m in zip(basis, mine.tolist(), strict=True)
            if m
        )
        left = Counter(p or "unknown" for p, m in zip(prec, mine.tolist(), strict=True) if not m)
        parts = [", ".join(f"{c:,} by {w}" for w, c in by.most_common())] if by else []
        if left:
            parts.append(
                "left alone: "
                + ", ".join(
                    f"{c:,} {'of unknown precision' if p == 'unknown' else 'already ' + p.upper()}"
                    for p, c in left.most_common()
                )
            )
        return cand[mine], picked, "; ".join(parts)

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        # the rows are matmul/conv: their FP32 runs at the matrix rate where the datasheet gives
        # one apart from the vector rate (CDNA: MI250X FP32 matrix 2x vector)
        fl, peaks = kernel_floor(obs), {**obs.hw.peak_flops, **obs.hw.matrix_peak_flops}
        realised, mem_eff = obs.prior(PEAK_RATIO), obs.prior(MEM_EFF)
        rows, src, evidence = self.source_rows(dag)
        n = len(rows)
        if n:  # all rows at once; the same arithmetic, in the same order, as one by one
            src_peak = np.array([peaks[s] for s in src])
            work = np.maximum(0.0, dag.d_dur[rows] - fl)
            b = dag.d_bytes[rows]
            nbytes = np.where(np.isnan(b), 0.0, b) * self.bytes_factor  # unknown bytes: none
            mem = nbytes / (obs.hw.hbm_bandwidth_Bps * mem_eff) * 1e9
            comp = work * src_peak / peaks[self.target] / realised
            traffic = np.isin(dag.d_regime[rows], (Regime.MEMORY, Regime.IDLE))
            # memory- or launch-bound: traffic decides
            comp = np.where(traffic, work * self.bytes_factor, comp)
            dag.d_dur[rows] = fl + np.maximum(comp, mem)
            dag.d_bytes[rows] = nbytes
        what = (
            f"{n} {'/'.join(self.sources).upper()} matmul/conv rows at {self.target.upper()} peak"
        )
        # the evidence after "; ": the first screen shows a basis's first clause, report.md all
        return Edit(dag, n, f"{what}; precision {evidence}" if evidence else what)

    def apply(self, state: SimState) -> SimState:
        out = []
        for o in state.program():
            if isinstance(o, KernelOp) and o.klass in ("GEMM", "CONV") and o.dtype in self.sources:
                name = re.sub(
                    r"(cutlass_\d+_)?(simt_sgemm|tensorop_s1688gemm|sm90_xmma_gemm_tf32f32_tf32f32_f32)",
                    self.new_prefix,
                    o.name,
                )
                o = o.model_copy(
                    update={
                        "dtype": self.target,
                        "bytes": o.bytes * self.bytes_factor,
                        "name": name,
                    }
                )
            out.append(o)
        return state.with_program(out)


class Tf32Matmul(_Precision):
    id = "tf32_matmul"
    precision_target = "tf32"
    target = "tf32"
    sources = ("fp32",)
    bytes_factor = 1.0
    new_prefix = "sm90_xmma_gemm_tf32f32_tf32f32_f32"


class Bf16Autocast(_Precision):
    id = "bf16_autocast"
    precision_target = "bf16"
    target = "bf16"
    sources = ("fp32", "tf32")
    bytes_factor = 0.5
    new_prefix = "sm90_xmma_gemm_bf16bf16_bf16f32_f32"


class ChannelsLast(Lever):
    id = "channels_last"

    def sites(self, state: SimState) -> Applicability:
        n = sum(isinstance(o, KernelOp) and o.role == "layout_transform" for o in state.program())
        if not n:
            return Applicability(False, "no NCHW/NHWC layout transforms in the step")
        return Applicability(True, f"{n} layout-transform kernels around convolutions")

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        rows = [
            d for d in np.flatnonzero(dag.d_live).tolist() if is_layout_transform(dag.d_name[d])
        ]
        dag.remove_launched(np.asarray(rows, np.int64))
        return Edit(dag, len(rows), f"{len(rows)} layout-transform kernels removed")

    def apply(self, state: SimState) -> SimState:
        return state.with_program(
            [
                o
                for o in state.program()
                if not (isinstance(o, KernelOp) and o.role == "layout_transform")
            ]
        )


#: libraries whose convolutions cudnn.benchmark tunes: cuDNN, and MIOpen (PyTorch's ROCm build
#: maps torch.backends.cudnn.benchmark to MIOpen's exhaustive find)
TUNED_BY_BENCHMARK = ("cudnn", "miopen")
#: kernels MIOpen / cuDNN dispatch to under other names (CK, Tensile GEMMs, xmma kernels with no
#: library mark): theirs where the program is PyTorch's, whose convolutions go through them
DISPATCHED = ("", "ck", "tensile", "cublas")


class CudnnAutotune(Lever):
    """cuDNN autotuning: acts only on convolutions cuDNN (or MIOpen) chose an algorithm for —
    by the kernel's library (engine.trace.taxonomy.library), or, in a PyTorch program (ATen
    kernels ran), on the convolution kernels cuDNN/MIOpen dispatch under other names. Not
    applicable, with the reason, where no such convolution ran (a standalone CUTLASS or Triton
    convolution, ATen's own depthwise kernels) or the program is a TensorRT engine (its tactics
    were chosen when the engine was built)."""

    id = "cudnn_autotune"
    priors = (AUTOTUNE,)

    def sites(self, state: SimState) -> Applicability:
        n = sum(isinstance(o, KernelOp) and o.algo == "heuristic" for o in state.program())
        if not n:
            return Applicability(False, "no convolutions on cuDNN's heuristic algorithm")
        return Applicability(True, f"{n} convolution launches on the heuristic algorithm")

    @staticmethod
    def _evidence(dag: ReplayDag) -> tuple[np.ndarray, np.ndarray, Counter[str], bool, bool]:
        """(live conv kernel rows, which of them cuDNN/MIOpen tuned, their libraries, a
        PyTorch program, a TensorRT engine)."""
        kern = dag.d_live & (dag.d_kind == Kind.KERNEL)
        libs = {n: library(n) for n in {dag.d_name[d] for d in np.flatnonzero(kern).tolist()}}
        pytorch = "aten" in libs.values()
        tensorrt = "tensorrt" in libs.values() and not pytorch
        conv = np.flatnonzero(kern & (dag.d_klass == Klass.CONV))
        conv_libs = [libs[dag.d_name[d]] for d in conv.tolist()]
        tuned = np.fromiter(
            (
                # (a TensorRT engine's tactics carry cuDNN-like names: none is cuDNN's choice)
                # (an unmarked conv kernel — xmma fprop/dgrad — outside a TensorRT engine is
                # cuDNN's runtime kernels in practice: the simulated workloads' convolutions too)
                not tensorrt
                and (lib in TUNED_BY_BENCHMARK or lib == "" or (pytorch and lib in DISPATCHED))
                for lib in conv_libs
            ),
            np.bool_,
            len(conv_libs),
        )
        return (
            conv,
            tuned,
            Counter(lib or "no library mark" for lib in conv_libs),
            pytorch,
            tensorrt,
        )

    def not_applicable(self, obs: Observation) -> tuple[str, int] | None:
        conv, tuned, libs, _, tensorrt = self._evidence(obs.dag)
        if not len(conv) or tuned.any():
            return None
        if tensorrt:
            why = (
                f"not applicable: a TensorRT engine ran the {len(conv):,} convolution kernels "
                "(kernels TensorRT names, no PyTorch kernel): their tactics were chosen when the "
                "engine was built, and cudnn.benchmark does not change them"
            )
        else:
            kinds = ", ".join(f"{c:,} {lib}" for lib, c in libs.most_common())
            why = (
                f"not applicable: no cuDNN (or MIOpen) convolution ran — the {len(conv):,} "
                f"convolution kernels are {kinds}; cudnn.benchmark tunes only the algorithm "
                "cuDNN picks"
            )
        return why, len(conv)

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl = kernel_floor(obs)
        conv, tuned, _, _, _ = self._evidence(dag)
        sel = conv[tuned]
        sel = sel[dag.d_regime[sel] == Regime.COMPUTE]
        speedup = obs.prior(AUTOTUNE)
        dag.d_dur[sel] = fl + (dag.d_dur[sel] - fl) / speedup
        return Edit(
            dag,
            len(sel),
            f"{len(sel)} compute-bound cuDNN/MIOpen conv rows at {speedup:g}x (prior; whether "
            "cudnn.benchmark is already on is not in a trace: if it is, this gain is had "
            "already)",
            prior_based=True,
        )

    def apply(self, state: SimState) -> SimState:
        return state.with_program(
            [
                o.model_copy(update={"algo": "tuned"})
                if isinstance(o, KernelOp) and o.algo == "heuristic"
                else o
                for o in state.program()
            ]
        )


class SdpaFlash(Lever):
    id = "sdpa_flash"
    priors = (FLASH,)

    def sites(self, state: SimState) -> Applicability:
        groups = {
            o.group
            for o in state.program()
            if isinstance(o, KernelOp) and o.role == "attention_math"
        }
        if not groups:
            return Applicability(False, "no unfused (math) attention")
        return Applicability(
            True, f"unfused attention: {', '.join(sorted(g or '?' for g in groups))}"
        )

    def transform(self, obs: Observation) -> Edit:
        dag = obs.dag.copy()
        fl = kernel_floor(obs)
        peak = obs.hw.peak_flops["bf16"]
        flash, mem_eff = obs.prior(FLASH), obs.prior(MEM_EFF)

        ok = (dag.d_kind == Kind.KERNEL) & np.isin(
            dag.d_klass, (Klass.GEMM, Klass.REDUCTION, Klass.ATTENTION)
        )
        host_of = dag.host_of()
        n = 0
        for run in launch_runs(dag, ok, 3):
            for i in range(len(run) - 2):
                a, sm, b = run[i : i + 3]
                if not (dag.d_live[a] and dag.d_live[sm] and dag.d_live[b]):
                    continue
                if int(dag.d_klass[a]) == Klass.REDUCTION or int(dag.d_klass[b]) == Klass.REDUCTION:
                    continue
                if not SOFTMAX.search(dag.d_name[sm]):
                    continue
                flops = float(np.nansum(dag.d_flops[[a, b]]))
                score = float(np.nan_to_num(dag.d_bytes[sm])) / 2
                nbytes = max(0.0, float(np.nansum(dag.d_bytes[[a, b]])) - 2 * score)
                t = (
                    max(
                        flops / (peak * flash),
                        nbytes / (obs.hw.hbm_bandwidth_Bps * mem_eff),
                    )
                    * 1e9
                )
                merge_rows(dag, [a, sm, b], fl + t, flops, nbytes, host_of)
                dag.d_klass[a] = Klass.ATTENTION
                n += 1
        return Edit(dag, 3 * n, f"{n} GEMM→softmax→GEMM attentions fused", prior_based=False)

    def apply(self, state: SimState) -> SimState:
        ops = state.program()
        out: list[Any] = []
        i = 0
        for s, e in program_runs(ops, lambda o: o.role == "attention_math"):
            out.extend(ops[i:s])
            run = ops[s:e]
            flash = next(
                (o.flash_bytes for o in run if o.flash_bytes), sum(o.bytes for o in run) / 10
            )
            out.append(
                KernelOp(
                    op="kernel",
                    name=f"flash_fwd_kernel<{run[0].group or 'attn'}>",
                    klass="ATTENTION",
                    stream=run[0].stream,
                    flops=sum(o.flops for o in run if o.klass == "GEMM"),
                    bytes=flash,
                    grid=max(o.grid for o in run),
                    block=128,
                )
            )
            i = e
        out.extend(ops[i:])
        return state.with_program(out)
