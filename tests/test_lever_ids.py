"""Levers own their special cases (issue 48): no code outside engine/levers compares a lever's
id — what the analysis, the ceilings, the critical path, "already in use", the gate and the
torch loop need of a lever, the lever declares (engine.levers.base.Lever's capabilities,
TorchLever.replayed_as). A new lever is then its class and its manifest entry."""

from __future__ import annotations

import re

from engine.levers.library import LEVERS, answering, having
from engine.levers.torch_levers import TORCH_LEVERS
from tests.paths import ROOT

#: places where a lever's id is spelt as a value of something else, not compared as an id:
#: the simulated device's allocator setting and PYTORCH_CUDA_ALLOC_CONF's option share the
#: name "expandable_segments"; "already in use" names the feature CUDA graphs (analysis.json's
#: ``already_in_use[].what``) by the word the cuda_graphs lever declares in ``in_use_as``
_NOT_A_LEVER_ID = {
    ("engine/analyze/breakdown/in_use.py", "cuda_graphs"),
    ("engine/manifest.py", "expandable_segments"),
    ("engine/device/simulator.py", "expandable_segments"),
    ("engine/workloads/torch_launch.py", "expandable_segments"),
}


def test_no_lever_id_is_spelt_outside_engine_levers() -> None:
    ids = sorted(lv.id for lv in LEVERS)
    alternatives = "|".join(map(re.escape, ids))
    quoted = re.compile(rf"""["']({alternatives})["']""")
    found = []
    for pkg in ("engine", "gitm_tui"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            rel = f.relative_to(ROOT).as_posix()
            if rel.startswith("engine/levers/"):
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                for m in quoted.finditer(line):
                    if (rel, m.group(1)) not in _NOT_A_LEVER_ID:
                        found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "lever ids spelt outside engine/levers:\n" + "\n".join(found)


def test_the_capabilities_name_real_levers_and_opportunities() -> None:
    ids = {lv.id for lv in LEVERS}
    for tl in TORCH_LEVERS:
        assert set(tl.replayed_as) <= ids, tl.id
    assert {lv.estimate for lv in LEVERS} <= {"replay", "graphs", "ceiling", "allocator"}
    for what in ("allocation", "data_loading", "host"):
        assert answering(what), what  # each critical-path opportunity names a lever
    assert {lv.precision_target for lv in LEVERS} - {""} == {"tf32", "bf16"}
    assert having(moves_copies=True) and having(per_sample=True) and having(removes_syncs=True)
