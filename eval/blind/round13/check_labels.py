#!/usr/bin/env python3
"""Validate the round-13 corpus and print label counts.

Checks:
  * every .py file under cases/ parses as Python 3.10 and starts with
    "# adapted from <owner/repo> <path>";
  * a package is a directory under cases/ with __init__.py and 2-4 other modules;
  * labels.csv has the expected header, every row names an existing file, a line
    that exists and is not blank, a valid label/kind pair, a non-empty source and
    reason, and an origin equal to the file's header;
  * no (path, line) pair is labelled twice;
  * no case file contains comments or names that mark bug locations;
  * corpus minimums (files, packages, BUG/OK/comm counts).
Python 3 standard library only.
"""
import ast
import csv
import os
import re
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
LABELS = os.path.join(ROOT, "labels.csv")

HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
KINDS = {"BUG": {"comm", "numerics", "training_proxy"}, "OK": {"trap"}}
ORIGIN_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+ \S+\.py$")
MARKER_RE = re.compile(r"\bbugs?\b|buggy|\btrap\b|planted", re.IGNORECASE)

MIN = {
    "single_files": 22,
    "packages": 8,
    "BUG": 34,
    "comm": 13,
    "OK": 28,
    "BUG_in_packages": 12,
}


def fail(errors, msg):
    errors.append(msg)


def main() -> int:
    errors = []

    # ------------------------------------------------------------ files
    single_files, packages, sources = [], {}, {}
    for entry in sorted(os.listdir(CASES)):
        full = os.path.join(CASES, entry)
        if os.path.isfile(full) and entry.endswith(".py"):
            single_files.append(entry)
        elif os.path.isdir(full):
            mods = sorted(f for f in os.listdir(full) if f.endswith(".py"))
            if "__init__.py" not in mods:
                fail(errors, f"{entry}/: package without __init__.py")
            others = [m for m in mods if m != "__init__.py"]
            if not 2 <= len(others) <= 4:
                fail(errors, f"{entry}/: has {len(others)} modules besides __init__.py (want 2-4)")
            packages[entry] = mods
            subdirs = [d for d in os.listdir(full) if os.path.isdir(os.path.join(full, d)) and d != "__pycache__"]
            if subdirs:
                fail(errors, f"{entry}/: nested directories {subdirs} are not expected")

    all_files = list(single_files) + [f"{p}/{m}" for p, mods in packages.items() for m in mods]
    for rel in all_files:
        path = os.path.join(CASES, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        sources[rel] = text.splitlines()
        try:
            ast.parse(text, filename=rel, feature_version=(3, 10))
        except SyntaxError as e:
            fail(errors, f"{rel}: does not parse as Python 3.10: {e}")
        first = sources[rel][0] if sources[rel] else ""
        if not first.startswith("# adapted from ") or not ORIGIN_RE.match(first[len("# adapted from "):]):
            fail(errors, f"{rel}: first line must be '# adapted from <owner/repo> <path>'")
        for no, line in enumerate(sources[rel], 1):
            if MARKER_RE.search(line):
                fail(errors, f"{rel}:{no}: line contains a bug/trap marker: {line.strip()!r}")

    # ------------------------------------------------------------ labels
    with open(LABELS, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        rows = list(reader)
    if header != HEADER:
        fail(errors, f"labels.csv header is {header}, expected {HEADER}")

    seen = set()
    by_label = Counter()
    by_kind = Counter()
    by_scope = Counter()
    files_with_labels = Counter()
    for n, row in enumerate(rows, 2):
        if len(row) != len(HEADER):
            fail(errors, f"labels.csv:{n}: expected {len(HEADER)} columns, got {len(row)}")
            continue
        rel, line_s, label, kind, source, reason, origin = row
        if rel not in sources:
            fail(errors, f"labels.csv:{n}: unknown path {rel!r}")
            continue
        try:
            line = int(line_s)
        except ValueError:
            fail(errors, f"labels.csv:{n}: line {line_s!r} is not an integer")
            continue
        lines = sources[rel]
        if not 1 <= line <= len(lines):
            fail(errors, f"labels.csv:{n}: {rel}:{line} is outside the file ({len(lines)} lines)")
            continue
        if not lines[line - 1].strip():
            fail(errors, f"labels.csv:{n}: {rel}:{line} is blank")
        if lines[line - 1].lstrip().startswith("#"):
            fail(errors, f"labels.csv:{n}: {rel}:{line} is a comment line")
        if label not in KINDS:
            fail(errors, f"labels.csv:{n}: label {label!r} is not BUG/OK")
        elif kind not in KINDS[label]:
            fail(errors, f"labels.csv:{n}: kind {kind!r} is not valid for {label}")
        if not source.strip() or not reason.strip():
            fail(errors, f"labels.csv:{n}: empty source or reason")
        header_origin = lines[0][len("# adapted from "):] if lines else ""
        if origin != header_origin:
            fail(errors, f"labels.csv:{n}: origin {origin!r} differs from file header {header_origin!r}")
        key = (rel, line)
        if key in seen:
            fail(errors, f"labels.csv:{n}: duplicate label for {rel}:{line}")
        seen.add(key)
        scope = "package" if "/" in rel else "single"
        by_label[label] += 1
        by_kind[(label, kind)] += 1
        by_scope[(scope, label)] += 1
        files_with_labels[rel] += 1

    # ------------------------------------------------------------ report
    print("files")
    print(f"  single-file cases : {len(single_files)}")
    print(f"  packages          : {len(packages)} ({sum(len(m) for m in packages.values())} modules incl. __init__)")
    print(f"  labelled files    : {len(files_with_labels)}")
    print("labels")
    print(f"  total             : {sum(by_label.values())}")
    for label in ("BUG", "OK"):
        print(f"  {label:<18}: {by_label[label]}")
    print("by kind")
    for (label, kind), count in sorted(by_kind.items()):
        print(f"  {label:<4} {kind:<14}: {count}")
    print("by scope")
    for scope in ("single", "package"):
        print(f"  {scope:<8} BUG {by_scope[(scope, 'BUG')]:>3}   OK {by_scope[(scope, 'OK')]:>3}")

    got = {
        "single_files": len(single_files),
        "packages": len(packages),
        "BUG": by_label["BUG"],
        "comm": by_kind[("BUG", "comm")],
        "OK": by_label["OK"],
        "BUG_in_packages": by_scope[("package", "BUG")],
    }
    for k, v in MIN.items():
        if got[k] < v:
            fail(errors, f"minimum not met: {k} = {got[k]} < {v}")

    if errors:
        print(f"\nFAILED ({len(errors)} problems)")
        for e in errors:
            print("  " + e)
        return 1
    print("\nOK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
