"""`gitm-tui diff BEFORE AFTER`: what changed between two traces (or two runs' traces) — a text
table that fits 120 columns, ``--json`` (engine.analyze.diff.diff_model.TraceDiff), or the diff
screen (``--ui``, gitm_tui/modes/diff.py). The engine computes; this module only renders, and
every string from a trace goes through engine.text.clean on its way to the terminal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine.text import clean
from gitm_tui.commands.common import (
    PROG,
    Parser,
    UsageError,
    error,
    loading_modules,
    need_terminal,
)
from gitm_tui.exit_codes import ExitCode

if TYPE_CHECKING:
    from engine.analyze.diff.cpu_diff import CpuDiff
    from engine.analyze.diff.diff import Step
    from engine.analyze.diff.diff_model import Change, Metric, Side, TraceDiff

#: the text output's width: every line fits it (names are cut with "…")
WIDTH = 120
#: kernel names shown by default (``--top``)
TOP = 20


def diff_parser() -> Parser:
    p = Parser(
        prog=f"{PROG} diff",
        description="What changed between two traces: per kernel name, class and label, what "
        "appeared, disappeared and changed in count and time; idle, launches, copies, "
        "collectives; GPU busy time. Each of BEFORE and AFTER is a trace file (Kineto JSON, "
        "Nsight SQLite), a run folder or run id holding one, or a folder holding one.",
    )
    p.add_argument("before", help="the trace (run folder, run id) before the change")
    p.add_argument("after", help="the trace (run folder, run id) after it")
    p.add_argument("--json", action="store_true", help="print the diff as JSON on stdout")
    p.add_argument(
        "--top",
        type=int,
        default=None,
        help=f"kernel names shown, largest |Δ time| first (text: {TOP} by default; JSON: all)",
    )
    p.add_argument(
        "--step",
        default=None,
        help="compare one ProfilerStep of each trace: its N (ProfilerStep#N), 'first' (each "
        "trace's first: what HTA's TraceDiff compares by default) or BEFORE:AFTER (two Ns); "
        "a GPU row is in the step its launch call starts in",
    )
    p.add_argument("--ui", action="store_true", help="open the diff screen")
    p.add_argument("--hardware", help="catalogue id when a trace does not say (e.g. a100-80gb)")
    p.add_argument(
        "--counting",
        choices=("exact", "hta"),
        default="exact",
        help="what counts as GPU time, as for analyze (hta: HTA's default load)",
    )
    return p


def _step(text: str) -> Step:
    """One side of ``--step``: 'first' or a non-negative N."""
    if text == "first":
        return "first"
    if text.isdigit():
        return int(text)
    raise UsageError(
        f"--step {clean(text, 40)!r}: expected N, 'first' or BEFORE:AFTER (see {PROG} diff --help)"
    )


def parse_steps(value: str | None) -> tuple[Step, Step]:
    """``--step`` as (before's step, after's step); (None, None) without it."""
    if value is None:
        return None, None
    parts = value.split(":")
    if len(parts) > 2:
        raise UsageError(f"--step {clean(value, 40)!r}: expected N, 'first' or BEFORE:AFTER")
    if len(parts) == 2:
        return _step(parts[0]), _step(parts[1])
    s = _step(parts[0])
    return s, s


def cmd_diff(argv: Sequence[str]) -> ExitCode:
    ns = diff_parser().parse_args(argv)
    with loading_modules():
        from engine.analyze.advice import levers  # noqa: F401
        from engine.analyze.breakdown import steady  # noqa: F401  (as analyze: while loading)
        from engine.analyze.diff.diff import DiffInputError, DiffUsageError
        from engine.planner.catalogue import catalogue

    known = [g.id for g in catalogue()]
    if ns.hardware and ns.hardware not in known:
        raise UsageError(f"unknown hardware {ns.hardware!r}; known: {', '.join(known)}")
    if ns.top is not None and ns.top < 1:
        raise UsageError("--top must be >= 1")
    steps = parse_steps(ns.step)
    if ns.ui:
        need_terminal("diff --ui")
        return diff_ui(ns, steps)
    live = sys.stderr.isatty()
    staged = False

    def stage(line: str) -> None:  # what is being read, on one line rewritten (a terminal only)
        nonlocal staged
        if live:
            print(f"\r\x1b[2K{PROG}: {clean(line, 160)}", end="", file=sys.stderr, flush=True)
            staged = True

    try:
        d = compute(ns, steps, stage)
    except DiffUsageError as e:
        raise UsageError(str(e)) from None
    except DiffInputError as e:
        error(str(e))
        return ExitCode.INPUT
    finally:
        if staged:
            print("\r\x1b[2K", end="", file=sys.stderr, flush=True)
    emit(d.to_json() if ns.json else "\n".join(text_of(d, ns.top or TOP)))
    return ExitCode.OK


def text_of(d: Any, top: int) -> list[str]:
    """The diff's text: a GPU diff's table, or two CPU-only traces' operators."""
    from engine.analyze.diff.cpu_diff import CpuDiff, cpu_diff_lines

    if isinstance(d, CpuDiff):
        return cpu_diff_lines(d, top)
    return diff_lines(d, top)


