"""The provenance report (DESIGN §5–6): claim → evidence → intervention → predicted vs measured
delta, with rollbacks and, when the target was missed, the diagnostic.

``write(claims, provenance)`` renders Markdown from plain data (DESIGN §9); ``write_run`` builds
that data from an optimize run and writes report.md and report.json atomically in its run dir.
``from_journal`` rebuilds the intervention history from the journal alone, so a report written
after a crash recovery agrees with the journal by construction.
"""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.store.journal import check, read
from engine.store.runs import atomic_write_text
from engine.text import clean, map_strings, md_escape

if TYPE_CHECKING:
    from engine.optimizer.contract import AnyLoop

#: the most characters of one string in report.md (a note holds a program's output, a lever
#: name the user's flag): about one screen of text
_REPORT_CHARS = 2000


def _pct(x: float | None) -> str:
    return "—" if x is None or x != x else f"{x:+.1%}"


def _clean(text: str) -> str:
    return clean(text, _REPORT_CHARS)


def _cell(x: Any) -> str:
    """A cleaned value in Markdown prose or a table cell: its markup characters escaped
    (engine.text.md_escape: a device name or $USER holding ``<script>`` or an image link stays
    text)."""
    return md_escape(str(x))


def _code(x: Any) -> str:
    """A cleaned value in a Markdown code span: a backtick would end the span."""
    return str(x).replace("`", "'")


def _result_lines(res: dict[str, Any]) -> list[str]:
    """The result's figures: baseline and final, the noise gate, the method, correctness."""
    out = []
    met = res.get("target_met")
    kept = res.get("kept") or []
    base = res.get("baseline_ns_per_sample")
    if not isinstance(base, int | float) or not math.isfinite(base):  # two modes: no one value
        seen = (res.get("noise") or {}).get("unsettled") or "the A/A gave no value"
        out.append(f"- Baseline: none — {_clean(str(seen))}.")
        what = final = ""
    elif "metric" in res:  # a command workload: the user's metric, not time per sample
        what = (
            f"metric {res['baseline_ns_per_sample']:.4g} (goal {res['metric']['goal']}, read with "
            f"`{_code(res['metric']['pattern'])}`)"
        )
        final = f"{res['final_ns_per_sample']:.4g}"
    else:
        per = res.get("per", "sample")  # a launched script is timed per step
        what = f"{res['baseline_ns_per_sample'] / 1e3:.1f} µs per {per}"
        final = f"{res['final_ns_per_sample'] / 1e3:.1f} µs"
    if kept:
        lo, hi = res.get("gain_low"), res.get("gain_high")
        iv = f" [{lo:+.1%} … {hi:+.1%}]" if lo is not None and hi is not None else ""
        how = (
            f"re-measured against the baseline in {res['gain_pairs']} interleaved pairs"
            + (
                f", extended from {res['final_extended_from']} because their interval "
                "straddled the target (a second look: the level holds approximately)"
                if res.get("final_extended_from")
                else ""
            )
            if res.get("gain_pairs")
            else "the trials' estimates combined (no final re-measure)"
        )
        out.append(f"- Baseline {what}; final ({how}): {final} → **{res['gain']:+.1%}**{iv}.")
    elif what:
        out.append(
            f"- Baseline {what}. Nothing was kept, so the final configuration is the baseline "
            "and no gain is claimed."
        )
    else:
        out.append("- Nothing was kept, so the final configuration is the baseline.")
    if res.get("final_choice") and "metric" in res:
        out.append(
            "- Final choices: "
            + ", ".join(f"{k}={v}" for k, v in res["final_choice"].items())
            + "."
        )
    if res.get("note"):
        out.append(f"- Note: {res['note']}")
    if res.get("correctness"):
        out.append(f"- Correctness: {res['correctness']}")
    out.append(
        f"- Target {res['target']:.0%}: **{res.get('verdict', 'met' if met else 'not met')}**. "
        f"Kept: {', '.join(kept) or 'nothing'}."
    )
    warm = res.get("warm_up") or {}
    if warm:
        out.append(
            f"- Warm-up across launches: {_clean(str(warm.get('text', '')))} — "
            f"{warm.get('warmup_launches', 0)} of the {warm.get('launches', 0)} baseline launches "
            "before the A/A's pairs were left out as warm-up."
        )
    noise = res.get("noise") or {}
    aa = noise.get("aa") or {}
    if aa.get("gain") is not None:
        out.append(
            f"- Noise (A/A, the unchanged workload against itself in {aa.get('pairs', 0)} "
            f"interleaved pairs): {aa['gain']:+.1%} "
            + (  # one pair has no interval: never "[+0.0% … +100.0%]"
                f"[{aa['low']:+.1%} … {aa['high']:+.1%}]"
                if aa.get("low") is not None and aa.get("high") is not None and aa["pairs"] > 1
                else "(no interval)"
            )
            + f"; each lever got {res.get('pairs_per_lever', 0)} pairs, "
            + (  # a floor the A/A did not resolve (a diagnosed run) is unknown, never "nan"
                f"an interval of about ±{res['noise_floor']:.1%}."
                if math.isfinite(res["noise_floor"])
                else "an interval the A/A did not resolve (unknown)."
            )
            + ("" if noise.get("measurable", True) else f" {noise.get('diagnosis', '')}.")
        )
    else:
        delta = res.get("aa_delta")
        aa_text = (
            f"{delta:.2%}"
            if isinstance(delta, int | float) and math.isfinite(delta)
            else "not measured (no pair of blocks)"
        )
        out.append(
            f"- Noise: A/A {aa_text}; intervals of about "
            + (
                f"±{res.get('noise_floor', 0):.2%}."
                if math.isfinite(res.get("noise_floor", 0))
                else "unknown (the A/A did not resolve them)."
            )
        )
    if res.get("method"):
        out.append(f"- Method: {res['method']}. {res.get('measurements', 0)} measurements in all.")
    return out


