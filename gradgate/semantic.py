"""A fast semantic model of one module, built on the stdlib :mod:`ast`.

LibCST keeps every byte, which the fixer needs, but building its scope and qualified
name metadata for a 2,700-line TransformerEngine module takes over a second. This model
answers the questions the rules ask about *context* in a few milliseconds:

* which local names are import aliases of which qualified names (``th`` -> ``torch``);
* which names and attributes carry the grad mode, and with which polarity: parameters
  and variables named like ``is_grad_enabled``, locals assigned only from grad-mode
  expressions, ``self.x = torch.is_grad_enabled()``;
* which statements read the grad mode at all: the *candidates*. Only those are handed
  to LibCST (see :mod:`gradgate.engine`).

Expressions of both trees are classified by one function, :func:`classify`, over a
small tree-independent :class:`Shape`, so the ast model and the LibCST view of
:mod:`gradgate.gradmode` cannot disagree.
"""

from __future__ import annotations

import ast
import bisect
import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .config import Config


class Polarity(enum.IntEnum):
    NO_GRAD = -1
    NONE = 0
    GRAD = 1

    def negated(self) -> "Polarity":
        return Polarity(-int(self))


@dataclass(frozen=True)
class Shape:
    """What the classification needs to know of an expression, whatever the tree.

    ``kind`` is ``call`` (a call without arguments; ``dotted`` is the callee),
    ``name``, ``attribute`` (``dotted`` the whole chain if it is one, ``attr`` the last
    name), ``not`` (``inner`` the operand) or ``other``.
    """

    kind: str
    dotted: str | None = None
    attr: str | None = None
    inner: "Shape | None" = None


OTHER = Shape("other")


