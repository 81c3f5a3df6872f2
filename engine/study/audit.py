"""The EESM audit (issue #6): do-operators × pipeline variants on a corpus, written to a ledger
that ``verify`` re-runs independently.

Metrics (defined in paper/EESM_GPU_TELEMETRY.md):

* **PCS** (phase-consistency score) of a variant under an operator δ: the share of the
  original table's *confident* rows (not in M_deg under the unperturbed decode) whose label
  under f(do(δ)u) equals their label under f(u), rows aligned by the operator's map. 1 = the
  labels do not move; the raw baseline and ablations are scored the same way (a variant with
  no κ gate counts every row as confident).
* **decoding equivalence** under K random re-interleavings (δ_reord with K seeds): the share of
  them under which *every* label is unchanged, and the mean per-row agreement.
* **accuracy** against the simulator's ground truth (calibrated corpus only), after δ.

Means carry a 95% interval over seeds (normal approximation, 1.96·sd/√n).
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from engine.eesm.pipeline import EesmModel, Variant, decode
from engine.study import interventions as ops
from engine.trace.segments import Segments

LEDGER_VERSION = 1
VARIANTS = (Variant.FULL, Variant.NO_TSTREAM, Variant.NO_BOUND, Variant.NO_KAPPA, Variant.RAW)
OPERATORS: dict[str, dict[str, float]] = {
    "jit": {"scale_ns": 2000.0},
    "reord": {"scale_ns": 50_000.0},
    "fuse": {"prob": 0.5},
}
CALIBRATED = ("hft-lob", "af2", "kitti")
CALIBRATED_ITERATIONS = 40
EQUIVALENCE_REORDERS = 20


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Measure(_M):
    mean: float
    ci95: float
    n: int


class CorpusItem(_M):
    name: str
    kind: Literal["simulated", "trace"]
    source: str
    generated_by: str
    synthetic: bool
    seeds: list[int]
    rows: int
    sha256: str


class InterventionRow(_M):
    corpus: str
    operator: str
    variant: str
    pcs: Measure
    coverage: Measure  # share of rows counted (confident under the unperturbed decode)
    accuracy: Measure | None = None


class EquivalenceRow(_M):
    corpus: str
    variant: str
    reorders: int
    identical: Measure  # share of re-interleavings with every label unchanged
    agreement: Measure


class GeometryRow(_M):
    """κ geometry of the full pipeline for one kernel class or decoded regime."""

    corpus: str
    group: str  # class | regime
    key: str
    rows: int
    kappa_p10: float | None
    kappa_p50: float | None
    kappa_p90: float | None
    m_id: float
    m_deg: float
    undetermined: float
    accuracy_m_id: float | None = None
    accuracy_m_deg: float | None = None


#: the most seeds an audit runs (and a ledger may ask a verification to run): a ledger is input,
#: and `seeds: 10**9` had --verify working for hours
MAX_SEEDS = 100


class AuditLedger(_M):
    ledger_version: int
    created: str
    corpus_spec: list[str]  # "calibrated" or trace paths, as given
    seeds: int = Field(ge=1, le=MAX_SEEDS)
    operators: dict[str, dict[str, float]]
    corpus: list[CorpusItem]
    results: list[InterventionRow]
    equivalence: list[EquivalenceRow]
    kappa_geometry: list[GeometryRow] = []
    versions: dict[str, str]


def _measure(xs: list[float]) -> Measure:
    a = np.asarray([x for x in xs if x == x], float)
    if not len(a):
        return Measure(mean=float("nan"), ci95=float("nan"), n=0)
    ci = float(1.96 * a.std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else 0.0
    return Measure(mean=round(float(a.mean()), 12), ci95=round(ci, 12), n=len(a))


def _digest(seg: Segments) -> str:
    h = hashlib.sha256()
    for k, v in seg.columns().items():
        h.update(k.encode())
        h.update(np.ascontiguousarray(v).tobytes())
    return h.hexdigest()


Run = tuple[Segments, "np.ndarray | None"]


def _load_corpus(spec: list[str], seeds: int) -> list[tuple[CorpusItem, list[Run]]]:
    """[(item, [(segments, truth or None) per seed])]."""
    out: list[tuple[CorpusItem, list[Run]]] = []
    for s in spec:
        if s == "calibrated":
            from engine.device.simulator import simulate

            for w in CALIBRATED:
                runs = [
                    simulate(w, CALIBRATED_ITERATIONS, seed=seed)[0] for seed in range(1, seeds + 1)
                ]
                segs: list[Run] = [(b.segments, b.truth) for b in runs]
                h = hashlib.sha256("".join(_digest(x[0]) for x in segs).encode()).hexdigest()
                out.append(
                    (
                        CorpusItem(
                            name=w,
                            kind="simulated",
                            source="manifests/h100_telemetry.json + manifests/workloads/"
                            + w
                            + ".json",
                            generated_by=f"engine.device.simulator.simulate({w!r}, {CALIBRATED_ITERATIONS}, seed) for each seed",
                            synthetic=True,
                            seeds=list(range(1, seeds + 1)),
                            rows=sum(len(x[0]) for x in segs),
                            sha256=h,
                        ),
                        segs,
                    )
                )
        else:
            from engine.trace.read import read_trace

            p = Path(s)
            tr = read_trace(p)
            seg = tr.segments
            file_hash = hashlib.sha256(p.read_bytes()).hexdigest()
            out.append(
                (
                    CorpusItem(
                        name=p.name,
                        kind="trace",
                        source=str(p),
                        generated_by="recorded by its producer (a real GPU)",
                        synthetic=False,
                        seeds=list(range(1, seeds + 1)),
                        rows=len(seg),
                        sha256=file_hash,
                    ),
                    [(seg, None)] * seeds,
                )
            )
    return out


def _confident(d: Any, variant: Variant) -> np.ndarray:
    if variant in (Variant.NO_KAPPA, Variant.RAW):
        return np.ones(len(d.labels), bool)
    return ~d.degenerate


def run_audit(spec: list[str], seeds: int = 5, model: EesmModel | None = None) -> AuditLedger:
    """Run every operator × variant on the corpus (module docstring)."""
    m = model or EesmModel.build()
    corpus = _load_corpus(spec, seeds)
    results: list[InterventionRow] = []
    equivalence: list[EquivalenceRow] = []
    geometry: list[GeometryRow] = []
    for item, runs in corpus:
        for variant in VARIANTS:
            base = [decode(seg, m, variant) for seg, _ in runs]
            if variant == Variant.FULL:
                geometry += _geometry(item.name, runs, base, m.params.kappa.k_max)
            for op_name, params in OPERATORS.items():
                pcs, cov, acc = [], [], []
                for k, ((seg, truth), b) in enumerate(zip(runs, base, strict=True)):
                    seed = item.seeds[k]
                    if op_name == "jit":
                        s2, align = ops.jitter(seg, params["scale_ns"], seed)
                    elif op_name == "reord":
                        s2, align = ops.reorder(seg, params["scale_ns"], seed)
                    else:
                        s2, align = ops.fuse(seg, params["prob"], seed)
                    d2 = decode(s2, m, variant)
                    conf = _confident(b, variant)
                    same = d2.labels[align] == b.labels
                    pcs.append(float(same[conf].mean()) if conf.any() else float("nan"))
                    cov.append(float(conf.mean()))
                    if truth is not None:
                        t2 = (
                            ops.truth_after_fuse(truth, align, len(s2))
                            if op_name == "fuse"
                            else truth[np.argsort(align)]
                        )
                        acc.append(float((d2.labels == t2).mean()))
                results.append(
                    InterventionRow(
                        corpus=item.name,
                        operator=op_name,
                        variant=variant.value,
                        pcs=_measure(pcs),
                        coverage=_measure(cov),
                        accuracy=_measure(acc) if acc else None,
                    )
                )
            ident, agree = [], []
            for (seg, _), b in zip(runs, base, strict=True):
                for r in range(EQUIVALENCE_REORDERS):
                    s2, align = ops.reorder(seg, OPERATORS["reord"]["scale_ns"], 10_000 + r)
                    d2 = decode(s2, m, variant)
                    same = d2.labels[align] == b.labels
                    ident.append(float(same.all()))
                    agree.append(float(same.mean()))
            equivalence.append(
                EquivalenceRow(
                    corpus=item.name,
                    variant=variant.value,
                    reorders=EQUIVALENCE_REORDERS,
                    identical=_measure(ident),
                    agreement=_measure(agree),
                )
            )
    return AuditLedger(
        ledger_version=LEDGER_VERSION,
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        corpus_spec=list(spec),
        seeds=seeds,
        operators=OPERATORS,
        corpus=[c for c, _ in corpus],
        results=results,
        equivalence=equivalence,
        kappa_geometry=geometry,
        versions=_versions(),
    )


def _geometry(name: str, runs: list[Run], decoded: list[Any], kmax: float) -> list[GeometryRow]:
    """Per kernel class and decoded regime: κ quantiles, M_id / M_deg / undetermined shares and,
    with ground truth, label accuracy inside M_id and M_deg."""
    from engine.regimes import Regime
    from engine.trace.segments import Klass

    k = np.concatenate([d.kappa.astype(float) for d in decoded])
    lab = np.concatenate([d.labels for d in decoded])
    cls = np.concatenate([seg.klass for seg, _ in runs])
    has_truth = all(t is not None for _, t in runs)
    truth = np.concatenate([t for _, t in runs]) if has_truth else None
    out = []
    groups = [("class", c.name, cls == c) for c in Klass] + [
        ("regime", r.name, lab == r) for r in Regime
    ]
    for group, key, members in groups:
        if not members.any():
            continue
        kk = k[members]
        fin = np.isfinite(kk)
        deg = fin & (kk > kmax)
        idd = fin & ~deg
        vals = kk[fin]
        q10, q50, q90 = (
            round(float(np.percentile(vals, p)), 6) if len(vals) else None for p in (10, 50, 90)
        )
        ok = (lab[members] == truth[members]) if truth is not None else None
        out.append(
            GeometryRow(
                corpus=name,
                group=group,
                key=key,
                rows=int(members.sum()),
                kappa_p10=q10,
                kappa_p50=q50,
                kappa_p90=q90,
                m_id=round(float(idd.mean()), 6),
                m_deg=round(float(deg.mean()), 6),
                undetermined=round(float((~fin).mean()), 6),
                accuracy_m_id=round(float(ok[idd].mean()), 6)
                if ok is not None and idd.any()
                else None,
                accuracy_m_deg=round(float(ok[deg].mean()), 6)
                if ok is not None and deg.any()
                else None,
            )
        )
    return out


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("gitm-tui", "numpy", "numba"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "source tree"
    return out


def write_ledger(ledger: AuditLedger, path: Path) -> None:
    from engine.store.runs import atomic_write_text

    atomic_write_text(path, ledger.model_dump_json(indent=1))


def read_ledger(path: Path) -> AuditLedger:
    return AuditLedger.model_validate_json(path.read_text(encoding="utf-8"))


def _flatten(x: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(x, dict):
        out: dict[str, Any] = {}
        for k, v in x.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else k))
        return out
    if isinstance(x, list):
        out = {}
        for i, v in enumerate(x):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: x}


def claims_problem(ledger: AuditLedger) -> str | None:
    """Why the ledger cannot be the record of its own audit, said before any of its work is
    redone (None: it can). The work of a verify is set by the ledger's ``corpus_spec``: a
    forged one of 1,000 entries held ``audit --verify`` for ~10 silent minutes, while the
    corpus it recorded had one item. An audit lists each source once, and its corpus holds
    one item per source (three for ``calibrated``)."""
    spec = ledger.corpus_spec
    if len(set(spec)) != len(spec):
        return "corpus_spec names a source more than once (an audit lists each once)"
    want = sum(len(CALIBRATED) if s == "calibrated" else 1 for s in spec)
    if want != len(ledger.corpus):
        return (
            f"corpus_spec ({len(spec):,} source(s): {want:,} corpus item(s)) does not match the "
            f"corpus it records ({len(ledger.corpus):,} item(s))"
        )
    return None


def verify(ledger: AuditLedger, model: EesmModel | None = None) -> list[str]:
    """Re-run the ledger's audit independently; return the differences (empty: verified).
    Creation time and versions are not compared; everything measured is, exactly."""
    fresh = run_audit(ledger.corpus_spec, ledger.seeds, model)
    keep = (
        "corpus",
        "results",
        "equivalence",
        "kappa_geometry",
        "operators",
        "seeds",
        "ledger_version",
    )
    a = _flatten(json.loads(ledger.model_dump_json(include=set(keep))))
    b = _flatten(json.loads(fresh.model_dump_json(include=set(keep))))
    diffs = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k, "<absent>"), b.get(k, "<absent>")
        same = va == vb or (
            isinstance(va, float) and isinstance(vb, float) and va != va and vb != vb
        )
        if not same:
            diffs.append(f"{k}: ledger {va!r}, fresh run {vb!r}")
    return diffs
