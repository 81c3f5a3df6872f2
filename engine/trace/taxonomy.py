"""Kernel class from the kernel name, by the ordered rules of manifests/kernel_taxonomy.json."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

import numpy as np

from engine.trace.segments import Klass, NameTable


@lru_cache(maxsize=1)
def _rules() -> tuple[tuple[Klass, re.Pattern[str]], ...]:
    data = json.loads(resources.files("manifests").joinpath("kernel_taxonomy.json").read_text())
    out = []
    for rule in data["rules"]:
        pattern = "|".join(f"(?:{p.lower()})" for p in rule["patterns"])
        out.append((Klass[rule["klass"]], re.compile(pattern)))
    return tuple(out)


@lru_cache(maxsize=65536)
def classify(name: str) -> Klass:
    """Return the kernel class of a kernel (or copy) name; OTHER when no rule matches. Names
    are matched lowercased (5x faster on 300-character kernel names than re.IGNORECASE)."""
    low = name.lower()
    for klass, rx in _rules():
        if rx.search(low):
            return klass
    return Klass.OTHER


def classify_table(names: NameTable) -> np.ndarray:
    """Return the class of every interned name (uint8, indexed like the name table)."""
    return np.array([classify(n) for n in names.names()], dtype=np.uint8)