def _gate_lines(g: dict[str, Any]) -> list[str]:
    """The qualification gate's section (it leads the report): its decision, the noise and
    reach halves with their figures, each applicable lever's ceiling, and — for a diagnosis —
    what would make the target measurable or reachable."""
    forced = bool(g.get("forced"))
    title = g.get("decision", "?") + (", overridden by --force" if forced else "")
    out = [f"## Qualification gate: {title}", ""]
    why = str(g.get("line", "")).split(" — ", 1)[-1]
    if forced:
        out += [f"> **The gate said diagnose ({_cell(why)}); overridden by --force**: the loop "
                "went on and tried levers anyway.", ""]  # fmt: skip
    else:
        out += [f"**{_cell(g.get('line', ''))}**", ""]
    out.append(f"- Noise: {_cell(g.get('noise', ''))}.")
    out.append(f"- Reach: {_cell(g.get('reach', ''))}.")
    ceilings = [c for c in g.get("ceilings") or [] if isinstance(c, dict)]
    if ceilings:
        out += ["", "| lever | ceiling (share of the baseline step) | prior interval | basis |",
                "|---|---:|---|---|"]  # fmt: skip
        for c in sorted(ceilings, key=lambda c: -(c.get("high") or -1.0)):
            hi, lo = c.get("high"), c.get("low")
            ceil = (
                "unknown"
                if hi is None
                else f"≤ {hi:.1%}" + (" per sample" if c.get("per_sample") else "")
            )
            prior = (
                f"{lo:.1%} … {hi:.1%} over {_cell(c['prior'])}"
                if c.get("prior") and lo is not None and hi is not None
                else _cell(c.get("prior") or "—")
            )
            out.append(
                f"| {_cell(c.get('lever', '?'))} | {ceil} | {prior} | {_cell(c.get('basis', ''))} |"
            )
    if g.get("helps"):
        out += ["", "What would make it measurable or reachable:"]
        out += [f"- {_cell(h)}" for h in g["helps"]]
    out.append("")
    return out


