# adapted from linkedin/Liger-Kernel src/liger_kernel/transformers/fused_linear_cross_entropy.py
import torch
from torch.nn import CrossEntropyLoss

from .ops import LigerFusedLinearCrossEntropyFunction


class LigerFusedLinearCrossEntropyLoss(CrossEntropyLoss):
    def __init__(self, *args, **kwargs):
        super(LigerFusedLinearCrossEntropyLoss, self).__init__(*args, **kwargs)

    def forward(self, lin_weight, _input, target, bias=None):
        return LigerFusedLinearCrossEntropyFunction.apply(
            _input, lin_weight, target, bias, self.ignore_index, torch.is_grad_enabled()
        )
