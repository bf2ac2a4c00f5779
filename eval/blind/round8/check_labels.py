#!/usr/bin/env python3
"""Validate the grad-mode gating corpus in ./cases against ./labels.csv (stdlib only)."""
import ast
import csv
import io
import os
import re
import sys
import tokenize
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
LABELS = os.path.join(HERE, "labels.csv")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
KINDS = {"BUG": {"comm", "numerics", "training_proxy"}, "OK": {"trap"}}
MIN_SINGLE, MIN_PKG, MIN_BUG, MIN_OK = 20, 6, 32, 26
REVEALING = re.compile(r"\b(BUG|bug|trap|TRAP|buggy)\b|#\s*(bad|good|wrong|correct)\b", re.I)

errors = []


def err(msg):
    errors.append(msg)


def read_lines(rel):
    with open(os.path.join(CASES, rel), encoding="utf-8") as f:
        return f.read().splitlines()


def check_parse(rel):
    src = open(os.path.join(CASES, rel), encoding="utf-8").read()
    try:
        ast.parse(src, filename=rel, feature_version=(3, 10))
    except SyntaxError as e:
        err(f"{rel}: does not parse as Python 3.10: {e}")
        return
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT and REVEALING.search(tok.string):
                err(f"{rel}:{tok.start[0]}: comment may reveal a label: {tok.string!r}")
            if tok.type == tokenize.NAME and REVEALING.search(tok.string):
                err(f"{rel}:{tok.start[0]}: identifier may reveal a label: {tok.string!r}")
    except tokenize.TokenError as e:
        err(f"{rel}: tokenize error {e}")


def main():
    singles, packages = [], {}
    for entry in sorted(os.listdir(CASES)):
        full = os.path.join(CASES, entry)
        if entry.startswith(".") or entry == "__pycache__":
            continue
        if os.path.isfile(full):
            if not entry.endswith(".py"):
                err(f"unexpected file in cases/: {entry}")
                continue
            singles.append(entry)
        elif os.path.isdir(full):
            mods = sorted(m for m in os.listdir(full) if m.endswith(".py"))
            others = [m for m in os.listdir(full) if not m.endswith(".py") and m != "__pycache__"]
            if others:
                err(f"{entry}/: unexpected non-.py entries {others}")
            packages[entry] = mods

    for rel in singles:
        check_parse(rel)
        n = len(read_lines(rel))
        if not 20 <= n <= 150:
            err(f"{rel}: {n} lines, expected 20-150")
    for pkg, mods in packages.items():
        if "__init__.py" not in mods:
            err(f"{pkg}/: missing __init__.py")
        others = [m for m in mods if m != "__init__.py"]
        if not 2 <= len(others) <= 4:
            err(f"{pkg}/: {len(others)} modules besides __init__.py, expected 2-4")
        total = 0
        for m in mods:
            rel = f"{pkg}/{m}"
            check_parse(rel)
            total += len(read_lines(rel))
        if not 20 <= total <= 150:
            err(f"{pkg}/: {total} lines in total, expected 20-150")

    if len(singles) < MIN_SINGLE:
        err(f"only {len(singles)} single-file cases, need {MIN_SINGLE}")
    if len(packages) < MIN_PKG:
        err(f"only {len(packages)} packages, need {MIN_PKG}")

    with open(LABELS, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header != HEADER:
            err(f"labels.csv header {header} != {HEADER}")
        rows = list(reader)

    counts = Counter()
    kinds = Counter()
    in_pkg = 0
    seen = set()
    labelled_files = Counter()
    all_files = set(singles) | {f"{p}/{m}" for p, ms in packages.items() for m in ms}
    for i, row in enumerate(rows, start=2):
        if len(row) != len(HEADER):
            err(f"labels.csv:{i}: {len(row)} fields")
            continue
        path, line, label, kind, source, reason, origin = row
        if path not in all_files:
            err(f"labels.csv:{i}: unknown path {path}")
            continue
        try:
            ln = int(line)
        except ValueError:
            err(f"labels.csv:{i}: bad line {line!r}")
            continue
        lines = read_lines(path)
        if not 1 <= ln <= len(lines):
            err(f"labels.csv:{i}: line {ln} out of range for {path}")
            continue
        if lines[ln - 1].strip() != source:
            err(f"labels.csv:{i}: source mismatch at {path}:{ln}: {lines[ln - 1].strip()!r} != {source!r}")
        if label not in KINDS:
            err(f"labels.csv:{i}: bad label {label!r}")
        elif kind not in KINDS[label]:
            err(f"labels.csv:{i}: kind {kind!r} invalid for {label}")
        if (path, ln) in seen:
            err(f"labels.csv:{i}: duplicate label for {path}:{ln}")
        seen.add((path, ln))
        if not reason.strip() or not origin.strip():
            err(f"labels.csv:{i}: empty reason/origin")
        counts[label] += 1
        kinds[kind] += 1
        labelled_files[path.split("/")[0]] += 1
        if "/" in path:
            in_pkg += 1

    for unit in list(singles) + list(packages):
        if labelled_files[unit] == 0:
            err(f"{unit}: no labels")

    if counts["BUG"] < MIN_BUG:
        err(f"only {counts['BUG']} BUG labels, need {MIN_BUG}")
    if counts["OK"] < MIN_OK:
        err(f"only {counts['OK']} OK labels, need {MIN_OK}")

    total = sum(counts.values())
    print(f"single-file cases: {len(singles)}  packages: {len(packages)}")
    print(f"labels: {total}  BUG: {counts['BUG']}  OK: {counts['OK']}")
    print(f"kinds: comm={kinds['comm']} numerics={kinds['numerics']} "
          f"training_proxy={kinds['training_proxy']} trap={kinds['trap']}")
    if total:
        print(f"labels in packages: {in_pkg} ({100.0 * in_pkg / total:.0f}%)")
    if errors:
        for e in errors:
            print("ERROR:", e)
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
