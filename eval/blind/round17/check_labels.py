#!/usr/bin/env python3
"""Stdlib-only validator for the round17 corpus."""
import ast
import csv
import os
import sys
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
KINDS = {"BUG": {"comm", "numerics", "training_proxy"}, "OK": {"trap"}}
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]

errors = []


def err(msg):
    errors.append(msg)


def main():
    files = {}
    for dirpath, _, names in os.walk(CASES):
        for n in names:
            if n.endswith(".py"):
                full = os.path.join(dirpath, n)
                rel = os.path.relpath(full, CASES).replace(os.sep, "/")
                with open(full) as f:
                    text = f.read()
                files[rel] = text.split("\n")
                try:
                    ast.parse(text, filename=rel, feature_version=(3, 10))
                except SyntaxError as e:
                    err(f"{rel}: does not parse: {e}")
                if not files[rel][0].startswith("# adapted from "):
                    err(f"{rel}: first line is not '# adapted from ...'")
                elif len(files[rel][0].split()) != 5:
                    err(f"{rel}: header should be '# adapted from <owner/repo> <path>'")

    # packages
    packages = defaultdict(list)
    singles = []
    for rel in files:
        if "/" in rel:
            pkg, mod = rel.split("/", 1)
            packages[pkg].append(mod)
        else:
            singles.append(rel)
    for pkg, mods in packages.items():
        if "__init__.py" not in mods:
            err(f"package {pkg}: missing __init__.py")
        others = [m for m in mods if m != "__init__.py"]
        if len(others) < 2:
            err(f"package {pkg}: needs >= 2 modules besides __init__.py, has {len(others)}")

    with open(os.path.join(ROOT, "labels.csv"), newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        if header != HEADER:
            err(f"labels.csv header {header} != {HEADER}")
        rows = list(reader)

    seen = set()
    counts = Counter()
    per_file = Counter()
    for i, row in enumerate(rows, start=2):
        if len(row) != len(HEADER):
            err(f"labels.csv:{i}: wrong column count")
            continue
        path, line, label, kind, source, reason, origin = row
        if path not in files:
            err(f"labels.csv:{i}: unknown path {path}")
            continue
        try:
            ln = int(line)
        except ValueError:
            err(f"labels.csv:{i}: bad line {line}")
            continue
        if (path, ln) in seen:
            err(f"labels.csv:{i}: duplicate ({path},{ln})")
        seen.add((path, ln))
        if label not in KINDS or kind not in KINDS[label]:
            err(f"labels.csv:{i}: invalid label/kind {label}/{kind}")
        lines = files[path]
        if not 1 <= ln <= len(lines):
            err(f"labels.csv:{i}: line {ln} out of range for {path}")
            continue
        actual = lines[ln - 1].strip()
        if source == "opposite polarity":
            if label != "OK":
                err(f"labels.csv:{i}: opposite polarity rows must be OK")
            if not actual:
                err(f"labels.csv:{i}: opposite polarity row points at a blank line")
        elif actual != source:
            err(f"labels.csv:{i}: source mismatch at {path}:{ln}: {actual!r} != {source!r}")
        if origin != lines[0][2:]:
            err(f"labels.csv:{i}: origin {origin!r} != header of {path}")
        if not reason.strip():
            err(f"labels.csv:{i}: empty reason")
        scope = "package" if "/" in path else "single"
        counts[(label, kind, scope)] += 1
        per_file[path] += 1

    # table
    print(f"files: {len(files)}  single-file cases: {len(singles)}  packages: {len(packages)}")
    print()
    print(f"{'label':<6} {'kind':<15} {'single':>7} {'package':>8} {'total':>6}")
    tot_s = tot_p = 0
    for label in ("BUG", "OK"):
        for kind in sorted(KINDS[label]):
            s = counts[(label, kind, "single")]
            p = counts[(label, kind, "package")]
            tot_s += s
            tot_p += p
            print(f"{label:<6} {kind:<15} {s:>7} {p:>8} {s + p:>6}")
    for label in ("BUG", "OK"):
        s = sum(v for (l, k, sc), v in counts.items() if l == label and sc == "single")
        p = sum(v for (l, k, sc), v in counts.items() if l == label and sc == "package")
        print(f"{label:<6} {'(all)':<15} {s:>7} {p:>8} {s + p:>6}")
    print(f"{'all':<6} {'':<15} {tot_s:>7} {tot_p:>8} {tot_s + tot_p:>6}")
    print()

    n_bug = sum(v for (l, _, _), v in counts.items() if l == "BUG")
    n_ok = sum(v for (l, _, _), v in counts.items() if l == "OK")
    if n_bug < 30:
        err(f"only {n_bug} BUG lines (< 30)")
    if n_ok < 25:
        err(f"only {n_ok} OK lines (< 25)")
    if len(singles) < 18:
        err(f"only {len(singles)} single-file cases (< 18)")
    if len(packages) < 7:
        err(f"only {len(packages)} packages (< 7)")
    for pkg in packages:
        if not any(p.startswith(pkg + "/") for p in per_file):
            err(f"package {pkg} has no labels")
    for s in singles:
        if per_file[s] == 0:
            err(f"single case {s} has no labels")

    if errors:
        for e in errors:
            print("ERROR:", e)
        sys.exit(1)
    print("OK: all checks passed")


if __name__ == "__main__":
    main()
