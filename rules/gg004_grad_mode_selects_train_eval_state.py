"""GG004: grad mode used where the train/eval mode is meant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradgate.rule import Invalid, Rule, Valid

if TYPE_CHECKING:
    from gradgate.model.interpret import Decision


class GradModeSelectsTrainEvalState(Rule):
    """
    ## What it does
    Flags a selector (a function or method of the module: a cache of coordinators, a
    dict of states, a factory) that one call feeds a module's train/eval mode
    (`training=sub_module.training`) and another call feeds grad mode, directly or by
    being made only under a grad-mode condition
    (`if not torch.is_grad_enabled(): get_coordinator(training=False)`).

    ## Why is this bad?
    Grad mode and train/eval mode are independent: `model.train()` under `torch.no_grad()`
    (the first forward of reentrant checkpointing, or a validation pass that keeps
    dropout) has grad off and training on. A selector keyed by `training` but fed grad
    mode then picks the other state: DeepSpeed issue #4922, where ZeRO-3's end-of-forward
    hook resets the eval coordinator while the forward hooks used the training one.

    ## Example
    ```python
    def _end_of_forward_hook(module, *args):
        if not torch._C.is_grad_enabled():
            self.get_param_coordinator(training=False).reset_step()
    ```

    ## Use instead
    ```python
    def _end_of_forward_hook(module, *args):
        if not module.training:
            self.get_param_coordinator(training=module.training).reset_step()
    ```

    ## Fix safety
    Report only: which mode the selector should see is for a person to decide.

    ## References
    - DeepSpeed issue #4922: https://github.com/microsoft/DeepSpeed/issues/4922
    """

    CODE = "GG004"
    NAME = "grad-mode-selects-train-eval-state"
    MESSAGE = "grad mode used where the train/eval mode is meant"
    DECISIONS = frozenset({"mode-selector"})
    FIXES = False

    VALID = [
        Valid(
            "class C:\n"
            "    def get(self, training): ...\n"
            "    def pre(self, m):\n"
            "        self.get(training=m.training)\n"
            "    def post(self, m):\n"
            "        if not m.training:\n"
            "            self.get(training=False).reset()\n"
        ),
        Valid(
            "import torch\n"
            "class C:\n"
            "    def get(self, training): ...\n"
            "    def post(self, m):\n"
            "        if not torch.is_grad_enabled():\n"
            "            self.get(training=False).reset()\n"  # no caller feeds it .training
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\n"
            "class C:\n"
            "    def get(self, training): ...\n"
            "    def pre(self, m):\n"
            "        self.get(training=m.training)\n"
            "    def hooks(self):\n"
            "        def post(m):\n"
            "            if not torch._C.is_grad_enabled():\n"
            "                self.get(training=False).reset()\n"
            "        return post\n",
            line=8,
            column=20,
        ),
        Invalid(
            "import torch\n"
            "def get(training): ...\n"
            "def pre(m):\n"
            "    return get(m.training)\n"
            "def post(m):\n"
            "    return get(torch.is_grad_enabled())\n",
            line=6,
            column=16,
        ),
    ]

    @classmethod
    def describe(cls, decision: Decision, read: str) -> str:
        return (
            f"`{decision.name}` is fed grad mode here (`{read}`) but a module's train/eval mode "
            "elsewhere: under model.train() with torch.no_grad() it picks the other state"
        )
