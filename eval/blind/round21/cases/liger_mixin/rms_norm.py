# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/rms_norm.py
import torch
import torch.nn as nn

from .base import LigerAutogradMixin
from .ops import LigerRMSNormFunction


class LigerRMSNorm(LigerAutogradMixin, nn.Module):
    def __init__(self, hidden_size, eps=1e-6, offset=0.0, casting_mode="llama", init_fn="ones"):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size) if init_fn == "ones" else torch.zeros(hidden_size))
        self.variance_epsilon, self.offset, self.casting_mode = eps, offset, casting_mode

    def forward(self, hidden_states):
        casting_mode = self.casting_mode if self._in_autograd() else "none"
        return LigerRMSNormFunction.apply(
            hidden_states, self.weight, self.variance_epsilon, self.offset, casting_mode, self._in_autograd(),
        )


class LigerGemmaRMSNorm(LigerRMSNorm):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__(hidden_size, eps=eps, offset=1.0, casting_mode="gemma", init_fn="zeros")

    def forward(self, hidden_states):
        return super().forward(hidden_states)
