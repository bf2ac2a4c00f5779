#!/usr/bin/env python3
"""Validate the blind-round-14 corpus: files parse, labels point at real lines, counts add up.

Stdlib only.  Run from anywhere: python3 check_labels.py
"""
import ast
import collections
import csv
import os
import re
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
LABELS = os.path.join(ROOT, "labels.csv")

HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
BUG_KINDS = {"comm", "numerics", "training_proxy"}
OK_KINDS = {"trap"}
ORIGIN_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+ \S+\.py$")
FORBIDDEN = re.compile(r"#\s*(BUG|FIXME: bug|TRAP|OK:)|buggy_|_buggy\b", re.IGNORECASE)

MIN = {"single": 22, "packages": 8, "bug": 34, "bug_comm": 13, "ok": 28, "bug_in_packages": 12}


def fail(errors, msg):
    errors.append(msg)


def collect_cases(errors):
    singles, packages = [], {}
    for name in sorted(os.listdir(CASES)):
        full = os.path.join(CASES, name)
        if os.path.isdir(full):
            mods = sorted(f for f in os.listdir(full) if f.endswith(".py"))
            if "__init__.py" not in mods:
                fail(errors, f"package {name}: missing __init__.py")
            others = [m for m in mods if m != "__init__.py"]
            if not 2 <= len(others) <= 4:
                fail(errors, f"package {name}: has {len(others)} modules besides __init__.py, expected 2-4")
            packages[name] = mods
        elif name.endswith(".py"):
            singles.append(name)
    return singles, packages


def check_file(rel, errors):
    full = os.path.join(CASES, rel)
    with open(full, encoding="utf-8") as fh:
        text = fh.read()
    try:
        ast.parse(text, filename=rel, feature_version=(3, 10))
    except SyntaxError as exc:
        fail(errors, f"{rel}: does not parse with Python 3.10 grammar: {exc}")
    first = text.split("\n", 1)[0]
    m = re.match(r"^# adapted from (\S+/\S+) (\S+)$", first)
    if not m:
        fail(errors, f"{rel}: first line must be '# adapted from <owner/repo> <path>'")
    for i, line in enumerate(text.split("\n"), 1):
        if FORBIDDEN.search(line):
            fail(errors, f"{rel}:{i}: comment or name gives the label away: {line.strip()!r}")
    return text.split("\n")


def main() -> int:
    errors = []
    singles, packages = collect_cases(errors)
    files = {}
    for s in singles:
        files[s] = check_file(s, errors)
    for pkg, mods in packages.items():
        for m in mods:
            rel = f"{pkg}/{m}"
            files[rel] = check_file(rel, errors)

    with open(LABELS, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    if header != HEADER:
        fail(errors, f"labels.csv header is {header}, expected {HEADER}")

    seen = set()
    counts = collections.Counter()
    per_case = collections.defaultdict(collections.Counter)
    for n, row in enumerate(rows, 2):
        if len(row) != len(HEADER):
            fail(errors, f"labels.csv:{n}: expected {len(HEADER)} columns, got {len(row)}")
            continue
        path, line, label, kind, source, reason, origin = row
        if path not in files:
            fail(errors, f"labels.csv:{n}: unknown path {path}")
            continue
        try:
            ln = int(line)
        except ValueError:
            fail(errors, f"labels.csv:{n}: line {line!r} is not an integer")
            continue
        lines = files[path]
        if not 1 <= ln <= len(lines):
            fail(errors, f"labels.csv:{n}: {path}:{ln} is out of range (file has {len(lines)} lines)")
            continue
        if not lines[ln - 1].strip():
            fail(errors, f"labels.csv:{n}: {path}:{ln} is blank")
        if lines[ln - 1].strip().startswith("#"):
            fail(errors, f"labels.csv:{n}: {path}:{ln} is a comment line")
        if (path, ln) in seen:
            fail(errors, f"labels.csv:{n}: duplicate label for {path}:{ln}")
        seen.add((path, ln))
        if label == "BUG":
            if kind not in BUG_KINDS:
                fail(errors, f"labels.csv:{n}: BUG with kind {kind!r}")
        elif label == "OK":
            if kind not in OK_KINDS:
                fail(errors, f"labels.csv:{n}: OK with kind {kind!r}")
        else:
            fail(errors, f"labels.csv:{n}: label {label!r} is neither BUG nor OK")
        if not source.strip() or not reason.strip():
            fail(errors, f"labels.csv:{n}: empty source or reason")
        if not ORIGIN_RE.match(origin):
            fail(errors, f"labels.csv:{n}: origin {origin!r} is not 'owner/repo path/to/file.py'")
        header_line = lines[0]
        if origin.split(" ")[0] not in header_line:
            fail(errors, f"labels.csv:{n}: origin repo {origin.split(' ')[0]} does not match {path} header")
        where = "package" if "/" in path else "single"
        counts[(label, kind, where)] += 1
        per_case[path.split("/")[0]][label] += 1

    unlabelled = [c for c in singles + list(packages) if c not in per_case]
    for c in unlabelled:
        fail(errors, f"case {c} has no labels")

    # ---- report ----
    def total(label=None, kind=None, where=None):
        return sum(v for (l, k, w), v in counts.items()
                   if (label is None or l == label) and (kind is None or k == kind) and (where is None or w == where))

    print(f"cases: {len(singles)} single-file, {len(packages)} packages "
          f"({sum(len(m) for m in packages.values())} package modules), {len(rows)} labels")
    print()
    print(f"{'label':<6} {'kind':<15} {'single':>7} {'package':>8} {'total':>6}")
    for label, kinds in (("BUG", sorted(BUG_KINDS)), ("OK", sorted(OK_KINDS))):
        for kind in kinds:
            print(f"{label:<6} {kind:<15} {total(label, kind, 'single'):>7} {total(label, kind, 'package'):>8} "
                  f"{total(label, kind):>6}")
        print(f"{label:<6} {'(all)':<15} {total(label, None, 'single'):>7} {total(label, None, 'package'):>8} "
              f"{total(label):>6}")
    print()

    checks = [
        ("single-file cases", len(singles), MIN["single"]),
        ("packages", len(packages), MIN["packages"]),
        ("BUG lines", total("BUG"), MIN["bug"]),
        ("BUG comm lines", total("BUG", "comm"), MIN["bug_comm"]),
        ("OK lines", total("OK"), MIN["ok"]),
        ("BUG lines in packages", total("BUG", None, "package"), MIN["bug_in_packages"]),
    ]
    for name, have, need in checks:
        status = "ok" if have >= need else "TOO FEW"
        print(f"{name:<24} {have:>4}  (minimum {need})  {status}")
        if have < need:
            fail(errors, f"{name}: {have} < {need}")

    if errors:
        print()
        for e in errors:
            print("ERROR:", e)
        print(f"\nFAILED with {len(errors)} error(s)")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
