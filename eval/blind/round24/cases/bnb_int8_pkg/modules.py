# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/nn/modules.py
import torch
import torch.nn as nn

from .functions import matmul
from .state import MatmulLtState


class Linear8bitLt(nn.Linear):
    def __init__(self, input_features, output_features, bias=True, has_fp16_weights=True, threshold=0.0,
                 index=None, device=None):
        super().__init__(input_features, output_features, bias, device)
        self.state = MatmulLtState()
        self.index = index
        self.state.threshold = threshold
        self.state.has_fp16_weights = has_fp16_weights
        if threshold > 0.0 and not has_fp16_weights:
            self.state.use_pool = True

    def init_8bit_state(self):
        self.state.CB = self.weight.CB
        self.state.SCB = self.weight.SCB
        self.weight.CB = None
        self.weight.SCB = None

    def forward(self, x: torch.Tensor):
        self.state.is_training = torch.is_grad_enabled()
        if self.weight.CB is not None:
            self.init_8bit_state()
        if self.bias is not None and self.bias.dtype != x.dtype:
            self.bias.data = self.bias.data.to(x.dtype)
        out = matmul(x, self.weight, bias=self.bias, state=self.state)
        if not self.state.has_fp16_weights and self.state.CB is not None:
            self.weight.data = self.state.CB
        return out
