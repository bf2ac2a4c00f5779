#!/usr/bin/env python3
"""Verify labels.csv against cases/: every source matches its line, every file parses,
packages have __init__.py, and report counts."""
import ast
import collections
import csv
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
errors = []

py_files = []
for dp, dn, fn in os.walk(CASES):
    dn[:] = [d for d in dn if d != "__pycache__"]
    for f in fn:
        if f.endswith(".py"):
            py_files.append(os.path.relpath(os.path.join(dp, f), CASES))
        else:
            errors.append(f"non-python file in cases/: {f}")
for rel in sorted(py_files):
    try:
        ast.parse(open(os.path.join(CASES, rel)).read(), filename=rel, feature_version=(3, 10))
    except SyntaxError as e:
        errors.append(f"{rel}: does not parse: {e}")

for d in os.listdir(CASES):
    full = os.path.join(CASES, d)
    if os.path.isdir(full) and d != "__pycache__":
        if not os.path.exists(os.path.join(full, "__init__.py")):
            errors.append(f"package {d} lacks __init__.py")

counts = collections.Counter()
pkg_counts = collections.Counter()
seen = set()
with open(os.path.join(ROOT, "labels.csv"), newline="") as f:
    r = csv.DictReader(f)
    assert r.fieldnames == ["path", "line", "label", "kind", "source", "reason", "origin"], r.fieldnames
    for row in r:
        path, line = row["path"], int(row["line"])
        key = (path, line)
        if key in seen:
            errors.append(f"duplicate label {key}")
        seen.add(key)
        full = os.path.join(CASES, path)
        if not os.path.exists(full):
            errors.append(f"missing file {path}")
            continue
        lines = open(full).read().split("\n")
        if not (1 <= line <= len(lines)):
            errors.append(f"{path}:{line} out of range")
            continue
        if lines[line - 1].strip() != row["source"]:
            errors.append(f"{path}:{line} source mismatch: {lines[line-1].strip()!r} != {row['source']!r}")
        if row["label"] not in ("BUG", "OK"):
            errors.append(f"{path}:{line} bad label")
        if row["kind"] not in ("comm", "numerics", "training_proxy", "trap"):
            errors.append(f"{path}:{line} bad kind")
        if (row["label"] == "OK") != (row["kind"] == "trap"):
            errors.append(f"{path}:{line} label/kind inconsistent")
        if not row["reason"].strip() or not row["origin"].strip():
            errors.append(f"{path}:{line} empty reason/origin")
        counts[(row["label"], row["kind"])] += 1
        pkg_counts[("package" if "/" in path else "single", row["label"])] += 1

for k in sorted(counts):
    print(f"{k[0]:4s} {k[1]:15s} {counts[k]}")
for k in sorted(pkg_counts):
    print(f"{k[0]:8s} {k[1]:4s} {pkg_counts[k]}")
print(f"files: {len(py_files)}  labels: {sum(counts.values())}")
if errors:
    print("\n".join(errors))
    sys.exit(1)
print("OK")
