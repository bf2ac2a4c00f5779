"""Install and onboarding as documented: the README's set-up commands, the pre-commit
`rev:` the docs name, one version, a licence, and an sdist whose tests collect."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import ROOT


def _sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def test_readme_set_up_is_two_commands_in_a_fresh_virtual_environment():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    commands = [line for block in _sh_blocks(section) for line in block.splitlines() if line.strip()]
    assert commands == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/gradgate check --show-source examples/",
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q -rs",
    ]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv" in ci and ".venv/bin/python -m pytest -q -rs --slow" in ci


def test_the_docs_name_no_placeholder_address_or_rev():
    """No ``<you>`` address, no old ``rev: v0.1.0``: tests/test_docs.py checks that what
    the docs pin is an annotated tag of this repository with what they use."""
    for name in ("README.md", "docs/ci.md", "docs/editors.md", "docs/pre-commit.md", ".pre-commit-hooks.yaml"):
        text = (ROOT / name).read_text()
        assert "<you>" not in text and "rev: v0.1.0" not in text, name


def test_version_licence_and_metadata_in_one_place():
    import tomllib

    import gradgate

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", gradgate.__version__)  # PEP 440, a pre-release too
    licence = (ROOT / "LICENSE").read_text()
    assert licence.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in licence


@pytest.mark.slow
@pytest.mark.network  # the build backend (setuptools>=77) is fetched into an isolated environment
def test_sdist_carries_what_its_tests_need(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(ROOT)], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (sdist,) = tmp_path.glob("gradgate-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {Path(*Path(n).parts[1:]).as_posix() for n in archive.getnames()}
        archive.extractall(tmp_path / "x", filter="data")
    for needed in (
        "LICENSE",
        "README.md",
        ".pre-commit-hooks.yaml",
        "tests/conftest.py",
        "tests/data/sarif-schema-2.1.0.json",
        "tests/data/README.md",
        "tests/fixtures/gg001",
        "docs/rules/GG001.md",
        "docs/editors.md",
        "examples/overlap_forward.py",
        "eval/labels.csv",
        "rules/gg100_unused_suppression.py",
    ):
        assert needed in names or any(n.startswith(needed + "/") for n in names), needed
    (root,) = (tmp_path / "x").iterdir()
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HOME": str(tmp_path)},
    )
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-2000:]
    assert "error" not in collected.stdout.splitlines()[-1]


@pytest.mark.slow
def test_mypy_is_green_without_torch(tmp_path):
    """CONTRIBUTING's install without torch: mypy still passes (issue 28.6; it was 26
    errors). The environment is this one's site-packages less torch, linked entry by entry."""
    import os
    import shutil
    import sysconfig

    mypy = shutil.which("mypy", path=os.path.dirname(sys.executable))
    if mypy is None:
        pytest.skip("mypy (the dev extra) is not installed")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True)
    here = Path(sysconfig.get_paths()["purelib"])
    (there,) = (tmp_path / "env" / "lib").glob("python3*/site-packages")
    for entry in here.iterdir():
        if not entry.name.startswith(("torch", "functorch", "torchgen", "__editable__")):
            (there / entry.name).symlink_to(entry)
    assert not (there / "torch").exists()
    done = subprocess.run(
        [mypy, "--python-executable", str(tmp_path / "env" / "bin" / "python")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith("Success: no issues found")
