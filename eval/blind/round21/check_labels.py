"""Stdlib-only validator for the grad-mode corpus."""
import ast
import csv
import os
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
KINDS = {"comm", "numerics", "training_proxy", "trap"}
OPP = "opposite polarity"


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    files = []
    for dp, _, fns in os.walk(CASES):
        for fn in fns:
            if fn.endswith(".py"):
                files.append(os.path.relpath(os.path.join(dp, fn), CASES))
    texts = {}
    for f in sorted(files):
        with open(os.path.join(CASES, f)) as fh:
            src = fh.read()
        try:
            ast.parse(src, filename=f, feature_version=(3, 10))
        except SyntaxError as e:
            fail(f"{f} does not parse: {e}")
        first = src.split("\n", 1)[0]
        if not first.startswith("# adapted from ") or len(first.split()) < 5:
            fail(f"{f}: bad first line {first!r}")
        texts[f] = src.split("\n")

    # packages
    pkgs = {}
    for f in files:
        if os.sep in f:
            pkgs.setdefault(f.split(os.sep)[0], []).append(os.path.basename(f))
    for p, mods in pkgs.items():
        if "__init__.py" not in mods:
            fail(f"package {p} has no __init__.py")
        if len([m for m in mods if m != "__init__.py"]) < 2:
            fail(f"package {p} has fewer than 2 modules besides __init__.py")
    singles = [f for f in files if os.sep not in f]

    seen = set()
    counts = Counter()
    with open(os.path.join(HERE, "labels.csv"), newline="") as fh:
        rd = csv.DictReader(fh)
        if rd.fieldnames != ["path", "line", "label", "kind", "source", "reason", "origin"]:
            fail(f"bad header {rd.fieldnames}")
        for row in rd:
            p, ln = row["path"], int(row["line"])
            if p not in texts:
                fail(f"label points at missing file {p}")
            if (p, ln) in seen:
                fail(f"duplicate label {p}:{ln}")
            seen.add((p, ln))
            lines = texts[p]
            if not 1 <= ln <= len(lines):
                fail(f"{p}:{ln} out of range")
            if row["label"] not in ("BUG", "OK"):
                fail(f"{p}:{ln} bad label {row['label']}")
            if row["kind"] not in KINDS:
                fail(f"{p}:{ln} bad kind {row['kind']}")
            if row["label"] == "OK" and row["kind"] != "trap":
                fail(f"{p}:{ln} OK row must have kind trap")
            if row["label"] == "BUG" and row["kind"] == "trap":
                fail(f"{p}:{ln} BUG row cannot have kind trap")
            if row["source"] == OPP:
                if row["label"] != "OK":
                    fail(f"{p}:{ln} opposite polarity must be OK")
            elif lines[ln - 1].strip() != row["source"]:
                fail(f"{p}:{ln} source mismatch: {lines[ln - 1].strip()!r} != {row['source']!r}")
            if row["origin"] != lines[0][2:].strip():
                fail(f"{p}:{ln} origin mismatch")
            if not row["reason"].strip():
                fail(f"{p}:{ln} empty reason")
            where = "package" if os.sep in p or "/" in p else "single"
            counts[(row["label"], row["kind"], where)] += 1

    print(f"files: {len(files)}  single-file cases: {len(singles)}  packages: {len(pkgs)}")
    print(f"{'label':<6}{'kind':<16}{'single':>8}{'package':>9}{'total':>7}")
    for lab, kind in [("BUG", "comm"), ("BUG", "numerics"), ("BUG", "training_proxy"), ("OK", "trap")]:
        s, pk = counts[(lab, kind, "single")], counts[(lab, kind, "package")]
        print(f"{lab:<6}{kind:<16}{s:>8}{pk:>9}{s + pk:>7}")
    nb = sum(v for k, v in counts.items() if k[0] == "BUG")
    no = sum(v for k, v in counts.items() if k[0] == "OK")
    print(f"{'BUG':<22}{'':>8}{'':>9}{nb:>7}")
    print(f"{'OK':<22}{'':>8}{'':>9}{no:>7}")
    if nb < 30 or no < 25:
        fail("minimum label counts not met")
    if len(singles) < 18 or len(pkgs) < 7:
        fail("minimum case counts not met")
    print("OK: all checks passed")


if __name__ == "__main__":
    main()
