"""Abstract interpretation of one function: every value as a boolean function of grad
mode, every forward decision recorded with its value.

The interpreter walks the function's statements in order, with an environment of
values (reaching definitions: a later ``g = cfg.grad_enabled`` replaces what ``g``
held) and a *path condition*, the boolean function under which the current statement
runs. Branches are joined with if-then-else, so ``if A or not grad: flag = False``
leaves ``flag`` as ``flag and not A and grad``; an early ``return`` narrows the path
condition of what follows (``raise`` does not: a guard is not another path). Loops run
their body once, as if it might not run. Nothing here knows of rules or output.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..config import INVERTED_FLAG
from ..records import field, record, replace
from .arms import (
    AUTOGRAD_WRAPPER,
    NO_BACKWARD_PATH,
    Arm,
    Effect,
    autograd_machinery,
    bookkeeping_call,
    bookkeeping_target,
    explained,
    expression_arm,
    live_names,
    loss_target,
    names_a_loss,
    serialises,
    statements_arm,
    test_names_of,
    unchanged_parameters,
    undetached,
    waited_inside,
)
from .arms import summary as arms_summary
from .bdd import FALSE, GRAD, TRUE, Manager
from .decisions import kind_of
from .index import (
    BACKWARD_HOOK_REGISTRARS,
    FunctionInfo,
    ModuleIndex,
    dotted,
    last_name,
    names_a_mode,
    op_name,
    own_statements,
    qualify,
    records_autograd,
    unwrapped_operation,
    wrapped_function,
)
from .types import TypeHints, self_attribute
from .values import GLOBAL, SUPER, Environment, FunctionRef, Place, Step, Value

if TYPE_CHECKING:
    from .project import Callee, ModuleFile, Project
    from .summary import FunctionSummary

_TRAINING_NAME = re.compile(r"^(is_)?train(ing)?(_mode)?$")
_MODE_KEYWORDS = re.compile(
    r"^((is_)?train(ing)?(_mode)?|dropout(_p|_prob|_rate)?|p_?dropout|attention_dropout|hidden_dropout|p)$"
)
_SELECTION_KEYWORDS = re.compile(r"(^|_)(group|pg|process_group)$")
#: callees that take a training flag to say it, not to compute with it (logging, containers)
_NOT_KERNELS = re.compile(
    r"^(print|debug|info|warning|warn|error|critical|exception|log|format|append|extend|insert|add|update|write"
    r"|partial)$"  # `functools.partial(fn, flag=...)` binds `fn`'s parameter: the call of it decides
)
_MODE_SWITCHES = {"train": True, "eval": False}
#: callees that run a function again for the backward (checkpointing): their options
#: are autograd's, not a kernel's (`linear_gather_forward_reducescatter_backward` computes)
_RECOMPUTING = re.compile(r"(?i)(^|_)(checkpoint|recompute|remat)")
#: a flag named so chooses the kernel computing the forward (names are the fallback
#: where the flag's use is not visible, as for communication flags)
_NUMERICS_FLAG = re.compile(r"(?i)(^|_)(use_)?(fused?|fusion|grouped_mm|flash|fp8)(_|$)")
#: ... or the precision it computes in (a dtype chosen by a ternary counts any way)
_PRECISION_FLAG = re.compile(r"(?i)(^|_)(fp32|fp16|bf16|full_prec(ision)?|precision|dtype|upcast)(_|$)")
#: a flag named so chooses training-only behaviour (token dropping, capacity, noise)
_TRAINING_FLAG = re.compile(r"(?i)(^|_)(drop(_and_pad|_tokens?|_tks)?|capacity(_factor)?|noise|noisy|jitter)(_|$)")
#: methods after which a container holds an element (`params.append(p)`)
_GROWING = frozenset({"append", "appendleft", "add", "insert"})
#: methods that add the items of their argument to a container (`keys.extend(...)`)
_EXTENDING = frozenset({"extend", "extendleft", "update"})
#: calls that run a training-only regulariser or random draw (noise, jitter, dropout):
#: run only with grad mode on, grad mode stands in for training mode
_TRAINING_ONLY = re.compile(
    r"(?i)noise|noisy|jitter|dropout|drop_path|stochastic|^rand(n|int|_like|n_like)?$|uniform|bernoulli"
)
#: names of a training-only regulariser's probability or draw (`drop_prob`, `layerdrop`)
_REGULARISER_NAME = re.compile(
    r"(?i)(^|_)(drop_?(prob|probability|path|rate|p)|layer_?drop|dropout\w*|jitter\w*|noise\w*|stochastic\w*)(_|$)"
)
#: names of a value's train and eval counterparts (`capacity_factor_train`, `eval_capacity_factor`)
_TRAIN_WORD = re.compile(r"(?i)(^|_)train(ing)?(_|$)")
_EVAL_WORD = re.compile(r"(?i)(^|_)(eval|test)(_|$)")
#: a keyword naming a resource of communication: its stream, group, buckets, codecs
_COMM_RESOURCE = re.compile(r"(?i)(^|_)(stream|group|pg|process_group|bucket_size|codecs?)$")
#: keyword arguments that serve autograd or bookkeeping, not the forward's numerics
_BOOKKEEPING_KEYWORDS = re.compile(
    r"grad|backward|bwd|save|keep|retain|cache|ctx|columnwise|rowwise|usage|reentrant|rng|track|graph|hook"
    r"|record|checkpoint|recompute|remat|offload|free|release|debug|verbose|log|name|inference|differentiable"
    r"|deterministic"  # flash-attn's `deterministic=`: the backward's algorithm
    r"|inplace|in_place|^out$|donate|overwrite"  # may a kernel overwrite its input: autograd forbids it with grad
    r"|init"  # how a model is initialised (`fp8_model_init(preserve_high_precision_init_val=)`)
)
#: context managers that issue the work inside on a stream (their argument)
_STREAM_CONTEXTS = frozenset({"stream", "use_stream", "StreamContext"})
#: autograd's own mode switches: their argument is grad mode by design
_AUTOGRAD_SWITCHES = frozenset(
    {
        "torch.set_grad_enabled",
        "torch.autograd.set_grad_enabled",
        "torch.autograd.grad_mode.set_grad_enabled",
        "torch.inference_mode",
        "torch.autograd.inference_mode",
        "torch._C._set_grad_enabled",
    }
)
#: torch kernels whose positional parameter at this index is the training mode
_MODE_POSITIONS = {
    **{
        f"{m}.{f}": 2
        for m in ("torch.nn.functional", "torch")
        for f in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
    },
    "torch.nn.functional.batch_norm": 5,
    "torch.nn.functional.instance_norm": 5,
    "torch.nn.functional.rrelu": 3,
}
#: context managers (and decorators) of torch that set grad mode, and the mode they set
_GRAD_MODE_SETTERS = {"no_grad": FALSE, "enable_grad": TRUE, "inference_mode": FALSE, "set_grad_enabled": TRUE}
#: joined values remembered branch by branch, at most (see :attr:`Value.alternatives`)
_MAX_ALTERNATIVES = 4
#: sequences longer than this are not followed item by item
_MAX_ITEMS = 256
#: a comprehension over a sequence literal of at most this many items is run item by item
_SPREAD_ITEMS = 16
_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@record
class Decision:
    """A forward decision and its value as a boolean function.

    ``kind``: ``flag`` (a forward communication flag set), ``comm`` (whether a forward
    communication call runs: its path condition, joined over its call sites),
    ``comm-option`` (a keyword of such a call), ``selection`` (which process group a
    call uses: any dependence on grad mode counts), ``mode`` (a kernel's training or
    dropout mode), ``mode-switch`` (``.train()`` / ``.eval()`` runs),
    ``function-forward-read`` (grad mode read inside ``autograd.Function.forward``),
    ``mode-selector`` (a selector that a call elsewhere feeds ``module.training`` is
    fed grad mode here, or called with a constant only under a grad-mode condition).
    """

    kind: str
    name: str
    bdd: int
    origins: frozenset[ast.AST]
    node: ast.AST
    function: str
    key: tuple[object, ...]
    #: a decision made in a function this one calls: the steps from the call to it
    via: tuple[Place, ...] = ()

    @property
    def depends_any_way(self) -> bool:
        """Does any dependence on grad mode count (not only ``forced off``)?"""
        return kind_of(self.kind).any_way


@record
class CallSite:
    """A call of a function of the module, with what it passes."""

    callee: str
    skip: int
    args: tuple[Value | None, ...]  # None: a starred argument (nothing known after it)
    keywords: tuple[tuple[str, Value], ...]
    node: ast.Call
    function: str
    #: a ``**mapping`` argument: which keywords reach the callee is not known
    double_star: bool = False
    #: a callee of another module (or reached through the project): (module, qualname)
    external: tuple[str, str] | None = None


@record
class CommEffect:
    """A forward communication effect, as the arms of a decision are compared by it:
    ``if grad: all_reduce(x, async_op=True) else: all_reduce(x)`` has two, one of
    which grad mode gates; ``Fn.apply(x)`` (whose forward all-reduces) and
    ``all_reduce(x)`` have one."""

    ops: frozenset[str]
    #: constant options and the group of a collective called here; None for a function
    #: whose body calls the collectives (its options are its own): it stands for any
    options: frozenset[tuple[str, object]] | None
    in_loop: bool
    stream: object


@record(frozen=False)
class FunctionResult:
    decisions: list[Decision] = field(default_factory=list)
    returns: list[Value] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)
    #: calls the project resolved (another module, a method of a value's class), made
    #: with arguments that carry grad mode or a parameter
    external_calls: list[CallSite] = field(default_factory=list)
    #: (attribute name, value stored, the class when the receiver is ``self``)
    attribute_stores: list[tuple[str, Value, str | None]] = field(default_factory=list)
    #: the state a function sets for other functions to read: ``self.attr = value`` in a
    #: method (``attr``), ``global X; X = value`` (``global:X``): (slot, value, the statement)
    state_stores: list[tuple[str, Value, ast.stmt]] = field(default_factory=list)
    #: stores in an attribute of an object whose class another module defines, of a
    #: value grad mode takes part in (``self._comm_ctx.grad_hint = torch.is_grad_enabled()``):
    #: (that module, the class, the attribute, the value, the statement)
    foreign_stores: list[tuple[str, str, str, Value, ast.stmt]] = field(default_factory=list)
    #: calls that receive grad mode itself as an argument: (call, argument values)
    grad_taking_calls: list[tuple[ast.Call, tuple[Value, ...]]] = field(default_factory=list)
    #: each grad-mode read that became an origin: its statement, its polarity (1 for
    #: grad mode, 0 for its negation) and the steps its value took from the capture
    origins: dict[ast.AST, tuple[ast.stmt, int, tuple[Step, ...]]] = field(default_factory=dict)
    #: the BDD variable of each read (see :meth:`gradgate.model.bdd.Manager.read`)
    read_vars: dict[ast.AST, int] = field(default_factory=dict)
    #: the module summaries the interpretation read (``("returns", qualname)``, ...):
    #: when none of them changes, another round would give the same result
    reads: set[tuple[str, object]] = field(default_factory=set)
    #: calls whose result is registered as a backward hook (``x.register_hook(make(...))``):
    #: what they make runs in the backward
    hook_factories: set[ast.Call] = field(default_factory=set)
    #: the path condition of each ``return`` with a value (what chooses what is returned)
    return_conditions: list[int] = field(default_factory=list)
    #: the functions the function returns (closures), with the ``return``
    returned_functions: list[tuple[Value, ast.stmt]] = field(default_factory=list)
    #: in a summary, where each parameter (or item, field of one) is read: what a finding
    #: reported in the function points at
    param_reads: dict[str, list[ast.AST]] = field(default_factory=dict)
    #: flag names read in the forward (not only for ``ctx`` / ``save_for_backward``)
    forward_reads: set[str] = field(default_factory=set)
    backward_reads: set[str] = field(default_factory=set)
    #: the last line each flag name is read on
    read_after: dict[str, int] = field(default_factory=dict)
    #: origins that are reads of a slot another module fills with a value grad mode
    #: gates (:meth:`Interpreter._gated_slot`): reported, never fixed, here
    carried: dict[ast.AST, str] = field(default_factory=dict)


#: a class attribute some store of which is not grad mode
PLAIN = Value(FALSE, ident="plain")


class Context:
    """What the interpreter asks of the module: shared by every function."""

    def __init__(
        self, index: ModuleIndex, manager: Manager, project: Project | None = None, module: ModuleFile | None = None
    ) -> None:
        self.index = index
        self.bdd = manager
        #: the run's modules, for names of other modules (None: this module alone)
        self.project = project
        #: interpreting for a summary: the parameters, not grad mode, are the subject
        self.summarising = False
        #: (module, function, parameter) of other modules' functions that a call of this
        #: module passes a module's train/eval mode (``x.training``): selectors by mode
        self.external_fed: set[tuple[str, str, str]] = set()
        self.external_fed_names: set[str] = set()
        self.module = module
        self.hints = module.hints if module is not None else TypeHints(index, "")
        config = index.config
        self.sources = config.sources
        #: param values every resolved call site agrees on: qualname -> name -> value
        self.seeds: dict[str, dict[str, Value]] = {}
        #: params with at least one resolved call site (spelling no longer decides)
        self.supplied: dict[str, set[str]] = {}
        #: functions (and properties) returning grad mode: qualname -> value
        self.returns: dict[str, Value] = {}
        #: attribute names carrying grad mode module-wide
        self.attributes: dict[str, Value] = {}
        #: names the module binds to a grad-mode source function (``_grad_mode =
        #: torch.is_grad_enabled``), and class attributes bound so (``_mode =
        #: staticmethod(torch.is_grad_enabled)``): (class or None, name) -> the function
        self.bound_sources: dict[tuple[str | None, str], Value] = {}
        #: what a nested function's free names hold where it is defined, of the names
        #: that carry grad mode: qualname -> name -> value (a closure's captures)
        self.closures: dict[str, dict[str, Value]] = {}
        #: ``self.x`` stores of each class: (class, attr) -> the grad-mode value, or
        #: :data:`PLAIN` where some store is something else
        self.class_attributes: dict[tuple[str, str], Value] = {}

    def class_attribute(self, index: ModuleIndex, klass: str | None, attr: str, depth: int = 0) -> Value | None:
        """What ``self.attr`` holds in a method of ``klass`` (or a base of it in the
        module), when some method of the class stores it; else None."""
        if klass is None or depth > 8:
            return None
        found = self.class_attributes.get((klass, attr))
        if found is not None:
            return found
        info = index.classes.get(klass)
        for base in info.bases if info else ():
            found = self.class_attribute(index, base, attr, depth + 1)
            if found is not None:
                return found
        return None

    def is_flag(self, name: str) -> bool:
        return self.index.config.is_forward_comm_flag(name)


class Interpreter:
    def __init__(self, context: Context, info: FunctionInfo | None) -> None:
        self.c = context
        self.bdd = context.bdd
        self.info = info
        self.index = context.index
        self.qualname = info.qualname if info else "<module>"
        self.owner = _owner_of(info, self.index)
        self.aliases = self.index.aliases_of(info) if info else self.index.aliases
        self._import_targets: frozenset[str] | None = None
        self.result = FunctionResult()
        #: the names the function may read (None: the module's body, whose names other
        #: code reads); a branch's write to any other name is not joined
        self.live = self.index.names_read(info.qualname) if info is not None else None
        self.pc = TRUE
        self.pc_origins: frozenset[ast.AST] = frozenset()
        self.statement: ast.stmt | None = None
        #: grad mode where a context manager or decorator sets it (``torch.no_grad()``):
        #: a constant there, TRUE or FALSE; None where the caller's
        self.grad_fixed: int | None = None
        if info is not None:
            for decorator in info.node.decorator_list:
                mode = self._grad_mode_set_by(decorator)
                if mode is not None:
                    self.grad_fixed = mode
        #: each communication effect met (see :class:`CommEffect`): the join of the path
        #: conditions it happens under, their origins, its first call and its name there
        self._comm: dict[CommEffect, tuple[int, frozenset[ast.AST], ast.expr, str]] = {}
        #: the effects some call of which autograd records (``Fn.apply``,
        #: ``torch.distributed.nn``): a path the backward needs, which a no-grad path
        #: without a backward may stand in for
        self._differentiable: set[CommEffect] = set()
        #: differentiable communication whose forward we see communicate (an autograd
        #: Function's ``forward`` of the module): the forward's, whatever autograd records
        self._seen_in_forward: set[CommEffect] = set()
        #: the values of reads of slots other modules fill (:meth:`_gated_slot`)
        self._gated: set[int] = set()
        #: where the function leaves early by a path named for having no backward, taken
        #: only without grad for some assignment (``if use_local_inference_kernel: return
        #: out``): what grad off forces off there is replaced by it, not lost
        self._inference_exits: list[int] = []
        #: the handlers of the ``try`` statements whose bodies are being interpreted
        self._handlers: list[list[ast.ExceptHandler]] = []
        #: how many loops (and comprehensions) the statement is in
        self.loops = 0
        #: the stream forward work is issued on (``with torch.cuda.stream(s):``), or None
        self.stream: object = None
        #: the statements after the one being run, in its block (an ``if`` whose arm
        #: returns has them as its other arm): the block, and where they start
        self._rest: tuple[list[ast.stmt], int] = ([], 0)
        self._live_names: frozenset[str] | None = None
        self._unchanged: frozenset[str] | None = None
        #: the lambdas made here, with the environment they close over: a call of one
        #: runs its body (``pick = lambda: fast if grad else plain; pick()(x)``)
        self._lambdas: dict[int, tuple[ast.Lambda, Environment]] = {}
        #: subject -> constant -> the diagram of `subject == constant` (:meth:`_equality`)
        self._equalities: dict[object, dict[object, int]] = {}
        self._lambda_depth = 0

    # -- entry ----------------------------------------------------------------------------
    def run(self) -> FunctionResult:
        env = Environment()
        if self.info is None:
            body = self.index.tree.body
        else:
            body = self.info.node.body
            seeds = self.c.seeds.get(self.qualname, {})
            supplied = self.c.supplied.get(self.qualname, set())
            self.result.reads.add(("seeds", self.qualname))
            if any(self.c.sources.is_carrier_name(a.arg) for a in self.info.params):  # who supplies it decides
                self.result.reads.add(("supplied", self.qualname))
            for arg in self.info.params:
                env.set(arg.arg, self._parameter(arg, seeds, supplied))
        self._block(body, env)
        if self.info is None:
            self._note_bound_sources(None, env)
        self._cover_unknown_options()
        #: how many effects each set of operations has (more than one: forms of it)
        forms = Counter(effect.ops for effect in self._comm)
        fast_paths = [
            (n.lineno, n.col_offset, o, effect.ops, self.bdd.asks_recording(b))
            for effect, (b, o, n, _) in self._comm.items()
            if self.bdd.forced_off_by_grad(b)
        ]
        for effect, (bdd, origins, node, name) in self._comm.items():
            if any(
                p[:2] < (node.lineno, node.col_offset)
                and p[2] & origins
                and p[3] != effect.ops
                and (p[4] or effect in self._differentiable)
                for p in fast_paths
            ):
                # the default path after a no-grad fast path of another operation chosen
                # by the same reads, where the choice is about autograd: the default is
                # differentiable (`... return fast_collective(x)` then
                # `dist_nn.all_reduce(x)`), or the fast path also asks whether autograd
                # records (`not (grad and x.requires_grad)`): the opposite polarity,
                # correct. A default autograd does not record either is no reason for grad
                # mode to choose (vLLM's custom all-reduce vs `dist.all_reduce`).
                continue
            if self._replaced_where_an_option_asks(effect, bdd, origins):
                # replaced without grad by other communication only where an option grad
                # mode on does not ask (`if inference and custom_ar: custom(x)` then
                # `all_reduce(x)`): grad off turns the special path on, the opposite polarity
                continue
            if self._replaced_by_inference_exit(bdd):
                # the default path after an early exit named for inference, taken without
                # grad (`if use_local_inference_kernel: return out`): replaced, not lost
                continue
            if self.bdd.forced_off_by_no_grad(bdd) and self.bdd.asks_recording(bdd):
                # run only where autograd records (`if grad and x.requires_grad: return
                # funcol.all_reduce(x)`): the choice is autograd's, the opposite polarity
                continue
            if (
                effect in self._differentiable
                and self.bdd.forced_off_by_no_grad(bdd)
                and forms[effect.ops] == 1
                and not self._comm_in_place(effect, bdd, same=False)
                and (effect not in self._seen_in_forward or self._comm_in_place(effect, bdd, same=True))
            ):
                # communication autograd records, run only with grad on, and no other form
                # of it without grad (`if not grad: return local(x)` then `DTensor.from_local`):
                # grad mode chooses whether autograd records it, the opposite polarity. Where
                # the autograd Function's forward is ours and communicates, only the same
                # collective run without grad in its place says so (`Gather.apply(...)` or
                # `all_gather_tensor(...)`); without it the forward loses it
                continue
            if forms[effect.ops] > 1:
                name = f"{name}` ({effect_form(effect)}"  # another form of it runs without grad
            self._record("comm", name, Value(bdd, origins), node, key=("comm", effect))
        # a flag that only captures grad mode (`prefetch_allowed = torch.is_grad_enabled()`)
        # or a slot another module fills (`overlap = sequence_overlap_active(cfg)`, also
        # where an `if` joins it, `if sp > 1: overlap = grad`) and is read after: its reads
        # decide, not the capture
        captures = {d.name for d in self.result.decisions if d.key[0] == "flag-store" and self.bdd.is_pure_grad(d.bdd)}
        self.result.decisions = [
            d
            for d in self.result.decisions
            if not (
                (
                    (d.key[0] == "flag-store" and (self.bdd.is_pure_grad(d.bdd) or d.bdd in self._gated))
                    or (d.key[0] == "flag-join" and d.name in captures)
                    or (
                        d.key[0] in ("flag-store", "flag-join")
                        and d.origins
                        and d.origins <= self.result.carried.keys()
                    )
                )
                and d.name in self.result.forward_reads
                and self.result.read_after.get(d.name, 0) > getattr(d.node, "lineno", 0)
            )
            # `return {"overlap_all_gather": grad}`: an entry of what is returned, decided
            # where the caller reads it
            and not (d.key[0] == "flag-key" and isinstance(d.node, ast.Return) and self.bdd.is_pure_grad(d.bdd))
        ]
        return self.result

    def _replaced_where_an_option_asks(self, effect: CommEffect, runs: int, origins: frozenset[ast.AST]) -> bool:
        """Does grad off lose ``effect`` (run under ``runs``) only where an option its
        grad-on path does not read asks for another collective, which runs there
        instead? Not where the reads' statements name the module's train or eval mode
        (``ring_in_eval``: grad mode stands in for it)."""
        on, off = self.bdd.grad_on(runs), self.bdd.grad_off(runs)
        lost = self.bdd.conj(on, self.bdd.negate(off))
        if lost == FALSE or self.bdd.support(lost) <= self.bdd.support(on):
            return False
        replaced = FALSE
        for other, (other_runs, _o, _n, _name) in self._comm.items():
            if other != effect and self.bdd.forced_off_by_grad(other_runs):
                replaced = self.bdd.disj(replaced, self.bdd.grad_off(other_runs))
        if self.bdd.conj(lost, self.bdd.negate(replaced)) != FALSE:
            return False
        return not any(names_a_mode(self.result.origins[o][0]) for o in origins if o in self.result.origins)

    def _replaced_by_inference_exit(self, runs: int) -> bool:
        """Is every path ``runs`` loses without grad one that leaves by an inference
        exit (:attr:`_inference_exits`) instead?"""
        if not self._inference_exits:
            return False
        exits = FALSE
        for condition in self._inference_exits:
            exits = self.bdd.disj(exits, condition)
        lost = self.bdd.conj(self.bdd.grad_on(runs), self.bdd.negate(self.bdd.grad_off(runs)))
        return lost != FALSE and self.bdd.conj(lost, self.bdd.negate(self.bdd.grad_off(exits))) == FALSE

    def _comm_in_place(self, effect: CommEffect, condition: int, same: bool) -> bool:
        """Does communication run, only without grad, where ``effect`` (run under
        ``condition``) does not: ``same``, the same collectives without autograd; else
        another collective in its place (an all-reduce autograd records, or a reduce and
        a broadcast)?"""
        family = self.index.config.comm_family
        ours = {family(op) for op in effect.ops}
        return any(
            # the same collectives, in the same form: an asynchronous one is not replaced
            # by one nothing says is asynchronous
            ({family(op) for op in other.ops} <= ours and (not _asynchronous(effect) or _asynchronous(other))) == same
            and self.bdd.forced_off_by_grad(runs)
            and self.bdd.conj(runs, self.bdd.negate(condition)) != FALSE
            for other, (runs, _origins, _node, _name) in self._comm.items()
        )

    def _parameter(self, arg: ast.arg, seeds: dict[str, Value], supplied: set[str]) -> Value:
        name = arg.arg
        if name in seeds:
            return seeds[name]
        sources = self.c.sources
        function = self.info.node.name if self.info is not None else ""
        carried = sources.param_polarity(function, name)
        # configured or learned: whether or not the module calls the function
        named = name in sources.names or f"{function}.{name}" in sources.params
        # a summary of a module that reads no grad mode itself: what the callers pass
        # (they follow it here, :meth:`.project.ModuleFile.reads_grad`)
        by_callers = self.c.summarising and self.c.module is not None and not self.c.module.reads_grad
        if carried is not None and name not in supplied and (named or not self._called()) and not by_callers:
            return self._grad(
                carried,
                arg,
                Step(
                    arg.lineno,
                    arg.col_offset,
                    f"parameter `{name}` taken as grad mode (no caller in the module supplies it)",
                ),
            )
        decorator = self._injecting(name)
        if decorator is not None and name not in supplied:
            said = f"parameter `{name}` filled with grad mode by `@{decorator}` (no caller in the module supplies it)"
            return self._grad(1, arg, Step(arg.lineno, arg.col_offset, said))
        made = self.c.hints.annotated(arg.annotation, self.aliases) if self.c.project is not None else None
        return Value(self.bdd.param(self.qualname, name), ident=("param", self.qualname, name), made_by=made)

    def _injecting(self, parameter: str) -> str | None:
        """The decorator of the function whose wrapper fills ``parameter`` with grad mode
        (:attr:`GradSources.injected`), if one does."""
        injected = self.c.sources.injected
        if not injected or self.info is None:
            return None
        for decorator in self.info.node.decorator_list:
            name = last_name(decorator.func if isinstance(decorator, ast.Call) else decorator)
            if parameter in injected.get(name, ()):
                return name
        return None

    def _called(self) -> bool:
        """Is the function called in the module (a caller not interpreted still supplies
        its parameters: a name other than the configured ones is then no evidence)?"""
        return self.info is not None and self.index.called_in_module(self.info.qualname)

    def _parameter_item(self, value: Value, position: int | str) -> Value:
        """Item ``position`` of a parameter (a tuple passed in; a field for a string):
        an atom of its own, named ``args[2]`` (``cfg.field``), so that a summary can say
        what each item decides."""
        base = _parameter_of(value)
        name = f"{base}[{position}]" if isinstance(position, int) else f"{base}.{position}"
        return Value(self.bdd.param(self.qualname, name), ident=("param", self.qualname, name))

    # -- values -----------------------------------------------------------------------------
    def _opaque(self, key: object, origins: frozenset[ast.AST] = frozenset()) -> Value:
        return Value(self.bdd.atom(key), origins, ident=key)

    def _grad(self, polarity: int, node: ast.AST, step: Step | None = None, trail: tuple[Step, ...] = ()) -> Value:
        bdd = self.bdd.grad if polarity > 0 else self.bdd.negate(self.bdd.grad)
        steps = trail + ((step,) if step else ())
        return Value(bdd, trail=steps)

    def _read(self, value: Value, node: ast.AST) -> Value:
        """A read of a pure grad-mode value becomes an origin: where a fix would act."""
        ident = value.ident
        if self.c.summarising and isinstance(ident, tuple) and len(ident) == 3 and ident[0] == "param":
            # where the parameter is read, and (as an origin) what its reads shape
            self.result.param_reads.setdefault(str(ident[2]), []).append(node)
            value = replace(value, origins=value.origins | {node})
        slot = _gated_ident(ident)
        if slot is not None and isinstance(node, ast.Name):
            return self._gated_slot(node, *slot)  # `flag = cfg.overlap_ag`, `if flag:`
        if self.bdd.is_pure_grad(value.bdd) and value.items is None and value.fields is None:
            polarity = self.bdd.polarity(value.bdd)
            if self.statement is not None:
                self.result.origins[node] = (self.statement, polarity, value.trail)
            var = self.bdd.read(("read", id(node)))
            self.result.read_vars[node] = self.bdd.var(var)
            return replace(value, bdd=var if polarity else self.bdd.negate(var), origins=frozenset({node}))
        return value

    # -- statements ---------------------------------------------------------------------------
    def _block(self, body: list[ast.stmt], env: Environment) -> str | None:
        """Run ``body``; returns how it ended early (``return``, ``raise``, ``jump``) or None."""
        for at, statement in enumerate(body):
            self._rest = (body, at + 1)
            ended = self._statement(statement, env)
            if ended:
                return ended
        return None

    def _statement(self, s: ast.stmt, env: Environment) -> str | None:
        previous, self.statement = self.statement, s
        try:
            return self._dispatch(s, env)
        finally:
            self.statement = previous

    def _dispatch(self, s: ast.stmt, env: Environment) -> str | None:
        if isinstance(s, ast.Assign):
            value = self._control(self.eval(s.value, env))
            for target in s.targets:
                self._bind(target, value, env, s)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self._bind(s.target, self._control(self.eval(s.value, env)), env, s)
        elif isinstance(s, ast.AugAssign):
            old = self.eval(s.target, env)
            new = self._binop(s.op, old, self.eval(s.value, env), s)
            self._bind(s.target, self._control(new), env, s)
        elif isinstance(s, ast.Expr):
            self.eval(s.value, env)
        elif isinstance(s, ast.If):
            return self._if(s, env)
        elif isinstance(s, (ast.While, ast.For, ast.AsyncFor)):
            return self._loop(s, env)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                value = self._control(self.eval(s.value, env))
                self.result.returns.append(value)
                self.result.return_conditions.append(self.pc)
                if value.function is not None:
                    self.result.returned_functions.append((value, s))
                name = self.info.node.name if self.info is not None else ""
                # `def _should_overlap(self): return ...`; one returning grad mode itself
                # (`def ub_overlap_permitted(): return torch.is_grad_enabled()`) is a source,
                # whose callers decide with it
                if name and self.c.is_flag(name.lstrip("_")) and not self.bdd.is_pure_grad(value.bdd):
                    self._record("flag", name, value, s, key=("flag-return", id(s)))
            return "return"
        elif isinstance(s, ast.Raise):
            if s.exc is not None:
                self.eval(s.exc, env)
            return "raise"
        elif isinstance(s, (ast.Break, ast.Continue)):
            return "jump"
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            fixed, stream = self.grad_fixed, self.stream
            for item in s.items:
                self.eval(item.context_expr, env)
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, self._opaque(("with", id(item))), env, s)
                mode = self._grad_mode_set_by(item.context_expr)
                if mode is not None:
                    self.grad_fixed = mode
                chosen = self._stream_entered(item.context_expr, env)
                if chosen is not None:
                    self.stream = chosen
            try:
                return self._block(s.body, env)
            finally:
                self.grad_fixed, self.stream = fixed, stream
        elif isinstance(s, (ast.Try, ast.TryStar)):
            return self._try(s, env)
        elif isinstance(s, ast.Match):
            return self._match(s, env)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # decorators, defaults and annotations run here, in the enclosing scope
            for expression in s.decorator_list:
                self.eval(expression, env)
            positional = [*s.args.posonlyargs, *s.args.args][-len(s.args.defaults) :] if s.args.defaults else []
            defaults = [
                *zip(positional, s.args.defaults),
                *((a, d) for a, d in zip(s.args.kwonlyargs, s.args.kw_defaults) if d is not None),
            ]
            for arg, default in defaults:
                value = self.eval(default, env)
                if self.c.is_flag(arg.arg):  # a flag's default is a flag set
                    self._record("flag", arg.arg, value, s, key=("flag-default", arg.arg, id(default)))
            info = self.index.by_node.get(s)
            if info is not None and self.info is not None:
                captured = {
                    k: v for k, v in env.values.items() if "." not in k and (self._held(v) or _holds_grad_function(v))
                }
                if captured or info.qualname in self.c.closures:
                    self.c.closures[info.qualname] = captured
            env.bind_name(
                s.name,
                Value(TRUE, ident=("function", info.qualname), function=FunctionRef(info.qualname))
                if info
                else self._opaque(("def", id(s))),
            )
        elif isinstance(s, ast.ClassDef):
            for expression in (*s.decorator_list, *s.bases, *(k.value for k in s.keywords)):
                self.eval(expression, env)
            # the class body runs here too: its methods' decorators and defaults with it
            class_env = Environment()
            self._block(s.body, class_env)
            if self.info is None:
                self._note_bound_sources(s.name, class_env)
            env.bind_name(s.name, self._opaque(("class", id(s))))
        elif isinstance(s, ast.Assert):
            self.eval(s.test, env)
        elif isinstance(s, ast.Delete):
            for target in s.targets:
                deleted = dotted(target)
                if deleted is not None:
                    env.remove(deleted)
        return None

    def _numerics_flag(self, name: str, value: Value, s: ast.stmt) -> None:
        """A flag set whose name says it chooses the forward's kernel or precision
        (`use_fused_kernels`, `autocast_dtype`) or training-only behaviour (`drop_and_pad`):
        names are the fallback, as for communication flags."""
        if (
            _BOOKKEEPING_KEYWORDS.search(name)
            or value.function is not None
            or any(v.function is not None and not v.function.external for _, v in value.alternatives or ())
        ):
            return  # a function chosen (`fused = fast if ok else plain`): judged where it is called
        if _PRECISION_FLAG.search(name):
            self._record("kernel-flag", name, value, s, key=("flag-store", name, id(s)))
        elif _NUMERICS_FLAG.search(name):
            self._record("kernel-option", name, value, s, key=("flag-store", name, id(s)))
        elif _TRAINING_FLAG.search(name):
            self._record("mode", name, value, s, key=("flag-store", name, id(s)))

    def _used_by_callee(self, parameter: str, resolved: tuple[str, int] | None, elsewhere: list[Callee]) -> bool:
        """Does the function a call runs (of the module, or of another) read ``parameter``?
        Then its body decides what the argument does (its summary), not the name."""
        if resolved is not None and resolved[0] in self.index.functions:
            return parameter in self.index.names_read(resolved[0])
        return any(
            c.qualname in c.module.index.functions and parameter in c.module.index.names_read(c.qualname)
            for c in elsewhere
        )

    def _mode_in_effect(self, mode: Value) -> Value:
        """The training mode a kernel call puts in effect, as a decision: its mode
        argument where the call runs, "not eval" where it does not (``if not grad:
        return F.batch_norm(..., False, ...)`` puts eval mode in effect only without
        grad: grad mode then stands in for training mode)."""
        if self.pc == TRUE:
            return mode
        return Value(self.bdd.disj(self.bdd.negate(self.pc), mode.bdd), mode.origins | self.pc_origins)

    def _chosen_callee(self, node: ast.Call, callee: Value) -> None:
        """A call whose function grad mode chooses (``fn = fused if grad else reference;
        fn(x)``) is a decision, unless the function taken without grad is one that has
        no backward, named for inference, decoding or a fast path, or the one taken with
        grad is the autograd wrapper of the same computation (the opposite polarity)."""
        branches = callee.alternatives
        if not branches or not self.bdd.depends_on_grad(callee.bdd):
            return
        with_grad = [callee_label(v) for c, v in branches if self.bdd.grad_on(c) != FALSE]
        without = [callee_label(v) for c, v in branches if self.bdd.grad_off(c) != FALSE]
        if not all(with_grad + without) or set(with_grad) == set(without):
            return
        if any(NO_BACKWARD_PATH.search(n) for n in without) or any(AUTOGRAD_WRAPPER.search(n) for n in with_grad):
            return
        name = "/".join(dict.fromkeys(with_grad + without))
        self._record("callee", name, Value(callee.bdd, callee.origins), node, key=("callee", id(node)))

    def _kernel_keyword(self, func: ast.expr, keyword: str) -> bool:
        """Is ``keyword`` an argument by which the called function computes the forward,
        not autograd's bookkeeping (``requires_grad=``, ``columnwise=``, ``use_reentrant=``),
        an auxiliary loss's weight (``loss_coeff=``), a grad-mode pass-through
        (``is_grad_enabled=``) or a record's field?"""
        last = last_name(func)
        if _NOT_KERNELS.match(last) or last in self.index.classes or last[:1].isupper() or last in _STREAM_CONTEXTS:
            return False
        if _RECOMPUTING.search(last):
            return False  # `_checkpoint_without_reentrant_generator(fn, preserve, ...)`: autograd's
        # a function an import names (`torch.topk`, `F.dropout`, `flash_attn_func`), not
        # a method of a receiver nothing says the kind of
        spelled = dotted(func) or ""
        if spelled.split(".", 1)[0] not in self.aliases and not self._imported_qualname(spelled):
            return False
        return (
            not self.c.sources.is_carrier_name(keyword)
            and not _BOOKKEEPING_KEYWORDS.search(keyword)
            and not names_a_loss(keyword)  # `loss_coeff=`: it weighs an auxiliary loss
        )

    def _imported_qualname(self, spelled: str) -> bool:
        """Is ``spelled`` the qualified name of something the module imports, or of a
        member of it (a partial's function, ``accelerate.utils.send_to_device``)?"""
        if self._import_targets is None:
            self._import_targets = frozenset(self.aliases.values())
        head = spelled
        while head:
            if head in self._import_targets:
                return True
            head = head.rpartition(".")[0]
        return False

    def _note_bound_sources(self, klass: str | None, env: Environment) -> None:
        for name, value in env.values.items():
            if _is_grad_function(value) and "." not in name:
                self.c.bound_sources[(klass, name)] = value

    def _bound_source(self, klass: str | None, name: str, depth: int = 0) -> Value | None:
        """The grad-mode source function the module (``klass`` None) or a class of it (or
        a base of that class in the module) binds ``name`` to."""
        self.result.reads.add(("bound_sources", name))
        found = self.c.bound_sources.get((klass, name))
        info = self.index.classes.get(klass) if klass is not None else None
        for base in info.bases if info is not None and found is None and depth < 8 else ():
            found = self._bound_source(base, name, depth + 1)
            if found is not None:
                break
        return found

    def _stream_entered(self, node: ast.expr, env: Environment) -> object:
        """The stream ``with node:`` issues work on (``torch.cuda.stream(s)``), as an
        identity; a stream chosen by grad mode is a decision. None: not a stream."""
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _STREAM_CONTEXTS
            and len(node.args) == 1
        ):
            return None
        value = self.eval(node.args[0], env)
        self._record("selection", "stream", value, node, key=("selection", "stream", id(node)))
        return value.ident if value.ident is not None else ("v", value.bdd)

    def _control(self, value: Value) -> Value:
        """A value assigned under a path condition depends on it too."""
        return value.with_origins(self.pc_origins)

    def _branch(
        self, condition: int, origins: frozenset[ast.AST], body: list[ast.stmt], env: Environment
    ) -> tuple[Environment, str | None, int, frozenset[ast.AST]]:
        saved = self.pc, self.pc_origins
        self.pc = self.bdd.conj(self.pc, condition)
        self.pc_origins = self.pc_origins | origins
        branch_env = env.copy()
        ended = self._block(body, branch_env)
        final = self.pc, self.pc_origins
        self.pc, self.pc_origins = saved
        return branch_env, ended, final[0], final[1]

    def _if(self, s: ast.If, env: Environment) -> str | None:
        rest = self._rest
        test = self.eval(s.test, env)
        c = test.bdd
        asked = self._arms_asked(s, test) if self._carries(c) else None
        if asked is not None and _ends(s.body) and self._names_inference_path(s, test):
            self._inference_exits.append(self.bdd.conj(self.pc, c))
        if asked is not None:
            block, start = rest
            then, other = _statement_arms(s, block[start:], self._live(), self._communicates, self._inputs())
            # an arm that raises what the enclosing `try` catches goes on in the handler
            then, other = self._caught(then, s.body), self._caught(other, s.orelse)
            self._compare_arms(s, test, then, other, asked)
        then_env, then_end, then_pc, then_origins = self._branch(c, test.origins, s.body, env)
        else_env, else_end, else_pc, else_origins = self._branch(self.bdd.negate(c), test.origins, s.orelse, env)
        return self._join(
            s,
            c,
            test.origins,
            env,
            (then_env, then_end, then_pc, then_origins),
            (else_env, else_end, else_pc, else_origins),
        )

    def _caught(self, arm: Arm, body: list[ast.stmt]) -> Arm:
        """``arm`` (of the statements ``body``), where it ends raising an exception the
        innermost enclosing ``try`` of the function catches (``if not grad: raise
        ImportError(...)`` under ``except ImportError:``): no guard, but a path on into
        the handler, whose effects it takes."""
        if not arm.raises or not body or not isinstance(body[-1], ast.Raise) or not self._handlers:
            return arm
        raised = body[-1].exc
        name = last_name(raised.func if isinstance(raised, ast.Call) else raised) if raised is not None else ""
        for handler in self._handlers[-1]:
            types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            if any(t is None or last_name(t) in (name, "Exception", "BaseException") for t in types):
                handled = statements_arm(handler.body, self._live(), self._communicates, self._inputs())
                return replace(arm, raises=handled.raises, effects=arm.effects | handled.effects)
        return arm

    def _names_inference_path(self, s: ast.If, test: Value) -> bool:
        """Is the ``if`` an exit taken, for some assignment, only without grad, named for
        a path with no backward (its test, a name its grad mode was held under on the
        way, or its body: ``uses_local_inference_kernel``, ``fast_path``)?"""
        if not self.bdd.forced_off_by_grad(test.bdd) or self.bdd.forced_off_by_no_grad(test.bdd):
            return False
        held = {m for step in test.trail for m in re.findall(r"`([\w.]+)`", step.message)}
        names = test_names_of(s, test.origins) | held | self._returned_names(s.test)
        return any(NO_BACKWARD_PATH.search(n) for n in names) or any(
            NO_BACKWARD_PATH.search(ast.unparse(b)) for b in s.body
        )

    def _returned_names(self, test: ast.expr) -> set[str]:
        """The names the ``return`` expressions of the module's functions ``test`` calls
        spell (``return quantized or uses_local_inference_kernel``)."""
        found: set[str] = set()
        for call in (n for n in ast.walk(test) if isinstance(n, ast.Call)):
            resolved = self.index.resolve(call.func, self.owner, self.aliases)
            info = self.index.functions.get(resolved[0]) if resolved is not None else None
            for statement in own_statements(info.node.body) if info is not None else ():
                if isinstance(statement, ast.Return) and statement.value is not None:
                    found |= {n.id for n in ast.walk(statement.value) if isinstance(n, ast.Name)}
        return found

    def _arms_asked(self, node: ast.AST, test: Value) -> frozenset[str] | None:
        """The names of the test of a decision whose arms are to be compared, or None
        where they are not (asked before the arms are summarised): in autograd's own
        machinery, and where the test asks the module's training mode too."""
        if self.info is not None and autograd_machinery(self.info.node.name):
            return None  # `selective_checkpoint_context_fn`: autograd's own choices
        test_names = test_names_of(node, test.origins)
        if "training" in test_names or self.bdd.asks_training(test.bdd):
            # `if self.training and grad:` / `if self.training is False or not grad:`: the
            # module's mode is asked too, and what that arm computes is a training
            # approximation its author gates on both (the kernel modes of GG003 judge the
            # training mode handed to a kernel)
            return None
        return test_names

    def _compare_arms(self, node: ast.AST, test: Value, then: Arm, other: Arm, test_names: frozenset[str]) -> None:
        """A decision whose arms do different things in the forward (:mod:`.arms`). The
        arm that needs grad mode on to run (``if flag and grad:``'s then arm, ``if not
        grad:``'s and ``if sync or not grad:``'s else arm) is lost under no_grad: it is
        recorded unless autograd explains the loss (:func:`.arms.explained`). Where no
        arm needs grad mode (``if grad or compiling: return reference(x)``, ``if fast and
        not grad:``), the path taken without grad is one refused while grad is on: the
        opposite polarity, correct. ``test_names``: :meth:`_arms_asked`'s."""
        if then.raises or other.raises:
            return  # a guard
        views = self._grad_views(test.bdd)
        for side, arm, condition, sign, replacement in (
            ("then", then, test.bdd, False, other),
            ("else", other, self.bdd.negate(test.bdd), True, then),
        ):
            if not any(self._needs_grad(self.bdd.negate(v) if sign else v) for v in views):
                continue
            lost = arm.effects - replacement.effects
            others = replacement.effects - arm.effects
            if lost and not arm.saves and not explained(lost, others, test_names, arm.kept, self._forward_calls):
                decided = Value(condition, test.origins)
                # an arm drawing at random (`x.new_empty(shape).bernoulli_(keep)`): a
                # training-only regulariser, as a dropout kernel's mode is
                drawn = next((c for e in lost for c in e.calls if _TRAINING_ONLY.search(c)), None)
                if drawn is not None:
                    self._record("regulariser", f"{drawn}()", decided, node, key=("branch", side, id(node)))
                else:
                    self._record("branch", arms_summary(lost), decided, node, key=("branch", side, id(node)))
            elif (
                not lost
                and (waits := frozenset(e for e in replacement.effects - arm.effects if serialises(e)))
                and not explained(waits, arm.effects, test_names, arm.kept)
                and not waited_inside(waits, replacement.effects | replacement.aside, arm.effects | arm.aside)
            ):
                # `if hints.overlap: launch(x) else: stream.synchronize(); launch(x)`: the path
                # asked for overlaps what the one without grad waits for
                decided = Value(condition, test.origins)
                self._record("serialised", arms_summary(waits), decided, node, key=("serialised", side, id(node)))
            elif not lost and replacement.effects and (regulariser := _regulariser(test_names)):
                # `if grad and dropout_probability < self.layerdrop: continue`: a layer
                # dropped at random, only with grad on (grad mode stands in for training)
                decided = Value(condition, test.origins)
                self._record("regulariser", regulariser, decided, node, key=("mode-skip", side, id(node)))

    def _forward_calls(self, spelled: str) -> frozenset[str] | None:
        """What the module's function ``spelled`` (of an autograd Function: its forward)
        computes with, by last name: the module's functions it calls and the functions of
        imported modules (``dist.all_reduce``; not a tensor's methods nor shape helpers
        imported by name), through the module's functions, a few calls deep; None where
        ``spelled`` is neither."""
        klass = self.index.classes.get(spelled)
        if klass is not None:
            forward = self.index.method(spelled, "forward") if klass.autograd_function else None
        else:
            forward = spelled if spelled in self.index.functions else None
        if forward is None:
            return None
        found: set[str] = set()
        frontier, seen = [forward], {forward}
        for _depth in range(3):
            following = []
            for qualname in frontier:
                info = self.index.functions[qualname]
                aliases = self.index.aliases_of(info)
                for call in self.index.calls_of(qualname):
                    resolved = self.index.resolve(call.func, info.owner, aliases)
                    if resolved is not None and resolved[0] in self.index.functions:
                        found.add(last_name(call.func))  # the module's own function
                        if resolved[0] not in seen:
                            seen.add(resolved[0])
                            following.append(resolved[0])
                    elif (
                        isinstance(call.func, ast.Attribute) and (dotted(call.func) or ".").split(".", 1)[0] in aliases
                    ):
                        found.add(call.func.attr)  # `dist.all_reduce`, `selective_scan_cuda.fwd`: what it computes
            frontier = following
        return frozenset(found)

    def _grad_views(self, a: int) -> list[int]:
        """``a`` as a function of grad mode: its reads as grad mode; with every parameter
        it asks fed grad mode too (``x = grad if x is None else x``: a caller's grad
        mode, or the default's); with each parameter alone fed grad mode (``if not
        async_op and overlap:`` needs grad in ``overlap``, not in ``async_op``); and
        where its lookups take their defaults (``getattr(self, "regularize", grad)``)."""
        real = self.bdd.real(a)
        params = sorted(self.bdd.params_in(real))
        every = real
        for var in params:
            every = self.bdd.compose(every, var, self.bdd.grad)
        views = [real, every, *(self.bdd.compose(real, v, self.bdd.grad) for v in params)]
        defaulted = self.bdd.defaults_taken(real)
        return views if defaulted == real else [*views, defaulted]

    def _needs_grad(self, view: int) -> bool:
        """Is ``view`` (:meth:`_grad_views`) off without grad mode, and on with it for
        some assignment of the rest?"""
        return self.bdd.restrict(view, GRAD, False) == FALSE and self.bdd.restrict(view, GRAD, True) != FALSE

    def _communicates(self, effect: Effect) -> bool:
        """Does ``effect`` call a collective, or a function of the module that reaches
        one? Communication is compared by what it does (:class:`CommEffect`), not here."""
        config = self.index.config
        return any(config.is_forward_comm_call(name) or self.index.comm_ops_named(name) for name in effect.calls)

    def _inputs(self) -> frozenset[str]:
        """The function's parameters it never rebinds (:func:`.arms.unchanged_parameters`), found once."""
        if self._unchanged is None:
            self._unchanged = unchanged_parameters(self.info.node) if self.info is not None else frozenset()
        return self._unchanged

    def _live(self) -> frozenset[str] | None:
        """The function's live local names (:func:`.arms.live_names`), found once."""
        if self.info is None:
            return None
        if self._live_names is None:
            self._live_names = live_names(self.info.node)
        return self._live_names

    def _join(
        self,
        s: ast.stmt,
        c: int,
        c_origins: frozenset[ast.AST],
        env: Environment,
        then: tuple[Environment, str | None, int, frozenset[ast.AST]],
        other: tuple[Environment, str | None, int, frozenset[ast.AST]],
    ) -> str | None:
        then_env, then_end, then_pc, then_origins = then
        else_env, else_end, else_pc, else_origins = other
        flows_then = then_end not in ("return", "raise")
        flows_else = else_end not in ("return", "raise")
        # the path condition after: the paths that did not return (a raise is a guard)
        pc = self.bdd.disj(then_pc if then_end != "return" else FALSE, else_pc if else_end != "return" else FALSE)
        if pc != self.pc:
            self.pc = pc
            self.pc_origins = self.pc_origins | then_origins | else_origins
        if not flows_then and not flows_else:
            return "return" if "return" in (then_end, else_end) else "raise"
        keys = then_env.written | else_env.written
        if flows_then and flows_else:
            joined = self._join_envs(c, c_origins, then_env, else_env, keys)
        else:
            flowing = (then_env if flows_then else else_env).values
            joined = {k: flowing.get(k) for k in keys}
        assigned = {
            k
            for k in keys
            if then_env.values.get(k) is not env.values.get(k) or else_env.values.get(k) is not env.values.get(k)
        }
        env.update(joined)
        for name in sorted(assigned):
            if "." not in name and self.c.is_flag(name) and name in env.values:
                self._record("flag", name, env.values[name], s, key=("flag-join", name, id(s)))
        return None

    def _join_envs(
        self, c: int, c_origins: frozenset[ast.AST], a: Environment, b: Environment, keys: set[str]
    ) -> dict[str, Value | None]:
        """The joined value of each of ``keys`` (those either path wrote; None: bound
        on neither)."""
        out: dict[str, Value | None] = {}
        live = self.live
        for key in keys:
            if live is not None and key.partition(".")[0] not in live and not self.c.is_flag(key):
                continue  # never read after (nor a flag, whose joins are decisions): left as it was
            va, vb = a.values.get(key), b.values.get(key)
            if va is vb:
                out[key] = va
                continue
            if va is None:
                va = self._opaque(("unbound", key))
            if vb is None:
                vb = self._opaque(("unbound", key))
            out[key] = self._for_the_loss(key, self._join_values(c, c_origins, va, vb))
        return out

    def _for_the_loss(self, key: str, value: Value) -> Value:
        """``value`` as bound to ``key``; where ``key`` holds a loss (its weight, its
        coefficient) and grad mode takes part in deciding it (``if not grad: loss_coeff
        = 0.0``, ``aux_loss = loss if grad else None``), a value of its own, grad mode
        no longer in it: the loss is the backward's, and so is what it decides further
        on (which kernel also returns the scores the loss needs). Grad mode itself held
        under such a name (``compute_loss = torch.is_grad_enabled()``) stays grad mode."""
        if (
            not names_a_loss(key.rsplit(".", 1)[-1])
            or not self.bdd.carries_grad(value.bdd)
            or self.bdd.is_pure_grad(value.bdd)
        ):
            return value
        return self._opaque(("loss", key, value.bdd))

    def _join_values(self, c: int, c_origins: frozenset[ast.AST], a: Value, b: Value) -> Value:
        if a == b:
            return a
        if c in (TRUE, FALSE):  # one path only (`case _:` last): its value, as it came
            return (a if c == TRUE else b).with_origins(c_origins)
        bdd = self.bdd.ite(c, a.bdd, b.bdd)
        origins = a.origins | b.origins
        if a.bdd != b.bdd or a.ident != b.ident:
            origins |= c_origins
        items = None
        if a.items is not None and b.items is not None and len(a.items) == len(b.items):
            items = tuple(self._join_values(c, c_origins, x, y) for x, y in zip(a.items, b.items))
        alternatives = None
        if (
            (a.function != b.function and (a.function or b.function))
            or (a.items != b.items and (a.items is not None or b.items is not None))
            or (a.ident != b.ident and _chosen(a) and _chosen(b))
        ):
            branches = (*self._alternatives(a, c), *self._alternatives(b, self.bdd.negate(c)))
            alternatives = branches if len(branches) <= _MAX_ALTERNATIVES else None
        return Value(
            bdd,
            origins,
            ident=a.ident if a.ident == b.ident else None,
            items=items,
            function=a.function if a.function == b.function else None,
            trail=a.trail or b.trail,
            alternatives=alternatives,
        )

    def _alternatives(self, value: Value, condition: int) -> tuple[tuple[int, Value], ...]:
        if value.alternatives is None:
            return ((condition, value),)
        return tuple((self.bdd.conj(condition, c), v) for c, v in value.alternatives)

    def _loop(self, s: ast.While | ast.For | ast.AsyncFor, env: Environment) -> str | None:
        if isinstance(s, ast.While):
            test = self.eval(s.test, env)
            asked = self._arms_asked(s, test) if self._carries(test.bdd) else None
            if asked is not None:
                # `while pending and grad: pending.pop().wait()`: its body, or nothing
                body = statements_arm(s.body, self._live(), self._communicates, self._inputs())
                self._compare_arms(s, test, self._caught(body, s.body), Arm(frozenset(), False), asked)
        else:
            iterable = self.eval(s.iter, env)
            test = self._opaque(("iterates", id(s)), iterable.origins)
            if self._carries(iterable.bdd):
                # `for key in [k for k in keys if grad]:` runs its body only where the
                # collection is not empty: never without grad
                test = Value(self.bdd.conj(test.bdd, iterable.bdd), test.origins)
        body_env = env.copy()
        if not isinstance(s, ast.While):
            self._bind(s.target, self._opaque(("item", id(s))), body_env, s)
        saved = self.pc, self.pc_origins
        self.pc = self.bdd.conj(self.pc, test.bdd)
        self.pc_origins = self.pc_origins | test.origins
        self.loops += 1
        try:
            ended = self._block(s.body, body_env)
        finally:
            self.loops -= 1
        self.pc, self.pc_origins = saved
        if ended not in ("return", "raise"):
            env.update(self._join_envs(test.bdd, test.origins, body_env, env, body_env.written))
        return self._block(s.orelse, env)

    def _try(self, s: ast.Try | ast.TryStar, env: Environment) -> str | None:
        before = env.copy()
        outer, env.written = env.written, set()  # from here: what the body changes
        self._handlers.append(s.handlers)
        try:
            ended = self._block(s.body, env)
        finally:
            self._handlers.pop()
        if ended is None:
            ended = self._block(s.orelse, env)
        for handler in s.handlers:
            raised = self._opaque(("raised", id(handler)))
            handler_env = before.copy()
            if handler.name:
                handler_env.bind_name(handler.name, self._opaque(("exception", id(handler))))
            saved = self.pc
            handler_end = self._block(handler.body, handler_env)
            self.pc = saved
            if handler_end not in ("return", "raise"):
                if ended in ("return", "raise"):
                    env.become(handler_env)
                    ended = handler_end
                else:
                    keys = handler_env.written | env.written
                    # `try: g = torch.is_grad_enabled() except AttributeError: g = True`: a
                    # fallback where the source is missing; grad mode where it is there
                    fallbacks = {
                        k
                        for k in keys
                        if (body := env.values.get(k)) is not None
                        and self.bdd.is_pure_grad(body.bdd)
                        and (fallback := handler_env.values.get(k)) is not None
                        and fallback.bdd in (TRUE, FALSE)
                    }
                    env.update(self._join_envs(raised.bdd, frozenset(), handler_env, env, keys - fallbacks))
        env.written |= outer
        final = self._block(s.finalbody, env)
        return final or ended

    def _match(self, s: ast.Match, env: Environment) -> str | None:
        subject = self.eval(s.subject, env)
        branches: list[tuple[int, frozenset[ast.AST], list[ast.stmt]]] = []
        for case in s.cases:
            condition = self._pattern(case.pattern, subject, ("case", id(case)))
            if case.guard is not None:
                guard = self.eval(case.guard, env)
                condition = Value(self.bdd.conj(condition.bdd, guard.bdd), condition.origins | guard.origins)
            branches.append((condition.bdd, condition.origins, case.body))
        self._compare_cases(s, branches)
        return self._chain(s, branches, env)

    def _compare_cases(self, s: ast.Match, branches: list[tuple[int, frozenset[ast.AST], list[ast.stmt]]]) -> None:
        """Each case of a ``match`` whose condition grad mode takes part in, compared with
        what the other cases do (``match (self.async_finish, grad): case (True, True):``)."""
        arms: list[Arm] | None = None  # summarised once, for the first case asked
        earlier = FALSE
        for at, (condition, origins, _body) in enumerate(branches):
            taken = self.bdd.conj(condition, self.bdd.negate(earlier))
            earlier = self.bdd.disj(earlier, condition)
            asked = self._arms_asked(s.cases[at], Value(taken, origins)) if self._carries(taken) else None
            if asked is None:
                continue
            if arms is None:
                live, inputs = self._live(), self._inputs()
                arms = [statements_arm(body, live, self._communicates, inputs) for _, _, body in branches]
            # the other cases that raise are guards (`case _: raise ValueError(...)`), not paths
            others = [arm for i, arm in enumerate(arms) if i != at and not arm.raises]
            other = Arm(
                frozenset().union(*(a.effects for a in others)),
                not others,
                any(a.saves for a in others),
            )
            self._compare_arms(s.cases[at].pattern, Value(taken, origins), arms[at], other, asked)

    def _pattern(self, pattern: ast.pattern, subject: Value, key: tuple[object, ...]) -> Value:
        """When a case's pattern matches: a wildcard always, ``True``/``False`` where the
        subject is (or is not), item by item for a sequence pattern on a tuple subject
        (``match (self.overlap, torch.is_grad_enabled()): case (True, True): ...``); an
        atom of its own otherwise."""
        if isinstance(pattern, ast.MatchAs) and pattern.pattern is None:
            return Value(TRUE)
        if isinstance(pattern, ast.MatchAs) and pattern.pattern is not None:  # `case (True, True) as both:`
            return self._pattern(pattern.pattern, subject, key)
        if isinstance(pattern, ast.MatchOr):  # `case ("p2p" | "a2a+p2p", True):`
            bdd, origins = FALSE, frozenset[ast.AST]()
            for position, alternative in enumerate(pattern.patterns):
                matched = self._pattern(alternative, subject, (*key, "or", position))
                bdd, origins = self.bdd.disj(bdd, matched.bdd), origins | matched.origins
            return Value(bdd, origins)
        constant = (
            pattern.value
            if isinstance(pattern, ast.MatchSingleton)
            else pattern.value.value
            if isinstance(pattern, ast.MatchValue) and isinstance(pattern.value, ast.Constant)
            else ...
        )
        if isinstance(constant, bool) or (constant is None and isinstance(pattern, ast.MatchSingleton)):
            bdd = subject.bdd if constant else self.bdd.negate(subject.bdd)
            return Value(bdd, subject.origins)
        if isinstance(pattern, (ast.MatchValue, ast.MatchSingleton)) and subject.alternatives is not None:
            # `case "ring":`, `case Mode.GATHER:` of a value grad mode chose
            compared = self.eval(pattern.value, Environment()) if isinstance(pattern, ast.MatchValue) else None
            value = compared if compared is not None else Value(FALSE, ident=("const", repr(constant)))
            chosen = self._compare_chosen(ast.Eq(), subject, value, None, key)
            if chosen is not None:
                return chosen
        if (
            isinstance(pattern, ast.MatchSequence)
            and subject.items is not None
            and len(pattern.patterns) == len(subject.items)
            and not any(isinstance(p, ast.MatchStar) for p in pattern.patterns)
        ):
            bdd, origins = TRUE, frozenset[ast.AST]()
            for position, (inner, item) in enumerate(zip(pattern.patterns, subject.items)):
                matched = self._pattern(inner, item, (*key, position))
                bdd, origins = self.bdd.conj(bdd, matched.bdd), origins | matched.origins
            return Value(bdd, origins)
        return self._opaque(key, subject.origins)

    def _chain(
        self, s: ast.stmt, branches: list[tuple[int, frozenset[ast.AST], list[ast.stmt]]], env: Environment
    ) -> str | None:
        """``if c1: b1 elif c2: b2 ...`` with no final ``else``."""
        if not branches:
            return None
        (c, origins, body), rest = branches[0], branches[1:]
        then = self._branch(c, origins, body, env)
        saved = self.pc, self.pc_origins
        self.pc = self.bdd.conj(self.pc, self.bdd.negate(c))
        self.pc_origins |= origins
        else_env = env.copy()
        else_end = self._chain(s, rest, else_env)
        other = (else_env, else_end, self.pc, self.pc_origins)
        self.pc, self.pc_origins = saved
        return self._join(s, c, origins, env, then, other)

    # -- binding ----------------------------------------------------------------------------
    def _bind(self, target: ast.AST, value: Value, env: Environment, s: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            name = target.id
            value = self._for_the_loss(name, value)
            if value.trail and self.bdd.is_pure_grad(value.bdd):
                value = value.with_step(Step(target.lineno, target.col_offset, f"grad mode held in `{name}`"))
            env.bind_name(name, value)
            shared = self.info is not None and name in self.index.declared_global(self.qualname)
            # `prev = _FLAG; ...; _FLAG = prev`: the global set back, no value of its own
            restored = value.ident in (("global", name), ("param", self.qualname, GLOBAL + name))
            if shared and not restored:
                # `global RING_ATTN_GRAD` then a store: the module's, for every function
                self.result.attribute_stores.append((GLOBAL + name, value, None))
                self.result.state_stores.append((GLOBAL + name, value, s))
            if shared and self.index.reads_global(name, self.qualname):
                pass  # `_FP8_ALL_GATHER_ENABLED = enabled`, read by a function: its reads decide
            elif self.c.is_flag(name):
                self._record("flag", name, value, s, key=("flag-store", name, id(s)))
            else:
                self._numerics_flag(name, value, s)
        elif isinstance(target, (ast.Tuple, ast.List)):
            self._unpack(target.elts, value, env, s)
        elif isinstance(target, ast.Attribute):
            base = dotted(target.value)
            owner_is_ctx = base is not None and (base == "ctx" or base.startswith("ctx."))
            if base is not None:
                if not owner_is_ctx and base not in ("self", "cls") and self._carries(value.bdd):
                    self._foreign_store(target, value, env, s)
                env.set(f"{base}.{target.attr}", value)
            else:
                self.eval(target.value, env)
            if base == "self" and self.owner is not None and _is_grad_function(value):
                # `self._grad_mode = torch.is_grad_enabled`: the source itself, bound on the
                # object as a class body binds it (`self._grad_mode()` reads grad mode)
                self.c.bound_sources[(self.owner, target.attr)] = value
            if not owner_is_ctx:
                klass = self.owner if base == "self" else None
                self.result.attribute_stores.append((target.attr, value, klass))
                if klass is not None:
                    self.result.state_stores.append((target.attr, value, s))
                captured = (
                    base is not None
                    and base.split(".", 1)[0] not in self.aliases  # not an option of a library
                    and self.bdd.is_pure_grad(value.bdd)
                    and (
                        (klass is not None and self.index.reads_self_attribute(klass, target.attr, self.qualname))
                        or self.index.loads(target.attr)
                    )
                )
                if captured:
                    # `self.prefetch_enabled = torch.is_grad_enabled()`, `cls._train_active =
                    # is_grad_enabled()`, `self.state.overlap = ...`, read by the module: its
                    # reads decide
                    pass
                elif self.c.is_flag(target.attr):
                    self._record("flag", target.attr, value, s, key=("flag-store", target.attr, id(s)))
                else:
                    self._numerics_flag(target.attr, value, s)
                chosen = self._choice(value)
                if chosen is not None and base is not None and base.split(".", 1)[0] in self.aliases:
                    # `_cp_options.rotate_method = Method.ALL_GATHER if grad else ...`: an
                    # option of an imported library, set for the forward it runs
                    self._record("choice", f"{base}.{target.attr}", chosen, s, key=("choice-store", id(s)))
        elif isinstance(target, ast.Subscript):
            mapping = self.eval(target.value, env)
            index = target.slice
            if isinstance(index, ast.Constant) and isinstance(index.value, str):
                if self.c.is_flag(index.value):
                    self._record("flag", index.value, value, s, key=("flag-store", index.value, id(s)))
                if isinstance(target.value, ast.Name) and (mapping.fields is not None or self._carries(value.bdd)):
                    self._store_entry(target.value.id, mapping, index.value, value, env)  # `kwargs["async_op"] = g`
        elif isinstance(target, ast.Starred):
            self._bind(target.value, self._opaque(("starred", id(target))), env, s)

    def _foreign_store(self, target: ast.Attribute, value: Value, env: Environment, s: ast.stmt) -> None:
        """``self._comm_ctx.grad_hint = grad`` on an object of a class another module
        defines: what that class's methods decide with the attribute is decided here."""
        project, module = self.c.project, self.c.module
        if project is None or module is None:
            return
        made = self.eval(target.value, env).made_by
        found = project.resolve(made) if made is not None else None
        if found is None or found[1] != "class" or found[0].name == module.name:
            return
        self.result.foreign_stores.append((found[0].name, found[2], target.attr, value, s))

    def _unpack(self, targets: list[ast.expr], value: Value, env: Environment, s: ast.stmt) -> None:
        star = next((i for i, t in enumerate(targets) if isinstance(t, ast.Starred)), None)
        items = value.items
        #: a parameter unpacked: each item an atom of its own (a summary's subject)
        of_parameter = items is None and _parameter_of(value) is not None
        for position, target in enumerate(targets):
            item: Value | None = None
            if of_parameter and (star is None or position < star):
                named_grad = isinstance(target, ast.Name) and self.c.sources.is_carrier_name(target.id)
                item = None if named_grad else self._parameter_item(value, position)
            elif items is not None:
                if (star is None and len(items) == len(targets)) or (
                    star is not None and position < star and position < len(items)
                ):
                    item = items[position]
                elif star is not None and position > star:
                    back = len(targets) - position
                    if back <= len(items):
                        item = items[-back]
            if item is None and isinstance(target, ast.Name):
                carried = self.c.sources.carrier_polarity(target.id) if items is None else None
                if carried is not None:
                    item = self._grad(
                        carried,
                        target,
                        Step(
                            target.lineno,
                            target.col_offset,
                            f"unpacked field `{target.id}` taken as grad mode by its name",
                        ),
                    )
                else:
                    item = self._opaque(("unpacked", id(target)), value.origins)
            elif item is None:
                item = self._opaque(("unpacked", id(target)), value.origins)
            elif item.trail and self.bdd.is_pure_grad(item.bdd) and isinstance(target, ast.Name):
                item = item.with_step(Step(target.lineno, target.col_offset, f"unpacked into `{target.id}`"))
            self._bind(target, item, env, s)

    # -- decisions ---------------------------------------------------------------------------
    def _record(self, kind: str, name: str, value: Value, node: ast.AST, key: tuple[object, ...]) -> None:
        if self.info is not None and self.info.backward:
            return
        if (
            kind == "flag"
            and (name in self.c.sources.gated or (name in self.c.sources.names and self.bdd.is_pure_grad(value.bdd)))
            and not self.index.loads(name)
        ):
            # a slot filled here for another module to read (`Config(overlap_ag=a and grad)`,
            # a property; `ctx.overlap_copy_out = torch.is_grad_enabled()`, a field the run
            # learned): its decision is reported there, at the deciding predicate
            return
        if kind == "flag" and INVERTED_FLAG.match(name):  # `skip_dispatch = ... or not grad`
            value = replace(value, bdd=self.bdd.negate(value.bdd))
        if (
            not self.bdd.depends_on_grad(value.bdd)
            and kind != "function-forward-read"
            and not self.bdd.params_in(value.bdd)
        ):
            return
        if kind_of(kind).intent == "numerics" and self.bdd.grad_only_where_recorded(value.bdd):
            # `concat = ... and not (grad and x.requires_grad)`: a kernel with no backward
            # kept off what autograd records is autograd's business, not the forward's
            # (`... and not weight.requires_grad and grad` is not: grad mode decides there)
            return
        self.result.decisions.append(Decision(kind, name, value.bdd, value.origins, node, self.qualname, key))

    # -- expressions ---------------------------------------------------------------------------
    def eval(self, node: ast.AST, env: Environment) -> Value:
        method = getattr(self, "_e_" + type(node).__name__, None)
        if method is None:
            origins = frozenset().union(
                *(
                    self.eval(c, env).origins
                    for c in ast.iter_child_nodes(node)
                    if isinstance(c, ast.expr) and not isinstance(c, _NEW_SCOPES)
                )
            )
            return self._opaque(("expr", id(node)), origins)
        return method(node, env)

    def _e_Constant(self, node: ast.Constant, env: Environment) -> Value:
        return Value(TRUE if node.value else FALSE, ident=("const", repr(node.value)))

    def _e_JoinedStr(self, node: ast.JoinedStr, env: Environment) -> Value:
        """An f-string: truthy where a literal part of it is not empty (``f"got {n}"``)."""
        parts = [self.eval(v, env) for v in node.values if not isinstance(v, ast.Constant)]
        origins = frozenset().union(*(p.origins for p in parts))
        if any(isinstance(v, ast.Constant) and v.value for v in node.values):
            return Value(TRUE, origins, ident=("expr", id(node)))
        return self._opaque(("expr", id(node)), origins)

    def _e_Name(self, node: ast.Name, env: Environment) -> Value:
        value = env.values.get(node.id)
        if value is None:
            value = self._free(node)
        if self.c.is_flag(node.id):
            reads = self.result.forward_reads if not self._backward_context() else self.result.backward_reads
            reads.add(node.id)
            self.result.read_after[node.id] = max(self.result.read_after.get(node.id, 0), node.lineno)
        return self._read(value, node)

    def _free(self, node: ast.Name) -> Value:
        """A name the function does not bind: a module function or class, an import, a
        closure's variable (seen with the enclosing function's parameters), a global."""
        name = node.id
        if ".<locals>." in self.qualname:
            self.result.reads.add(("closures", self.qualname))
            captured = self.c.closures.get(self.qualname, {}).get(name)
            if captured is not None:
                return captured
        if name in self.index.functions and self.index.functions[name].owner is None:
            return Value(TRUE, ident=("function", name), function=FunctionRef(name))
        if name in self.index.classes:
            return Value(TRUE, ident=("class", name), function=FunctionRef(name))
        qualified = qualify(name, self.aliases)
        polarity = self.c.sources.polarity(qualified)
        if polarity is not None:
            return grad_function(polarity)
        bound = self._bound_source(None, name) if self.info is not None else None
        if bound is not None:
            return bound
        self.result.reads.add(("attributes", GLOBAL + name))
        stored = self.c.attributes.get(GLOBAL + name)
        if stored is not None:  # a global some function stores grad mode in
            said = f"`{name}` is a global a function of the module sets to grad mode"
            return self._read(stored.with_step(Step(node.lineno, node.col_offset, said)), node)
        if self.c.project is not None and name in self.aliases:  # maybe a function of another module
            return replace(self._opaque(("global", name)), function=FunctionRef(qualified, external=True))
        if self.c.summarising and name in self.index.set_globals():
            # `if _ASYNC_OUTPUT_A2A:` of a global a setter of the module sets: the module's
            # state, what a summary says the global decides (a caller of the setter passes it)
            slot = GLOBAL + name
            return self._read(Value(self.bdd.param(self.qualname, slot), ident=("param", self.qualname, slot)), node)
        if self.c.summarising and ".<locals>." in self.qualname:
            enclosing = self.index.functions.get(self.qualname.rsplit(".<locals>.", 1)[0])
            if enclosing is not None and any(a.arg == name for a in enclosing.params):
                # a closure's variable: the enclosing function's parameter, `^name` here
                closed = f"^{name}"
                return Value(self.bdd.param(self.qualname, closed), ident=("param", self.qualname, closed))
        carried = self.c.sources.carrier_polarity(name)
        if carried is not None and (
            (self.info is not None and ".<locals>." in self.qualname) or name not in self.index.module_names
        ):
            return self._grad(
                carried,
                node,
                Step(
                    node.lineno,
                    node.col_offset,
                    f"`{name}` taken as grad mode by its name (nothing in the module binds it)",
                ),
            )
        return self._opaque(("global", name))

    def _backward_context(self) -> bool:
        s = self.statement
        if isinstance(s, ast.Assign) and any(
            isinstance(t, ast.Attribute) and (dotted(t.value) or "").split(".")[0] == "ctx" for t in s.targets
        ):
            return True
        return (
            isinstance(s, ast.Expr)
            and isinstance(s.value, ast.Call)
            and isinstance(s.value.func, ast.Attribute)
            and s.value.func.attr in ("save_for_backward", "mark_non_differentiable")
        )

    def _e_Attribute(self, node: ast.Attribute, env: Environment) -> Value:
        known = self._known_path(node, env)
        if known is not None:
            return known
        return self._attribute(node, self.eval(node.value, env))

    def _known_path(self, node: ast.Attribute, env: Environment) -> Value | None:
        """``torch.is_grad_enabled`` (the function), or a path the function assigned."""
        path = dotted(node)
        if path is None:
            return None
        qualified = qualify(path, self.aliases)
        polarity = self.c.sources.polarity(qualified)
        if polarity is not None:
            return grad_function(polarity)
        if path in env.values:
            return self._read(env.values[path], node)
        return None

    def _attribute(self, node: ast.Attribute, base: Value) -> Value:
        found = base.field(node.attr)
        if found is not None:
            return self._read(found, node)
        attr = node.attr
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and self.owner:
            bound = self._bound_source(self.owner, attr)
            if bound is not None:  # `self._autograd_mode()`, a class attribute bound to the source
                return bound
            method = self.index.method(self.owner, attr)
            if method:
                self.result.reads.add(("returns", method))

            if method and method in self.c.returns and self.index.functions[method].is_property:
                value = self.c.returns[method]
                return self._read(
                    value.with_step(Step(node.lineno, node.col_offset, f"property `{attr}` returns grad mode")), node
                )
        on_self = isinstance(node.value, ast.Name) and node.value.id == "self" and self.owner is not None
        self.result.reads |= {("class_attributes", attr), ("attributes", attr)}
        stored = self.c.class_attribute(self.index, self.owner, attr) if on_self else None
        if stored is not None:
            if stored.bdd != FALSE or stored.ident != "plain":
                return self._read(stored, node)
        elif attr in self.c.attributes:
            return self._read(self.c.attributes[attr], node)
        if base.function is not None and attr == "apply":
            klass = self.index.classes.get(base.function.qualname)
            forward = (
                self.index.method(base.function.qualname, "forward") if klass and klass.autograd_function else None
            )
            if forward:
                return Value(TRUE, ident=("function", forward), function=FunctionRef(forward, skip=1))
        if base.function is not None and base.function.qualname in self.index.classes:
            method = self.index.method(base.function.qualname, attr)
            if method:
                return Value(TRUE, ident=("function", method), function=FunctionRef(method))
            bound = self._bound_lambda(base.function.qualname, attr)
            if bound is not None:  # `MoeLayer.router_softmax_dtype = lambda: ...` in the class body
                return bound
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and self.owner:
            method = self.index.method(self.owner, attr)
            if method and not self.index.functions[method].is_property:
                skip = 0 if self.index.functions[method].static else 1
                return Value(TRUE, ident=("function", method), function=FunctionRef(method, skip=skip))
            held = self._held_function(attr) if method is None else None
            if held is not None:  # `self.attn_func = _attn_ref`, `self.fn = self.a if p else self.b`
                return held
            bound = self._bound_lambda(self.owner, attr) if method is None else None
            if bound is not None:
                return bound
        if (
            attr in self.c.sources.gated
            and stored is None
            and attr not in self.c.attributes
            and not self.index.fills(attr)
            and not self._backward_context()
        ):
            slot = ("attr", base.ident if base.ident is not None else ("v", base.bdd), attr)
            return self._gated_slot(node, slot, attr)
        carried = self.c.sources.carrier_polarity(attr)
        if carried is not None and self._module_function(base, attr) is not None:
            carried = None  # `_forward_state.forward_grad_enabled`: a function, what it returns decides
        if carried is not None and stored is None and not self._backward_context():
            # `state_ctx.grad_enabled` of an object nothing in the module stores it on: the
            # carrier by its spelling, as a parameter with no caller is
            said = f"`.{attr}` taken as grad mode by its name (no store of it is seen)"
            return self._read(self._grad(carried, node, Step(node.lineno, node.col_offset, said)), node)
        key = ("attr", base.ident if base.ident is not None else ("v", base.bdd), attr)
        if attr == "requires_grad":
            return Value(self.bdd.recording(key), base.origins, ident=key)
        on_object = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        if self.c.summarising and not on_object and _parameter_of(base) is not None:  # `cfg.field` of a parameter
            field_value = self._parameter_item(base, attr)
            if base.made_by is not None:
                field_value = replace(field_value, function=FunctionRef(attr, external=True, receiver=base.made_by))
            return self._read(field_value, node)
        if base.function is not None and base.function.external and base.function.receiver is None:
            qualified = f"{base.function.qualname}.{attr}"  # `module.function`, `Class.method`
            return replace(self._opaque(key, base.origins), function=FunctionRef(qualified, external=True))
        if base.made_by is not None:  # a method of a value whose class the project may know
            polarity = self.c.project.initialised_grad(base.made_by, attr) if self.c.project is not None else None
            if polarity is not None and not self._backward_context():
                # `policy.grad` of a `RoutingPolicy` whose `__init__` stores grad mode there
                said = f"`.{attr}` is set to grad mode by `{base.made_by.rsplit('.', 1)[-1]}`'s `__init__`"
                return self._read(self._grad(polarity, node, Step(node.lineno, node.col_offset, said)), node)
            ref = FunctionRef(attr, external=True, receiver=base.made_by)
            return replace(self._opaque(key, base.origins), function=ref)
        if on_self and self.c.project is not None:
            made = self.c.hints.attribute(self.owner, attr)
            value = self._opaque(key, base.origins)
            if self.c.summarising:  # the object's state: what a summary says `self.attr` decides
                name = f"self.{attr}"
                value = self._read(
                    Value(self.bdd.param(self.qualname, name), base.origins, ident=("param", self.qualname, name)), node
                )
            if made is not None:
                return replace(value, made_by=made)
            if self.owner is not None and self._inherits_elsewhere(self.owner):  # a base's, elsewhere
                return replace(
                    value, function=FunctionRef(attr, external=True, receiver=self.c.hints.local(self.owner))
                )
            return value
        return self._opaque(key, base.origins)

    def _held_function(self, attr: str) -> Value | None:
        """``self.attr`` where the class's ``__init__`` stores functions in it (one of the
        module's, a bound method of its own): the function, or each it may be (a call
        runs that one, with its arguments)."""
        assert self.owner is not None
        held = self.index.held_functions(self.owner, attr)
        values = [Value(TRUE, ident=("function", q), function=FunctionRef(q, skip=skip)) for q, skip in held]
        if len(values) < 2:
            return values[0] if values else None
        branches: list[tuple[int, Value]] = []
        rest = TRUE
        for at, value in enumerate(values):
            chosen = rest if at == len(values) - 1 else self.bdd.conj(rest, self.bdd.atom(("holds", attr, at)))
            branches.append((chosen, value))
            rest = self.bdd.conj(rest, self.bdd.negate(chosen))
        return Value(TRUE, ident=("attr", ("self",), attr), alternatives=tuple(branches))

    def _module_function(self, base: Value, attr: str) -> str | None:
        """The qualified name of the function ``attr`` of the imported module ``base``
        holds, where the project finds one; None otherwise."""
        ref = base.function
        if ref is None or not ref.external or ref.receiver is not None or self.c.project is None:
            return None
        qualified = f"{ref.qualname}.{attr}"
        found = self.c.project.resolve(qualified)
        return qualified if found is not None and found[1] == "function" else None

    def _mode_position(self, func: ast.expr) -> int | None:
        """Where a torch kernel's training mode is among its arguments
        (:data:`_MODE_POSITIONS`), also where an unresolved relative import binds torch's
        ``functional`` module (``from .. import functional as F``, as in ``torch.nn``)."""
        spelled = dotted(func) or ""
        found = _MODE_POSITIONS.get(qualify(spelled, self.aliases))
        head, _, rest = spelled.partition(".")
        if found is None and rest and self.index.unresolved_relative.get(head) == "functional":
            found = _MODE_POSITIONS.get(f"torch.nn.functional.{rest}")
        return found

    def _carried_read(self, node: ast.AST, step: Step, slot: str) -> int:
        """A read of grad mode at ``node`` that another module fills (the slot ``slot``):
        an origin no fix acts on (what to change is where it is filled); its variable."""
        read = self.bdd.read(("read", id(node)))
        if self.statement is not None:
            self.result.origins[node] = (self.statement, 1, (step,))
        self.result.read_vars[node] = self.bdd.var(read)
        self.result.carried[node] = slot
        return read

    def _gated_slot(self, node: ast.AST, held: object, attr: str) -> Value:
        """``cfg.overlap_ag`` where another module fills ``overlap_ag`` with a value grad
        mode gates (:attr:`GradSources.gated`): grad mode and what else it holds (the
        atom ``held``). The read is an origin (the decision is reported here, at the
        deciding predicate) that no fix acts on: what to change is where it is filled.
        A local holding it is such a read again where it is read (``flag = cfg.overlap_ag``
        then ``if flag:``: the predicate is the read)."""
        step = Step(
            getattr(node, "lineno", 0),
            getattr(node, "col_offset", 0),
            f"`{attr}` is filled with a value grad mode gates, in another module",
        )
        read = self._carried_read(node, step, attr)
        gated = self.bdd.conj(read, self.bdd.atom(held))
        self._gated.add(gated)
        return Value(gated, frozenset({node}), ident=("gated", held, attr), trail=(step,))

    def _returned_parts(self, node: ast.Call, summary: FunctionSummary, source: Callee) -> Value:
        """The tuple or mapping another module's function returns with grad mode itself in
        some parts (``grad, inference = grad_flags()``): each such part a read of grad
        mode at the call, which no fix acts on (what to change is in that function)."""
        said = f"`{source.qualname}()` of `{source.module.name}` returns grad mode in what it returns"
        step = Step(node.lineno, node.col_offset, said)
        read = self._carried_read(node, step, f"{source.qualname}()")
        polarity = dict(summary.returns_parts)

        def part(key: int | str) -> Value:
            if key not in polarity:
                return self._opaque(("part", id(node), key))
            return Value(read if polarity[key] > 0 else self.bdd.negate(read), frozenset({node}), trail=(step,))

        if summary.returns_length is not None:
            return Value(TRUE, ident=("call", id(node)), items=tuple(part(i) for i in range(summary.returns_length)))
        fields = tuple((k, part(k)) for k, _ in summary.returns_parts if isinstance(k, str))
        return Value(TRUE, ident=("call", id(node)), fields=fields)

    def _gated_call(self, node: ast.Call, callee: Value) -> Value | None:
        """A call of a function another module defines to return a value grad mode gates
        (``sequence_overlap_active(cfg)``, ``self.args.ep_forward()``): as a read of a
        slot it fills (:meth:`_gated_slot`), at the call."""
        slot = _gated_ident(callee.ident)
        if slot is not None:
            name = slot[1]
        elif isinstance(node.func, ast.Name) and (callee.function is None or callee.function.external):
            name = node.func.id  # (an import of another module's function, resolved or not)
            if name not in self.c.sources.gated or self.index.fills(name):
                return None
        else:
            return None
        return self._gated_slot(node, ("call", id(node), name), name)

    def _inherits_elsewhere(self, klass: str | None, depth: int = 0) -> bool:
        """Has ``klass`` a base (or a base's base) of another module?"""
        info = self.index.classes.get(klass) if klass is not None else None
        if info is None or depth > 8:
            return False
        return any(b not in self.index.classes or self._inherits_elsewhere(b, depth + 1) for b in info.bases)

    def _e_Subscript(self, node: ast.Subscript, env: Environment) -> Value:
        key = node.slice
        table = _truth_table(node.value)
        if table is not None:
            test = self.eval(key, env)
            if self._carries(test.bdd):
                # `{True: torch.float32, False: x.dtype}[grad]`, `(plain, fused)[grad]`: a
                # value picked by a condition, as a conditional expression picks it
                when_true, when_false = (self.eval(arm, env) for arm in table)
                return self._join_values(test.bdd, test.origins, when_true, when_false)
        base = self.eval(node.value, env)
        if table is None:
            self.eval(key, env)
        if isinstance(key, ast.Constant):
            if (
                isinstance(key.value, int)
                and base.items is not None
                and -len(base.items) <= key.value < len(base.items)
            ):
                return self._read(base.items[key.value], node)
            if isinstance(key.value, int) and key.value >= 0 and _parameter_of(base) is not None:
                return self._parameter_item(base, key.value)
            if isinstance(key.value, str):
                found = base.field(key.value)
                if found is not None:
                    return self._read(found, node)
                carried = self.c.sources.key_polarity(key.value) if base.fields is None else None
                if carried is not None and not self._backward_context():
                    # `meta["grad"]` of a dict built elsewhere: a key the run stores grad
                    # mode under, or one spelling it
                    said = f"`[{key.value!r}]` taken as grad mode (a key grad mode is stored under)"
                    return self._read(self._grad(carried, node, Step(node.lineno, node.col_offset, said)), node)
                if _parameter_of(base) is not None:  # `kwargs["async_op"]`: the parameter's entry
                    return self._read(self._parameter_item(base, key.value), node)
        item = self._opaque(
            ("item", base.ident if base.ident is not None else ("v", base.bdd), ast.dump(key)), base.origins
        )
        if self.c.project is not None and self.owner is not None:
            made = self.c.hints.attribute(self.owner, self_attribute(node) or "")
            if made is not None:  # `self.coordinators[key]`, stored from a constructor
                return replace(item, made_by=made)
        return item

    def _e_BoolOp(self, node: ast.BoolOp, env: Environment) -> Value:
        values = [self.eval(v, env) for v in node.values]
        if any(_is_grad_function(v) for v in values):
            # `gate = gate or torch.is_grad_enabled`: the operand Python returns, each
            # under the condition it is returned on (calling it reads grad mode there)
            chosen = values[-1]
            for value in reversed(values[:-1]):
                then, other = (chosen, value) if isinstance(node.op, ast.And) else (value, chosen)
                joined = self._join_values(value.bdd, value.origins, then, other)
                branches = (
                    *self._alternatives(then, value.bdd),
                    *self._alternatives(other, self.bdd.negate(value.bdd)),
                )
                chosen = replace(joined, alternatives=branches[:_MAX_ALTERNATIVES])
            return chosen
        combine = self.bdd.conj if isinstance(node.op, ast.And) else self.bdd.disj
        bdd = values[0].bdd
        for value in values[1:]:
            bdd = combine(bdd, value.bdd)
        return Value(bdd, frozenset().union(*(v.origins for v in values)))

    def _e_UnaryOp(self, node: ast.UnaryOp, env: Environment) -> Value:
        operand = self.eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            negated = Value(self.bdd.negate(operand.bdd), operand.origins, trail=operand.trail)
            return negated
        return self._opaque(("unary", id(node)), operand.origins)

    def _binop(self, op: ast.operator, left: Value, right: Value, node: ast.AST) -> Value:
        origins = left.origins | right.origins
        if isinstance(op, (ast.BitAnd, ast.Mult)):
            return Value(self.bdd.conj(left.bdd, right.bdd), origins)
        if isinstance(op, ast.BitOr):
            return Value(self.bdd.disj(left.bdd, right.bdd), origins)
        if isinstance(op, ast.BitXor):
            return Value(self.bdd.xor(left.bdd, right.bdd), origins)
        if isinstance(op, ast.Add) and left.items is not None and right.items is not None:
            return Value(TRUE, origins, items=(*left.items, *right.items))
        return self._opaque(("binop", id(node)), origins)

    def _e_BinOp(self, node: ast.BinOp, env: Environment) -> Value:
        return self._binop(node.op, self.eval(node.left, env), self.eval(node.right, env), node)

    def _e_Compare(self, node: ast.Compare, env: Environment) -> Value:
        left = self.eval(node.left, env)
        rights = [self.eval(c, env) for c in node.comparators]
        origins = left.origins.union(*(r.origins for r in rights))
        if (
            len(rights) == 1
            and isinstance(node.comparators[0], ast.Constant)
            and isinstance(node.comparators[0].value, bool)
        ):
            op, constant = node.ops[0], node.comparators[0].value
            if isinstance(op, (ast.Eq, ast.Is, ast.NotEq, ast.IsNot)):
                positive = isinstance(op, (ast.Eq, ast.Is)) == constant
                return Value(left.bdd if positive else self.bdd.negate(left.bdd), origins)
        if len(rights) == 1:
            chosen = self._compare_chosen(node.ops[0], left, rights[0], node.comparators[0], ("compare", id(node)))
            if chosen is not None:
                return chosen.with_origins(origins)
        key = (
            "compare",
            tuple(type(o).__name__ for o in node.ops),
            tuple(v.ident if v.ident is not None else ("v", v.bdd) for v in (left, *rights)),
        )
        compared = self._equality(node.ops[0], left, rights, key, origins) or self._opaque(key, origins)
        falsy = len(rights) == 1 and isinstance(node.comparators[0], ast.Constant) and not node.comparators[0].value
        if falsy and self._carries(left.bdd):
            # `count > 0`, `handle is not None` of a value that is falsy on some paths
            # (`count = 0`, then counted only under grad mode): false where it is falsy
            op = node.ops[0]
            if isinstance(op, (ast.Gt, ast.NotEq, ast.IsNot)):
                return Value(self.bdd.conj(left.bdd, compared.bdd), origins)
            if isinstance(op, (ast.Eq, ast.Is, ast.LtE)):
                return Value(self.bdd.disj(self.bdd.negate(left.bdd), compared.bdd), origins)
        return compared

    def _equality(
        self, op: ast.cmpop, left: Value, rights: list[Value], key: tuple[object, ...], origins: frozenset[ast.AST]
    ) -> Value | None:
        """``tp_mode is Mode.REDUCE_SCATTER``, ``kind != "ring"``: a value compared with a
        constant. The comparisons of one value with different constants exclude each
        other (``tp_mode`` is never both ``ALL_REDUCE`` and ``REDUCE_SCATTER``), so that an
        ``elif`` chain over them is the choice it is. None: another comparison."""
        if len(rights) != 1 or left.ident is None or not isinstance(op, (ast.Eq, ast.Is, ast.NotEq, ast.IsNot)):
            return None
        constant = rights[0].ident
        if not (_constant_ident(constant) or _member_ident(constant)):
            return None
        known = self._equalities.setdefault(left.ident, {})
        equal = known.get(constant)
        if equal is None:
            equal = self.bdd.atom(("equals", left.ident, constant))
            for other in known.values():
                equal = self.bdd.conj(equal, self.bdd.negate(other))
            known[constant] = equal
        return Value(equal if isinstance(op, (ast.Eq, ast.Is)) else self.bdd.negate(equal), origins, ident=key)

    def _compare_chosen(
        self, op: ast.cmpop, left: Value, right: Value, right_node: ast.expr | None, key: tuple[object, ...]
    ) -> Value | None:
        """``mode == "ring"``, ``mode is Mode.GATHER``, ``mode in ("a", "b")`` of a value a
        branch chose among constants (``mode = "ring" if grad else "tree"``): true under
        the conditions of the alternatives equal to it, so that what grad mode chose is
        a condition where it is compared. None: neither side was chosen so."""
        if not isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn)):
            return None
        if isinstance(op, (ast.In, ast.NotIn)):
            if (
                left.alternatives is None
                or right.items is None
                or not isinstance(right_node, (ast.Tuple, ast.List, ast.Set))
            ):
                return None
            candidates = list(right.items)
        elif left.alternatives is None and right.alternatives is None:
            return None
        else:
            candidates = [right]
        if left.alternatives is None:
            left, candidates = right, [left]
        assert left.alternatives is not None
        bdd = FALSE
        for position, (condition, chosen) in enumerate(left.alternatives):
            for candidate in candidates:
                pairs = candidate.alternatives or ((TRUE, candidate),)
                for other_position, (other_condition, other) in enumerate(pairs):
                    same = same_value(chosen.ident, other.ident)
                    equal = (
                        (TRUE if same else FALSE)
                        if same is not None
                        else self.bdd.atom((*key, position, id(candidate), other_position))
                    )
                    bdd = self.bdd.disj(bdd, self.bdd.conj(self.bdd.conj(condition, other_condition), equal))
        positive = isinstance(op, (ast.Eq, ast.Is, ast.In))
        origins = left.origins.union(*(c.origins for c in candidates))
        return Value(bdd if positive else self.bdd.negate(bdd), origins)

    def _e_IfExp(self, node: ast.IfExp, env: Environment) -> Value:
        test = self.eval(node.test, env)
        # each arm runs under its path condition (`_batch_p2p(ops) if grad else _serial_p2p(ops)`)
        saved = self.pc, self.pc_origins
        try:
            self.pc, self.pc_origins = self.bdd.conj(saved[0], test.bdd), saved[1] | test.origins
            body = self.eval(node.body, env)
            self.pc = self.bdd.conj(saved[0], self.bdd.negate(test.bdd))
            orelse = self.eval(node.orelse, env)
        finally:
            self.pc, self.pc_origins = saved
        if self._carries(test.bdd):
            graph_only = undetached(ast.unparse(node.body)) == undetached(ast.unparse(node.orelse))
            # (`x.detach() if not grad else x`: one value, in autograd's graph or not)
            asked = None if graph_only or self._bookkeeping_value(node) else self._arms_asked(node, test)
            if asked is not None:
                then, other = (expression_arm(arm, self._communicates) for arm in (node.body, node.orelse))
                self._compare_arms(node, test, then, other, asked)
            labels = (callee_label(body), callee_label(orelse))
            evals = [bool(_EVAL_WORD.search(n)) for n in labels]
            trains = [bool(_TRAIN_WORD.search(n)) and not e for n, e in zip(labels, evals)]
            if all(labels) and (evals[0] != evals[1] or trains[0] != trains[1]):
                # `self.capacity_factor_train if grad else self.capacity_factor_eval`: the
                # training value where the test holds
                first = trains[0] or (not trains[1] and evals[1])
                train = test if first else Value(self.bdd.negate(test.bdd), test.origins)
                self._record("regulariser", labels[0 if first else 1], train, node, key=("mode-value", id(node)))
        return self._join_values(test.bdd, test.origins, body, orelse)

    def _bookkeeping_value(self, node: ast.expr) -> bool:
        """Is ``node`` stored for autograd (``ctx.x = ...``), or an argument by which a
        call serves autograd (``requires_grad=...``, ``save_for_backward(...)``)?"""
        s = self.statement
        if s is None:
            return False
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None and _held_in(s.value, node):
            # `ctx.x = v`, `self.fwd_cache[i] = (out, inputs if grad else [])`
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            # (`aux_router_logits = router_logits if grad else None`: for an auxiliary loss)
            return all(bookkeeping_target(t) or loss_target(t) for t in targets)
        for sub in ast.walk(s):
            if isinstance(sub, ast.Call):
                if any(k.value is node and k.arg and _BOOKKEEPING_KEYWORDS.search(k.arg) for k in sub.keywords):
                    return True
                if any(a is node for a in sub.args) and bookkeeping_call(sub):
                    return True
        return False

    def _e_NamedExpr(self, node: ast.NamedExpr, env: Environment) -> Value:
        value = self.eval(node.value, env)
        self._bind(node.target, self._control(value), env, self.statement or node)  # type: ignore[arg-type]
        return value

    def _e_Tuple(self, node: ast.Tuple | ast.List, env: Environment) -> Value:
        if any(isinstance(e, ast.Starred) for e in node.elts):
            values = [self.eval(e, env) for e in node.elts]
            return self._opaque(("sequence", id(node)), frozenset().union(*(v.origins for v in values)))
        if len(node.elts) > _MAX_ITEMS:  # a data literal: its constants decide nothing
            values = [self.eval(e, env) for e in node.elts if not isinstance(e, ast.Constant)]
            return self._opaque(("sequence", id(node)), frozenset().union(*(v.origins for v in values)))
        items = tuple(self.eval(e, env) for e in node.elts)
        return Value(TRUE if items else FALSE, frozenset(), ident=("sequence", id(node)), items=items)

    _e_List = _e_Tuple

    def _e_Dict(self, node: ast.Dict, env: Environment) -> Value:
        fields = []
        for key, value in zip(node.keys, node.values):
            evaluated = self.eval(value, env)
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                fields.append((key.value, evaluated))
                if self.c.is_flag(key.value) and self.statement is not None:
                    self._record("flag", key.value, evaluated, self.statement, key=("flag-key", key.value, id(value)))
            elif key is not None:
                self.eval(key, env)
        return Value(TRUE if node.keys else FALSE, ident=("dict", id(node)), fields=tuple(fields))

    def _e_Lambda(self, node: ast.Lambda, env: Environment) -> Value:
        body = node.body
        if not node.args.args and isinstance(body, ast.Call) and not body.args and not body.keywords:
            polarity = self.c.sources.polarity(qualify(dotted(body.func) or "", self.aliases))
            if polarity is not None:  # `lambda: torch.is_grad_enabled()`: the function itself
                return grad_function(polarity)
        self._lambdas[id(node)] = (node, env)
        return self._opaque(("lambda", id(node)))

    def _bound_lambda(self, klass: str | None, name: str) -> Value | None:
        """A lambda a class body (or the module, ``klass`` None) binds ``name`` to, as a
        value to call (it sees the module's names, not the caller's)."""
        node = self.index.bound_lambdas(klass).get(name)
        if node is None:
            return None
        self._lambdas[id(node)] = (node, Environment())
        return self._opaque(("lambda", id(node)))

    def _call_lambda(self, callee: Value, args: list[Value], keywords: list[tuple[str | None, Value]]) -> Value | None:
        """What calling a lambda made in this function gives: its body, run with its
        parameters bound to the arguments (None: not such a lambda, or one whose
        arguments cannot be bound simply)."""
        ident = callee.ident
        if not (isinstance(ident, tuple) and len(ident) == 2 and ident[0] == "lambda"):
            return None
        found = self._lambdas.get(ident[1])
        if found is None or self._lambda_depth > 4:
            return None
        node, closed = found
        parameters = node.args
        if parameters.vararg or parameters.kwarg or parameters.posonlyargs or parameters.kwonlyargs:
            return None
        names = [a.arg for a in parameters.args]
        if len(args) > len(names):
            return None
        inner = closed.copy()
        for name, value in zip(names, args):
            inner.set(name, value)
        for name in names[len(args) :]:
            given = next((v for k, v in keywords if k == name), None)
            inner.set(name, given if given is not None else self._opaque(("lambda-param", id(node), name)))
        self._lambda_depth += 1
        try:
            return self.eval(node.body, inner)
        finally:
            self._lambda_depth -= 1

    def _e_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, env: Environment) -> Value:
        """A comprehension as the loop it is: its filters a path condition over the
        element (``[all_reduce(x, async_op=True) for x in xs if grad]``); its value one
        representative element under the filters (``any(grad and l.overlap for l in ls)``)."""
        return self._comprehension(node.generators, (node.elt,), env)

    _e_SetComp = _e_ListComp
    _e_GeneratorExp = _e_ListComp

    def _e_DictComp(self, node: ast.DictComp, env: Environment) -> Value:
        return self._comprehension(node.generators, (node.key, node.value), env)

    def _comprehension(
        self, generators: list[ast.comprehension], elements: tuple[ast.expr, ...], env: Environment
    ) -> Value:
        inner = env.copy()
        spread = self._comprehension_items(generators, elements, inner)
        if spread is not None:
            return spread
        saved = self.pc, self.pc_origins
        condition, origins = TRUE, frozenset[ast.AST]()
        self.loops += 1
        try:
            for generator in generators:
                iterable = self.eval(generator.iter, inner)
                origins |= iterable.origins
                if self._carries(iterable.bdd):  # over a collection grad mode may leave empty
                    condition = self.bdd.conj(condition, iterable.bdd)
                item = self._opaque(("item", id(generator)), iterable.origins)
                self._bind(generator.target, item, inner, self.statement or ast.Pass())
                for test in generator.ifs:
                    tested = self.eval(test, inner)
                    self._dropped_by_filter(test, tested)
                    condition = self.bdd.conj(condition, tested.bdd)
                    origins |= tested.origins
                    self.pc = self.bdd.conj(self.pc, tested.bdd)
                    self.pc_origins = self.pc_origins | tested.origins
            values = [self.eval(e, inner) for e in elements]
        finally:
            self.loops -= 1
            self.pc, self.pc_origins = saved
        element = values[-1]
        return Value(
            self.bdd.conj(condition, element.bdd),
            origins | frozenset().union(*(v.origins for v in values)),
            ident=("comprehension", id(elements[0])),
        )

    def _dropped_by_filter(self, test: ast.expr, tested: Value) -> None:
        """A comprehension's filter dropping elements at random, only with grad mode on
        (``[layer for i, layer in enumerate(layers) if not grad or draws[i] > drop_p]``):
        a regulariser grad mode stands in for training mode for, as ``if grad and
        random() < layerdrop: continue`` is."""
        if not self._carries(tested.bdd):
            return
        names = frozenset(
            n.attr if isinstance(n, ast.Attribute) else n.id
            for n in ast.walk(test)
            if isinstance(n, (ast.Attribute, ast.Name)) and n not in tested.origins
        )
        regulariser = _regulariser(names)
        if regulariser is not None:
            dropped = Value(self.bdd.negate(tested.bdd), tested.origins)
            self._record("regulariser", regulariser, dropped, test, key=("mode-filter", id(test)))

    def _comprehension_items(
        self, generators: list[ast.comprehension], elements: tuple[ast.expr, ...], env: Environment
    ) -> Value | None:
        """A comprehension over a sequence of known items with no filter (``flag for flag
        in (torch.is_grad_enabled(), self.upcast)``): its element for each item, as the
        items of a sequence (what ``all()`` and ``any()`` combine). None: another kind."""
        if len(generators) != 1 or len(elements) != 1:
            return None
        generator, literal = generators[0], generators[0].iter
        if generator.ifs or generator.is_async or not isinstance(literal, (ast.Tuple, ast.List)):
            return None
        if len(literal.elts) > _SPREAD_ITEMS or any(isinstance(e, ast.Starred) for e in literal.elts):
            return None  # checked before the literal is evaluated: it is evaluated once either way
        iterable = self.eval(literal, env)
        if iterable.items is None:
            return None
        values = []
        for item in iterable.items:
            inner = env.copy()
            self._bind(generator.target, item, inner, self.statement or ast.Pass())
            values.append(self.eval(elements[0], inner))
        origins = frozenset().union(*(v.origins for v in values))
        return Value(TRUE if values else FALSE, origins, items=tuple(values))

    def _e_Starred(self, node: ast.Starred, env: Environment) -> Value:
        return self.eval(node.value, env)

    # -- calls --------------------------------------------------------------------------------
    def _e_Call(self, node: ast.Call, env: Environment) -> Value:
        receiver: Value | None = None
        if isinstance(node.func, ast.Attribute) and node.func.attr in BACKWARD_HOOK_REGISTRARS:
            self.result.hook_factories.update(a for a in node.args if isinstance(a, ast.Call))
        if isinstance(node.func, ast.Attribute):
            callee = self._known_path(node.func, env)
            if callee is None:
                receiver = self.eval(node.func.value, env)
                callee = self._attribute(node.func, receiver)
        else:
            callee = self.eval(node.func, env)
        args = [self.eval(a, env) for a in node.args]
        keywords = [(k.arg, self.eval(k.value, env)) for k in node.keywords]
        origins = frozenset().union(*(v.origins for v in args), *(v.origins for _, v in keywords))
        ran = self._call_lambda(callee, args, keywords)
        if ran is not None:
            return ran
        grad = self._grad_source(node, callee, args)
        if grad is not None:
            return grad
        gated = self._gated_call(node, callee)
        if gated is not None:
            return gated
        self._chosen_callee(node, callee)
        if receiver is not None:
            entry = self._set_default(node, receiver, args, env)
            if entry is not None:
                return entry
            self._grown(node, receiver, args, env)
        bound = tuple((k, v) for k, v in keywords if k)
        builtin = self._builtin(node, args, origins, receiver, bound)
        if builtin is not None:
            return builtin
        target = callee.function
        if target is None and callee.made_by is not None and self.c.project is not None:
            target = FunctionRef("__call__", external=True, receiver=callee.made_by)  # an object called
        elsewhere = self._resolved_elsewhere(node, target, args, keywords)
        library = _bound_library_function(target) if not elsewhere else None
        if library is not None and target is not None:
            # `a2a = functools.partial(dist.all_to_all_single, async_op=grad)`, then `a2a(...)`:
            # a call of the library function with the bound arguments
            self._decisions_of_call(node, [*target.args, *args], [*target.keywords, *keywords], func=library)
        else:
            # `SeqAllToAll.apply(...)`: a function of the module (its `forward`) decides inside
            seen = target is not None and not target.external and target.qualname in self.index.functions
            self._decisions_of_call(node, args, keywords, elsewhere, seen=seen)
        if any(self.bdd.is_pure_grad(v.bdd) for v in (*args, *(v for _, v in keywords))):
            before = (receiver,) if receiver is not None else ()
            self.result.grad_taking_calls.append((node, (*before, *args, *(v for _, v in keywords))))
        external = target is not None and target.external
        leading: tuple[Value, ...] = target.args if target is not None and external else ()
        named: list[tuple[str | None, Value]] = [
            *(target.keywords if target is not None and external else ()),
            *keywords,
        ]
        for found in elsewhere:
            self._external_site(node, found, [*leading, *args], named, len(leading))
            key = (found.module.name, found.qualname)
            self._selector(
                node,
                found.module.index.functions.get(found.qualname),
                lambda name, key=key: (*key, name) in self.c.external_fed,  # type: ignore[misc]
                found.skip,
                [*leading, *self._positional(node, args)],
                [(k, v) for k, v in named if k],
            )
        self._callbacks(node, args, keywords)
        if target is not None and target.external and self.c.project is not None and self._matters(args, keywords):
            fields = self.c.project.record_fields(target)
            if fields is not None:  # a dataclass or NamedTuple of another module: its fields
                passed = list(zip(fields, (*target.args, *args)))
                passed += [(k, v) for k, v in (*target.keywords, *_expanded(keywords)) if k]
                return Value(TRUE, origins, ident=("instance", id(node)), fields=tuple(passed), made_by=target.qualname)
        if target is not None and target.external:
            returned = self.c.project.returned_grad(target) if self.c.project is not None else None
            if returned is not None:
                polarity, source = returned
                said = f"`{source.qualname}()` of `{source.module.name}` returns grad mode"
                return self._read(self._grad(polarity, node, Step(node.lineno, node.col_offset, said)), node)
            parts = self.c.project.returned_parts(target) if self.c.project is not None else None
            if parts is not None:
                return self._returned_parts(node, *parts)
            value = self._opaque(("call", id(node)), origins)
            value = self._chosen_by_arguments(node, value, elsewhere, [*leading, *self._positional(node, args)], named)
            return replace(value, made_by=target.qualname) if target.receiver is None else value
        if target is not None:
            return self._call_module_function(node, target, args, keywords, origins)
        branches = callee.alternatives or ()
        if branches and all(v.function is not None and not v.function.external for _, v in branches):
            for condition, branch in branches:  # `fwd_fn(*ctx_args, ...)`, each branch's function
                assert branch.function is not None
                self._call_module_function(node, branch.function, args, keywords, origins, condition)
        return self._opaque(("call", id(node)), origins)

    def _callbacks(self, node: ast.Call, args: list[Value], keywords: list[tuple[str | None, Value]]) -> None:
        """A partial of a function (of the module or another) handed to a call, its bound
        arguments carrying grad mode (``_pre_forward(state, handles, functools.partial(
        _unshard, allow_prefetch=grad))``): the call runs it, as if it were called here
        with them. A hook registered for the backward is not run in the forward."""
        if node in self.result.hook_factories:
            return
        if isinstance(node.func, ast.Attribute) and node.func.attr in BACKWARD_HOOK_REGISTRARS:
            return
        for value in (*args, *(v for _, v in keywords)):
            ref = value.function
            if ref is None or not self._matters(list(ref.args), list(ref.keywords)):
                continue
            if not ref.external and ref.qualname in self.index.functions:
                site = CallSite(ref.qualname, ref.skip, ref.args, ref.keywords, node, self.qualname)
                self.result.calls.append(site)
            elif ref.external and self.c.project is not None:
                found = self.c.project.callee(ref)
                if found is not None:
                    self._external_site(node, found, list(ref.args), list(ref.keywords), len(ref.args))

    def _resolved_elsewhere(
        self,
        node: ast.Call,
        target: FunctionRef | None,
        args: list[Value],
        keywords: list[tuple[str | None, Value]],
    ) -> list[Callee]:
        """The functions the project resolves a call to (a name of another module, a
        method of a value of known make, the functions attached to objects under the
        called attribute): asked only when an argument carries grad mode or a
        parameter, what summaries are about, or where the path to the call is gated
        by one (does the callee communicate?)."""
        project = self.c.project
        if project is None:
            return []
        if target is not None and target.external:
            passed = [*target.keywords, *keywords]
            if not self._matters([*target.args, *args], passed, carriers=True) and not self._gated_question(target):
                return []
            found = project.callee(target)
            return [found] if found is not None else []
        if (
            target is None
            and isinstance(node.func, ast.Attribute)
            and self.index.config.is_forward_comm_call(node.func.attr)
            and self._matters(args, keywords)
        ):  # a collective by its name, on an object of unknown class: what the project attaches
            return project.attached(node.func.attr)
        return []

    def _chosen_by_arguments(
        self,
        node: ast.Call,
        value: Value,
        callees: list[Callee],
        args: list[Value | None],
        keywords: list[tuple[str | None, Value]],
    ) -> Value:
        """What a call returns where the function picks it by a parameter
        (``get_group(with_cp=flag)``): the choice between two values by the argument."""
        project = self.c.project
        if project is None:
            return value
        slots: list[tuple[int | str, Value | None]] = [*enumerate(args), *((k, v) for k, v in keywords if k)]
        for callee in callees:
            for slot, argument in slots:
                if argument is None or not self.bdd.carries_grad(argument.bdd):
                    continue
                parameter = project.parameter(callee, slot)
                if (
                    parameter is not None
                    and parameter in project.summary(callee.module, callee.qualname).chooses_return
                ):
                    picked = self.bdd.ite(argument.bdd, value.bdd, self.bdd.atom(("other-result", id(node))))
                    return replace(value, bdd=picked, origins=value.origins | argument.origins)
        return value

    def _carries(self, a: int) -> bool:
        """Does ``a`` depend on what the interpretation is about: grad mode, and in a
        summary the parameters too?"""
        return self.bdd.carries(a) if self.c.summarising else self.bdd.carries_grad(a)

    def _gated_question(self, target: FunctionRef) -> bool:
        """Is a call with no argument that matters still worth resolving, because the path
        to it is gated (does what it runs communicate?): in a summary always; in a
        module's analysis for a method of an object of known class, or a selector that
        a call of the module feeds ``module.training`` (GG004), as the cost of asking
        every call under a grad-mode branch would be the whole project's."""
        if not self._carries(self.pc):
            return False
        if self.c.summarising or target.receiver is not None:
            return True
        return target.qualname.rsplit(".", 1)[-1] in self.c.external_fed_names

    def _matters(self, args: list[Value], keywords: list[tuple[str | None, Value]], carriers: bool = False) -> bool:
        """Does an argument carry grad mode, or in a summary a parameter (what the
        summary is about)? ``carriers``: a keyword named as grad mode counts too."""
        # a keyword named as grad mode (`is_grad_enabled=...`): the callee takes its
        # parameter as grad mode by that name where its module reads grad mode itself,
        # its findings are then its own (:meth:`.project.ModuleFile.reads_grad`)
        named = (v for k, v in keywords if carriers or k is None or not self.c.sources.is_carrier_name(k))
        return any(self._held(v) for v in (*args, *named))

    def _held(self, value: Value) -> bool:
        """Does ``value``, or an item or field of it, carry what :meth:`_carries` asks?
        (A method, not a closure of :meth:`_matters`: a recursive closure is a
        reference cycle, and it held the interpreter, its context and the run's project
        until the collector's next pass.)"""
        return (
            self._carries(value.bdd)
            or any(self._held(i) for i in value.items or ())
            or any(self._held(v) for _, v in value.fields or ())
        )

    def _external_site(
        self, node: ast.Call, callee: Callee, args: list[Value], keywords: list[tuple[str | None, Value]], bound: int
    ) -> None:
        passed: list[Value | None] = [*args[:bound]]
        starred = False
        for argument, value in zip(node.args, args[bound:]):
            starred = starred or isinstance(argument, ast.Starred)
            passed.append(None if starred else value)
        named = tuple(_expanded(keywords))
        double_star = any(k is None and v.fields is None for k, v in keywords)
        where = (callee.module.name, callee.qualname)
        site = CallSite(callee.qualname, callee.skip, tuple(passed), named, node, self.qualname, double_star, where)
        self.result.external_calls.append(site)

    def _grad_mode_set_by(self, node: ast.expr) -> int | None:
        """The grad mode inside ``with node:`` (or a function decorated by it), if it
        sets one: ``torch.no_grad()``, ``torch.enable_grad()``, ``torch.inference_mode()``,
        ``torch.set_grad_enabled(False)``."""
        call = node if isinstance(node, ast.Call) else None
        name = qualify(dotted(call.func if call is not None else node) or "", self.aliases)
        short = name.rsplit(".", 1)[-1]
        if not name.startswith("torch.") or short not in _GRAD_MODE_SETTERS:
            return None
        mode = _GRAD_MODE_SETTERS[short]
        if call is not None and call.args:
            argument = call.args[0]
            if not (isinstance(argument, ast.Constant) and isinstance(argument.value, bool)):
                return None
            mode = int(argument.value) if short == "set_grad_enabled" else (FALSE if argument.value else mode)
            if short == "inference_mode" and not argument.value:
                return None
        elif short == "set_grad_enabled":
            return None
        return mode

    def _grad_source(self, node: ast.Call, callee: Value, args: list[Value]) -> Value | None:
        ident = callee.ident
        if callee.alternatives and not node.args and any(_is_grad_function(v) for _, v in callee.alternatives):
            # `(gate or torch.is_grad_enabled)()`: grad mode where the source is the one called
            result = self._opaque(("call", id(node)))
            for condition, branch in callee.alternatives:
                read = self._grad_source(node, branch, args) if _is_grad_function(branch) else None
                if read is not None:
                    result = self._join_values(condition, frozenset(), read, result)
            return result
        if not _is_grad_function(callee) or node.args:
            return None
        assert isinstance(ident, tuple)
        if self.grad_fixed is not None:  # inside `with torch.no_grad():` grad mode is a constant
            constant = self.grad_fixed if int(ident[1]) > 0 else 1 - self.grad_fixed
            return Value(constant, ident=("const", bool(constant)))
        polarity = int(ident[1])
        text = dotted(node.func) or _spelled_source(node.func)
        step = Step(node.lineno, node.col_offset, f"grad mode captured: `{text}()`")
        value = self._read(self._grad(polarity, node, step), node)
        if self.info is not None and self.info.autograd_forward and not isinstance(self.statement, ast.Assert):
            self.result.decisions.append(
                Decision(
                    "function-forward-read",
                    text,
                    value.bdd,
                    value.origins,
                    node,
                    self.qualname,
                    ("function-forward-read", id(node)),
                )
            )
        return value

    def _set_default(self, node: ast.Call, mapping: Value, args: list[Value], env: Environment) -> Value | None:
        """``kwargs.setdefault("apply_bias", torch.is_grad_enabled())`` on a mapping a name
        holds: the entry where the mapping has it (a dict literal's is known), the default
        where not; kept as the mapping's entry, which a ``**kwargs`` spread passes on.
        None: another call."""
        func = node.func
        key = node.args[0] if node.args else None
        if not (
            isinstance(func, ast.Attribute)
            and func.attr == "setdefault"
            and isinstance(func.value, ast.Name)
            and len(args) == 2
            and not node.keywords
            and isinstance(key, ast.Constant)
            and isinstance(key.value, str)
        ):
            return None
        found = mapping.field(key.value)
        if found is not None:
            return found
        default = args[1]
        literal = isinstance(mapping.ident, tuple) and mapping.ident[:1] == ("dict",)
        if not literal:
            where = mapping.ident if mapping.ident is not None else ("v", mapping.bdd)
            has = self.bdd.atom(("has-key", where, key.value))
            entry = self._opaque(("entry", where, key.value))
            default = Value(self.bdd.ite(has, entry.bdd, default.bdd), default.origins)
        self._store_entry(func.value.id, mapping, key.value, default, env)
        return default

    def _grown(self, node: ast.Call, container: Value, args: list[Value], env: Environment) -> None:
        """``prefetch.append(p)`` on a local container: not empty after it (a loop that
        fills it only while grad mode is on leaves it empty without grad);
        ``keys.extend(k for k in ks if grad)``: not empty where it was not or the items
        are not (a filter of grad mode leaves it as empty as it was without grad)."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in env.values):
            return
        if func.attr in _GROWING and container.bdd != TRUE:
            env.bind_name(func.value.id, replace(container, bdd=TRUE, items=None))
        elif func.attr in _EXTENDING and len(args) == 1 and not node.keywords:
            filled = self.bdd.disj(container.bdd, args[0].bdd)
            env.bind_name(
                func.value.id, replace(container, bdd=filled, origins=container.origins | args[0].origins, items=None)
            )

    @staticmethod
    def _store_entry(name: str, mapping: Value, key: str, value: Value, env: Environment) -> None:
        """``name[key] = value`` (or a ``setdefault``) on the mapping ``name`` holds: the
        mapping with that entry, what a ``**name`` spread passes on."""
        fields = tuple((k, v) for k, v in mapping.fields or () if k != key)
        env.bind_name(name, replace(mapping, fields=(*fields, (key, value))))

    def _builtin(
        self,
        node: ast.Call,
        args: list[Value],
        origins: frozenset[ast.AST],
        receiver: Value | None,
        bound: tuple[tuple[str, Value], ...] = (),
    ) -> Value | None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) and func.id not in self.index.functions else None
        if name in ("bool", "staticmethod", "classmethod") and len(args) == 1 and not node.keywords:
            return args[0]
        if name == "dict" and not args and node.keywords and all(k.arg for k in node.keywords):
            # `dict(async_op=a and grad, ...)`: a mapping of those entries, as a literal is
            return Value(TRUE, ident=("dict", id(node)), fields=bound)
        if name == "super" and not args and self.owner is not None and self.c.project is not None:
            # `super().method(...)`: the method as the class's bases have it
            return replace(self._opaque(("super", id(node))), made_by=f"{self.c.hints.local(self.owner)}{SUPER}")
        if (
            name == "getattr"
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            owner = dotted(node.args[0])
            polarity = (
                self.c.sources.polarity(f"{qualify(owner, self.aliases)}.{node.args[1].value}") if owner else None
            )
            if polarity is not None:
                return grad_function(polarity)
        spelled = (
            node.args[1]
            if name == "getattr" and len(node.args) in (2, 3)
            else (
                node.args[0] if isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and node.args else None
            )
        )
        if isinstance(spelled, ast.Constant) and isinstance(spelled.value, str):
            sources = self.c.sources
            carried = (
                sources.carrier_polarity(spelled.value) if name == "getattr" else sources.key_polarity(spelled.value)
            )
            found = None if name == "getattr" or receiver is None else receiver.field(spelled.value)
            if carried is not None and found is None:
                # `getattr(module, "_ds_fwd_grad_enabled", True)`, `kwargs.get("is_grad_enabled")`:
                # a carrier by its spelling, as an attribute is
                said = f"`{spelled.value}` taken as grad mode by its name"
                return self._read(self._grad(carried, node, Step(node.lineno, node.col_offset, said)), node)
        if name == "getattr" and len(node.args) == 3 and receiver is None:
            # `getattr(ctx, "overlap", torch.is_grad_enabled())`: the attribute where the
            # object has it, the default where not
            has = self.bdd.atom(("has-attr", args[0].ident, ast.dump(node.args[1])))
            attribute = self._opaque(("getattr", args[0].ident, ast.dump(node.args[1])), args[0].origins)
            return Value(self.bdd.ite(has, attribute.bdd, args[2].bdd), origins | args[2].origins)
        if name in ("min", "max") and len(args) >= 2 and not node.keywords:
            combine = self.bdd.conj if name == "min" else self.bdd.disj
            bdd = args[0].bdd
            for value in args[1:]:
                bdd = combine(bdd, value.bdd)
            return Value(bdd, origins)
        if (
            name in ("any", "all")
            and len(node.args) == 1
            and isinstance(node.args[0], ast.GeneratorExp)
            and args[0].items is None
        ):
            return replace(args[0], ident=None)  # one representative element, under the filters
        if name in ("any", "all") and len(args) == 1 and args[0].items is not None:
            combine = self.bdd.conj if name == "all" else self.bdd.disj
            bdd = TRUE if name == "all" else FALSE
            for value in args[0].items:
                bdd = combine(bdd, value.bdd)
            return Value(bdd, frozenset().union(*(v.origins for v in args[0].items)))
        if isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and node.args:
            key = node.args[0]
            if receiver is not None and isinstance(key, ast.Constant) and isinstance(key.value, str):
                found = receiver.field(key.value)
                if found is not None:
                    return self._read(found, node)
                if _parameter_of(receiver) is not None and len(args) <= 2 and not node.keywords:
                    # `kwargs.get("apply_bias", True)`: the parameter's entry where the caller
                    # passes it, the default where not
                    entry = self._read(self._parameter_item(receiver, key.value), node)
                    if len(args) == 1:
                        return entry
                    has = self.bdd.atom(("has-key", receiver.ident, key.value))
                    return Value(self.bdd.ite(has, entry.bdd, args[1].bdd), args[1].origins)
            if receiver is not None and len(args) == 2 and not node.keywords and self._carries(args[1].bdd):
                # `kwargs.pop("is_train", torch.is_grad_enabled())`: the entry where the
                # mapping has it, the default where not
                where = receiver.ident if receiver.ident is not None else ("v", receiver.bdd)
                has = self.bdd.atom(("has-key", where, ast.dump(key)))
                entry = self._opaque(("entry", where, ast.dump(key)))
                return Value(self.bdd.ite(has, entry.bdd, args[1].bdd), args[1].origins | receiver.origins)
        qualified = qualify(dotted(func) or "", self.aliases)
        if qualified in ("functools.partial", "partial") and args and args[0].function is not None:
            ref = args[0].function
            return Value(
                TRUE,
                ident=("partial", id(node)),
                function=replace(ref, args=(*ref.args, *args[1:]), keywords=(*ref.keywords, *bound)),
            )
        return None

    def _decisions_of_call(
        self,
        node: ast.Call,
        args: list[Value],
        keywords: list[tuple[str | None, Value]],
        elsewhere: list[Callee] | None = None,
        func: ast.expr | None = None,
        seen: bool = False,
    ) -> None:
        """The decisions a call makes. Where the function it runs can be seen (in the
        module, or ``elsewhere``: what the project resolved it to), its body says whether
        it communicates and what its arguments decide, not its name. ``func``: the
        function called, where the call spells another (a partial of it)."""
        func = func if func is not None else node.func
        resolved = self.index.resolve(func, self.owner, self.aliases)
        decided_inside = bool(elsewhere) or seen
        keyword_nodes = {k.arg: k.value for k in node.keywords if k.arg is not None}
        # whether the call runs matters only where its path is gated: there the calls
        # of a visible callee into other modules are followed too
        gated = self._carries(self.pc)
        if resolved is not None:
            # the body decides; a name like a collective's still counts where the body
            # makes calls it cannot see into (hooks called from a dict), not where it only
            # builds a closure
            project, module = self.c.project, self.c.module
            outside = (
                (lambda call, info: project.call_communicates(module, call, info))
                if gated and self.c.summarising and project is not None and module is not None
                else None
            )
            comm = self.index.communicates(resolved[0], outside=outside) or (
                self.index.is_comm_callee(func, self.aliases)
                and resolved[0] in self.index.functions
                and bool(self.index.calls_of(resolved[0]))
            )
        elif elsewhere and self.c.project is not None:
            comm = (gated or self.c.summarising) and any(self.c.project.communicates(c) for c in elsewhere)
        else:
            comm = self.index.is_comm_callee(func, self.aliases)
        if comm and autograd_machinery(last_name(func)):
            comm = False  # `checkpoint_wrapper(block)`: the same forward, recomputed for the backward
        if comm:
            name = (
                resolved[0]
                if resolved is not None
                else (
                    dotted(shown := wrapped_function(func))
                    or (shown.attr if isinstance(shown, ast.Attribute) else "call")
                )
            )
            effect = self._comm_effect(func, resolved, elsewhere or [], node, keywords)
            bdd, origins, first, first_name = self._comm.get(effect, (FALSE, frozenset(), node, name))
            self._comm[effect] = (self.bdd.disj(bdd, self.pc), origins | self.pc_origins, first, first_name)
            if resolved is None and not decided_inside:  # a function we see decides on its arguments inside
                for keyword, value in _expanded(keywords):
                    if self.c.sources.is_carrier_name(keyword):
                        continue  # `grad_enabled=`: the callee takes it as grad mode, decides inside
                    if self.index.config.backward_flag_re.search(keyword):
                        continue  # `allreduce_dgrad=`: the backward's communication, not the forward's
                    kind = "selection" if _SELECTION_KEYWORDS.search(keyword) else "comm-option"
                    self._record(kind, keyword, value, node, key=(kind, keyword, id(node)))
        if qualify(dotted(func) or "", self.aliases) in _AUTOGRAD_SWITCHES:
            return  # autograd's own mode, not a kernel's
        seen = resolved is not None or decided_inside  # a function we see decides inside
        for keyword, value in _expanded(keywords):
            if not comm and self.c.is_flag(keyword) and not self._used_by_callee(keyword, resolved, elsewhere or []):
                # a flag handed to a body that we cannot see, or that does not use it: by its name
                self._record("flag", keyword, value, node, key=("flag-keyword", keyword, id(node)))
            elif _MODE_KEYWORDS.match(keyword) and not seen:
                self._record("mode", keyword, self._mode_in_effect(value), node, key=("mode", keyword, id(node)))
            elif (
                not comm
                and _COMM_RESOURCE.search(keyword)
                and not self._used_by_callee(keyword, resolved, elsewhere or [])
                and not self.index.is_comm_query(func, self.aliases)  # `dist.get_rank(group=g)` asks
            ):
                # `cp_stream=`, `group=`, `bucket_size=` handed to a body we cannot see: the
                # stream, group or bucketing of its communication, chosen here
                self._record("selection", keyword, value, node, key=("selection", keyword, id(node)))
            elif not seen and not comm and self._kernel_keyword(func, keyword):
                # an argument of a kernel that no visible body takes apart (`torch.topk(...,
                # sorted=grad)`): the forward computes differently; a condition spelled
                # there (`use_fast_accum=not backward_expected`) switches the kernel either way
                kind = "kernel-switch" if _spelled_condition(keyword_nodes.get(keyword)) else "kernel-option"
                self._record(kind, keyword, value, node, key=("kernel-option", keyword, id(node)))
        known = self._mode_position(func)
        if (
            known is not None
            and len(args) > known
            and not any(isinstance(a, ast.Starred) for a in node.args[: known + 1])
        ):
            self._record("mode", "training", self._mode_in_effect(args[known]), node, key=("mode", known, id(node)))
        last = last_name(func)
        kernel = known is None and not seen and not comm and self._kernel_keyword(func, "")
        for position, (argument, value) in enumerate(zip(node.args, args)):
            if isinstance(argument, ast.Starred):
                break
            if (
                known is None
                and not seen
                and not _NOT_KERNELS.match(last)
                and any(
                    _TRAINING_NAME.match(n.id if isinstance(n, ast.Name) else n.attr)
                    for n in ast.walk(argument)
                    if isinstance(n, (ast.Name, ast.Attribute))
                )
            ):
                self._record("mode", f"argument {position + 1}", value, node, key=("mode", position, id(node)))
            elif (
                comm
                and resolved is None
                and not decided_inside
                and not last.startswith("get_")  # a getter's argument picks what it returns
                and self._carries(value.bdd)
                and (
                    not self.bdd.is_literal(value.bdd)  # a decision made here, not passed on
                    or (isinstance(argument, ast.Name) and self.c.is_flag(argument.id))  # `async_op`
                )
            ):
                # `foreach_all_gather(params, group, async_op, ...)`: an option by position
                self._record(
                    "comm-option", f"argument {position + 1}", value, node, key=("comm-arg", position, id(node))
                )
            elif kernel and value.items is None and self._carries(value.bdd) and not self.bdd.is_pure_grad(value.bdd):
                # grad mode with other conditions handed to a kernel by position (apex's
                # `SyncBatchnormFunction.apply(..., torch.is_grad_enabled() or not track, ...)`);
                # grad mode alone is passed on for the callee to decide, as `f(x, grad)`
                self._record(
                    "kernel-option", f"argument {position + 1}", value, node, key=("kernel-arg", position, id(node))
                )
        if not _NOT_KERNELS.match(last) and not bookkeeping_call(node):
            named: list[tuple[str, Value, str | None]] = [(f"argument {p + 1}", v, None) for p, v in enumerate(args)]
            named += [(k, v, k) for k, v in _expanded(keywords)]
            unseen = resolved is None and not decided_inside
            for label, passed, option in named:
                chosen = self._choice(passed, mixed=unseen)
                if chosen is None or (option is not None and _BOOKKEEPING_KEYWORDS.search(option)):
                    continue
                if option is not None and resolved is not None and not self._used_by_callee(option, resolved, []):
                    continue  # a body we see that never reads it
                self._record("choice", label, chosen, node, key=("choice", label, id(node)))
        if _TRAINING_ONLY.search(last) and self._carries(runs := self.bdd.in_training(self.pc)):
            # `if self.noisy_func is not None and grad: x = self.noisy_func(x)`: the training
            # numerics in effect only with grad on (where the module trains: dropout does
            # nothing in eval, so a path taken only in eval does not count)
            self._record("regulariser", f"{last}()", Value(runs, self.pc_origins), node, key=("mode-run", id(node)))
        if isinstance(func, ast.Attribute) and func.attr in _MODE_SWITCHES:
            on = _MODE_SWITCHES[func.attr]
            mode = args[0].bdd if (func.attr == "train" and args) else (TRUE if on else FALSE)
            runs = self.pc if on else self.bdd.negate(self.pc)
            value = Value(
                self.bdd.conj(runs, mode) if on else runs, self.pc_origins | (args[0].origins if args else frozenset())
            )
            self._record("mode-switch", f".{func.attr}()", value, node, key=("mode-switch", id(node)))

    def _choice(self, value: Value, mixed: bool = False) -> Value | None:
        """Which of several constants grad mode chose (``algo = "two_level"`` under one
        case, ``"flat"`` under another; ``Mode.GATHER if grad else Mode.REDUCE``), as a
        decision: the condition of the first. ``mixed``: a constant against another
        value too (``n = self.n_microbatches if grad else 1``, handed to a body nobody
        sees). None: not such a choice, or not one grad mode takes part in."""
        branches = value.alternatives
        if not branches:
            return None
        constant = [_constant_ident(v.ident) or _member_ident(v.ident) for _, v in branches]
        if not (all(constant) or (mixed and any(constant) and all(v.function is None for _, v in branches))):
            return None
        first = branches[0][1].ident
        if all(v.ident == first for _, v in branches):
            return None
        indicator = FALSE
        for condition, chosen in branches:
            if chosen.ident == first:
                indicator = self.bdd.disj(indicator, condition)
        if not self.bdd.depends_on_grad(indicator):
            return None
        return Value(indicator, value.origins)

    def _cover_unknown_options(self) -> None:
        """An effect whose options are a called function's own (``Fn.apply(x)``) is the
        same effect as the direct collective of its operations (``all_reduce(x,
        group=g)``): each happens wherever either does."""
        by_base: dict[tuple[object, ...], list[CommEffect]] = {}
        for effect in self._comm:
            by_base.setdefault((effect.ops, effect.in_loop, effect.stream), []).append(effect)
        for effects in by_base.values():
            unknown = [e for e in effects if e.options is None]
            if not unknown or len(effects) < 2:
                continue
            joined = FALSE
            for effect in unknown:
                joined = self.bdd.disj(joined, self._comm[effect][0])
            everything = FALSE
            for effect in effects:
                everything = self.bdd.disj(everything, self._comm[effect][0])
            for effect in effects:
                bdd, origins, node, name = self._comm[effect]
                widened = everything if effect.options is None else self.bdd.disj(bdd, joined)
                self._comm[effect] = (widened, origins, node, name)

    def _comm_effect(
        self,
        func: ast.expr,
        resolved: tuple[str, int] | None,
        elsewhere: list[Callee],
        node: ast.Call,
        keywords: list[tuple[str | None, Value]],
    ) -> CommEffect:
        """What a communication call does, as two calls are compared: the operations it
        reaches, its constant options, the group and stream it uses, in a loop or not."""
        if resolved is not None and resolved[0] in self.index.functions:
            ops = self.index.comm_ops(resolved[0]) or frozenset({op_name(func)})
        elif elsewhere:
            ops = frozenset(c.qualname.rsplit(".", 1)[-1].lstrip("_") for c in elsewhere)
        else:
            ops = frozenset({op_name(func)})
        options: list[tuple[str, object]] = []
        for keyword, value in _expanded(keywords):
            argument = next((k.value for k in node.keywords if k.arg == keyword), None)
            if isinstance(argument, ast.Constant):
                options.append((keyword, repr(argument.value)))
            elif (_SELECTION_KEYWORDS.search(keyword) or keyword == "stream") and resolved is None and not elsewhere:
                # the group a collective is called with (a function we see passes it on to
                # collectives of its own, compared by what they reach)
                options.append((keyword, value.ident if value.ident is not None else ("v", value.bdd)))
        differentiable = (
            records_autograd(func, self.aliases)
            or (resolved is not None and self.index.autograd_records(resolved[0]))
            or any(AUTOGRAD_WRAPPER.search(op) for op in ops)
            or _named_differentiable(last_name(func))  # `differentiable_all_reduce_sum`
        )
        seen_inside = (resolved is not None and resolved[0] in self.index.functions) or bool(elsewhere)
        # a function we see calls its collectives with options of its own: those it
        # spells as constants tell it from another call (`async_op=True`); with none, it
        # stands for any call of the same collectives
        inside = self.index.comm_constants(resolved[0]) if resolved is not None and seen_inside else frozenset()
        if resolved is not None and resolved[0] in self.index.functions:
            inside |= self._passed_options(node, resolved)
        known = frozenset(options) if not seen_inside else (inside or None)
        effect = CommEffect(ops, known, self.loops > 0, self.stream)
        if differentiable:
            self._differentiable.add(effect)
            if resolved is not None and resolved[0] in self.index.functions:
                self._seen_in_forward.add(effect)
        return effect

    def _passed_options(self, node: ast.Call, resolved: tuple[str, int]) -> frozenset[tuple[str, object]]:
        """The options a call gives the collectives of the function it runs, through the
        parameters the function hands them on by (:meth:`ModuleIndex.comm_parameters`):
        ``self._a2a(x, async_op=True)`` is ``async_op=True`` there, ``self._a2a(x)`` the
        parameter's default. Constants only (and defaults that are)."""
        qualname, skip = resolved
        handed = self.index.comm_parameters(qualname)
        if not handed:
            return frozenset()
        names = self.index.functions[qualname].positional[skip:]
        passed: dict[str, ast.expr | None] = {k.arg: k.value for k in node.keywords if k.arg is not None}
        for name, argument in zip(names, node.args):
            if isinstance(argument, ast.Starred):
                break
            passed.setdefault(name, argument)
        found: set[tuple[str, object]] = set()
        for parameter, (keyword, default) in handed.items():
            given = passed.get(parameter, default)
            if isinstance(given, ast.Constant):
                found.add((keyword, repr(given.value)))
        return frozenset(found)

    def _call_module_function(
        self,
        node: ast.Call,
        target: FunctionRef,
        args: list[Value],
        keywords: list[tuple[str | None, Value]],
        origins: frozenset[ast.AST],
        condition: int | None = None,
    ) -> Value:
        """A call of a function of the module; ``condition``: the branch of a joined
        callee this call stands for (its starred sequences taken from the same branch)."""
        qualname = target.qualname
        skip = target.skip
        if qualname in self.index.classes:
            init = self.index.method(qualname, "__init__")
            klass = self.index.classes[qualname]
            made = self.c.hints.local(qualname)
            if init is None:
                fields = list(zip(klass.fields, (*target.args, *args)))
                fields += [(k, v) for k, v in (*target.keywords, *keywords) if k]
                return Value(TRUE, origins, ident=("instance", id(node)), fields=tuple(fields), made_by=made)
            qualname, skip = init, 1
        elif isinstance(node.func, (ast.Name, ast.Attribute)):
            resolved = self.index.resolve(node.func, self.owner, self.aliases)
            if resolved is not None and resolved[0] == qualname:
                skip = resolved[1]
        all_args: list[Value | None] = [*target.args, *self._positional(node, args, condition)]
        all_keywords = [*target.keywords, *_expanded(keywords)]
        double_star = any(k is None and v.fields is None for k, v in keywords)
        fed = self.index.fed_training
        self._selector(
            node, self.index.functions.get(qualname), lambda name: (qualname, name) in fed, skip, all_args, all_keywords
        )
        if qualname in self.index.functions:
            self.result.calls.append(
                CallSite(qualname, skip, tuple(all_args), tuple(all_keywords), node, self.qualname, double_star)
            )
        returned = self.c.returns.get(qualname)
        self.result.reads.add(("returns", qualname))
        if returned is not None:
            step = Step(node.lineno, node.col_offset, f"`{qualname}()` returns grad mode")
            return self._read(replace(returned, trail=(*returned.trail, step)), node)
        made_by = self.c.hints.local(target.qualname) if self.c.project is not None else None
        return replace(self._opaque(("call", id(node)), origins), made_by=made_by)

    def _positional(self, node: ast.Call, args: list[Value], condition: int | None = None) -> list[Value | None]:
        """The positional arguments a call passes, starred sequences of known items
        spread (of the branch ``condition``, for a joined one); None stands for what
        follows a starred sequence of unknown length."""
        out: list[Value | None] = []
        for argument, value in zip(node.args, args):
            if not isinstance(argument, ast.Starred):
                out.append(value)
                continue
            items = value.items
            if items is None and condition is not None:
                items = next((v.items for c, v in value.alternatives or () if c == condition), None)
            if items is None and self.c.summarising and _is_vararg(value, self.info):
                # `helper(*args)` forwarding the function's own `*args`: item by item
                items = tuple(self._parameter_item(value, i) for i in range(_FORWARDED_ITEMS))
            if items is None:
                out.append(None)
                break
            out.extend(items)
        return out

    def _selector(
        self,
        node: ast.Call,
        info: FunctionInfo | None,
        fed: Callable[[str], bool],
        skip: int,
        args: list[Value | None],
        keywords: list[tuple[str, Value]],
    ) -> None:
        """A parameter fed ``module.training`` elsewhere (``fed(name)``), fed grad mode
        here (GG004); ``info``: the function called."""
        if info is None:
            return
        qualname = info.qualname
        passed = [*zip(info.positional[skip:], args), *keywords]
        for name, value in passed:
            if value is None or not fed(name):
                continue
            # what the selector receives: the argument where this call runs, "no call" else
            absent = self.bdd.atom(("not-called", id(node)))
            received = self.bdd.ite(self.pc, value.bdd, absent)
            chosen = Value(received, value.origins | self.pc_origins)
            key = ("mode-selector", name, id(node))
            self._record("mode-selector", f"{qualname.rsplit('.', 1)[-1]}({name}=)", chosen, node, key=key)
            place = self._selector_test(info, name)
            decisions = self.result.decisions
            if place is not None and decisions and decisions[-1].key == key:
                # `key = "train" if training else "eval"` in the selector: decided there
                decisions[-1] = replace(decisions[-1], via=(place,))

    def _selector_test(self, info: FunctionInfo, name: str) -> Place | None:
        """Where the selector ``info`` of the module tests its parameter ``name`` (the
        first ``if``, conditional expression or ``while`` reading it), as a deciding place."""
        module = self.c.module
        if module is None or self.index.functions.get(info.qualname) is not info:
            return None
        tests = [n.test for n in ast.walk(info.node) if isinstance(n, (ast.If, ast.IfExp, ast.While))]
        reads = [r for t in tests for r in ast.walk(t) if isinstance(r, ast.Name) and r.id == name]
        if not reads:
            return None
        first = min(reads, key=lambda r: (r.lineno, r.col_offset))
        message = f"`{name}` decides the train/eval state chosen here"
        return replace(module.places(first.lineno, first.col_offset, message), decides=True)


