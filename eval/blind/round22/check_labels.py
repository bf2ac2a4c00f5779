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


def err(msg):
    errors.append(msg)


# 1. every file parses and carries the origin header
py_files = []
for dirpath, _, files in os.walk(CASES):
    for fn in files:
        if fn.endswith(".py"):
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, CASES)
            py_files.append(rel)
            with open(full) as f:
                text = f.read()
            try:
                ast.parse(text, filename=rel, feature_version=(3, 10))
            except SyntaxError as e:
                err(f"{rel}: does not parse: {e}")
            first = text.split("\n", 1)[0]
            if not first.startswith("# adapted from ") or len(first.split()) < 5:
                err(f"{rel}: bad first line {first!r}")

# 2. packages: __init__.py + >= 2 modules
packages = {}
for rel in py_files:
    parts = rel.split(os.sep)
    if len(parts) == 2:
        packages.setdefault(parts[0], []).append(parts[1])
    elif len(parts) > 2:
        err(f"{rel}: nesting too deep")
for pkg, mods in sorted(packages.items()):
    if "__init__.py" not in mods:
        err(f"package {pkg}: missing __init__.py")
    others = [m for m in mods if m != "__init__.py"]
    if not 2 <= len(others) <= 4:
        err(f"package {pkg}: has {len(others)} modules besides __init__.py (need 2-4)")

# 3. label rows
seen = set()
counts = Counter()
rows = []
with open(os.path.join(ROOT, "labels.csv"), newline="") as f:
    reader = csv.DictReader(f)
    expected = ["path", "line", "label", "kind", "source", "reason", "origin"]
    if reader.fieldnames != expected:
        err(f"labels.csv header {reader.fieldnames} != {expected}")
    for row in reader:
        rows.append(row)
for n, row in enumerate(rows, start=2):
    path = row["path"]
    full = os.path.join(CASES, path)
    if not os.path.isfile(full):
        err(f"row {n}: missing file {path}")
        continue
    with open(full) as f:
        lines = f.read().split("\n")
    try:
        line = int(row["line"])
    except ValueError:
        err(f"row {n}: bad line {row['line']!r}")
        continue
    if not 1 <= line <= len(lines):
        err(f"row {n}: line {line} out of range for {path}")
        continue
    key = (path, line)
    if key in seen:
        err(f"row {n}: duplicate {key}")
    seen.add(key)
    label, kind = row["label"], row["kind"]
    if label not in ("BUG", "OK"):
        err(f"row {n}: bad label {label}")
    if kind not in KINDS:
        err(f"row {n}: bad kind {kind}")
    if label == "OK" and kind != "trap":
        err(f"row {n}: OK rows must be kind trap")
    if label == "BUG" and kind == "trap":
        err(f"row {n}: BUG rows cannot be kind trap")
    src = row["source"]
    if src == OPP:
        if label != "OK":
            err(f"row {n}: opposite polarity only valid for OK rows")
    elif lines[line - 1].strip() != src:
        err(f"row {n}: source mismatch in {path}:{line}: {lines[line - 1].strip()!r} != {src!r}")
    with open(full) as f:
        origin = f.readline().rstrip("\n")[2:]
    if row["origin"] != origin:
        err(f"row {n}: origin mismatch {row['origin']!r} != {origin!r}")
    if not row["reason"].strip():
        err(f"row {n}: empty reason")
    scope = "package" if os.sep in path or "/" in path else "single"
    counts[(label, kind, scope)] += 1

singles = [p for p in py_files if os.sep not in p]
labelled_files = {r["path"] for r in rows}
for rel in py_files:
    if os.path.basename(rel) == "__init__.py":
        continue
    if os.sep not in rel and rel not in labelled_files:
        err(f"{rel}: single-file case without labels")
for pkg in packages:
    if not any(p.startswith(pkg + "/") for p in labelled_files):
        err(f"package {pkg}: no labels")

# counts table
print(f"{'label':<6} {'kind':<15} {'single':>7} {'package':>8} {'total':>6}")
for label, kind in [("BUG", "comm"), ("BUG", "numerics"), ("BUG", "training_proxy"), ("OK", "trap")]:
    s, p = counts[(label, kind, "single")], counts[(label, kind, "package")]
    print(f"{label:<6} {kind:<15} {s:>7} {p:>8} {s + p:>6}")
nb = sum(v for (l, _, _), v in counts.items() if l == "BUG")
no = sum(v for (l, _, _), v in counts.items() if l == "OK")
nopp = sum(1 for r in rows if r["source"] == OPP)
print(f"BUG total {nb}, OK total {no} (of which opposite polarity {nopp})")
print(f"single-file cases {len(singles)}, packages {len(packages)}")
if nb < 30:
    err(f"need >= 30 BUG rows, have {nb}")
if no < 25:
    err(f"need >= 25 OK rows, have {no}")
if len(singles) < 18:
    err(f"need >= 18 single-file cases, have {len(singles)}")
if len(packages) < 7:
    err(f"need >= 7 packages, have {len(packages)}")

if errors:
    for e in errors:
        print("ERROR:", e)
    sys.exit(1)
print("OK: all checks passed")
