"""Shared fixtures."""

from __future__ import annotations

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
