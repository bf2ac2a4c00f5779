"""Stdlib-only validator for the corpus in cases/ and labels.csv."""
import ast
import csv
import os
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
KINDS = {"comm", "numerics", "training_proxy", "trap"}
OPP = "opposite polarity"


def main():
    errors = []
    files = {}
    for root, _, names in os.walk(CASES):
        for n in names:
            if n.endswith(".py"):
                full = os.path.join(root, n)
                rel = os.path.relpath(full, CASES).replace(os.sep, "/")
                text = open(full).read()
                files[rel] = text.split("\n")
                try:
                    ast.parse(text, filename=rel, feature_version=(3, 10))
                except SyntaxError as e:
                    errors.append(f"{rel}: does not parse: {e}")
                if not files[rel][0].startswith("# adapted from "):
                    errors.append(f"{rel}: first line is not '# adapted from ...'")
    packages = {}
    for rel in files:
        if "/" in rel:
            pkg, mod = rel.split("/", 1)
            packages.setdefault(pkg, set()).add(mod)
    for pkg, mods in sorted(packages.items()):
        if "__init__.py" not in mods:
            errors.append(f"package {pkg}: missing __init__.py")
        if len(mods - {"__init__.py"}) < 2:
            errors.append(f"package {pkg}: needs >= 2 modules besides __init__.py")

    seen = set()
    counts = Counter()
    with open(os.path.join(HERE, "labels.csv"), newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != ["path", "line", "label", "kind", "source", "reason", "origin"]:
            errors.append(f"bad header {reader.fieldnames}")
        for r in reader:
            p, ln = r["path"], int(r["line"])
            if p not in files:
                errors.append(f"{p}: no such case file")
                continue
            if (p, ln) in seen:
                errors.append(f"{p}:{ln}: duplicate label")
            seen.add((p, ln))
            lines = files[p]
            if not 1 <= ln <= len(lines):
                errors.append(f"{p}:{ln}: line out of range")
                continue
            if r["label"] not in ("BUG", "OK"):
                errors.append(f"{p}:{ln}: bad label {r['label']}")
            if r["kind"] not in KINDS:
                errors.append(f"{p}:{ln}: bad kind {r['kind']}")
            if r["label"] == "OK" and r["kind"] != "trap":
                errors.append(f"{p}:{ln}: OK rows must have kind trap")
            if r["label"] == "BUG" and r["kind"] == "trap":
                errors.append(f"{p}:{ln}: BUG rows cannot have kind trap")
            if r["source"] == OPP:
                if r["label"] != "OK":
                    errors.append(f"{p}:{ln}: opposite polarity row must be OK")
            elif lines[ln - 1].strip() != r["source"]:
                errors.append(f"{p}:{ln}: source mismatch: {lines[ln - 1].strip()!r} != {r['source']!r}")
            if r["origin"] != lines[0][2:].strip():
                errors.append(f"{p}:{ln}: origin does not match first line")
            scope = "package" if "/" in p else "single"
            counts[(r["label"], r["kind"], scope)] += 1

    singles = [p for p in files if "/" not in p]
    print(f"single-file cases: {len(singles)}   packages: {len(packages)}")
    print(f"{'label':<6} {'kind':<15} {'single':>7} {'package':>8} {'total':>6}")
    for label, kind in [("BUG", "comm"), ("BUG", "numerics"), ("BUG", "training_proxy"), ("OK", "trap")]:
        s, k = counts[(label, kind, "single")], counts[(label, kind, "package")]
        print(f"{label:<6} {kind:<15} {s:>7} {k:>8} {s + k:>6}")
    tb = sum(v for (l, _, _), v in counts.items() if l == "BUG")
    to = sum(v for (l, _, _), v in counts.items() if l == "OK")
    print(f"{'BUG':<6} {'(all)':<15} {'':>7} {'':>8} {tb:>6}")
    print(f"{'OK':<6} {'(all)':<15} {'':>7} {'':>8} {to:>6}")
    if errors:
        for e in errors:
            print("ERROR:", e)
        sys.exit(1)
    print("OK: all checks passed")


if __name__ == "__main__":
    main()
