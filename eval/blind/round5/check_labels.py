#!/usr/bin/env python3
"""Validate labels.csv against cases/: sources match, files parse, layout and counts."""
import ast
import csv
import os
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
errors = []

# 1. every file parses
py_files = []
for dp, _, fns in os.walk(CASES):
    for fn in fns:
        if fn.endswith(".py"):
            rel = os.path.relpath(os.path.join(dp, fn), CASES)
            py_files.append(rel)
            try:
                ast.parse(open(os.path.join(CASES, rel)).read(), filename=rel, feature_version=(3, 10))
            except SyntaxError as e:
                errors.append(f"{rel}: does not parse: {e}")

# 2. labels
with open(os.path.join(ROOT, "labels.csv"), newline="") as f:
    reader = csv.reader(f)
    header = next(reader)
    if header != HEADER:
        errors.append(f"bad header {header}")
    rows = [dict(zip(HEADER, r)) for r in reader]

seen = set()
for r in rows:
    p, ln = r["path"], int(r["line"])
    if (p, ln) in seen:
        errors.append(f"duplicate label {p}:{ln}")
    seen.add((p, ln))
    fp = os.path.join(CASES, p)
    if not os.path.isfile(fp):
        errors.append(f"missing file {p}")
        continue
    lines = open(fp).read().split("\n")
    if not 1 <= ln <= len(lines):
        errors.append(f"{p}:{ln} out of range")
        continue
    if lines[ln - 1].strip() != r["source"]:
        errors.append(f"{p}:{ln} source mismatch: {lines[ln-1].strip()!r} != {r['source']!r}")
    if r["label"] not in ("BUG", "OK"):
        errors.append(f"{p}:{ln} bad label {r['label']}")
    if r["label"] == "BUG" and r["kind"] not in ("comm", "numerics", "training_proxy"):
        errors.append(f"{p}:{ln} bad BUG kind {r['kind']}")
    if r["label"] == "OK" and r["kind"] != "trap":
        errors.append(f"{p}:{ln} OK must be trap")
    if not r["reason"].strip() or not r["origin"].strip():
        errors.append(f"{p}:{ln} empty reason/origin")

# 3. layout: case sizes, packages
singles = [p for p in py_files if os.sep not in p]
pkgs = sorted({p.split(os.sep)[0] for p in py_files if os.sep in p})
for p in singles:
    n = len(open(os.path.join(CASES, p)).read().rstrip("\n").split("\n"))
    if not 20 <= n <= 150:
        errors.append(f"{p}: {n} lines, expected 20-150")
for pkg in pkgs:
    mods = [p for p in py_files if p.startswith(pkg + os.sep)]
    if pkg + os.sep + "__init__.py" not in mods:
        errors.append(f"{pkg}: no __init__.py")
    others = [m for m in mods if not m.endswith("__init__.py")]
    if not 2 <= len(others) <= 4:
        errors.append(f"{pkg}: {len(others)} modules, expected 2-4")
    total = sum(len(open(os.path.join(CASES, m)).read().rstrip("\n").split("\n")) for m in mods)
    if not 20 <= total <= 150:
        errors.append(f"{pkg}: {total} lines total, expected 20-150")
for p in py_files:
    if not any(r["path"] == p for r in rows) and not p.endswith("__init__.py"):
        pass  # modules that only capture grad mode carry no labels

labels = Counter(r["label"] for r in rows)
kinds = Counter(r["kind"] for r in rows)
in_single = sum(1 for r in rows if "/" not in r["path"])
if labels["BUG"] < 32:
    errors.append(f"only {labels['BUG']} BUG labels")
if labels["OK"] < 26:
    errors.append(f"only {labels['OK']} OK labels")
if len(pkgs) < 6:
    errors.append(f"only {len(pkgs)} packages")

print(f"files: {len(py_files)} ({len(singles)} single-file cases, {len(pkgs)} packages)")
print(f"labels: {dict(labels)}; kinds: {dict(kinds)}; in single files: {in_single}/{len(rows)}")
if errors:
    print("\n".join("ERROR: " + e for e in errors))
    sys.exit(1)
print("OK")
