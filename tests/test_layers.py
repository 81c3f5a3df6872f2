"""The package map holds: engine packages import only downward and never the UI (the contracts
in pyproject.toml, checked by import-linter), and importing every engine module loads neither
textual nor rich."""

from __future__ import annotations

import subprocess
import sys

from tests.paths import ROOT


def test_import_contracts_hold():
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports; raise SystemExit(lint_imports())",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    contracts = (ROOT / "pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    assert f"{contracts} kept, 0 broken" in r.stdout


def test_no_engine_module_loads_the_ui():
    code = (
        "import importlib, pkgutil, sys\n"
        "import engine\n"
        "for m in pkgutil.walk_packages(engine.__path__, 'engine.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('textual', 'rich', 'gitm_tui'))\n"
        "print(len([n for n in sys.modules if n.startswith('engine.')]), bad)\n"
        "raise SystemExit(1 if bad else 0)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    n = int(r.stdout.split()[0])
    assert n > 60  # every module was imported, not just the package
