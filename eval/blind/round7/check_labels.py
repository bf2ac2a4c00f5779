#!/usr/bin/env python3
"""Validate the grad-mode gating corpus in ./cases against ./labels.csv (stdlib only)."""
import ast
import csv
import os
import re
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
LABELS = os.path.join(HERE, "labels.csv")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
BUG_KINDS = {"comm", "numerics", "training_proxy"}
REVEALING = re.compile(r"\bBUG\b|\btrap\b|#\s*bad\b|#\s*ok\b|\bbuggy\b", re.IGNORECASE)

errors = []


def err(msg):
    errors.append(msg)


def nlines(path):
    with open(path, encoding="utf-8") as fh:
        return len(fh.read().splitlines())


# ---- layout -------------------------------------------------------------
singles, packages, file_lines = [], {}, {}
for entry in sorted(os.listdir(CASES)):
    full = os.path.join(CASES, entry)
    if os.path.isfile(full):
        if not entry.endswith(".py"):
            err(f"unexpected non-.py file in cases/: {entry}")
            continue
        singles.append(entry)
    elif os.path.isdir(full):
        mods = sorted(f for f in os.listdir(full) if f.endswith(".py"))
        others = [f for f in os.listdir(full) if not f.endswith(".py") and f != "__pycache__"]
        if others:
            err(f"package {entry} has non-.py entries: {others}")
        if "__init__.py" not in mods:
            err(f"package {entry} lacks __init__.py")
        non_init = [m for m in mods if m != "__init__.py"]
        if not 2 <= len(non_init) <= 4:
            err(f"package {entry} has {len(non_init)} modules besides __init__.py (need 2-4)")
        packages[entry] = mods

for f in singles:
    p = os.path.join(CASES, f)
    file_lines[f] = nlines(p)
    if not 20 <= file_lines[f] <= 150:
        err(f"{f}: {file_lines[f]} lines (need 20-150)")
for pkg, mods in packages.items():
    total = 0
    for m in mods:
        rel = f"{pkg}/{m}"
        file_lines[rel] = nlines(os.path.join(CASES, pkg, m))
        total += file_lines[rel]
    if not 20 <= total <= 150:
        err(f"package {pkg}: {total} lines in total (need 20-150)")

# ---- parse + no revealing text -----------------------------------------
for rel in file_lines:
    p = os.path.join(CASES, rel)
    src = open(p, encoding="utf-8").read()
    try:
        ast.parse(src, filename=rel, feature_version=(3, 10))
    except SyntaxError as e:
        err(f"{rel}: does not parse as Python 3.10: {e}")
    for i, line in enumerate(src.splitlines(), 1):
        if REVEALING.search(line):
            err(f"{rel}:{i}: text that may reveal a label: {line.strip()!r}")

# ---- labels ---------------------------------------------------------------
with open(LABELS, newline="", encoding="utf-8") as fh:
    reader = csv.reader(fh)
    header = next(reader, None)
    if header != HEADER:
        err(f"bad header: {header}")
    rows = list(reader)

seen = set()
labelled_files = set()
counts = Counter()
kinds = Counter()
pkg_labels = 0
for n, row in enumerate(rows, 2):
    if len(row) != len(HEADER):
        err(f"labels.csv:{n}: {len(row)} fields")
        continue
    path, line, label, kind, source, reason, origin = row
    if path not in file_lines:
        err(f"labels.csv:{n}: unknown path {path}")
        continue
    try:
        ln = int(line)
    except ValueError:
        err(f"labels.csv:{n}: bad line {line!r}")
        continue
    lines = open(os.path.join(CASES, path), encoding="utf-8").read().splitlines()
    if not 1 <= ln <= len(lines):
        err(f"labels.csv:{n}: line {ln} out of range for {path}")
        continue
    if lines[ln - 1].strip() != source:
        err(f"labels.csv:{n}: source mismatch at {path}:{ln}: {lines[ln - 1].strip()!r} != {source!r}")
    if "is_grad_enabled" not in source and not re.search(r"\w", source):
        err(f"labels.csv:{n}: empty source")
    if label == "BUG":
        if kind not in BUG_KINDS:
            err(f"labels.csv:{n}: BUG with kind {kind!r}")
    elif label == "OK":
        if kind != "trap":
            err(f"labels.csv:{n}: OK with kind {kind!r}")
    else:
        err(f"labels.csv:{n}: bad label {label!r}")
    if not reason.strip() or not origin.strip():
        err(f"labels.csv:{n}: empty reason/origin")
    if (path, ln) in seen:
        err(f"labels.csv:{n}: duplicate {path}:{ln}")
    seen.add((path, ln))
    labelled_files.add(path.split("/")[0])
    counts[label] += 1
    kinds[kind] += 1
    if "/" in path:
        pkg_labels += 1

for f in singles:
    if f not in labelled_files:
        err(f"{f}: no labels")
for pkg in packages:
    if pkg not in labelled_files:
        err(f"package {pkg}: no labels")

# ---- minimum counts ---------------------------------------------------
total = len(rows)
if len(singles) < 20:
    err(f"only {len(singles)} single-file cases (need >= 20)")
if len(packages) < 6:
    err(f"only {len(packages)} packages (need >= 6)")
if counts["BUG"] < 32:
    err(f"only {counts['BUG']} BUG labels (need >= 32)")
if counts["OK"] < 26:
    err(f"only {counts['OK']} OK labels (need >= 26)")
for k in BUG_KINDS:
    if kinds[k] == 0:
        err(f"no BUG labels of kind {k}")
if counts["BUG"] and not 0.35 <= kinds["comm"] / counts["BUG"] <= 0.65:
    err(f"comm share of BUG labels {kinds['comm']}/{counts['BUG']} is not roughly half")
if total and not 0.25 <= pkg_labels / total <= 0.45:
    err(f"package label share {pkg_labels}/{total} is not about a third")

print(f"single-file cases: {len(singles)}")
print(f"packages: {len(packages)} ({', '.join(sorted(packages))})")
print(f"labels: {total} (BUG {counts['BUG']}, OK {counts['OK']})")
print(f"BUG kinds: comm {kinds['comm']}, numerics {kinds['numerics']}, training_proxy {kinds['training_proxy']}")
print(f"labels in packages: {pkg_labels} ({pkg_labels / max(total, 1):.0%})")
if errors:
    for e in errors:
        print("ERROR:", e)
    sys.exit(1)
print("OK")
