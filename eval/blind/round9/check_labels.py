#!/usr/bin/env python3
"""Validate the round9 corpus layout and labels.csv (stdlib only).

Usage: python3 check_labels.py [corpus_root]
"""
import ast
import csv
import io
import os
import re
import sys
import tokenize
from collections import Counter

HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
BUG_KINDS = {"comm", "numerics", "training_proxy"}
FORBIDDEN = {"bug", "bugs", "buggy", "trap", "traps", "wrong", "correct", "correctly",
             "bad", "good", "incorrect"}
MIN_SINGLES = 22
MIN_PACKAGES = 7
MIN_BUG = 32
MIN_COMM = 12
MIN_OK = 26
MIN_PKG_LABEL_FRACTION = 0.28
SINGLE_MIN_LINES, SINGLE_MAX_LINES = 20, 150
PKG_MIN_MODULES, PKG_MAX_MODULES = 2, 4

errors = []


def err(msg):
    errors.append(msg)


def split_identifier(name):
    parts = []
    for piece in re.split(r"_+", name):
        parts.extend(re.findall(r"[A-Z]+(?=[A-Z][a-z]|\d|\b)|[A-Z]?[a-z]+|[A-Z]+|\d+", piece))
    return [p.lower() for p in parts if p]


def words_of_text(text):
    return [w.lower() for w in re.findall(r"[A-Za-z]+", text)]