def emit(text: str) -> None:
    """Write ``text`` and a newline to stdout. A reader that goes away (``| head``) has read
    what it wanted: not an error — stdout then points at /dev/null, so the interpreter's last
    flush of what is still buffered does not raise again."""
    import os

    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # no real file behind stdout (tests)
            pass


def compute(
    ns: argparse.Namespace, steps: tuple[Step, Step], stage: Callable[[str], None] | None
) -> TraceDiff | CpuDiff:
    """The diff the command line asks for (DiffInputError, DiffUsageError for bad input)."""
    from engine.analyze.api import AnalyzeOptions, Hooks
    from engine.analyze.diff.diff import diff_inputs

    options = AnalyzeOptions(hardware=ns.hardware, counting=ns.counting, ranks=False)
    top = ns.top if ns.json else None  # (the text and the screen cut it themselves)
    return diff_inputs(ns.before, ns.after, options, Hooks(stage=stage), steps[0], steps[1], top)


def diff_ui(ns: argparse.Namespace, steps: tuple[Step, Step]) -> ExitCode:
    """The diff screen: the traces are read in the screen's loader thread; an input error
    closes it and is said here, in one line, with its exit code."""
    from engine.analyze.diff.diff import DiffUsageError
    from gitm_tui.app import GitmApp
    from gitm_tui.modes.diff import DiffScreen

    def load(progress: Callable[[str], None]) -> TraceDiff:
        from engine.analyze.diff.cpu_diff import CpuDiff

        d = compute(ns, steps, progress)
        if isinstance(d, CpuDiff):  # (the screen draws GPU rows' tables)
            raise DiffUsageError(
                "two CPU-only traces: the diff screen compares GPU rows; without --ui, "
                "`gitm-tui diff BEFORE AFTER` prints their operators"
            )
        return d

    screen = DiffScreen(load=load, source=f"{ns.before} → {ns.after}", top=ns.top or 200)
    GitmApp(screen).run()
    if screen.error is not None:
        error(screen.error)
        return ExitCode.USAGE if isinstance(screen.failure, DiffUsageError) else ExitCode.INPUT
    return ExitCode.OK


# ------------------------------------------------------------------ text
def ms(ns: float) -> str:
    """Nanoseconds as milliseconds, three decimals, thousands separated."""
    return f"{ns / 1e6:,.3f}"


def signed_ms(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:+,.3f}"


def human_bytes(n: float) -> str:
    """Bytes in B, kB, MB, GB (powers of 1000), with a sign where negative."""
    sign = "-" if n < 0 else ""
    v = abs(float(n))
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if v >= size:
            return f"{sign}{v / size:,.1f} {unit}"
    return f"{sign}{v:,.0f} B"