#: items of a forwarded ``*args`` a summary follows
_FORWARDED_ITEMS = 8


def _statement_arms(
    s: ast.If,
    rest: list[ast.stmt],
    live: frozenset[str] | None,
    judged_elsewhere: Callable[[Effect], bool],
    inputs: frozenset[str],
) -> tuple[Arm, Arm]:
    """The arms of ``if``: where one arm ends the block (``return``) and the other does
    not, what follows the ``if`` is part of the other."""
    then, other = (statements_arm(body, live, judged_elsewhere, inputs) for body in (s.body, s.orelse))
    then_ends, other_ends = _ends(s.body), _ends(s.orelse)
    if then_ends != other_ends and rest:
        after = statements_arm(rest, live, judged_elsewhere, inputs)
        if then_ends:
            other = replace(other, effects=other.effects | after.effects, aside=other.aside | after.aside)
        else:
            then = replace(then, effects=then.effects | after.effects, aside=then.aside | after.aside)
    return then, other


def _gated_ident(ident: object) -> tuple[object, str] | None:
    """``(held atom, slot name)`` of a read of a slot another module fills
    (:meth:`Interpreter._gated_slot`), else None."""
    if isinstance(ident, tuple) and len(ident) == 3 and ident[0] == "gated":
        return ident[1], str(ident[2])
    return None


