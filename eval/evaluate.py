"""Score gradgate against the hand-labelled grad-mode reads in eval/labels.csv.

For each package in eval/packages.json this script downloads the pinned distribution
(``pip download --no-deps``), unpacks it, runs ``python -m gradgate check --format json``
on each import directory, and matches the findings to the labels by
(package, path, line) and rule. It prints one Markdown table per package and one per
rule (labelled bugs, found, missed, false positives, precision, recall), then lists every
missed bug and every false positive with ``path:line`` and the source line.

A finding is a true positive only when a BUG label has the same package, path, line and
rule. Every other finding is a false positive (a finding on an OK line, on an unlabelled
line, or on a BUG line with the wrong rule). Several findings with the same key and rule
count once.

Exit status: 0 when precision and recall are both 1.0 over all packages, 1 otherwise,
2 when a package could not be downloaded/unpacked or gradgate reported errors (exit 2).

Debugging without the engine: ``--findings-from FILE`` reads findings from a JSON file
instead of downloading and running gradgate. The file is either an object mapping a
package name to a list of findings, or a list of findings that each carry a ``package``
key. Paths are relative to the directory holding the import dirs (as in labels.csv).

Stdlib only (plus subprocess for pip and gradgate).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

HERE = Path(__file__).resolve().parent
RULES = ("GG001", "GG002", "GG003")


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    dist: str
    import_dirs: tuple[str, ...]


@dataclass(frozen=True)
class Label:
    package: str
    version: str
    path: str
    line: int
    source: str
    label: str
    rule: str
    reason: str


@dataclass(frozen=True)
class Finding:
    package: str
    path: str
    line: int
    rule: str
    message: str


@dataclass
class Score:
    bugs: int = 0
    found: int = 0
    false_positives: int = 0

    @property
    def missed(self) -> int:
        return self.bugs - self.found

    @property
    def precision(self) -> float | None:
        flagged = self.found + self.false_positives
        return None if flagged == 0 else self.found / flagged

    @property
    def recall(self) -> float | None:
        return None if self.bugs == 0 else self.found / self.bugs

    def as_dict(self) -> dict[str, Any]:
        return {
            "labelled_bugs": self.bugs,
            "found": self.found,
            "missed": self.missed,
            "false_positives": self.false_positives,
            "precision": self.precision,
            "recall": self.recall,
        }


@dataclass
class Report:
    by_package: dict[str, Score] = field(default_factory=dict)
    by_rule: dict[str, Score] = field(default_factory=dict)
    total: Score = field(default_factory=Score)
    missed: list[Label] = field(default_factory=list)
    false_positives: list[tuple[Finding, Label | None]] = field(default_factory=list)


# --------------------------------------------------------------------------- inputs


def load_packages(path: Path) -> tuple[list[Package], tuple[str, ...]]:
    data = json.loads(path.read_text())
    packages = [
        Package(p["name"], p["version"], p.get("dist", "any"), tuple(p["import_dirs"])) for p in data["packages"]
    ]
    return packages, tuple(data.get("exclude_dirs", ()))


def load_labels(path: Path) -> list[Label]:
    with path.open(newline="") as handle:
        return [
            Label(
                package=row["package"],
                version=row["version"],
                path=row["path"],
                line=int(row["line"]),
                source=row["source"],
                label=row["label"].strip().upper(),
                rule=row["rule"].strip(),
                reason=row["reason"],
            )
            for row in csv.DictReader(handle)
        ]


def finding_from_json(package: str, obj: dict[str, Any], root: Path | None) -> Finding:
    path = str(obj["path"])
    if root is not None and os.path.isabs(path):
        path = os.path.relpath(path, root)
    return Finding(
        package=package,
        path=PurePosixPath(path.replace(os.sep, "/")).as_posix().removeprefix("./"),
        line=int(obj["line"]),
        rule=str(obj.get("rule", "")),
        message=str(obj.get("message", "")),
    )


def load_findings_file(path: Path) -> dict[str, list[Finding]]:
    data = json.loads(path.read_text())
    out: dict[str, list[Finding]] = {}
    if isinstance(data, dict):
        for package, items in data.items():
            out[package] = [finding_from_json(package, item, None) for item in items]
    else:
        for item in data:
            out.setdefault(item["package"], []).append(finding_from_json(item["package"], item, None))
    return out


# ------------------------------------------------------------- download and run


def download(package: Package, cache: Path) -> Path:
    """Download and unpack one package; return the directory holding its import dirs."""
    target = cache / f"{package.name}-{package.version}"
    unpacked = target / "unpacked"
    root = find_root(unpacked, package.import_dirs) if unpacked.is_dir() else None
    if root is not None:
        return root
    shutil.rmtree(target, ignore_errors=True)
    downloads = target / "dist"
    downloads.mkdir(parents=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check"]
    command += {"wheel": ["--only-binary=:all:"], "sdist": ["--no-binary=:all:"]}.get(package.dist, [])
    command += [f"{package.name}=={package.version}", "-d", str(downloads)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"pip download failed for {package.name}:\n{result.stderr[-2000:]}")
    archives = sorted(downloads.iterdir())
    if len(archives) != 1:
        raise RuntimeError(f"expected one archive for {package.name}, got {[a.name for a in archives]}")
    unpack(archives[0], unpacked)
    root = find_root(unpacked, package.import_dirs)
    if root is None:
        raise RuntimeError(f"{package.name}: no directory holding {package.import_dirs[0]!r} in {archives[0].name}")
    return root


def unpack(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
    elif archive.name.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(archive) as tf:
            if sys.version_info >= (3, 12):
                tf.extractall(dest, filter="data")
            else:
                tf.extractall(dest)
    else:
        raise RuntimeError(f"cannot unpack {archive.name}")


def find_root(unpacked: Path, import_dirs: Iterable[str]) -> Path | None:
    """The shallowest directory (depth <= 2) that contains the first import dir."""
    first = next(iter(import_dirs))
    candidates = [unpacked, *sorted(p for p in unpacked.iterdir() if p.is_dir())]
    for candidate in candidates:
        if (candidate / first / "__init__.py").is_file() or (candidate / first).is_dir():
            return candidate
    return None


def run_gradgate(gradgate: list[str], package: Package, root: Path) -> tuple[list[Finding], list[str]]:
    findings: list[Finding] = []
    errors: list[str] = []
    for import_dir in package.import_dirs:
        if not (root / import_dir).is_dir():
            errors.append(f"{package.name}: missing import dir {import_dir}")
            continue
        command = [*gradgate, "check", "--format", "json", import_dir]
        result = subprocess.run(command, cwd=root, capture_output=True, text=True)
        if result.returncode not in (0, 1):
            errors.append(
                f"{package.name}/{import_dir}: gradgate exited {result.returncode}: {result.stderr.strip()[-2000:]}"
            )
        try:
            items = json.loads(result.stdout) if result.stdout.strip() else []
        except json.JSONDecodeError as error:
            errors.append(f"{package.name}/{import_dir}: output is not JSON ({error})")
            continue
        findings += [finding_from_json(package.name, item, root) for item in items if item.get("rule") is not None]
    return findings, errors


def check_label_sources(labels: list[Label], package: Package, root: Path) -> list[str]:
    """Warn when a labelled line no longer holds the labelled source (version drift)."""
    problems = []
    for label in labels:
        if label.package != package.name:
            continue
        file = root / label.path
        try:
            line = file.read_text(encoding="utf-8", errors="replace").splitlines()[label.line - 1].strip()
        except (OSError, IndexError):
            problems.append(f"{label.package} {label.path}:{label.line}: file or line missing")
            continue
        if line != label.source:
            problems.append(f"{label.package} {label.path}:{label.line}: source differs from label")
    return problems


# --------------------------------------------------------------------- scoring


def excluded(path: str, exclude_dirs: tuple[str, ...]) -> bool:
    return any(part in exclude_dirs for part in PurePosixPath(path).parts[:-1])


def score(
    labels: list[Label],
    findings: dict[str, list[Finding]],
    packages: list[Package],
    exclude_dirs: tuple[str, ...],
) -> Report:
    report = Report()
    names = [p.name for p in packages]
    by_key = {(label.package, label.path, label.line): label for label in labels}
    bugs = {(label.package, label.path, label.line, label.rule): label for label in labels if label.label == "BUG"}
    for name in names:
        report.by_package[name] = Score()
    for rule in RULES:
        report.by_rule[rule] = Score()
    for label in bugs.values():
        if label.package not in report.by_package:
            continue
        report.by_package[label.package].bugs += 1
        report.by_rule.setdefault(label.rule, Score()).bugs += 1
        report.total.bugs += 1

    hit: set[tuple[str, str, int, str]] = set()
    seen: set[tuple[str, str, int, str]] = set()
    for name in names:
        for finding in findings.get(name, []):
            if excluded(finding.path, exclude_dirs):
                continue
            key = (finding.package, finding.path, finding.line, finding.rule)
            if key in seen:
                continue
            seen.add(key)
            rule_score = report.by_rule.setdefault(finding.rule, Score())
            if key in bugs:
                hit.add(key)
                report.by_package[name].found += 1
                rule_score.found += 1
                report.total.found += 1
            else:
                report.by_package[name].false_positives += 1
                rule_score.false_positives += 1
                report.total.false_positives += 1
                report.false_positives.append((finding, by_key.get(key[:3])))
    report.missed = [label for k, label in bugs.items() if k not in hit and label.package in report.by_package]
    return report


# -------------------------------------------------------------------- printing


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def table(title: str, rows: list[tuple[str, Score]]) -> str:
    lines = [
        f"### {title}",
        "",
        f"| {title.split()[-1].rstrip('s').lower()} | labelled bugs | found | missed | false positives | precision | recall |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in rows:
        lines.append(
            f"| {name} | {s.bugs} | {s.found} | {s.missed} | {s.false_positives} | {fmt(s.precision)} | {fmt(s.recall)} |"
        )
    return "\n".join(lines)


def render(report: Report, source_of: dict[tuple[str, str, int], str]) -> str:
    out = [
        table("By packages", [*report.by_package.items(), ("**total**", report.total)]),
        "",
        table("By rules", [*sorted(report.by_rule.items()), ("**total**", report.total)]),
        "",
        f"### Missed bugs ({len(report.missed)})",
        "",
    ]
    for label in sorted(report.missed, key=lambda label: (label.package, label.path, label.line)):
        out.append(f"- {label.rule} {label.package} `{label.path}:{label.line}`: `{label.source}`")
    out += ["", f"### False positives ({len(report.false_positives)})", ""]
    for finding, label in sorted(report.false_positives, key=lambda fl: (fl[0].package, fl[0].path, fl[0].line)):
        if label is None:
            note = "unlabelled line"
        elif label.label == "BUG":
            note = f"labelled BUG {label.rule}, reported as {finding.rule}"
        else:
            note = "labelled OK"
        source = source_of.get((finding.package, finding.path, finding.line), "")
        out.append(f"- {finding.rule} {finding.package} `{finding.path}:{finding.line}` ({note}): `{source}`")
    return "\n".join(out)


def source_lines(report: Report, labels: list[Label], roots: dict[str, Path]) -> dict[tuple[str, str, int], str]:
    sources = {(label.package, label.path, label.line): label.source for label in labels}
    for finding, _ in report.false_positives:
        key = (finding.package, finding.path, finding.line)
        root = roots.get(finding.package)
        if key in sources or root is None:
            continue
        try:
            text = (root / finding.path).read_text(encoding="utf-8", errors="replace").splitlines()
            sources[key] = text[finding.line - 1].strip()
        except (OSError, IndexError):
            sources[key] = "<source unavailable>"
    return sources


# ------------------------------------------------------------------------ main


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every script that downloads packages and runs gradgate on them takes."""
    parser.add_argument(
        "--cache", type=Path, default=None, help="download/unpack directory, reused between runs (default: a temp dir)"
    )
    parser.add_argument("--package", action="append", default=None, help="only this package (repeatable)")
    parser.add_argument(
        "--gradgate",
        default=f"{shlex.quote(sys.executable)} -m gradgate",
        help="command that runs gradgate (default: %(default)s)",
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=Path, default=HERE / "packages.json")
    parser.add_argument("--labels", type=Path, default=HERE / "labels.csv")
    add_run_arguments(parser)
    parser.add_argument(
        "--findings-from",
        type=Path,
        default=None,
        help="debug: read findings from this JSON file instead of running gradgate",
    )
    parser.add_argument(
        "--json",
        dest="json_out",
        type=Path,
        default=None,
        help="write the numbers and the missed/false-positive lists here",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    packages, exclude_dirs = load_packages(args.packages)
    if args.package:
        unknown = set(args.package) - {p.name for p in packages}
        if unknown:
            print(f"unknown package(s): {sorted(unknown)}", file=sys.stderr)
            return 2
        packages = [p for p in packages if p.name in args.package]
    labels = [label for label in load_labels(args.labels) if label.package in {p.name for p in packages}]
    errors: list[str] = []
    roots: dict[str, Path] = {}

    if args.findings_from is not None:
        findings = load_findings_file(args.findings_from)
    else:
        cache = args.cache or Path(tempfile.mkdtemp(prefix="gradgate-eval-"))
        cache.mkdir(parents=True, exist_ok=True)
        gradgate = shlex.split(args.gradgate)
        findings = {}
        for package in packages:
            print(f"{package.name}=={package.version}: downloading into {cache}", file=sys.stderr)
            try:
                root = download(package, cache)
            except RuntimeError as error:
                errors.append(str(error))
                continue
            roots[package.name] = root
            for problem in check_label_sources(labels, package, root):
                print(f"warning: {problem}", file=sys.stderr)
            print(f"{package.name}: running gradgate on {', '.join(package.import_dirs)}", file=sys.stderr)
            findings[package.name], run_errors = run_gradgate(gradgate, package, root)
            errors += run_errors

    report = score(labels, findings, packages, exclude_dirs)
    print(render(report, source_lines(report, labels, roots)))
    for error in errors:
        print(f"error: {error}", file=sys.stderr)

    if args.json_out is not None:
        args.json_out.write_text(
            json.dumps(
                {
                    "packages": {
                        p.name: {"version": p.version, **report.by_package[p.name].as_dict()} for p in packages
                    },
                    "rules": {rule: s.as_dict() for rule, s in sorted(report.by_rule.items())},
                    "total": report.total.as_dict(),
                    "missed": [
                        {
                            "package": label.package,
                            "path": label.path,
                            "line": label.line,
                            "rule": label.rule,
                            "source": label.source,
                        }
                        for label in report.missed
                    ],
                    "false_positives": [
                        {
                            "package": f.package,
                            "path": f.path,
                            "line": f.line,
                            "rule": f.rule,
                            "label": None if label is None else label.label,
                            "message": f.message,
                        }
                        for f, label in report.false_positives
                    ],
                    "errors": errors,
                },
                indent=2,
            )
            + "\n"
        )

    if errors:
        return 2
    perfect = report.total.recall in (1.0, None) and report.total.precision in (1.0, None)
    return 0 if perfect else 1


if __name__ == "__main__":
    sys.exit(main())
