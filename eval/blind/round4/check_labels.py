#!/usr/bin/env python3
"""Validate labels.csv against cases/: files parse, lines exist, `source` equals the stripped line,
labels/kinds are legal, no duplicate (path, line), and report counts."""
import ast
import csv
import os
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
KINDS = {"BUG": {"comm", "numerics", "training_proxy"}, "OK": {"trap"}}
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]


def main() -> int:
    errors = []
    files = {}
    for root, _, names in os.walk(CASES):
        for n in names:
            if n.endswith(".py"):
                full = os.path.join(root, n)
                rel = os.path.relpath(full, CASES)
                text = open(full, encoding="utf-8").read()
                try:
                    ast.parse(text, filename=rel, feature_version=(3, 10))
                except SyntaxError as e:
                    errors.append(f"{rel}: does not parse: {e}")
                files[rel] = text.split("\n")
    with open(os.path.join(HERE, "labels.csv"), newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        if header != HEADER:
            errors.append(f"bad header {header}")
        rows = list(reader)
    seen = set()
    counts = Counter()
    for n, row in enumerate(rows, 2):
        if len(row) != len(HEADER):
            errors.append(f"row {n}: {len(row)} fields")
            continue
        path, line, label, kind, source, reason, origin = row
        if path not in files:
            errors.append(f"row {n}: no such case {path}")
            continue
        ln = int(line)
        if not 1 <= ln <= len(files[path]):
            errors.append(f"row {n}: line {ln} out of range")
            continue
        if files[path][ln - 1].strip() != source:
            errors.append(f"row {n}: source mismatch at {path}:{ln}: {files[path][ln-1].strip()!r} != {source!r}")
        if label not in KINDS or kind not in KINDS[label]:
            errors.append(f"row {n}: bad label/kind {label}/{kind}")
        if (path, ln) in seen:
            errors.append(f"row {n}: duplicate {path}:{ln}")
        seen.add((path, ln))
        if not reason.strip() or not origin.strip():
            errors.append(f"row {n}: empty reason/origin")
        counts[(label, kind)] += 1
    pkgs = {p.split(os.sep)[0] for p in files if os.sep in p}
    for pkg in sorted(pkgs):
        if f"{pkg}{os.sep}__init__.py" not in files:
            errors.append(f"package {pkg} lacks __init__.py")
    single = [p for p in files if os.sep not in p]
    labelled = {r[0] for r in rows}
    for p in files:
        if p not in labelled and not p.endswith("__init__.py") and os.sep not in p:
            errors.append(f"{p}: single-file case without labels")
    for e in errors:
        print("ERROR", e)
    bug = sum(v for (l, _), v in counts.items() if l == "BUG")
    ok = sum(v for (l, _), v in counts.items() if l == "OK")
    print(f"files={len(files)} single_file_cases={len(single)} packages={len(pkgs)} rows={len(rows)} BUG={bug} OK={ok}")
    for k in sorted(counts):
        print(f"  {k[0]:3s} {k[1]:15s} {counts[k]}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