@dataclass
class Scope:
    """Names visible in one function (or the module), with what they carry."""

    parent: "Scope | None"
    aliases: dict[str, str] = field(default_factory=dict)
    carriers: dict[str, Polarity] = field(default_factory=dict)
    #: names bound here by something that is not a grad-mode value (shadowing)
    plain: set[str] = field(default_factory=set)
    node: ast.AST | None = None
    flow: "Flow | None" = None

    def alias(self, name: str) -> str | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.aliases:
                return scope.aliases[name]
            if name in scope.plain or name in scope.carriers:
                return None
            scope = scope.parent
        return None

    def carrier(self, name: str) -> Polarity:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.carriers:
                return scope.carriers[name]
            if name in scope.plain or name in scope.aliases:
                return Polarity.NONE
            scope = scope.parent
        return Polarity.NONE

    def qualify(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        target = self.alias(head)
        if target is None:
            return dotted
        return f"{target}.{rest}" if rest else target

    @property
    def functions(self) -> list[ast.AST]:
        """Enclosing function and class nodes, innermost first."""
        out = []
        scope: Scope | None = self
        while scope is not None:
            if scope.node is not None:
                out.append(scope.node)
            scope = scope.parent
        return out


class ModuleModel:
    """Scopes, grad-mode carriers and candidate statements of one module."""

    def __init__(self, tree: ast.Module, config: Config, text: str | None = None) -> None:
        """``text``, the module's source, lets the model skip every function whose lines
        cannot read the grad mode; without it every function is analysed."""
        self.config = config
        self._grad_functions = frozenset(config.grad_functions)
        self._inference_functions = frozenset(config.inference_functions)
        self._grad_names = frozenset(config.grad_names)
        index = _LineIndex(text) if text is not None else None
        words = {t.decode() for t in config.prefilter_tokens()}
        self._interesting = index.lines_with(words, whole_words=False) if index else None
        # A grad-mode read spells a source token, or the name of something found to
        # carry the grad mode (an alias, a local, an attribute). Functions are skipped
        # until their lines hold one of those; a newly found carrier name can bring a
        # skipped function in, so iterate to a fixed point.
        self._functions = _module_functions(tree)
        self._seeds: dict[ast.AST, dict[str, Polarity]] = {}
        for _ in range(8):
            self._analyse(tree)
            seeds = self._parameter_seeds()
            seeds_changed, self._seeds = seeds != self._seeds, seeds
            more: set[int] = set()
            if index is not None and self._interesting is not None:
                for function in seeds:  # a helper receiving the grad mode is analysed
                    more.update(range(function.lineno, (function.end_lineno or function.lineno) + 1))
                new_words = self._carrier_words() - words
                words |= new_words
                more.update(index.lines_with(new_words, whole_words=True))
                more -= set(self._interesting)
                if more:
                    self._interesting = sorted({*self._interesting, *more})
            if not seeds_changed and not more:
                break
        self._tree = tree

    def _analyse(self, tree: ast.Module) -> None:
        self.attribute_carriers: dict[str, Polarity] = {}
        self.module_scope = Scope(None)
        # (start line, -end line, scope) of every function and class, to find the
        # innermost one holding a line
        self._spans: list[tuple[int, int, Scope]] = []
        self._scope_of: dict[ast.AST, Scope] = {}
        self._attribute_values: list[tuple[str, ast.AST, Scope]] = []
        self._scopes: list[Scope] = [self.module_scope]
        self._calls: list[tuple[ast.Call, Scope]] = []
        self._build(tree, self.module_scope)
        self._resolve_attribute_carriers()
        self._spans.sort(key=lambda s: (s[0], s[1]))
        self._starts = [s[0] for s in self._spans]

    def _may_read_grad(self, node: ast.AST) -> bool:
        """Could lines ``node.lineno..node.end_lineno`` read the grad mode?"""
        if self._interesting is None:
            return True
        index = bisect.bisect_left(self._interesting, node.lineno)
        end = getattr(node, "end_lineno", None) or node.lineno
        return index < len(self._interesting) and self._interesting[index] <= end

    def _carrier_words(self) -> set[str]:
        functions = self._grad_functions | self._inference_functions
        words = set(self.attribute_carriers)
        for scope in self._scopes:
            words.update(scope.carriers)
            words.update(name for name, target in scope.aliases.items() if target in functions)
        return words

    # -- classification (shared with the LibCST view) --------------------------------
    def classify(self, shape: Shape, scope: Scope) -> Polarity:
        if shape.kind == "not" and shape.inner is not None:
            return self.classify(shape.inner, scope).negated()
        if shape.kind == "call" and shape.dotted:
            qualified = scope.qualify(shape.dotted)
            if qualified in self._grad_functions:
                return Polarity.GRAD
            if qualified in self._inference_functions:
                return Polarity.NO_GRAD
            return Polarity.NONE
        if shape.kind == "name" and shape.dotted:
            if shape.dotted in self._grad_names:
                return Polarity.GRAD
            return scope.carrier(shape.dotted)
        if shape.kind == "attribute" and shape.attr:
            if shape.dotted and scope.qualify(shape.dotted) in (
                self._grad_functions | self._inference_functions
            ):
                return Polarity.NONE  # the function object itself, not the mode
            if shape.attr in self._grad_names:
                return Polarity.GRAD
            return self.attribute_carriers.get(shape.attr, Polarity.NONE)
        return Polarity.NONE

    def polarity(self, node: ast.AST, scope: Scope) -> Polarity:
        return self.classify(ast_shape(node), scope)

    def scope_at(self, line: int) -> Scope:
        """The innermost function or class scope whose span holds ``line``.

        Spans nest or are disjoint, so among the spans starting at or before ``line``
        the last one that still holds it is the innermost.
        """
        index = bisect.bisect_right(self._starts, line)
        for start, neg_end, scope in reversed(self._spans[:index]):
            if start <= line <= -neg_end:
                return scope
        return self.module_scope

    # -- building -----------------------------------------------------------------
    def _build(self, tree: ast.AST, scope: Scope) -> None:
        assigned: dict[str, list[ast.AST | None]] = {}
        self._collect(tree, scope, assigned)
        # a name carries the grad mode when every binding in its scope is a grad-mode
        # value of the same polarity; iterate because carriers feed carriers
        for _ in range(4):
            changed = False
            for name, values in assigned.items():
                polarities = {
                    Polarity.NONE if v is None else self.polarity(v, scope) for v in values
                }
                polarity = polarities.pop() if len(polarities) == 1 else Polarity.NONE
                if polarity is Polarity.NONE:
                    if name not in scope.plain:
                        scope.plain.add(name)
                        scope.carriers.pop(name, None)
                        changed = True
                elif scope.carriers.get(name) is not polarity:
                    scope.carriers[name] = polarity
                    scope.plain.discard(name)
                    changed = True
            if not changed:
                break

    def _collect(self, node: ast.AST, scope: Scope, assigned: dict) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                if not isinstance(child, ast.Lambda):
                    scope.plain.add(child.name)
                if not self._may_read_grad(child):
                    continue
                inner = Scope(scope, node=child)
                self._scopes.append(inner)
                self._scope_of[child] = inner
                if not isinstance(child, ast.ClassDef):
                    seeds = self._seeds.get(child, {})
                    for arg in _arguments(child.args):
                        if arg.arg in self._grad_names:
                            inner.carriers[arg.arg] = Polarity.GRAD
                        elif arg.arg in seeds:
                            inner.carriers[arg.arg] = seeds[arg.arg]
                        else:
                            inner.plain.add(arg.arg)
                if not isinstance(child, ast.Lambda):
                    self._spans.append((child.lineno, -(child.end_lineno or child.lineno), inner))
                self._build(child, inner)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.asname:
                        scope.aliases[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".")[0]
                        scope.aliases[head] = head
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                for alias in child.names:
                    scope.aliases[alias.asname or alias.name] = f"{child.module}.{alias.name}"
            elif isinstance(child, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                value = child.value if not isinstance(child, ast.AugAssign) else None
                for target in targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, []).append(value)
                    elif isinstance(target, ast.Attribute) and value is not None:
                        self._attribute_values.append((target.attr, value, scope))
                    else:
                        for name in _bound_names(target):
                            assigned.setdefault(name, []).append(None)
            elif isinstance(child, ast.Call):
                self._calls.append((child, scope))
            elif isinstance(child, (ast.For, ast.AsyncFor, ast.comprehension)):
                for name in _bound_names(child.target):
                    assigned.setdefault(name, []).append(None)
            elif isinstance(child, (ast.With, ast.AsyncWith)):
                for item in child.items:
                    if item.optional_vars is not None:
                        for name in _bound_names(item.optional_vars):
                            assigned.setdefault(name, []).append(None)
            self._collect(child, scope, assigned)

    def _resolve_attribute_carriers(self) -> None:
        """``self.flag = torch.is_grad_enabled()``: an attribute name carries the grad
        mode module-wide (another method may read it) when every assignment to it in
        the module is a grad-mode value of the same polarity."""
        seen: dict[str, set[Polarity]] = {}
        for attr, value, scope in self._attribute_values:
            seen.setdefault(attr, set()).add(self.polarity(value, scope))
        for attr, polarities in seen.items():
            if len(polarities) == 1 and Polarity.NONE not in polarities:
                self.attribute_carriers[attr] = polarities.pop()

    # -- values passed to helpers ---------------------------------------------------
    def _callee(self, call: ast.Call, scope: Scope) -> tuple[ast.AST, int] | None:
        """The function of this module a call runs, and how many leading parameters the
        call does not pass (1 for ``self.method(...)``)."""
        func = call.func
        if isinstance(func, ast.Name) and scope.alias(func.id) is None:
            function = self._functions.get(func.id)
            return (function, 0) if function is not None else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
            for enclosing in scope.functions:
                if isinstance(enclosing, ast.ClassDef):
                    function = self._functions.get(f"{enclosing.name}.{func.attr}")
                    return (function, 1) if function is not None else None
        return None

    def _parameter_seeds(self) -> dict[ast.AST, dict[str, Polarity]]:
        """Parameters that receive the grad mode at every call site in the module (a
        helper ``def _fwd(x, training)`` always called as ``_fwd(x, is_grad_enabled)``)."""
        passed: dict[ast.AST, dict[str, set[Polarity]]] = {}
        for call, scope in self._calls:
            resolved = self._callee(call, scope)
            if resolved is None:
                continue
            function, skip = resolved
            params = [a.arg for a in [*function.args.posonlyargs, *function.args.args]][skip:]
            received = passed.setdefault(function, {})
            given: dict[str, Polarity] = {}
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                given = {p: Polarity.NONE for p in params}
            else:
                for name, value in zip(params, call.args):
                    given[name] = self.polarity(value, scope)
                for keyword in call.keywords:
                    given[keyword.arg] = self.polarity(keyword.value, scope)
            for name in {*params, *(a.arg for a in function.args.kwonlyargs)}:
                received.setdefault(name, set()).add(given.get(name, Polarity.NONE))
        seeds: dict[ast.AST, dict[str, Polarity]] = {}
        for function, params in passed.items():
            for name, polarities in params.items():
                if name in self._grad_names:
                    continue  # a carrier by its name already
                if len(polarities) == 1 and Polarity.NONE not in polarities:
                    seeds.setdefault(function, {})[name] = next(iter(polarities))
        return seeds

    # -- what a flag controls -------------------------------------------------------
    def is_comm_call(self, call: ast.Call, scope: Scope) -> bool:
        """Does this call perform (forward) communication?"""
        last = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
        return self.is_comm_callee(ast_dotted(call.func), last, scope)

    def is_comm_callee(self, dotted: str | None, last: str | None, scope: Scope) -> bool:
        """Is a call of ``dotted`` (``a.b.c``, None if not a plain chain) whose last name
        is ``last`` forward communication: a configured API, or a name like one?"""
        if dotted is not None:
            qualified = scope.qualify(dotted)
            if any(qualified == api or qualified.startswith(api + ".") for api in self.config.all_comm_apis):
                return True
        return last is not None and self.config.is_forward_comm_call(last)

    def gate_shaped(self, expression: ast.AST | None, scope: Scope) -> bool:
        """Cheap test: could ``expression`` hold a grad-mode gate (an ``and`` chain, a
        ternary or an ``all(...)`` with a grad-mode read in it)? Never False where
        :func:`gradgate.gates.grad_gates` finds one."""
        if isinstance(expression, ast.BoolOp) and isinstance(expression.op, ast.And):
            return self._expression_reads_grad(expression, scope)
        if isinstance(expression, ast.IfExp):
            return self._expression_reads_grad(expression.test, scope)
        if isinstance(expression, ast.Call) and getattr(expression.func, "id", None) == "all":
            return self._expression_reads_grad(expression, scope)
        return False

    def flow(self, scope: Scope) -> "Flow":
        if scope.flow is None:
            scope.flow = Flow.of(self, scope)
        return scope.flow

    def flag_kind(self, scope: Scope, name: str) -> str | None:
        """``"comm"`` when the local ``name`` selects forward communication (by its name,
        or because it feeds a communication call or guards one), ``"backward"`` when it
        belongs to the backward pass (by its name, or because every use of it is on
        ``ctx`` or in ``save_for_backward``), else None."""
        if self.config.backward_flag_re.search(name):
            return "backward"
        flow = self.flow(scope)
        if name in flow.comm:
            return "comm"
        if flow.uses.get(name) and flow.uses[name] == flow.backward_uses.get(name):
            return "backward"
        if self.config.comm_flag_re.search(name):
            return "comm"
        return None

    def enclosing_class_bases(self, scope: Scope) -> tuple[str, list[str]] | None:
        """(method name, qualified bases of its class) for a method's scope."""
        nodes = scope.functions
        if len(nodes) >= 2 and isinstance(nodes[1], ast.ClassDef) and not isinstance(nodes[0], ast.ClassDef):
            klass = nodes[1]
            class_scope = self._scope_of.get(klass, self.module_scope)
            parent = class_scope.parent or self.module_scope
            bases = [parent.qualify(d) for d in (ast_dotted(b) for b in klass.bases) if d]
            return getattr(nodes[0], "name", ""), bases
        return None

    # -- candidates ---------------------------------------------------------------
    def candidates(self, accept) -> tuple[list[ast.stmt], dict[ast.stmt, ast.stmt]]:
        """The outermost statements that read the grad mode in their own expressions and
        that ``accept(statement, scope)`` (some rule's cheap test) takes. A statement it
        rejects is not analysed further, but the statements nested in its blocks are:
        each rule's test judges a statement by its own expressions (and, for an ``if``,
        the shape of its blocks), never by what is nested in it.

        Also returns, for every statement met on the way, the statement whose block
        holds it (to widen one that cannot be parsed alone)."""
        found: list[ast.stmt] = []
        parent: dict[ast.stmt, ast.stmt] = {}
        self._find_candidates(self._tree.body, self.module_scope, accept, found, parent, None)
        return found, parent

    def _find_candidates(self, body: list, scope: Scope, accept, found: list, parents: dict, parent) -> None:
        for statement in body:
            if not self._may_read_grad(statement):
                continue
            if parent is not None:
                parents[statement] = parent
            inner = self._scope_of.get(statement, scope)
            if inner is scope and self._reads_grad(statement, scope) and accept(statement, scope):
                found.append(statement)
                continue  # its nested statements travel with it
            for field_name in _BODY_FIELDS:
                for child in getattr(statement, field_name, None) or ():
                    # ExceptHandler and match_case are not statements but hold a body
                    group = [child] if isinstance(child, ast.stmt) else child.body
                    self._find_candidates(group, inner, accept, found, parents, statement)

    def _reads_grad(self, statement: ast.stmt, scope: Scope) -> bool:
        """Does an expression owned by ``statement`` (not a nested statement) read the
        grad mode, with either polarity?"""
        return any(
            name not in _BODY_FIELDS and name != "decorator_list" and self._expression_reads_grad(expression, scope)
            for name, expression in _children(statement)
        )

    def _expression_reads_grad(self, expression: ast.AST, scope: Scope) -> bool:
        for node in ast.walk(expression):
            if isinstance(node, (ast.Call, ast.Name, ast.Attribute)):
                if self.polarity(node, scope) is not Polarity.NONE:
                    return True
        return False


@dataclass
class Flow:
    """What the names of one function feed: forward communication, or only backward."""

    comm: set[str] = field(default_factory=set)
    uses: dict[str, int] = field(default_factory=dict)
    backward_uses: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, model: "ModuleModel", scope: Scope) -> "Flow":
        """One walk over the function, not entering nested functions or classes."""
        flow = cls()
        if scope.node is None:
            return flow
        is_comm_call, is_flag = model.is_comm_call, model.config.is_forward_comm_flag
        uses, backward_uses = flow.uses, flow.backward_uses
        # Each entry: a node; the names its statement assigns (None where no read counts
        # as a use); the ids of that statement's backward-only values; whether it is in
        # a lambda; and the branches (if / ternary) whose body holds it directly, i.e.
        # not in a nested block.
        Entry = tuple[ast.AST, "set[str] | None", "set[int]", bool, "tuple[ast.AST, ...]"]
        stack: list[Entry] = [(scope.node, None, set(), False, ())]
        while stack:
            node, own, backward, in_lambda, branches = stack.pop()
            if isinstance(node, ast.Name):
                if own is not None and isinstance(node.ctx, ast.Load) and node.id not in own:
                    uses[node.id] = uses.get(node.id, 0) + 1
                    if id(node) in backward:
                        backward_uses[node.id] = backward_uses.get(node.id, 0) + 1
                continue
            if isinstance(node, ast.Call) and (branches or not in_lambda):
                comm = is_comm_call(node, scope)
                if comm:
                    # a flag that is (a conjunct of) the condition of a branch whose own
                    # statements, not nested blocks, call a communication API
                    for branch in branches:
                        flow.comm.update(_flag_names(_conjuncts(branch.test)))
                if not in_lambda:
                    # a flag handed to a communication call as an option (a keyword: the
                    # positional arguments are its tensors), or to a keyword named like one
                    options = [k.value for k in node.keywords if comm or (k.arg and is_flag(k.arg))]
                    flow.comm.update(_flag_names(options))
            if isinstance(node, ast.stmt):
                own, backward = _statement_roles(node)
                for name, child in _children(node):
                    if isinstance(child, _NEW_SCOPES):
                        continue
                    if name in _BODY_FIELDS:  # a statement, or an except handler / case
                        inner = (node,) if name == "body" and isinstance(node, ast.If) else ()
                        stack.append((child, None, backward, False, inner))
                    else:
                        stack.append((child, own, backward, isinstance(child, ast.Lambda), branches))
                continue
            for name, child in _children(node):
                inner = branches
                if name == "body" and isinstance(node, ast.IfExp) and not in_lambda:
                    inner = (*branches, node)
                stack.append((child, own, backward, in_lambda or isinstance(child, ast.Lambda), inner))
        return flow


