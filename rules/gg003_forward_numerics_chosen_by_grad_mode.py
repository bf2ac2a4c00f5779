"""GG003: a forward numerics or kernel mode chosen by the grad mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradgate.rule import Invalid, Rule, Valid

if TYPE_CHECKING:
    from gradgate.model.bdd import Manager
    from gradgate.model.interpret import Decision


class ForwardNumericsChosenByGradMode(Rule):
    """
    ## What it does
    Flags a forward numerics or kernel mode that grad mode gates (grad mode followed as
    a value, as GG001 does):

    - the training or dropout mode handed to a kernel we cannot see, by keyword
      (`training=`, `dropout_p=`, ...) or positionally (an argument built from a
      `training` flag), when turning grad mode off can only turn it off
      (`config.training and config.is_grad_enabled`);
    - `.train()` / `.eval()` run or not depending on grad mode (any dependence);
    - any other keyword argument of such a kernel by which it computes (`torch.topk(...,
      sorted=torch.is_grad_enabled())`), when turning grad mode off can only turn it off;
      autograd's own arguments (`requires_grad=`, `columnwise=`, `use_reentrant=`, names
      of saving, caching, hooks, graphs) are not the forward's numerics;
    - the function computing the forward chosen by grad mode (`fn = fused if grad else
      reference; fn(x)`), unless the path taken without grad is one that has no backward
      (named for inference, decoding or a fast path: the opposite polarity);
    - any arm of an `if` or a conditional expression that needs grad mode on to run and
      does something in the forward the other arm does not (`if grad: logits =
      logits.float()`, `if not grad: return spec` before the masking, `dtype = float32
      if grad else x.dtype`). What an arm does is compared by its statements whose
      values reach what the function returns; autograd's bookkeeping does not count
      (saving for backward, `ctx`, hooks, `detach`, auxiliary losses, statistics kept on
      the object, checkpoint wrappers, `Fn.apply` chosen over the same computation),
      nor does a path refused while grad is on (`if fast and not grad:`, `if grad or
      compiling: return reference(x)`: the opposite polarity).
    - a flag named for the precision the forward computes in (`upcast`, `full_prec`,
      `*_dtype`) that grad mode changes, either polarity (`upcast = fp16 and (in_fp32 or
      not grad)`).

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
        Valid("import torch\nx = torch.empty(3, requires_grad=torch.is_grad_enabled())\n"),
        Valid("out = kernel(x, config.training)\n"),
        Valid("needs_input = training and is_grad_enabled\n"),
        Valid("if self.training and is_grad_enabled:\n    ctx.save_for_backward(x)\n"),
        Valid("out = kernel(x, training=self.training and not is_grad_enabled)\n"),
        Valid("if is_grad_enabled:\n    model.zero_grad()\n"),
        Valid("margin = self.fwd_margin if is_grad_enabled else self.inf_margin\n"),
        Valid(
            "import torch\ndef f(x, fast):\n    if fast and not torch.is_grad_enabled():\n"
            "        return fast_kernel(x)\n    return reference(x)\n"
        ),
        Valid(
            "import torch\ndef f(self, probs):\n    if torch.is_grad_enabled():\n"
            "        me = probs.mean(0)\n        self.l_aux = (me * me).sum()\n    return probs\n"
        ),
    ]
    INVALID = [
        Invalid(
            # Megatron-LM core_v0.19.0 moe_utils.py: top-k sorted only with grad on
            "import torch\ndef route(scores, k):\n    return torch.topk(scores, k, sorted=torch.is_grad_enabled())\n",
            line=3,
            column=41,
        ),
        Invalid(
            # DeepSpeed's fused transformer: grad mode stored on the config, then conjoined
            "import torch\n"
            "config.is_grad_enabled = torch.is_grad_enabled()\n"
            "out = forward_func(layer_id, x, config.training and config.is_grad_enabled, pre_ln)\n",
            line=3,
            column=53,
        ),
        Invalid(
            "import torch\nout = fused_dropout_add(x, y, p, training=self.training and torch.is_grad_enabled())\n",
            line=2,
            column=61,
        ),
        Invalid(
            "import torch\nif not torch.is_grad_enabled():\n    runner.eval()\n",
            line=2,
            column=8,
        ),
        Invalid(
            # trl's GRPO log-probs: upcast only with grad on, so the no_grad reference differs
            "import torch\ndef logps(logits):\n    if torch.is_grad_enabled():\n"
            "        logits = logits.float()\n    return logits.log_softmax(-1)\n",
            line=3,
            column=8,
        ),
        Invalid(
            # apex's fused softmax: upcast only without grad, so the log-prob pass differs
            "import torch\ndef softmax(x, fp16, in_fp32):\n"
            "    upcast = fp16 and (in_fp32 or not torch.is_grad_enabled())\n"
            "    return x.float().softmax(-1) if upcast else x.softmax(-1)\n",
            line=3,
            column=39,
        ),
    ]

    DECISIONS = frozenset(
        {
            "mode",
            "regulariser",
            "mode-switch",
            "kernel-option",
            "kernel-switch",
            "kernel-flag",
            "callee",
            "branch",
            "choice",
        }
    )
    FIXES = False

    @classmethod
    def judge(cls, decision: Decision, bdd: Manager) -> bool:
        """A flag naming the precision counts any way grad mode changes it (a dtype
        chosen by a ternary; `upcast = fp16 and (in_fp32 or not grad)`): the precision
        a forward computes in has nothing to do with whether a backward exists, so the
        opposite polarity is no excuse there."""
        if decision.kind == "kernel-flag":
            return bdd.depends_on_grad(decision.bdd)
        return super().judge(decision, bdd)

    @classmethod
    def describe(cls, decision: Decision, read: str) -> str:
        if decision.kind in ("kernel-option", "kernel-switch"):
            return (
                f"argument `{decision.name}=` of a forward kernel is gated on grad mode (`{read}`): "
                "under torch.no_grad() the forward computes differently"
            )
        if decision.kind == "kernel-flag":
            return (
                f"`{decision.name}`, which chooses the forward's precision, is chosen by grad mode "
                f"(`{read}`): under torch.no_grad() the forward computes differently"
            )
        if decision.kind == "choice":
            return (
                f"the constant handed as `{decision.name}` to a forward call is chosen by grad mode (`{read}`): "
                "under torch.no_grad() the forward runs with another option"
            )
        if decision.kind == "callee":
            return (
                f"the function computing the forward (`{decision.name}`) is chosen by grad mode (`{read}`): "
                "under torch.no_grad() another kernel computes it"
            )
        if decision.kind == "branch":
            return (
                f"the forward runs `{decision.name}` only where grad mode is on (`{read}`): "
                "under torch.no_grad() it takes another path"
            )
        if decision.kind == "regulariser":
            return (
                f"training-only `{decision.name}` is gated on grad mode (`{read}`): grad mode stands in for "
                "training mode, so a training forward under torch.no_grad() computes differently"
            )
        if decision.kind == "mode-switch":
            return (
                f"module mode switched on grad mode (`{read}`): "
                "the forward's numerics (dropout, norms) differ under torch.no_grad()"
            )
        return (
            f"training mode conjoined with grad mode (`{read}`) chooses the forward's numerics: "
            "reentrant checkpointing then recomputes a different forward"
        )
