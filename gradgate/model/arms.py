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
from .index import dotted, last_name, unwrapped_operation

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
    r"|hook\w*|cache)(_|$)"
)
#: receivers whose methods are autograd's or the run's bookkeeping (`ctx.x`, `logger.info`)
_BOOKKEEPING_RECEIVER = re.compile(r"(?i)^(ctx|logger|log|logging|warnings|_?log|tracker|profiler|nvtx|wandb)$")
#: a call that is autograd's wrapper of a computation
AUTOGRAD_WRAPPER = re.compile(r"(?i)^apply$|(^|_)(checkpoint|ckpt|recompute|autograd|differentiable|with_grad)")
#: a name saying what it calls is not wrapped (`_forward_affine_no_autograd`)
_NOT_WRAPPED = re.compile(r"(?i)(no|non|without)_?(autograd|differentiable|grad)")
#: a function or value named for a path that has no backward: taking it without grad
#: is correct (the opposite polarity)
NO_BACKWARD_PATH = re.compile(
    r"(?i)infer|(^|[\W_])inf([\W_]|$)|decod|eval|fast|no_?grad|no_?backward|graph|generat|predict|serv|cache"
    r"|fwd_only|forward_only|without_grad"
)
#: a value the backward uses or makes (`grad_weight`, `post_bwd_fn.apply`, `ctx`; not a
#: context of something else, FSDP's `comm_ctx`)
_BACKWARD_VALUE = re.compile(
    r"(?i)^ctx$|(^|_)(grads?|bwd|backward|for_backward|saved|wgrad|dgrad|offload\w*|detach\w*)(_|$)"
    r"|(^|_)(checkpoint|recompute)"
    r"|[a-z0-9]_t(_|$)|transpose_fused|fp8_transpose|cast_transpose|columnwise"  # FP8 transposes for the backward GEMMs
)
_GRAD_MODE_NAME = re.compile(r"(?i)grad_?(enabled|mode|on)|enable_grad|no_grad")
#: a test naming what only the backward needs (`if ctx.needs_input_grad[0]:`, `if aux_loss_coeff > 0:`)
_BACKWARD_TEST = re.compile(r"(?i)(^|_)(aux|bwd|backward|for_backward|wgrad|dgrad)(_|$)|requires_grad|needs_input_grad")
#: whether a loss is computed (`if use_indexer_loss:`, `loss_coeff > 0`; not a constant
#: saying a kernel is there, `FLASH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE`)
_LOSS_TEST = re.compile(r"(^|_)loss(_|$)")
_AUTOGRAD_MACHINERY = re.compile(r"(?i)(^|_)(checkpoint|recompute|backward|bwd|autograd|offload\w*)")
#: a name an arm assigns that is an auxiliary loss (`l_aux`, `z_loss`, `balance_loss`):
#: computed for the backward alone
_AUXILIARY_LOSS = re.compile(
    r"(?i)(^|_)(l_)?aux(_|$)|(^|_)(aux|z|lb|balance|load_balancing|router)_loss(es)?(_|$)|AuxLoss|aux_loss"
)
#: a name an arm assigns that is a transposed copy (`data_transpose`, `weight_t`): for the
#: backward's GEMMs
_TRANSPOSED = re.compile(r"(?i)(^|_)transposed?(_|$)|[a-z0-9]_t(_|$)")
#: context managers that set grad mode (what runs inside is compared, not the mode)
_GRAD_MODE_CONTEXT = re.compile(r"(?i)(^|\.)(no_grad|enable_grad|set_grad_enabled|inference_mode)\(")
#: calls that allocate a buffer whose contents are written later
_ALLOCATION = re.compile(r"(?i)^(empty|empty_like|new_empty|empty_strided|get_tensor|get_buffer|allocate\w*)$")
#: what a buffer is taken from (`MemoryBuffer().get(...)`, `self.pool.acquire(...)`)
_POOL = re.compile(r"(?i)buffer|pool|alloc|workspace")
#: methods that keep a value for later (a list of activations for the backward)
_RETAINING_METHODS = frozenset({"append", "extend", "insert", "appendleft", "put", "put_nowait"})
#: calls that order CUDA streams and events: what the forward's kernels run after
_STREAM_ORDER = re.compile(r"^(wait|wait_stream|wait_event|record_event|record_stream|synchronize)$")
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
    #: a return of a tuple holding ``None`` (``return out, None, None``): a path that
    #: gives no values in place of those the other keeps (statistics for the backward)
    returns_none_items: bool = False
    #: the local names it reads, where what it does reaches the forward only through
    #: them (a call for its result, a store into an item): None where it reaches it
    #: anyway (a return, a ``with``)
    through: frozenset[str] | None = None
    #: a statement left out as the backward's bookkeeping (``self.aux_loss = f(p)``,
    #: ``ctx.save_for_backward(x)``), kept only for what it reads (:attr:`Arm.kept`)
    for_backward: bool = False
    #: the local names it reads (not an attribute so spelled: ``out.router_probs`` reads
    #: ``out``); None: not known, :attr:`names` stands for them
    reads: frozenset[str] | None = None
    #: the autograd Functions whose ``apply`` it names (``SelectiveScanFn``), as spelled
    applied: frozenset[str] = frozenset()

    def reads_any(self, names: frozenset[str]) -> bool:
        """Does it read one of the locals ``names``?"""
        return bool((self.reads if self.reads is not None else self.names) & names)


