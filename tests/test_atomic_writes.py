"""How ``gradgate fix`` writes: atomically (temporary file + rename in the same
directory), only when the content changes and re-parses, keeping permissions, never over
a file that changed since it was read; failed writes leave the original intact and are
reported; two concurrent ``fix`` runs leave every file valid.
"""

from __future__ import annotations

import compileall
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

from gradgate.source import ChangedOnDisk, SourceError, write_atomic

BUGGY = (
    b"def f(ub_overlap_ag, is_grad_enabled, x):\n"
    b"    ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x\n"
    b"    return ub_overlap_ag\n"
)
BUGGY_FIXED = BUGGY.replace(b" and is_grad_enabled", b"")
CLEAN = b"def f(ub_overlap_ag, x):\n    return ub_overlap_ag and x\n"
#: grad mode forcing the flag on: a finding with no operand to drop (report only)
UNFIXABLE = b"def f(ub_overlap_ag, is_grad_enabled):\n    ub_overlap_ag = ub_overlap_ag or is_grad_enabled\n"


def _temporaries(directory: Path) -> list[str]:
    return sorted(
        p.name for p in directory.rglob("*") if p.name.endswith(".gradgate") or (p.name.startswith(".") and p.is_file())
    )


def _invoke(*args: str, cwd: Path):
    """The CLI in this process (so monkeypatches apply); returns (code, stdout, stderr)."""
    from conftest import invoke

    result = invoke(args, cwd=cwd)
    return result.exit_code, result.stdout, result.stderr


