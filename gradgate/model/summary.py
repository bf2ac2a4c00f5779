"""Function summaries: what a function's parameters decide.

A summary is read off one interpretation of the function with each parameter an atom
of its own (:meth:`gradgate.model.bdd.Manager.param`): a decision whose diagram depends
on a parameter's atom is an :class:`Effect` of that parameter, with its polarity
(whether turning the parameter off can only turn the decision off); an argument of a
call that depends on it is a :class:`Link` to the callee's parameter. Links are
followed by :class:`gradgate.model.project.Project`, across modules; nothing here
knows of files beyond the one path it is given.
"""

from __future__ import annotations

import ast

from ..records import record, replace
from .bdd import Manager
from .decisions import kind_of
from .interpret import FunctionResult, pure_grad_values
from .values import GLOBAL, Place, Value


@record
class Effect:
    """A decision a parameter takes part in: ``polarity`` 1 when the parameter off can
    only turn it off, -1 when the parameter on can only turn it off, 0 when the
    decision is a choice (a process group) that any dependence changes."""

    kind: str
    name: str
    polarity: int
    steps: tuple[Place, ...]


@record
class Link:
    """An argument that depends on parameter ``param``: ``slot`` (a position after the
    callee's ``skip`` leading parameters, or a keyword) of ``callee`` (module, qualname).
    A store ``self.attr = param`` is a link to ``Class#attr``, slot ``self.attr``: what
    the methods of the class decide with the attribute; a store ``global X; X = param``
    one to ``#global:X``, slot ``global:X``: what the module's functions decide with it."""

    param: str
    polarity: int
    callee: tuple[str, str]
    skip: int
    slot: int | str
    place: Place
    #: the item of a tuple argument (the field of an object) the parameter went into
    item: int | str | None = None
    #: the argument is the parameter itself (else a value it decides: ``g1 if p else g2``)
    direct: bool = True


@record
class FunctionSummary:
    positional: tuple[str, ...]
    keyword_only: frozenset[str]
    effects: tuple[tuple[str, Effect], ...] = ()
    links: tuple[Link, ...] = ()
    #: 1 when the function returns grad mode, -1 its negation, None otherwise
    returns_grad: int | None = None
    #: parameters that choose what the function returns (by a branch or in the value)
    chooses_return: frozenset[str] = frozenset()
    #: the module's globals the function stores a value in: those it stores grad mode
    #: itself in (``global X; X = torch.is_grad_enabled()``), and those it stores
    #: anything else in (a set-back of the global's own value is neither)
    stores_grad: frozenset[str] = frozenset()
    stores_other: frozenset[str] = frozenset()
    #: where the function returns one tuple or mapping holding grad mode itself in some
    #: items or entries (``return torch.is_grad_enabled(), torch.is_inference_mode_enabled()``,
    #: ``return {"overlap": grad}``): its length (None for a mapping) and those parts with
    #: their polarity
    returns_parts: tuple[tuple[int | str, int], ...] = ()
    returns_length: int | None = None
    #: the attributes of ``self`` the function (an ``__init__``) stores grad mode itself in
    #: and nothing else, with its polarity (``self.grad = torch.is_grad_enabled()``)
    init_grad: tuple[tuple[str, int], ...] = ()


EMPTY = FunctionSummary((), frozenset())


def compose(outer: int, inner: int) -> int:
    """The polarity of a decision reached through a link of polarity ``outer``."""
    return 0 if outer == 0 or inner == 0 else outer * inner


def polarity_of(bdd: Manager, var: int, value: Value | None) -> int | None:
    """How ``value`` depends on the parameter variable ``var`` (see :class:`Effect`)."""
    if value is None or value.items is not None or value.fields is not None:
        return None
    return bdd.monotone(value.bdd, var)


