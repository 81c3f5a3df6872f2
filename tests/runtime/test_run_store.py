"""The run store: run ids are ids (never paths), a run's lock tells live from dead, and operator
decisions are checked against the run before they are sent (issue 13 items 1 and 13)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.store.commands import CommandReader, DecisionError, send
from engine.store.journal import Journal, State
from engine.store.runs import RunIdError, RunLock, is_live, new_run_id, run_path, runs_dir


def _run(states: dict[str, list[State]]) -> tuple[str, Journal]:
    rid = new_run_id()
    j = Journal(run_path(rid) / "journal.jsonl")
    for iid, seq in states.items():
        for st in seq:
            j.transition(iid, st)
    return rid, j


@pytest.mark.parametrize(
    "bad", ["../../x", "/etc", "..", "", "20261201-000000-ABCDEF", "20261201-000000-abcdef/../x"]
)
def test_a_run_id_is_never_a_path(bad):
    with pytest.raises(RunIdError):
        run_path(bad)


def test_new_run_ids_are_run_ids():
    rid = new_run_id()
    assert run_path(rid) == runs_dir() / rid


def test_the_lock_tells_a_live_run_from_a_dead_one():
    rid, _ = _run({})
    assert not is_live(run_path(rid))  # never locked: dead
    lock = RunLock(run_path(rid))
    assert lock.acquire()
    assert is_live(run_path(rid))
    assert not RunLock(run_path(rid)).acquire()  # a second holder is refused
    lock.release()
    assert not is_live(run_path(rid))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX locks")
def test_another_users_live_run_is_live_and_a_decision_says_whose_it_is(monkeypatch):
    """Issue 51: another user's live run was reported "not running" — its lock file, theirs,
    cannot be opened for writing (the cause was permission). The probe opens it read-only;
    a decision that cannot be written says so. (This test runs as one user: the other user's
    files are stood for by refusing every write-open of the run's files.)"""
    import subprocess

    from engine.store import commands
    from engine.store.journal import State

    rid, _ = _run({"I1": [State.PROPOSED]})
    run = run_path(rid)
    (run / "run.lock").write_text("")  # the other user's lock file
    holder = subprocess.Popen(  # the other user's run: a process holding the lock
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR);"
         " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
         str(run / "run.lock")], stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    real_open = os.open

    def theirs(path, flags, *a):  # what this user may not do to the other user's files
        if str(path).startswith(str(run)) and flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *a)

    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        monkeypatch.setattr(os, "open", theirs)
        assert is_live(run)
        with pytest.raises(DecisionError, match="cannot be written by this user"):
            commands.send(rid, "approve", "I1", "me")
    finally:
        holder.kill()
        holder.wait()


def test_decisions_are_checked_before_they_are_sent(tmp_path):
    P, A, AP, APL, V = (
        State.PROPOSED,
        State.APPROVED,
        State.APPLYING,
        State.APPLIED,
        State.VERIFIED,
    )
    rid, _ = _run({"I1": [P], "I2": [P, A, AP, APL, V]})
    with pytest.raises(DecisionError, match="not running"):
        send(rid, "approve", "I1", "t")  # nobody holds the lock: a dead run
    with RunLock(run_path(rid)) as lock:
        assert lock.acquire()
        with pytest.raises(DecisionError, match="I1 is PROPOSED: only a VERIFIED"):
            send(rid, "rollback", "I1", "t")  # used to exit 0 and be ignored
        with pytest.raises(DecisionError, match="I2 is VERIFIED: only a PROPOSED"):
            send(rid, "approve", "I2", "t")
        with pytest.raises(DecisionError, match="has no intervention 'I9'; it has I1, I2"):
            send(rid, "approve", "I9", "t")
        send(rid, "approve", "I1", "tester")
        send(rid, "rollback", "I2", "tester")
    reader = CommandReader(run_path(rid))
    got = [(d.action, d.iid, d.by) for d in reader.poll()]
    assert got == [("approve", "I1", "tester"), ("rollback", "I2", "tester")]
    assert reader.poll() == []  # read once


