"""The kinds of forward decision the model recognises: one registry, read by the
interpreter (which records decisions of a kind), the summaries (which say what a
parameter decides) and the rules (which report the kinds they name).

A kind says how grad mode must act on a decision for it to be a finding:

- *forced off* (``any_way=False``): turning grad mode off can only turn the decision
  off, while with grad mode on it can still be on. The opposite polarity (grad mode on
  forces it off: refusing a path that has no backward) is correct.
- *any way* (``any_way=True``): the decision is a choice between values (a process
  group, a stream, a callee, a module's mode), and any dependence on grad mode is one.

``intent`` says what the decision is for, which is what a fix may substitute for
grad mode: ``performance`` (a communication or overlap path: its grad-on value),
``numerics`` (a kernel's arguments or the callee computing the forward: report only),
``training`` (grad mode standing in for training mode: ``module.training``, unsafe),
``dead-read`` (grad mode read where it is always off: inside ``Function.forward``).
"""

from __future__ import annotations

from ..records import record


@record
class DecisionKind:
    name: str
    #: does any dependence on grad mode count (a choice), not only "forced off"?
    any_way: bool
    #: how a flow step names what is decided ("decides `x` here (...)")
    words: str
    intent: str


_KINDS: dict[str, DecisionKind] = {}


def register(kind: DecisionKind) -> DecisionKind:
    if kind.name in _KINDS:
        raise ValueError(f"decision kind {kind.name!r} registered twice")
    _KINDS[kind.name] = kind
    return kind


def kind_of(name: str) -> DecisionKind:
    """The registered kind called ``name`` (a KeyError names an unregistered one)."""
    return _KINDS[name]


def kinds() -> tuple[DecisionKind, ...]:
    return tuple(_KINDS.values())


FLAG = register(DecisionKind("flag", False, "a forward communication flag", "performance"))
COMM = register(DecisionKind("comm", False, "whether a forward collective runs", "performance"))
COMM_OPTION = register(DecisionKind("comm-option", False, "an option of a forward collective", "performance"))
SELECTION = register(DecisionKind("selection", True, "the process group of a forward collective", "performance"))
MODE = register(DecisionKind("mode", False, "a kernel's training mode", "training"))
REGULARISER = register(
    DecisionKind("regulariser", False, "a training-only computation run only with grad on", "training")
)
KERNEL_OPTION = register(DecisionKind("kernel-option", False, "an argument of a forward kernel", "numerics"))
KERNEL_SWITCH = register(
    DecisionKind("kernel-switch", True, "a switch of a forward kernel spelled as a condition", "numerics")
)
KERNEL_FLAG = register(DecisionKind("kernel-flag", True, "a flag naming the forward's precision", "numerics"))
CHOICE = register(DecisionKind("choice", True, "a constant handed to a forward call", "numerics"))
CALLEE = register(DecisionKind("callee", True, "the function computing the forward", "numerics"))
MODE_SWITCH = register(DecisionKind("mode-switch", True, "a module's train/eval switch", "training"))
MODE_SELECTOR = register(DecisionKind("mode-selector", True, "a selector by train/eval mode", "training"))
BRANCH = register(DecisionKind("branch", False, "what an arm of the forward runs", "numerics"))
SERIALISED = register(
    DecisionKind("serialised", False, "whether the forward overlaps what the other arm waits for", "performance")
)
FUNCTION_FORWARD_READ = register(
    DecisionKind("function-forward-read", False, "grad mode read in autograd.Function.forward", "dead-read")
)

#: the kinds a comparison of a decision's arms records (:mod:`.arms`): not asked where
#: the decision asks the module's training mode too
ARM_KINDS = frozenset({BRANCH.name, SERIALISED.name})

#: the names of the kinds where any dependence on grad mode counts
ANY_WAY_KINDS = frozenset(k.name for k in _KINDS.values() if k.any_way)
