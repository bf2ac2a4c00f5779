#!/usr/bin/env python3
"""Stdlib-only validator for the grad-mode corpus."""
import ast
import csv
import os
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
KINDS_BUG = {"comm", "numerics", "training_proxy"}
PREFIX = "# adapted from "


def fail(msg, errs):
    errs.append(msg)


def main():
    errs = []
    files = {}
    for dp, _, fns in os.walk(CASES):
        for fn in fns:
            if fn.endswith(".py"):
                full = os.path.join(dp, fn)
                rel = os.path.relpath(full, CASES)
                with open(full) as f:
                    text = f.read()
                files[rel] = text
                try:
                    ast.parse(text, filename=rel, feature_version=(3, 10))
                except SyntaxError as e:
                    fail(f"{rel}: does not parse as Python 3.10: {e}", errs)
                first = text.splitlines()[0] if text else ""
                if not first.startswith(PREFIX) or len(first.split()) < 5:
                    fail(f"{rel}: first line must be '# adapted from <owner/repo> <path>'", errs)

    singles = sorted(p for p in files if os.sep not in p)
    packages = sorted({p.split(os.sep)[0] for p in files if os.sep in p})
    for pkg in packages:
        mods = [p for p in files if p.startswith(pkg + os.sep)]
        if os.path.join(pkg, "__init__.py") not in mods:
            fail(f"package {pkg}: missing __init__.py", errs)
        others = [m for m in mods if not m.endswith("__init__.py")]
        if not (2 <= len(others) <= 4):
            fail(f"package {pkg}: needs 2-4 modules besides __init__.py, has {len(others)}", errs)
        rel_imports = 0
        for m in others:
            tree = ast.parse(files[m])
            rel_imports += sum(1 for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level > 0)
        if rel_imports == 0:
            fail(f"package {pkg}: modules do not import each other relatively", errs)

    seen = set()
    rows = []
    with open(os.path.join(ROOT, "labels.csv"), newline="") as f:
        rd = csv.DictReader(f)
        if rd.fieldnames != ["path", "line", "label", "kind", "source", "reason", "origin"]:
            fail(f"labels.csv: bad header {rd.fieldnames}", errs)
        for r in rd:
            rows.append(r)
            key = (r["path"], r["line"])
            if key in seen:
                fail(f"duplicate label {key}", errs)
            seen.add(key)
            path = r["path"].replace("/", os.sep)
            if path not in files:
                fail(f"{r['path']}: no such case file", errs)
                continue
            lines = files[path].splitlines()
            ln = int(r["line"])
            if not (1 <= ln <= len(lines)):
                fail(f"{r['path']}:{ln}: line out of range", errs)
                continue
            if r["label"] == "BUG":
                if r["kind"] not in KINDS_BUG:
                    fail(f"{r['path']}:{ln}: BUG with kind {r['kind']}", errs)
            elif r["label"] == "OK":
                if r["kind"] != "trap":
                    fail(f"{r['path']}:{ln}: OK must have kind trap", errs)
            else:
                fail(f"{r['path']}:{ln}: bad label {r['label']}", errs)
            if r["source"] == "opposite polarity":
                if r["label"] != "OK":
                    fail(f"{r['path']}:{ln}: opposite polarity must be OK", errs)
            elif lines[ln - 1].strip() != r["source"]:
                fail(f"{r['path']}:{ln}: source mismatch: {lines[ln - 1].strip()!r} != {r['source']!r}", errs)
            if r["origin"] != lines[0][2:]:
                fail(f"{r['path']}:{ln}: origin does not match first line", errs)
            if not r["reason"].strip():
                fail(f"{r['path']}:{ln}: empty reason", errs)

    labelled = {r["path"].split("/")[0] for r in rows}
    for s in singles:
        if s not in labelled:
            fail(f"{s}: single-file case has no labels", errs)
    for p in packages:
        if p not in labelled:
            fail(f"{p}: package has no labels", errs)

    cnt = Counter()
    for r in rows:
        scope = "package" if "/" in r["path"] else "single"
        cnt[(r["label"], r["kind"], scope)] += 1
    print(f"{'label':<6} {'kind':<15} {'single':>7} {'package':>8} {'total':>6}")
    for lab, kind in [("BUG", "comm"), ("BUG", "numerics"), ("BUG", "training_proxy"), ("OK", "trap")]:
        s, p = cnt[(lab, kind, "single")], cnt[(lab, kind, "package")]
        print(f"{lab:<6} {kind:<15} {s:>7} {p:>8} {s + p:>6}")
    nb = sum(v for (l, _, _), v in cnt.items() if l == "BUG")
    no = sum(v for (l, _, _), v in cnt.items() if l == "OK")
    nbs = sum(v for (l, _, s), v in cnt.items() if l == "BUG" and s == "single")
    nos = sum(v for (l, _, s), v in cnt.items() if l == "OK" and s == "single")
    print(f"{'BUG':<6} {'(all)':<15} {nbs:>7} {nb - nbs:>8} {nb:>6}")
    print(f"{'OK':<6} {'(all)':<15} {nos:>7} {no - nos:>8} {no:>6}")
    print(f"single-file cases: {len(singles)}  packages: {len(packages)}  labelled lines: {len(rows)}")

    if nb < 30:
        fail(f"need >= 30 BUG lines, have {nb}", errs)
    if no < 25:
        fail(f"need >= 25 OK lines, have {no}", errs)
    if len(singles) < 18:
        fail(f"need >= 18 single-file cases, have {len(singles)}", errs)
    if len(packages) < 7:
        fail(f"need >= 7 packages, have {len(packages)}", errs)

    if errs:
        for e in errs:
            print("ERROR:", e)
        sys.exit(1)
    print("OK: all checks passed")


if __name__ == "__main__":
    main()
