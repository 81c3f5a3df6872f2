#!/usr/bin/env bash
# The prepared device check for issue #5 (one run, ~3 minutes): gitm-tui doctor, 20 s of live
# NVML sampling, and a CUPTI capture of a small CUDA program, on a GPU machine.
#
# The H200 image has numpy, scipy, numba, rich, nvidia-ml-py, prometheus-client, fsspec and
# libcupti (nvidia-cuda-cupti) but not textual, pydantic, platformdirs, isal or
# cupti-python, and cannot reach the package index. Carry them as wheels first (here):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       -d .whl textual pydantic platformdirs isal cupti-python
# then run this script there with $OUT set (the device tool sets it).
set -u
OUT=${OUT:-/tmp/gitm-device-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/device_check.log") 2>&1
PY=${PY:-python3}
if [ -d .whl ]; then $PY -m pip install -q --no-index --find-links .whl textual pydantic platformdirs isal cupti-python || true; fi
$PY -m pip install -q --no-deps --no-build-isolation -e . || $PY -m pip install -q --no-deps -e .
export GITM_SCRATCH="$OUT/scratch"
echo "== nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv || true
echo "== doctor"; $PY -m gitm_tui doctor; $PY -m gitm_tui doctor --json > "$OUT/doctor.json"
echo "== 20 s of NVML sampling"
$PY -m gitm_tui --no-ui --device nvidia --budget 20s --interval 0.5 --prometheus 0 > "$OUT/nvml_events.jsonl"
echo "exit $?"
$PY - "$OUT" <<'PYEOF'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1] + "/nvml_events.jsonl")]
tel = [r for r in rows if r["type"] == "telemetry"]
print("telemetry samples:", len(tel), "devices:", sorted({r["device"] for r in tel}))
absent = collections.Counter(k for r in tel for k, v in r.items() if v is None)
print("fields absent (count):", dict(absent))
print("first sample:", json.dumps(tel[0], indent=None)[:1500] if tel else None)
PYEOF
echo "== sampler cost on this GPU"
$PY - <<'PYEOF'
import statistics
from engine.telemetry.backends import NvmlBackend
from engine.telemetry.sampler import Sampler
s = Sampler(NvmlBackend())
for _ in range(200): s.sample_once()
us = sorted(c * 1e6 for c in s.cost_s)
print(f"NVML round: median {statistics.median(us):.0f} us, p99 {us[int(0.99*len(us))-1]:.0f} us, devices {len(s.backend.devices)}")
PYEOF
echo "== CUPTI capture of a small torch program"
$PY -m gitm_tui capture --flush 0.2 -- python benchmarks/device_torch_step.py > "$OUT/capture_rows.jsonl"
echo "exit $?"
wc -l "$OUT/capture_rows.jsonl"
TRACE=$(ls -t "$GITM_SCRATCH"/runs/*/trace.json 2>/dev/null | head -1)
[ -n "$TRACE" ] && $PY -m gitm_tui analyze "$TRACE" --no-write | head -60