def test_a_path_as_run_id_writes_nothing_outside_the_store(tmp_path):
    """`gitm-tui approve ../../x I1` used to write commands.jsonl wherever a journal sat."""
    outside = tmp_path / "x"
    j = Journal(outside / "journal.jsonl")
    j.transition("I1", State.PROPOSED)
    with RunLock(outside) as lock:
        assert lock.acquire()
        for rid in ("../../x", str(outside)):
            with pytest.raises(ValueError):
                send(rid, "approve", "I1", "t")
    assert not (outside / "commands.jsonl").exists()


def test_the_reader_keeps_only_well_formed_decisions(tmp_path):
    rid, _ = _run({})
    path = run_path(rid) / "commands.jsonl"
    lines = [
        json.dumps({"action": "approve", "id": "I1", "by": "a"}),
        "not json",
        "[" * 50_000 + "]" * 50_000,
        json.dumps({"action": "format-disk", "id": "I1"}),
        json.dumps({"action": "approve", "id": ["I1"]}),
        json.dumps({"action": "reject", "id": "I2", "by": 5}),
    ]
    path.write_text("\n".join(lines) + "\n" + '{"action": "appro')  # a torn last line
    got = [(d.action, d.iid, d.by) for d in CommandReader(run_path(rid)).poll()]
    assert got == [("approve", "I1", "a"), ("reject", "I2", "cli")]


def test_recovery_never_writes_through_a_run_lock_that_is_a_link(tmp_path):
    """Issue 36: a dead run whose run.lock is a symbolic link (the store never makes one) had
    its holder's pid written into the link's target on recovery — any file the user can write.
    The lock is opened without following links: recovery leaves that run alone and says why,
    and the target is untouched."""
    from engine.store.journal import recover

    rid, _ = _run({"I1": [State.PROPOSED, State.APPROVED, State.APPLYING]})
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run_path(rid) / "run.lock").symlink_to(victim)
    found = [r for r in recover(runs_dir()) if r.run_dir.name == rid]
    assert victim.read_text() == "precious\n"
    assert found and found[0].error and "OSError" in found[0].error


def test_a_decisions_author_is_bounded_where_it_is_read(tmp_path):
    """Issue 36: the "by" of a decision line was unbounded (5 MB journaled and echoed three
    times). Whoever wrote the line, what comes out is a name of at most MAX_BY characters."""
    from engine.store.commands import MAX_BY, CommandReader

    (tmp_path / "commands.jsonl").write_text(
        json.dumps({"action": "approve", "id": "I1", "by": "x" * 5_000_000}) + "\n"
    )
    (d,) = CommandReader(tmp_path).poll()
    assert d.iid == "I1" and len(d.by) == MAX_BY and d.by.endswith("…")


def test_a_killed_runs_program_is_ended_by_the_next_start(tmp_path):
    """Issue 36: SIGKILL of gitm left the command workload running. The run folder notes the
    program's process group while it runs; recovery of the dead run ends that group — only if
    its leader is still the process the run started (a recycled pid is never signalled)."""
    import subprocess
    import sys

    from engine.store.journal import recover
    from engine.store.runs import PROGRAM, record_program

    rid, _ = _run({"I1": [State.PROPOSED]})
    prog = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        record_program(run_path(rid), prog.pid)
        (found,) = [r for r in recover(runs_dir()) if r.run_dir.name == rid]
        assert "ended its program's process group" in found.ended_program
        assert prog.wait(timeout=10) != 0  # ended by a signal
        assert not (run_path(rid) / PROGRAM).exists()
    finally:
        if prog.poll() is None:
            prog.kill()


def test_a_recycled_pid_is_never_signalled(tmp_path):
    import subprocess
    import sys

    from engine.store.journal import recover
    from engine.store.runs import PROGRAM

    rid, _ = _run({"I1": [State.PROPOSED]})
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:  # the note names this group, but with another start time: not the run's program
        (run_path(rid) / PROGRAM).write_text(json.dumps({"pgid": other.pid, "start": 1}))
        recover(runs_dir())
        assert other.poll() is None  # still running: not signalled
    finally:
        other.kill()
        other.wait()