def metric_value(m: Metric, v: float | None, signed: bool = False) -> str:
    """One total's value as printed: ms, a count or bytes; 'unknown' for None."""
    if v is None:
        return "unknown"
    if m.unit == "ns":
        return f"{v / 1e6:+,.3f} ms" if signed else f"{v / 1e6:,.3f} ms"
    if m.unit == "bytes":
        return ("+" if signed and v >= 0 else "") + human_bytes(v)
    return f"{v:+,.0f}" if signed else f"{v:,.0f}"


#: the totals as the text names them
METRIC_NAMES = {
    "gpu_time": "GPU time",
    "gpu_time_per_step": "GPU time per step",
    "step_time": "step time (mean)",
    "busy": "GPU busy",
    "span": "span",
    "kernels": "kernels",
    "kernel_time": "kernel time",
    "idle": "idle on streams",
    "idle_host_wait": "  waiting for the host",
    "idle_kernel_wait": "  between kernels (<30 µs)",
    "idle_other": "  other",
    "launch_calls": "launch calls",
    "launch_time": "launch call time",
    "graph_launches": "CUDA graph launches",
    "copies": "copies",
    "copy_bytes": "copy bytes",
    "copy_time": "copy time",
    "memsets": "memsets",
    "memset_bytes": "memset bytes",
    "memset_time": "memset time",
    "collectives": "collectives",
    "collective_time": "collective time",
    "collective_overlap": "  overlapped with compute",
}

_STATUS = {
    "added": "added",
    "removed": "removed",
    "increased": "more",
    "decreased": "fewer",
    "unchanged": "same",
}


def _fit(text: str, width: int) -> str:
    """Outside text cleaned and cut to ``width`` (with "…"), padded to it."""
    return clean(text, width).ljust(width)


def _pct(before: float | None, delta: float | None) -> str:
    if before is None or delta is None or not before:
        return ""
    return f"{delta / before:+.1%}"


def _side_line(word: str, s: Side) -> str:
    """One trace in a line: its source (cut from the left, so the file's name stays), device,
    scope, rows and steps."""
    steps = f"{s.steps} step{'s' if s.steps != 1 else ''}" if s.steps else "no ProfilerStep"
    tail = clean(f" · {s.device} · {s.scope} · {s.rows:,} GPU rows · {steps}", 90)
    room = max(20, WIDTH - len(word) - 2 - len(tail))
    source = clean(s.source)
    if len(source) > room:
        source = "…" + source[len(source) - room + 1 :]
    return f"{word}  {source}{tail}"


def _fingerprint_line(d: TraceDiff) -> str:
    """The fingerprint's verdict in a line (to be wrapped)."""
    f = d.fingerprint
    if not f.available or f.value is None:
        return f"fingerprint: {f.note or 'unknown'}"
    verdict = "the same workload" if f.same else "a different workload"
    why = ""
    if f.reasons and not f.same:  # the three most telling; --json has them all
        more = f" (and {len(f.reasons) - 3} more in --json)" if len(f.reasons) > 3 else ""
        why = ": " + "; ".join(clean(r, 240) for r in f.reasons[:3]) + more
    unjudged = f" (not judged: {'; '.join(f.unknown)})" if f.unknown else ""
    return (
        f"fingerprint: distance {f.value:.3g} (threshold {f.threshold:.3g}): {verdict}{why}"
        f"{unjudged}"
    )


def _label_text(c: Change) -> str:
    """'MEMORY → COMPUTE', one side's label alone, or '' — '*' after a label that rests on the
    kernel-name prior for most of its time."""

    def one(f: object) -> str:
        from engine.analyze.diff.diff_model import Figures

        assert isinstance(f, Figures)
        if f.label is None:
            return ""
        return f.label + ("*" if f.prior_share is not None and f.prior_share > 0.5 else "")

    b, a = one(c.before), one(c.after)
    if b and a and b != a:
        return f"{b}→{a}"
    return a or b


