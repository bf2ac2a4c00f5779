"""GG001: a forward communication/overlap flag conjoined with the grad mode."""

from __future__ import annotations

import ast

from gradgate import lazycst as cst

from gradgate.boolchain import has_comment
from gradgate.gates import call_name, contains_direct_call, grad_gates, is_falsy_constant, strip_not
from gradgate.gradmode import dotted_name
from gradgate.rule import Invalid, Replacement, Rule, Valid
from gradgate.semantic import Polarity, ast_dotted, direct_nodes, own_nodes


def _forward_owner(owner: str | None) -> bool:
    """Can an attribute of ``owner`` (a dotted name, None if not one) be a forward flag?
    Not on ``ctx``: what is stored there is backward state."""
    return owner is not None and owner != "ctx" and not owner.startswith("ctx.")


def _flag_name(target: cst.BaseExpression) -> str | None:
    """The flag an assignment sets: ``x`` or ``obj.x``, never ``ctx.x`` (backward state)."""
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute) and _forward_owner(dotted_name(target.value)):
        return target.attr.value
    return None


def _ast_flag(target: ast.expr, model, scope) -> bool:
    """The stdlib-``ast`` twin of :meth:`ForwardCommFlagGatedOnGradMode._flag`."""
    if isinstance(target, ast.Name):
        return model.flag_kind(scope, target.id) == "comm"
    if isinstance(target, ast.Attribute):
        return _forward_owner(ast_dotted(target.value)) and model.config.is_forward_comm_flag(target.attr)
    return False


