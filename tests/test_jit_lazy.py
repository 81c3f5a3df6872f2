"""engine.jit imports numba on a kernel's first compiled call, not when a module defines one:
until then a kernel is its Python (a ``Kernel``); the first compiled call builds every kernel's
dispatcher and puts it in place of the Kernel wherever a module names one, so a compiled kernel
calling another finds a dispatcher, and ``interpreted`` swaps both ways."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.paths import ROOT

SCRIPT = r"""
import json, sys
import numpy as np
from engine import jit as J
from engine.jit import interpreted, jit, numba_in_use
from engine.trace import idle_calls  # an engine module's kernel (interpreted swaps engine's)

@jit
def inner(x):
    return x * 2

@jit
def outer(a):
    s = 0
    for v in a:
        s += inner(v)
    return s

held = outer  # a reference kept before numba is needed
a = np.arange(5)
out = {"engine_before": type(idle_calls._runs).__name__, "type_before": type(outer).__name__, "numba_before": "numba" in sys.modules,
       "in_use_before": numba_in_use()}
with interpreted():
    out["interpreted_before"] = int(outer(a))
    out["numba_after_interpreted"] = "numba" in sys.modules
out["compiled"] = int(outer(a))  # the first compiled call: numba imported, names swapped
me = sys.modules["__main__"]
out["type_after"] = type(me.outer).__name__
out["inner_after"] = type(me.inner).__name__
out["held_still_works"] = int(held(a))
out["engine_after"] = type(idle_calls._runs).__name__
with interpreted():
    out["interpreted_after"] = type(idle_calls._runs).__name__
    out["interpreted_value"] = int(held(a))
out["restored"] = type(idle_calls._runs).__name__
out["signatures"] = len(held.signatures)  # the dispatcher's attributes, through the Kernel

@jit
def later(x):  # defined once numba is in use: a dispatcher at once
    return x + 1
out["later"] = [type(later).__name__, int(later(1))]
print(json.dumps(out))
"""


def test_numba_is_imported_by_the_first_compiled_call_and_every_name_follows(tmp_path):
    script = tmp_path / "kernels.py"  # (numba caches a kernel beside its source file)
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    p = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300,
        cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["type_before"] == out["engine_before"] == "Kernel"
    assert out["numba_before"] is False and out["in_use_before"] is False
    assert out["interpreted_before"] == 20 and out["numba_after_interpreted"] is False
    assert out["compiled"] == 20
    assert out["type_after"] == out["inner_after"] == out["engine_after"] == "CPUDispatcher"
    assert out["held_still_works"] == 20
    assert out["interpreted_after"] == "function" and out["interpreted_value"] == 20
    assert out["restored"] == "CPUDispatcher"
    assert out["signatures"] == 1
    assert out["later"] == ["CPUDispatcher", 2]


def test_importing_the_analysis_and_the_cli_does_not_import_numba():
    code = (
        "import sys, engine.analyze.api, engine.analyze.run, gitm_tui.cli, gitm_tui.analyze_view\n"
        "import engine.trace.kineto.json_scan, engine.schedule.dag, engine.eesm.viterbi\n"
        "print(sorted(m for m in ('numba', 'llvmlite') if m in sys.modules))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
        cwd=ROOT,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "[]"


def test_a_kernel_is_pickled_by_name():
    import pickle

    from engine import jit
    from engine.trace import idle_calls

    named = idle_calls._runs  # the Kernel, or its dispatcher once numba is in use here
    k = named if type(named) is jit.Kernel else jit._OWNER[id(named)]
    assert type(k) is jit.Kernel
    assert pickle.loads(pickle.dumps(k)) is named  # what its module names in this process
