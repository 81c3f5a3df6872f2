"""Shared fixtures, and the one rule for running the suite in parallel (pytest-xdist).

The suite runs on every core (``-n auto`` in pyproject's addopts). A test marked ``quiet``
measures a gain with the optimize loop on a real program, and asserts what a quiet machine
gives (a verdict, a gain's interval): run beside another test it would measure that test's load
— the loop then honestly says "not measurable", and the test fails for the wrong reason. So
under xdist each test holds a shared lock on one file for its whole protocol (set-up, call,
tear-down) and a quiet test an exclusive one: it waits for the tests running on the other
workers to finish, and they start none while it runs (a second file, taken exclusively by a
waiting quiet test, keeps a stream of ordinary tests from starving it). Without xdist
(``-p no:xdist``, ``-n 0``) nothing is locked.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

# imported before any test starts threads: parsing hypothesis (pytest rewrites it) at the end
# of a run whose threads are still winding down hit a CPython 3.11 AST error
import hypothesis  # noqa: F401
import pytest

from engine.eesm.pipeline import EesmModel
from engine.manifest import load_hardware


@pytest.fixture(scope="session")
def hw():
    return load_hardware()


@pytest.fixture(scope="session")
def model(hw):
    return EesmModel.build(hw)


@pytest.fixture(autouse=True)
def _scratch(tmp_path, monkeypatch):
    """Every test's run store is its own temp dir (never the user's data dir)."""
    monkeypatch.setenv("GITM_SCRATCH", str(tmp_path / "scratch"))
    return tmp_path / "scratch"


def pytest_configure(config: pytest.Config) -> None:
    """In the process that starts the xdist workers: the folder of their locks (in the
    environment they inherit)."""
    if getattr(config.option, "numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):
        import tempfile

        os.environ["GITM_TEST_LOCKS"] = tempfile.mkdtemp(prefix="gitm-test-locks-")


def pytest_unconfigure(config: pytest.Config) -> None:
    d = os.environ.get("GITM_TEST_LOCKS")
    if d and not os.environ.get("PYTEST_XDIST_WORKER"):
        import shutil

        shutil.rmtree(d, ignore_errors=True)


def _lock_dir() -> Path | None:
    """The folder the workers of this run share (None when the suite runs in one process)."""
    d = os.environ.get("GITM_TEST_LOCKS")
    return Path(d) if d and os.environ.get("PYTEST_XDIST_WORKER") else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    root = _lock_dir()
    if root is None:
        return (yield)
    quiet = item.get_closest_marker("quiet") is not None
    with open(root / "turnstile", "a") as turn, open(root / "machine", "a") as machine:
        fcntl.flock(turn, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        fcntl.flock(machine, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        if not quiet:
            fcntl.flock(turn, fcntl.LOCK_UN)  # only a waiting quiet test holds it
        try:
            return (yield)
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)
            fcntl.flock(turn, fcntl.LOCK_UN)
