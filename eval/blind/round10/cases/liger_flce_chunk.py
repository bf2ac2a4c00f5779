# Adapted from linkedin/Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py
# (fused_linear_cross_entropy_forward chunking)
import torch
import torch.nn.functional as F


def fused_linear_cross_entropy_forward(_input, weight, target, ignore_index=-100, chunk_size=1024):
    BT, H = _input.shape
    V = weight.shape[0]
    chunk = chunk_size if torch.is_grad_enabled() else BT
    grad_input = torch.zeros_like(_input)
    grad_weight = torch.zeros_like(weight)
    loss_1d = torch.zeros(BT, dtype=torch.float32, device=_input.device)
    start = 0
    while start < BT:
        end = min(start + chunk, BT)
        logits_chunk = (_input[start:end] @ weight.t()).float()
        target_chunk = target[start:end]
        loss_1d[start:end] = F.cross_entropy(logits_chunk, target_chunk, ignore_index=ignore_index, reduction="none")
        if torch.is_grad_enabled():
            probs = torch.softmax(logits_chunk, dim=-1)
            probs[torch.arange(end - start), target_chunk.clamp(min=0)] -= 1.0
            grad_logits = (probs / BT).to(_input.dtype)
            grad_input[start:end] = grad_logits @ weight
            grad_weight += grad_logits.t() @ _input[start:end]
        start = end
    loss = loss_1d.sum() / (target != ignore_index).sum().clamp(min=1)
    return loss, grad_input, grad_weight
