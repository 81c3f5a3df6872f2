"""The first `gitm-tui analyze` after an install, as a person sees it in a terminal: a tmux
capture of the pane while it runs, with numba's cache empty.

    python screenshots/first_run_capture.py [TRACE] [--out screenshots/first-run-analyze.txt]

It empties the cache itself (a fresh NUMBA_CACHE_DIR; the user's own cache is left alone),
copies TRACE into an empty folder and runs `gitm-tui analyze NAME` there (as a user would, in
their own folder: the run's outputs land there, not in the repository) in a detached tmux pane,
captures the pane every 0.1 s and writes: the pane each time its progress lines changed, the
seconds until the answer, and the first lines of the answer. Needs tmux. TRACE defaults to the repository's
copy of the real 109k-event A100 trace.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_analyze import _background_compile_done  # noqa: E402  (the same wait as the table's)

TRACE = ROOT / "tests" / "data" / "traces" / "kineto" / "a100_training_3streams.json.gz"
SIZE = (120, 40)
DONE = "gitm-capture-exit="  # the pane's last line once analyze has exited


def _pane(session: str) -> list[str]:
    out = subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=True
    )
    return out.stdout.rstrip("\n").splitlines()


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return [ln.rstrip() for ln in lines]


def _progress_only(lines: list[str]) -> bool:
    """The pane holds only the progress lines analyze writes while it works (not yet its
    answer, which replaces them)."""
    return all(ln.startswith("gitm-tui: ") for ln in lines)


def capture(
    trace: Path, limit_s: float = 300.0
) -> tuple[list[tuple[float, list[str]]], float, int]:
    """(the pane each time its progress lines changed, with the seconds since start, then the
    whole pane when analyze exited; seconds until it exited; its exit code)."""
    gitm = Path(sys.executable).parent / "gitm-tui"
    session = f"gitm-first-run-{os.getpid()}"
    frames: list[tuple[float, list[str]]] = []
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as work:
        shutil.copy(trace, work)
        cmd = (
            f"cd {shlex.quote(work)} && NUMBA_CACHE_DIR={shlex.quote(cache)} "
            f"{shlex.quote(str(gitm))} analyze {shlex.quote(trace.name)}; echo {DONE}$?; "
            f"sleep {int(limit_s)}"
        )
        t0 = time.perf_counter()
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", session, "-x", str(SIZE[0]), "-y", str(SIZE[1]),
             cmd],
            check=True,
        )  # fmt: skip
        try:
            while time.perf_counter() - t0 < limit_s:
                lines = _trimmed(_pane(session))
                now = time.perf_counter() - t0
                done = [ln for ln in lines if ln.startswith(DONE)]
                if done:
                    rc = int(done[-1][len(DONE) :] or -1)
                    final = subprocess.run(
                        ["tmux", "capture-pane", "-p", "-S", "-", "-t", session],
                        capture_output=True, text=True, check=True,
                    ).stdout.splitlines()  # fmt: skip
                    frames.append((now, _trimmed([ln for ln in final if not ln.startswith(DONE)])))
                    return frames, now, rc
                if lines and _progress_only(lines) and (not frames or lines != frames[-1][1]):
                    frames.append((now, lines))
                time.sleep(0.1)
            raise SystemExit(f"analyze did not finish within {limit_s:.0f} s")
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
            _background_compile_done()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", type=Path, default=TRACE)
    ap.add_argument("--out", type=Path, default=HERE / "first-run-analyze.txt")
    ap.add_argument("--answer-lines", type=int, default=24, help="lines of the answer kept")
    ns = ap.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("first_run_capture: needs tmux")
    frames, seconds, rc = capture(ns.trace.resolve())
    out = [
        "# The first `gitm-tui analyze` after an install, captured from a tmux pane",
        f"# by `python screenshots/first_run_capture.py` (numba's cache empty) on "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}",
        f"# trace: {ns.trace.name}; the answer came after {seconds:.1f} s; exit code {rc}",
        "",
    ]
    for t, lines in frames[:-1]:
        out += [f"--- the pane at {t:.1f} s ---", *lines, ""]
    answer = frames[-1][1]
    out += [f"--- the pane when analyze exited, {seconds:.1f} s: its first "
            f"{min(ns.answer_lines, len(answer))} of {len(answer)} lines ---",
            *answer[: ns.answer_lines], ""]  # fmt: skip
    ns.out.write_text("\n".join(out))
    print("\n".join(out))
    if rc != 0:
        raise SystemExit(rc)


if __name__ == "__main__":
    main()
