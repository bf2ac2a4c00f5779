import torch.nn as nn

from .hook import GeminiZeROHook


class GeminiDDP(nn.Module):

    def __init__(self, module, hook: GeminiZeROHook):
        super().__init__()
        self.module = module
        self.param_op_hook = hook
        self.module.register_forward_pre_hook(self.param_op_hook.pre_forward)
        for sub in self.module.modules():
            sub.register_forward_pre_hook(self._pre_op_hook)

    def _pre_op_hook(self, sub, inputs):
        params = list(sub.parameters(recurse=False))
        if params:
            self.param_op_hook.pre_op(params)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)
