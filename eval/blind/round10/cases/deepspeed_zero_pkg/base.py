# Base class whose helper reads grad mode; subclasses decide with it.
import torch


class GradAwareHookBase:
    def _is_grad_pass(self) -> bool:
        return torch.is_grad_enabled()

    def _register_backward_hooks(self, module, output):
        if torch.is_tensor(output) and output.requires_grad:
            output.register_hook(lambda g: self._pre_backward(module, g))
        return output

    def _pre_backward(self, module, grad):
        return grad