# -- write_atomic ---------------------------------------------------------------------
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o755, 0o750])  # 0o444: refused (test_reliability_v3)
def test_write_atomic_replaces_by_rename_and_keeps_mode(tmp_path, mode):
    path = tmp_path / "m.py"
    path.write_bytes(BUGGY)
    path.chmod(mode)
    inode = os.stat(path).st_ino
    write_atomic(str(path), BUGGY, BUGGY_FIXED)
    assert path.read_bytes() == BUGGY_FIXED
    assert os.stat(path).st_mode & 0o7777 == mode
    assert os.stat(path).st_ino != inode, "written in place, not through a temporary file + rename"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_write_atomic_stale_expected_raises_and_touches_nothing(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(b"# edited by someone else\n" + BUGGY)
    stat = os.stat(path)
    with pytest.raises(ChangedOnDisk) as info:
        write_atomic(str(path), BUGGY, BUGGY_FIXED)
    assert "changed on disk" in str(info.value)
    assert "\n" not in str(info.value)
    assert path.read_bytes() == b"# edited by someone else\n" + BUGGY
    assert (os.stat(path).st_ino, os.stat(path).st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_write_atomic_concurrent_change_during_write_wins(tmp_path, monkeypatch):
    """Someone writes the file after the first check, while the temporary file is being
    written: their bytes survive and the temporary file is removed."""
    path = tmp_path / "m.py"
    path.write_bytes(BUGGY)
    real_fsync = os.fsync

    def fsync_and_meddle(fd):
        real_fsync(fd)
        path.write_bytes(b"# theirs\n")

    monkeypatch.setattr(os, "fsync", fsync_and_meddle)
    with pytest.raises(ChangedOnDisk):
        write_atomic(str(path), BUGGY, BUGGY_FIXED)
    assert path.read_bytes() == b"# theirs\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


@pytest.mark.parametrize("failing", ["replace", "fchmod", "fdopen", "mkstemp"])
def test_write_atomic_io_failure_leaves_original_and_no_temporary(tmp_path, monkeypatch, failing):
    import tempfile

    path = tmp_path / "m.py"
    path.write_bytes(BUGGY)

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    target = {
        "replace": (os, "replace"),
        "fchmod": (os, "fchmod"),
        "fdopen": (os, "fdopen"),
        "mkstemp": (tempfile, "mkstemp"),
    }[failing]
    monkeypatch.setattr(*target, boom)
    with pytest.raises(SourceError) as info:
        write_atomic(str(path), BUGGY, BUGGY_FIXED)
    assert not isinstance(info.value, ChangedOnDisk)
    assert "No space left on device" in str(info.value)
    monkeypatch.undo()
    assert path.read_bytes() == BUGGY
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_write_atomic_through_symlink_writes_the_target(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "m.py"
    target.write_bytes(BUGGY)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    write_atomic(str(link), BUGGY, BUGGY_FIXED)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == BUGGY_FIXED
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["m.py"]


# -- the fix command ---------------------------------------------------------------
def test_fix_keeps_modes(tmp_path):
    for name, mode in (("a.py", 0o640), ("b.py", 0o755), ("c.py", 0o600)):  # 0o444: test_reliability_v3
        (tmp_path / name).write_bytes(BUGGY)
        (tmp_path / name).chmod(mode)
    result = run_cli("fix", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    for name, mode in (("a.py", 0o640), ("b.py", 0o755), ("c.py", 0o600)):
        assert (tmp_path / name).read_bytes() == BUGGY_FIXED
        assert os.stat(tmp_path / name).st_mode & 0o7777 == mode, name
    assert _temporaries(tmp_path) == []


def test_fix_writes_only_files_whose_content_changes(tmp_path):
    for name, data in (
        ("clean.py", CLEAN),
        ("unfixable.py", UNFIXABLE),
        ("buggy.py", BUGGY),
        ("no_grad_token.py", b"x = 1\n"),
    ):
        (tmp_path / name).write_bytes(data)
        os.utime(tmp_path / name, ns=(1_000_000_000, 1_000_000_000))
    before = {p.name: os.stat(p) for p in tmp_path.iterdir()}
    result = run_cli("fix", ".", cwd=tmp_path)
    assert result.returncode == 1  # the &= finding is left
    for name in ("clean.py", "unfixable.py", "no_grad_token.py"):
        after = os.stat(tmp_path / name)
        assert (after.st_ino, after.st_mtime_ns) == (before[name].st_ino, before[name].st_mtime_ns), name
    assert os.stat(tmp_path / "buggy.py").st_ino != before["buggy.py"].st_ino


def test_fix_skips_file_changed_since_it_was_read(tmp_path, monkeypatch):
    """The file is edited between linting and writing: not overwritten, exit 2, one
    clear line; the other files are still fixed."""
    import gradgate.source as source

    (tmp_path / "edited.py").write_bytes(BUGGY)
    (tmp_path / "other.py").write_bytes(BUGGY)
    real = source.write_atomic

    def edit_then_write(path, expected, new):
        if path.endswith("edited.py"):
            Path(path).write_bytes(b"# edited meanwhile\n" + BUGGY)
        return real(path, expected, new)

    monkeypatch.setattr(source, "write_atomic", edit_then_write)
    code, _stdout, stderr = _invoke("fix", ".", cwd=tmp_path)
    assert code == 2
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {'edited.py'}: file changed on disk since it was read; not overwritten"]
    assert (tmp_path / "edited.py").read_bytes() == b"# edited meanwhile\n" + BUGGY
    assert (tmp_path / "other.py").read_bytes() == BUGGY_FIXED
    assert _temporaries(tmp_path) == []


def test_fix_not_written_when_result_does_not_parse(tmp_path, monkeypatch):
    """Force every operand removal to produce invalid code (the keyword ``if`` in place
    of an expression): the file is left unchanged and the error is reported."""
    import libcst as cst

    import gradgate.fixes as fixes
    from gradgate.boolchain import Removal

    def broken(chain, operand):
        return Removal(chain, cst.Name("if"))

    monkeypatch.setattr(fixes, "remove_operand", broken)
    (tmp_path / "m.py").write_bytes(BUGGY)
    (tmp_path / "clean.py").write_bytes(CLEAN)
    code, _stdout, stderr = _invoke("fix", ".", cwd=tmp_path)
    assert code == 2, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {'m.py'}: ")
    assert "invalid" in errors[0]
    assert (tmp_path / "m.py").read_bytes() == BUGGY
    assert (tmp_path / "clean.py").read_bytes() == CLEAN


def _limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_fix_write_failure_is_reported_and_original_intact(tmp_path):
    """A write that fails for real, also as root: the ``fix`` process may not create a
    file over 4 KiB (RLIMIT_FSIZE; Python ignores SIGXFSZ, so write() fails with EFBIG).
    The big file keeps its bytes and mode, no temporary file is left, the small one is
    still fixed, exit 2 with one line naming the file."""
    big = BUGGY + b"".join(b"value_%d = %d\n" % (i, i) for i in range(1000))
    (tmp_path / "big.py").write_bytes(big)
    (tmp_path / "big.py").chmod(0o640)
    (tmp_path / "small.py").write_bytes(BUGGY)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "gradgate", "fix", "."],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        preexec_fn=_limit_file_size,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr.decode()
    errors = [line for line in result.stderr.decode().splitlines() if line.startswith("error:")]
    assert errors == [f"error: {'big.py'}: cannot write: File too large"]
    assert (tmp_path / "big.py").read_bytes() == big
    assert os.stat(tmp_path / "big.py").st_mode & 0o7777 == 0o640
    assert (tmp_path / "small.py").read_bytes() == BUGGY_FIXED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.py", "small.py"]


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root writes into a 0o555 directory anyway; "
    "test_fix_write_failure_is_reported_and_original_intact covers a failing write as root",
)
def test_fix_into_read_only_directory(tmp_path):
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "m.py").write_bytes(BUGGY)
    (tmp_path / "ro").chmod(0o555)
    try:
        result = run_cli("fix", "ro", cwd=tmp_path)
        assert result.returncode == 2
        errors = [line for line in result.stderr.decode().splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "cannot write" in errors[0] and "m.py" in errors[0]
        assert (tmp_path / "ro" / "m.py").read_bytes() == BUGGY
        assert sorted(p.name for p in (tmp_path / "ro").iterdir()) == ["m.py"]
    finally:
        (tmp_path / "ro").chmod(0o755)


# -- concurrency ------------------------------------------------------------------------
def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _planted_tree(root: Path) -> None:
    """One TE 2.20.2 module with a real finding, two without, plus 8 files with several
    fixable findings each, so that two runs contend on many files."""
    for i in range(8):
        body = b"".join(
            b"def f%d(ub_overlap_ag, ub_overlap_rs, is_grad_enabled, x):\n"
            b"    ub_overlap_ag = ub_overlap_ag and is_grad_enabled and x\n"
            b"    ub_overlap_rs = (\n        ub_overlap_rs\n        and is_grad_enabled\n    )\n"
            b"    return ub_overlap_ag, ub_overlap_rs\n\n" % j
            for j in range(2)
        )
        (root / f"planted_{i:02d}.py").write_bytes(body if i % 2 else body.replace(b"\n", b"\r\n"))


TE_FILES = ("layernorm_linear.py", "_common.py", "fp8_padding.py")


def _tree(te_sources, root: Path) -> None:
    module = Path(te_sources) / "transformer_engine" / "pytorch" / "module"
    root.mkdir()
    for name in TE_FILES:
        shutil.copy2(module / name, root / name)
    _planted_tree(root)


def test_two_concurrent_fix_runs_leave_every_file_valid(te_sources, tmp_path):
    reference = tmp_path / "reference"
    _tree(te_sources, reference)
    single = run_cli("fix", ".", cwd=reference)
    assert single.returncode == 0, single.stderr.decode()
    expected = _snapshot(reference)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for round_ in range(3):
        tree = tmp_path / f"round{round_}"
        _tree(te_sources, tree)
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "gradgate", "fix", "."],
                cwd=tree,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        outputs = [run.communicate(timeout=120) for run in runs]
        for run, (_, stderr) in zip(runs, outputs):
            assert run.returncode in (0, 2), stderr.decode()
            for line in stderr.decode().splitlines():
                if line.startswith("error:"):
                    assert line.endswith("file changed on disk since it was read; not overwritten"), line
                else:
                    assert line.startswith("Fixed "), line
        assert _snapshot(tree) == expected, f"round {round_}: concurrent result differs from one run"
        assert compileall.compile_dir(str(tree), quiet=2, legacy=True, force=True)
        assert _temporaries(tree) == []
