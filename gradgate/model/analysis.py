"""One module's analysis: which functions to interpret, what flows between them, and
for each decision that grad mode gates, where it enters and whether a fix is proven.

Functions are interpreted in rounds, and a round in levels: a function after the
functions that call or name it (:meth:`ModuleIndex.callers_first`). After each level
the values that cross function boundaries are summarised: what every caller of a
function passes for a parameter (when all agree on grad mode, the parameter *is* grad
mode: any number of hops, under any name), what a function or property returns, and
what every store to an attribute holds. A function is interpreted again only where a
summary it read changed since; the rounds stop when none did.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable

from ..config import Config
from ..records import record, replace
from .bdd import FALSE, BudgetExceeded, Manager
from .decisions import ARM_KINDS
from .index import FunctionInfo, ModuleIndex, fed_training_parameters, mentions_training, names_a_mode
from .interpret import (
    PLAIN,
    CallSite,
    Context,
    Decision,
    FunctionResult,
    choice_of,
    interpret,
    pure_grad_values,
)
from .lines import LineIndex, holds_line_within, split_lines
from .project import Callee, Project, module_name, reference
from .summary import Effect, part_of
from .values import GLOBAL, Place, Step, Value

MAX_ROUNDS = 6


@record
class Entry:
    """Where grad mode enters a decision: a read (``origin``) inside ``statement``."""

    decision: Decision
    origin: ast.AST
    statement: ast.stmt
    #: grad mode with the read fixed to its grad-on value, if that proves the fix
    proven: bool
    #: calls that also take grad mode and what the path prepares (unsafe fix)
    coupled: tuple[ast.Call, ...]
    trail: tuple[Step, ...]


#: returns of one function joined into the condition it returns, at most
_MAX_RETURNS_JOINED = 32


class ModuleAnalysis:
    def __init__(
        self,
        tree: ast.Module,
        config: Config,
        text: str | None = None,
        project: Project | None = None,
        path: str = "<module>",
        source_lines: list[str] | None = None,
    ) -> None:
        """``text``: the module's text, for the pre-filters (None: every function is
        interpreted). ``project``: the run's modules, for calls into other modules
        (None: this module alone). ``source_lines``: the text's lines, for columns."""
        self.tree = tree
        self.config = config
        if source_lines is None:
            source_lines = split_lines(text or "")
        self._lines = lines = LineIndex(text, source_lines) if text is not None else None
        #: each function's first line (its decorators included) and last; the answers of
        #: :meth:`_relevant`
        self._spans: list[tuple[FunctionInfo, int, int | None]] | None = None
        self._relevant_for: dict[tuple[frozenset[str], ...], list[FunctionInfo]] = {}
        self.project = project if project is not None else Project(config)
        package = module_name(path)[1] if project is not None and not path.startswith("<") else None
        self.index = ModuleIndex(tree, config, lines.lines_with if lines is not None else None, package)
        self.module = self.project.register(path, tree, self.index, source_lines)
        self.bdd = Manager()
        self.context = Context(self.index, self.bdd, self.project, self.module)
        self.results: dict[str | None, FunctionResult] = {}
        #: each grad-mode read's function result (see :meth:`owner_of`), made on first use
        self._owners: dict[ast.AST, FunctionResult] | None = None
        #: the functions not analysed (a diagram past its budget, too deep a nesting)
        self.failed: list[str] = []
        #: the functions whose summaries had not settled after MAX_ROUNDS rounds
        self.unsettled: list[str] = []
        #: the other files whose summaries the findings rest on
        self.dependencies: frozenset[str] = frozenset()
        with self.project.recording() as touched:
            self.context.external_fed = self._external_fed()
            self.context.external_fed_names = {q.rsplit(".", 1)[-1] for _m, q, _p in self.context.external_fed}
            self._run()
            self._add_call_decisions()
        #: names of the module's functions that return grad mode
        # (and those returning a tuple or record holding grad mode itself in a part, which a
        # caller unpacks or reads a field of: `ForwardContext(grad=torch.is_grad_enabled())`)
        returning = {
            q
            for q, v in self.context.returns.items()
            if "<locals>" not in q
            and (
                not v.origins
                or any(self.bdd.is_pure_grad(p.bdd) for p in (*(v.items or ()), *(f for _, f in v.fields or ())))
            )
        }
        for qualname, info in self.index.functions.items():
            # a query named like a backward function (`will_backward()`) is not analysed
            # as a forward, but what it returns may gate one elsewhere
            query = len(info.positional) <= (1 if info.owner else 0) and not info.node.args.kwonlyargs
            if info.backward and query and "<locals>" not in qualname and self.module.mentions_grad(info):
                if self.project.summary(self.module, qualname).returns_grad is not None:
                    returning.add(qualname)
        # and the module's names bound to a source (`grad_mode = torch.is_grad_enabled`)
        returning |= {name for klass, name in self.context.bound_sources if klass is None}
        # and its classes storing grad mode itself on the object (`self.grad = grad` in
        # `__init__`), with the functions returning one: a caller reads the attribute
        carrying = {k for (k, _a), v in self.context.class_attributes.items() if self.bdd.is_pure_grad(v.bdd)}
        if carrying:
            makes = {self.context.hints.local(k) for k in carrying}
            returning |= carrying
            returning |= {
                q
                for q, info in self.index.functions.items()
                if "<locals>" not in q and self.context.hints.returned(info) in makes
            }
        self.exports = tuple(sorted({q.rsplit(".", 1)[-1] for q in returning}))
        self.project.note_returns(self.exports)
        self.dependencies = frozenset(os.path.abspath(p) for p in touched - {self.module.path})

    # -- rounds --------------------------------------------------------------------------
    def _relevant(self, words: set[str]) -> list[FunctionInfo]:
        """The functions worth interpreting: those whose lines (decorators included)
        spell one of ``words``, and those the summaries so far reach (seeded parameters,
        closures). Asked at every level of every round: remembered for the same question."""
        if self._lines is None:
            return [i for i in self.index.functions.values() if not i.backward]
        context = self.context
        # the globals and attributes the module's functions store grad mode in are read
        # by functions that spell no source (`if RING_GRAD:`)
        words = words | {a.removeprefix(GLOBAL) for a in context.attributes}
        key = (frozenset(words), frozenset(context.seeds), frozenset(context.closures))
        known = self._relevant_for.get(key)
        if known is not None:
            return known
        if self._spans is None:
            self._spans = [
                (i, min((d.lineno for d in i.node.decorator_list), default=i.node.lineno), i.node.end_lineno)
                for i in self.index.functions.values()
                if not i.backward
            ]
        lines = self._lines.lines_with(words)
        out = [
            info
            for info, first, last in self._spans
            if holds_line_within(lines, first, last or info.node.lineno)
            or info.qualname in context.seeds
            or info.qualname in context.closures
        ]
        self._relevant_for[key] = out
        return out

    def _grad_lambdas(self, words: set[str]) -> set[str]:
        """Names the module or a class body binds to a lambda spelling one of ``words``
        (``router_dtype = lambda: torch.float32 if torch.is_grad_enabled() else None``):
        a function calling one reads grad mode."""
        return {
            name
            for klass in (None, *self.index.classes)
            for name, bound in self.index.bound_lambdas(klass).items()
            if any(
                (n.id if isinstance(n, ast.Name) else n.attr) in words
                for n in ast.walk(bound.body)
                if isinstance(n, (ast.Name, ast.Attribute))
            )
        }

    def _run(self) -> None:
        config = self.config
        sources = config.sources
        words = set(sources.words()) | self.project.grad_returning_names()
        words |= {name for name, target in self.index.aliases.items() if sources.polarity(target) is not None}
        words |= self._grad_lambdas(words)
        #: the summaries after each batch of interpretations, and which of them each
        #: result was computed with
        states = [self._context_state()]
        seen: dict[str | None, int] = {}
        changes: dict[tuple[int, int], set[tuple[str, object]]] = {}
        order: dict[tuple[str | None, ...], list[list[str | None]]] = {}
        for _ in range(MAX_ROUNDS):
            functions = {f.qualname: f for f in self._relevant(words)}
            keys: tuple[str | None, ...] = (None, *functions)
            self.results = {k: r for k, r in self.results.items() if k in functions or k is None}
            seen = {k: v for k, v in seen.items() if k in self.results}
            if keys not in order:
                order[keys] = self.index.callers_first(list(keys))
            interpreted = False
            for level in order[keys]:
                if interpreted:  # what the levels before passed on can make more functions relevant
                    functions = {f.qualname: f for f in self._relevant(words)}
                todo = [
                    k
                    for k in level
                    if (k is None or k in functions) and (k not in seen or self._stale(k, seen[k], states, changes))
                ]
                if not todo:
                    continue
                for key in todo:
                    self.results[key] = self._interpret(functions[key] if key is not None else None)
                    seen[key] = len(states) - 1
                self._summarise(self.results.values())
                states.append(self._context_state())
                interpreted = True
                words = (
                    words
                    | {q.rsplit(".", 1)[-1] for q in self.context.returns}
                    | set(self.context.attributes)
                    | {attr for (_, attr), v in self.context.class_attributes.items() if v is not PLAIN}
                    | {name for _, name in self.context.bound_sources}
                )
            if not interpreted:
                break
        else:  # the rounds ran out: what a next round would interpret is unsettled
            fresh = [f.qualname for f in self._relevant(words) if f.qualname not in self.results]
            stale = [k or "<module>" for k in self.results if k in seen and self._stale(k, seen[k], states, changes)]
            self.unsettled = fresh + stale

    def _stale(
        self,
        key: str | None,
        version: int,
        states: list[dict[str, dict[object, object]]],
        changes: dict[tuple[int, int], set[tuple[str, object]]],
    ) -> bool:
        """Has a summary that the result of ``key`` read (its :attr:`FunctionResult.reads`)
        changed since the one it was computed with (``states[version]``)?"""
        span = (version, len(states) - 1)
        changed = changes.get(span)
        if changed is None:
            changed = changes[span] = self._changed(states[version], states[-1])
        return bool(self.results[key].reads & changed)

    def _context_state(self) -> dict[str, dict[object, object]]:
        c = self.context
        return {
            "seeds": {q: tuple(sorted((n, _shape(v)) for n, v in p.items())) for q, p in c.seeds.items()},
            "supplied": {q: tuple(sorted(v)) for q, v in c.supplied.items()},
            "returns": {q: v.bdd for q, v in c.returns.items()},
            "attributes": {a: v.bdd for a, v in c.attributes.items()},
            "class_attributes": {k: v.bdd for k, v in c.class_attributes.items()},
            "closures": {q: tuple(sorted((n, _shape(v)) for n, v in p.items())) for q, p in c.closures.items()},
            "bound_sources": {k[1]: v.ident for k, v in c.bound_sources.items()},
        }

    @staticmethod
    def _changed(
        before: dict[str, dict[object, object]], after: dict[str, dict[object, object]]
    ) -> set[tuple[str, object]]:
        """What changed between two summaries, as a function's result reads it (its
        :attr:`FunctionResult.reads`)."""
        changed: set[tuple[str, object]] = set()
        for kind in before:
            old, new = before[kind], after[kind]
            for key in {*old, *new}:
                if old.get(key) != new.get(key):
                    # a class attribute is read by name (through any base of the class)
                    changed.add(("class_attributes", key[1]) if kind == "class_attributes" else (kind, key))  # type: ignore[index]
        return changed

    def _interpret(self, info: FunctionInfo | None) -> FunctionResult:
        self.bdd.start()
        try:
            return interpret(self.context, info)
        except (BudgetExceeded, RecursionError):
            self.failed.append(info.qualname if info else "<module>")
            return FunctionResult()

    def _summarise(self, results: Iterable[FunctionResult]) -> None:
        """The context's summaries of what crosses function boundaries, from ``results``."""
        results = list(results)
        calls: dict[str, list[CallSite]] = {}
        for result in results:
            for call in result.calls:
                calls.setdefault(call.callee, []).append(call)
        seeds: dict[str, dict[str, Value]] = {}
        supplied: dict[str, set[str]] = {}
        for callee, sites in calls.items():
            info = self.index.functions[callee]
            found, given = self._parameter_values(info, sites)
            supplied[callee] = given
            if found:
                seeds[callee] = found
        returns: dict[str, Value] = {}
        for qualname, result in self.results.items():
            if qualname is None or not result.returns:
                continue
            value = pure_grad_values(result.returns, self.bdd)
            if value is not None:
                returns[qualname] = Value(value.bdd, trail=value.trail)
                continue
            decided = self._returned_decision(result)
            if decided is not None:
                returns[qualname] = decided
                continue
            functions = {v.function for v in result.returns}
            if (
                len(functions) == 1
                and None not in functions
                and any(self.bdd.carries_grad(v.bdd) for f in functions if f is not None for _, v in f.keywords)
            ):
                # `return functools.partial(attn_fn, training=torch.is_grad_enabled())`:
                # what calls of the returned function are given
                returns[qualname] = result.returns[0]
                continue
            record = result.returns[0]
            if (
                len(result.returns) == 1
                and record.fields is not None
                and any(self.bdd.carries_grad(v.bdd) for _, v in record.fields)
            ):
                # `return {"async_op": torch.is_grad_enabled() and self.overlap}` (a record,
                # a dict of keyword arguments): what its fields hold, where it is used
                returns[qualname] = record
                continue
            if (
                len(result.returns) == 1
                and record.items is not None
                and any(self.bdd.is_pure_grad(i.bdd) for i in record.items)
            ):
                # `return torch.is_grad_enabled(), self.keep`: grad mode itself as an item,
                # read where the caller unpacks it (the read there is the origin)
                items = tuple(Value(i.bdd, trail=i.trail) if self.bdd.is_pure_grad(i.bdd) else i for i in record.items)
                returns[qualname] = replace(record, items=items)
        stores: dict[str, list[Value]] = {}
        class_stores: dict[tuple[str, str], list[Value]] = {}
        for qualname, result in self.results.items():
            initialiser = qualname is not None and qualname.endswith("__init__")
            for attr, value, klass in result.attribute_stores:
                if initialiser and value.bdd in (0, 1) and isinstance(value.ident, tuple) and value.ident[0] == "const":
                    continue  # a default set in __init__, replaced before use
                if klass is not None:
                    class_stores.setdefault((klass, attr), []).append(value)
                else:
                    stores.setdefault(attr, []).append(value)
        attributes: dict[str, Value] = {}
        for attr, values in stores.items():
            value = pure_grad_values(values, self.bdd)
            if value is not None:
                attributes[attr] = Value(value.bdd, trail=value.trail)
        class_attributes: dict[tuple[str, str], Value] = {}
        for key, values in class_stores.items():
            value = pure_grad_values(values, self.bdd)
            class_attributes[key] = Value(value.bdd, trail=value.trail) if value is not None else PLAIN
        self.context.seeds, self.context.supplied = seeds, supplied
        self.context.returns, self.context.attributes = returns, attributes
        self.context.class_attributes = class_attributes

    def _returned_decision(self, result: FunctionResult) -> Value | None:
        """What a function returns when that is a condition grad mode takes part in,
        with other conditions (``return module.prefetch and torch.is_grad_enabled()``):
        the returned values joined under their paths, keeping the reads in the function
        as their origins, so that a caller's decision on it is fixed where grad mode is
        read. None: no grad mode in it, or a value rather than a condition (a tensor, a
        tuple)."""
        bdd = self.bdd
        joined = FALSE
        origins: frozenset[ast.AST] = frozenset()
        if len(result.returns) > _MAX_RETURNS_JOINED:
            return None
        try:
            chosen = choice_of(result.returns, result.return_conditions, bdd)
            if chosen is not None:
                return chosen
            for value, condition in zip(result.returns, result.return_conditions):
                if value.items is not None or value.fields is not None or value.function is not None:
                    return None
                joined = bdd.disj(joined, bdd.conj(condition, value.bdd))
                origins |= value.origins
            # the reads are this function's, or another's of the module whose return it
            # combines (`return self.will_sync() and not hooked`)
            if not bdd.depends_on_grad(joined) or not any(
                o in r.read_vars for o in origins for r in (result, *self.results.values())
            ):
                return None
        except BudgetExceeded:
            return None  # too large a condition to follow: the function's own findings stay
        return Value(joined, origins)

    def _parameter_values(self, info: FunctionInfo, sites: list[CallSite]) -> tuple[dict[str, Value], set[str]]:
        """What the callers of ``info`` pass: the parameters every concrete supply of
        which is the same grad-mode value, and the parameters some caller supplies."""
        positional = info.positional
        passed: dict[str, list[tuple[Value, CallSite]]] = {}
        kwarg = info.node.args.kwarg.arg if info.node.args.kwarg else None
        extra: dict[str, list[tuple[Value, CallSite]]] = {}
        for site in sites:
            names = positional[site.skip :]
            for name, value in zip(names, site.args):
                if value is None:
                    break
                passed.setdefault(name, []).append((value, site))
            for name, value in site.keywords:
                if name in positional or any(a.arg == name for a in info.node.args.kwonlyargs):
                    passed.setdefault(name, []).append((value, site))
                elif kwarg is not None:
                    extra.setdefault(name, []).append((value, site))
        seeds: dict[str, Value] = {}
        for name, supplies in passed.items():
            value = self._agreed(name, info, supplies)
            if value is not None:
                seeds[name] = value
        if kwarg is not None and extra:
            fields = []
            for name, supplies in extra.items():
                value = self._agreed(name, info, supplies)
                if value is not None and len(supplies) == len(sites):
                    fields.append((name, value))
            if fields:
                seeds[kwarg] = Value(self.bdd.atom(("param", info.qualname, kwarg)), fields=tuple(fields))
        return seeds, set(passed)

    def _agreed(self, name: str, info: FunctionInfo, supplies: list[tuple[Value, CallSite]]) -> Value | None:
        values = [v for v, _ in supplies]
        grad = pure_grad_values(values, self.bdd)
        if grad is not None:
            site = supplies[0][1]
            step = Step(site.node.lineno, site.node.col_offset, f"passed as `{name}` to `{info.qualname}`")
            return Value(grad.bdd, trail=(*grad.trail, step))
        if all(v.items is not None for v in values) and len({len(v.items or ()) for v in values}) == 1:
            items = []
            agreed = False
            for position in range(len(values[0].items or ())):
                column = [v.items[position] for v in values if v.items is not None]
                item = pure_grad_values(column, self.bdd)
                if item is not None:
                    agreed = True
                    site = supplies[0][1]
                    step = Step(
                        site.node.lineno,
                        site.node.col_offset,
                        f"packed in a tuple passed as `{name}` to `{info.qualname}`",
                    )
                    items.append(Value(item.bdd, trail=(*item.trail, step)))
                else:
                    items.append(Value(self.bdd.atom(("param-item", info.qualname, name, position))))
            if agreed:
                return Value(self.bdd.atom(("param", info.qualname, name)), items=tuple(items))
        if all(v.fields is not None for v in values):  # a dataclass / NamedTuple / dict passed on
            common = [k for k, _ in values[0].fields or () if all(v.field(k) is not None for v in values)]
            fields = []
            for key in common:
                item = pure_grad_values([v.field(key) for v in values], self.bdd)  # type: ignore[misc]
                if item is not None:
                    site = supplies[0][1]
                    step = Step(
                        site.node.lineno, site.node.col_offset, f"field `{key}` passed in `{name}` to `{info.qualname}`"
                    )
                    fields.append((key, Value(item.bdd, trail=(*item.trail, step))))
            if fields:
                return Value(self.bdd.atom(("param", info.qualname, name)), fields=tuple(fields))
        return None

    def _external_fed(self) -> set[tuple[str, str, str]]:
        """The parameters of other modules' functions (and methods of objects of known
        class) that a call of this module passes ``x.training``: what GG004 compares a
        grad-mode argument with, as :attr:`ModuleIndex.fed_training` does in the module."""
        found: set[tuple[str, str, str]] = set()
        index = self.index
        for qualname in index._functions_mentioning(".training"):
            info = index.functions.get(qualname) if qualname else None
            if info is None:
                continue
            aliases = index.aliases_of(info)
            for call in index.calls_of(qualname):
                if not mentions_training(call) or index.resolve(call.func, info.owner, aliases) is not None:
                    continue
                ref = reference(call.func, info, aliases, self.context.hints)
                callee = self.project.callee(ref) if ref is not None else None
                target = callee.module.index.functions.get(callee.qualname) if callee is not None else None
                if callee is None or target is None:
                    continue
                for name in fed_training_parameters(call, target, callee.skip):
                    found.add((callee.module.name, callee.qualname, name))
        return found

    # -- decisions made in the functions called ---------------------------------------------
    def _add_call_decisions(self) -> None:
        """A call passing grad mode to a parameter that decides something in the callee
        (or further down, in any module) is a decision of the caller: where grad mode
        enters the call. Parameters every caller of the module passes grad mode to are
        grad mode in the callee already (the finding is there)."""
        bdd = self.bdd
        for function, result in self.results.items():
            for site in (*result.calls, *result.external_calls):
                if site.node in result.hook_factories:
                    continue  # what the call makes runs in the backward
                slots: list[tuple[int | str, Value | None]] = [*enumerate(site.args), *site.keywords]
                seeded = self.context.seeds.get(site.callee, {}) if site.external is None else {}
                callee: Callee | None = None
                for slot, value in slots:
                    if value is None:
                        continue
                    parts: list[tuple[int | str | None, Value]] = (
                        [(None, value)] if value.items is None and value.fields is None else []
                    )
                    parts += list(enumerate(value.items or ())) + list(value.fields or ())
                    for item, part in parts:
                        if part.items is not None or part.fields is not None or not bdd.depends_on_grad(part.bdd):
                            continue
                        if callee is None:
                            module = self.project.load(site.external[0]) if site.external else self.module
                            if module is None:
                                break
                            callee = Callee(module, site.external[1] if site.external else site.callee, site.skip)
                        parameter = self.project.parameter(callee, slot)
                        if parameter is None or _seeded(seeded.get(parameter), item, bdd):
                            continue
                        if site.external is None and (site.callee, parameter) in self.index.fed_training:
                            continue  # a selector by train/eval mode fed grad mode: GG004's finding
                        message = f"grad mode passed as {part_of(f'`{parameter}`', item)} to `{callee.qualname}`"
                        enter = self.module.places(site.node.lineno, site.node.col_offset, message)
                        effects = self.project.effects(callee, slot, item)
                        self._decided_through(result, function, site.node, part, enter, effects, (slot, item))
            for owner_module, klass, attr, value, statement in result.foreign_stores:
                module = self.project.load(owner_module)
                if module is None:
                    continue
                message = f"grad mode stored as `.{attr}` of a `{klass}` (of `{owner_module}`)"
                enter = self.module.places(statement.lineno, statement.col_offset, message)
                effects = self.project.attribute_effects(module, klass, attr)
                self._decided_through(result, function, statement, value, enter, effects, (attr,))

    def _decided_through(
        self,
        result: FunctionResult,
        function: str | None,
        node: ast.AST,
        part: Value,
        enter: Place,
        effects: tuple[Effect, ...],
        slot: tuple[object, ...],
    ) -> None:
        """The decisions of this function that ``effects`` (made further down, maybe in
        another module, by what ``part`` is handed to at ``node``) are."""
        bdd = self.bdd
        asks_training = bdd.asks_training(part.bdd)
        for effect in effects:
            if asks_training and effect.kind in ARM_KINDS:
                continue  # `update=self.training and grad`: a training approximation's arm
            decided = Decision(
                effect.kind,
                effect.name,
                bdd.negate(part.bdd) if effect.polarity < 0 else part.bdd,
                part.origins,
                node,
                function or "<module>",
                ("via", id(node), *slot, effect.kind, effect.name, effect.steps[-1]),
                (enter, *effect.steps),
            )
            result.decisions.append(decided)

    # -- decisions ------------------------------------------------------------------------
    def owner_of(self, origin: ast.AST, function: str | None) -> FunctionResult | None:
        """The result of the function where the grad-mode read ``origin`` is: the
        deciding function's own, or another's of the module whose value reached it (a
        helper returning ``cfg.overlap and torch.is_grad_enabled()``, a closure's capture)."""
        own = self.results.get(function)
        if own is not None and origin in own.origins and origin in own.read_vars:
            return own
        if self._owners is None:  # the results are final once decisions are asked for
            self._owners = {o: r for r in self.results.values() for o in r.origins if o in r.read_vars}
        return self._owners.get(origin)

    @property
    def decisions(self) -> list[Decision]:
        return [d for r in self.results.values() for d in r.decisions]

    def entries(self, decision: Decision) -> list[Entry]:
        """The reads through which grad mode gates ``decision``, with the proof of the fix.

        A read is an entry when, taken as a variable of its own, it gates the decision
        the way the bug does: fixed to its grad-on value the decision is at least as
        often on as fixed to its grad-off value, and sometimes more (for decisions where
        any dependence counts: differently). A read that gates the other way (the
        opposite polarity, like ``is_recomputation = checkpoint and grad and ...``) is
        correct and no entry. The fix of the entries is proven when, applied together,
        it leaves the decision unchanged with grad mode on and no longer gated by it.
        """
        function = None if decision.function == "<module>" else decision.function
        if function not in self.results:
            return []
        bdd = self.bdd
        # each read is a variable of its own: set to its grad-on value (1) or off (0),
        # with the other reads at grad-on, a restriction of the decision shows what it does
        owners = {o: self.owner_of(o, function) for o in decision.origins}
        reads = sorted(
            ((o, r.read_vars[o]) for o, r in owners.items() if r is not None),
            key=lambda r: _position(r[0]),
        )
        present = bdd.support(decision.bdd)
        reads = [(o, v) for o, v in reads if v in present]
        all_on = {v: True for _, v in reads}
        on = bdd.real(bdd.restrict_all(decision.bdd, all_on))
        gating: list[tuple[ast.AST, int, int]] = []
        for origin, var in reads:
            off = bdd.real(bdd.restrict_all(decision.bdd, {**all_on, var: False}))
            if on == off:
                continue
            if decision.depends_any_way and opens_without_grad(decision, on, off):
                continue
            if decision.depends_any_way or bdd.conj(off, bdd.negate(on)) == 0:
                gating.append((origin, var, 1))
        if not gating:
            return []
        fixed = bdd.real(bdd.restrict_all(decision.bdd, {v: True for _, v, _ in gating}))
        proven = (
            not decision.via
            and bdd.grad_on(fixed) == bdd.grad_on(decision.bdd)
            and (not bdd.depends_on_grad(fixed) if decision.depends_any_way else not bdd.forced_off_by_no_grad(fixed))
        )
        entries = []
        for origin, _target, _value in gating:
            result = owners[origin]
            assert result is not None
            statement, _polarity, trail = result.origins[origin]
            coupled = tuple(
                call
                for call, values in result.grad_taking_calls
                if call.lineno != statement.lineno
                and any(origin in v.origins for v in values)
                and any(bdd.is_pure_grad(v.bdd) and origin not in v.origins for v in values)
            )
            entries.append(Entry(decision, origin, statement, proven, coupled, trail))
        return entries


