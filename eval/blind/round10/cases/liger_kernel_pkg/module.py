# Adapted from linkedin/Liger-Kernel src/liger_kernel/transformers/fused_linear_cross_entropy.py
import torch

from .ops import LigerFusedLinearCrossEntropyFunction


class LigerFusedLinearCrossEntropyLoss(torch.nn.Module):
    def __init__(self, ignore_index=-100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, lin_weight, _input, target):
        return LigerFusedLinearCrossEntropyFunction.apply(
            _input, lin_weight, target, self.ignore_index, torch.is_grad_enabled()
        )
