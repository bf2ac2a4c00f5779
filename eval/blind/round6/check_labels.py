#!/usr/bin/env python3
"""Validate the grad-mode gating corpus in ./cases against ./labels.csv (stdlib only)."""
import ast
import csv
import os
import re
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
BUG_KINDS = {"comm", "numerics", "training_proxy"}
REVEAL = re.compile(r"\bBUG\b|\btrap\b|#\s*(bad|good|ok\b)", re.IGNORECASE)

errors = []


def err(msg):
    errors.append(msg)


def nlines(p):
    with open(p, encoding="utf-8") as f:
        return len(f.read().splitlines())


def main():
    singles, packages, sources = [], [], {}
    for entry in sorted(os.listdir(CASES)):
        full = os.path.join(CASES, entry)
        if os.path.isfile(full):
            if not entry.endswith(".py"):
                err(f"unexpected file {entry}")
                continue
            singles.append(entry)
            n = nlines(full)
            if not 20 <= n <= 150:
                err(f"{entry}: {n} lines, want 20-150")
        elif os.path.isdir(full):
            if entry == "__pycache__":
                continue
            files = sorted(f for f in os.listdir(full) if f.endswith(".py"))
            other = [f for f in os.listdir(full) if not f.endswith(".py") and f != "__pycache__"]
            if other:
                err(f"{entry}: non-python entries {other}")
            if "__init__.py" not in files:
                err(f"{entry}: missing __init__.py")
            mods = [f for f in files if f != "__init__.py"]
            if not 2 <= len(mods) <= 4:
                err(f"{entry}: {len(mods)} modules, want 2-4")
            total = sum(nlines(os.path.join(full, f)) for f in files)
            if not 20 <= total <= 150:
                err(f"{entry}: {total} lines in total, want 20-150")
            packages.append(entry)
            for f in files:
                sources[f"{entry}/{f}"] = os.path.join(full, f)
    for s in singles:
        sources[s] = os.path.join(CASES, s)

    texts = {}
    for rel, p in sources.items():
        with open(p, encoding="utf-8") as f:
            text = f.read()
        texts[rel] = text.splitlines()
        try:
            ast.parse(text, filename=rel, feature_version=(3, 10))
        except SyntaxError as e:
            err(f"{rel}: does not parse as Python 3.10: {e}")
        for i, line in enumerate(texts[rel], 1):
            if REVEAL.search(line):
                err(f"{rel}:{i}: label-revealing text: {line.strip()}")

    with open(os.path.join(ROOT, "labels.csv"), newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        rows = list(reader)
    if header != HEADER:
        err(f"bad header {header}")

    seen = set()
    counts = {"BUG": 0, "OK": 0}
    kinds = {k: 0 for k in BUG_KINDS}
    in_pkg = 0
    labelled_files = set()
    for n, row in enumerate(rows, 2):
        if len(row) != len(HEADER):
            err(f"labels.csv:{n}: {len(row)} columns")
            continue
        path, line, label, kind, source, reason, origin = row
        if path not in texts:
            err(f"labels.csv:{n}: unknown path {path}")
            continue
        try:
            ln = int(line)
        except ValueError:
            err(f"labels.csv:{n}: bad line {line}")
            continue
        if not 1 <= ln <= len(texts[path]):
            err(f"labels.csv:{n}: line {ln} out of range")
            continue
        if texts[path][ln - 1].strip() != source:
            err(f"labels.csv:{n}: source mismatch at {path}:{ln}: {texts[path][ln - 1].strip()!r} != {source!r}")
        if (path, ln) in seen:
            err(f"labels.csv:{n}: duplicate {path}:{ln}")
        seen.add((path, ln))
        if label == "BUG":
            if kind not in BUG_KINDS:
                err(f"labels.csv:{n}: BUG with kind {kind}")
            else:
                kinds[kind] += 1
        elif label == "OK":
            if kind != "trap":
                err(f"labels.csv:{n}: OK with kind {kind}")
        else:
            err(f"labels.csv:{n}: bad label {label}")
            continue
        counts[label] += 1
        if not reason.strip() or not origin.strip():
            err(f"labels.csv:{n}: empty reason/origin")
        if "/" in path:
            in_pkg += 1
        labelled_files.add(path.split("/")[0])

    total = counts["BUG"] + counts["OK"]
    if len(singles) < 20:
        err(f"{len(singles)} single-file cases, want >= 20")
    if len(packages) < 6:
        err(f"{len(packages)} packages, want >= 6")
    if counts["BUG"] < 32:
        err(f"{counts['BUG']} BUG labels, want >= 32")
    if counts["OK"] < 26:
        err(f"{counts['OK']} OK labels, want >= 26")
    if any(v == 0 for v in kinds.values()):
        err(f"missing a BUG kind: {kinds}")
    if counts["BUG"] and not 0.35 <= kinds["comm"] / counts["BUG"] <= 0.65:
        err(f"comm share {kinds['comm']}/{counts['BUG']} not roughly half")
    if total and not 0.25 <= in_pkg / total <= 0.45:
        err(f"package label share {in_pkg}/{total} not about a third")
    for case in singles + packages:
        if case not in labelled_files:
            err(f"{case}: no labels")

    print(f"single-file cases: {len(singles)}, packages: {len(packages)}")
    print(f"labels: {total} (BUG {counts['BUG']}: comm {kinds['comm']}, numerics {kinds['numerics']}, "
          f"training_proxy {kinds['training_proxy']}; OK {counts['OK']}); in packages: {in_pkg}")
    if errors:
        for e in errors:
            print("ERROR:", e)
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
