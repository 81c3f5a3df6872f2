"""Terminal summary of `gitm-tui analyze` (Rich renderables; one per file, plus the rank view)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from engine.analyze.breakdown.cpu_trace import CpuSummary, Share
from engine.analyze.breakdown.measured import Confusion
from engine.analyze.breakdown.model import Analysis
from engine.analyze.output.export import clean_analysis
from engine.regimes import Label
from engine.text import clean
from gitm_tui.critical_view import critical_block
from gitm_tui.render import SHOWN_CHARS
from gitm_tui.theme import regime_style

if TYPE_CHECKING:  # the cross-rank package is imported for a folder of ranks only
    from engine.analyze.ranks.ranks import CrossRank


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f}"


#: characters of a lever's basis on the first screen (the whole basis: report.md, --json)
BASIS_CHARS = 90


def _first_clause(text: str, limit: int = BASIS_CHARS) -> str:
    """The first clause of a long explanation (up to its first ': ' or '; '), cut with '…'."""
    cut = min((i for i in (text.find(": "), text.find("; ")) if i > 0), default=len(text))
    head = clean(text[:cut], limit)  # cut with '…' when longer
    return head + (" …" if cut < len(text) and not head.endswith("…") else "")


def summary(a: Analysis, top: int = 10, explain: bool = False) -> RenderableType:
    """Return the summary of one analysis: header, regimes, streams, top kernels, invariant.
    Every string of the analysis is cleaned first (engine.text.clean): names from the trace
    reach the terminal without their escape sequences, each within SHOWN_CHARS. The first
    screen is meant for a glance: one line of counting rules (``explain``: the whole
    paragraph) and one line of basis per lever (the whole basis is in report.md)."""
    a = clean_analysis(a, SHOWN_CHARS)
    head = Text()
    head.append(a.source, style="bold")
    head.append(f"  {a.format}" + ("" if a.rank is None else f" rank {a.rank}") + "\n")
    head.append(f"{a.hardware.name}", style="bold cyan")
    head.append(
        f" ({a.hardware.detected_from})  ·  {a.segments:,} GPU rows ({a.kernels:,} kernels)\n"
        f"GPU busy {_ms(a.gpu_time_ns)} ms, summed over {len(a.streams)} stream(s)  ·  "
        f"wall span {_ms(a.span_ns)} ms (first to last GPU row)\n"
    )
    if a.hardware.device_basis:  # the device the rows ran on, where that is an inference
        head.append(f"device inferred: {a.hardware.device_basis}\n", style="dim")
    if len(a.devices) > 1:  # each device, its peaks and its share of the GPU time
        for d in a.devices[:8]:
            head.append(
                f"  device {d.id}: {d.name} ({d.detected_from}) — {d.share_of_gpu_time:.0%} of "
                f"GPU time, {d.host_link or 'links unknown'}\n",
                style="dim",
            )
    links = f"host link {a.hardware.host_link}" if a.hardware.host_link else "links unknown"
    head.append(f"{links}\n", style="dim")
    conf = (
        ""
        if a.evidence is None or a.evidence.mean_confidence is None
        else f"; mean label confidence {a.evidence.mean_confidence:.2f}"
    )
    head.append(f"evidence: {a.pressures}{conf}\n", style="dim")
    if a.measured_tier is not None:  # counters against the labels without them (report.md)
        cm = Confusion.of(a.measured_tier)
        head.append(f"{cm.headline()}\n{cm.cells()} (table: report.md)\n", style="dim")
    if explain:
        head.append(f"counting: {a.counting}", style="dim")
    else:
        what = a.counting.removeprefix("Counting: ").split(": ", 1)[0]
        head.append(
            f"counting: {_first_clause(what, 100)} (--explain: the whole rule)", style="dim"
        )

    reg = Table(title="GPU time by label", title_justify="left", box=None, pad_edge=False)
    tot = max(1, sum(a.time_by_regime_ns.values()))
    for r in Label:
        reg.add_column(Text(r.name, style=regime_style(r)), justify="right")
    reg.add_row(*[f"{a.time_by_regime_ns[r.name] / tot:.0%}" for r in Label])

    st = Table(title="streams", title_justify="left", box=None, pad_edge=False)
    for c in (
        "dev",
        "stream",
        "kernels",
        "kernel ms",
        "idle ms",
        "host wait",
        "kernel wait",
        "other",
        "M_deg",
    ):
        st.add_column(c, justify="right")
    for s in a.streams:
        i = s.idle
        st.add_row(
            str(s.device),
            str(s.stream),
            f"{s.kernels:,}",
            _ms(s.kernel_time_ns),
            _ms(i.total_ns),
            _ms(i.host_wait_ns),
            _ms(i.kernel_wait_ns),
            _ms(i.other_ns),
            f"{s.kappa_partition['M_deg']:.0%}",
        )

    kt = Table(
        title=f"top {min(top, len(a.top_kernels))} kernels by GPU time",
        title_justify="left",
        box=None,
        pad_edge=False,
        expand=True,
    )
    kt.add_column("kernel", ratio=1, min_width=24, no_wrap=True, overflow="ellipsis")
    for c in ("class", "calls", "ms", "share", "label", "evidence", "conf", "of roofline"):
        left = c in ("class", "label", "evidence")
        kt.add_column(c, justify="left" if left else "right", no_wrap=True)
    for k in a.top_kernels[:top]:
        r = Label[k.regime]
        kt.add_row(
            Text(k.name),
            k.klass,
            f"{k.calls:,}",
            _ms(k.total_ns),
            f"{k.share_of_gpu_time:.1%}",
            Text(f"{k.regime} {k.regime_share:.0%}", style=regime_style(r)),
            k.tier,
            "—" if k.confidence is None else f"{k.confidence:.2f}",
            "—" if k.achieved_fraction is None else f"{k.achieved_fraction:.1%}",
        )

    foot = Text()
    for rule in a.invariants:
        if rule.checkable:
            worst = ""
            if rule.violations:
                v = rule.violations[0]
                worst = f" (worst: {v.name[:60]} — {v.message[:160]})"
            foot.append(
                f"{rule.invariant}: {rule.violating_rows} violating rows of {rule.checked} "
                f"checked{worst}\n"
            )
        else:
            foot.append(f"{rule.invariant}: not checkable — {rule.reason}\n")
    la = a.launch
    foot.append(f"launches: {la.line()}\n")
    for cp in sorted(a.copies, key=lambda c: c.direction == "memset"):  # memsets apart
        rate = "—" if cp.achieved_Bps is None else f"{cp.achieved_Bps / 1e9:.2f} GB/s"
        frac = "" if cp.fraction_of_link is None else f" = {cp.fraction_of_link:.0%} of {cp.link}"
        what = "memsets" if cp.direction == "memset" else f"copies {cp.direction} {cp.memory}"
        what = what if cp.device is None else f"device {cp.device} {what}"
        foot.append(f"{what}: {cp.count} in {_ms(cp.time_ns)} ms, {rate}{frac}\n")
    for m in a.communication:
        ov = m.overlapped_ns / m.time_ns if m.time_ns else 0.0
        foot.append(
            f"communication on GPU {m.device}: {_ms(m.time_ns)} ms in {m.kernels} collectives "
            f"= {m.share_of_gpu_time:.0%} of GPU time, {ov:.0%} of it overlapped with compute\n"
        )
    kp = a.kappa_partition or {"M_id": 0.0, "M_deg": 0.0, "undetermined": 0.0}
    foot.append(
        f"κ gate (can each label be told apart?): identifiable {kp['M_id']:.0%}, "
        f"ill-conditioned {kp['M_deg']:.0%}, undetermined {kp['undetermined']:.0%}"
    )
    for n in a.notes:
        foot.append(f"\nnote: {n}", style="yellow")
    parts: list[RenderableType] = [head, Text(), reg, Text(), st, Text(), kt, Text()]
    if a.replay is not None:
        parts.append(Text(a.replay.line(), style="dim" if a.replay.faithful else "bold red"))
    if a.critical_path is not None:
        parts += [*critical_block(a.critical_path), Text()]
    for u in a.in_use:
        parts.append(Text(f"already in use: {u.evidence} — no lever takes credit for it"))
    parts += advice_block(a)
    return Group(*parts, foot, Text())


def advice_block(a: Analysis, judged_most: int = 6) -> list[RenderableType]:
    """What would help (the levers replayed on this trace, nothing applied): the table, its
    footnotes and the peers' bound; [] where no lever found a target. The text view and the
    analysis screen's ``w`` show the same."""
    parts: list[RenderableType] = []
    if not a.interventions:
        return parts
    lv = Table(
        title="what would help (replayed on this trace; nothing applied)",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    lv.add_column("lever")
    lv.add_column("safety")
    lv.add_column("predicted (interval)", justify="right", no_wrap=True)
    lv.add_column("ceiling", justify="right", no_wrap=True)
    lv.add_column("basis")
    judged = [e for e in a.interventions if e.status in ("predicted", "ceiling")]
    others = [e for e in a.interventions if e.status not in ("predicted", "ceiling")]
    shown = judged[:judged_most] + others
    for e in shown:
        basis = ("not judged: " if e.status == "not_judged" else "") + _first_clause(e.basis)
        mark = (" *" if e.prior_based else "") + (" †" if e.unfaithful_replay else "")
        lv.add_row(
            Text(e.lever),
            e.safety,
            e.gain_text() + mark,
            "—" if e.ceiling is None else f"≤ {e.ceiling:+.1%}",
            Text(basis),  # Text: never read as markup (it may carry names from the trace)
        )
    parts += [lv]
    parts.append(Text("basis: its first clause; the whole basis, priors and ceilings: report.md"))
    if any(e.prior_based for e in shown):
        parts.append(Text("* scales by a named prior (its stated range gives the interval)"))
    if any(e.unfaithful_replay for e in shown):
        parts.append(
            Text(
                "† rests on a replay that does not reproduce this trace (see the replay "
                "line above)",
                style="bold red",
            )
        )
    # what the peers bound the gains to (one line a rank: every lever's is the same)
    parts += [Text(line, style="bold") for line in dict.fromkeys(e.peers for e in shown if e.peers)]
    parts.append(Text())
    return parts


def _share_line(label: str, s: Share, window: str) -> Text:
    t = Text()
    t.append(f"{label:<13}", style="bold")
    t.append(f"{_ms(s.time_ns)} ms = {s.share:.1%} of {window}")
    t.append(f"  ({s.calls:,} {clean(s.what, 200)})", style="dim")  # (names from the trace)
    return t


def cpu_summary(c: CpuSummary, top: int = 10) -> RenderableType:
    """Return the first screen of a CPU-only trace (engine.analyze.breakdown.cpu_trace): steps, where
    the step time went (data loading, optimizer, host gaps), the top operators by self time,
    and what a GPU trace would add. Every name from the trace is cleaned (engine.text.clean)
    and put in a Text, never read as markup."""
    head = Text()
    head.append(clean(c.source, SHOWN_CHARS), style="bold")
    head.append(f"  {c.format}, CPU only (no GPU rows)\n")
    st = c.steps
    if st is None:
        head.append("no ProfilerStep spans: no step times", style="bold")
    else:
        n = st.count - (st.first_apart_ns is not None)
        head.append(f"{st.count} steps", style="bold")
        head.append(
            f": median {_ms(st.median_ns)} ms, mean {_ms(st.mean_ns)} ms, "
            f"min {_ms(st.min_ns)} ms, max {_ms(st.max_ns)} ms"
        )
        if st.first_apart_ns is not None:
            head.append(
                f" (of the last {n}; the first, {_ms(st.first_apart_ns)} ms, set apart: "
                "a warm-up outlier)"
            )
    window = "step time" if st is not None else "the profiled span"
    head.append(
        f"\nprofiled: {_ms(c.window_ns)} ms ({clean(c.window, 200)})  ·  "
        f"{c.threads} thread{'s' if c.threads != 1 else ''}  ·  "
        f"{c.op_calls:,} operator calls",
        style="dim",
    )
    where = Text()
    where.append_text(_share_line("data loading", c.data_loading, window))
    where.append("\n")
    where.append_text(_share_line("optimizer", c.optimizer, window))
    where.append("\n")
    if c.collectives is not None:  # a gloo job's communication (its CPU ranges)
        where.append_text(_share_line("collectives", c.collectives, window))
        where.append("\n")
    g = c.gaps
    where.append(f"{'host gaps':<13}", style="bold")
    where.append(
        f"{_ms(g.time_ns)} ms = {g.share:.1%} of {window} on the main thread outside any operator"
    )
    if g.longest_ns:
        step = f" in step {g.longest_step}" if g.longest_step >= 0 else ""
        where.append(
            f"  (longest {_ms(g.longest_ns)} ms{step}, after {clean(g.longest_after, 48)})",
            style="dim",
        )

    ot = Table(
        title=f"top {min(top, len(c.top))} operators by self time ({c.operators:,} operators, "
        f"{c.op_calls:,} calls: {c.op_share:.0%} of {window})",
        title_justify="left",
        box=None,
        pad_edge=False,
        expand=True,
    )
    ot.add_column("operator", ratio=1, min_width=24, no_wrap=True, overflow="ellipsis")
    for col in ("calls", "self ms", "share", "total ms"):
        ot.add_column(col, justify="right", no_wrap=True)
    for r in c.top[:top]:
        ot.add_row(
            Text(clean(r.name, SHOWN_CHARS)),
            f"{r.calls:,}",
            _ms(r.self_ns),
            f"{r.share:.1%}",
            _ms(r.total_ns),
        )
    foot = Text()
    for note in c.notes:
        foot.append(f"note: {clean(note, 600)}\n", style="yellow")
    foot.append(c.gpu_hint, style="dim")
    return Group(head, where, Text(), ot, Text(), foot, Text())


def rank_table(
    analyses: list[Analysis], straggler: int | None = None, judged: bool = False
) -> RenderableType | None:
    """Return a per-rank comparison when several ranks were analysed. ``straggler``: the rank
    the others waited for most at their collectives (engine.analyze.ranks.ranks); ``judged``: the
    collectives were compared and no rank held the others up (nothing is marked). Otherwise the
    rank with the longest span is marked, and the column says which rule it is."""
    ranked = [a for a in analyses if a.rank is not None]
    if len(ranked) < 2 or len({a.rank for a in ranked}) != len(ranked):
        return None  # not the ranks of one job (missing or repeated rank ids)
    if straggler is not None and any(a.rank == straggler for a in ranked):
        slow = next(a for a in ranked if a.rank == straggler)
        mark = "straggler (waited for)"
    elif judged:
        slow, mark = None, ""
    else:
        slow = max(ranked, key=lambda a: a.span_ns)
        mark = "straggler? longest span only"
    t = Table(title="ranks", title_justify="left", box=None, pad_edge=False)
    for c in ("rank", "GPU ms", "span ms", *[r.name for r in Label], ""):
        t.add_column(c, justify="right")
    for a in sorted(ranked, key=lambda a: a.rank or 0):
        tot = max(1, sum(a.time_by_regime_ns.values()))
        t.add_row(
            str(a.rank),
            _ms(a.gpu_time_ns),
            _ms(a.span_ns),
            *[f"{a.time_by_regime_ns[r.name] / tot:.0%}" for r in Label],
            Text(mark, style="bold red") if a is slow else "",
        )
    return t


def _bound_by(a: Analysis) -> str:
    """The group the rank's critical path is bound by, with its share ('host/framework 98%')."""
    from engine.schedule.critical import GROUPS, share_text

    cp = a.critical_path
    if cp is None or cp.total_ns <= 0:
        return "—"
    ns = {p.part: p.ns for p in cp.parts}
    v, g = max((sum(ns.get(p, 0) for p in ps), g) for g, ps in GROUPS.items())
    return f"{g} {share_text(v / cp.total_ns)}" if v > 0 else "—"


def _ranks_text(ranks: list[int]) -> str:
    """'rank 3', 'ranks 0–7', 'ranks 0–3, 5, 9–12'."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    text = ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in runs)
    return f"rank{'s' if len(ranks) > 1 else ''} {text}"


def each_rank_table(analyses: list[Analysis]) -> tuple[RenderableType, list[str]] | None:
    """One row per rank of a job: what bounds its step and the lever predicted to help most
    (its interval and ceiling, ``*`` where it scales by a prior), and the footnotes the rows
    share (the peers' bound of the gains: one line however many ranks say it). A job's ranks
    get this instead of one whole summary each (83 lines a rank: 10,000 lines for 128 ranks,
    and 0.09 s of rendering a rank); each rank's whole analysis is its report.md. None: not the
    ranks of one job (rank_table's rule)."""
    ranked = [a for a in analyses if a.rank is not None]
    if len(ranked) < 2 or len({a.rank for a in ranked}) != len(ranked):
        return None
    t = Table(
        title="each rank: what bounds its step, and the lever predicted to help most "
        "(replayed on that rank; nothing applied)",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    for c, right in (
        ("rank", True),
        ("bound by", False),
        ("lever", False),
        ("predicted (interval)", True),
        ("ceiling", True),
        ("notes", True),
    ):  # notes: how many report.md has
        t.add_column(c, justify="right" if right else "left", no_wrap=c != "bound by")
    foot: dict[str, None] = {}
    alone: list[int] = []
    prior = False
    for a in sorted(ranked, key=lambda a: a.rank or 0):
        a = clean_analysis(a, SHOWN_CHARS)
        judged = [e for e in a.interventions if e.status in ("predicted", "ceiling")]
        best = judged[0] if judged else None  # (ranked as the lever table ranks them)
        if best is None:
            cells = ["none judged", "—", "—"]
        else:
            prior |= best.prior_based
            cells = [best.lever, best.gain_text() + (" *" if best.prior_based else ""),
                     "—" if best.ceiling is None else f"≤ {best.ceiling:+.1%}"]  # fmt: skip
            if (best.peers or "").startswith("peers unknown"):
                alone.append(a.rank or 0)
            elif best.peers:  # held to its peers: what the job can gain from this rank
                foot[f"rank {a.rank}: {best.peers}"] = None
        t.add_row(str(a.rank), Text(_bound_by(a)), *map(Text, cells), f"{len(a.notes)}")
    lines = list(foot)
    if alone:
        lines.insert(0, f"peers unknown on {_ranks_text(alone)}: collectives are replayed as if "
                     "every peer arrived with the rank; a later peer would take gain back "
                     "(how many, each rank's report.md)")  # fmt: skip
    if prior:
        lines.append("* scales by a named prior (its stated range gives the interval)")
    return t, lines


def cross_rank_text(c: CrossRank) -> Text:
    """The collectives across ranks in a few lines: matching and clock rules, the straggler of
    each step and how long the others waited, the worst arrival skews, the robust outliers."""
    from engine.analyze.ranks.ranks import STRAGGLER_SHARE

    t = Text()
    t.append("collectives across ranks", style="bold")
    t.append(f": {c.matched} matched on every rank taking part ({len(c.ranks)} ranks)")
    if c.matched and not c.trusted:
        t.append(" — clocks not trusted: no waits, skews or stragglers from them", style="bold")
    if c.straggler:  # the verdict: a rank, none, or cannot tell and why (from the trace)
        t.append("\n  straggler: ", style="bold")
        t.append(clean(c.straggler, 600), style="bold")
    if c.unmatched:
        t.append(f", {c.unmatched} not on every rank (not compared)")
    if c.job_path:  # who the job's step waited for between its collectives
        t.append("\n  job: ", style="bold")
        t.append(clean(c.job_path, 600))
    t.append(f"\n  matching: {c.matching}\n  clocks: {c.clocks}\n", style="dim")
    for s in c.steps[:10]:
        share = s.others_waited_ns / max(1, s.step_ns)
        if s.straggler is None:
            t.append(
                f"  step {s.step}: no straggler — the others waited {s.others_waited_ns / 1e6:,.3f}"
                f" ms on average for the rank they waited for most ({share:.1%} of the step; a "
                f"straggler is named from {STRAGGLER_SHARE:.0%})\n"
            )
            continue
        t.append(f"  step {s.step}: straggler rank {s.straggler}")
        t.append(f" — the others waited {s.others_waited_ns / 1e6:,.3f} ms on average for it")
        t.append(f" ({share:.1%} of the step)\n")
    for k in c.collectives[:3]:
        where = f" ({clean(k.group, 40)})" if k.group else ""
        t.append(
            f"  {k.op} #{k.ordinal}{where}: arrival skew {k.skew_ns / 1e6:,.3f} ms, "
            f"last rank {k.last_rank}\n"
        )
    t.append(f"  {c.rule}: ", style="dim")
    t.append(
        ", ".join(f"rank {o.rank} {o.metric}" for o in c.outliers) or "no outlier",
        style="bold red" if c.outliers else "",
    )
    compared = [ln for ln in c.links if ln.times_median is not None]
    for sentence in c.slow_links[:10]:  # group names come from the trace: cleaned
        t.append(f"\n  {clean(sentence, 200)}", style="bold red")
    if compared and not c.slow_links:
        t.append(f"\n  links: {len(compared)} compared, none slow", style="")
    if compared:
        t.append(f"\n  {c.link_rule}", style="dim")
    for n in c.notes:
        t.append(f"\n  {clean(n, 300)}", style="dim")
    return t