def _kept(node: ast.AST) -> Effect:
    return Effect("", (), _names(node), for_backward=True)


def _calls(node: ast.AST) -> tuple[str, ...]:
    return tuple(name for sub in ast.walk(node) if isinstance(sub, ast.Call) and (name := last_name(sub.func)))


def _receiver(func: ast.expr) -> str:
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else ""


def bookkeeping_call(call: ast.Call) -> bool:
    func = call.func
    if _BOOKKEEPING_CALL.match(last_name(func)):
        return True
    if isinstance(func, ast.Attribute):
        receiver = _receiver(func)
        if _BOOKKEEPING_RECEIVER.match(receiver):
            return True
        # `saved.append(t)`, `self._handles_for_backward.append(h)`
        owner_name = last_name(func.value)
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


def _decorator_name(decorator: ast.expr) -> str:
    """The last name of a decorator (``contextlib.contextmanager`` -> ``contextmanager``)."""
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def loss_target(target: ast.expr) -> bool:
    """Does an assignment's ``target`` hold an auxiliary loss or a loss's weight
    (:func:`names_a_loss`)?"""
    name = _target_name(target)
    return bool(name) and names_a_loss(name)


def flag_like(value: ast.expr) -> bool:
    """A value a flag holds (a constant, a named constant such as ``Status.RECOMPUTE``, a
    condition): what it decides is judged where it is used, as the flag's value carries
    the decision there."""
    if isinstance(value, (ast.Constant, ast.Compare, ast.BoolOp)):
        return True
    if isinstance(value, ast.Attribute) and value.attr.isupper():
        return True
    if isinstance(value, (ast.List, ast.Tuple, ast.Set, ast.Dict)):  # `[]`, `(None, 0)`
        return all(isinstance(e, ast.Constant) for e in ast.walk(value) if isinstance(e, ast.expr) and e is not value)
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
    """The names ``node`` spells: names, attributes, and strings that are identifiers
    (``(te_linear._Linear, "apply")``)."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            out.add(sub.attr)
        elif isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isidentifier():
            out.add(sub.value)
        elif isinstance(sub, ast.keyword) and sub.arg:  # `set_usage(columnwise=True)`
            out.add(sub.arg)
    return frozenset(out)


def _assigned(node: ast.AST) -> frozenset[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    out: set[str] = set()
    for target in targets:
        elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        if not isinstance(target, (ast.Tuple, ast.List)) and not isinstance(target, ast.Name):
            return frozenset()  # a field or item stored: it escapes
        # (`out, self.handle = dispatch(x)`: the locals unpacked are what it assigns)
        out.update(e.id for e in elements if isinstance(e, ast.Name))
        out.update(e.value.id for e in elements if isinstance(e, ast.Starred) and isinstance(e.value, ast.Name))
    return frozenset(out)


def _loads(node: ast.AST) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def _effect(node: ast.AST) -> Effect:
    in_place = any(
        isinstance(n, ast.AugAssign) or (isinstance(n, ast.Attribute) and n.attr.endswith("_")) for n in ast.walk(node)
    )
    normal = _Normal().visit(copy.deepcopy(node)) if in_place else node  # (a copy only where something changes)
    if isinstance(normal, ast.Assign) and isinstance(normal.value, ast.Call) and _allocates(normal.value):
        # where a buffer comes from (a pool, a new one) is not what the forward computes
        normal = ast.Assign(targets=normal.targets, value=ast.Name(id="<buffer>"), lineno=0)
    text = ast.unparse(normal)
    assigns = _assigned(node)
    # the object's own state (`self`) is not a value the forward hands on, but the module
    # handed to a function is what it changes (`scale_lora_layers(self, scale)`); an
    # ordering of streams (`self.side.wait_stream(current)`) is what the forward's kernels
    # run under
    hands_self = isinstance(node, ast.Call) and any(isinstance(a, ast.Name) and a.id == "self" for a in node.args)
    reaches = assigns or isinstance(node, (ast.Return, ast.withitem)) or _orders_streams(node) or hands_self
    through = None if reaches else _loads(node) - {"self", "cls"}
    applied = frozenset(
        spelled
        for sub in ast.walk(node)
        if isinstance(sub, ast.Attribute) and sub.attr == "apply" and (spelled := dotted(sub.value))
    )
    return Effect(text, _calls(node), _names(node), assigns, through=through, reads=_loads(node), applied=applied)


#: calls that wait: on a stream, an event, a communication's handle (`work.wait()`)
_WAITING = re.compile(r"^(wait\w*|_?wait_\w+|synchronize)$")


def serialises(effect: Effect) -> bool:
    """Does ``effect`` wait where the other arm does not (``work.wait()``,
    ``torch.cuda.current_stream().synchronize()``): it serialises what the other overlaps?"""
    return any(_WAITING.match(name) for name in effect.calls)


def waited_inside(waits: frozenset[Effect], waiting: frozenset[Effect], wrapping: frozenset[Effect]) -> bool:
    """Are ``waits`` (of the arm ``waiting``) the wait an autograd wrapper of the same
    operation does out of sight in the arm ``wrapping``
    (``all_to_all_single_autograd(x)`` for ``wait_tensor(all_to_all_single(x))``)?"""
    wrapped = {
        unwrapped_operation(name)
        for effect in wrapping
        for name in effect.calls
        if name != "apply" and AUTOGRAD_WRAPPER.search(name) and not _NOT_WRAPPED.search(name)
    }
    issued = {unwrapped_operation(name) for effect in waiting - waits for name in effect.calls}
    return bool(wrapped & issued)


def _orders_streams(node: ast.AST) -> bool:
    """Is ``node`` a call that orders CUDA streams or events (``wait_stream``,
    ``record_event``, ``synchronize``), or waits for a communication (``work.wait()``)?"""
    return isinstance(node, ast.Call) and bool(_STREAM_ORDER.match(last_name(node.func)))


def _allocates(call: ast.Call) -> bool:
    """Does ``call`` allocate a buffer (``torch.empty(...)``, ``x.new_empty(...)``,
    ``MemoryBuffer().get(name, shape)``: a pool's ``get``)?"""
    name = last_name(call.func)
    if _ALLOCATION.match(name):
        return True
    return (
        name in ("get", "acquire")
        and isinstance(call.func, ast.Attribute)
        and bool(_POOL.search(ast.unparse(call.func.value)))
    )


def _value_effects(value: ast.expr) -> list[Effect]:
    if isinstance(value, ast.Call) and bookkeeping_call(value):
        return [_kept(value)]
    return [_effect(value)]


def _kept_on_object(target: ast.expr) -> bool:
    """Is ``target`` an item of a container the object holds (``self.buffers[k][i]``)?"""
    if not isinstance(target, ast.Subscript):
        return False
    root: ast.expr = target
    while isinstance(root, (ast.Subscript, ast.Attribute)):
        root = root.value
    return isinstance(root, ast.Name) and root.id in ("self", "cls")


def _data(value: ast.expr) -> bool:
    """Is ``value`` data already computed (names, fields, items, containers of them):
    nothing is computed by storing it?"""
    return all(not isinstance(n, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.Await)) for n in ast.walk(value))


