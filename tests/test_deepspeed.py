"""DeepSpeed 0.12.6 from PyPI: the ZeRO-3 end-of-forward hook resets the coordinator
picked by grad mode while the forward hooks pick it by ``module.training`` (DeepSpeed
issue #4922), and the fused transformer kernel's training mode is conjoined with grad
mode; nothing else in the package is reported."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from gradgate.config import Config
from gradgate.discovery import discover
from gradgate.engine import lint_file

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def deepspeed_0_12_6(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("deepspeed")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--quiet",
            "deepspeed==0.12.6",
            "-d",
            str(target),
        ],
        check=True,
        capture_output=True,
    )
    (archive,) = target.glob("deepspeed-0.12.6.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(
            target, [m for m in tar.getmembers() if m.name.startswith("deepspeed-0.12.6/deepspeed/")], filter="data"
        )
    return target / "deepspeed-0.12.6"


def test_deepspeed_0_12_6_findings(deepspeed_0_12_6, monkeypatch):
    monkeypatch.chdir(deepspeed_0_12_6)
    findings = [f for d in discover(["deepspeed"]) for f in lint_file(d.path, Config()).findings]
    assert [(f.path, f.line, f.column, f.rule) for f in findings] == [
        ("deepspeed/ops/transformer/transformer.py", 166, 79, "GG003"),
        ("deepspeed/runtime/zero/parameter_offload.py", 349, 20, "GG004"),
    ]
    assert (
        "`get_param_coordinator(training=)` is fed grad mode here (`torch._C.is_grad_enabled()`)" in findings[1].message
    )
