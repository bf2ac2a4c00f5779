"""Abstract values: what the interpreter knows of an expression's value.

Every value has a *truthiness*, a boolean function (:mod:`gradgate.model.bdd`) of grad
mode and of atoms standing for what is not known (a parameter, a call's result, a
comparison). A value picked by a branch (``group = a if c else b``) is the function
``c and a or not c and b`` of the atoms of ``a`` and ``b``: the same diagram then says
both whether it is truthy and which value it is. ``origins`` are the grad-mode reads
whose value reached it, by data or by control; ``trail`` the steps a pure grad-mode
value took from its capture (for the path shown with a finding).
"""

from __future__ import annotations

import ast

from ..records import record, replace


@record
class Step:
    """One place grad mode passed through: ``node``'s position, and what happened."""

    line: int
    column: int  # 0-based, in UTF-8 bytes as ast gives it
    message: str


#: suffix of a :attr:`FunctionRef.receiver` made by ``super()``: the method is looked up
#: in the class's bases
SUPER = "@super"

#: the prefix of a module global's entry among the module's attributes and of its slot
#: in a summary (``global x`` in a function, then ``x = torch.is_grad_enabled()``)
GLOBAL = "global:"


@record
class Place:
    """A step of a path in any file: 1-based line and character column."""

    path: str
    line: int
    column: int
    message: str
    #: the text of the line (a finding reported here shows it)
    text: str = ""
    #: is grad mode combined into a decision here (not only passed on)?
    decides: bool = False


@record
class FunctionRef:
    """A function (or class) of the module as a value: ``fn = _Linear.apply``, or
    ``functools.partial(helper, training=g)`` with its bound arguments."""

    qualname: str
    #: leading parameters the call does not pass (``ctx`` of ``Function.apply``)
    skip: int = 0
    args: tuple[Value, ...] = ()
    keywords: tuple[tuple[str, Value], ...] = ()
    #: a name of another module (``qualname`` is then fully qualified), resolved by the
    #: project only where a call passes something that matters
    external: bool = False
    #: a method looked up on a value of known make (``qualname`` is then the method's
    #: name, this the receiver's :attr:`Value.made_by`)
    receiver: str | None = None


@record
class Value:
    bdd: int
    origins: frozenset[ast.AST] = frozenset()
    #: an identity for values that are not booleans (an atom's key), else None
    ident: object = None
    items: tuple[Value, ...] | None = None
    fields: tuple[tuple[str, Value], ...] | None = None
    function: FunctionRef | None = None
    trail: tuple[Step, ...] = ()
    #: the fully qualified name of what made this value: the class or function whose
    #: call returned it (a type, to resolve the methods called on it), else None
    made_by: str | None = None
    #: the values an ``if`` joined, each under its branch's condition, where they are
    #: functions or sequences (``fwd_fn = F.apply if grad else F.forward``): a call of
    #: the joined function runs each under its condition, with the starred sequence of
    #: the same branch (``fwd_fn(*ctx_args, ...)``)
    alternatives: tuple[tuple[int, Value], ...] | None = None

    def field(self, name: str) -> Value | None:
        for key, value in self.fields or ():
            if key == name:
                return value
        return None

    def with_origins(self, origins: frozenset[ast.AST]) -> Value:
        if not origins or origins <= self.origins:
            return self
        return replace(self, origins=self.origins | origins)

    def with_step(self, step: Step) -> Value:
        return replace(self, trail=(*self.trail, step)) if self.trail else self


class Environment:
    """Values of names (``x``) and attribute paths (``self.x``) at one program point.

    ``written`` holds the keys set or removed since the environment was made (a copy
    starts with none): a join of two branches looks at those keys only, not at every
    name the function has bound."""

    __slots__ = ("_paths", "values", "written")

    def __init__(self, values: dict[str, Value] | None = None, paths: dict[str, frozenset[str]] | None = None):
        self.values: dict[str, Value] = values if values is not None else {}
        self.written: set[str] = set()
        #: the attribute paths bound under each name (``self`` -> ``self.x``, ``self.x.y``)
        self._paths: dict[str, frozenset[str]] = paths if paths is not None else {}

    def copy(self) -> Environment:
        return Environment(dict(self.values), dict(self._paths))

    def set(self, key: str, value: Value) -> None:
        self.values[key] = value
        self.written.add(key)
        root, dot, _ = key.partition(".")
        if dot:
            known = self._paths.get(root, frozenset())
            if key not in known:
                self._paths[root] = known | {key}

    def bind_name(self, name: str, value: Value) -> None:
        """``name = value``: what was known of ``name.attr`` goes with the old value."""
        for key in self._paths.pop(name, ()):
            self.remove(key)
        self.set(name, value)

    def remove(self, key: str) -> None:
        if self.values.pop(key, None) is not None:
            self.written.add(key)

    def update(self, changes: dict[str, Value | None]) -> None:
        """Set each key to its value, removing those whose value is None."""
        for key, value in changes.items():
            if value is None:
                self.remove(key)
            else:
                self.set(key, value)

    def become(self, other: Environment) -> None:
        """Take the state of ``other`` (another path's environment) as this one's."""
        self.written |= self.values.keys() | other.values.keys()
        self.values = dict(other.values)
        self._paths = dict(other._paths)
