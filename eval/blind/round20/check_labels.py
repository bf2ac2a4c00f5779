#!/usr/bin/env python3
"""Stdlib-only validator for the grad-mode corpus in ./cases and ./labels.csv."""
import ast
import csv
import os
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
LABELS = os.path.join(HERE, "labels.csv")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
KINDS = {"BUG": {"comm", "numerics", "training_proxy"}, "OK": {"trap"}}


def main() -> int:
    errors = []
    files = {}
    for dirpath, _, names in os.walk(CASES):
        for n in names:
            if n.endswith(".py"):
                full = os.path.join(dirpath, n)
                rel = os.path.relpath(full, CASES).replace(os.sep, "/")
                with open(full, encoding="utf-8") as f:
                    text = f.read()
                files[rel] = text.splitlines()
                try:
                    ast.parse(text, filename=rel, feature_version=(3, 10))
                except SyntaxError as e:
                    errors.append(f"{rel}: does not parse: {e}")
                if not files[rel] or not files[rel][0].startswith("# adapted from "):
                    errors.append(f"{rel}: first line is not '# adapted from ...'")

    # packages
    packages = sorted({p.split("/")[0] for p in files if "/" in p})
    for pkg in packages:
        mods = [p for p in files if p.startswith(pkg + "/")]
        if f"{pkg}/__init__.py" not in mods:
            errors.append(f"{pkg}: missing __init__.py")
        others = [m for m in mods if not m.endswith("/__init__.py")]
        if len(others) < 2:
            errors.append(f"{pkg}: needs >= 2 modules besides __init__.py, has {len(others)}")
    singles = sorted(p for p in files if "/" not in p)

    # labels
    with open(LABELS, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = list(reader)
    if header != HEADER:
        errors.append(f"labels.csv header mismatch: {header}")
    seen = set()
    counts = Counter()
    for r in rows:
        if len(r) != len(HEADER):
            errors.append(f"bad row width: {r}")
            continue
        path, line, label, kind, source, reason, origin = r
        key = (path, line)
        if key in seen:
            errors.append(f"duplicate (path,line): {key}")
        seen.add(key)
        if label not in KINDS or kind not in KINDS[label]:
            errors.append(f"{path}:{line}: invalid label/kind {label}/{kind}")
        if path not in files:
            errors.append(f"{path}: labelled file does not exist")
            continue
        lines = files[path]
        try:
            ln = int(line)
        except ValueError:
            errors.append(f"{path}: bad line {line!r}")
            continue
        if not 1 <= ln <= len(lines):
            errors.append(f"{path}:{ln}: line out of range")
            continue
        if source == "opposite polarity":
            if label != "OK":
                errors.append(f"{path}:{ln}: opposite polarity row must be OK")
        elif lines[ln - 1].strip() != source:
            errors.append(f"{path}:{ln}: source mismatch: {lines[ln - 1].strip()!r} != {source!r}")
        if origin != lines[0][2:]:
            errors.append(f"{path}:{ln}: origin does not match first line")
        if not reason.strip():
            errors.append(f"{path}:{ln}: empty reason")
        scope = "package" if "/" in path else "single"
        counts[(label, kind, scope)] += 1

    # counts table
    print(f"single-file cases: {len(singles)}   packages: {len(packages)}   label rows: {len(rows)}")
    print()
    print("| label | kind | single | package | total |")
    print("|---|---|---|---|---|")
    for label in ("BUG", "OK"):
        for kind in sorted(KINDS[label]):
            s = counts[(label, kind, "single")]
            p = counts[(label, kind, "package")]
            print(f"| {label} | {kind} | {s} | {p} | {s + p} |")
    for label in ("BUG", "OK"):
        s = sum(v for (l, _, sc), v in counts.items() if l == label and sc == "single")
        p = sum(v for (l, _, sc), v in counts.items() if l == label and sc == "package")
        print(f"| {label} | all | {s} | {p} | {s + p} |")
    print()

    nbug = sum(v for (l, _, _), v in counts.items() if l == "BUG")
    nok = sum(v for (l, _, _), v in counts.items() if l == "OK")
    if nbug < 30:
        errors.append(f"only {nbug} BUG lines (< 30)")
    if nok < 25:
        errors.append(f"only {nok} OK lines (< 25)")
    if len(singles) < 18:
        errors.append(f"only {len(singles)} single-file cases (< 18)")
    if len(packages) < 7:
        errors.append(f"only {len(packages)} packages (< 7)")

    if errors:
        for e in errors:
            print("ERROR:", e)
        return 1
    print("OK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
