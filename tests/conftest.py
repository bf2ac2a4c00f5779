"""Shared fixtures: a runner for the CLI, and TransformerEngine 2.20.2 from PyPI.

Every test that needs the network carries the ``network`` marker, so that
``pytest -m "not network"`` runs offline: those using the TE download (``te_sources``,
``te_copy``) are marked here by their fixtures; the others (pip, pre-commit) mark
themselves.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

TE_VERSION = "2.20.2"
ROOT = Path(__file__).resolve().parent.parent
#: fixtures that download from PyPI: a test using one (directly or not) needs the network
NETWORK_FIXTURES = frozenset({"te_sources", "te_copy"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if NETWORK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.network)


def run_cli(*args: str, cwd: str | os.PathLike | None = None, input: bytes | None = None,
            env: dict[str, str] | None = None):
    """Run ``python -m gradgate ARGS`` as a user would (``env`` added to the
    environment, without NO_COLOR/FORCE_COLOR unless given); returns the CompletedProcess."""
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run(
        [sys.executable, "-m", "gradgate", *args],
        cwd=cwd,
        input=input if input is not None else b"",
        capture_output=True,
        env={**base, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})},
    )


def _download_te(target: Path) -> Path:
    """Download and unpack the pure-Python transformer-engine wheel; returns the folder
    that holds ``transformer_engine/``."""
    wheel_dir = target / "wheel"
    unpacked = target / "unpacked"
    if (unpacked / "transformer_engine").is_dir():
        return unpacked
    wheel_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
         f"transformer-engine=={TE_VERSION}", "-d", str(wheel_dir)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheel_dir.glob("transformer_engine-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.startswith("transformer_engine/")]
        archive.extractall(unpacked, members)
    return unpacked


@pytest.fixture(scope="session")
def te_sources(tmp_path_factory) -> Path:
    """TransformerEngine 2.20.2's sources, downloaded once per test session (cached
    across sessions under GRADGATE_TEST_CACHE if set)."""
    cache = os.environ.get("GRADGATE_TEST_CACHE")
    base = Path(cache) / f"te-{TE_VERSION}" if cache else tmp_path_factory.mktemp("te")
    try:
        return _download_te(base)
    except subprocess.CalledProcessError as exc:  # pragma: no cover - offline machines
        pytest.fail(f"could not download transformer-engine=={TE_VERSION}: {exc.stderr.decode()[-500:]}")


@pytest.fixture
def te_copy(te_sources, tmp_path) -> Path:
    """A private, writable copy of the TE sources."""
    target = tmp_path / "te"
    shutil.copytree(te_sources, target)
    return target
