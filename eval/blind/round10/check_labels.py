#!/usr/bin/env python3
"""Validate /tmp/round10/labels.csv against /tmp/round10/cases (stdlib only)."""
import ast
import csv
import os
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
VALID = {"BUG": {"comm", "numerics", "training_proxy"}, "OK": {"trap"}}

errors = []
files = {}
for dirpath, _, names in os.walk(CASES):
    for n in names:
        if n.endswith(".py"):
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, CASES).replace(os.sep, "/")
            text = open(full, encoding="utf-8").read()
            files[rel] = text.split("\n")
            try:
                ast.parse(text, filename=rel)
            except SyntaxError as e:
                errors.append(f"{rel}: does not parse: {e}")

with open(os.path.join(ROOT, "labels.csv"), newline="", encoding="utf-8") as f:
    reader = csv.reader(f)
    header = next(reader)
    if header != HEADER:
        errors.append(f"bad header {header}")
    rows = list(reader)

seen = set()
bug_kinds = Counter()
ok = 0
for r in rows:
    if len(r) != 7:
        errors.append(f"bad row {r}")
        continue
    path, line, label, kind, source, reason, origin = r
    if path not in files:
        errors.append(f"{path}: missing file")
        continue
    ln = int(line)
    if (path, ln) in seen:
        errors.append(f"{path}:{ln}: duplicate label")
    seen.add((path, ln))
    if label not in VALID or kind not in VALID[label]:
        errors.append(f"{path}:{ln}: invalid label/kind {label}/{kind}")
    lines = files[path]
    if not 1 <= ln <= len(lines):
        errors.append(f"{path}:{ln}: line out of range")
        continue
    if lines[ln - 1].strip() != source:
        errors.append(f"{path}:{ln}: source mismatch: {lines[ln-1].strip()!r} != {source!r}")
    if not reason or not origin:
        errors.append(f"{path}:{ln}: empty reason/origin")
    if label == "BUG":
        bug_kinds[kind] += 1
    else:
        ok += 1

singles = [p for p in files if "/" not in p]
pkg_files = [p for p in files if "/" in p]
pkgs = sorted({p.split("/")[0] for p in pkg_files})
for pk in pkgs:
    if f"{pk}/__init__.py" not in files:
        errors.append(f"package {pk} lacks __init__.py")
for p in singles:
    n = len(files[p]) - (1 if files[p][-1] == "" else 0)
    if not 20 <= n <= 120:
        errors.append(f"{p}: {n} lines (want 20-120)")

lab_single = sum(1 for r in rows if "/" not in r[0])
print(f"BUG total: {sum(bug_kinds.values())}  " + "  ".join(f"{k}={bug_kinds[k]}" for k in sorted(VALID['BUG'])))
print(f"OK (trap): {ok}")
print(f"single-file cases: {len(singles)}  packages: {len(pkgs)} ({len(pkg_files)} files)")
print(f"labels in single files: {lab_single}  labels in packages: {len(rows) - lab_single}")
unlabelled = [p for p in files if not any(r[0] == p for r in rows) and not p.endswith("__init__.py")]
if unlabelled:
    print("files without labels:", ", ".join(sorted(unlabelled)))
if errors:
    print(f"{len(errors)} ERROR(S):")
    for e in errors:
        print("  " + e)
    sys.exit(1)
print("OK: all checks passed")