def _state_call(call: ast.Call) -> bool:
    """A call made for what it does to state, with no data handed to it
    (``self._record_post_forward()``), or one that keeps a value for later
    (``self.inputs.append(x)``: retention for the backward): the forward's values do
    not flow through it (communication is judged by what the callee reaches, elsewhere)."""
    if _WAITING.match(last_name(call.func)) or _orders_streams(call):
        return False  # `work.wait()`, `stream.synchronize()`: what the forward runs after
    if not call.args and not call.keywords:
        return True
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    # `self.tokens_per_expert.add_(n)`: a statistic accumulated on the object
    in_place_on_state = (
        func.attr.endswith("_") and not func.attr.endswith("__") and isinstance(func.value, ast.Attribute)
    )
    return func.attr in _RETAINING_METHODS or in_place_on_state


def _statement_effects(s: ast.stmt, out: list[Effect]) -> bool:
    """Add what ``s`` does to ``out``; True when it raises (the arm is a guard)."""
    if isinstance(s, ast.Expr):
        if not isinstance(s.value, ast.Constant) and not (isinstance(s.value, ast.Call) and _state_call(s.value)):
            out.extend(_value_effects(s.value))
    elif isinstance(s, (ast.Assign, ast.AnnAssign)):
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        value = s.value
        if value is None or flag_like(value):
            return False
        if all(bookkeeping_target(t) for t in targets):
            out.append(_kept(value))
            return False
        if all(_kept_on_object(t) for t in targets) and _data(value):
            return False  # `self.buffers["losses"][i] = self.loss`: a value kept, as by `append`
        if isinstance(value, ast.Call) and bookkeeping_call(value):
            out.append(_kept(value))
            return False
        out.append(_effect(s))
    elif isinstance(s, ast.AugAssign):
        # a counter bumped, a statistic accumulated on the object (`self.tokens += n`)
        if not isinstance(s.value, ast.Constant) and not bookkeeping_target(s.target) and _assigned(s):
            out.append(_effect(s))
    elif isinstance(s, ast.Return):
        if s.value is not None and not flag_like(s.value):
            nones = isinstance(s.value, ast.Tuple) and any(
                isinstance(e, ast.Constant) and e.value is None for e in s.value.elts
            )
            out.extend(
                e if e.for_backward else Effect("return " + e.text, e.calls, e.names, returns_none_items=nones)
                for e in _value_effects(s.value)
            )
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
    return any(_statement_effects(s, out) for s in body)