_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _statement_roles(statement: ast.stmt) -> tuple[set[str], set[int]]:
    """The names ``statement`` assigns (their reads in it are not uses), and the ids of
    the nodes of its values that only the backward pass sees (``ctx.x = v``,
    ``ctx.save_for_backward(v)``)."""
    own: set[str] = set()
    backward_values: list[ast.AST] = []
    if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        own = {t.id for t in targets if isinstance(t, ast.Name)}
        if statement.value is not None and any(
            isinstance(t, ast.Attribute) and ast_dotted(t.value) == "ctx" for t in targets
        ):
            backward_values.append(statement.value)
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        func = statement.value.func
        if isinstance(func, ast.Attribute) and func.attr == "save_for_backward":
            backward_values.extend(statement.value.args)
    return own, {id(n) for v in backward_values for n in ast.walk(v)}


def _children(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """``(field name, child)`` for every AST child of ``node``: what
    :func:`ast.iter_child_nodes` gives, with the field each child sits in."""
    for name, value in ast.iter_fields(node):
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST):
                yield name, child


def own_nodes(node: ast.AST):
    """The expressions of one statement (or an expression), not its nested blocks."""
    if isinstance(node, ast.stmt):
        for name, part in _children(node):
            if name not in _BODY_FIELDS:
                yield from ast.walk(part)
    else:
        yield from ast.walk(node)


