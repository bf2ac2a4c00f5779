"""GG002: the grad mode read inside ``torch.autograd.Function.forward``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradgate.rule import Invalid, Rule, Valid

if TYPE_CHECKING:
    from gradgate.model.analysis import Entry, ModuleAnalysis
    from gradgate.model.bdd import Manager
    from gradgate.model.interpret import Decision


class GradModeReadInAutogradFunctionForward(Rule):
    """
    ## What it does
    Flags a call of `torch.is_grad_enabled()` (or `torch.is_inference_mode_enabled()`,
    under any alias) inside the `forward` of a `torch.autograd.Function` subclass.

    ## Why is this bad?
    `Function.apply` runs `forward` with grad mode disabled, so inside it
    `torch.is_grad_enabled()` is always False: every decision taken on it silently
    takes the no-grad branch (no overlap, nothing saved for backward, a different
    kernel), whatever the caller's mode. That is why TransformerEngine captures
    `is_grad_enabled = torch.is_grad_enabled()` in the *module's* `forward` and passes
    it into the autograd function as an argument; gradgate leaves such parameters alone.

    ## Example
    ```python
    class _Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, inp, weight, ub_overlap_ag):
            if ub_overlap_ag and torch.is_grad_enabled():   # always False here
                ...
    ```

    ## Use instead
    ```python
    class _Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, inp, weight, ub_overlap_ag, is_grad_enabled):
            ...

    # in the module's forward, where grad mode is still the caller's:
    out = _Linear.apply(inp, weight, ub_overlap_ag, torch.is_grad_enabled())
    ```

    ## Fix safety
    No automatic fix: the value has to be captured by the caller and threaded through
    `apply`, which changes the function's signature and every call site.

    ## References
    - PyTorch, "Extending torch.autograd": https://pytorch.org/docs/stable/notes/extending.html
    - TransformerEngine's `LayerNormLinear.forward` passing `is_grad_enabled` down (see #2902)
    """

    CODE = "GG002"
    NAME = "grad-mode-read-in-autograd-function-forward"
    MESSAGE = "grad mode read inside torch.autograd.Function.forward, where it is always off"

    VALID = [
        Valid(
            "import torch\n"
            "class F(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, is_grad_enabled):\n"
            "        if is_grad_enabled:\n"
            "            ctx.save_for_backward(x)\n"
            "        return x\n"
        ),
        Valid(
            "import torch\n"
            "class M(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        return F.apply(x, torch.is_grad_enabled())\n"
        ),
        Valid(
            "import torch\n"
            "class F(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def backward(ctx, g):\n"
            "        return g if torch.is_grad_enabled() else g.detach()\n"
        ),
        Valid(
            "class Function: ...\n"
            "import torch\n"
            "class F(Function):\n"
            "    def forward(ctx, x):\n"
            "        return x if torch.is_grad_enabled() else x\n"
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\n"
            "class F(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, ub_overlap_ag):\n"
            "        if ub_overlap_ag and torch.is_grad_enabled():\n"
            "            x = x + 1\n"
            "        return x\n",
            line=5,
            column=30,
        ),
        Invalid(
            "from torch.autograd import Function\n"
            "from torch import is_grad_enabled as grad_on\n"
            "class F(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        requires = grad_on()\n"
            "        return x, requires\n",
            line=6,
            column=20,
        ),
    ]

    DECISIONS = frozenset({"function-forward-read"})
    FIXES = False

    @classmethod
    def judge(cls, decision: Decision, bdd: Manager) -> bool:
        return True

    @classmethod
    def entries(cls, analysis: ModuleAnalysis, decision: Decision) -> list[Entry]:
        from gradgate.model.analysis import Entry

        result = analysis.results.get(decision.function)
        found = result.origins.get(decision.node) if result is not None else None
        if found is None:
            return []
        return [Entry(decision, decision.node, found[0], False, (), ())]
