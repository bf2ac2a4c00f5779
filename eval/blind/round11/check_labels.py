#!/usr/bin/env python3
"""Validate /tmp/round11/labels.csv against the case files (stdlib only)."""
import ast
import csv
import os
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
LABELS = os.path.join(HERE, "labels.csv")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
VALID = {"BUG": {"comm", "numerics", "training_proxy"}, "OK": {"trap"}}


def main() -> int:
    errors = []
    py_files = []
    for dp, _, fs in os.walk(CASES):
        for f in fs:
            if f.endswith(".py"):
                py_files.append(os.path.relpath(os.path.join(dp, f), CASES))
    py_files.sort()
    for rel in py_files:
        src = open(os.path.join(CASES, rel), encoding="utf-8").read()
        try:
            ast.parse(src, filename=rel)
        except SyntaxError as e:
            errors.append(f"{rel}: does not parse: {e}")

    with open(LABELS, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        if header != HEADER:
            errors.append(f"bad header: {header}")
        rows = list(reader)

    seen = set()
    by_kind = Counter()
    files_with_labels = set()
    for n, row in enumerate(rows, start=2):
        if len(row) != len(HEADER):
            errors.append(f"labels.csv:{n}: expected {len(HEADER)} fields, got {len(row)}")
            continue
        path, line, label, kind, source, reason, origin = row
        full = os.path.join(CASES, path)
        if not os.path.isfile(full):
            errors.append(f"labels.csv:{n}: missing file {path}")
            continue
        try:
            ln = int(line)
        except ValueError:
            errors.append(f"labels.csv:{n}: bad line {line!r}")
            continue
        lines = open(full, encoding="utf-8").read().split("\n")
        if not 1 <= ln <= len(lines):
            errors.append(f"labels.csv:{n}: line {ln} out of range for {path}")
            continue
        if lines[ln - 1].strip() != source:
            errors.append(f"labels.csv:{n}: source mismatch at {path}:{ln}: {lines[ln - 1].strip()!r} != {source!r}")
        if (path, ln) in seen:
            errors.append(f"labels.csv:{n}: duplicate label for {path}:{ln}")
        seen.add((path, ln))
        if label not in VALID or kind not in VALID[label]:
            errors.append(f"labels.csv:{n}: invalid label/kind {label}/{kind}")
        if not reason.strip() or not origin.strip():
            errors.append(f"labels.csv:{n}: empty reason/origin")
        by_kind[(label, kind)] += 1
        files_with_labels.add(path)

    single = [p for p in py_files if os.sep not in p]
    pkg_dirs = sorted({p.split(os.sep)[0] for p in py_files if os.sep in p})
    pkg_files = [p for p in py_files if os.sep in p]
    for d in pkg_dirs:
        if not os.path.isfile(os.path.join(CASES, d, "__init__.py")):
            errors.append(f"package {d} lacks __init__.py")
    for p in single:
        nlines = len(open(os.path.join(CASES, p), encoding="utf-8").read().rstrip("\n").split("\n"))
        if not 20 <= nlines <= 120:
            errors.append(f"{p}: {nlines} lines (expected 20-120)")

    bug = sum(v for (l, _), v in by_kind.items() if l == "BUG")
    ok = sum(v for (l, _), v in by_kind.items() if l == "OK")
    print(f"case .py files: {len(py_files)} (single-file: {len(single)}, package files: {len(pkg_files)} in {len(pkg_dirs)} packages)")
    print(f"labels: {len(rows)}  BUG: {bug}  OK: {ok}")
    for k in ("comm", "numerics", "training_proxy"):
        print(f"  BUG/{k}: {by_kind[('BUG', k)]}")
    print(f"  OK/trap: {by_kind[('OK', 'trap')]}")
    sl = Counter("single" if os.sep not in p else "package" for (p, _) in seen)
    print(f"labels in single-file cases: {sl['single']}, in packages: {sl['package']}")
    unlabelled = [p for p in py_files if p not in files_with_labels and not p.endswith("__init__.py")]
    if unlabelled:
        print("files without labels:", ", ".join(unlabelled))
    if errors:
        print(f"\n{len(errors)} error(s):")
        for e in errors:
            print("  " + e)
        return 1
    print("OK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
