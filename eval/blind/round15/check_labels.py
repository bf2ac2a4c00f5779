#!/usr/bin/env python3
"""Stdlib validator for the round-15 corpus (cases/ + labels.csv)."""
import ast
import csv
import os
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
LABELS = os.path.join(ROOT, "labels.csv")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
KINDS = {"BUG": {"comm", "numerics", "training_proxy"}, "OK": {"trap"}}


def main() -> int:
    errors = []
    files = []
    for dirpath, _, names in os.walk(CASES):
        for n in names:
            if n.endswith(".py"):
                files.append(os.path.relpath(os.path.join(dirpath, n), CASES))
    files.sort()
    sources = {}
    for rel in files:
        text = open(os.path.join(CASES, rel), encoding="utf-8").read()
        sources[rel] = text.split("\n")
        try:
            ast.parse(text, filename=rel, feature_version=(3, 10))
        except SyntaxError as e:
            errors.append(f"{rel}: does not parse: {e}")
        if not text.startswith("# adapted from "):
            errors.append(f"{rel}: missing '# adapted from' header")

    singles = sorted(f for f in files if os.sep not in f)
    packages = sorted({f.split(os.sep)[0] for f in files if os.sep in f})
    for pkg in packages:
        mods = [f for f in files if f.startswith(pkg + os.sep)]
        if os.path.join(pkg, "__init__.py") not in mods:
            errors.append(f"package {pkg}: no __init__.py")
        n_mod = len([m for m in mods if not m.endswith("__init__.py")])
        if not 2 <= n_mod <= 4:
            errors.append(f"package {pkg}: {n_mod} modules besides __init__.py (want 2-4)")

    with open(LABELS, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = list(reader)
    if header != HEADER:
        errors.append(f"labels.csv header {header} != {HEADER}")

    seen = set()
    by_label = Counter()
    by_kind = Counter()
    by_scope = Counter()
    for i, row in enumerate(rows, start=2):
        if len(row) != len(HEADER):
            errors.append(f"labels.csv:{i}: {len(row)} columns")
            continue
        path, line, label, kind, source, reason, origin = row
        if path not in sources:
            errors.append(f"labels.csv:{i}: unknown path {path}")
            continue
        try:
            ln = int(line)
        except ValueError:
            errors.append(f"labels.csv:{i}: bad line {line!r}")
            continue
        if not 1 <= ln <= len(sources[path]) or not sources[path][ln - 1].strip():
            errors.append(f"labels.csv:{i}: {path}:{ln} missing or blank")
        if (path, ln) in seen:
            errors.append(f"labels.csv:{i}: duplicate ({path},{ln})")
        seen.add((path, ln))
        if label not in KINDS or kind not in KINDS[label]:
            errors.append(f"labels.csv:{i}: bad label/kind {label}/{kind}")
        for name, val in (("source", source), ("reason", reason), ("origin", origin)):
            if not val.strip():
                errors.append(f"labels.csv:{i}: empty {name}")
        if len(origin.split(" ")) != 2 or "/" not in origin.split(" ")[0]:
            errors.append(f"labels.csv:{i}: origin {origin!r} is not 'owner/repo path'")
        scope = "package" if "/" in path else "single"
        by_label[label] += 1
        by_kind[(label, kind)] += 1
        by_scope[(scope, label)] += 1

    print(f"files: {len(files)} python files; {len(singles)} single-file cases; {len(packages)} packages")
    print()
    print("| label | kind | single | package | total |")
    print("|---|---|---|---|---|")
    for label in ("BUG", "OK"):
        for kind in sorted(KINDS[label]):
            s = sum(1 for r in rows if r[2] == label and r[3] == kind and "/" not in r[0])
            p = sum(1 for r in rows if r[2] == label and r[3] == kind and "/" in r[0])
            print(f"| {label} | {kind} | {s} | {p} | {s + p} |")
        print(f"| {label} | all | {by_scope[('single', label)]} | {by_scope[('package', label)]} | {by_label[label]} |")
    print(f"| all | all | {by_scope[('single','BUG')] + by_scope[('single','OK')]} | "
          f"{by_scope[('package','BUG')] + by_scope[('package','OK')]} | {len(rows)} |")

    reqs = [
        (len(singles) >= 22, f">= 22 single-file cases (have {len(singles)})"),
        (len(packages) >= 8, f">= 8 packages (have {len(packages)})"),
        (by_label["BUG"] >= 34, f">= 34 BUG lines (have {by_label['BUG']})"),
        (by_kind[("BUG", "comm")] >= 13, f">= 13 comm BUG lines (have {by_kind[('BUG', 'comm')]})"),
        (by_label["OK"] >= 28, f">= 28 OK lines (have {by_label['OK']})"),
        (by_scope[("package", "BUG")] >= 12, f">= 12 BUG lines in packages (have {by_scope[('package', 'BUG')]})"),
    ]
    for ok, msg in reqs:
        if not ok:
            errors.append("requirement not met: " + msg)
    unlabelled = [f for f in files if not f.endswith("__init__.py") and f not in {r[0] for r in rows}]
    if unlabelled:
        print("\nmodules without labels:", ", ".join(unlabelled))

    if errors:
        print("\nFAILED:")
        for e in errors:
            print("  " + e)
        return 1
    print("\nOK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
