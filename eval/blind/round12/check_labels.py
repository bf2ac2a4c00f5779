#!/usr/bin/env python3
"""Validate labels.csv against cases/ (stdlib only) and print counts."""
import ast
import collections
import csv
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
LABELS = {"BUG", "OK"}
KINDS = {"comm", "numerics", "training_proxy", "trap"}


def main() -> int:
    errors = []
    # parse every case file
    case_files = []
    for dirpath, _, files in os.walk(CASES):
        for name in files:
            if name.endswith(".py"):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, CASES)
                case_files.append(rel)
                try:
                    with open(full) as f:
                        ast.parse(f.read(), filename=rel)
                except SyntaxError as e:
                    errors.append(f"{rel}: does not parse: {e}")
    packages = sorted(d for d in os.listdir(CASES) if os.path.isdir(os.path.join(CASES, d)))
    for pkg in packages:
        mods = [f for f in os.listdir(os.path.join(CASES, pkg)) if f.endswith(".py")]
        if "__init__.py" not in mods:
            errors.append(f"{pkg}: missing __init__.py")
        n = len([m for m in mods if m != "__init__.py"])
        if not 2 <= n <= 5:
            errors.append(f"{pkg}: has {n} modules besides __init__.py (want 2-5)")
    singles = sorted(f for f in case_files if os.sep not in f)

    with open(os.path.join(ROOT, "labels.csv"), newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        if header != HEADER:
            errors.append(f"bad header: {header}")
        rows = list(reader)

    seen = set()
    counts = collections.Counter()
    by_scope = collections.Counter()
    for i, row in enumerate(rows, start=2):
        if len(row) != len(HEADER):
            errors.append(f"row {i}: {len(row)} columns")
            continue
        path, line, label, kind, source, reason, origin = row
        full = os.path.join(CASES, path)
        if not os.path.isfile(full):
            errors.append(f"row {i}: missing file {path}")
            continue
        try:
            ln = int(line)
        except ValueError:
            errors.append(f"row {i}: bad line {line!r}")
            continue
        with open(full) as fh:
            nlines = len(fh.read().splitlines())
        if not 1 <= ln <= nlines:
            errors.append(f"row {i}: line {ln} outside 1..{nlines} in {path}")
        if label not in LABELS:
            errors.append(f"row {i}: bad label {label}")
        if kind not in KINDS:
            errors.append(f"row {i}: bad kind {kind}")
        if label == "OK" and kind != "trap":
            errors.append(f"row {i}: OK rows must be kind trap")
        if label == "BUG" and kind == "trap":
            errors.append(f"row {i}: BUG rows cannot be kind trap")
        if not source or not reason or not origin:
            errors.append(f"row {i}: empty source/reason/origin")
        key = (path, ln)
        if key in seen:
            errors.append(f"row {i}: duplicate {key}")
        seen.add(key)
        scope = "package" if "/" in path else "single"
        counts[(label, kind)] += 1
        by_scope[(scope, label)] += 1

    print(f"case files: {len(case_files)}  single-file cases: {len(singles)}  packages: {len(packages)}")
    print("label/kind counts:")
    for (label, kind), n in sorted(counts.items()):
        print(f"  {label:4s} {kind:15s} {n}")
    print(f"  total BUG {sum(n for (l, _), n in counts.items() if l == 'BUG')}  "
          f"total OK {sum(n for (l, _), n in counts.items() if l == 'OK')}")
    print("by scope:")
    for (scope, label), n in sorted(by_scope.items()):
        print(f"  {scope:8s} {label:4s} {n}")
    if errors:
        print("ERRORS:")
        for e in errors:
            print("  " + e)
        return 1
    print("OK: labels.csv valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