def summarise(
    result: FunctionResult,
    positional: tuple[str, ...],
    keyword_only: frozenset[str],
    bdd: Manager,
    place: PlaceMaker,
    module: str,
    owner: str | None = None,
    function: str = "",
) -> FunctionSummary:
    """The summary of one interpreted function: ``place(line, column, message)`` makes
    the shown steps (the column as ast gives it)."""
    effects: list[tuple[str, Effect]] = []
    for decision in result.decisions:
        any_way = kind_of(decision.kind).any_way
        for var in bdd.params_in(decision.bdd):
            polarity = bdd.monotone(decision.bdd, var)
            if polarity is None or (polarity == 0 and not any_way):
                continue
            parameter = bdd.param_vars[var][2]
            line, column = _deciding_read(result, parameter, decision.node, decision.origins)
            step = replace(
                place(line, column, f"decides `{decision.name}` here ({kind_of(decision.kind).words})"), decides=True
            )
            effects.append(
                (bdd.param_vars[var][2], Effect(decision.kind, decision.name, 0 if any_way else polarity, (step,)))
            )
    links: list[Link] = []
    for site in (*result.calls, *result.external_calls):
        callee = site.external or (module, site.callee)
        slots: list[tuple[int | str, Value | None]] = [*enumerate(site.args), *site.keywords]
        for slot, value in slots:
            if value is None:
                break
            parts: list[tuple[int | str | None, Value]] = (
                [(None, value)] if value.items is None else list(enumerate(value.items))
            )
            parts += list(value.fields or ())
            for item, part in parts:
                for var in bdd.params_in(part.bdd):
                    polarity = polarity_of(bdd, var, part)
                    if polarity is None:
                        continue
                    name = bdd.param_vars[var][2]
                    shown = part_of(f"`{slot}`" if isinstance(slot, str) else f"argument {slot + 1}", item)
                    argument = _argument(site.node, slot, item)
                    direct = _is_name(argument, name)
                    verb = "passed on as" if direct else "decides the value passed as"
                    message = f"`{name}` {verb} {shown} to `{callee[1]}`"
                    read = None if direct else _read_of(argument, name)
                    line, column = (
                        (read.lineno, read.col_offset)
                        if read is not None
                        else _deciding_read(result, name, site.node, part.origins)
                        if not direct
                        else (site.node.lineno, site.node.col_offset)
                    )
                    # an argument spread from `*args` is passed on, unseen: no decision here
                    step = replace(place(line, column, message), decides=not direct and argument is not None)
                    links.append(Link(name, polarity, callee, site.skip, slot, step, item, direct))
    # a nested function called here, or returned to be called later, sees the parameters
    # as `^name` (its closure)
    nested: list[tuple[str, ast.AST]] = [(site.callee, site.node) for site in result.calls]
    nested += [(v.function.qualname, s) for v, s in result.returned_functions if v.function is not None]
    for inner, node in dict(nested).items():
        if inner.startswith(f"{function}.<locals>."):
            for name in (*positional, *keyword_only):
                message = f"`{name}` seen by the nested function `{inner.rsplit('.', 1)[-1]}`"
                step = place(getattr(node, "lineno", 0), getattr(node, "col_offset", 0), message)
                links.append(Link(name, 1, (module, inner), 0, f"^{name}", step))
    for attr, value, node in result.state_stores:
        is_global = attr.startswith(GLOBAL)
        if owner is None and not is_global:
            continue
        # `self.attr = param`: what the class's methods do with it; `global X; X = param`:
        # what the module's functions do with it
        slot = attr if is_global else f"self.{attr}"
        for var in bdd.params_in(value.bdd):
            polarity = polarity_of(bdd, var, value)
            if polarity is None:
                continue
            name = bdd.param_vars[var][2]
            shown = attr[len(GLOBAL) :] if is_global else slot
            step = place(node.lineno, node.col_offset, f"`{name}` stored as `{shown}`")
            links.append(Link(name, polarity, (module, f"{'' if is_global else owner}#{attr}"), 0, slot, step))
    returned = pure_grad_values(result.returns, bdd) if result.returns else None
    returns_grad = None if returned is None else (1 if bdd.polarity(returned.bdd) else -1)
    chooses = {
        bdd.param_vars[v][2]
        for b in (*result.return_conditions, *(r.bdd for r in result.returns))
        for v in bdd.params_in(b)
    }
    returned_parts: list[tuple[int | str, int]] = []
    length: int | None = None
    if returns_grad is None and len(result.returns) == 1:
        record = result.returns[0]
        named: list[tuple[int | str, Value]] = [*enumerate(record.items or ()), *(record.fields or ())]
        for key, piece in named:
            if bdd.is_pure_grad(piece.bdd) and piece.items is None and piece.fields is None:
                returned_parts.append((key, 1 if bdd.polarity(piece.bdd) else -1))
        length = len(record.items) if record.items is not None else None
    stored: dict[str, bool] = {}
    init_grad: dict[str, int] = {}
    other_attrs: set[str] = set()
    for attr, value, _node in result.state_stores:
        pure = bdd.is_pure_grad(value.bdd) and value.items is None and value.fields is None
        if attr.startswith(GLOBAL):
            stored[attr] = stored.get(attr, True) and pure
        elif function.endswith("__init__") and pure:
            init_grad[attr] = 1 if bdd.polarity(value.bdd) else -1
        else:
            other_attrs.add(attr)
    for attr in other_attrs:
        init_grad.pop(attr, None)
    return FunctionSummary(
        positional,
        keyword_only,
        tuple(effects),
        tuple(links),
        returns_grad,
        frozenset(chooses),
        frozenset(a for a, grad in stored.items() if grad),
        frozenset(a for a, grad in stored.items() if not grad),
        tuple(returned_parts),
        length,
        tuple(sorted(init_grad.items())),
    )