@record
class Arm:
    """What an arm does: its effects, whether it raises (a guard, not a path), and
    whether it saves for the backward (``ctx.x = ...``, ``ctx.save_for_backward``): what
    else such an arm does prepares what it saves."""

    effects: frozenset[Effect]
    raises: bool
    saves: bool = False
    #: the names its bookkeeping for the backward reads (what feeds only that is autograd's)
    kept: frozenset[str] = frozenset()
    #: the effects left to be judged elsewhere (its communication, compared by what it
    #: reaches), kept to tell what a wait of the other arm waits for
    aside: frozenset[Effect] = frozenset()


def statements_arm(
    body: Iterable[ast.stmt],
    live: frozenset[str] | None = None,
    judged_elsewhere: Callable[[Effect], bool] | None = None,
    inputs: frozenset[str] = frozenset(),
) -> Arm:
    """What ``body`` does; with ``live`` (the function's :func:`live_names`), an
    assignment of locals none of which is live is left out, and so are the effects
    ``judged_elsewhere`` claims (communication, compared by what it reaches) and the
    return of one of ``inputs`` (parameters the function never rebinds: ``if grad:
    return x`` computes nothing, the other arm's work is what differs)."""
    body = list(body)
    out: list[Effect] = []
    raises = _block_effects(body, out)
    kept = frozenset().union(*(e.names for e in out if e.for_backward))
    out = [e for e in out if not e.for_backward]
    claimed = [e for e in out if judged_elsewhere is not None and judged_elsewhere(e)]
    # a wait on the handle of communication the arm issues is part of it (its form)
    handles = frozenset().union(*(e.assigns for e in claimed))
    out = [e for e in out if not (serialises(e) and e.reads and e.reads <= handles)]
    if live is not None:
        out = [e for e in out if _reaches(e, live)]
    aside = frozenset(e for e in out if e in claimed)
    out = [e for e in out if e not in aside]
    if inputs:
        out = [e for e in out if not (e.text.startswith("return ") and e.text[7:] in inputs)]
    return Arm(frozenset(out), raises, any(_saves(s) for s in body), kept, aside)


