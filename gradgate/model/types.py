"""What makes a value, read from the code's shape: the callable whose call an attribute
(``self.coord = Coordinator(...)``), a container's items (``self.coords[k] = ...``) or a
function's ``return`` holds. Enough to resolve the methods called on such a value,
best effort: where the stores of an attribute disagree, nothing is known.

Names are fully qualified (import aliases resolved); a name of the module itself is
qualified with the module's name, as :meth:`TypeHints.local` spells it.
"""

from __future__ import annotations

import ast

from .index import ClassInfo, FunctionInfo, ModuleIndex, dotted, own_statements, qualify
from .outline import body_parsed

#: values that initialise a container or leave an attribute unset: no type, no conflict
_PLACEHOLDERS = (ast.Constant, ast.Dict, ast.List, ast.Set, ast.Tuple, ast.DictComp, ast.ListComp)
#: a marker for "stores that disagree"
_CONFLICT = "\0"


class TypeHints:
    def __init__(self, index: ModuleIndex, module: str) -> None:
        self.index = index
        self.module = module
        #: (class, attribute name) -> what its methods store in ``self.name`` and in
        #: ``self.name[...]`` (keys ``name`` and ``name[]``)
        self._attributes: dict[tuple[str, str], dict[str, str]] = {}
        #: each method's stores in attributes of ``self`` (:meth:`_stores_in`)
        self._method_stores: dict[str, list[tuple[str, str]]] = {}
        self._returns: dict[str, str | None] = {}

    def local(self, qualname: str) -> str:
        """The fully qualified name of a function or class of this module."""
        return f"{self.module}.{qualname}" if self.module else qualname

    def maker(self, node: ast.AST | None, aliases: dict[str, str]) -> str | None:
        """The callable whose call ``node`` is (``Coordinator(...)``, ``mod.make(...)``)."""
        if not isinstance(node, ast.Call):
            return None
        name = dotted(node.func)
        if name is None:
            return None
        head = name.split(".")[0]
        if head in self.index.classes or (head in self.index.functions and head not in aliases):
            return self.local(name)
        qualified = qualify(name, aliases)
        return qualified if qualified != name or head in aliases else None

    def annotated(self, annotation: ast.expr | None, aliases: dict[str, str]) -> str | None:
        """The class an annotation names (``Coordinator``, ``"Coordinator"``,
        ``Optional[Coordinator]``, ``Coordinator | None``), fully qualified."""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            sides = [s for s in (annotation.left, annotation.right) if not _is_none(s)]
            annotation = sides[0] if len(sides) == 1 else None
        if isinstance(annotation, ast.Subscript) and (dotted(annotation.value) or "").endswith("Optional"):
            return self.annotated(annotation.slice, aliases)
        if isinstance(annotation, ast.Constant):  # `Optional["Handle"]`
            return self.annotated(annotation, aliases) if isinstance(annotation.value, str) else None
        name = dotted(annotation) if annotation is not None else None
        if name is None:
            return None
        head = name.split(".")[0]
        if head in self.index.classes:
            return self.local(name)
        return qualify(name, aliases) if head in aliases else None

    def attribute(self, klass: str | None, attr: str, depth: int = 0) -> str | None:
        """What makes ``self.attr`` in the methods of ``klass`` (``attr[]``: its items)."""
        if klass is None or depth > 8:
            return None
        info = self.index.classes.get(klass)
        if info is None:
            return None
        found = self._stores_of(info, attr.removesuffix("[]")).get(attr)
        if found is not None:
            return None if found == _CONFLICT else found
        for base in info.bases:
            if base in self.index.classes:
                inherited = self.attribute(base, attr, depth + 1)
                if inherited is not None:
                    return inherited
        return None

    def _stores_of(self, info: ClassInfo, name: str) -> dict[str, str]:
        """What the methods of ``info`` store in ``self.name`` and its items (keys
        ``name`` and ``name[]``; stores that disagree: a conflict), each method walked
        once. A method of an outline whose body is not parsed yet is read only if its
        lines spell ``name`` (a store spells it): walking every method of a class for
        its first question parsed every body of an outlined module
        (:mod:`~gradgate.model.outline`); a search of the text for each name asked cost
        more than walking the bodies a whole tree has parsed already."""
        key = (info.name, name)
        found = self._attributes.get(key)
        if found is not None:
            return found
        found = self._attributes[key] = {}
        wanted = (name, f"{name}[]")
        for qualname in info.methods.values():
            node = self.index.functions[qualname].node
            if qualname not in self._method_stores and not body_parsed(node) and not self.index.spells(node, {name}):
                continue
            for attr, made in self._stores_in(qualname):
                if attr in wanted:
                    found[attr] = made if found.get(attr, made) == made else _CONFLICT
        return found

    def _stores_in(self, qualname: str) -> list[tuple[str, str]]:
        """The stores of one method in ``self.x`` (``self.x[k]``: ``x[]``), in order,
        each with what makes the value (:data:`_CONFLICT`: nothing known); placeholders
        (``self.x = None``) are no stores."""
        found = self._method_stores.get(qualname)
        if found is not None:
            return found
        found = self._method_stores[qualname] = []
        method = self.index.functions[qualname]
        aliases = self.index.aliases_of(method)
        for statement in own_statements(method.node.body):
            if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None:
                continue
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                attr = self_attribute(target)
                if attr is None:
                    continue
                annotation = statement.annotation if isinstance(statement, ast.AnnAssign) else None
                declared = self.annotated(annotation, aliases) if annotation is not None else None
                if declared is not None:  # `self.x: Optional[Handle] = None`
                    found.append((attr, declared))
                elif not isinstance(statement.value, _PLACEHOLDERS):
                    made = self.maker(statement.value, aliases) or self._parameter_type(method, statement.value)
                    found.append((attr, made or _CONFLICT))
        return found

    def _parameter_type(self, info: FunctionInfo, value: ast.expr) -> str | None:
        """What the annotation of the parameter ``value`` names (``self.comm = comm``)."""
        if not isinstance(value, ast.Name):
            return None
        arg = next((a for a in info.params if a.arg == value.id), None)
        return self.annotated(arg.annotation, self.index.aliases_of(info)) if arg is not None else None

    def returned(self, info: FunctionInfo) -> str | None:
        """What makes every value the function returns (``None`` returns aside)."""
        if info.qualname in self._returns:
            return self._returns[info.qualname]
        self._returns[info.qualname] = None  # a recursive function returns nothing known
        aliases = self.index.aliases_of(info)
        declared = self.annotated(info.node.returns, aliases)
        if declared is not None:  # `-> Coordinator`
            self._returns[info.qualname] = declared
            return declared
        bound: dict[str, str | None] = {}
        makes: set[str | None] = set()
        for statement in own_statements(info.node.body):
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                if isinstance(target, ast.Name):
                    made = self.maker(statement.value, aliases)
                    bound[target.id] = made if bound.get(target.id, made) == made else None
            elif isinstance(statement, ast.Return) and statement.value is not None:
                value = statement.value
                if isinstance(value, ast.Constant) and value.value is None:
                    continue
                # each arm of `return self._train if training else self._eval`
                for returned in (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,):
                    makes.add(self._returned_make(info, returned, bound, aliases))
        result = makes.pop() if len(makes) == 1 else None
        self._returns[info.qualname] = result
        return result

    def _returned_make(
        self, info: FunctionInfo, value: ast.expr, bound: dict[str, str | None], aliases: dict[str, str]
    ) -> str | None:
        """What makes one value ``info`` returns: a local's make, an attribute's, a
        call's maker, or a method of an attribute of known make (``return
        self._registry.coordinator(training)``: that method, which the project follows)."""
        if isinstance(value, ast.Name):
            return bound.get(value.id)
        attr = self_attribute(value)
        if attr is not None:
            return self.attribute(info.owner, attr)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            receiver = self_attribute(value.func.value)
            made = self.attribute(info.owner, receiver) if receiver is not None else None
            if made is not None:
                return f"{made}.{value.func.attr}"
        return self.maker(value, aliases)


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def self_attribute(node: ast.AST) -> str | None:
    """``x`` for ``self.x``, ``x[]`` for ``self.x[key]``, else None."""
    if isinstance(node, ast.Subscript):
        inner = self_attribute(node.value)
        return f"{inner}[]" if inner is not None and not inner.endswith("]") else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None