class ForwardCommFlagGatedOnGradMode(Rule):
    """
    ## What it does
    Flags an assignment to a forward-path communication or overlap flag (a name such as
    `ub_overlap_ag_fprop`, `ub_overlap_rs`, `*_all_gather_*`) whose value is an `and`
    chain holding the autograd grad mode: `torch.is_grad_enabled()` (under any import
    alias), a local assigned from it, or a variable, parameter or attribute named
    `is_grad_enabled` / `grad_enabled`.

    ## Why is this bad?
    Grad mode says whether autograd records the forward for a backward pass; it says
    nothing about how the forward should communicate. Under `torch.no_grad()` (inference,
    and the first forward of reentrant activation checkpointing) such a flag silently
    turns off a communication/GEMM overlap the caller explicitly asked for, so two
    identical forwards take different paths: the checkpointed forward loses the overlap,
    and inference runs the slow path. This is TransformerEngine issue #2902.

    Backward-path flags (`*dgrad*`, `*wgrad*`, `ub_bulk_*`, anything stored on `ctx`)
    and the opposite polarity (`flag and not is_grad_enabled`, refusing a path that has
    no backward while grad is on) are legitimate and not reported.

    ## Example
    ```python
    ub_overlap_ag_fprop = (
        ub_overlap_ag_fprop and is_grad_enabled and not return_layernorm_output
    )
    ```

    ## Use instead
    ```python
    ub_overlap_ag_fprop = (
        ub_overlap_ag_fprop and not return_layernorm_output
    )
    ```

    ## Fix safety
    The fix removes the grad-mode operand and one adjoining `and`, and nothing else:
    parentheses, line breaks and comments stay. It changes behaviour on purpose: the
    forward now takes the requested overlap path under `no_grad` too. That is safe when
    the path needs nothing that only exists while grad is on (TransformerEngine's
    LayerNormLinear all-gather overlap does not; the `gradgate harness` proves it on
    GPUs). When removing the operand would drop a comment the finding is reported
    without a fix, and so is `flag &= <grad mode>` alone (the fix would delete a
    statement, maybe the only one of its block); `flag &= x and <grad mode>` is fixed.

    ## References
    - TransformerEngine issue #2902: https://github.com/NVIDIA/TransformerEngine/issues/2902
    - The upstream fix, TransformerEngine PR #3546: https://github.com/NVIDIA/TransformerEngine/pull/3546
    - TransformerEngine issue #1398 (the same gate, reported earlier)
    """

    CODE = "GG001"
    NAME = "forward-comm-flag-gated-on-grad-mode"
    MESSAGE = "forward communication flag gated on grad mode"

    VALID = [
        Valid("backward_needs_input = is_grad_enabled and weight_requires_grad\n"),
        Valid("ub_overlap_rs_dgrad = ub_overlap_rs_dgrad and is_grad_enabled\n"),
        Valid("ub_bulk_wgrad = ub_bulk_wgrad and is_grad_enabled\n"),
        Valid("ctx.ub_overlap_ag = ub_overlap_ag and is_grad_enabled\n"),
        Valid("import torch\nfast_path = fast_path and not torch.is_grad_enabled()\n"),
        Valid("ub_overlap_ag = ub_overlap_ag and not is_grad_enabled\n"),
        Valid(
            "quantizer.set_usage(rowwise=True, columnwise=is_grad_enabled and not fsdp2)\n"
        ),
        Valid("if is_grad_enabled:\n    ctx.save_for_backward(x)\n"),
        Valid("ub_overlap_ag = ub_overlap_ag and not return_layernorm_output\n"),
        Valid("ub_overlap_ag = ub_overlap_ag or is_grad_enabled\n"),
        Valid("import torch\nub_overlap_ag = torch.is_grad_enabled\n"),
        Valid("def is_grad_enabled(): ...\nub_overlap_ag = ub_overlap_ag and some.is_grad_enabled()\n"),
    ]
    INVALID = [
        Invalid(
            "ub_overlap_ag_fprop = (\n"
            "    ub_overlap_ag_fprop and is_grad_enabled and not return_layernorm_output\n"
            ")\n",
            line=2,
            column=29,
            expected_replacement="ub_overlap_ag_fprop = (\n"
            "    ub_overlap_ag_fprop and not return_layernorm_output\n"
            ")\n",
        ),
        Invalid(
            "ub_overlap_rs = ub_overlap_rs and is_grad_enabled\n",
            line=1,
            column=35,
            expected_replacement="ub_overlap_rs = ub_overlap_rs\n",
        ),
        Invalid(
            "import torch as th\nub_overlap_ag = th.is_grad_enabled() and ub_overlap_ag\n",
            line=2,
            column=17,
            expected_replacement="import torch as th\nub_overlap_ag = ub_overlap_ag\n",
        ),
        Invalid(
            "from torch import is_grad_enabled as grad_on\n"
            "def f(ub_overlap_ag, x):\n"
            "    ub_overlap_ag = ub_overlap_ag and grad_on() and x\n",
            line=3,
            column=39,
            expected_replacement="from torch import is_grad_enabled as grad_on\n"
            "def f(ub_overlap_ag, x):\n"
            "    ub_overlap_ag = ub_overlap_ag and x\n",
        ),
        Invalid(
            "import torch\n"
            "def forward(self, x):\n"
            "    grad = torch.is_grad_enabled()\n"
            "    self.all_gather_overlap = self.all_gather_overlap and grad\n",
            line=4,
            column=59,
            expected_replacement="import torch\n"
            "def forward(self, x):\n"
            "    grad = torch.is_grad_enabled()\n"
            "    self.all_gather_overlap = self.all_gather_overlap\n",
        ),
        Invalid(
            "ub_overlap_ag = (\n"
            "    ub_overlap_ag  # requested by the user\n"
            "    and args.is_grad_enabled  # why?\n"
            "    and not return_layernorm_output_gathered\n"
            ")\n",
            line=3,
            column=9,
            expected_replacement=None,
        ),
        Invalid(
            "ub_overlap_ag = (\n"
            "    ub_overlap_ag\n"
            "    and is_grad_enabled  # only while training\n"
            "    and not return_layernorm_output_gathered\n"
            ")\n",
            line=3,
            column=9,
            expected_replacement="ub_overlap_ag = (\n"
            "    ub_overlap_ag  # only while training\n"
            "    and not return_layernorm_output_gathered\n"
            ")\n",
        ),
        Invalid(
            "ub_overlap_ag: bool = ub_overlap_ag and (grad_enabled and not x)\n",
            line=1,
            column=42,
            expected_replacement="ub_overlap_ag: bool = ub_overlap_ag and (not x)\n",
        ),
        Invalid(
            "def f(ub_overlap_ag, is_grad_enabled):\n"
            "    ub_overlap_ag &= is_grad_enabled\n"
            "    return ub_overlap_ag\n",
            line=2,
            column=22,
            expected_replacement=None,
        ),
        Invalid(
            "ub_overlap_ag &= is_grad_enabled and not x\n",
            line=1,
            column=18,
            expected_replacement="ub_overlap_ag &= not x\n",
        ),
        Invalid(
            "ub_overlap_ag = ub_overlap_ag and is_grad_enabled and torch.is_grad_enabled()\n",
            line=1,
            column=35,
            count=2,
            expected_replacement="ub_overlap_ag = ub_overlap_ag\n",
        ),
    ]

    @classmethod
    def candidate(cls, statement, model, scope) -> bool:
        if isinstance(statement, ast.If):
            # `if not grad: flag = False`, `if grad: flag = x / else: flag = False`
            if model.polarity(statement.test, scope) is not Polarity.NONE and any(
                _ast_flag(target, model, scope)
                for node in (*statement.body, *statement.orelse) if isinstance(node, ast.Assign)
                for target in node.targets
            ):
                return True
            # `if <a and grad and b>: <forward communication>`
            return model.gate_shaped(statement.test, scope) and any(
                isinstance(node, ast.Call) and model.is_comm_call(node, scope)
                for node in direct_nodes(statement.body)
            )
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            gated = model.gate_shaped(statement.value, scope) or (
                isinstance(statement, ast.AugAssign) and model.polarity(statement.value, scope) is Polarity.GRAD
            )
            if gated and len(targets) == 1 and _ast_flag(targets[0], model, scope):
                return True
        return any(
            isinstance(node, ast.Call)
            and any(k.arg and model.config.is_forward_comm_flag(k.arg) and model.gate_shaped(k.value, scope)
                    for k in node.keywords)
            for node in own_nodes(statement)
        )

    # -- what is a forward communication flag ---------------------------------------
    def _flag(self, target: cst.BaseExpression) -> str | None:
        """The forward communication flag an assignment sets, or None."""
        if isinstance(target, cst.Name):
            kind = self.context.model.flag_kind(self.context.grad.scope(target), target.value)
            return target.value if kind == "comm" else None
        name = _flag_name(target)
        if name is not None and self.context.config.is_forward_comm_flag(name):
            return name
        return None

    def _is_comm_call(self, call: cst.Call) -> bool:
        dotted, last = call_name(call)
        return self.context.model.is_comm_callee(dotted, last, self.context.grad.scope(call))

    # -- assignments and keyword arguments --------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            self._check(node.targets[0].target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._check(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if not isinstance(node.operator, cst.BitAndAssign):
            return
        flag = self._flag(node.target)
        if flag is None:
            return
        if self.context.grad.is_grad_mode(node.value):
            # nothing to keep: the fix would delete the statement, which may be the
            # only one of its block; that is a judgement call, so report only
            self._report(flag, node.value, None)
        else:
            self._check(node.target, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        for argument in node.args:
            keyword = argument.keyword.value if argument.keyword is not None else None
            if keyword is not None and self.context.config.is_forward_comm_flag(keyword):
                for gate in grad_gates(argument.value, self.context.grad):
                    self._report(keyword, gate.operand, gate.replacement)

    def _check(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        flag = self._flag(target)
        if flag is None:
            return
        for gate in grad_gates(value, self.context.grad):
            self._report(flag, gate.operand, gate.replacement)

    # -- control flow ---------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        grad = self.context.grad
        polarity = grad.polarity(node.test)
        if polarity is Polarity.NO_GRAD and node.orelse is None:
            # if not grad: flag = False
            flags = _falsy_assignments(node.body)
            if flags and all(self._flag(t) for t in flags):
                fix = None if has_comment(node) else Replacement(node, cst.RemoveFromParent())
                self._report(self._flag(flags[0]), strip_not(node.test), fix)
            return
        if polarity is Polarity.GRAD:
            # if grad: flag = x / else: flag = False
            kept = _single_assignment(node.body)
            dropped = _single_assignment(node.orelse.body) if isinstance(node.orelse, cst.Else) else None
            if (
                kept is not None and dropped is not None
                and isinstance(dropped.value, cst.BaseExpression) and is_falsy_constant(dropped.value)
                and _same_target(kept, dropped) and self._flag(kept.targets[0].target)
            ):
                fix = None if has_comment(node.orelse) or _has_comment_outside(node) else Replacement(
                    node, cst.FlattenSentinel(node.body.body)
                )
                self._report(self._flag(kept.targets[0].target), strip_not(node.test), fix)
            return
        # if <a and grad and b>: <forward communication>
        gates = grad_gates(node.test, grad)
        if gates and contains_direct_call(node.body, self._is_comm_call):
            for gate in gates:
                self._report_control(gate.operand, gate.replacement)

    # -- reporting ------------------------------------------------------------------
    def _report(self, flag: str | None, operand: cst.CSTNode, replacement: Replacement | None) -> None:
        grad = self.context.module.code_for_node(operand).strip()
        self.report(
            operand,
            f"forward communication flag `{flag}` is gated on grad mode (`{grad}`): "
            "under torch.no_grad() the requested path is silently dropped",
            replacement,
        )

    def _report_control(self, operand: cst.CSTNode, replacement: Replacement | None) -> None:
        grad = self.context.module.code_for_node(operand).strip()
        self.report(
            operand,
            f"forward communication is gated on grad mode (`{grad}`): "
            "under torch.no_grad() it is silently skipped",
            replacement,
        )


def _falsy_assignments(block: cst.BaseSuite) -> list[cst.BaseExpression]:
    """Targets of a block made only of ``flag = False`` statements (else [])."""
    targets = []
    statements = block.body if isinstance(block, cst.IndentedBlock) else [block]
    for line in statements:
        if not isinstance(line, cst.SimpleStatementLine):
            return []
        for small in line.body:
            if not (
                isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and is_falsy_constant(small.value)
                and not (isinstance(small.value, cst.Name) and small.value.value == "None")
            ):
                return []
            targets.append(small.targets[0].target)
    return targets


def _single_assignment(block) -> cst.Assign | None:
    if not isinstance(block, cst.IndentedBlock) or len(block.body) != 1:
        return None
    line = block.body[0]
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    small = line.body[0]
    return small if isinstance(small, cst.Assign) and len(small.targets) == 1 else None


def _same_target(a: cst.Assign, b: cst.Assign) -> bool:
    return cst.Module([]).code_for_node(a.targets[0].target) == cst.Module([]).code_for_node(b.targets[0].target)


def _has_comment_outside(node: cst.If) -> bool:
    """A comment on the ``if`` line itself (kept body statements keep their own)."""
    return has_comment(node.with_changes(body=cst.IndentedBlock([]), orelse=None))