def _wrap(text: str, first: str = "", indent: str = "    ") -> list[str]:
    """Outside text cleaned (at most SHOWN_CHARS) and wrapped to WIDTH, ``first`` before it."""
    import textwrap

    from gitm_tui.render import SHOWN_CHARS

    return textwrap.wrap(
        first + clean(text, SHOWN_CHARS), WIDTH, subsequent_indent=indent, break_on_hyphens=False
    )


def diff_lines(d: TraceDiff, top: int = TOP) -> list[str]:
    """The text output, line by line; each at most WIDTH columns, every outside string cleaned."""
    lines = [_side_line("before", d.before), _side_line("after ", d.after)]
    lines += _wrap(d.scope, "compared: ")
    lines += _wrap(_fingerprint_line(d))
    for n in d.notes:
        lines += _wrap(n, "note: ")
    lines.append("")
    lines += critical_lines(d)
    lines.append("")
    lines.append(f"{'totals':<28}{'before':>18}{'after':>18}{'Δ':>18}{'Δ %':>11}")
    for m in d.totals:
        label = METRIC_NAMES.get(m.name, m.name)
        lines.append(
            f"{label:<28}{metric_value(m, m.before):>18}{metric_value(m, m.after):>18}"
            f"{metric_value(m, m.delta, signed=True):>18}{_pct(m.before, m.delta):>11}"
        )
        if m.note:
            lines += _wrap(m.note, "    ")
    shown = d.kernels[:top]
    by = ", ".join(f"{n} {k}" for k, n in d.kernels_by_status.items() if n)
    lines.append("")
    lines += _wrap(
        f"kernels: {d.kernels_total:,} names ({by}); the {len(shown)} with the largest |Δ time|, "
        "names shortened (--json has them whole); * the label rests on the kernel-name prior"
    )
    lines += _change_table(shown, "kernel", kernels=True)
    for title, head, rows in (
        ("by class", "class", d.classes),
        ("by label: regimes decoded per stream (prior: the share of the time labelled on the "
         "kernel-name prior alone), copies, collectives, unknown", "label", d.labels),
        ("copies and memsets", "kind", d.copies),
    ):  # fmt: skip
        if rows:
            lines.append("")
            lines += _wrap(title)
            lines += _change_table(rows, head, prior=head == "label")
    return lines


def critical_lines(d: TraceDiff) -> list[str]:
    """The critical paths compared: the headline ('exposed communication 38% → 12%'), then per
    headline group with time on either side its ms and share of each path, before → after.
    A side with no path reads 'unknown' (and why), never 0."""
    from engine.analyze.diff.diff import share_cell, share_delta

    c = d.critical_path
    lines = _wrap(c.headline, "critical path: ")
    for word, s in (("before", c.before), ("after", c.after)):
        if not s.known or s.window != "the whole trace":
            lines += _wrap(s.window, f"  {word}: ")
    lines.append(
        f"{'  on the critical path':<28}{'before ms':>14}{'share':>9}{'after ms':>14}"
        f"{'share':>9}{'Δ ms':>14}{'Δ share':>11}"
    )

    def cell(ns: int | None) -> str:
        return "unknown" if ns is None else ms(ns)

    lines.append(
        f"{'  length':<28}{cell(c.before.total_ns):>14}{'':>9}{cell(c.after.total_ns):>14}"
        f"{'':>9}"
        + (
            f"{signed_ms(c.after.total_ns - c.before.total_ns):>14}"
            if c.before.total_ns is not None and c.after.total_ns is not None
            else f"{'—':>14}"
        )
    )
    for g in c.groups:
        if not (g.before_ns or g.after_ns):
            continue  # no time on either path (--json has every group)
        lines.append(
            f"  {g.group:<26}{cell(g.before_ns):>14}{share_cell(g.before_share):>9}"
            f"{cell(g.after_ns):>14}{share_cell(g.after_share):>9}{signed_ms(g.delta_ns):>14}"
            f"{share_delta(g.delta_share):>11}"
        )
    lines += _wrap(c.note, "  ")
    return lines


