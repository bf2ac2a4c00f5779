"""Build the ``--te fixed`` overlay: a copy of the installed transformer_engine package with
gradgate's own autofix applied, shared libraries linked rather than copied.

The overlay directory holds ``transformer_engine/`` (every file copied byte for byte, except
shared libraries, which are symlinks to the installed ones) plus symlinks to any
``transformer_engine*`` / ``libtransformer_engine*`` shared objects that sit beside the
installed package (source and editable layouts keep the torch extension there). TE finds its
shared objects relative to the imported package directory, so prepending the overlay root
to ``PYTHONPATH`` is enough for the ranks to run against it; the package metadata
(``*.dist-info``) stays where it is installed and is still found on ``sys.path``.

Nothing here imports torch or transformer_engine.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..records import field, record

PACKAGE = "transformer_engine"
SKIPPED_DIRS = frozenset({"__pycache__"})
SIBLING_LIB_PREFIXES = ("transformer_engine", "libtransformer_engine")

# The gradgate CLI contract (see gradgate.cli): exit codes of `gradgate fix` / `check`.
FIX_EXIT_MEANING = {
    0: "nothing left unfixed",
    1: "findings left unfixed",
    2: "errors",
}


class OverlayError(RuntimeError):
    """The overlay could not be built or fixed."""


def is_shared_library(name: str) -> bool:
    """True for ``libx.so``, ``libx.so.1.2``, ``x.cpython-312-x86_64-linux-gnu.so``, .dylib, .dll."""
    return name.endswith((".so", ".dylib", ".dll")) or ".so." in name


def locate_installed_package(name: str = PACKAGE) -> Path:
    """Directory of the installed top-level package ``name``, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise OverlayError(f"cannot find an installed {name!r} package on sys.path")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


@record(frozen=False)
class Overlay:
    root: Path  # goes on PYTHONPATH
    package_dir: Path  # root / "transformer_engine"
    original_dir: Path  # the installed package it was copied from
    copied: list[str] = field(default_factory=list)  # relative to package_dir
    linked: list[str] = field(default_factory=list)  # relative to root

    def as_dict(self) -> dict:
        return {
            "root": str(self.root),
            "package_dir": str(self.package_dir),
            "original_dir": str(self.original_dir),
            "files_copied": len(self.copied),
            "shared_libraries_linked": sorted(self.linked),
        }


