"""Shared fixtures: a runner for the CLI, and TransformerEngine 2.20.2 from PyPI."""

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


def run_cli(*args: str, cwd: str | os.PathLike | None = None, input: bytes | None = None):
    """Run ``python -m gradgate ARGS`` as a user would; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "gradgate", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")},
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


@pytest.fixture(scope="session", autouse=True)
def _private_user_cache(tmp_path_factory):
    """The tests' CLI runs cache results (and keep the cache's secret key) in a folder of
    their own, not in the user's ~/.cache/gradgate."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved
