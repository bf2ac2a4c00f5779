"""Run gradgate over the newest releases of the PyTorch ecosystem listed in eval/ecosystem.json.

Unlike evaluate.py nothing here is labelled: the script downloads each package
(``pip download --no-deps``, a wheel first and the sdist when there is no wheel or the
wheel is over ``--max-wheel-mb``), unpacks it, runs ``python -m gradgate check --no-cache
--format json`` on its import directories from the directory that holds them (so paths
read ``vllm/x/y.py``), drops findings under ``tests/``, ``test/`` and ``docs/``, and prints
one Markdown section per package: version, number of .py files under the import dirs,
gradgate's wall time, and each finding as ``path:line RULE message`` with its source line.
A summary table closes the report. The findings are for a person to judge, one by one.

``--json OUT`` writes the findings as {package: [finding, ...]} (gradgate's JSON objects,
paths relative to the package root, plus ``source``), a file evaluate.py's
``--findings-from`` also reads.

Entries of eval/ecosystem.json with a ``skipped`` key are reported and not downloaded.
``dist`` (optional) is ``auto`` (default: wheel, else sdist), ``wheel`` or ``sdist``.
pip is called with ``--ignore-requires-python``: a release whose Requires-Python excludes
this interpreter is still the newest release, and only its sources are read.

Exit status: 0, whatever was found; 2 when a package could not be downloaded or unpacked,
or gradgate failed on it.

Stdlib only (plus subprocess for pip and gradgate).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from evaluate import Package, add_run_arguments, excluded, find_root, unpack  # noqa: E402

EXCLUDE_DIRS = ("tests", "test", "docs")
PIP = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--ignore-requires-python"]


@dataclass(frozen=True)
class Skipped:
    name: str
    version: str
    reason: str


@dataclass
class Result:
    package: Package
    archive: str = ""
    files: int = 0
    seconds: float = 0.0
    findings: list[dict[str, Any]] | None = None
    dropped: int = 0
    error: str = ""


# --------------------------------------------------------------------------- inputs


def load_ecosystem(path: Path) -> tuple[list[Package], list[Skipped]]:
    packages: list[Package] = []
    skipped: list[Skipped] = []
    for entry in json.loads(path.read_text()):
        if "skipped" in entry:
            skipped.append(Skipped(entry["package"], str(entry.get("version", "")), entry["skipped"]))
        else:
            packages.append(
                Package(entry["package"], entry["version"], entry.get("dist", "auto"), tuple(entry["import_dirs"]))
            )
    return packages, skipped


# ------------------------------------------------------------- download and run


def locate_root(unpacked: Path, import_dirs: tuple[str, ...]) -> Path | None:
    """evaluate.find_root, then a wheel's ``NAME.data/purelib`` or ``platlib`` (openrlhf ships that way)."""
    root = find_root(unpacked, import_dirs)
    if root is not None:
        return root
    for scheme in ("purelib", "platlib"):
        for data in sorted(unpacked.glob(f"*.data/{scheme}")):
            if (data / import_dirs[0]).is_dir():
                return data
    return None


def pip_download(package: Package, kind: str, dest: Path) -> tuple[Path | None, str]:
    """One ``pip download`` of a wheel or an sdist into a fresh ``dest``; the archive, or None and pip's error."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    options = ["--only-binary=:all:"] if kind == "wheel" else ["--no-binary=:all:", "--no-build-isolation"]
    command = [*PIP, *options, f"{package.name}=={package.version}", "-d", str(dest)]
    result = subprocess.run(command, capture_output=True, text=True)
    archives = sorted(dest.iterdir())
    if result.returncode != 0 or len(archives) != 1:
        return None, f"{kind}: pip exited {result.returncode}, {[a.name for a in archives]}: {result.stderr[-1500:]}"
    return archives[0], ""


def download(package: Package, cache: Path, max_wheel_bytes: int) -> tuple[Path, str]:
    """Download and unpack one package (reused from ``cache``); the root of its import dirs and the archive's name."""
    target = cache / f"{package.name}-{package.version}"
    unpacked = target / "unpacked"
    downloads = target / "dist"
    if unpacked.is_dir():
        root = locate_root(unpacked, package.import_dirs)
        if root is not None:
            names = sorted(p.name for p in downloads.iterdir()) if downloads.is_dir() else []
            return root, ", ".join(names)
    shutil.rmtree(unpacked, ignore_errors=True)
    kinds = {"wheel": ["wheel"], "sdist": ["sdist"]}.get(package.dist, ["wheel", "sdist"])
    problems: list[str] = []
    archive: Path | None = None
    for kind in kinds:
        archive, problem = pip_download(package, kind, downloads)
        if archive is not None and kind == "wheel" and archive.stat().st_size > max_wheel_bytes and "sdist" in kinds:
            problems.append(f"wheel {archive.name} is {archive.stat().st_size >> 20} MiB, over the limit")
            archive = None
        if archive is not None:
            break
        problems.append(problem)
    if archive is None:
        raise RuntimeError(f"pip download failed for {package.name}=={package.version}:\n" + "\n".join(problems))
    unpack(archive, unpacked)
    root = locate_root(unpacked, package.import_dirs)
    if root is None:
        raise RuntimeError(f"{package.name}: no directory holding {package.import_dirs[0]!r} in {archive.name}")
    return root, archive.name


def count_py(root: Path, import_dirs: tuple[str, ...]) -> int:
    return sum(1 for d in import_dirs if (root / d).is_dir() for _ in (root / d).rglob("*.py"))


def source_line(root: Path, path: str, line: int) -> str:
    try:
        return (root / path).read_text(encoding="utf-8", errors="replace").splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return "<source unavailable>"


def run_gradgate(gradgate: list[str], result: Result, root: Path) -> None:
    package = result.package
    missing = [d for d in package.import_dirs if not (root / d).is_dir()]
    if missing:
        result.error = f"{package.name}: missing import dir(s) {missing}"
        return
    command = [*gradgate, "check", "--no-cache", "--format", "json", *package.import_dirs]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    result.seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        result.error = f"{package.name}: gradgate exited {done.returncode}: {done.stderr.strip()[-2000:]}"
        return
    try:
        items = json.loads(done.stdout)
    except json.JSONDecodeError as error:
        result.error = f"{package.name}: gradgate's output is not JSON ({error}): {done.stderr.strip()[-2000:]}"
        return
    if not isinstance(items, list):
        result.error = f"{package.name}: gradgate's JSON output is not a list of findings"
        return
    kept = []
    for item in items:
        if item.get("rule") is None:
            continue  # a notice (something not analysed), told on stderr as well
        path = PurePosixPath(str(item["path"]).replace("\\", "/")).as_posix().removeprefix("./")
        if excluded(path, EXCLUDE_DIRS):
            result.dropped += 1
            continue
        kept.append({**item, "path": path, "source": source_line(root, path, int(item["line"]))})
    result.findings = sorted(kept, key=lambda f: (f["path"], int(f["line"]), str(f.get("rule", ""))))


# -------------------------------------------------------------------- printing


def render(results: list[Result], skipped: list[Skipped]) -> str:
    out: list[str] = []
    for r in results:
        p = r.package
        out += [f"## {p.name} {p.version}", ""]
        if r.error and r.findings is None:
            out += [f"error: {r.error}", ""]
            continue
        findings = r.findings or []
        out += [
            f"- archive: {r.archive}",
            f"- import dirs: {', '.join(p.import_dirs)}",
            f"- .py files: {r.files}",
            f"- gradgate: {r.seconds:.1f} s",
            f"- findings: {len(findings)}"
            + (f" ({r.dropped} more under tests/, test/, docs/ left out)" if r.dropped else ""),
            "",
        ]
        for f in findings:
            out.append(f"- `{f['path']}:{f['line']}` {f.get('rule', '')} {f.get('message', '')}")
            out.append(f"  `{f['source']}`")
        if findings:
            out.append("")
    for s in skipped:
        out += [f"## {s.name} {s.version}", "", f"skipped: {s.reason}", ""]
    out += [
        "## Summary",
        "",
        "| package | version | .py files | findings | seconds |",
        "|---|---|---:|---:|---:|",
    ]
    for r in results:
        count = "error" if r.findings is None else str(len(r.findings))
        out.append(f"| {r.package.name} | {r.package.version} | {r.files} | {count} | {r.seconds:.1f} |")
    for s in skipped:
        out.append(f"| {s.name} | {s.version} | skipped | | |")
    total = sum(len(r.findings or []) for r in results)
    out.append(f"| **total** | | {sum(r.files for r in results)} | {total} | {sum(r.seconds for r in results):.1f} |")
    return "\n".join(out)


# ------------------------------------------------------------------------ main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=Path, default=HERE / "ecosystem.json")
    add_run_arguments(parser)
    parser.add_argument(
        "--max-wheel-mb", type=int, default=1500, help="use the sdist when the wheel is larger (default: %(default)s)"
    )
    parser.add_argument("--json", dest="json_out", type=Path, default=None, help="write {package: [finding...]} here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    packages, skipped = load_ecosystem(args.packages)
    if args.package:
        unknown = set(args.package) - {p.name for p in packages} - {s.name for s in skipped}
        if unknown:
            print(f"unknown package(s): {sorted(unknown)}", file=sys.stderr)
            return 2
        packages = [p for p in packages if p.name in args.package]
        skipped = [s for s in skipped if s.name in args.package]
    cache = args.cache or Path(tempfile.mkdtemp(prefix="gradgate-eco-"))
    cache.mkdir(parents=True, exist_ok=True)
    gradgate = shlex.split(args.gradgate)

    results: list[Result] = []
    for package in packages:
        result = Result(package)
        results.append(result)
        print(f"{package.name}=={package.version}: downloading into {cache}", file=sys.stderr)
        try:
            root, result.archive = download(package, cache, args.max_wheel_mb << 20)
        except RuntimeError as error:
            result.error = str(error)
            continue
        result.files = count_py(root, package.import_dirs)
        print(
            f"{package.name}: running gradgate on {', '.join(package.import_dirs)} ({result.files} files)",
            file=sys.stderr,
        )
        run_gradgate(gradgate, result, root)

    print(render(results, skipped))
    errors = [r.error for r in results if r.error]
    for message in errors:
        print(f"error: {message}", file=sys.stderr)
    if args.json_out is not None:
        findings = {r.package.name: r.findings for r in results if r.findings is not None}
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(findings, indent=2) + "\n")
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