def short_name(name: str, templates: bool = False) -> str:
    """A kernel name without its function arguments, its return type and (unless
    ``templates``) its template arguments, as a person reads it in a table (``void
    at::native::f<4, …>(int, …)`` → ``at::native::f``, or ``at::native::f<4, …>``); copies and
    memsets as they are. For the text only: --json keeps names whole. Reads at most 4,096
    characters."""
    if name.startswith(("Memcpy", "Memset")) or ("<" not in name and "(" not in name):
        return name
    text = name[:4096].replace("(anonymous namespace)", "{anon}").replace("->", "")
    out: list[str] = []
    angle = paren = 0
    last_space = -1  # the last space outside <…> and (…): the return type ends there
    for ch in text:
        if angle == 0 and ch == "(":
            paren += 1
        elif angle == 0 and ch == ")" and paren:
            paren -= 1
        elif paren:
            continue  # function arguments
        elif ch == "<":
            angle += 1
            if templates:
                out.append(ch)
        elif ch == ">" and angle:
            angle -= 1
            if templates:
                out.append(ch)
        elif angle and not templates:
            continue
        else:
            if ch == " " and angle == 0:
                last_space = len(out)
            out.append(ch)
    short = "".join(out[last_space + 1 :]).strip()
    return short or name


def shown_names(keys: list[str]) -> list[str]:
    """Each kernel name as the table shows it: shortened, with its template arguments where
    two names would otherwise read alike (``cutlass::Kernel`` stands for many kernels)."""
    short = [short_name(k) for k in keys]
    seen: dict[str, int] = {}
    for s in short:
        seen[s] = seen.get(s, 0) + 1
    return [
        short_name(k, templates=True) if seen[s] > 1 else s
        for k, s in zip(keys, short, strict=True)
    ]


def _change_table(
    rows: list[Change], head: str, kernels: bool = False, prior: bool = False
) -> list[str]:
    """Rows of changes: status, key (kernel names shortened, then cut to fit), calls and total
    ms before → after, Δ ms, Δ ms per step (where both traces have steps), and the majority
    label (kernels) or the prior share (labels). Column widths follow the figures; the key
    gets the rest of WIDTH."""
    per_step = any(c.delta_per_step_ns is not None for c in rows)
    cells: list[list[str]] = []
    for c in rows:
        row = [
            _STATUS[c.status],
            "",  # the key: fitted below
            f"{c.before.count:,}→{c.after.count:,}",
            f"{ms(c.before.total_ns)}→{ms(c.after.total_ns)}",
            signed_ms(c.delta_ns),
        ]
        if per_step:
            row.append(signed_ms(c.delta_per_step_ns))
        if kernels:
            row.append(_label_text(c))
        elif prior:
            pb, pa = c.before.prior_share, c.after.prior_share
            txt = lambda v: "—" if v is None else f"{v:.0%}"  # noqa: E731
            row.append("" if pb is None and pa is None else f"{txt(pb)}→{txt(pa)}")
        cells.append(row)
    heads = ["change", head, "calls", "total ms", "Δ ms"]
    heads += ["Δ ms/step"] if per_step else []
    heads += ["label"] if kernels else ["prior"] if prior else []
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(heads)]
    keys = shown_names([c.key for c in rows]) if kernels else [c.key for c in rows]
    rest = max(16, WIDTH - sum(widths) + widths[1] - (len(heads) - 1))
    widths[1] = min(rest, max([len(head)] + [len(clean(k, rest)) for k in keys]))
    left = {0, 1, len(heads) - 1} if (kernels or prior) else {0, 1}

    def line(row: list[str]) -> str:
        out = [
            cell.ljust(w) if i in left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        return clean(" ".join(out).rstrip(), WIDTH)

    lines = [line(heads)]
    for key, row in zip(keys, cells, strict=True):
        row[1] = clean(key, widths[1])
        lines.append(line(row))
    return lines
