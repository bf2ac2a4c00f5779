"""What each arm of a decision does in the forward, so that the arms can be compared.

A decision whose test depends on grad mode is a forward decision when its arms do
different things in the forward (issue 27: effects, not names). Each arm is summarised
as a set of *effects*: the statements it runs that the forward can observe, as their
source text (``logits = logits.float()``, ``out = fused_swiglu(x)``,
``with torch.cuda.stream(s)``). Left out are:

- autograd's bookkeeping: ``ctx`` and saved-for-backward stores, hooks,
  ``requires_grad``, ``detach``, ``zero_grad``, logging, warnings, profiling ranges;
- flags: a name set to a constant, another name or a condition is judged where it is
  used (its value carries the decision there), and a counter bumped by a constant;
- what runs nowhere: ``pass``, ``del``, imports, nested definitions.

An arm that raises is a guard, not a path: its decision is not compared.

Which arm the forward loses under ``torch.no_grad()`` is the interpreter's question (the
arm's condition, judged *forced off by no grad*). This module says whether that loss is
explained by autograd (:func:`explained`): the arm lost is autograd's own wrapper of the
computation (``Fn.apply``, ``checkpoint``), or the arm that replaces it is a path with no
backward (named for inference, decoding, a fast path).

Stdlib only; nothing here knows of rules or output.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable, Iterable, Sequence

from ..records import record

#: calls that serve autograd, logging or profiling, not the forward's values
_BOOKKEEPING_CALL = re.compile(
    r"(?i)^(save_for_backward|mark_dirty|mark_non_differentiable|set_materialize_grads|requires_grad_?"
    r"|retain_grad|detach_?|zero_grad|backward|register_\w*hook\w*|register_\w*hook|warn\w*|debug|info|warning"
    r"|error|critical|exception|log\w*|print|nvtx\w*|range_push|range_pop|record_function|mark_step"
    r"|assert\w*|check\w*|validate\w*|_?save\w*|stash\w*|push|track\w*|\w*aux_loss\w*|clone|contiguous"
    r"|\w*dealloc\w*|free\w*|release\w*)$"
)
#: names of what a store keeps for the backward, or of its own bookkeeping
_BOOKKEEPING_NAME = re.compile(
    r"(?i)(^|_)(ctx|saved?|for_backward|backward|bwd|wgrad|dgrad|grads?|requires_grad|retain|stash|aux_loss"
    r"|hooks?|cache)(_|$)"
)
#: receivers whose methods are autograd's or the run's bookkeeping (`ctx.x`, `logger.info`)
_BOOKKEEPING_RECEIVER = re.compile(r"(?i)^(ctx|logger|log|logging|warnings|_?log|tracker|profiler|nvtx|wandb)$")
#: a call that is autograd's wrapper of a computation
_AUTOGRAD_WRAPPER = re.compile(r"(?i)^apply$|checkpoint|recompute|autograd|differentiable|with_grad")
#: a function or value named for a path that has no backward: taking it without grad
#: is correct (the opposite polarity)
NO_BACKWARD_PATH = re.compile(
    r"(?i)infer|(^|_)inf(_|$)|decod|eval|fast|no_?grad|no_?backward|graph|generat|predict|serv|cached|fwd_only"
    r"|forward_only|without_grad"
)
#: a value the backward uses or makes (`grad_weight`, `post_bwd_fn.apply`, `ctx`)
_BACKWARD_VALUE = re.compile(
    r"(?i)(^|_)(ctx|grads?|bwd|backward|for_backward|apply|saved|wgrad|dgrad|offload\w*)(_|$)"
    r"|[a-z0-9]_t(_|$)|transpose_fused|fp8_transpose|columnwise"  # FP8 transposes for the backward GEMMs
)
_GRAD_MODE_NAME = re.compile(r"(?i)grad_?(enabled|mode|on)|enable_grad|no_grad")
#: context managers that set grad mode (what runs inside is compared, not the mode)
_GRAD_MODE_CONTEXT = re.compile(r"(?i)(^|\.)(no_grad|enable_grad|set_grad_enabled|inference_mode)\(")
#: calls that allocate a buffer whose contents are written later
_ALLOCATION = re.compile(r"(?i)^(empty|empty_like|new_empty|empty_strided|get_tensor|get_buffer|allocate\w*)$")
#: methods that keep a value for later (a list of activations for the backward)
_RETAINING_METHODS = frozenset({"append", "extend", "insert", "appendleft", "put", "put_nowait"})
#: context managers that only mark or profile (a `with` of these is no effect)
_MARKER_CONTEXT = re.compile(r"(?i)nvtx|record_function|profil|range|timer|named_scope|suppress")


@record
class Effect:
    """One thing an arm does in the forward: its source text, and the names it calls
    and reads (what :func:`explained` asks of it)."""

    text: str
    calls: tuple[str, ...]
    names: frozenset[str] = frozenset()
    #: the local names it assigns (an assignment nothing live reads is no effect)
    assigns: frozenset[str] = frozenset()


def _calls(node: ast.AST) -> tuple[str, ...]:
    names: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name:
                names.append(name)
    return tuple(names)


def _last(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _receiver(func: ast.expr) -> str:
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else ""


def bookkeeping_call(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if _BOOKKEEPING_CALL.match(name):
        return True
    if isinstance(func, ast.Attribute):
        receiver = _receiver(func)
        if _BOOKKEEPING_RECEIVER.match(receiver):
            return True
        # `saved.append(t)`, `self._handles_for_backward.append(h)`
        owner = func.value
        owner_name = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
        if owner_name and _BOOKKEEPING_NAME.search(owner_name):
            return True
    return False


def _target_name(target: ast.expr) -> str:
    while isinstance(target, (ast.Subscript, ast.Starred)):
        target = target.value
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""


def bookkeeping_target(target: ast.expr) -> bool:
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(bookkeeping_target(t) for t in target.elts)
    if _receiver(target) == "ctx" and isinstance(target, (ast.Attribute, ast.Subscript)):
        return True
    name = _target_name(target)
    return bool(name) and bool(_BOOKKEEPING_NAME.search(name))


def flag_like(value: ast.expr) -> bool:
    """A value a flag holds (a constant, a condition): what it decides is judged where
    it is used, as the flag's value carries the decision there."""
    if isinstance(value, (ast.Constant, ast.Compare, ast.BoolOp)):
        return True
    return isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)