def opens_without_grad(decision: Decision, on: int, off: int) -> bool:
    """Is ``decision`` (a choice), with grad mode on (``on``) always the one value and
    without it (``off``) another only where an option asks (``fp32 if inference and
    self.fp16 else dtype``)? Then grad off turns a special path on: the opposite
    polarity. Not where the statement names the module's train or eval mode
    (``self.fp32_eval and not grad``): grad mode stands in for it there."""
    return on in (0, 1) and off not in (0, 1) and not names_a_mode(decision.node)


def _seeded(value: Value | None, item: int | str | None, bdd: Manager) -> bool:
    """Is the parameter (its item, its field) grad mode in the callee already, every
    caller of the module agreeing (the finding is then in the callee)?"""
    if value is None:
        return False
    if item is None:
        return True
    if isinstance(item, str):
        found = value.field(item)
        return found is not None and bdd.is_pure_grad(found.bdd)
    items = value.items or ()
    return item < len(items) and bdd.is_pure_grad(items[item].bdd)


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _shape(value: Value) -> object:
    return (
        value.bdd,
        tuple(_shape(i) for i in value.items) if value.items else None,
        tuple((k, _shape(v)) for k, v in value.fields) if value.fields else None,
    )


def parents_of(statement: ast.AST, node: ast.AST) -> dict[ast.AST, ast.AST]:
    """The parent of each ancestor of ``node`` inside ``statement`` (and of ``node``),
    found by descending along the child whose span holds ``node``: the cost is the
    path's, not the statement's (a 200,000-element list beside the read costs nothing)."""
    parents: dict[ast.AST, ast.AST] = {}
    where = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
    end = (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)
    current = statement
    while current is not node:
        for child in ast.iter_child_nodes(current):
            if child is node or (
                hasattr(child, "lineno")
                and (child.lineno, child.col_offset) <= where  # type: ignore[attr-defined]
                and end <= (child.end_lineno or 0, child.end_col_offset or 0)  # type: ignore[attr-defined]
            ):
                parents[child] = current
                current = child
                break
        else:
            break
    return parents