def write(
    claims: list[dict[str, Any]],
    provenance: dict[str, Any],
    diffs: dict[str, str] | None = None,
) -> str:
    """Render the report. ``claims``: one dict per intervention (see ``write_run``);
    ``provenance``: run facts, result, noise floor, invariants, hypotheses, diagnostic, the
    qualification gate's decision. Every string in both goes through engine.text.clean first:
    notes carry a program's output, names come from traces, and none of it may put an escape
    sequence into the file. ``diffs``: per kept intervention, what changed in the trace
    (Markdown already made safe: engine.analyze.diff.diff_model.TraceDiff.markdown)."""
    claims = map_strings(claims, _clean)
    p = map_strings(provenance, _clean)
    diffs = diffs or {}
    res = p.get("result", {})
    lines = [f"# gitm-tui optimize report — {p.get('workload', '?')}", ""]
    # older runs' provenance has neither key: only a command workload was real then
    black_box = not p.get("traced", p.get("workload") != "command")
    simulated = p.get("simulated", not black_box)
    if simulated:
        where = " (simulated: no GPU was used)"
    else:
        where = " (a real process, measured for real" + ("; no device trace)" if black_box else ")")
    # a report rebuilt from a dead run's journal knows only what the journal kept: what it
    # does not know is not printed as 0 ("at least 0 interleaved pairs")
    said = [f"budget {p['budget_s']:g} s" if "budget_s" in p else "budget not recorded"]
    if "target" in p:
        said.append(
            f"target {p['target']:.0%} "
            + ("better on its metric" if "metric" in res else "less time per sample")
        )
    said.append(f"approval policy `{p['approve']}`" if "approve" in p else "approvals not recorded")
    if "seed" in p:
        said.append(f"seed {p['seed']}")
    if p.get("repeats"):
        said.append(f"at least {p['repeats']} interleaved pairs per comparison")
    lines.append(
        f"Run `{_code(p.get('run_id', '?'))}` on **{_cell(p.get('device', '?'))}**"
        + where
        + ", "
        + ", ".join(said)
        + "."
    )
    lines.append("")
    if p.get("journal_broken"):
        lines += [
            f"> **Journal not intact.** {p.get('journal', '')}. This report is built only from "
            "the records that pass the check; the others are not believed.",
            "",
        ]
    if p.get("died"):
        lines += [
            "> **This run did not finish.** It ended without closing its journal (killed, its "
            "machine stopped, or its run store full); the next start found it, closed its "
            "journal and wrote this report. Nothing after its last journal record is known.",
            "",
        ]
    if p.get("stopped"):
        lines += [
            "> **Stopped by the operator** before the budget ended: interventions still pending "
            "were not tried; what was kept was re-measured together below.",
            "",
        ]
    if p.get("cut_short"):
        lines += [
            f"> **Cut short ({p['cut_short']}).** The run ended before its report phase: no final "
            "re-measurement of the kept levers together. The history below is read from the "
            "journal.",
            "",
        ]
    if p.get("recovered") and p.get("cut_short"):
        lines += [
            "> **Rolled back on the way out.** An intervention was being applied when the run "
            "was cut short; gitm-tui restored the workload state saved before the apply and "
            f"journaled the rollback of {', '.join(p['recovered'])}.",
            "",
        ]
    elif p.get("recovered"):
        lines += [
            "> **Recovered run.** This run died while an intervention was being applied. On the "
            "next start gitm-tui restored the workload state saved before the apply and journaled "
            f"the rollback of {', '.join(p['recovered'])}. The history below is read from the "
            "journal.",
            "",
        ]
    for iid, why in (p.get("not_restored") or {}).items():
        lines += [
            f"> **{iid} NOT restored**: {why}. Its change may still be in effect; check the "
            "workload's state by hand.",
            "",
        ]
    if p.get("gate"):
        lines += _gate_lines(p["gate"])
    if res:
        lines += ["## Result", "", f"**{res['headline']}**" if res.get("headline") else ""]
        lines += ["", *_result_lines(res), ""]
    if p.get("hypotheses"):
        lines += [
            "## Claims (attribution)",
            "",
            "| cause | impact (share of window) | confidence | evidence |",
            "|---|---:|---:|---|",
        ]
        for h in p["hypotheses"]:
            if not h.get("claimed"):
                continue
            ev = "; ".join(
                e["what"]
                + (f" (p_adj {e['p_adjusted']:.2g})" if e.get("p_adjusted") is not None else "")
                for e in h["evidence"]
            )
            lines.append(
                f"| {h['cause']} | {h['impact']:.1%} | {h['confidence']:.2f} | {_cell(ev)} |"
            )
        lines.append("")
    if claims:
        lines += [
            "## Interventions",
            "",
            "| id | lever | safety | final state | approved by | predicted Δ | measured Δ | note |",
            "|---|---|---|---|---|---:|---:|---|",
        ]
        for c in claims:
            lines.append(
                f"| {c['id']} | {_cell(c['lever'])} | {c['safety']} | {c['state']} "
                f"| {_cell(c.get('approved_by') or '—')} | {_pct(c.get('predicted_gain'))} "
                f"| {_pct(c.get('measured_gain'))} | {_cell(c.get('note', ''))} |"
            )
        lines.append("")
        for c in claims:
            if c["state"] in ("PROPOSED", "REJECTED"):
                continue
            lines += [f"### {c['id']} {c['lever']} — {c['state']}", ""]
            for e in c.get("evidence") or ["(no supporting claim recorded)"]:
                lines.append(f"- Claim → evidence: {e}")
            if c.get("replay"):
                replayed = not black_box and c.get("predicted_gain") is not None
                how = "replayed on the trace" if replayed else "measured only"
                lines.append(f"- Intervention ({how}): {c['replay']}")
            lines.append(
                f"- Predicted {_pct(c.get('predicted_gain'))}, measured {_pct(c.get('measured_gain'))}"
                + (f" — {_cell(c['note'])}" if c.get("note") else "")
            )
            if c.get("identity"):
                lines.append(f"- Workload identity: {_cell(c['identity'])}")
            if c["id"] in diffs:
                lines += [
                    "",
                    "What changed in the trace (the state before the lever → the trial):",
                    "",
                    diffs[c["id"]].rstrip("\n"),
                ]
            lines.append("")
    rb = [c for c in claims if c["state"] == "ROLLED_BACK"]
    if rb:
        lines += ["## Rollbacks", ""]
        lines += [f"- {c['id']} {_cell(c['lever'])}: {_cell(c.get('note', ''))}" for c in rb]
        lines.append("")
    if p.get("invariants"):
        lines += ["## Invariants (baseline)", ""]
        for r in p["invariants"]:
            head = f"- **{r['invariant']}**: " + (
                f"checked on {r['checked']} rows, {len(r['violations'])} violating ops"
                if r["checkable"]
                else f"not checkable — {r['reason']}"
            )
            lines.append(head)
            for v in r["violations"][:5]:
                lines.append(f"  - `{_code(v['name'])}`: {v['message']}")
        lines.append("")
    d = res.get("diagnostic") if res else None
    if res and res.get("not_applicable") and not d:  # (a missed target lists them below)
        lines += ["## Levers that do not apply here", ""]
        lines += [f"- {lv}: {why}" for lv, why in res["not_applicable"].items()]
        lines.append("")
    if d:
        lines += [
            "## Why the target cannot be committed to"
            if res.get("diagnosed")
            else "## Why the target was not met",
            "",
        ]
        if d.get("gate"):
            lines += [f"The qualification gate, in the profile phase: {_cell(d['gate'])}.", ""]
        if d.get("what_would_help"):
            lines.append("What would help:")
            lines += [f"- {_cell(h)}" for h in d["what_would_help"]]
            lines.append("")
        if d.get("short_by") is not None:
            lines += [f"Short by {d['short_by']:.1%} (the kept gain's point estimate).", ""]
        for k, title in (
            ("tried", "Levers tried"),
            ("awaiting_a_person", "Proposed, waiting for a person (not SAFE, or not approved)"),
            ("not_applicable", "Levers not applicable"),
        ):
            if d.get(k):
                lines.append(f"{title}:")
                lines += [f"- {_cell(lv)}: {_cell(why)}" for lv, why in d[k].items()]
                lines.append("")
        for k, title in (
            ("causes_without_lever", "Claimed causes no lever in the library addresses"),
            ("causes_without_applicable_lever", "Claimed causes whose levers do not apply here"),
        ):
            if d.get(k):
                lines += [f"{title}: {', '.join(d[k])}.", ""]
    lines += [
        "## Provenance",
        "",
        f"gitm-tui {p.get('gitm_tui', '?')}, Python {p.get('python', '?')}, started {p.get('started', '?')}. "
        "Every state transition is in `journal.jsonl` (appended and fsync'd before it took effect, "
        "each line sealed and chained to the one before); "
        "the workload state before and after each apply is in `states/`.",
        "",
    ]
    if p.get("journal"):
        lines += [f"Journal check: {p['journal']}.", ""]
    return "\n".join(lines)


