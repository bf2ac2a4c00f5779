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


def pytest_addoption(parser):
    parser.addoption(
        "--slow", action="store_true", help="also run the tests marked slow (downloads, real tools; .ci/run does)"
    )


def pytest_collection_modifyitems(config, items):
    """Network tests marked by their fixtures; ``slow`` tests skipped (not deselected: a
    run of only slow tests reports them skipped and exits 0, never 5) unless ``--slow``
    or ``GRADGATE_SLOW_TESTS=1``."""
    slow = config.getoption("--slow") or os.environ.get("GRADGATE_SLOW_TESTS") == "1"
    skip = pytest.mark.skip(reason="slow: run with --slow (as .ci/run does)")
    for item in items:
        if NETWORK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.network)
        if not slow and item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


def run_cli(
    *args: str, cwd: str | os.PathLike | None = None, input: bytes | None = None, env: dict[str, str] | None = None
):
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


class Invoked:
    """What :func:`invoke` saw: the exit code and the bytes written to each stream."""

    def __init__(self, exit_code: int, stdout_bytes: bytes, stderr_bytes: bytes) -> None:
        self.exit_code = exit_code
        self.stdout_bytes = stdout_bytes
        self.stderr_bytes = stderr_bytes

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def output(self) -> str:
        """Standard output, then standard error."""
        return self.stdout + self.stderr


def invoke(args, input: bytes = b"", cwd: str | os.PathLike | None = None) -> Invoked:
    """``gradgate ARGS`` in this process (``gradgate.cli.run``), so monkeypatches apply:
    standard input reads ``input``; an exception escaping the command fails the test."""
    import contextlib
    import io

    from gradgate.cli import run

    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = io.TextIOWrapper(io.BytesIO(input), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    try:
        with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
            code = run(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
        return Invoked(code, out.getvalue(), err.getvalue())
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def _download_te(target: Path, wheels: Path | None = None, version: str = TE_VERSION) -> Path:
    """Download (into ``wheels``, default ``target/wheel``, unless already there) and unpack
    (into ``target/unpacked``) the pure-Python transformer-engine wheel of ``version``;
    returns the folder that holds ``transformer_engine/``."""
    wheel_dir = wheels or target / "wheel"
    unpacked = target / "unpacked"
    if (unpacked / "transformer_engine").is_dir():
        return unpacked
    wheel_dir.mkdir(parents=True, exist_ok=True)
    if not list(wheel_dir.glob("transformer_engine-*.whl")):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--quiet",
                f"transformer-engine=={version}",
                "-d",
                str(wheel_dir),
            ],
            check=True,
            capture_output=True,
        )
    (wheel,) = wheel_dir.glob("transformer_engine-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.startswith("transformer_engine/")]
        archive.extractall(unpacked, members)
    return unpacked


@pytest.fixture(scope="session", autouse=True)
def checkout_is_left_alone():
    """No test may write into this checkout: its examples and fixtures are compared
    before and after the session."""
    watched = sorted(
        p for folder in ("examples", "tests/fixtures", "rules", "gradgate") for p in (ROOT / folder).rglob("*.py")
    )
    before = {p: p.read_bytes() for p in watched}
    yield
    changed = [str(p.relative_to(ROOT)) for p, data in before.items() if not p.exists() or p.read_bytes() != data]
    assert changed == [], f"the test session rewrote files of the checkout: {changed}"


@pytest.fixture(scope="session")
def te_sources(tmp_path_factory) -> Path:
    """TransformerEngine 2.20.2's sources, downloaded once per test session (the wheel is
    kept across sessions under GRADGATE_TEST_CACHE if set) and unpacked afresh for each
    session, so that no session sees another's leftovers."""
    cache = os.environ.get("GRADGATE_TEST_CACHE")
    wheels = Path(cache) / f"te-{TE_VERSION}" / "wheel" if cache else None
    try:
        return _download_te(tmp_path_factory.mktemp("te"), wheels)
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