def widen_to_pure_grad(origin: ast.AST, statement: ast.stmt, polarity: int = 1) -> tuple[ast.AST, int]:
    """The largest expression around the read ``origin`` whose value is grad mode (or
    its negation) alone, and that expression's value with grad mode on (0 or 1).
    ``not g``, ``g == True``, ``bool(g)`` widen; ``g and x`` does not."""
    parents = parents_of(statement, origin)
    node: ast.AST = origin
    value = polarity
    while True:
        parent = parents.get(node)
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            value = 1 - value
        elif (
            isinstance(parent, ast.Compare)
            and len(parent.ops) == 1
            and parent.left is node
            and isinstance(parent.comparators[0], ast.Constant)
            and isinstance(parent.comparators[0].value, bool)
            and isinstance(parent.ops[0], (ast.Eq, ast.Is, ast.NotEq, ast.IsNot))
        ):
            positive = isinstance(parent.ops[0], (ast.Eq, ast.Is)) == parent.comparators[0].value
            value = value if positive else 1 - value
        elif (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id == "bool"
            and len(parent.args) == 1
            and not parent.keywords
        ):
            pass
        else:
            return node, value
        node = parent


__all__ = ["Entry", "ModuleAnalysis", "parents_of", "replace", "widen_to_pure_grad"]
