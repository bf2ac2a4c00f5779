"""GG003: a forward numerics or kernel mode chosen by the grad mode."""

from __future__ import annotations

import ast
import re

from gradgate import lazycst as cst

from gradgate.boolchain import conjuncts, is_and
from gradgate.gates import contains_direct_call, strip_not
from gradgate.rule import Invalid, Rule, Valid
from gradgate.semantic import Polarity, direct_nodes, own_nodes

_TRAINING = re.compile(r"^(is_)?train(ing)?(_mode)?$")
_MODE_SWITCHES = frozenset({"eval", "train"})


def _is_training_flag(node: cst.BaseExpression) -> bool:
    name = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else None
    return name is not None and bool(_TRAINING.match(name))


def _switches_mode(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in _MODE_SWITCHES


class ForwardNumericsChosenByGradMode(Rule):
    """
    ## What it does
    Flags a forward numerics or kernel mode chosen by the grad mode:

    - a `training and is_grad_enabled` conjunction handed to a call (typically a fused
      kernel's `training` / `training_mode` argument that turns dropout off when False);
    - an `if` on the grad mode (either polarity) that switches a module to `.eval()` or
      `.train()`.

    ## Why is this bad?
    Training mode decides the forward's numerics (dropout, batch-norm statistics); grad
    mode only decides whether autograd records. Mixing them makes the first forward of
    reentrant activation checkpointing (run under `torch.no_grad()`) compute something
    different from its recompute in the backward (run with grad on): the activations the
    backward uses are not the ones the forward produced, silently.

    ## Example
    ```python
    out = fused_transformer_forward(x, w, config.training and config.is_grad_enabled)
    ```

    ## Use instead
    ```python
    out = fused_transformer_forward(x, w, config.training)
    ```

    ## Fix safety
    Report only. Whether the kernel may run its training numerics without autograd (it
    may need the dropout mask only for backward) is for a person to decide.

    ## References
    - TransformerEngine issue #2902 (the same mode confusion on communication)
    - PyTorch `torch.utils.checkpoint` notes on reentrant checkpointing and RNG state:
      https://pytorch.org/docs/stable/checkpoint.html
    """

    CODE = "GG003"
    NAME = "forward-numerics-chosen-by-grad-mode"
    MESSAGE = "forward numerics chosen by grad mode"

    VALID = [
        Valid("out = kernel(x, config.training)\n"),
        Valid("needs_input = training and is_grad_enabled\n"),
        Valid("if self.training and is_grad_enabled:\n    ctx.save_for_backward(x)\n"),
        Valid("out = kernel(x, training=self.training and not is_grad_enabled)\n"),
        Valid("if is_grad_enabled:\n    model.zero_grad()\n"),
        Valid("margin = self.fwd_margin if is_grad_enabled else self.inf_margin\n"),
    ]
    INVALID = [
        Invalid(
            "out = forward_func(layer_id, x, config.training and config.is_grad_enabled, pre_ln)\n",
            line=1,
            column=53,
        ),
        Invalid(
            "import torch\n"
            "out = fused_dropout_add(x, y, p, training=self.training and torch.is_grad_enabled())\n",
            line=2,
            column=61,
        ),
        Invalid(
            "import torch\n"
            "if not torch.is_grad_enabled():\n"
            "    runner.eval()\n",
            line=2,
            column=8,
        ),
    ]

    @classmethod
    def candidate(cls, statement, model, scope) -> bool:
        if isinstance(statement, ast.If) and any(
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MODE_SWITCHES
            for node in direct_nodes(statement.body)
        ):
            return True
        for node in own_nodes(statement):
            if not isinstance(node, ast.Call):
                continue
            for value in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And) and any(
                    _TRAINING.match(getattr(v, "attr", getattr(v, "id", "")) or "") for v in value.values
                ):
                    return True
        return False

    def visit_Call(self, node: cst.Call) -> None:
        grad = self.context.grad
        for argument in node.args:
            value = argument.value
            if not is_and(value):
                continue
            operands = list(conjuncts(value))
            if not any(_is_training_flag(o) for o in operands):
                continue
            for operand in operands:
                if grad.polarity(operand) is Polarity.GRAD:
                    self.report(
                        operand,
                        "training mode conjoined with grad mode "
                        f"(`{self.context.module.code_for_node(operand).strip()}`) chooses the "
                        "forward's numerics: reentrant checkpointing then recomputes a different forward",
                    )

    def visit_If(self, node: cst.If) -> None:
        read = strip_not(node.test)
        if self.context.grad.polarity(read) is Polarity.NONE:
            return
        if contains_direct_call(node.body, _switches_mode):
            self.report(
                read,
                f"module mode switched on grad mode (`{self.context.module.code_for_node(read).strip()}`): "
                "the forward's numerics (dropout, norms) differ under torch.no_grad()",
            )
