"""Score gradgate on a blind round: cases written from real public code by someone who
read neither gradgate nor earlier rounds, labelled line by line (``labels.csv``).

    python eval/blind.py eval/blind/round1            # Markdown tables
    python eval/blind.py eval/blind/round1 --json out.json

A finding is a true positive when its (path, line) is a ``BUG`` label (any rule: the
round's authors label bugs, not rules); every other finding is a false positive, on a
trap (an ``OK`` label) or on a line nobody labelled. Exit 0 when recall is at least 90%
and there is at most one false positive (the goal of issue 27), 1 otherwise, 2 when
gradgate itself failed. Stdlib only.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Label:
    path: str
    line: int
    label: str
    kind: str
    source: str

    @property
    def package(self) -> bool:
        """Is the label in a multi-file package (a directory of the round's cases)?"""
        return "/" in self.path


@dataclass
class Tally:
    bugs: int = 0
    found: int = 0
    false_positives: int = 0

    @property
    def recall(self) -> float:
        return self.found / self.bugs if self.bugs else 1.0


@dataclass
class Score:
    all: Tally = field(default_factory=Tally)
    by_kind: dict[str, Tally] = field(default_factory=dict)
    single: Tally = field(default_factory=Tally)
    packages: Tally = field(default_factory=Tally)
    missed: list[Label] = field(default_factory=list)
    false_positives: list[tuple[str, int, str, str]] = field(default_factory=list)  # path, line, rule, on


def load_labels(path: Path) -> list[Label]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            Label(row["path"], int(row["line"]), row["label"].strip().upper(), row["kind"].strip(), row["source"])
            for row in csv.DictReader(handle)
        ]


def run_gradgate(cases: Path) -> list[tuple[str, int, str]]:
    """(path relative to ``cases``, line, rule) of each finding of ``gradgate check``."""
    command = [sys.executable, "-m", "gradgate", "check", "--no-cache", "--exit-zero", "--format", "json", "."]
    done = subprocess.run(command, cwd=cases, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(2)
    entries = json.loads(done.stdout)  # (a notice, something not analysed, has no rule: no finding)
    return sorted({(f["path"].removeprefix("./"), int(f["line"]), f["rule"]) for f in entries if f["rule"]})


def score(labels: list[Label], findings: list[tuple[str, int, str]]) -> Score:
    result = Score()
    at = {(label.path, label.line): label for label in labels}
    hit = {(path, line) for path, line, _ in findings}
    for label in labels:
        if label.label != "BUG":
            continue
        found = (label.path, label.line) in hit
        for tally in (result.all, result.by_kind.setdefault(label.kind, Tally()), _part(result, label)):
            tally.bugs += 1
            tally.found += found
        if not found:
            result.missed.append(label)
    reported: set[tuple[str, int]] = set()
    for path, line, rule in findings:
        label = at.get((path, line))
        if (label is not None and label.label == "BUG") or (path, line) in reported:
            continue
        reported.add((path, line))
        result.all.false_positives += 1
        _part(result, Label(path, line, "", "", "")).false_positives += 1
        result.false_positives.append((path, line, rule, "trap" if label is not None else "unlabelled"))
    return result


def _part(result: Score, label: Label) -> Tally:
    return result.packages if label.package else result.single


def render(name: str, result: Score) -> str:
    rows = [("all", result.all), ("single files", result.single), ("packages", result.packages)]
    rows += [(f"kind `{kind}`", tally) for kind, tally in sorted(result.by_kind.items())]
    out = [f"## {name}", "", "| part | bugs | found | recall | false positives |", "|---|---:|---:|---:|---:|"]
    for title, tally in rows:
        fps = str(tally.false_positives) if title in ("all", "single files", "packages") else ""
        out.append(f"| {title} | {tally.bugs} | {tally.found} | {tally.recall:.0%} | {fps} |")
    if result.missed:
        out += ["", "Missed:"] + [f"- `{m.path}:{m.line}` ({m.kind}): `{m.source}`" for m in result.missed]
    if result.false_positives:
        out += ["", "False positives:"]
        out += [f"- `{path}:{line}` {rule} (on a {on} line)" for path, line, rule, on in result.false_positives]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("round", type=Path, help="a round's folder: cases/ and labels.csv")
    parser.add_argument("--json", type=Path, help="write the score here too")
    args = parser.parse_args(argv)
    labels = load_labels(args.round / "labels.csv")
    result = score(labels, run_gradgate(args.round / "cases"))
    sys.stdout.write(render(args.round.name, result))
    if args.json:
        data = {
            "bugs": result.all.bugs,
            "found": result.all.found,
            "false_positives": result.all.false_positives,
            "missed": [f"{m.path}:{m.line}" for m in result.missed],
            "false_positive_lines": [f"{p}:{n} {r}" for p, n, r, _ in result.false_positives],
        }
        args.json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return 0 if result.all.recall >= 0.9 and result.all.false_positives <= 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
