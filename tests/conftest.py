"""Shared fixtures."""

from __future__ import annotations

import pytest

from engine.eesm.pipeline import EesmModel
from engine.manifest import load_hardware


@pytest.fixture(scope="session")
def hw():
    return load_hardware()


@pytest.fixture(scope="session")
def model(hw):
    return EesmModel.build(hw)