#: a program that starts a grandchild in a session of its own (outside its process group),
#: writes the grandchild's pid to argv[1], prints the metric and exits at once
_ESCAPES = (
    "import subprocess, sys\n"
    "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
    " start_new_session=True)\n"
    "open(sys.argv[1], 'w').write(str(g.pid))\n"
    "print('time=1')\n"
)


def _gone(pid: int) -> bool:
    from engine.store.runs import _alive

    return not _alive(pid)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_a_grandchild_that_leaves_the_group_is_ended_with_the_program(tmp_path):
    """Issue 36: `setsid` grandchildren survived even a normal end (12 orphans over the probes).
    Every process a command workload starts carries its tag; the end of the program ends them."""
    import sys

    from engine.workloads.command import CommandSpec, CommandWorkload

    pidfile = tmp_path / "grandchild.pid"
    argv = (sys.executable, "-c", _ESCAPES, str(pidfile))
    wl = CommandWorkload(CommandSpec(argv=argv, metric=r"time=(\d+)"))
    assert wl.run_once(wl.base).ok
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:  # bounded: proves it ends, no timing
        time.sleep(0.05)
    assert _gone(pid), "the grandchild outlived the measurement"


#: a program that starts two daemons no tag can find — each in its own session with an empty
#: environment, one a double fork, both holding the output pipe open — and exits at once
_DAEMONS = (
    "import os, subprocess, sys\n"
    "a = subprocess.Popen(['sleep', '300'], env={}, start_new_session=True,"
    " executable='/bin/sleep')\n"
    "b = subprocess.Popen(['/bin/sh', '-c', 'sleep 300 & echo $! > \"$0\"; exec sleep 300',"
    " sys.argv[1] + '.b'], env={}, start_new_session=True)\n"
    "open(sys.argv[1], 'w').write(f'{a.pid} {b.pid}')\n"
    # the double fork made before the program goes on (a loaded machine had the reaper end the
    # shell before it forked: no daemon, and no file naming it, to look for)
    "import time\n"
    "for _ in range(800):\n"
    "    if os.path.exists(sys.argv[1] + '.b') and os.path.getsize(sys.argv[1] + '.b'):\n"
    "        break\n"
    "    time.sleep(0.025)\n"
    "print('time=1', flush=True)\n"
    "os._exit(0)\n"
)


