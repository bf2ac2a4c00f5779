#!/usr/bin/env python3
"""Check labels.csv against the case files.

* every file under cases/ parses (with the Python 3.10 grammar where the running interpreter supports it);
* every package directory under cases/ has an __init__.py;
* every labels.csv row has a valid label/kind, points at an existing file and line, and its `source`
  equals that line stripped; (path, line) pairs are unique; BUG rows never use kind `trap` and OK rows always do.
Prints a summary of counts and exits non-zero on any problem.
"""
import ast
import csv
import os
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
LABELS = os.path.join(HERE, "labels.csv")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
BUG_KINDS = {"comm", "numerics", "training_proxy"}


def main() -> int:
    errors = []
    files = {}
    for dirpath, dirnames, filenames in os.walk(CASES):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, CASES)
        if rel_dir != "." and "__init__.py" not in filenames:
            errors.append(f"package {rel_dir} has no __init__.py")
        for fn in sorted(filenames):
            if not fn.endswith(".py"):
                continue
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, CASES)
            text = open(full, encoding="utf-8").read()
            try:
                ast.parse(text, filename=rel, feature_version=(3, 10))
            except SyntaxError as exc:
                errors.append(f"{rel}: does not parse: {exc}")
            files[rel] = text.splitlines()

    seen = set()
    rows = []
    with open(LABELS, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        if header != HEADER:
            errors.append(f"bad header {header}")
        for n, row in enumerate(reader, start=2):
            if len(row) != len(HEADER):
                errors.append(f"labels.csv:{n}: expected {len(HEADER)} fields, got {len(row)}")
                continue
            rec = dict(zip(HEADER, row))
            rows.append(rec)
            path, label, kind = rec["path"], rec["label"], rec["kind"]
            if label not in ("BUG", "OK"):
                errors.append(f"labels.csv:{n}: bad label {label!r}")
            if label == "BUG" and kind not in BUG_KINDS:
                errors.append(f"labels.csv:{n}: BUG with kind {kind!r}")
            if label == "OK" and kind != "trap":
                errors.append(f"labels.csv:{n}: OK with kind {kind!r}")
            if not rec["reason"].strip() or not rec["origin"].strip():
                errors.append(f"labels.csv:{n}: empty reason/origin")
            if path not in files:
                errors.append(f"labels.csv:{n}: no such case file {path!r}")
                continue
            try:
                line = int(rec["line"])
            except ValueError:
                errors.append(f"labels.csv:{n}: bad line {rec['line']!r}")
                continue
            lines = files[path]
            if not 1 <= line <= len(lines):
                errors.append(f"labels.csv:{n}: line {line} out of range for {path}")
                continue
            if lines[line - 1].strip() != rec["source"]:
                errors.append(
                    f"labels.csv:{n}: source mismatch at {path}:{line}\n"
                    f"    file:   {lines[line - 1].strip()!r}\n    labels: {rec['source']!r}"
                )
            if (path, line) in seen:
                errors.append(f"labels.csv:{n}: duplicate label for {path}:{line}")
            seen.add((path, line))

    single = [r for r in rows if "/" not in r["path"]]
    pkg = [r for r in rows if "/" in r["path"]]
    packages = {r["path"].split("/")[0] for r in pkg}
    print(f"case files: {len(files)}  labels: {len(rows)}")
    print("labels:", dict(Counter(r["label"] for r in rows)))
    print("kinds:", dict(Counter(r["kind"] for r in rows)))
    print(f"single-file labels: {dict(Counter(r['label'] for r in single))} "
          f"({len(single)}/{len(rows)} = {100.0 * len(single) / max(len(rows), 1):.0f}%)")
    print(f"package labels: {dict(Counter(r['label'] for r in pkg))} in {len(packages)} packages")

    if errors:
        print(f"\n{len(errors)} problem(s):")
        for e in errors:
            print("  " + e)
        return 1
    print("OK: all sources match and all files parse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