def unchanged_parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The parameters ``function`` never rebinds (what it hands back unchanged, if it
    returns one of them)."""
    arguments = function.args
    names = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    rebound = {
        n.id for n in _own_nodes(function) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))
    }
    return frozenset(names - rebound)


def _saves(statement: ast.stmt) -> bool:
    for node in ast.walk(statement):
        if isinstance(node, ast.Call) and last_name(node.func) == "save_for_backward":
            return True
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
            if _receiver(node) == "ctx":
                return True
    return False


def _reaches(effect: Effect, live: frozenset[str]) -> bool:
    """Does ``effect`` reach the forward: an assignment of a live local, a call or store
    handed a live value, or a return or ``with``?"""
    if effect.assigns:
        return bool(effect.assigns & live)
    return effect.through is None or bool(effect.through & live)


def expression_arm(value: ast.expr, judged_elsewhere: Callable[[Effect], bool] | None = None) -> Arm:
    """An arm of a conditional expression: the value it gives (a constant, such as a
    ``True``/``False`` flag or ``None``, gives nothing the other arm loses)."""
    if isinstance(value, ast.Constant):
        return Arm(frozenset(), False)
    if isinstance(value, ast.Call) and bookkeeping_call(value):
        return Arm(frozenset(), False)
    effect = _effect(value)
    if judged_elsewhere is not None and judged_elsewhere(effect):
        return Arm(frozenset(), False, aside=frozenset({effect}))
    return Arm(frozenset({effect}), False)


def live_names(function: ast.AST) -> frozenset[str]:
    """The local names of ``function`` whose values reach what it returns (a function
    that returns nothing: what it does at all, its calls and stores too), through
    assignments, and through calls that write into a live value (``torch.mm(a, b,
    out=buf)``, ``buf.add_(x)``, ``buf[i] = x``). ``P = probs.mean(0); self._aux_loss =
    f(P)``: ``P`` is not live in a function returning something else."""
    flows: dict[str, set[str]] = {}
    roots: set[str] = set()
    #: name sets of which one live name makes all live (a call's operands, an item store)
    together: list[set[str]] = []
    nodes = list(_own_nodes(function))  # walked once, asked four times
    # a context manager's generator: what it yields is the `with`'s, what it does around
    # the `yield` is its effect (TE's `prepare_forward` reducing the amaxes on exit)
    manager = any(_decorator_name(d) == "contextmanager" for d in getattr(function, "decorator_list", ()))
    returns_value = not manager and any(
        isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) and n.value is not None for n in nodes
    )

    def loads(node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}

    # what a test asking autograd's question reads (`any(t.requires_grad for t in ts)`)
    asked = {
        id(sub)
        for node in nodes
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and any(_BACKWARD_TEST.search(n) for n in _names(node.test))
        for sub in ast.walk(node.test)
    }
    for node in nodes:
        if id(node) in asked:
            continue
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
                if not isinstance(node, ast.AugAssign) and (base := _view_of(value)) is not None:
                    together.append({*names, base})  # `part = buf[a:b]`: a write into `part` is one into `buf`
            elif isinstance(node, ast.AugAssign):
                continue  # a statistic accumulated on an object (`self.tokens += n`)
            elif not all(bookkeeping_target(t) for t in targets) and not (
                isinstance(value, ast.Call) and bookkeeping_call(value)
            ):
                stored = set().union(*(loads(t) for t in targets))
                if returns_value:
                    together.append(stored | used)  # `out[i] = x`: live where `out` is
                    # (where `out` is a local: the object's state is not what it returns)
                else:
                    roots.update(stored | used)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            if not bookkeeping_call(node.value):
                if returns_value:
                    together.append(loads(node.value))
                else:
                    roots.update(loads(node.value))
        elif isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None:
            roots.update(loads(node.value))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not function:
            roots.update(loads(node))  # what a closure reads
        elif not returns_value:
            if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)) and id(node.test) not in asked:
                roots.update(loads(node.test))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                roots.update(loads(node.iter))
            elif isinstance(node, ast.withitem):
                roots.update(loads(node.context_expr))
    local = set(flows) | {
        n.id
        for node in nodes
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.withitem))
        for target in [node.target if not isinstance(node, ast.withitem) else node.optional_vars]
        if target is not None
        for n in ast.walk(target)
        if isinstance(n, ast.Name)
    }
    if returns_value:  # what it returns flows through its locals; a parameter is the caller's
        # (unless it is what the function returns: `kernel(x, out=out); return out`)
        together = [group & (local | roots) for group in together]
    live: set[str] = set()
    todo = list(roots)
    while todo:
        while todo:
            name = todo.pop()
            if name in live:
                continue
            live.add(name)
            todo.extend(flows.get(name, ()))
        for group in together:
            if group & live and not group <= live:
                todo.extend(group - live)
    return frozenset(live & local) if returns_value else frozenset(live)


#: methods giving a view of their receiver (a write into the view is one into the receiver)
_VIEW_METHODS = frozenset(
    [
        "view",
        "view_as",
        "narrow",
        "select",
        "as_strided",
        "unflatten",
        "transpose",
        "permute",
        "t",
        "expand",
        "squeeze",
        "unsqueeze",
        "diagonal",
    ]
)


def _view_of(value: ast.expr) -> str | None:
    """The local name ``value`` is a view of (``buf[a:b]``, ``buf.view(n, -1)``), or None
    (``buf`` itself is no view: ``x = buf`` rebinds, ``x -= buf`` computes)."""
    if not isinstance(value, (ast.Subscript, ast.Call)):
        return None
    while True:
        if isinstance(value, ast.Subscript):
            value = value.value
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _VIEW_METHODS:
            value = value.func.value
        else:
            break
    return value.id if isinstance(value, ast.Name) else None


def _own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The nodes of ``function``'s body, not those of functions nested in it (a nested
    function itself is yielded)."""
    todo = list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def test_names_of(decision: ast.AST, grad_reads: Iterable[ast.AST] = ()) -> frozenset[str]:
    """The names the test of an ``if`` or a conditional expression spells, but for those
    of ``grad_reads`` (the reads of grad mode in it: ``needs_backward`` is the carrier,
    not what is decided)."""
    test = decision.test if isinstance(decision, (ast.If, ast.IfExp)) else None
    if test is None:
        return frozenset()
    carriers = {id(sub) for read in grad_reads for sub in ast.walk(read)}
    return frozenset(
        sub.attr if isinstance(sub, ast.Attribute) else sub.id
        for sub in ast.walk(test)
        if isinstance(sub, (ast.Attribute, ast.Name)) and id(sub) not in carriers
    )


