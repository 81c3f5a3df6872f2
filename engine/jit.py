"""The one numba decorator every kernel uses (EESM, importers, replay): cached to disk, GIL released,
no object mode. At the bottom of the package layers: any layer may compile a kernel.

The first run after an install compiles every kernel it calls (about 20 s for `analyze` on a
2-core machine, nearly all numba's type inference: Python holding the GIL). Two helpers let a
caller spend that time better: ``cold(kernels)`` says whether kernels are missing from the disk
cache (so a caller can say "first run: compiling"), and ``compile_elsewhere(module)`` runs
``python -m module`` — a module whose main calls the production code on tiny inputs — in a child
process, which fills the cache on another core (and off the UI's thread: compiling in a thread
would hold the GIL for seconds) while this process does other work; ``wait_compiled`` then lets
this process load what the child compiled. A child that fails costs nothing: what is still
missing compiles here on first call, as without it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from numba import njit

#: cache=True keeps compiled kernels in __pycache__ (or numba's user cache dir when that is not
#: writable) so only the very first run pays compilation; nogil=True lets a worker thread run a
#: kernel while the UI thread keeps drawing.
jit = njit(cache=True, nogil=True)


def cold(kernels: Iterable[Any]) -> bool:
    """True when one of ``kernels`` (numba dispatchers) has no compiled code in the disk cache
    (its index file is missing). False when all are there — or when it cannot be told: numba's
    cache layout is not public API, and an unknown layout never claims a first run."""
    for disp in kernels:
        try:
            index = disp._cache._cache_file._index_path
        except AttributeError:
            return False
        if not os.path.exists(index):
            return True
    return False


def compile_elsewhere(module: str, *args: str) -> subprocess.Popen[bytes] | None:
    """Start ``python -m module args…`` (a warm-up main) in a child; None when it cannot start.
    Its output is discarded: its only product is numba's disk cache."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)  # this checkout first, as in this process
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # a ctrl-c at the terminal is meant for the user's process
        )
    except OSError:
        return None


def wait_compiled(child: subprocess.Popen[bytes] | None, timeout: float = 180.0) -> bool:
    """Wait for a child of ``compile_elsewhere``; True when it finished cleanly. One still
    running after ``timeout`` is stopped (this process compiles what is missing itself)."""
    if child is None:
        return False
    try:
        return child.wait(timeout=timeout) == 0
    except subprocess.TimeoutExpired:
        child.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
        return False