def journal_check(path: Path) -> dict[str, Any]:
    """The journal's integrity for a report's provenance (``journal``, ``journal_broken``)."""
    integrity = check(path)[1]
    return {"journal": integrity.line(), "journal_broken": not integrity.intact}


def from_journal(path: Path) -> list[dict[str, Any]]:
    """Rebuild each intervention's record from the journal's believed records (the report's
    source of truth)."""
    out: dict[str, dict[str, Any]] = {}
    for r in read(path):
        if r.get("type") == "identity" and isinstance(r.get("id"), str) and r["id"] in out:
            out[r["id"]]["identity"] = r.get("reason") or ""
            continue
        if r.get("type") != "transition":
            continue
        c = out.setdefault(
            r["id"], {"id": r["id"], "lever": r.get("lever", "?"), "safety": r.get("safety", "?")}
        )
        c["state"] = r["to"]
        if r["to"] == "PROPOSED":
            c.update(
                predicted_gain=r.get("predicted_gain"),
                confidence=r.get("confidence"),
                evidence=r.get("evidence", []),
                replay=r.get("replay", ""),
            )
        elif r["to"] == "APPROVED":
            c["approved_by"] = r.get("by", "")
        elif r["to"] == "APPLIED":
            c["measured_gain"] = r.get("gain")
        elif r["to"] in ("VERIFIED", "ROLLED_BACK", "REJECTED"):
            c["note"] = r.get("reason") or (f"rejected by {r.get('by')}" if r.get("by") else "")
    return list(out.values())


