"""What a module defines, found in one walk: functions and classes by qualified name,
import aliases, which functions run in the backward pass, and which communicate.

Scope comes from the node: a function's decorators, defaults and annotations belong to
the scope that holds the ``def`` (see :mod:`gradgate.model.interpret`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator

from ..config import NON_COMM_API_NAMES, Config
from ..records import field, record
from .lines import holds_line_within

#: a module of a communication API that holds its utilities, not its collectives
#: (``torch.distributed.pipelining._utils.flatten_args``): its functions count by name
_UTILITY_MODULE = re.compile(r"\.(_?utils?|_?helpers?|_?tree_utils|checkpoint|elastic|launcher|argparse_util)\.")
#: bases that make a class a ``torch.autograd.Function``
AUTOGRAD_FUNCTION_BASES = frozenset(
    {"torch.autograd.Function", "torch.autograd.function.Function", "torch.autograd.function.InplaceFunction"}
)
#: methods whose callable argument runs in the backward pass
BACKWARD_HOOK_REGISTRARS = frozenset(
    {
        "register_hook",
        "register_backward_hook",
        "register_full_backward_hook",
        "register_full_backward_pre_hook",
        "register_multi_grad_hook",
        "register_post_accumulate_grad_hook",
    }
)
#: what registers a saved tensor's pack and unpack hooks (``torch.autograd.graph.
#: saved_tensors_hooks(pack, unpack)``, or a class deriving it): they run as autograd
#: saves a tensor for the backward, and what they decide is autograd's
SAVED_TENSOR_HOOKS = "saved_tensors_hooks"

#: decorators that keep a function's call signature
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "functools.wraps", "torch.no_grad"})

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@record(frozen=False)
class FunctionInfo:
    node: FunctionNode
    qualname: str
    #: the class whose body holds the ``def``, if any
    owner: str | None
    params: list[ast.arg]
    static: bool
    is_property: bool
    #: ``Function.forward`` of an autograd function (grad mode is always off inside)
    autograd_forward: bool = False
    backward: bool = False

    @property
    def positional(self) -> list[str]:
        args = self.node.args
        return [a.arg for a in (*args.posonlyargs, *args.args)]

    @property
    def stub(self) -> bool:
        """Is the body only a placeholder (a docstring, ``...``, ``pass``, ``raise
        NotImplementedError``): what the function does is not written here, so its name
        says it, as for a function of no module we see?"""
        for statement in self.node.body:
            if isinstance(statement, ast.Pass):
                continue
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                continue  # a docstring, `...`
            if isinstance(statement, ast.Raise) and "NotImplementedError" in ast.unparse(statement):
                continue
            return False
        return True


@record(frozen=False)
class ClassInfo:
    node: ast.ClassDef
    name: str
    bases: list[str]
    methods: dict[str, str] = field(default_factory=dict)  # name -> qualname
    #: declared fields in order (dataclass / NamedTuple), for constructor calls
    fields: list[str] = field(default_factory=list)
    autograd_function: bool = False


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def qualify(name: str, aliases: dict[str, str]) -> str:
    head, _, rest = name.partition(".")
    target = aliases.get(head)
    if target is None:
        return name
    return f"{target}.{rest}" if rest else target


def import_aliases(statements: Iterator[ast.stmt] | list[ast.stmt], package: str | None = None) -> dict[str, str]:
    """What each imported name stands for, fully qualified. Relative imports are
    resolved against ``package`` (the package holding the module), when it is known."""
    aliases: dict[str, str] = {}
    for statement in statements:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    aliases[head] = head
        elif isinstance(statement, ast.ImportFrom):
            source = _absolute(statement, package)
            if source is None:
                continue
            for alias in statement.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
    return aliases


def _absolute(statement: ast.ImportFrom, package: str | None) -> str | None:
    """The module a ``from ... import`` reads from, fully qualified, or None."""
    if not statement.level:
        return statement.module
    if package is None:
        return None
    parts = package.split(".") if package else []
    if statement.level - 1 > len(parts) or (statement.level - 1 == len(parts) and not statement.module):
        return None
    base = parts[: len(parts) - (statement.level - 1)]
    if statement.module:
        base.append(statement.module)
    return ".".join(base) or None


def own_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body and of its nested blocks, not of nested functions/classes."""
    stack = list(reversed(body))
    while stack:
        statement = stack.pop()
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in reversed(getattr(statement, name, None) or ()):
                if isinstance(child, ast.stmt):
                    stack.append(child)
                else:  # ExceptHandler, match_case
                    stack.extend(reversed(child.body))


def own_calls_and_names(node: ast.AST) -> tuple[list[ast.Call], list[ast.Name | ast.Attribute]]:
    """The calls inside ``node``, and the names and attributes it reads, not inside
    nested functions, classes or lambdas (one walk for both)."""
    calls: list[ast.Call] = []
    names: list[ast.Name | ast.Attribute] = []
    stack = [node]
    node_type, nested, call, load = ast.AST, _NESTED, ast.Call, ast.Load
    name, attribute = ast.Name, ast.Attribute
    while stack:
        current = stack.pop()
        # ast.iter_child_nodes, without its two generators a node (the children in the
        # same order): this walk is most of what ordering the functions costs
        for slot in current._fields:
            value = getattr(current, slot, None)
            for child in value if isinstance(value, list) else (value,):
                if not isinstance(child, node_type) or isinstance(child, nested):
                    continue
                if isinstance(child, call):
                    calls.append(child)
                elif isinstance(child, name):
                    if isinstance(child.ctx, load):
                        names.append(child)
                    continue  # a leaf: nothing below it but its context
                elif isinstance(child, attribute) and isinstance(child.ctx, load):
                    names.append(child)
                if not isinstance(child, _LEAVES):
                    stack.append(child)
    return calls, names