def scan_words(relpath, src):
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError) as exc:
        err(f"{relpath}: tokenize failed: {exc}")
        return
    for tok in toks:
        if tok.type == tokenize.COMMENT:
            bad = FORBIDDEN.intersection(words_of_text(tok.string))
            if bad:
                err(f"{relpath}:{tok.start[0]}: comment contains {sorted(bad)}")
        elif tok.type == tokenize.NAME:
            bad = FORBIDDEN.intersection(split_identifier(tok.string))
            if bad:
                err(f"{relpath}:{tok.start[0]}: identifier {tok.string!r} contains {sorted(bad)}")
        elif tok.type == tokenize.STRING:
            bad = FORBIDDEN.intersection(words_of_text(tok.string))
            if bad:
                err(f"{relpath}:{tok.start[0]}: string literal contains {sorted(bad)}")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
    cases = os.path.join(root, "cases")
    if not os.path.isdir(cases):
        print(f"no cases/ directory under {root}")
        return 2

    singles, packages, all_files = [], [], {}
    for entry in sorted(os.listdir(cases)):
        full = os.path.join(cases, entry)
        if entry.startswith(".") or entry == "__pycache__":
            continue
        if os.path.isfile(full):
            if not entry.endswith(".py"):
                err(f"cases/{entry}: unexpected non-Python file")
                continue
            singles.append(entry)
            all_files[entry] = full
        elif os.path.isdir(full):
            packages.append(entry)
            mods = []
            for sub in sorted(os.listdir(full)):
                if sub == "__pycache__" or sub.startswith("."):
                    continue
                subfull = os.path.join(full, sub)
                if os.path.isdir(subfull) or not sub.endswith(".py"):
                    err(f"cases/{entry}/{sub}: packages must be flat and contain only .py files")
                    continue
                all_files[f"{entry}/{sub}"] = subfull
                if sub != "__init__.py":
                    mods.append(sub)
            if not os.path.isfile(os.path.join(full, "__init__.py")):
                err(f"cases/{entry}: missing __init__.py")
            if not (PKG_MIN_MODULES <= len(mods) <= PKG_MAX_MODULES):
                err(f"cases/{entry}: has {len(mods)} modules besides __init__.py, need {PKG_MIN_MODULES}-{PKG_MAX_MODULES}")
            uses_relative = False
            for m in mods + ["__init__.py"]:
                try:
                    tree = ast.parse(open(os.path.join(full, m), encoding="utf-8").read())
                except SyntaxError:
                    continue
                if any(isinstance(n, ast.ImportFrom) and n.level > 0 for n in ast.walk(tree)):
                    uses_relative = True
            if not uses_relative:
                err(f"cases/{entry}: no relative imports between modules")

    if len(singles) < MIN_SINGLES:
        err(f"only {len(singles)} single-file cases, need >= {MIN_SINGLES}")
    if len(packages) < MIN_PACKAGES:
        err(f"only {len(packages)} packages, need >= {MIN_PACKAGES}")

    sources = {}
    for rel, full in sorted(all_files.items()):
        src = open(full, encoding="utf-8").read()
        sources[rel] = src.split("\n")
        try:
            ast.parse(src, filename=rel, feature_version=(3, 10))
        except SyntaxError as exc:
            err(f"{rel}: does not parse as Python 3.10: {exc}")
        scan_words(rel, src)
        if "/" not in rel:
            n = len(src.rstrip("\n").split("\n"))
            if not (SINGLE_MIN_LINES <= n <= SINGLE_MAX_LINES):
                err(f"{rel}: {n} lines, single cases need {SINGLE_MIN_LINES}-{SINGLE_MAX_LINES}")

    labels_path = os.path.join(root, "labels.csv")
    with open(labels_path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        rows = list(reader)
    if not rows or rows[0] != HEADER:
        err(f"labels.csv header is {rows[0] if rows else None}, expected {HEADER}")
        rows = rows[:1] + rows[1:]
    seen = set()
    counts = Counter()
    pkg_labels = 0
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(HEADER):
            err(f"labels.csv:{i}: {len(row)} columns")
            continue
        path, line, label, kind, source, reason, origin = row
        if path not in sources:
            err(f"labels.csv:{i}: unknown path {path!r}")
            continue
        try:
            ln = int(line)
        except ValueError:
            err(f"labels.csv:{i}: line {line!r} is not an integer")
            continue
        lines = sources[path]
        if not (1 <= ln <= len(lines)):
            err(f"labels.csv:{i}: line {ln} out of range for {path}")
            continue
        if lines[ln - 1].strip() != source:
            err(f"labels.csv:{i}: source mismatch at {path}:{ln}: {lines[ln - 1].strip()!r} != {source!r}")
        if lines[ln - 1].strip().startswith("#") or not source:
            err(f"labels.csv:{i}: labelled line is empty or a comment")
        if (path, ln) in seen:
            err(f"labels.csv:{i}: duplicate label for {path}:{ln}")
        seen.add((path, ln))
        if label == "BUG":
            if kind not in BUG_KINDS:
                err(f"labels.csv:{i}: BUG kind {kind!r} not in {sorted(BUG_KINDS)}")
        elif label == "OK":
            if kind != "trap":
                err(f"labels.csv:{i}: OK label must have kind 'trap', got {kind!r}")
        else:
            err(f"labels.csv:{i}: label {label!r} not BUG/OK")
        if not reason.strip() or not origin.strip():
            err(f"labels.csv:{i}: empty reason or origin")
        counts[(label, kind)] += 1
        if "/" in path:
            pkg_labels += 1

    n_bug = sum(v for (l, _), v in counts.items() if l == "BUG")
    n_ok = sum(v for (l, _), v in counts.items() if l == "OK")
    n_comm = counts[("BUG", "comm")]
    total = n_bug + n_ok
    if n_bug < MIN_BUG:
        err(f"only {n_bug} BUG labels, need >= {MIN_BUG}")
    if n_comm < MIN_COMM:
        err(f"only {n_comm} comm BUG labels, need >= {MIN_COMM}")
    for k in sorted(BUG_KINDS):
        if counts[("BUG", k)] == 0:
            err(f"no BUG labels of kind {k}")
    if n_ok < MIN_OK:
        err(f"only {n_ok} OK labels, need >= {MIN_OK}")
    if total and pkg_labels / total < MIN_PKG_LABEL_FRACTION:
        err(f"only {pkg_labels}/{total} labels are in packages")
    for pkg in packages:
        if not any(p.startswith(pkg + "/") for p, _ in seen):
            err(f"package {pkg} has no labels")

    print(f"singles={len(singles)} packages={len(packages)} files={len(all_files)}")
    print(f"BUG={n_bug} (comm={n_comm}, numerics={counts[('BUG', 'numerics')]}, "
          f"training_proxy={counts[('BUG', 'training_proxy')]}) OK={n_ok} "
          f"package_labels={pkg_labels}/{total}")
    if errors:
        for e in errors:
            print("ERROR:", e)
        print(f"FAILED with {len(errors)} error(s)")
        return 1
    print("OK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
