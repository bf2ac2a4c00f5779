#!/usr/bin/env bash
# One H200: the v2 overlay built, diffed, imported and run; the witness tests with NCCL.
set -o pipefail
cd "$(dirname "$0")/.."
eval "$(bash .gpu/install-te.sh | tail -1)"
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . 2>&1 | grep -v WARN | tail -2
export PYTHONUNBUFFERED=1 XDG_CACHE_HOME=/tmp/xdg
nvidia-smi -L
python3 - <<'PY' 2>&1 | tee "$OUT/overlay.log"
import subprocess, sys
from pathlib import Path
from gradgate.harness.overlay import build_fixed_overlay, locate_installed_package
import os
print("gradgate commit:", os.environ.get("GRADGATE_COMMIT", "?"))
ov, fix, changed = build_fixed_overlay(locate_installed_package(), Path("/tmp/te-overlay"))
print("fix exit", fix.exit_code, fix.meaning)
print("before:", [(f["path"], f["line"], f["rule"], f["fixable"]) for f in fix.findings_before])
print("after:", fix.findings_after)
for c in changed:
    print(c.path, c.hunks)
    print(c.diff)
PY
PYTHONPATH="/tmp/te-overlay:$PYTHONPATH" python3 - <<'PY' 2>&1 | tee "$OUT/import.log"
import warnings; warnings.simplefilter("ignore")
import torch, transformer_engine, transformer_engine.pytorch as te
print("fixed TE imported from", transformer_engine.__file__)
torch.manual_seed(0)
x = torch.randn(64, 1024, device="cuda", requires_grad=True)
for name, m in (("LayerNormLinear", te.LayerNormLinear(1024, 1024)), ("LayerNormMLP", te.LayerNormMLP(1024, 4096))):
    m = m.cuda()
    with torch.no_grad():
        a = m(x)
    b = m(x)
    b.sum().backward()
    print(name, "no_grad vs grad forward max |diff| =", (a - b).abs().max().item(), "grad ok:", x.grad is not None)
PY
GRADGATE_WITNESS_BACKEND=nccl GRADGATE_WITNESS_NPROC=1 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/test_witness_torch.py tests/test_witness_cpu.py tests/test_harness_rank_cpu.py 2>&1 | tee "$OUT/witness-gpu.log"