def _walk_files(top: Path):
    """Yield regular files and links under ``top`` (relative paths), skipping __pycache__."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        for filename in sorted(filenames):
            full = Path(dirpath) / filename
            yield full.relative_to(top)


def build_overlay(original_dir: Path, overlay_root: Path) -> Overlay:
    """Copy ``original_dir`` (a transformer_engine package) to ``overlay_root/transformer_engine``.

    Shared libraries become symlinks to the (resolved) originals; every other file is copied
    with its bytes and mode. ``overlay_root`` must be new, empty or an overlay built here
    before (it holds :data:`MARKER`), whose ``transformer_engine`` is then replaced; it
    must not lie in the installed package or the folder that holds it (site-packages).
    """
    from .overlay_safety import claim_overlay_root

    original_dir = Path(original_dir).resolve()
    if not (original_dir / "__init__.py").is_file():
        raise OverlayError(f"{original_dir} is not a Python package (no __init__.py)")
    overlay_root = Path(overlay_root).resolve()
    claim_overlay_root(original_dir, overlay_root)
    package_dir = overlay_root / original_dir.name
    if package_dir.is_symlink() or package_dir.is_file():
        package_dir.unlink()
    elif package_dir.exists():
        shutil.rmtree(package_dir)
    package_dir.mkdir(parents=True)

    overlay = Overlay(root=overlay_root, package_dir=package_dir, original_dir=original_dir)
    for rel in _walk_files(original_dir):
        src, dst = original_dir / rel, package_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if is_shared_library(rel.name):
            os.symlink(src.resolve(), dst)
            overlay.linked.append(str(Path(original_dir.name) / rel))
        else:
            shutil.copy2(src, dst)  # follows a symlinked source: the overlay gets real bytes
            overlay.copied.append(str(rel))

    for sibling in sorted(original_dir.parent.iterdir()):
        if sibling.name.startswith(SIBLING_LIB_PREFIXES) and is_shared_library(sibling.name) and sibling.is_file():
            dst = overlay_root / sibling.name
            if dst.is_symlink() or dst.exists():
                dst.unlink()
            os.symlink(sibling.resolve(), dst)
            overlay.linked.append(sibling.name)
    return overlay


@record(frozen=False)
class FixRun:
    command: list[str]
    exit_code: int
    stdout: str
    stderr: str
    findings_before: list[dict] | None  # `gradgate check --format json` before the fix
    findings_after: list[dict] | None  # ... and after it

    @property
    def meaning(self) -> str:
        return FIX_EXIT_MEANING.get(self.exit_code, "unexpected exit code")

    def as_dict(self) -> dict:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "meaning": self.meaning,
            "findings_before": self.findings_before,
            "findings_after": self.findings_after,
            "stderr_tail": self.stderr[-2000:],
        }


def _gradgate_env() -> dict[str, str]:
    """Environment in which ``python -m gradgate`` (run in another folder) imports this gradgate.

    An installed gradgate (editable or not) is found anywhere. One imported only because the
    current folder is its source checkout is not, so that checkout goes on PYTHONPATH, but
    only when its rules (``gradgate.rules``, mapped from ``rules/``) resolve from it too;
    otherwise the installed gradgate, which has them, is the better one to run.
    """
    env = dict(os.environ)
    project_root = Path(__file__).resolve().parents[2]
    if Path.cwd().resolve() == project_root:
        try:
            spec = importlib.util.find_spec("gradgate.rules")
        except ImportError:
            spec = None
        origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
        if origin is not None and project_root in origin.parents:
            parts = [str(project_root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def gradgate_command(python: str = sys.executable) -> list[str]:
    return [python, "-m", "gradgate"]


def run_check_json(target: Path, python: str = sys.executable, cwd: Path | None = None):
    """Run ``gradgate check --format json target``; return (exit_code, findings or None, proc)."""
    cmd = [*gradgate_command(python), "check", "--format", "json", str(target)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_gradgate_env(), cwd=cwd)
    findings = None
    if proc.returncode in (0, 1):
        try:
            parsed = json.loads(proc.stdout)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list):
            findings = parsed
    return proc.returncode, findings, proc


def apply_fix(package_dir: Path, python: str = sys.executable) -> FixRun:
    """Apply gradgate's autofix to ``package_dir`` in a subprocess (``python -m gradgate fix``)."""
    package_dir = Path(package_dir)
    cwd = package_dir.parent
    _, before, _ = run_check_json(package_dir, python, cwd=cwd)
    cmd = [*gradgate_command(python), "fix", str(package_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_gradgate_env(), cwd=cwd)
    _, after, _ = run_check_json(package_dir, python, cwd=cwd)
    before, after = _relative_paths(before, cwd), _relative_paths(after, cwd)
    return FixRun(
        command=cmd,
        exit_code=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr,
        findings_before=before,
        findings_after=after,
    )


def _relative_paths(findings: list[dict] | None, root: Path) -> list[dict] | None:
    """Findings with paths shown relative to ``root`` (the overlay), which is temporary."""
    if findings is None:
        return None
    out = []
    for finding in findings:
        finding = dict(finding)
        try:
            finding["path"] = str(Path(finding["path"]).resolve().relative_to(root.resolve()))
        except (KeyError, ValueError, TypeError):
            pass
        out.append(finding)
    return out


@record(frozen=False)
class ChangedFile:
    path: str  # relative to the package's parent, e.g. transformer_engine/pytorch/...
    hunks: list[dict]  # {"original": [first, last], "fixed": [first, last]} (1-based, inclusive)
    diff: str  # unified diff

    def as_dict(self) -> dict:
        return {"path": self.path, "hunks": self.hunks, "diff": self.diff}


def _line_range(start: int, end: int) -> list[int]:
    """1-based inclusive range for the 0-based half-open [start, end); empty -> [start, start-1]."""
    return [start + 1, end]


def diff_overlay(original_dir: Path, package_dir: Path) -> list[ChangedFile]:
    """Files of the overlay whose bytes differ from the installed package (symlinks skipped).

    Raises OverlayError if the overlay gained or lost files (the fix must only edit).
    """
    original_dir, package_dir = Path(original_dir), Path(package_dir)
    original_files = set(_walk_files(original_dir))
    overlay_files = set(_walk_files(package_dir))
    if original_files != overlay_files:
        added = sorted(map(str, overlay_files - original_files))
        removed = sorted(map(str, original_files - overlay_files))
        raise OverlayError(f"overlay files differ from the package: added {added}, removed {removed}")
    changed = []
    for rel in sorted(overlay_files):
        fixed_path = package_dir / rel
        if fixed_path.is_symlink():
            continue
        old = (original_dir / rel).read_bytes()
        new = fixed_path.read_bytes()
        if old == new:
            continue
        old_lines = old.decode("utf-8", "replace").splitlines(keepends=True)
        new_lines = new.decode("utf-8", "replace").splitlines(keepends=True)
        shown = str(Path(package_dir.name) / rel)
        hunks = [
            {"original": _line_range(i1, i2), "fixed": _line_range(j1, j2)}
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes()
            if tag != "equal"
        ]
        diff = "".join(difflib.unified_diff(old_lines, new_lines, f"a/{shown}", f"b/{shown}", n=1))
        changed.append(ChangedFile(path=shown, hunks=hunks, diff=diff))
    return changed


def build_fixed_overlay(original_dir: Path, overlay_root: Path, python: str = sys.executable):
    """Build the overlay, apply gradgate's fix to it and diff it against the original.

    Returns (Overlay, FixRun, [ChangedFile]). Raises OverlayError when the fixer reports
    errors (exit 2) or changes nothing.
    """
    overlay = build_overlay(original_dir, overlay_root)
    fix = apply_fix(overlay.package_dir, python)
    if fix.exit_code not in (0, 1):
        raise OverlayError(
            f"`{' '.join(fix.command)}` exited {fix.exit_code} ({fix.meaning}):\n"
            f"{fix.stderr.strip() or fix.stdout.strip()}"
        )
    changed = diff_overlay(overlay.original_dir, overlay.package_dir)
    if not changed:
        raise OverlayError(f"`{' '.join(fix.command)}` exited {fix.exit_code} but changed no file of the overlay")
    return overlay, fix, changed
