"""The evaluation suite: gradgate against hand-labelled grad-mode reads in five real
libraries from PyPI (eval/labels.csv). Every labelled bug found, no other finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # five libraries from PyPI, 20 s


@pytest.mark.network  # eval/evaluate.py downloads the five packages from PyPI
def test_precision_and_recall_are_one_on_all_packages(tmp_path):
    out = tmp_path / "eval.json"
    command = [sys.executable, str(ROOT / "eval" / "evaluate.py"), "--json", str(out)]
    cache = os.environ.get("GRADGATE_TEST_CACHE")
    if cache:
        command += ["--cache", os.path.join(cache, "eval")]
    result = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    numbers = json.loads(out.read_text())
    assert numbers["missed"] == [] and numbers["false_positives"] == [] and numbers["errors"] == []
    assert {name: (p["labelled_bugs"], p["found"]) for name, p in numbers["packages"].items()} == {
        "transformer-engine": (3, 3),
        "megatron-core": (2, 2),
        "deepspeed": (1, 1),
        "torchtitan": (0, 0),
        "nemo-toolkit": (0, 0),
    }
    assert {rule: (r["labelled_bugs"], r["found"]) for rule, r in numbers["rules"].items()} == {
        "GG001": (4, 4),
        "GG002": (0, 0),
        "GG003": (2, 2),
    }