def _held_in(value: ast.expr, node: ast.expr) -> bool:
    """Is ``node`` ``value``, or an item of a tuple or list literal ``value`` is (at any depth)?"""
    if value is node:
        return True
    return isinstance(value, (ast.Tuple, ast.List)) and any(_held_in(e, node) for e in value.elts)


def _bound_library_function(target: FunctionRef | None) -> ast.expr | None:
    """The dotted name of the function of no module we see that ``target`` binds
    arguments to (``functools.partial(dist.all_to_all_single, async_op=...)``), as an
    expression; None for anything else."""
    if target is None or not target.external or target.receiver is not None or not (target.args or target.keywords):
        return None
    if not all(part.isidentifier() for part in target.qualname.split(".")):
        return None
    expression = ast.parse(target.qualname, mode="eval").body
    return expression if isinstance(expression, (ast.Name, ast.Attribute)) else None


def _ends(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def effect_form(effect: CommEffect) -> str:
    """How an effect differs from other forms of its operations: its constant options, in
    a loop, on a chosen stream (``async_op=True, in a loop``)."""
    parts = [f"{k}={v}" for k, v in sorted(effect.options or (), key=str) if isinstance(v, str)]
    if effect.in_loop:
        parts.append("in a loop")
    if effect.stream is not None:
        parts.append("on a chosen stream")
    return ", ".join(parts) or "this form"


def grad_function(polarity: int) -> Value:
    """The value of a grad-mode source function itself (called, it reads grad mode)."""
    return Value(TRUE, ident=("grad-function", polarity))


def _spelled_source(func: ast.expr) -> str:
    """How a source called through an expression reads (``getattr(torch, 'is_grad_enabled')``)."""
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.args:
        name = func.args[1].value if len(func.args) > 1 and isinstance(func.args[1], ast.Constant) else "..."
        return f"getattr(..., {name!r})"
    return "grad mode"


def _callable_ident(ident: object) -> bool:
    """Does ``ident`` name what may be a function (a global, an attribute, a function)?"""
    return isinstance(ident, tuple) and bool(ident) and ident[0] in ("global", "attr", "function")


def _asynchronous(effect: CommEffect) -> bool:
    """Is ``effect`` spelled asynchronous (``async_op=True``, in the call or the body of
    the function it runs)?"""
    return effect.options is not None and ("async_op", "True") in effect.options


def _named_differentiable(name: str) -> bool:
    """Does a function's name say autograd records what it does
    (``differentiable_all_reduce_sum``, ``all_to_all_single_autograd``)?"""
    return name != "apply" and unwrapped_operation(name) != name.lstrip("_")


def _holds_grad_function(value: Value) -> bool:
    """Is ``value`` a grad-mode source function, or one of those it may be
    (``gate or torch.is_grad_enabled``)?"""
    return _is_grad_function(value) or any(_is_grad_function(v) for _, v in value.alternatives or ())


def _is_grad_function(value: Value) -> bool:
    """Is ``value`` a grad-mode source function itself (``torch.is_grad_enabled``, not
    called)?"""
    ident = value.ident
    return isinstance(ident, tuple) and bool(ident) and ident[0] == "grad-function"


def _owner_of(info: FunctionInfo | None, index: ModuleIndex) -> str | None:
    """The class whose ``self`` a function reads: a method's, or for a function nested
    in a method that binds no ``self`` of its own, the method's (``def custom_forward(x):
    self.token_dispatcher.dispatch(x)`` inside ``forward``)."""
    if info is None:
        return None
    if info.owner is not None or ".<locals>." not in info.qualname:
        return info.owner
    if any(a.arg == "self" for a in info.params):
        return None
    enclosing = index.functions.get(info.qualname.rsplit(".<locals>.", 1)[0])
    if enclosing is None or enclosing.positional[:1] != ["self"]:
        return None
    return _owner_of(enclosing, index)


def _constant_ident(ident: object) -> bool:
    """Does ``ident`` name one value of a kind other than a boolean (``"ring"``, ``4``,
    ``None``), whose joins are remembered to be compared later?"""
    return isinstance(ident, tuple) and len(ident) == 2 and ident[0] == "const" and ident[1] not in ("True", "False")


def _member_ident(ident: object) -> bool:
    """Does ``ident`` name a constant of a class or module (``Mode.ALL_GATHER``,
    ``dist.ReduceOp.SUM``): an attribute spelled in capitals?"""
    return (
        isinstance(ident, tuple)
        and len(ident) == 3
        and ident[0] == "attr"
        and isinstance(ident[2], str)
        and ident[2].isupper()
    )


def _truth_table(table: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    """The entries for true and for false of a literal keyed by truth (``{True: a,
    False: b}``, ``(b, a)``), or None."""
    if isinstance(table, ast.Dict) and len(table.keys) == 2:
        keys = [k.value if isinstance(k, ast.Constant) else None for k in table.keys]
        if sorted(map(repr, keys)) != ["False", "True"]:
            return None
        return table.values[keys.index(True)], table.values[keys.index(False)]
    if (
        isinstance(table, ast.Tuple)
        and len(table.elts) == 2
        and not any(isinstance(e, ast.Starred) for e in table.elts)
    ):
        return table.elts[1], table.elts[0]
    return None


def _regulariser(names: frozenset[str]) -> str | None:
    """The first of ``names`` that names a training-only regulariser, else None."""
    return next((n for n in sorted(names) if _REGULARISER_NAME.search(n)), None)


def _chosen(value: Value) -> bool:
    """Is ``value`` one of several a branch may choose, told apart by what it is (a
    function, an attribute such as an enum member, a constant), not by its truth?"""
    return value.alternatives is not None or _callable_ident(value.ident) or _constant_ident(value.ident)


def choice_of(values: Iterable[Value], conditions: Iterable[int], bdd: Manager) -> Value | None:
    """The value a function returns where its returns are constants chosen by grad mode
    (``return Mode.GATHER`` on one path, ``return Mode.REDUCE`` on another): each under
    its path's condition, as a join gives them (:attr:`Value.alternatives`). None: the
    returns are not all such constants, or grad mode does not choose among them."""
    branches: list[tuple[int, Value]] = []
    origins: frozenset[ast.AST] = frozenset()
    for value, condition in zip(values, conditions):
        origins |= value.origins
        if value.alternatives is not None:
            branches += [(bdd.conj(condition, c), v) for c, v in value.alternatives]
        elif _constant_ident(value.ident) or _member_ident(value.ident):
            branches.append((condition, value))
        else:
            return None
    if len({v.ident for _, v in branches}) < 2 or len(branches) > _MAX_ALTERNATIVES:
        return None
    if not any(bdd.depends_on_grad(c) for c, _ in branches):
        return None
    origins = origins.union(*(v.origins for _, v in branches))
    truth = FALSE
    for condition, value in branches:
        truth = bdd.disj(truth, bdd.conj(condition, value.bdd))
    return Value(truth, origins, alternatives=tuple(branches))


def same_value(a: object, b: object) -> bool | None:
    """Are the values named by idents ``a`` and ``b`` the same: True, False, or None
    where that is not known (two members of one class by name, two constants by value;
    an attribute and a constant may be equal)."""
    if not (_constant_ident(a) or _callable_ident(a)) or not (_constant_ident(b) or _callable_ident(b)):
        return None
    if a == b:
        return True
    assert isinstance(a, tuple) and isinstance(b, tuple)
    if a[0] == b[0] == "const":
        return False
    if a[0] == b[0] == "attr" and a[1] == b[1]:
        return False  # `Mode.GATHER` and `Mode.REDUCE`
    return None


def callee_label(value: Value) -> str:
    """The name a chosen callee goes by (``fused_linear``, ``self.ref_fn``: its last part)."""
    if value.function is not None:
        return value.function.qualname.rsplit(".", 1)[-1]
    ident = value.ident
    if isinstance(ident, tuple) and ident and isinstance(ident[-1], str):
        return ident[-1]
    return ""


def _is_vararg(value: Value, info: FunctionInfo | None) -> bool:
    vararg = info.node.args.vararg if info is not None else None
    return vararg is not None and _parameter_of(value) == vararg.arg


def _parameter_of(value: Value) -> str | None:
    """The name of the parameter ``value`` is the atom of, else None."""
    ident = value.ident
    if isinstance(ident, tuple) and len(ident) == 3 and ident[0] == "param":
        name = str(ident[2])
        return name if name.isidentifier() else None
    return None


def _spelled_condition(node: ast.expr | None) -> bool:
    """Is ``node`` a condition spelled where it is passed (``not backward_expected``,
    ``a and grad``, ``n > 0``, ``torch.is_grad_enabled()``), not a value computed
    elsewhere (a tensor whose arms differ is judged by the arms)?"""
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.Not)
    return isinstance(node, (ast.BoolOp, ast.Compare)) or (
        isinstance(node, ast.Call) and not node.args and not node.keywords
    )


def _expanded(keywords: list[tuple[str | None, Value]]) -> list[tuple[str, Value]]:
    """Keyword arguments, ``**{"async_op": ...}`` spread into its entries."""
    out: list[tuple[str, Value]] = []
    for keyword, value in keywords:
        if keyword is not None:
            out.append((keyword, value))
        else:
            out.extend(value.fields or ())
    return out


def interpret(context: Context, info: FunctionInfo | None) -> FunctionResult:
    return Interpreter(context, info).run()


def pure_grad_values(values: Iterable[Value], bdd: Manager) -> Value | None:
    """The one grad-mode value all of ``values`` are (same polarity), else None."""
    chosen: Value | None = None
    for value in values:
        if not bdd.is_pure_grad(value.bdd):
            return None
        if chosen is None:
            chosen = value
        elif bdd.polarity(chosen.bdd) != bdd.polarity(value.bdd):
            return None
    if chosen is None:
        return None
    # grad mode itself (not the variable of one read), for the places it flows to
    return replace(chosen, bdd=bdd.real(chosen.bdd))


__all__ = [
    "CallSite",
    "Callable",
    "Context",
    "Decision",
    "FunctionResult",
    "Interpreter",
    "interpret",
    "pure_grad_values",
]
