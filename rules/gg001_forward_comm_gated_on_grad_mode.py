"""GG001: a forward communication decision gated on grad mode."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gradgate.rule import Invalid, Rule, Valid

if TYPE_CHECKING:
    from gradgate.model.interpret import Decision

#: a keyword naming a process group (the other selections: a stream, codecs, a bucket size)
_GROUP = re.compile(r"(^|_)(group|pg|process_group)$")


class ForwardCommGatedOnGradMode(Rule):
    """
    ## What it does
    Flags a forward communication decision that grad mode gates. gradgate follows grad
    mode as a value (`torch.is_grad_enabled()` under any alias, `torch._C.is_grad_enabled()`,
    `not torch.is_inference_mode_enabled()`, and the locals, attributes, tuple fields,
    dataclass fields, dict entries and helper parameters it flows into) and works out each
    decision as a boolean function of it. A decision is reported when turning grad mode
    off can only turn it off, while with grad mode on it can still be on. The decisions:

    - a flag that selects a communication path (named like `ub_overlap_ag`, `*_overlap*`,
      `*all_gather*`, `*_comm`, set in any target form: a name, attribute, subscript,
      dict value, walrus, keyword argument);
    - whether a forward communication *effect* happens. An effect is what a call
      communicates, compared across the arms of a decision: the operations it reaches
      (through the functions it runs: `_AllReduce.apply(x)` whose forward all-reduces is
      the same effect as `dist.all_reduce(x)`), its constant options (`async_op=True`),
      its process group and stream, in a loop or not. So `if grad: all_reduce(x,
      async_op=True) else: all_reduce(x)` is a decision (the async form is dropped under
      no_grad), and choosing `Fn.apply` or the raw collective of the same operation is
      not. Communication autograd records (`Fn.apply`, `torch.distributed.nn`, DTensor)
      run only with grad on, with no other form of it, is autograd's choice (the opposite
      polarity), as is a path whose condition asks `x.requires_grad`;
    - an option of a collective, by keyword (`async_op=`) or by position (a decision made
      of grad mode, not grad mode passed on), and the process group or stream it uses
      (`group=`, `with torch.cuda.stream(s)`: any dependence on grad mode counts);
    - flags named for communication (above, and `dispatch`, `prefetch`, `p2p`) where the
      function they are handed does not read them; `skip_`/`no_`/`disable_` flags say the
      path is *not* taken;
    - a path without grad that waits (`work.wait()`, `stream.synchronize()`) where the
      path asked for overlaps (defers the wait, launches on a side stream).

    A decision made in a function the call runs, in this module or another, is reported
    at its deciding predicate: in the callee, at the read of the parameter that carries
    grad mode, when grad mode itself is passed on or the callee is in another module; in
    the caller, where grad mode is combined into what is passed to a function of the same
    file (`f(async_op=self.async_op and grad)`). A slot another module fills with a value
    grad mode gates (`cfg.overlap_ag` of `cls(overlap_ag=m.ub_overlap_ag and grad)`) is
    reported where it is read, report only.

    The finding points at the grad-mode read through which grad mode enters the decision;
    the path it took from its capture is shown in `note:` lines (SARIF `codeFlows`).

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
    The fix sets the grad-mode read to its grad-on value and removes what that makes
    neutral: the operand and one adjoining `and` (an `or` operand that is now False), the
    `if not grad: flag = False` statement, the `else` of `if grad: flag = x else: flag = False`,
    the `if` around a collective; a statement that would become `x = x` (which pylint
    rejects, W0127) is deleted. Parentheses, line breaks and comments stay (a comment on a
    removed `if` line moves above the kept statement). A fix is offered only when it is
    proven: gradgate evaluates the fixed decision over every assignment of its conditions
    (in canonical form) and checks that it equals the old decision with grad mode on and
    is no longer gated. What cannot be proven, or would drop a comment, is report-only.

    - **safe** (applied by `gradgate fix`): the path needs nothing that only grad mode
      prepares; TransformerEngine 2.x's LayerNormLinear/LayerNormMLP gates (the
      `gradgate harness` shows on GPUs that the fixed overlap gives the same numbers).
    - **unsafe**, grad mode standing in for training mode (held as `training = ...`, read
      as `if training:`): the fix puts the module's mode, `self.training`, in the read's
      place, which changes what an eval forward under no_grad does too (apex
      SyncBatchNorm before 43246540).
    - **unsafe** (applied with `--unsafe-fixes`, shown otherwise): grad mode also decides,
      elsewhere in the same forward, how what the path needs is prepared: a call that takes
      grad mode itself and a value prepared on the gated path (TE 1.x's
      `_apply_normalization(..., ln_out, ..., is_grad_enabled)` writes the UserBuffers
      buffer only when grad is on). The message names that line.

    ## References
    - TransformerEngine issue #2902: https://github.com/NVIDIA/TransformerEngine/issues/2902
    - The upstream fix, TransformerEngine PR #3546: https://github.com/NVIDIA/TransformerEngine/pull/3546
    - TransformerEngine issue #1398 (the same gate, reported earlier)
    """

    CODE = "GG001"
    NAME = "forward-comm-gated-on-grad-mode"
    MESSAGE = "forward communication gated on grad mode"
    DECISIONS = frozenset({"flag", "comm", "comm-option", "selection", "serialised"})

    VALID = [
        # the autograd Function and the raw collective of the same operation: one effect
        Valid(
            "import torch\nimport torch.distributed as dist\nclass _AR(torch.autograd.Function):\n"
            "    @staticmethod\n    def forward(ctx, x):\n        dist.all_reduce(x)\n        return x\n"
            "def f(x):\n    if torch.is_grad_enabled():\n        return _AR.apply(x)\n"
            "    dist.all_reduce(x)\n    return x\n"
        ),
        Valid("backward_needs_input = is_grad_enabled and weight_requires_grad\n"),
        Valid("ub_overlap_rs_dgrad = ub_overlap_rs_dgrad and is_grad_enabled\n"),
        Valid("ub_bulk_wgrad = ub_bulk_wgrad and is_grad_enabled\n"),
        Valid("ctx.ub_overlap_ag = ub_overlap_ag and is_grad_enabled\n"),
        Valid("import torch\nfast_path = fast_path and not torch.is_grad_enabled()\n"),
        Valid("ub_overlap_ag = ub_overlap_ag and not is_grad_enabled\n"),
        Valid("quantizer.set_usage(rowwise=True, columnwise=is_grad_enabled and not fsdp2)\n"),
        Valid("if is_grad_enabled:\n    ctx.save_for_backward(x)\n"),
        Valid("ub_overlap_ag = ub_overlap_ag and not return_layernorm_output\n"),
        Valid("import torch\nub_overlap_ag = torch.is_grad_enabled\n"),
        Valid("def is_grad_enabled(): ...\nub_overlap_ag = ub_overlap_ag and some.is_grad_enabled()\n"),
    ]
    INVALID = [
        Invalid(
            # two arms that communicate differently: the async form is dropped under no_grad
            "import torch\nimport torch.distributed as dist\ndef f(x):\n    if torch.is_grad_enabled():\n"
            "        dist.all_reduce(x, async_op=True)\n    else:\n        dist.all_reduce(x)\n",
            line=4,
            column=8,
            expected_replacement="import torch\nimport torch.distributed as dist\ndef f(x):\n"
            "    dist.all_reduce(x, async_op=True)\n",
        ),
        Invalid(
            # grad mode forcing a path on is a gate too: without it the path is the caller's
            "ub_overlap_ag = ub_overlap_ag or is_grad_enabled\n",
            line=1,
            column=34,
        ),
        Invalid(
            "ub_overlap_ag_fprop = (\n    ub_overlap_ag_fprop and is_grad_enabled and not return_layernorm_output\n)\n",
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
            expected_replacement="",
        ),
        Invalid(
            "import torch as th\nub_overlap_ag = th.is_grad_enabled() and ub_overlap_ag\n",
            line=2,
            column=17,
            expected_replacement="import torch as th\n",
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
            expected_replacement="import torch\ndef forward(self, x):\n    grad = torch.is_grad_enabled()\n",
        ),
        Invalid(
            "ub_overlap_ag = (\n"
            "    ub_overlap_ag  # requested by the user\n"
            "    and is_grad_enabled  # why?\n"
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
            "def f(ub_overlap_ag, is_grad_enabled):\n    ub_overlap_ag &= is_grad_enabled\n    return ub_overlap_ag\n",
            line=2,
            column=22,
            expected_replacement="def f(ub_overlap_ag, is_grad_enabled):\n    return ub_overlap_ag\n",
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
            expected_replacement="",
        ),
    ]

    @classmethod
    def describe(cls, decision: Decision, read: str) -> str:
        name = decision.name
        if decision.kind == "flag":
            return (
                f"forward communication flag `{name}` is gated on grad mode (`{read}`): "
                "under torch.no_grad() the requested path is silently dropped"
            )
        if decision.kind == "comm" and "` (" in name:
            return (
                f"forward communication `{name}) is gated on grad mode (`{read}`): "
                "under torch.no_grad() another form of it runs"
            )
        if decision.kind == "comm":
            return (
                f"forward communication `{name}(...)` is gated on grad mode (`{read}`): "
                "under torch.no_grad() it is silently skipped"
            )
        if decision.kind == "serialised":
            return (
                f"the forward overlaps what `{name}` waits for only where grad mode is on (`{read}`): "
                "under torch.no_grad() it waits there instead"
            )
        if decision.kind == "selection" and name == "stream":
            return (
                f"the stream forward communication runs on is chosen by grad mode (`{read}`): "
                "the no_grad forward does not overlap it as the recompute does"
            )
        if decision.kind == "selection" and _GROUP.search(name):
            return (
                f"the process group (`{name}=`) of a forward collective is chosen by grad mode (`{read}`): "
                "the no_grad forward communicates in another group than the recompute"
            )
        if decision.kind == "selection":  # `codecs=`, `bucket_size=`: how it communicates
            return (
                f"`{name}=` of a forward collective is chosen by grad mode (`{read}`): "
                "the no_grad forward communicates otherwise than the recompute"
            )
        return (
            f"option `{name}=` of a forward collective is gated on grad mode (`{read}`): "
            "under torch.no_grad() the collective runs differently"
        )
