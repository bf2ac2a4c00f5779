#!/usr/bin/env python3
"""Stdlib validator for the round-16 grad-mode corpus (cases/ + labels.csv)."""
import ast
import csv
import os
import re
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(ROOT, "cases")
HEADER = ["path", "line", "label", "kind", "source", "reason", "origin"]
KINDS = {"BUG": {"comm", "numerics", "training_proxy"}, "OK": {"trap"}}
OK_TAGS = {"opposite polarity"}
ORIGIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]* [^\s]+$")
ADAPTED = "# adapted from "


def main() -> int:
    errors = []
    files = {}
    packages = []
    singles = []
    for entry in sorted(os.listdir(CASES)):
        full = os.path.join(CASES, entry)
        if os.path.isdir(full):
            packages.append(entry)
            mods = sorted(m for m in os.listdir(full) if m.endswith(".py"))
            others = [m for m in os.listdir(full) if not m.endswith(".py") and m != "__pycache__"]
            if others:
                errors.append(f"package {entry}: unexpected non-.py entries {others}")
            if "__init__.py" not in mods:
                errors.append(f"package {entry}: missing __init__.py")
            n = len([m for m in mods if m != "__init__.py"])
            if not 2 <= n <= 4:
                errors.append(f"package {entry}: {n} modules besides __init__.py (need 2-4)")
            for m in mods:
                files[f"{entry}/{m}"] = os.path.join(full, m)
        elif entry.endswith(".py"):
            singles.append(entry)
            files[entry] = full
        else:
            errors.append(f"unexpected entry in cases/: {entry}")

    texts = {}
    for rel, full in files.items():
        with open(full, encoding="utf-8") as f:
            text = f.read()
        texts[rel] = text.splitlines()
        try:
            ast.parse(text, filename=rel, feature_version=(3, 10))
        except SyntaxError as e:
            errors.append(f"{rel}: does not parse with Python 3.10 grammar: {e}")
        first = texts[rel][0] if texts[rel] else ""
        if not first.startswith(ADAPTED):
            errors.append(f"{rel}: first line does not start with '{ADAPTED.strip()}'")
        elif not ORIGIN_RE.match(first[len(ADAPTED):]):
            errors.append(f"{rel}: malformed '# adapted from' line: {first!r}")

    counts = Counter()
    seen = set()
    labelled_files = set()
    with open(os.path.join(ROOT, "labels.csv"), newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header != HEADER:
            errors.append(f"labels.csv: header {header} != {HEADER}")
        for n, row in enumerate(reader, start=2):
            if len(row) != len(HEADER):
                errors.append(f"labels.csv:{n}: expected {len(HEADER)} fields, got {len(row)}")
                continue
            path, line, label, kind, source, reason, origin = row
            where = f"labels.csv:{n} ({path}:{line})"
            if path not in texts:
                errors.append(f"{where}: no such case file")
                continue
            try:
                ln = int(line)
            except ValueError:
                errors.append(f"{where}: line is not an integer")
                continue
            if not 1 <= ln <= len(texts[path]):
                errors.append(f"{where}: line out of range")
                continue
            text = texts[path][ln - 1].strip()
            if not text:
                errors.append(f"{where}: labelled line is blank")
            if (path, ln) in seen:
                errors.append(f"{where}: duplicate (path, line)")
            seen.add((path, ln))
            if label not in KINDS:
                errors.append(f"{where}: invalid label {label!r}")
            elif kind not in KINDS[label]:
                errors.append(f"{where}: invalid kind {kind!r} for {label}")
            if source != text and not (label == "OK" and source in OK_TAGS):
                errors.append(f"{where}: source {source!r} does not match line {text!r}")
            if not reason.strip():
                errors.append(f"{where}: empty reason")
            if not ORIGIN_RE.match(origin):
                errors.append(f"{where}: origin {origin!r} is not 'owner/repo path'")
            first = texts[path][0]
            if first.startswith(ADAPTED) and origin != first[len(ADAPTED):]:
                errors.append(f"{where}: origin {origin!r} differs from the file's '# adapted from' line")
            labelled_files.add(path)
            scope = "package" if "/" in path else "single"
            counts[(label, kind, scope)] += 1

    for s in singles:
        if s not in labelled_files:
            errors.append(f"{s}: single-file case has no labels")
    for p in packages:
        if not any(lf.startswith(p + "/") for lf in labelled_files):
            errors.append(f"{p}: package has no labels")

    # counts table
    rows = [("BUG", "comm"), ("BUG", "numerics"), ("BUG", "training_proxy"), ("OK", "trap")]
    print(f"cases: {len(singles)} single files, {len(packages)} packages ({len(files)} .py files)")
    print(f"{'label':<6} {'kind':<15} {'single':>7} {'package':>8} {'total':>6}")
    tot = Counter()
    for label, kind in rows:
        s, p = counts[(label, kind, "single")], counts[(label, kind, "package")]
        tot[(label, "single")] += s
        tot[(label, "package")] += p
        print(f"{label:<6} {kind:<15} {s:>7} {p:>8} {s + p:>6}")
    for label in ("BUG", "OK"):
        s, p = tot[(label, "single")], tot[(label, "package")]
        print(f"{label:<6} {'(all)':<15} {s:>7} {p:>8} {s + p:>6}")
    s_all = tot[("BUG", "single")] + tot[("OK", "single")]
    p_all = tot[("BUG", "package")] + tot[("OK", "package")]
    print(f"{'all':<6} {'':<15} {s_all:>7} {p_all:>8} {s_all + p_all:>6}")

    if errors:
        for e in errors:
            print("ERROR:", e)
        return 1
    print("OK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