def _components(nodes: list[str | None], callers: dict[str | None, list[str | None]]) -> dict[str | None, int]:
    """Each node's strongly connected component (an index) in the graph of ``callers``
    (callee -> its callers); Tarjan's algorithm, without recursion."""
    index: dict[str | None, int] = {}
    low: dict[str | None, int] = {}
    component: dict[str | None, int] = {}
    stack: list[str | None] = []
    on_stack: set[str | None] = set()
    count = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str | None, int]] = [(root, 0)]
        while work:
            node, at = work.pop()
            if at == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            edges = callers[node]
            while at < len(edges) and edges[at] in index:
                if edges[at] in on_stack:
                    low[node] = min(low[node], index[edges[at]])
                at += 1
            if at < len(edges):  # a caller not visited yet: it first, then this node again
                work.append((node, at + 1))
                work.append((edges[at], 0))
                continue
            if low[node] == index[node]:  # the root of a component: it and what is above it
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = count
                    if member == node:
                        break
                count += 1
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return component


#: what a line that holds a nested ``def`` spells: ``def`` and what the tokenizer takes
#: after it (a space, a tab, a form feed, a backslash that continues the line), not
#: ``default``
_DEF_WORDS = {"def ", "def\t", "def\f", "def\\"}
#: what a line that holds an ``import`` statement spells
_IMPORT_WORDS = {"import"}
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
#: nodes with no expression below them (not walked into: a tenth of the walk)
_LEAVES = (ast.Constant, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


class ModuleIndex:
    def __init__(
        self,
        tree: ast.Module,
        config: Config,
        lines: Callable[[set[str]], list[int]] | None = None,
        package: str | None = None,
    ) -> None:
        """``lines(words)``, the lines where one of the words occurs, lets the index skip the
        functions that cannot hold what a question looks for; without it, none is skipped.
        ``package``: the package holding the module, for its relative imports."""
        self.tree = tree
        self._slots: tuple[frozenset[str], frozenset[str]] | None = None
        self._comm_parameters: dict[str, dict[str, tuple[str, ast.expr | None]]] = {}
        self._globals: dict[str, frozenset[str]] = {}
        self._set_globals: frozenset[str] | None = None
        self.config = config
        self.package = package
        # imports in the module's blocks too (`try: from torch._C import is_grad_enabled as g`)
        self.aliases = import_aliases(own_statements(tree.body), package)
        #: names a relative import the module's package cannot resolve binds, and what it
        #: imports (`from .. import functional as F`: `F` -> `functional`)
        self.unresolved_relative = {
            alias.asname or alias.name: alias.name
            for statement in tree.body
            if isinstance(statement, ast.ImportFrom) and statement.level and _absolute(statement, package) is None
            for alias in statement.names
        }
        self._aliases: dict[str, dict[str, str]] = {}
        self.functions: dict[str, FunctionInfo] = {}
        #: last name -> does a function so named communicate (:meth:`comm_ops_named`)
        self._communicating_names: dict[str, bool] | None = None
        self.by_node: dict[ast.AST, FunctionInfo] = {}
        self.classes: dict[str, ClassInfo] = {}
        #: names the module binds at its top level (assignments, imports, defs)
        self.module_names = _bound_at_top(tree)
        self._lines = lines
        self._collect(tree.body, prefix="", owner=None)
        self._calls: dict[str, tuple[list[ast.Call], list[ast.Name | ast.Attribute]]] = {}
        self._function_attributes: dict[str, dict[str, set[tuple[str, int] | None]]] = {}
        self._lambdas: dict[str, dict[str, ast.Lambda]] = {}
        self._comm_constants: dict[str, frozenset[tuple[str, object]]] = {}
        self._read: dict[str, frozenset[str]] = {}
        self._referenced: dict[str, set[str]] = {}
        self._mark_backward()
        self._communicates: dict[tuple[str, bool], frozenset[str]] = {}
        self._called: dict[str, bool] = {}
        #: functions whose communication autograd records (see :meth:`autograd_records`)
        self._autograd_recorded: set[str] = set()
        self._fed: dict[tuple[str, str], int] | None = None

    # -- collecting -------------------------------------------------------------------
    def _collect(self, body: list[ast.stmt], prefix: str, owner: str | None) -> None:
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = f"{prefix}{statement.name}"
                names = {dotted(d.func if isinstance(d, ast.Call) else d) for d in statement.decorator_list}
                info = FunctionInfo(
                    node=statement,
                    qualname=qualname,
                    owner=owner,
                    params=_parameters(statement.args),
                    static="staticmethod" in names,
                    is_property="property" in names or any(n and n.endswith("cached_property") for n in names),
                )
                self.functions.setdefault(qualname, info)
                self.by_node[statement] = info
                if owner is not None:
                    self.classes[owner].methods.setdefault(statement.name, qualname)
                if self._may_nest(statement):
                    self._collect_nested(statement.body, f"{qualname}.<locals>.", owner)
            elif isinstance(statement, ast.ClassDef):
                name = f"{prefix}{statement.name}"
                bases = [qualify(d, self.aliases) for d in (dotted(b) for b in statement.bases) if d]
                info_class = ClassInfo(statement, name, bases)
                info_class.fields = [
                    s.target.id
                    for s in statement.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                ]
                self.classes.setdefault(name, info_class)
                self._collect(statement.body, f"{name}.", name)
            elif isinstance(statement, (ast.If, ast.Try, ast.With)):  # `if TYPE_CHECKING:` and the like
                for block in (
                    getattr(statement, "body", []),
                    getattr(statement, "orelse", []),
                    getattr(statement, "finalbody", []),
                ):
                    self._collect(block, prefix, owner)
        for info_class in self.classes.values():
            info_class.autograd_function = self._is_autograd_function(info_class)

    def _may_nest(self, function: FunctionNode) -> bool:
        """Could ``function`` hold a nested ``def``: does a line below its ``def`` line
        spell one? Most functions hold none, and looking for them walked every statement
        of every function of every module a run parses."""
        return self.spells(function, _DEF_WORDS, below_header=True)

    def spells(self, function: FunctionNode, words: set[str], below_header: bool = False) -> bool:
        """Does a line of ``function`` (below its ``def`` line) spell one of ``words``
        (True where the index has no lines to search)?"""
        if self._lines is None:
            return True
        first = function.lineno + 1 if below_header else function.lineno
        return holds_line_within(self._lines(words), first, function.end_lineno or function.lineno)

    def _collect_nested(self, body: list[ast.stmt], prefix: str, owner: str | None = None) -> None:
        """Functions nested in a function; in a method they see its ``self`` (``owner``)."""
        for statement in own_statements(body):
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = f"{prefix}{statement.name}"
                info = FunctionInfo(statement, qualname, owner, _parameters(statement.args), False, False)
                self.functions.setdefault(qualname, info)
                self.by_node[statement] = info
                self._collect_nested(statement.body, f"{qualname}.<locals>.", owner)

    def calls_of(self, qualname: str) -> list[ast.Call]:
        """The calls a function makes itself, not its nested functions ("" is the module)."""
        return self._own(qualname)[0]

    def _own(self, qualname: str) -> tuple[list[ast.Call], list[ast.Name | ast.Attribute]]:
        found = self._calls.get(qualname)
        if found is None:
            node = self.functions[qualname].node if qualname else self.tree
            found = self._calls[qualname] = own_calls_and_names(node)
        return found

    def names_read(self, qualname: str) -> frozenset[str]:
        """The names a function's own code may read from its local environment: those it
        loads or augments (``n += 1``), and those in the decorators, defaults and bases of
        the functions and classes it defines (evaluated where they are defined). A name
        outside it is written and never read: its value after a branch is no one's."""
        found = self._read.get(qualname)
        if found is None:
            info = self.functions[qualname]
            names = {n.id for n in self._own(qualname)[1] if isinstance(n, ast.Name)}
            for statement in own_statements(info.node.body):
                if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
                    names.add(statement.target.id)
                elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    if isinstance(statement, ast.ClassDef):
                        evaluated: list[ast.AST] = [*statement.bases, *statement.keywords]
                    else:
                        evaluated = [*statement.args.defaults, *filter(None, statement.args.kw_defaults)]
                    for part in (*statement.decorator_list, *evaluated):
                        names.update(n.id for n in ast.walk(part) if isinstance(n, ast.Name))
            found = self._read[qualname] = frozenset(names)
        return found

    def referenced(self, qualname: str) -> set[str]:
        """The module's functions a function ("": the module's body) calls or names
        (``fwd = _Function._forward``), as :meth:`resolve` finds them: those it may pass
        values to."""
        found = self._referenced.get(qualname)
        if found is None:
            found = self._referenced[qualname] = self._find_referenced(qualname)
        return found

    def _find_referenced(self, qualname: str) -> set[str]:
        info = self.functions.get(qualname) if qualname else None
        owner = info.owner if info is not None else None
        aliases = self.aliases_of(info) if info is not None else self.aliases
        found = set()
        for name in self._own(qualname if info is not None else "")[1]:
            resolved = self.resolve(name, owner, aliases)
            if resolved is not None and resolved[0] != qualname:
                found.add(resolved[0])
        return found

    def callers_first(self, keys: list[str | None], hops: int = 2) -> list[list[str | None]]:
        """``keys`` (None: the module's body), and the functions they reach in ``hops``
        calls or names (:meth:`referenced`), in levels: each function after those that call
        or name it (a cycle is cut where it is entered: at its first function in this
        order, once no function outside the cycle still calls into it), each level in
        ``keys``' order, then the module's. Interpreted level by level, a function runs
        after its callers, so what they pass it is known when it first runs: through
        functions that are not interpreted yet too (TransformerEngine's
        ``LayerNormMLP.forward`` -> ``_LayerNormMLP.forward`` -> ``_forward``: the middle
        one is interpreted once the first has passed it grad mode)."""
        nodes: list[str | None] = list(dict.fromkeys(keys))
        referenced: dict[str | None, set[str]] = {}
        frontier = list(nodes)
        for _ in range(hops):
            reached: list[str | None] = []
            for key in frontier:
                if key not in referenced:
                    referenced[key] = self.referenced(key or "")
                    reached += [c for c in sorted(referenced[key]) if c not in referenced and c not in reached]
            nodes += [c for c in reached if c not in nodes]
            frontier = reached
        members = set(nodes)
        callers: dict[str | None, list[str | None]] = {k: [] for k in nodes}
        for key in nodes:
            for callee in referenced.get(key, ()):
                if callee in members:
                    callers[callee].append(key)
        waiting = {k: set(callers[k]) - {k} for k in nodes}
        component = _components(nodes, callers)
        level: dict[str | None, int] = {}
        pending = list(nodes)
        while pending:
            ready = [k for k in pending if not waiting[k]]
            if not ready:
                # cycles only: cut one that nothing outside it still calls into, at its
                # first function. (Cut at the first pending function, a function that a
                # cycle calls ran before the cycle passed it anything: TransformerEngine's
                # `_linear_eager`, called from `Linear.forward`, which its eager fallback
                # calls back, ran twice)
                entered = {component[k] for k in pending} - {
                    component[k] for k in pending for c in waiting[k] if component[c] != component[k]
                }
                ready = [next(k for k in pending if component[k] in entered)]
            for key in ready:
                level[key] = 1 + max((level[c] for c in callers[key] if c in level), default=-1)
            done = set(ready)
            pending = [k for k in pending if k not in done]
            for key in pending:
                waiting[key] -= done
        levels: list[list[str | None]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
        for key in nodes:
            levels[level[key]].append(key)
        return levels

    def called_in_module(self, qualname: str) -> bool:
        """Does a call somewhere in the module run the function ``qualname`` (an autograd
        Function's ``forward``: a call of its ``apply``)? Then its parameters are what
        those calls pass, not what their names spell."""
        known = self._called.get(qualname)
        if known is not None:
            return known
        info = self.functions.get(qualname)
        found = False
        if info is not None:
            apply_of = info.owner if info.autograd_forward else None
            word = apply_of.rsplit(".", 1)[-1] if apply_of else info.node.name
            for caller in self._functions_mentioning(word):
                if caller == qualname:
                    continue
                owner = self.functions[caller].owner if caller else None
                aliases = self.aliases_of(self.functions[caller]) if caller else self.aliases
                for call in self.calls_of(caller):
                    func = call.func
                    if apply_of and isinstance(func, ast.Attribute) and func.attr == "apply":
                        found = dotted(func.value) == word or dotted(func.value) == apply_of
                    else:
                        resolved = self.resolve(func, owner, aliases)
                        found = resolved is not None and resolved[0] == qualname
                    if found:
                        break
                if found:
                    break
        self._called[qualname] = found
        return found

    def _functions_mentioning(self, *words: str) -> list[str]:
        """Qualnames (and "" for the module) whose lines may spell one of ``words``."""
        every = ["", *self.functions]
        if self._lines is None:
            return every
        lines = self._lines(set(words))
        if not lines:
            return []
        return [
            "",
            *(
                qualname
                for qualname, info in self.functions.items()
                if holds_line_within(lines, info.node.lineno, info.node.end_lineno or info.node.lineno)
            ),
        ]

    def _is_autograd_function(self, klass: ClassInfo, depth: int = 0) -> bool:
        for base in klass.bases:
            if base in AUTOGRAD_FUNCTION_BASES or base.endswith("autograd.Function"):
                return True
            local = self.classes.get(base)
            if local is not None and depth < 8 and self._is_autograd_function(local, depth + 1):
                return True
        return False

    def _mark_backward(self) -> None:
        for info in self.functions.values():
            klass = self.classes.get(info.owner) if info.owner else None
            if klass is not None and klass.autograd_function:
                if info.node.name == "backward" or info.node.name == "jvp" or info.node.name == "vjp":
                    info.backward = True
                elif info.node.name == "forward":
                    info.autograd_forward = True
        # a function registered as a backward hook, found from the scope of the
        # registration (a closure named `_hook` elsewhere is another function)
        hooked: set[str] = set()
        # a registration spells its registrar's name ("_hook" alone sent the index into
        # every function of a module that names its hooks, to walk its calls)
        for owner in self._functions_mentioning(*BACKWARD_HOOK_REGISTRARS):
            prefix = f"{owner}.<locals>." if owner else ""
            for call in self.calls_of(owner):
                if isinstance(call.func, ast.Attribute) and call.func.attr in BACKWARD_HOOK_REGISTRARS:
                    for argument in call.args:
                        if isinstance(argument, ast.Name):
                            local = f"{prefix}{argument.id}"
                            hooked.add(local if local in self.functions else argument.id)
        hooked |= self._saved_tensor_hooks()
        non_forward = self.config.non_forward_re
        for info in self.functions.values():
            if info.qualname in hooked or (non_forward.search(info.node.name) and not _stage_step(info)):
                info.backward = True
            elif info.owner and _CHECKPOINTING.search(info.owner) and _POLICY.search(info.node.name):
                # an activation checkpointing wrapper's policy decides what the forward saves
                # for the backward and what the backward recomputes: bookkeeping
                info.backward = True

    def _saved_tensor_hooks(self) -> set[str]:
        """The functions registered as a saved tensor's pack and unpack hooks: the
        arguments of ``saved_tensors_hooks(pack, unpack)``, and of ``super().__init__(pack,
        unpack)`` in a class deriving it."""
        hooks: set[str] = set()
        derived = {k for k, c in self.classes.items() if any(b.endswith(SAVED_TENSOR_HOOKS) for b in c.bases)}
        words = (SAVED_TENSOR_HOOKS, "__init__") if derived else (SAVED_TENSOR_HOOKS,)
        for owner in self._functions_mentioning(*words):
            info = self.functions.get(owner) if owner else None
            in_derived = info is not None and info.owner in derived
            prefix = f"{owner}.<locals>." if owner else ""
            for call in self.calls_of(owner):
                name = dotted(call.func) or ""
                registers = name.endswith(SAVED_TENSOR_HOOKS) or (
                    in_derived
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "__init__"
                    and isinstance(call.func.value, ast.Call)
                    and dotted(call.func.value.func) == "super"
                )
                if registers:
                    for argument in call.args:
                        if isinstance(argument, ast.Name):
                            local = f"{prefix}{argument.id}"
                            hooks.add(local if local in self.functions else argument.id)
        return hooks

    # -- resolving calls ------------------------------------------------------------------
    def resolve(self, func: ast.AST, owner: str | None, aliases: dict[str, str]) -> tuple[str, int] | None:
        """The module function a call of ``func`` runs, and how many leading parameters
        the call does not pass (``self``; ``ctx`` for ``Function.apply``), or None.
        Best effort, never by a bare method name."""
        if isinstance(func, ast.Name):
            if func.id in aliases and func.id not in self.functions and func.id not in self.classes:
                return None
            if func.id in self.functions and self.functions[func.id].owner is None:
                return func.id, 0
            klass = self.classes.get(func.id)
            if klass is not None:
                init = self.method(func.id, "__init__")
                return (init, 1) if init else (func.id, 0)
            return None
        if not isinstance(func, ast.Attribute):
            return None
        base = func.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls") and owner is not None:
            method = self.method(owner, func.attr)
            if method is None:
                return self.function_attribute(owner, func.attr)
            info = self.functions[method]
            return method, 0 if info.static else 1
        if isinstance(base, ast.Name) and base.id in self.classes:
            klass = self.classes[base.id]
            if func.attr == "apply" and klass.autograd_function:
                forward = self.method(base.id, "forward")
                return (forward, 1) if forward else None
            method = self.method(base.id, func.attr)
            return (method, 0) if method else None
        return None

    def function_attribute(self, klass: str, attr: str) -> tuple[str, int] | None:
        """The function ``self.attr`` holds in ``klass`` (or a base of it in the module)
        where every store of it in ``__init__`` puts the same one there: a module
        function (``self.attn_func = _fast_attn_ref``) or a method of the class bound to
        the object (``self.forward_fn = self.forward_once``), with the parameters a call
        skips; else None."""
        held = self.held_functions(klass, attr)
        return held[0] if len(held) == 1 else None

    def held_functions(self, klass: str, attr: str, depth: int = 0) -> tuple[tuple[str, int], ...]:
        """Each function ``self.attr`` may hold in ``klass`` (as :meth:`function_attribute`
        finds them; both of ``self.fn = self.parallel if p else self.once``), where every
        store of it in ``__init__`` holds one; else ()."""
        info = self.classes.get(klass)
        if info is None or depth > 8:
            return ()
        stored = self._init_stores(klass).get(attr)
        if stored is None:
            return next((f for b in info.bases if (f := self.held_functions(b, attr, depth + 1))), ())
        return () if None in stored else tuple(sorted(f for f in stored if f is not None))

    def _init_stores(self, klass: str) -> dict[str, set[tuple[str, int] | None]]:
        """What each ``self.attr = value`` of ``klass.__init__`` stores: the functions
        named (each arm of a conditional), or None for anything else (walked once a class)."""
        found = self._function_attributes.get(klass)
        if found is None:
            found = self._function_attributes[klass] = {}
            init = self.classes[klass].methods.get("__init__")
            for node in ast.walk(self.functions[init].node) if init else ():
                if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                    continue
                value = node.value
                arms = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
                functions = [self._named_function(klass, arm) for arm in arms]
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        found.setdefault(target.attr, set()).update(functions)
        return found

    def _named_function(self, klass: str, value: ast.expr) -> tuple[str, int] | None:
        """The function ``value`` names, with the parameters a call of it skips: a module
        function (``_fast_attn_ref``) or a method bound to ``self`` (``self.forward_once``)."""
        if isinstance(value, ast.Name) and value.id in self.functions and self.functions[value.id].owner is None:
            return value.id, 0
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self":
            method = self.method(klass, value.attr)
            if method is not None and not self.functions[method].is_property:
                return method, 0 if self.functions[method].static else 1
        return None

    def bound_lambdas(self, klass: str | None) -> dict[str, ast.Lambda]:
        """The names the module's top level (``klass`` None) or a class body binds to a
        lambda (``router_softmax_dtype = lambda: ...``), each its one binding there
        (found once a body)."""
        key = klass or ""
        found = self._lambdas.get(key)
        if found is None:
            body = self.tree.body if klass is None else (self.classes[klass].node.body if klass in self.classes else [])
            bound: dict[str, list[ast.expr]] = {}
            for statement in body:
                if isinstance(statement, ast.Assign):
                    for target in statement.targets:
                        if isinstance(target, ast.Name):
                            bound.setdefault(target.id, []).append(statement.value)
            init = self.classes[klass].methods.get("__init__") if klass in self.classes else None
            if init is not None and init in self.functions:  # `self._active = lambda: ...` in `__init__`
                for statement in own_statements(self.functions[init].node.body):
                    if isinstance(statement, ast.Assign):
                        for target in statement.targets:
                            if isinstance(target, ast.Attribute) and dotted(target.value) == "self":
                                bound.setdefault(target.attr, []).append(statement.value)
            found = self._lambdas[key] = {
                name: values[0]
                for name, values in bound.items()
                if len(values) == 1 and isinstance(values[0], ast.Lambda)
            }
        return found

    def declared_global(self, qualname: str) -> frozenset[str]:
        """The names the function ``qualname`` declares ``global`` (its statements read
        once; most declare none)."""
        found = self._globals.get(qualname)
        if found is None:
            info = self.functions.get(qualname)
            statements = own_statements(info.node.body) if info is not None else iter(())
            found = self._globals[qualname] = frozenset(
                name for statement in statements if isinstance(statement, ast.Global) for name in statement.names
            )
        return found

    def set_globals(self) -> frozenset[str]:
        """The module's globals some function of it sets (``global X`` in its body): the
        module's state, found once."""
        if self._set_globals is None:
            self._set_globals = frozenset(name for q in self.functions for name in self.declared_global(q))
        return self._set_globals

    def reads_global(self, name: str, besides: str) -> bool:
        """Does a function of the module other than ``besides`` read the global ``name``
        (load it without binding it itself, or declare it ``global`` and read it)?"""
        for qualname in self.functions:
            if qualname == besides or name not in self.names_read(qualname):
                continue
            if name in self.declared_global(qualname) or not self._binds(qualname, name):
                return True
        return False

    def _binds(self, qualname: str, name: str) -> bool:
        """Does the function ``qualname`` bind ``name`` locally (a parameter or a store)?"""
        info = self.functions[qualname]
        args = info.node.args
        if any(a.arg == name for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a):
            return True
        return any(
            isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(info.node)
        )

    def loads(self, name: str) -> bool:
        """Does the module read an attribute called ``name`` (``x.name``), or call a
        function so named?"""
        return name in self._slot_names()[1]

    def fills(self, name: str) -> bool:
        """Does the module fill a slot called ``name``: store an attribute so named, pass
        a keyword so named, or define a function so named? (Then what it holds is the
        module's own to judge; a module that only reads it takes it from elsewhere.)"""
        return name in self._slot_names()[0]

    def _slot_names(self) -> tuple[frozenset[str], frozenset[str]]:
        """The names the module fills (:meth:`fills`) and reads (:meth:`loads`), found in
        one walk of the module."""
        if self._slots is None:
            filled: set[str] = {info.node.name for info in self.functions.values()}
            loaded: set[str] = set()
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    filled.add(node.attr)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    loaded.add(node.attr)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    loaded.add(node.id)
                elif isinstance(node, ast.keyword) and node.arg is not None:
                    filled.add(node.arg)
            self._slots = (frozenset(filled), frozenset(loaded))
        return self._slots

    def reads_self_attribute(self, klass: str, attr: str, besides: str) -> bool:
        """Does a method of ``klass`` other than ``besides`` load ``self.attr``?"""
        info = self.classes.get(klass)
        for method in info.methods.values() if info else ():
            if method == besides or method not in self.functions:
                continue
            if any(
                isinstance(n, ast.Attribute)
                and n.attr == attr
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
                for n in self._own(method)[1]
            ):
                return True
        return False

    def method(self, klass: str, name: str, depth: int = 0) -> str | None:
        info = self.classes.get(klass)
        if info is None or depth > 8:
            return None
        if name in info.methods:
            return info.methods[name]
        for base in info.bases:
            found = self.method(base, name, depth + 1)
            if found:
                return found
        return None

    def is_comm_query(self, func: ast.AST, aliases: dict[str, str]) -> bool:
        """Is ``func`` a query or set-up function of a communication API
        (``dist.get_rank``, ``dist.get_world_size``): the group it is handed is asked
        about, not communicated in?"""
        name = dotted(func)
        if name is None:
            return False
        qualified = qualify(name, aliases)
        return self._comm_api(qualified) is not None and bool(NON_COMM_API_NAMES.match(qualified.rsplit(".", 1)[-1]))

    def _comm_api(self, qualified: str) -> str | None:
        """The configured communication API ``qualified`` is, or is under, if any."""
        return next((a for a in self.config.all_comm_apis if qualified == a or qualified.startswith(a + ".")), None)

    def is_comm_callee(self, func: ast.AST, aliases: dict[str, str]) -> bool:
        """Does calling ``func`` perform forward communication: a configured API (under
        its qualified name), or a name like one?"""
        func = wrapped_function(func)
        name = dotted(func)
        if name is not None:
            qualified = qualify(name, aliases)
            api = self._comm_api(qualified)
            if api is not None and not _UTILITY_MODULE.search(qualified[len(api) :]):
                return not NON_COMM_API_NAMES.match(qualified.rsplit(".", 1)[-1])
        last = last_name(func)
        if last == "apply" and isinstance(func, ast.Attribute):  # `_AllGatherAttn.apply`: by its class's name
            last = snake_case(last_name(func.value))
        return bool(last) and self.config.is_forward_comm_call(last)

    def aliases_of(self, info: FunctionInfo) -> dict[str, str]:
        """The module's import aliases, with the function's own imports over them."""
        found = self._aliases.get(info.qualname)
        if found is None:
            local = (
                import_aliases(
                    (s for s in own_statements(info.node.body) if isinstance(s, (ast.Import, ast.ImportFrom))),
                    self.package,
                )
                if self.spells(info.node, _IMPORT_WORDS)
                else None
            )
            found = self._aliases[info.qualname] = {**self.aliases, **local} if local else self.aliases
        return found

    @property
    def fed_training(self) -> dict[tuple[str, str], int]:
        """(function, parameter) pairs that a call somewhere in the module passes a
        module's train/eval mode (``x.training``), with the line of one such call: a
        *selector* by mode."""
        if self._fed is not None:
            return self._fed
        found: dict[tuple[str, str], int] = {}
        for qualname in self._functions_mentioning(".training"):
            if not qualname:
                continue
            info = self.functions[qualname]
            calls = [c for c in self.calls_of(qualname) if mentions_training(c)]
            if not calls:
                continue
            aliases = self.aliases_of(info)
            for call in calls:
                resolved = self.resolve(call.func, info.owner, aliases)
                if resolved is None:
                    continue
                callee, skip = resolved
                target = self.functions.get(callee)
                if target is None:
                    continue
                for name in fed_training_parameters(call, target, skip):
                    found.setdefault((callee, name), call.lineno)
        self._fed = found
        return found

    def communicates(
        self, qualname: str, depth: int = 0, outside: Callable[[ast.Call, FunctionInfo], bool] | None = None
    ) -> bool:
        """Does a function of the module communicate in the forward, directly or through
        other functions of the module (``outside(call, function)``: or of other modules,
        for a call the module cannot resolve)? Worked out on demand, for the callees met."""
        return bool(self.comm_ops(qualname, depth, outside))

    def comm_ops_named(self, name: str) -> bool:
        """Does a function of the module called ``name`` (its last name) reach forward
        communication?"""
        by_name = self._communicating_names
        if by_name is None:
            by_name = self._communicating_names = {}
            for qualname in self.functions:
                last = qualname.rsplit(".", 1)[-1]
                by_name[last] = by_name.get(last, False) or bool(self.comm_ops(qualname))
        return by_name.get(name, False)

    def comm_constants(self, qualname: str) -> frozenset[tuple[str, object]]:
        """The constant options the collectives a function calls itself are given
        (``async_op=True`` of ``dist.reduce_scatter_tensor(..., async_op=True)``): what
        tells its communication from a plain call of the same collective."""
        found = self._comm_constants.get(qualname)
        if found is None:
            info = self.functions.get(qualname)
            aliases = self.aliases_of(info) if info is not None else {}
            found = self._comm_constants[qualname] = frozenset(
                (k.arg, repr(k.value.value))
                for call in (self.calls_of(qualname) if info is not None else ())
                if self.is_comm_callee(call.func, aliases)
                for k in call.keywords
                if k.arg is not None and isinstance(k.value, ast.Constant)
            )
        return found

    def comm_parameters(self, qualname: str) -> dict[str, tuple[str, ast.expr | None]]:
        """The parameters a function hands on as an option of a collective it calls
        itself (``def _a2a(self, t, async_op=False): all_to_all_single(..., async_op=async_op)``):
        each with the collective's keyword and the parameter's default, if it has one.
        What a caller passes them is then the collective's option at that call (found
        once a function)."""
        known = self._comm_parameters.get(qualname)
        if known is None:
            known = self._comm_parameters[qualname] = self._find_comm_parameters(qualname)
        return known

    def _find_comm_parameters(self, qualname: str) -> dict[str, tuple[str, ast.expr | None]]:
        info = self.functions.get(qualname)
        if info is None:
            return {}
        args = info.node.args
        positional = [*args.posonlyargs, *args.args]
        defaults: dict[str, ast.expr | None] = {a.arg: None for a in (*positional, *args.kwonlyargs)}
        defaults.update(zip((a.arg for a in positional[len(positional) - len(args.defaults) :]), args.defaults))
        defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
        aliases = self.aliases_of(info)
        found: dict[str, tuple[str, ast.expr | None]] = {}
        for call in self.calls_of(qualname):
            if not self.is_comm_callee(call.func, aliases):
                continue
            for k in call.keywords:
                if k.arg is not None and isinstance(k.value, ast.Name) and k.value.id in defaults:
                    found.setdefault(k.value.id, (k.arg, defaults[k.value.id]))
        return found

    def comm_ops(
        self, qualname: str, depth: int = 0, outside: Callable[[ast.Call, FunctionInfo], bool] | None = None
    ) -> frozenset[str]:
        """The forward communication a function of the module performs, as the names of
        the operations it reaches (``all_reduce``, ``reduce_scatter_tensor``; a call of another
        module that ``outside`` says communicates: its dotted name): what two calls are
        compared by, so that ``_AllReduce.apply(x)`` and ``dist.all_reduce(x)`` are the
        same effect."""
        key = (qualname, outside is not None)
        known = self._communicates.get(key)
        if known is not None:
            return known
        self._communicates[key] = frozenset()  # a recursive call adds nothing
        info = self.functions.get(qualname)
        found: set[str] = set()
        recorded = True
        if info is not None and info.stub and self.config.is_forward_comm_call(info.node.name):
            found.add(info.node.name.lstrip("_"))  # a placeholder: its name says what it does
            recorded = False
        elif info is not None and not info.backward and not self.config.backward_call_re.search(info.node.name):
            aliases = self.aliases_of(info)
            for call in self.calls_of(qualname):
                if self.is_comm_callee(call.func, aliases):
                    found.add(op_name(call.func))
                    recorded = recorded and records_autograd(call.func, aliases)
                    continue
                resolved = self.resolve(call.func, info.owner, aliases)
                nested = f"{qualname}.<locals>.{call.func.id}" if isinstance(call.func, ast.Name) else ""
                if nested in self.functions:  # `communicate_step()`, defined in the function that calls it
                    resolved = (nested, 0)
                if resolved is not None:
                    if depth < 32:
                        inner = self.comm_ops(resolved[0], depth + 1, outside)
                        found |= inner
                        if inner:
                            target = self.functions.get(resolved[0])
                            recorded = recorded and (
                                (target is not None and target.autograd_forward)
                                or resolved[0] in self._autograd_recorded
                            )
                elif outside is not None and outside(call, info):
                    found.add(dotted(call.func) or op_name(call.func))
                    recorded = False
        result = self._communicates[key] = frozenset(found)
        if result and recorded:
            self._autograd_recorded.add(qualname)
        return result

    def autograd_records(self, qualname: str) -> bool:
        """Does autograd record every communication the function performs (it calls it
        through ``Fn.apply``, ``torch.distributed.nn``, DTensor)? Asked after
        :meth:`comm_ops`."""
        return qualname in self._autograd_recorded or (
            qualname in self.functions and self.functions[qualname].autograd_forward
        )


#: a class that checkpoints activations, and the name of its policy (what to save)
_CHECKPOINTING = re.compile(r"(?i)checkpoint|recompute|remat")
_POLICY = re.compile(r"(?i)polic(y|ies)")


#: communication APIs autograd records (a backward is defined for them)
DIFFERENTIABLE_APIS = ("torch.distributed.nn", "torch.distributed.tensor", "torch.distributed._tensor")


def records_autograd(func: ast.AST, aliases: dict[str, str]) -> bool:
    """Does autograd record the communication a call of ``func`` performs: an autograd
    Function's ``apply``, or a differentiable API (``torch.distributed.nn``, DTensor)?"""
    if isinstance(func, ast.Attribute) and func.attr == "apply":
        return True
    return qualify(dotted(func) or "", aliases).startswith(DIFFERENTIABLE_APIS)


#: calls whose first argument is not a function they wrap
_NOT_WRAPPERS = frozenset({"getattr", "type", "isinstance", "hasattr", "iter", "next", "vars", "id"})


def wrapped_function(func: ast.AST) -> ast.AST:
    """The function a wrapper called at once wraps, its first argument
    (``instrument(dist.all_gather)(...)``, ``remat.region(Fn.apply, "linear",
    recompute=r)(...)``, ``partial(f, x)(...)``); ``func`` itself where it is no such
    call."""
    while (
        isinstance(func, ast.Call)
        and func.args
        and isinstance(func.args[0], (ast.Name, ast.Attribute))
        and last_name(func.func) not in _NOT_WRAPPERS
    ):
        func = func.args[0]
    return func


def last_name(func: ast.AST) -> str:
    """The last name a call's function is spelled with (``dist.all_reduce``: ``all_reduce``),
    "" for an expression that has none (a call's result, a subscript)."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def op_name(func: ast.AST) -> str:
    """The operation a communication call names: its last name without leading
    underscores (``dist.all_reduce``, ``torch.distributed.nn.functional.all_reduce`` and
    ``_all_reduce`` are one operation), nor a word saying autograd records it
    (``all_to_all_single_autograd`` is an ``all_to_all_single``)."""
    func = wrapped_function(func)
    last = last_name(func) or "call"
    if last == "apply" and isinstance(func, ast.Attribute) and last_name(func.value):
        last = snake_case(last_name(func.value))  # `_AllReduce.apply` is an all_reduce
    return unwrapped_operation(last)


def unwrapped_operation(name: str) -> str:
    """``name`` of a function without leading underscores or a word saying autograd
    records what it does (``all_to_all_single_autograd``: ``all_to_all_single``)."""
    if _AUTOGRAD_WORD.search(name):
        name = re.sub("_+", "_", _AUTOGRAD_WORD.sub("_", name)).strip("_") or name
    return name.lstrip("_") or name


#: a word of a function's name saying autograd records what it does
_AUTOGRAD_WORD = re.compile(r"(?:^|_)(?:autograd|differentiable|with_grad)(?=_|$)")


def snake_case(name: str) -> str:
    """``_AllGatherAttn`` as ``_all_gather_attn``: a class named for what it does, spelled
    as the functions that do it are."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _stage_step(info: FunctionInfo) -> bool:
    """``step(self, x)``, ``step(self, *args, **kwargs)``: a pipeline schedule's or
    stage's forward step, not an optimizer's or a scheduler's ``step(closure=None)``: it
    takes an input without a default, or any inputs."""
    if info.node.name != "step":
        return False
    args = info.node.args
    positional = [*args.posonlyargs, *args.args][1 if info.owner else 0 :]
    return len(positional) > len(args.defaults) or args.vararg is not None


#: a name saying the module's train or eval mode (`fp32_eval`, `ring_in_eval`, `is_train`)
_MODE_WORD = re.compile(r"(?i)(^|_)(train(ing)?|eval)(_|$)")


def names_a_mode(node: ast.AST) -> bool:
    """Does ``node`` spell a name saying the module's train or eval mode?"""
    return any(
        _MODE_WORD.search(n.attr if isinstance(n, ast.Attribute) else n.id)
        for n in ast.walk(node)
        if isinstance(n, (ast.Name, ast.Attribute))
    )


def mentions_training(call: ast.Call) -> bool:
    """Does the call pass a module's train/eval mode (``x.training``)?"""
    return any(
        isinstance(a, ast.Attribute) and a.attr == "training" for a in (*call.args, *(k.value for k in call.keywords))
    )


def fed_training_parameters(call: ast.Call, target: FunctionInfo, skip: int) -> list[str]:
    """The parameters of ``target`` (``skip`` leading ones not passed) that ``call``
    passes ``x.training``: what makes ``target`` a selector by train/eval mode."""
    names = target.positional[skip:]
    pairs = [(k.arg, k.value) for k in call.keywords if k.arg]
    pairs += [(names[i], a) for i, a in enumerate(call.args) if i < len(names)]
    return [name for name, value in pairs if isinstance(value, ast.Attribute) and value.attr == "training"]


def _parameters(args: ast.arguments) -> list[ast.arg]:
    out = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if args.vararg:
        out.append(args.vararg)
    if args.kwarg:
        out.append(args.kwarg)
    return out


def _bound_at_top(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for statement in own_statements(tree.body):
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(statement.name)
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in statement.names)
        else:
            targets: list[ast.AST] = []
            if isinstance(statement, ast.Assign):
                targets = list(statement.targets)
            elif isinstance(statement, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
                targets = [statement.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names
