#!/usr/bin/env python3
"""Stdlib-only validator for the grad-mode corpus."""
import ast
import csv
import os
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
KINDS = {"comm", "numerics", "training_proxy", "trap"}
OPP = "opposite polarity"
errors = []

files = {}
for dirpath, _, names in os.walk(CASES):
    for n in names:
        if n.endswith(".py"):
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, CASES).replace(os.sep, "/")
            text = open(full).read()
            files[rel] = text
            try:
                ast.parse(text, filename=rel, feature_version=(3, 10))
            except SyntaxError as e:
                errors.append(f"{rel}: does not parse: {e}")
            first = text.split("\n", 1)[0]
            if not first.startswith("# adapted from "):
                errors.append(f"{rel}: first line is not '# adapted from ...'")

packages = {}
for rel in files:
    if "/" in rel:
        packages.setdefault(rel.split("/")[0], []).append(rel.split("/", 1)[1])
for pkg, mods in sorted(packages.items()):
    if "__init__.py" not in mods:
        errors.append(f"package {pkg}: missing __init__.py")
    if len([m for m in mods if m != "__init__.py"]) < 2:
        errors.append(f"package {pkg}: fewer than 2 modules besides __init__.py")

seen = set()
counts = Counter()
with open(os.path.join(ROOT, "labels.csv"), newline="") as f:
    reader = csv.DictReader(f)
    if reader.fieldnames != ["path", "line", "label", "kind", "source", "reason", "origin"]:
        errors.append(f"bad header {reader.fieldnames}")
    for row in reader:
        path, line = row["path"], int(row["line"])
        if path not in files:
            errors.append(f"{path}: no such case file")
            continue
        key = (path, line)
        if key in seen:
            errors.append(f"duplicate label {key}")
        seen.add(key)
        lines = files[path].split("\n")
        if not 1 <= line <= len(lines):
            errors.append(f"{path}:{line}: line out of range")
            continue
        if row["label"] not in {"BUG", "OK"}:
            errors.append(f"{path}:{line}: bad label {row['label']}")
        if row["kind"] not in KINDS:
            errors.append(f"{path}:{line}: bad kind {row['kind']}")
        if row["label"] == "OK" and row["kind"] != "trap":
            errors.append(f"{path}:{line}: OK rows must have kind trap")
        if row["label"] == "BUG" and row["kind"] == "trap":
            errors.append(f"{path}:{line}: BUG rows cannot have kind trap")
        if row["source"] == OPP:
            if row["label"] != "OK":
                errors.append(f"{path}:{line}: opposite polarity row must be OK")
        elif lines[line - 1].strip() != row["source"]:
            errors.append(f"{path}:{line}: source mismatch: {lines[line - 1].strip()!r} != {row['source']!r}")
        origin = files[path].split("\n", 1)[0][2:]
        if row["origin"] != origin:
            errors.append(f"{path}:{line}: origin mismatch")
        counts[(row["label"], row["kind"], "package" if "/" in path else "single")] += 1

print(f"{'label':6} {'kind':15} {'single':>7} {'package':>8} {'total':>6}")
for label in ("BUG", "OK"):
    for kind in ("comm", "numerics", "training_proxy", "trap"):
        s, p = counts[(label, kind, "single")], counts[(label, kind, "package")]
        if s or p:
            print(f"{label:6} {kind:15} {s:7} {p:8} {s + p:6}")
tb = sum(v for k, v in counts.items() if k[0] == "BUG")
to = sum(v for k, v in counts.items() if k[0] == "OK")
singles = [r for r in files if "/" not in r]
print(f"BUG total {tb}, OK total {to}, single-file cases {len(singles)}, packages {len(packages)}")
if tb < 30 or to < 25 or len(singles) < 18 or len(packages) < 7:
    errors.append("minimum counts not met")
if errors:
    for e in errors:
        print("ERROR:", e)
    sys.exit(1)
print("OK: all checks passed")
