"""The hostile corpus (issue 36 item 6): inputs a hostile or unlucky user gives gitm-tui — broken
and booby-trapped traces, ledgers and flags, an unusable run store — each generated here (all
synthetic) with the exit code the README documents for it.

``tests/test_hostile_corpus.py`` runs every case as the real program and holds it to the rule:
no traceback, no hang, its documented exit code with one clear line, no raw escape byte on
the terminal, nothing written outside the run store. Run this module to see each case's
figures (exit code, time, first line)::

    python -m tests.hostile_corpus            # a table, one row per case
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.paths import ROOT
from tests.runtime.journals import DEAD, REPORT, completed_run, dead_run
from tests.trace import hostile_inputs as hi

#: exit codes (README "Exit codes")
OK, USAGE, INPUT, BACKEND = 0, 2, 3, 4


@dataclass
class Case:
    """One hostile input: the arguments after ``gitm-tui`` (``{d}`` is the case's folder),
    how to make its files, the exit code and words its one error line must carry."""

    name: str
    args: list[str]
    code: int
    words: tuple[str, ...] = ()
    make: Callable[[Path], object] = lambda d: None
    env: dict[str, str] = field(default_factory=dict)
    #: what the run store holds before the command (its ``runs`` folder is given)
    store: Callable[[Path], object] = lambda runs: None
    #: what must still hold after it — nothing the user had is lost (given the ``runs`` folder;
    #: an AssertionError says what was lost)
    after: Callable[[Path], object] = lambda runs: None

    def argv(self, d: Path) -> list[str]:
        return [a.replace("{d}", str(d)) for a in self.args]


# ------------------------------------------------------------------ traces
def _file(name: str, data: bytes) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        (d / name).write_bytes(data)

    return make


def _fifo(d: Path) -> None:
    os.mkfifo(d / "pipe.json")


def _loop(d: Path) -> None:
    (d / "a.json").symlink_to(d / "b.json")
    (d / "b.json").symlink_to(d / "a.json")


def _empty_dir(d: Path) -> None:
    (d / "traces").mkdir()
    (d / "traces" / "notes.txt").write_text("not a trace\n")


def _nsys_blob(d: Path) -> None:
    shutil.copyfile(hi.NSYS, d / "t.sqlite")
    con = sqlite3.connect(d / "t.sqlite")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = x'00ff' WHERE rowid = 1")
    con.commit()
    con.close()


def _hostile_names(d: Path) -> None:
    """Kernel names with a terminal escape, markup and an image link; one kernel without dur."""
    evs = hi.events()
    evs[0]["name"] = "\x1b]0;pwned\x07\x1b[31mred<script>alert(1)</script>![x](http://x/y.png)"
    k = next(e for e in evs if e.get("cat") == "kernel")
    k.pop("dur")
    (d / "names.json").write_bytes(hi.trace_bytes(evs))


def _run_with_two_traces(d: Path) -> None:
    """A run folder (it has a journal) holding both a capture's and a profile's trace."""
    run = d / "run"
    run.mkdir()
    (run / "journal.jsonl").write_text("")
    for name in ("trace.json", "profile.json"):
        (run / name).write_bytes(hi.trace_bytes())


def _nsys_nulls(d: Path) -> None:
    """Kernel rows with a NULL start or end (the table rebuilt without its NOT NULL, as a
    damaged export holds it): read as 0 they ran from the session's start (issue 51)."""
    shutil.copyfile(hi.NSYS, d / "t.sqlite")
    con = sqlite3.connect(d / "t.sqlite")
    with con:
        con.execute("CREATE TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("ALTER TABLE k RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = NULL WHERE rowid <= 2")
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = NULL WHERE rowid = 3")
    con.close()


# ------------------------------------------------------------------ audit ledgers
def _ledger(d: Path, **over: object) -> None:
    led = {
        "ledger_version": 1,
        "created": "2026-12-04T00:00:00+0000",
        "corpus_spec": ["calibrated"],
        "seeds": 1,
        "operators": {},
        "corpus": [],
        "results": [],
        "equivalence": [],
        "kappa_geometry": [],
        "versions": {},
    }
    text = json.dumps({**led, **over})
    (d / "ledger.json").write_text(text.replace('"SEEDS_400"', "1" + "0" * 400))


def _ledger_corpus(source: str) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        if source == "fifo":
            os.mkfifo(d / "corpus.pipe")
        item = {
            "name": "x",
            "kind": "trace",
            "source": str(d / "corpus.pipe") if source == "fifo" else source,
            "generated_by": "hostile",
            "synthetic": True,
            "seeds": [1],
            "rows": 1,
            "sha256": "0" * 64,
        }
        _ledger(d, corpus=[item], corpus_spec=[item["source"]])

    return make


# ------------------------------------------------------------------ the run store
def _scratch_is_a_file(d: Path) -> None:
    (d / "scratch-file").write_text("x")


# ------------------------------------------------------------------ a dead run's journal


def _dead_run(damage: str) -> Callable[[Path], None]:
    """A run killed right after I1 went APPLYING (its saved state sealed in that record, the
    lever's state on disk), its journal then damaged as issue 51 found journals: a stray copy
    of an old line appended, a forged line, a CRLF conversion, the final newline lost, the
    saved state edited."""

    def store(runs: Path) -> None:
        run = dead_run(runs)
        path = run / "journal.jsonl"
        data = path.read_bytes()
        if damage == "stray":  # `sed -n 2p journal.jsonl >> journal.jsonl`
            path.write_bytes(data + data.splitlines(keepends=True)[1])
        elif damage == "forged":
            path.write_bytes(data + b'{"seq":9,"type":"transition","id":"I1","to":"VERIFIED",'
                             b'"prev":"ab","h":"' + b"0" * 64 + b'"}\n')  # fmt: skip
        elif damage == "crlf":
            path.write_bytes(data.replace(b"\n", b"\r\n"))
        elif damage == "newline":
            path.write_bytes(data.rstrip(b"\n"))
        elif damage == "state":
            (run / "states" / "I1_before.json").write_text('{"before": "edited"}')

    return store


def _state_is(value: object) -> Callable[[Path], None]:
    def after(runs: Path) -> None:
        got = json.loads((runs / DEAD / "state.json").read_text())
        assert got == value, f"the lever's state is {got}, not {value}"
        assert (runs / DEAD / "report.md").is_file(), "no report.md for the dead run"

    return after


def _completed_and_cut(runs: Path) -> None:
    """A completed run (I1 kept, its report written) whose journal lost its last 3 lines
    (`head -n -3`): it passed as intact, and recovery undid the kept lever and rewrote its
    report as "did not finish"."""
    run = completed_run(runs)
    path = run / "journal.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-3]))


def _kept_whole(runs: Path) -> None:
    _state_is({"after": True})(runs)
    report = (runs / DEAD / "report.md").read_text()
    assert report == REPORT, "the completed run's report was rewritten"


#: a short simulated run: its start recovers the store's dead runs
_RUN = ["--no-ui", "--budget", "2s"]


CASES: list[Case] = [
    # traces
    Case("empty gzip", ["analyze", "{d}/e.json.gz", "--no-write"], INPUT, ("empty file",),
         _file("e.json.gz", gzip.compress(b"", mtime=0))),
    Case("not gzip", ["analyze", "{d}/n.json.gz", "--no-write"], INPUT, ("n.json.gz",),
         _file("n.json.gz", b"this is not gzip\n")),
    Case("truncated JSON", ["analyze", "{d}/t.json", "--no-write"], INPUT, ("t.json",),
         _file("t.json", hi.trace_bytes()[:-400])),
    Case("binary garbage", ["analyze", "{d}/g.json", "--no-write"], INPUT, ("g.json",),
         _file("g.json", bytes(range(256)) * 64)),
    Case("JSON, not a trace", ["analyze", "{d}/a.json", "--no-write"], INPUT, ("a.json",),
         _file("a.json", b"[1, 2, 3]")),
    Case("deep nesting", ["analyze", "{d}/deep.json", "--no-write"], INPUT, ("deep.json",),
         lambda d: hi.deep_event(d).rename(d / "deep.json")),
    Case("a FIFO", ["analyze", "{d}/pipe.json", "--no-write"], INPUT, ("pipe.json",), _fifo),
    Case("a character device", ["analyze", "/dev/zero", "--no-write"], INPUT, ("/dev/zero",)),
    Case("a symlink loop", ["analyze", "{d}/a.json", "--no-write"], INPUT, ("a.json",), _loop),
    Case("no such file", ["analyze", "{d}/missing.json", "--no-write"], INPUT, ("missing",)),
    Case("a folder of no traces", ["analyze", "{d}/traces", "--no-write"], INPUT, ("traces",),
         _empty_dir),
    Case("Nsight BLOB in an integer", ["analyze", "{d}/t.sqlite", "--no-write"], INPUT,
         ("t.sqlite",), _nsys_blob),
    Case("not SQLite", ["analyze", "{d}/x.sqlite", "--no-write"], INPUT, ("x.sqlite",),
         _file("x.sqlite", b"SQLite format 3\x00" + b"\xff" * 4096)),
    Case("Nsight NULL start and end", ["analyze", "{d}/t.sqlite", "--no-write"], OK,
         ("3 malformed events were skipped",), _nsys_nulls),
    Case("analyze --ui with no terminal", ["analyze", "{d}/t.json", "--ui"], USAGE,
         ("needs a terminal",), _file("t.json", hi.trace_bytes())),
    Case("the dashboard with no terminal", ["--budget", "2s"], OK, ("running headless",)),
    Case("escapes, markup, no dur", ["analyze", "{d}/names.json", "--no-write"], OK,
         ("malformed",), _hostile_names),
    Case("a ucx:// cluster", ["analyze", "{d}/e.json", "--cluster", "ucx://host:1"], USAGE,
         ("--cluster",)),
    # diff
    Case("diff a FIFO", ["diff", "{d}/pipe.json", "{d}/pipe.json"], INPUT, ("pipe.json",), _fifo),
    Case("diff escapes, markup, no dur", ["diff", "{d}/names.json", "{d}/names.json"], OK,
         ("totals", "1 malformed event"), _hostile_names),
    Case("diff a run with two traces", ["diff", "{d}/run", "{d}/run"], USAGE,
         ("holds 2 traces",), _run_with_two_traces),
    # audit ledgers
    Case("ledger seeds 10**9", ["audit", "--verify", "{d}/ledger.json"], INPUT,
         ("ledger.json", "seeds: Input should be less than or equal to 100"),
         lambda d: _ledger(d, seeds=10**9)),
    Case("ledger seeds 10^400", ["audit", "--verify", "{d}/ledger.json"], INPUT,
         ("ledger.json", "seeds:"), lambda d: _ledger(d, seeds="SEEDS_400")),
    Case("ledger corpus /etc/passwd", ["audit", "--verify", "{d}/ledger.json"], INPUT,
         ("passwd",), _ledger_corpus("/etc/passwd")),
    Case("ledger corpus a FIFO", ["audit", "--verify", "{d}/ledger.json"], INPUT,
         ("corpus.pipe",), _ledger_corpus("fifo")),
    Case("ledger corpus_spec of 1,000 sources", ["audit", "--verify", "{d}/ledger.json"], INPUT,
         ("REJECTED", "does not match the corpus it records"),
         lambda d: _ledger(d, corpus_spec=[f"{d}/t{i}.json" for i in range(1000)])),
    Case("ledger corpus_spec repeated", ["audit", "--verify", "{d}/ledger.json"], INPUT,
         ("REJECTED", "more than once"),
         lambda d: _ledger(d, corpus_spec=["calibrated"] * 1000)),
    Case("ledger not JSON", ["audit", "--verify", "{d}/ledger.json"], INPUT, ("ledger.json",),
         _file("ledger.json", b"{\"ledger_version\": 1,")),
    # flags and the run store
    Case("budget nan", ["--no-ui", "--budget", "nan"], USAGE, ("bad budget",)),
    Case("seed 10^400", ["--no-ui", "--seed", "1" + "0" * 400], USAGE, ("bad seed", "of 401 digits")),
    Case("target inf", ["--no-ui", "--target", "inf"], USAGE, ("bad target",)),
    Case("metric not a regex", ["--no-ui", "--workload", "command", "--metric", "(unclosed",
         "--lever", "v=env:V=1,2", "--", "true"], USAGE, ("--metric",)),
    Case("program that does not exist", ["--no-ui", "--workload", "command", "--metric",
         "t=(\\d+)", "--lever", "v=env:V=1,2", "--", "{d}/no-such-program"], USAGE,
         ("no such program",)),
    Case("GITM_SCRATCH is a file", ["--no-ui", "--budget", "5s"], INPUT, ("GITM_SCRATCH",),
         _scratch_is_a_file, {"GITM_SCRATCH": "{d}/scratch-file"}),
    Case("approve a path", ["approve", "../../x", "I1"], USAGE, ("not a run id",)),
    # a dead run's journal, damaged (issue 51): the next start names the damage and puts the
    # lever's true state back, or says why it cannot, and never undoes a finished run
    Case("journal: a stray old line appended", _RUN, OK,
         ("rolled back I1", "line 5: it does not follow"), store=_dead_run("stray"),
         after=_state_is({"before": True})),
    Case("journal: a forged line appended", _RUN, OK, ("rolled back I1", "not believed"),
         store=_dead_run("forged"), after=_state_is({"before": True})),
    Case("journal: CRLF line ends", _RUN, OK, ("rolled back I1",), store=_dead_run("crlf"),
         after=_state_is({"before": True})),
    Case("journal: its final newline lost", _RUN, OK, ("rolled back I1",),
         store=_dead_run("newline"), after=_state_is({"before": True})),
    Case("journal: saved state edited", _RUN, OK,
         ("NOT restored", "changed since it was saved"), store=_dead_run("state"),
         after=_state_is({"after": True})),
    Case("journal: a completed run cut", _RUN, OK, ("lost from its end (cut)", "nothing undone"),
         store=_completed_and_cut, after=_kept_whole),
    Case("approve a run that is not there", ["approve", "20261204-000000-abcdef", "I1"],
         USAGE, ("20261204-000000-abcdef",)),
]  # fmt: skip


@dataclass
class Outcome:
    case: Case
    code: int
    seconds: float
    stdout: str
    stderr: str
    #: files written outside the run store (the case's own folder aside)
    outside: list[str]

    @property
    def first_line(self) -> str:
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        return lines[0] if lines else ""


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run(case: Case, base: Path, timeout: float = 120.0) -> Outcome:
    """Run ``case`` as the real program in a fresh folder under ``base``: its own run store,
    home and working folder (each watched for what is written there)."""
    d = base / "case"
    home, cwd, scratch = base / "home", base / "cwd", base / "scratch"
    for p in (d, home, cwd):
        p.mkdir(parents=True)
    case.make(d)
    case.store(scratch / "runs")
    before = {p: _tree(p) for p in (d, home, cwd)}
    env = {
        **os.environ,
        "GITM_SCRATCH": str(scratch),
        "HOME": str(home),
        "PYTHONPATH": str(ROOT),
        **{k: v.replace("{d}", str(d)) for k, v in case.env.items()},
    }
    t0 = time.monotonic()
    # the timeout is the rule's "no hang": a case that reaches it fails (TimeoutExpired)
    r = subprocess.run(
        [sys.executable, "-m", "gitm_tui", *case.argv(d)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    secs = time.monotonic() - t0
    outside = [f"{p.name}/{f}" for p, seen in before.items() for f in sorted(_tree(p) - seen)]
    return Outcome(case, r.returncode, secs, r.stdout, r.stderr, outside)


def main() -> int:
    """Print one row per case: exit code (and the documented one), seconds, first line."""
    bad = 0
    print(f"{'case':34} {'exit':>4} {'want':>4} {'s':>5}  first line of output")
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            o = run(case, Path(tmp))
        bad += o.code != case.code
        line = o.first_line.replace(str(Path(tmp)), "…")[:110]
        print(f"{case.name:34} {o.code:>4} {case.code:>4} {o.seconds:5.1f}  {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
