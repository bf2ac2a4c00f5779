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


def main():
    errors = []
    files = {}
    for dirpath, _, names in os.walk(CASES):
        for n in names:
            if n.endswith(".py"):
                full = os.path.join(dirpath, n)
                rel = os.path.relpath(full, CASES)
                with open(full) as f:
                    text = f.read()
                files[rel] = text.split("\n")
                try:
                    ast.parse(text, filename=rel, feature_version=(3, 10))
                except SyntaxError as e:
                    errors.append(f"{rel}: does not parse: {e}")
                if not files[rel][0].startswith("# adapted from "):
                    errors.append(f"{rel}: first line is not '# adapted from ...'")

    packages = {}
    singles = set()
    for rel in files:
        parts = rel.split(os.sep)
        if len(parts) == 1:
            singles.add(rel)
        else:
            packages.setdefault(parts[0], []).append(parts[-1])
    for pkg, mods in sorted(packages.items()):
        if "__init__.py" not in mods:
            errors.append(f"package {pkg}: missing __init__.py")
        others = [m for m in mods if m != "__init__.py"]
        if len(others) < 2:
            errors.append(f"package {pkg}: needs >= 2 modules besides __init__.py, has {len(others)}")

    seen = set()
    counts = Counter()
    with open(os.path.join(ROOT, "labels.csv"), newline="") as f:
        reader = csv.DictReader(f)
        expected = ["path", "line", "label", "kind", "source", "reason", "origin"]
        if reader.fieldnames != expected:
            errors.append(f"labels.csv header {reader.fieldnames} != {expected}")
        for row in reader:
            path, line = row["path"], int(row["line"])
            key = (path, line)
            if key in seen:
                errors.append(f"duplicate label {key}")
            seen.add(key)
            if path not in files:
                errors.append(f"{path}: no such case file")
                continue
            lines = files[path]
            if not 1 <= line <= len(lines):
                errors.append(f"{path}:{line}: line out of range")
                continue
            if row["label"] not in ("BUG", "OK"):
                errors.append(f"{path}:{line}: bad label {row['label']}")
            if row["kind"] not in KINDS:
                errors.append(f"{path}:{line}: bad kind {row['kind']}")
            if row["label"] == "BUG" and row["kind"] == "trap":
                errors.append(f"{path}:{line}: BUG rows cannot have kind trap")
            if row["label"] == "OK" and row["kind"] != "trap":
                errors.append(f"{path}:{line}: OK rows must have kind trap")
            if row["source"] == OPP:
                if row["label"] != "OK":
                    errors.append(f"{path}:{line}: opposite polarity rows must be OK")
            elif lines[line - 1].strip() != row["source"]:
                errors.append(f"{path}:{line}: source mismatch: {lines[line - 1].strip()!r} != {row['source']!r}")
            if row["origin"] != lines[0][2:]:
                errors.append(f"{path}:{line}: origin does not match the file's first line")
            scope = "single" if path in singles else "package"
            counts[(row["label"], row["kind"], scope)] += 1

    print(f"{'label':<6} {'kind':<15} {'single':>7} {'package':>8} {'total':>6}")
    for label, kind in [("BUG", "comm"), ("BUG", "numerics"), ("BUG", "training_proxy"), ("OK", "trap")]:
        s, p = counts[(label, kind, "single")], counts[(label, kind, "package")]
        print(f"{label:<6} {kind:<15} {s:>7} {p:>8} {s + p:>6}")
    nb = sum(v for k, v in counts.items() if k[0] == "BUG")
    no = sum(v for k, v in counts.items() if k[0] == "OK")
    print(f"BUG total {nb}, OK total {no}; single-file cases {len(singles)}, packages {len(packages)}")
    if nb < 30:
        errors.append(f"only {nb} BUG lines (< 30)")
    if no < 25:
        errors.append(f"only {no} OK lines (< 25)")
    if len(singles) < 18:
        errors.append(f"only {len(singles)} single-file cases (< 18)")
    if len(packages) < 7:
        errors.append(f"only {len(packages)} packages (< 7)")
    if errors:
        for e in errors:
            print("ERROR:", e)
        sys.exit(1)
    print("OK: all checks passed")


if __name__ == "__main__":
    main()