#: a name holding a loss's weight (`loss_coeff`, `indexer_loss_weight`)
_LOSS_WEIGHT = re.compile(r"(?i)(^|_)loss_(coeff|coef|coefficient|weight|factor)s?$")


def names_a_loss(name: str) -> bool:
    """Does ``name`` hold an auxiliary loss (``aux_loss``, ``z_loss``, ``aux_router_logits``)
    or a loss's weight (``loss_coeff``): what only the backward needs? (Not the loss
    itself: ``loss`` is what the forward returns.)"""
    return bool(_LOSS_WEIGHT.search(name) or _AUXILIARY_LOSS.search(name))


def autograd_machinery(name: str) -> bool:
    """Is a function so named autograd's own machinery (checkpointing, recompute, a
    backward), where what grad mode decides is autograd's business?"""
    return bool(_AUTOGRAD_MACHINERY.search(name))


#: what a function of the module spelled so calls (its last names, through the
#: functions of the module it calls; of an autograd Function: its forward), where it is
#: seen; None where it is not
ForwardCalls = Callable[[str], frozenset[str] | None]


def explained(
    lost: frozenset[Effect],
    replacement: frozenset[Effect],
    test: frozenset[str] = frozenset(),
    kept: frozenset[str] = frozenset(),
    forward_calls: ForwardCalls | None = None,
) -> bool:
    """Is losing ``lost`` (what an arm does that the other does not) for ``replacement``
    under ``torch.no_grad()`` autograd's business? So it is where the decision's
    ``test`` names a value only the backward needs (``if loss_coeff > 0:``), where
    ``replacement`` is a path with no backward (named for inference, decoding, a cache
    or a fast path), or where every effect lost is autograd's (:func:`_autograd_effect`)
    or only feeds those that are, or the arm's bookkeeping for the backward (``kept``:
    what it reads): one effect of another kind lost (the log-probs computed by another
    kernel beside its ``inplace_backward=``) is the forward's. An autograd Function whose
    forward we see (``forward_calls``) call none of what ``replacement`` calls computes
    something else (``SelectiveScanFn.apply`` for ``selective_scan_ref``): no wrapper."""
    if any(_BACKWARD_TEST.search(name) or _LOSS_TEST.search(name) for name in test):
        return True
    if lost and {undetached(e.text) for e in lost} == {undetached(e.text) for e in replacement}:
        return True  # `x.detach() if not grad else x`: the same value, kept out of the graph or not
    if lost and len(lost) == len(replacement) and all(any(_kept_by_noop(e, r) for r in replacement) for e in lost):
        return True  # `w = _noop_cat(parts, buffer)` for `w = buffer`: the value, linked to the parts or not
    if any(NO_BACKWARD_PATH.search(effect.text) or effect.returns_none_items for effect in replacement):
        return True
    # an autograd wrapper stands for the same computation without one, not for another
    # wrapped computation (`P2PAttnFn.apply` for `AllGatherAttnFn.apply`)
    wrapped_instead = any(_calls_wrapper(effect) for effect in replacement)
    if forward_calls is not None and any(_wraps_another(e, replacement, forward_calls) for e in lost):
        return False
    ours = {effect for effect in lost if _autograd_effect(effect, wrapped_instead)}
    if not ours:
        return False
    # what a wrapper gives is the forward's value, the same as without it: what uses
    # it is the forward's own (`return x`); what else is ours only feeds ours
    wrapped = frozenset().union(*(e.assigns for e in ours if not wrapped_instead and _wrapper(e)))
    rest = set(lost - ours)
    while rest:
        taken = set()
        for effect in rest:
            readers = {other for other in lost if other is not effect and other.reads_any(effect.assigns)}
            if effect.reads_any(wrapped) or ((readers or effect.assigns & kept) and readers <= ours):
                taken.add(effect)
        if not taken:
            return False
        ours |= taken
        wrapped = wrapped.union(*(e.assigns for e in taken if e.reads_any(wrapped)))
        rest -= taken
    return True