class _Normal(ast.NodeTransformer):
    """In-place and out-of-place forms of one computation are one effect (``x += y`` is
    ``x = x + y``, ``x.add_(y)`` is ``x.add(y)``): autograd forbids some in-place forms."""

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        value = ast.BinOp(left=_load(node.target), op=node.op, right=node.value)
        return ast.Assign(targets=[node.target], value=self.visit(value), lineno=0)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr.endswith("_") and not node.attr.endswith("__") and len(node.attr) > 1:
            return ast.Attribute(value=node.value, attr=node.attr[:-1], ctx=node.ctx)
        return node


def _load(target: ast.expr) -> ast.expr:
    copied = copy.deepcopy(target)
    for sub in ast.walk(copied):
        if hasattr(sub, "ctx"):
            sub.ctx = ast.Load()
    return copied


def _names(node: ast.AST) -> frozenset[str]:
    return frozenset(
        sub.attr if isinstance(sub, ast.Attribute) else sub.id
        for sub in ast.walk(node)
        if isinstance(sub, (ast.Attribute, ast.Name))
    )


def _assigned(node: ast.AST) -> frozenset[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    out: set[str] = set()
    for target in targets:
        elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        if not all(isinstance(e, (ast.Name, ast.Starred)) for e in elements):
            return frozenset()  # a field or item stored: it escapes
        out.update(e.id for e in elements if isinstance(e, ast.Name))
        out.update(e.value.id for e in elements if isinstance(e, ast.Starred) and isinstance(e.value, ast.Name))
    return frozenset(out)


def _effect(node: ast.AST) -> Effect:
    normal = _Normal().visit(copy.deepcopy(node))
    if isinstance(normal, ast.Assign) and isinstance(normal.value, ast.Call) and _ALLOCATION.match(
        _last(normal.value.func)
    ):
        # where a buffer comes from (a pool, a new one) is not what the forward computes
        normal = ast.Assign(targets=normal.targets, value=ast.Name(id="<buffer>"), lineno=0)
    text = ast.unparse(normal)
    return Effect(text, _calls(node), _names(node), _assigned(node))


def _value_effects(value: ast.expr) -> list[Effect]:
    if isinstance(value, ast.Call) and bookkeeping_call(value):
        return []
    return [_effect(value)]


def _state_call(call: ast.Call) -> bool:
    """A call made for what it does to state, with no data handed to it
    (``self._record_post_forward()``), or one that keeps a value for later
    (``self.inputs.append(x)``: retention for the backward): the forward's values do
    not flow through it (communication is judged by what the callee reaches, elsewhere)."""
    if not call.args and not call.keywords:
        return True
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    # `self.tokens_per_expert.add_(n)`: a statistic accumulated on the object
    in_place_on_state = func.attr.endswith("_") and not func.attr.endswith("__") and isinstance(func.value, ast.Attribute)
    return func.attr in _RETAINING_METHODS or in_place_on_state


def _statement_effects(s: ast.stmt, out: list[Effect]) -> bool:
    """Add what ``s`` does to ``out``; True when it raises (the arm is a guard)."""
    if isinstance(s, ast.Expr):
        if not isinstance(s.value, ast.Constant) and not (isinstance(s.value, ast.Call) and _state_call(s.value)):
            out.extend(_value_effects(s.value))
    elif isinstance(s, (ast.Assign, ast.AnnAssign)):
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        value = s.value
        if value is None or flag_like(value) or all(bookkeeping_target(t) for t in targets):
            return False
        if isinstance(value, ast.Call) and bookkeeping_call(value):
            return False
        out.append(_effect(s))
    elif isinstance(s, ast.AugAssign):
        # a counter bumped, a statistic accumulated on the object (`self.tokens += n`)
        if not isinstance(s.value, ast.Constant) and not bookkeeping_target(s.target) and _assigned(s):
            out.append(_effect(s))
    elif isinstance(s, ast.Return):
        if s.value is not None and not flag_like(s.value):
            out.extend(Effect("return " + e.text, e.calls, e.names) for e in _value_effects(s.value))
    elif isinstance(s, ast.Raise):
        return True
    elif isinstance(s, ast.If):
        raised = _block_effects(s.body, out)
        raised_else = _block_effects(s.orelse, out)
        return raised and raised_else and bool(s.orelse)
    elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
        _block_effects(s.body, out)
        _block_effects(s.orelse, out)
    elif isinstance(s, (ast.With, ast.AsyncWith)):
        for item in s.items:
            expression = item.context_expr
            if not _MARKER_CONTEXT.search(ast.unparse(expression)) and not _GRAD_MODE_CONTEXT.search(
                ast.unparse(expression)
            ):
                out.append(Effect("with " + ast.unparse(expression), _calls(expression), _names(expression)))
        return _block_effects(s.body, out)
    elif isinstance(s, (ast.Try, ast.TryStar)):
        raised = _block_effects(s.body, out)
        for handler in s.handlers:
            _block_effects(handler.body, out)
        _block_effects(s.orelse, out)
        _block_effects(s.finalbody, out)
        return raised
    elif isinstance(s, ast.Match):
        for case in s.cases:
            _block_effects(case.body, out)
    return False


def _block_effects(body: Sequence[ast.stmt], out: list[Effect]) -> bool:
    for s in body:
        if _statement_effects(s, out):
            return True
    return False


@record
class Arm:
    """What an arm does: its effects, and whether it raises (a guard, not a path)."""

    effects: frozenset[Effect]
    raises: bool


def statements_arm(
    body: Iterable[ast.stmt], live: frozenset[str] | None = None, judged_elsewhere: Callable[[Effect], bool] | None = None
) -> Arm:
    """What ``body`` does; with ``live`` (the function's :func:`live_names`), an
    assignment of locals none of which is live is left out, and so are the effects
    ``judged_elsewhere`` claims (communication, compared by what it reaches)."""
    out: list[Effect] = []
    raises = _block_effects(list(body), out)
    if live is not None:
        out = [e for e in out if not e.assigns or e.assigns & live]
    if judged_elsewhere is not None:
        out = [e for e in out if not judged_elsewhere(e)]
    return Arm(frozenset(out), raises)


def expression_arm(value: ast.expr, judged_elsewhere: Callable[[Effect], bool] | None = None) -> Arm:
    """An arm of a conditional expression: the value it gives (a constant, such as a
    ``True``/``False`` flag or ``None``, gives nothing the other arm loses)."""
    if isinstance(value, ast.Constant):
        return Arm(frozenset(), False)
    if isinstance(value, ast.Call) and bookkeeping_call(value):
        return Arm(frozenset(), False)
    effect = _effect(value)
    if judged_elsewhere is not None and judged_elsewhere(effect):
        return Arm(frozenset(), False)
    return Arm(frozenset({effect}), False)


def live_names(function: ast.AST) -> frozenset[str]:
    """The local names of ``function`` whose values reach what the forward does: a
    return, a call that is not bookkeeping, a condition, a store that escapes (a field or
    an item), or another live name. ``P = probs.mean(0); self._aux_loss = f(P)``: ``P``
    reaches only a bookkeeping store and is not live."""
    flows: dict[str, set[str]] = {}
    roots: set[str] = set()

    def loads(node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}

    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            value = node.value
            if value is None:
                continue
            names = _assigned(node)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            used = loads(value)
            if isinstance(node, ast.AugAssign) and names:
                used |= names
            if names:
                for name in names:
                    flows.setdefault(name, set()).update(used)
            elif not all(bookkeeping_target(t) for t in targets) and not (
                isinstance(value, ast.Call) and bookkeeping_call(value)
            ):
                roots.update(used)
                for target in targets:  # `out[i] = x`: the item's index and receiver
                    roots.update(loads(target))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            if not bookkeeping_call(node.value):
                roots.update(loads(node.value))
        elif isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None:
            roots.update(loads(node.value))
        elif isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            roots.update(loads(node.test))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            roots.update(loads(node.iter))
        elif isinstance(node, ast.withitem):
            roots.update(loads(node.context_expr))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not function:
            roots.update(loads(node))  # what a closure reads
    live = set(roots)
    todo = list(roots)
    while todo:
        for used in flows.get(todo.pop(), ()):
            if used not in live:
                live.add(used)
                todo.append(used)
    return frozenset(live)


def explained(lost: frozenset[Effect], replacement: frozenset[Effect]) -> bool:
    """Is losing ``lost`` (what an arm does that the other does not) for ``replacement``
    under ``torch.no_grad()`` autograd's business: ``lost`` is autograd's wrapper of the
    computation (``Fn.apply``, ``checkpoint``), or ``replacement`` is a path with no
    backward (named for inference, decoding or a fast path)?"""
    for effect in lost:
        if any(_AUTOGRAD_WRAPPER.search(name) for name in effect.calls):
            return True
        if any(_BACKWARD_VALUE.search(name) and not _GRAD_MODE_NAME.search(name) for name in effect.names):
            return True
    return any(NO_BACKWARD_PATH.search(effect.text) for effect in replacement)


def summary(effects: frozenset[Effect]) -> str:
    """The first of ``effects`` in source order of their text, for a message."""
    text = min((e.text for e in effects), key=len)
    first = text.splitlines()[0]
    return first if len(first) <= 60 else first[:57] + "..."
