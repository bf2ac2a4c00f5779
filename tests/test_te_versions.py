"""Detection v2 on TransformerEngine releases nobody tuned gradgate to, from PyPI.

TE 1.x gates the UserBuffers all-gather in another form (TE issue #1398):
``if tp_world_size == 1 or (not is_grad_enabled): ub_overlap_ag = False``, and grad
mode also picks the normalization kernel that writes the UserBuffers buffer, so the
fix is unsafe and names that line. TE 2.x has the seed bug's form (#2902).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import _download_te

from gradgate.config import Config
from gradgate.discovery import discover
from gradgate.engine import lint_file, lint_source
from gradgate.results import Applicability

pytestmark = [pytest.mark.network, pytest.mark.slow]  # ten releases from PyPI

MODULE = "transformer_engine/pytorch/module"
#: release -> (file, line, column, flag, the line grad mode also prepares the path at)
EXPECTED = {
    "1.9.0.post1": [
        ("layernorm_linear.py", 124, 43, "ub_overlap_ag", 142),
        ("layernorm_mlp.py", 145, 43, "ub_overlap_ag", 157),
    ],
    "1.11.0": [
        ("layernorm_linear.py", 112, 43, "ub_overlap_ag", 137),
        ("layernorm_mlp.py", 144, 43, "ub_overlap_ag", 158),
    ],
    "1.13.0": [
        ("layernorm_linear.py", 116, 43, "ub_overlap_ag", 141),
        ("layernorm_mlp.py", 148, 43, "ub_overlap_ag", 162),
    ],
    "2.1.0": [
        ("layernorm_linear.py", 141, 37, "ub_overlap_ag_fprop", None),
        ("layernorm_mlp.py", 180, 43, "ub_overlap_ag", None),
        ("layernorm_mlp.py", 181, 43, "ub_overlap_rs", None),
    ],
    "2.8.0": [
        ("layernorm_linear.py", 177, 37, "ub_overlap_ag_fprop", None),
        ("layernorm_mlp.py", 241, 43, "ub_overlap_ag", None),
        ("layernorm_mlp.py", 242, 43, "ub_overlap_rs", None),
    ],
}


@pytest.fixture(scope="session")
def te_release(tmp_path_factory):
    cache: dict[str, Path] = {}

    def get(version: str) -> Path:
        if version not in cache:
            wheels = (
                Path(os.environ["GRADGATE_TEST_CACHE"]) / f"te-{version}" / "wheel"
                if os.environ.get("GRADGATE_TEST_CACHE")
                else None
            )
            cache[version] = _download_te(tmp_path_factory.mktemp(f"te-{version}"), wheels, version)
        return cache[version]

    return get


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_each_release_reports_exactly_its_gates(te_release, version, monkeypatch):
    root = te_release(version)
    monkeypatch.chdir(root)
    findings = [f for d in discover(["transformer_engine"]) for f in lint_file(d.path, Config()).findings]
    got = [(Path(f.path).name, f.line, f.column, f.rule) for f in findings]
    assert got == [(name, line, column, "GG001") for name, line, column, _, _ in EXPECTED[version]]
    for finding, (_, _, _, flag, coupled) in zip(findings, EXPECTED[version]):
        assert f"forward communication flag `{flag}` is gated on grad mode (`is_grad_enabled`)" in finding.message
        if coupled is None:
            assert finding.applicability is Applicability.SAFE
        else:
            assert finding.applicability is Applicability.UNSAFE
            assert f"prepared at line {coupled}: fix unsafe" in finding.message


@pytest.mark.parametrize("version", ["1.9.0.post1", "1.13.0"])
def test_te1_fix_is_unsafe_and_removes_only_the_operand(te_release, version):
    path = te_release(version) / MODULE / "layernorm_mlp.py"
    data = path.read_bytes()
    safe = lint_source(str(path), data, Config(), fix=True)
    assert safe.fixed is None and len(safe.findings) == 1  # not applied without --unsafe-fixes
    unsafe = lint_source(str(path), data, Config(), fix=True, unsafe_fixes=True)
    assert unsafe.findings == ()
    old, new = data.decode().splitlines(), unsafe.fixed.decode().splitlines()
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    assert len(old) == len(new) and len(changed) == 1
    line = old[changed[0]]
    assert " or (not is_grad_enabled)" in line
    assert new[changed[0]] == line.replace(" or (not is_grad_enabled)", "")
