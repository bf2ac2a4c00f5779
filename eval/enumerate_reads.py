"""List candidate grad-mode reads in a source tree (the first pass behind labels.csv).

A candidate is a read that can take part in a predicate or decision:

* every call of ``is_grad_enabled(...)`` / ``is_inference_mode_enabled(...)``
  (``torch.``, ``torch._C.`` or a bare imported name);
* every load of a name or attribute that carries grad mode: identifiers containing
  ``grad_enabled`` / ``inference_mode_enabled`` (not ``set_grad_enabled`` or
  ``compiled_autograd_enabled``), and locals assigned directly from one of the calls
  above in the same function (``requires_grad = torch.is_grad_enabled()``).

Plain pass-through of a carrier (a bare positional or keyword argument, or an element of
a tuple/list/dict being packed) and stores/declarations are left out. Every candidate
was then read in context and labelled by hand; this script does not label anything.

Usage: python enumerate_reads.py ROOT IMPORT_DIR [IMPORT_DIR ...] > candidates.csv
ROOT is the directory that contains the import dirs; paths are printed relative to it.
Stdlib only.
"""

from __future__ import annotations

import ast
import csv
import os
import sys
from collections.abc import Iterator

GRAD_FUNCS = frozenset({"is_grad_enabled", "is_inference_mode_enabled"})
PASS_THROUGH_PARENTS = (ast.Call, ast.keyword, ast.Tuple, ast.List, ast.Dict, ast.Set, ast.Starred)
SKIP_DIRS = frozenset({"tests", "test", "docs"})


def is_carrier_name(name: str) -> bool:
    lowered = name.lower()
    if lowered.startswith("set_") or "autograd_enabled" in lowered:
        return False
    return "grad_enabled" in lowered or "inference_mode_enabled" in lowered


def is_grad_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr in GRAD_FUNCS
    return isinstance(func, ast.Name) and func.id in GRAD_FUNCS


def own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Nodes of a function (or module) body, not descending into nested functions."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


class ReadCollector(ast.NodeVisitor):
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.parents: dict[ast.AST, ast.AST] = {}
        self.scope_carriers: list[set[str]] = []
        self.qualname: list[str] = []
        self.reads: dict[int, tuple[str, str]] = {}

    def collect(self, tree: ast.Module) -> dict[int, tuple[str, str]]:
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.scope_carriers.append(self.local_carriers(tree))
        self.visit(tree)
        return self.reads

    @staticmethod
    def local_carriers(scope: ast.AST) -> set[str]:
        names: set[str] = set()
        for node in own_nodes(scope):
            if isinstance(node, ast.Assign) and is_grad_call(node.value):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and node.value is not None and is_grad_call(node.value):
                if isinstance(node.target, ast.Name):
                    names.add(node.target.id)
        return names

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.qualname.append(node.name)
        self.generic_visit(node)
        self.qualname.pop()

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.qualname.append(node.name)  # type: ignore[attr-defined]
        self.scope_carriers.append(self.local_carriers(node))
        self.generic_visit(node)
        self.scope_carriers.pop()
        self.qualname.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def record(self, node: ast.AST) -> None:
        line = node.lineno  # type: ignore[attr-defined]
        self.reads.setdefault(line, (".".join(self.qualname) or "<module>", self.lines[line - 1].strip()))

    def is_pass_through(self, node: ast.AST) -> bool:
        parent = self.parents.get(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return True  # the callee, not a value
        return isinstance(parent, PASS_THROUGH_PARENTS)

    def visit_Call(self, node: ast.Call) -> None:
        if is_grad_call(node):
            self.record(node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and not self.is_pass_through(node):
            if is_carrier_name(node.id) or node.id in GRAD_FUNCS or node.id in self.scope_carriers[-1]:
                self.record(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load) and not self.is_pass_through(node):
            if is_carrier_name(node.attr) or node.attr in GRAD_FUNCS:
                self.record(node)
        self.generic_visit(node)


def iter_python_files(root: str, import_dir: str) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, import_dir)):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for filename in sorted(filenames):
            if filename.endswith(".py"):
                yield os.path.join(dirpath, filename)


def enumerate_reads(root: str, import_dirs: list[str]) -> Iterator[tuple[str, int, str, str]]:
    for import_dir in import_dirs:
        for path in iter_python_files(root, import_dir):
            with open(path, encoding="utf-8", errors="replace") as handle:
                source = handle.read()
            try:
                tree = ast.parse(source)
            except SyntaxError as error:
                print(f"skipping {path}: {error}", file=sys.stderr)
                continue
            reads = ReadCollector(source.splitlines()).collect(tree)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            for line, (function, text) in sorted(reads.items()):
                yield rel, line, function, text


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    writer = csv.writer(sys.stdout)
    writer.writerow(["path", "line", "function", "source"])
    for row in enumerate_reads(argv[1], argv[2:]):
        writer.writerow(row)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