#: calls that take a value out of autograd's graph or back in, the value unchanged
_GRAPH_ONLY = re.compile(r"\.(detach_?|requires_grad_)\([^()]*\)")


#: a function named for leaving its value as it is (`_noop_cat`, `identity`)
_NOOP = re.compile(r"(?i)(^|_)(noop|no_op|identity)(_|$)")


def _kept_by_noop(lost: Effect, replacement: Effect) -> bool:
    """Does ``lost`` assign what ``replacement`` assigns through a function named for
    leaving its value as it is, the value ``replacement`` assigns among its arguments?"""
    if not lost.assigns or lost.assigns != replacement.assigns or not any(_NOOP.search(c) for c in lost.calls):
        return False
    try:
        ours, theirs = (ast.parse(e.text).body[0] for e in (lost, replacement))
    except SyntaxError:
        return False
    if not (isinstance(ours, ast.Assign) and isinstance(theirs, ast.Assign) and isinstance(ours.value, ast.Call)):
        return False
    call = ours.value
    kept = ast.unparse(theirs.value)
    return bool(_NOOP.search(last_name(call.func))) and any(ast.unparse(a) == kept for a in call.args)


def undetached(text: str) -> str:
    """``text`` without the calls that only change what autograd records of a value."""
    return _GRAPH_ONLY.sub("", text)


