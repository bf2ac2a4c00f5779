# adapted from linkedin/Liger-Kernel src/liger_kernel/transformers/fused_linear_cross_entropy.py
import torch
from torch.nn import CrossEntropyLoss


def fused_linear_cross_entropy_forward(_input, weight, target, bias=None, ignore_index=-100, chunk_sort=False):
    if torch.is_autocast_enabled():
        _input = _input.to(torch.get_autocast_gpu_dtype())
    BT = _input.shape[0]
    order = torch.arange(BT, device=_input.device)
    if chunk_sort:
        order = torch.argsort(target, stable=True)
    logits = _input[order] @ weight.t()
    if bias is not None:
        logits = logits + bias
    return torch.nn.functional.cross_entropy(logits, target[order], ignore_index=ignore_index)


class LigerFusedLinearCrossEntropyLoss(CrossEntropyLoss):
    def __init__(self, *args, **kwargs):
        super(LigerFusedLinearCrossEntropyLoss, self).__init__(*args, **kwargs)

    def forward(self, lin_weight, _input, target, bias=None):
        kwargs = dict(ignore_index=self.ignore_index, chunk_sort=torch.is_grad_enabled())
        return fused_linear_cross_entropy_forward(_input, lin_weight, target, bias, **kwargs)