def _no_nan(x: Any) -> Any:
    """``x`` with every NaN or infinity as None: report.json is strict JSON."""
    if isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral):  # numpy's too
        return float(x) if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _no_nan(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_no_nan(v) for v in x]
    return x


def write_run(
    opt: AnyLoop,
    result: dict[str, Any],
    provenance: dict[str, Any],
    diffs: dict[str, Any] | None = None,
) -> tuple[Path, Path]:
    """Write report.md and report.json of an optimize run; return their paths. ``diffs``: per
    kept intervention, what changed in the trace — an ``engine.analyze.diff.diff_model.TraceDiff``
    (the runtime makes it: that layer sits above this one) or the line saying why there is
    none."""
    hyps = opt.baseline_hypotheses
    prov = {**provenance, "result": result, **journal_check(opt.journal.path)}
    gate = opt.gate.to_json() if opt.gate is not None else None
    if gate is not None:
        prov["gate"] = gate
    diffs = diffs or {}
    diff_md = {
        iid: d.markdown(top=8) if hasattr(d, "markdown") else f"- {_cell(_clean(str(d)))}"
        for iid, d in diffs.items()
    }
    if hyps is not None:
        prov["hypotheses"] = [
            {
                "cause": h.cause.name,
                "impact": h.impact,
                "confidence": h.confidence,
                "claimed": h.claimed,
                "evidence": [
                    {"kind": e.kind, "what": e.what, "value": e.value, "p_adjusted": e.p_adjusted}
                    for e in h.evidence
                ],
            }
            for h in hyps.hypotheses
        ]
        prov["invariants"] = [r.as_dict() for r in opt.baseline_invariants]
    claims = from_journal(opt.journal.path)
    for c in claims:  # the run's own figures where the journal has none (e.g. never applied)
        iv = opt.interventions.get(c["id"])
        if iv is not None and c.get("measured_gain") is None:
            c["measured_gain"] = iv.measured_gain
    md = write(claims, prov, diff_md)
    run_dir = opt.run_dir
    atomic_write_text(run_dir / "report.md", md)
    data = {
        "gate": gate,
        "provenance": {
            k: v for k, v in prov.items() if k not in ("hypotheses", "invariants", "result", "gate")
        },
        "result": result,
        "interventions": claims,
        "hypotheses": prov.get("hypotheses", []),
        "invariants": prov.get("invariants", []),
        "replay": [
            {"lever": lv, "predicted_gain": pg, "measured_gain": mg}
            for lv, pg, mg in opt.replay_errors
        ],
        "diffs": {
            iid: d.to_dict() if hasattr(d, "to_dict") else {"error": str(d)}
            for iid, d in diffs.items()
        },
    }
    text = json.dumps(_no_nan(data), indent=1, default=float, allow_nan=False)
    atomic_write_text(run_dir / "report.json", text)
    return run_dir / "report.md", run_dir / "report.json"


def rewrite_recovered(
    run_dir: Path,
    recovered: list[str],
    cut_short: str = "",
    not_restored: dict[str, str] | None = None,
    died: bool = False,
) -> Path:
    """Rewrite report.md from the run's journal: a run recovered after it died (``died``), or
    one cut short (``cut_short``: its final status) before its own report phase."""
    recs = read(run_dir / "journal.jsonl")
    start = next((r for r in recs if r.get("type") == "run_started"), {})
    gate = next((r for r in recs if r.get("type") == "gate"), None)
    prov = {
        **start,
        **({"gate": gate} if gate is not None else {}),
        "recovered": recovered,
        "cut_short": cut_short,
        "not_restored": not_restored or {},
        "died": died,
        **journal_check(run_dir / "journal.jsonl"),
    }
    md = write(from_journal(run_dir / "journal.jsonl"), prov)
    atomic_write_text(run_dir / "report.md", md)
    return run_dir / "report.md"