@pytest.mark.skipif(sys.platform != "linux", reason="the child subreaper is Linux's")
@pytest.mark.parametrize("stop", [False, True], ids=["exits", "stopped"])
def test_daemons_with_no_environment_end_with_the_program_and_its_output(tmp_path, stop):
    """Issue 51: a program that forks a daemon with `setsid` and an empty environment left it
    running after the run, one per launch, and one that kept the output pipe open made the
    measurement wait past the program's end. The program runs under the reaper (a child
    subreaper): every descendant, tagged or not, ends with it, and so does its output — when
    it exits by itself and when the run stops it."""
    from engine.workloads.command import CommandSpec, CommandWorkload

    pidfile = tmp_path / "daemons.pid"
    code = _DAEMONS if not stop else _DAEMONS.replace("os._exit(0)", "import time; time.sleep(60)")
    argv = (sys.executable, "-c", code, str(pidfile))
    wl = CommandWorkload(CommandSpec(argv=argv, metric=r"time=(\d+)", timeout_s=60))
    if stop:
        threading.Timer(1.5, wl.cancel).start()
    t0 = time.monotonic()
    got = wl.run_once(wl.base)
    took = time.monotonic() - t0
    assert got.ok is (not stop), got.reason
    deadline = time.monotonic() + 10
    while not pidfile.with_name("daemons.pid.b").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(x) for x in pidfile.read_text().split()]
    forked = pidfile.with_name("daemons.pid.b")
    if forked.exists() and forked.read_text().strip():  # (else: its shell ended before it)
        pids.append(int(forked.read_text()))  # the double fork's
    deadline = time.monotonic() + 10
    while not all(map(_gone, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(map(_gone, pids)), [p for p in pids if not _gone(p)]
    assert took < 150  # (not a timing: the daemons held the output for 300 s, a wait on them
    # would take that long)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_recovery_ends_what_a_killed_runs_program_started_outside_its_group(tmp_path):
    import subprocess
    import sys

    from engine.store.journal import recover
    from engine.store.runs import TAG_VAR, new_tag, record_program

    rid, _ = _run({"I1": [State.PROPOSED]})
    tag = new_tag()
    env = {**os.environ, TAG_VAR: tag}
    leader = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    leader.wait()  # the program itself ended with the run; its escapee did not
    escapee = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"], env=env, start_new_session=True
    )
    bystander = subprocess.Popen(  # same program, another tag: not the dead run's
        [sys.executable, "-c", "import time; time.sleep(300)"],
        env={**os.environ, TAG_VAR: new_tag()},
        start_new_session=True,
    )
    try:
        record_program(run_path(rid), leader.pid, tag)
        (found,) = [r for r in recover(runs_dir()) if r.run_dir.name == rid]
        assert "ended 1 process(es) its program had started outside that group" in (
            found.ended_program
        )
        assert escapee.wait(timeout=10) != 0
        assert bystander.poll() is None
    finally:
        for p in (escapee, bystander):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_decision_is_never_written_through_a_link_out_of_the_store(tmp_path):
    """Issue 51: `approve` followed a run folder that was a link to a folder elsewhere."""
    import shutil

    from engine.store.journal import State

    rid, _ = _run({"I1": [State.PROPOSED]})
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(run_path(rid)), elsewhere)
    run_path(rid).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(DecisionError, match="no run"):
        send(rid, "approve", "I1", "me")
    assert not (elsewhere / "commands.jsonl").exists()


def test_a_decision_that_a_waiting_one_makes_impossible_is_refused_when_sent():
    """Issue 51: conflicting decisions both answered "sent" — `reject I1` then `approve I1`
    while the run had taken neither: the run then refused the approve, which the user had been
    told was sent. The decisions already sent and not yet journaled are taken into account."""
    from engine.store.journal import State

    rid, j = _run({"I1": [State.PROPOSED], "I2": [State.PROPOSED]})
    lock = RunLock(run_path(rid))
    assert lock.acquire()  # the run is live
    try:
        send(rid, "reject", "I1", "alice")
        with pytest.raises(
            DecisionError, match="still waits: once the run takes it, I1 is REJECTED"
        ):
            send(rid, "approve", "I1", "bob")
        with pytest.raises(DecisionError, match=r"sent already .* not sent twice"):
            send(rid, "reject", "I1", "bob")
        send(rid, "approve", "I2", "alice")
        send(rid, "reject", "I2", "bob")  # an approved one may still be rejected: in order
        j.transition("I1", State.REJECTED, by="alice")  # the run took the reject
        with pytest.raises(DecisionError, match="I1 is REJECTED"):
            send(rid, "approve", "I1", "bob")  # (the journal's state says it now)
        lines = (run_path(rid) / "commands.jsonl").read_text().splitlines()
        assert [json.loads(x)["action"] for x in lines] == ["reject", "approve", "reject"]
    finally:
        lock.release()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_the_commands_file_does_not_hang_the_conflict_check():
    """The check of decisions still waiting reads the commands file: a FIFO planted there is
    not read, and not written: either would block `approve` forever (no one reads it)."""
    from engine.store.commands import _conflict
    from engine.store.journal import State

    rid, _ = _run({"I1": [State.PROPOSED]})
    os.mkfifo(run_path(rid) / "commands.jsonl")
    assert _conflict(run_path(rid), "approve", "I1", State.PROPOSED, 0.0) is None
    lock = RunLock(run_path(rid))
    assert lock.acquire()  # live
    try:
        with pytest.raises(DecisionError, match=r"cannot be written .*nothing was sent"):
            send(rid, "approve", "I1", "me")  # (opening the FIFO to write blocked forever)
    finally:
        lock.release()