def direct_nodes(block: list[ast.stmt]):
    """A block's own statements and their expression nodes, not nested blocks."""
    for statement in block:
        yield statement
        yield from own_nodes(statement)


def _conjuncts(test: ast.AST) -> list[ast.AST]:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [c for v in test.values for c in _conjuncts(v)]
    return [test]


def _flag_names(expressions) -> set[str]:
    """Names used directly as the values (``flag``, ``not flag``)."""
    out = set()
    for expression in expressions:
        while isinstance(expression, ast.UnaryOp) and isinstance(expression.op, ast.Not):
            expression = expression.operand
        if isinstance(expression, ast.Name):
            out.add(expression.id)
    return out


def _module_functions(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level functions by name, and methods as ``Class.method``."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{item.name}"] = item
    return out


class _LineIndex:
    """Line numbers of the places where words occur in a text."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def lines_with(self, words: set[str], whole_words: bool) -> list[int]:
        if not words:
            return []
        alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
        pattern = rf"\b(?:{alternatives})\b" if whole_words else alternatives
        found = {bisect.bisect_right(self._starts, m.start()) for m in re.finditer(pattern, self._text)}
        return sorted(found)


_BODY_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _arguments(args: ast.arguments) -> list[ast.arg]:
    out = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if args.vararg:
        out.append(args.vararg)
    if args.kwarg:
        out.append(args.kwarg)
    return out


def _bound_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def ast_dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = ast_dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def ast_shape(node: ast.AST) -> Shape:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return Shape("not", inner=ast_shape(node.operand))
    if isinstance(node, ast.Call):
        if node.args or node.keywords:
            return OTHER
        return Shape("call", dotted=ast_dotted(node.func))
    if isinstance(node, ast.Name):
        return Shape("name", dotted=node.id)
    if isinstance(node, ast.Attribute):
        return Shape("attribute", dotted=ast_dotted(node), attr=node.attr)
    return OTHER