def _read_of(argument: ast.expr | None, name: str) -> ast.Name | None:
    """The first read of the parameter ``name`` (``^name``: the closure's variable)
    inside ``argument``."""
    if argument is None:
        return None
    name = name.removeprefix("^")
    reads = [n for n in ast.walk(argument) if isinstance(n, ast.Name) and n.id == name]
    return min(reads, key=lambda n: (n.lineno, n.col_offset)) if reads else None


def _deciding_read(
    result: FunctionResult, parameter: str, node: ast.AST, origins: frozenset[ast.AST] = frozenset()
) -> tuple[int, int]:
    """Where the decision at ``node`` reads ``parameter``: a read that shaped its value
    (one of its ``origins``), the last up to the decision (``if inference_mode and comm:``
    for the collective under it), else the first inside it (a flag the ``while`` loop of
    an ``if`` sets, decided where the ``if`` joins), else the first anywhere (a collective
    called twice, decided where its first call is); else the last read up to it; else
    the decision."""
    at = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
    all_reads = result.param_reads.get(parameter, [])
    shaping = [r for r in all_reads if r in origins]
    reads = [(getattr(r, "lineno", 0), getattr(r, "col_offset", 0)) for r in (shaping or all_reads)]
    before = [r for r in reads if r <= at or r[0] == at[0]]
    if before:
        return max(before)
    end = getattr(node, "end_lineno", None) or at[0]
    within = [r for r in reads if at[0] <= r[0] <= end]
    if within:
        return min(within)
    return min(reads) if shaping else at


def part_of(argument: str, item: int | str | None) -> str:
    """How a step names an argument (``argument``), or its tuple item or field."""
    if isinstance(item, int):
        return f"item {item + 1} of {argument}"
    return argument if item is None else f"field `{item}` of {argument}"


def _argument(call: ast.Call, slot: int | str, item: int | str | None) -> ast.expr | None:
    """The expression a call passes in ``slot`` (its tuple item), where it is written."""
    found: ast.expr | None = None
    if isinstance(slot, str):
        found = next((k.value for k in call.keywords if k.arg == slot), None)
    elif slot < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: slot + 1]):
        found = call.args[slot]
    if isinstance(item, int):
        found = found.elts[item] if isinstance(found, ast.Tuple) and item < len(found.elts) else None
    elif item is not None:
        found = None
    return found


def _is_name(node: ast.expr | None, name: str) -> bool:
    """Is ``node`` the parameter ``name`` (``^name``: the closure's variable) itself?"""
    return isinstance(node, ast.Name) and node.id == name.removeprefix("^")


class PlaceMaker:
    """Makes :class:`Place` objects for one file, turning ast's UTF-8 byte columns into
    1-based character columns."""

    def __init__(self, path: str, lines: list[str]) -> None:
        self.path = path
        self.lines = lines

    def __call__(self, line: int, column: int, message: str) -> Place:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        try:
            character = len(text.encode("utf-8")[:column].decode("utf-8"))
        except UnicodeDecodeError:
            character = column
        return Place(self.path, line, character + 1, message, text.rstrip("\r\n"))
