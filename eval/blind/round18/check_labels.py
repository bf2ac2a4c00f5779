#!/usr/bin/env python3
"""Stdlib-only validator for the corpus in ./cases and ./labels.csv."""
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


# 1. every .py parses and starts with "# adapted from"
py_files = []
for dirpath, _, files in os.walk(CASES):
    for fn in files:
        if fn.endswith(".py"):
            rel = os.path.relpath(os.path.join(dirpath, fn), CASES)
            py_files.append(rel)
py_files.sort()
origins = {}
for rel in py_files:
    with open(os.path.join(CASES, rel)) as f:
        text = f.read()
    try:
        ast.parse(text, filename=rel, feature_version=(3, 10))
    except SyntaxError as e:
        err(f"{rel}: does not parse: {e}")
    first = text.split("\n", 1)[0]
    parts = first.split()
    if not first.startswith("# adapted from ") or len(parts) < 5:
        err(f"{rel}: first line is not '# adapted from <owner/repo> <path>'")
    elif "/" not in parts[3]:
        err(f"{rel}: bad owner/repo in first line")
    origins[rel] = first[2:]

# 2. layout: single files directly under cases/, packages with __init__ + >=2 modules
singles, packages = [], {}
for rel in py_files:
    parts = rel.split(os.sep)
    if len(parts) == 1:
        singles.append(rel)
    elif len(parts) == 2:
        packages.setdefault(parts[0], []).append(parts[1])
    else:
        err(f"{rel}: nested too deep")
for pkg, mods in packages.items():
    if "__init__.py" not in mods:
        err(f"package {pkg}: missing __init__.py")
    others = [m for m in mods if m != "__init__.py"]
    if len(others) < 2:
        err(f"package {pkg}: needs >= 2 modules besides __init__.py, has {len(others)}")

# 3. labels
rows = []
with open(os.path.join(ROOT, "labels.csv"), newline="") as f:
    reader = csv.DictReader(f)
    expected = ["path", "line", "label", "kind", "source", "reason", "origin"]
    if reader.fieldnames != expected:
        err(f"labels.csv header {reader.fieldnames} != {expected}")
    rows = list(reader)

seen = set()
for n, r in enumerate(rows, start=2):
    path = r["path"]
    full = os.path.join(CASES, path)
    if not os.path.isfile(full):
        err(f"row {n}: no such file {path}")
        continue
    with open(full) as f:
        lines = f.read().split("\n")
    try:
        line = int(r["line"])
    except ValueError:
        err(f"row {n}: bad line {r['line']!r}")
        continue
    if not (1 <= line <= len(lines)):
        err(f"row {n}: line {line} out of range for {path}")
        continue
    key = (path, line)
    if key in seen:
        err(f"row {n}: duplicate label for {path}:{line}")
    seen.add(key)
    if r["label"] not in ("BUG", "OK"):
        err(f"row {n}: bad label {r['label']!r}")
    if r["kind"] not in KINDS:
        err(f"row {n}: bad kind {r['kind']!r}")
    if r["label"] == "OK" and r["kind"] != "trap":
        err(f"row {n}: OK rows must have kind trap")
    if r["label"] == "BUG" and r["kind"] == "trap":
        err(f"row {n}: BUG rows cannot have kind trap")
    src = r["source"]
    if src == OPP:
        if r["label"] != "OK":
            err(f"row {n}: opposite polarity rows must be OK")
    elif lines[line - 1].strip() != src:
        err(f"row {n}: source mismatch at {path}:{line}: {lines[line - 1].strip()!r} != {src!r}")
    if not r["reason"].strip():
        err(f"row {n}: empty reason")
    if r["origin"] != origins.get(path):
        err(f"row {n}: origin {r['origin']!r} != first line of {path}")

labelled_files = {r["path"] for r in rows}
for rel in py_files:
    if rel.endswith("__init__.py"):
        continue
    # every package must have at least one label somewhere; single files must each have one
    if len(rel.split(os.sep)) == 1 and rel not in labelled_files:
        err(f"{rel}: single-file case without labels")
for pkg in packages:
    if not any(p.startswith(pkg + os.sep) for p in labelled_files):
        err(f"package {pkg}: no labels")

# 4. counts table
cnt = Counter()
for r in rows:
    scope = "package" if os.sep in r["path"] or "/" in r["path"] else "single"
    cnt[(r["label"], r["kind"], scope)] += 1
print(f"{'label':<6} {'kind':<15} {'single':>7} {'package':>8} {'total':>6}")
for label, kind in [("BUG", "comm"), ("BUG", "numerics"), ("BUG", "training_proxy"), ("OK", "trap")]:
    s, p = cnt[(label, kind, "single")], cnt[(label, kind, "package")]
    print(f"{label:<6} {kind:<15} {s:>7} {p:>8} {s + p:>6}")
nb = sum(v for k, v in cnt.items() if k[0] == "BUG")
no = sum(v for k, v in cnt.items() if k[0] == "OK")
nopp = sum(1 for r in rows if r["source"] == OPP)
print(f"BUG total {nb}, OK total {no} (of which opposite polarity {nopp})")
print(f"single-file cases {len(singles)}, packages {len(packages)}, .py files {len(py_files)}, label rows {len(rows)}")

if nb < 30:
    err(f"need >= 30 BUG lines, have {nb}")
if no < 25:
    err(f"need >= 25 OK lines, have {no}")
if len(singles) < 18:
    err(f"need >= 18 single-file cases, have {len(singles)}")
if len(packages) < 7:
    err(f"need >= 7 packages, have {len(packages)}")

if errors:
    for e in errors:
        print("ERROR:", e)
    sys.exit(1)
print("OK: all checks passed")
