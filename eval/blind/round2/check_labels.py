#!/usr/bin/env python3
"""Verify labels.csv against cases/: every source matches its line, every case file parses."""
import ast
import collections
import csv
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
KINDS = {"BUG": {"comm", "numerics", "training_proxy"}, "OK": {"trap"}}

errors = []

# 1. every python file under cases/ parses as Python 3.10 source
py_files = []
for root, _, files in os.walk(CASES):
    for fn in files:
        if fn.endswith(".py"):
            p = os.path.join(root, fn)
            py_files.append(p)
            try:
                ast.parse(open(p, encoding="utf-8").read(), filename=p, feature_version=(3, 10))
            except SyntaxError as e:
                errors.append(f"parse error: {os.path.relpath(p, CASES)}: {e}")

# 2. packages have an __init__.py and 2-4 modules
for entry in sorted(os.listdir(CASES)):
    d = os.path.join(CASES, entry)
    if os.path.isdir(d):
        mods = [f for f in os.listdir(d) if f.endswith(".py")]
        if "__init__.py" not in mods:
            errors.append(f"package without __init__.py: {entry}")
        n = len([m for m in mods if m != "__init__.py"])
        if not 2 <= n <= 4:
            errors.append(f"package {entry} has {n} modules (want 2-4)")

# 3. labels.csv rows
with open(os.path.join(ROOT, "labels.csv"), newline="", encoding="utf-8") as f:
    reader = csv.reader(f)
    header = next(reader)
    if header != HEADER:
        errors.append(f"bad header: {header}")
    rows = [dict(zip(header, r)) for r in reader]

seen = set()
cache = {}
for n, r in enumerate(rows, start=2):
    where = f"labels.csv:{n}"
    path = os.path.join(CASES, r["path"])
    if not os.path.isfile(path):
        errors.append(f"{where}: missing file {r['path']}")
        continue
    if path not in cache:
        cache[path] = open(path, encoding="utf-8").read().split("\n")
    lines = cache[path]
    try:
        line = int(r["line"])
    except ValueError:
        errors.append(f"{where}: bad line {r['line']!r}")
        continue
    if not 1 <= line <= len(lines):
        errors.append(f"{where}: line {line} out of range")
        continue
    if lines[line - 1].strip() != r["source"]:
        errors.append(f"{where}: source mismatch at {r['path']}:{line}: {lines[line - 1].strip()!r} != {r['source']!r}")
    if r["label"] not in KINDS:
        errors.append(f"{where}: bad label {r['label']!r}")
    elif r["kind"] not in KINDS[r["label"]]:
        errors.append(f"{where}: kind {r['kind']!r} not valid for {r['label']}")
    if not r["reason"].strip() or not r["origin"].strip():
        errors.append(f"{where}: empty reason/origin")
    key = (r["path"], line)
    if key in seen:
        errors.append(f"{where}: duplicate label for {key}")
    seen.add(key)

if errors:
    print("\n".join(errors))
    sys.exit(1)

c = collections.Counter()
for r in rows:
    scope = "package" if "/" in r["path"] else "single"
    c[(r["label"], scope)] += 1
    c[r["label"]] += 1
    c[(r["label"], r["kind"])] += 1
pkgs = sorted({r["path"].split("/")[0] for r in rows if "/" in r["path"]})
singles = sorted({r["path"] for r in rows if "/" not in r["path"]})
print(f"OK: {len(py_files)} python files parse; {len(rows)} labels verified")
print(f"BUG={c['BUG']} (single {c[('BUG', 'single')]}, package {c[('BUG', 'package')]}; "
      f"comm {c[('BUG', 'comm')]}, numerics {c[('BUG', 'numerics')]}, training_proxy {c[('BUG', 'training_proxy')]})")
print(f"OK={c['OK']} (single {c[('OK', 'single')]}, package {c[('OK', 'package')]})")
print(f"single-file cases: {len(singles)}; packages: {len(pkgs)}")