def _wrapper(effect: Effect) -> bool:
    return any(AUTOGRAD_WRAPPER.search(name) for name in (*effect.calls, *effect.names))


def _calls_wrapper(effect: Effect) -> bool:
    """Does ``effect`` call an autograd wrapper (``Fn.apply``, ``checkpoint``; not
    ``_forward_no_autograd``)?"""
    return any(AUTOGRAD_WRAPPER.search(name) and not _NOT_WRAPPED.search(name) for name in effect.calls)


def _wraps_another(effect: Effect, replacement: frozenset[Effect], forward_calls: ForwardCalls) -> bool:
    """Does ``effect`` apply an autograd Function whose forward we see call none of the
    functions ``replacement`` calls or names (nor what those call), nor is the Function
    itself named there (``_Linear.forward``): another computation, not a wrapper of it?"""
    named: frozenset[str] = frozenset().union(*(frozenset(e.calls) | e.names for e in replacement))
    reached = named.union(*(found for name in named if (found := forward_calls(name)) is not None))
    for function in effect.applied:
        calls = forward_calls(function)
        if calls is not None and named and function.rsplit(".", 1)[-1] not in named and not calls & reached:
            return True
    return False


def _autograd_effect(effect: Effect, wrapped_instead: bool) -> bool:
    """Is ``effect`` autograd's: its wrapper called or chosen (``fn =
    all_to_all_single_autograd if grad else ...``; ``wrapped_instead``: the other arm
    wraps something too), a transposed copy, an auxiliary loss, or work on what the
    backward uses (gradients, saved tensors)?"""
    if not wrapped_instead and _wrapper(effect):
        return True
    if any(_TRANSPOSED.search(name) for name in effect.assigns):
        return True
    if any(_AUXILIARY_LOSS.search(name) for name in (*effect.names, *effect.assigns)):
        return True
    return any(_BACKWARD_VALUE.search(name) and not _GRAD_MODE_NAME.search(name) for name in effect.names)


def summary(effects: frozenset[Effect]) -> str:
    """The first of ``effects`` in source order of their text, for a message."""
    text = min((e.text for e in effects), key=len)
    first = text.splitlines()[0]
    return first if len(first) <= 60 else first[:57] + "..."
