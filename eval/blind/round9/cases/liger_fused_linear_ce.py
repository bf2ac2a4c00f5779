from typing import Optional, Union

import torch
import triton

from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel
from liger_kernel.ops.utils import amp_custom_fwd, element_mul_kernel

MAX_FUSED_SIZE = 65536 // 2


def fused_linear_cross_entropy_forward(_input, weight, target, bias=None, ignore_index=-100,
                                       label_smoothing=0.0, reduction="mean", compute_grad=True):
    device = _input.device
    BT, H = _input.shape
    V = weight.shape[0]
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(V))
    inc_factor = triton.cdiv(V, H)
    chunk_size = triton.next_power_of_2(triton.cdiv(BT, inc_factor))
    num_chunks = triton.cdiv(BT, chunk_size)

    grad_input = grad_weight = None
    if compute_grad:
        grad_input = torch.zeros_like(_input, device=device)
        if weight.requires_grad:
            grad_weight = torch.zeros_like(weight, device=device)
    loss_1d = torch.zeros(BT, dtype=torch.float32, device=device)
    total_n_non_ignore = (target != ignore_index).sum().item()

    for chunk_id in range(num_chunks):
        start_idx = chunk_id * chunk_size
        end_idx = min((chunk_id + 1) * chunk_size, BT)
        _input_chunk = _input[start_idx:end_idx]
        logits_chunk = _input_chunk @ weight.t()
        if bias is not None:
            logits_chunk = logits_chunk + bias
        target_chunk = target[start_idx:end_idx]
        n_rows = logits_chunk.shape[0]
        loss_1d_slice = loss_1d[start_idx:end_idx]
        logits_chunk = logits_chunk.contiguous()
        liger_cross_entropy_kernel[(n_rows,)](
            X_ptr=logits_chunk, X_stride=logits_chunk.stride(-2), Y_ptr=target_chunk,
            Y_stride=target_chunk.stride(-1), loss_ptr=loss_1d_slice,
            loss_stride=loss_1d_slice.stride(-1), n_cols=V, n_non_ignore=total_n_non_ignore,
            ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction,
            BLOCK_SIZE=BLOCK_SIZE, num_warps=32,
        )
        if grad_input is not None:
            grad_logits_chunk = logits_chunk
            grad_input[start_idx:end_idx] = grad_logits_chunk @ weight
            if grad_weight is not None:
                torch.addmm(input=grad_weight, mat1=logits_chunk.t(), mat2=_input_chunk,
                            out=grad_weight, alpha=1.0, beta=1.0)

    loss = torch.sum(loss_1d) if reduction != "none" else loss_1d
    return loss, grad_input, grad_weight


class LigerFusedLinearCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    @amp_custom_fwd
    def forward(ctx, _input, weight, target, bias=None, ignore_index=-100,
                label_smoothing=0.0, reduction="mean", compute_grad=True):
        loss, grad_input, grad_weight = fused_linear_cross_entropy_forward(
            _input, weight, target, bias, ignore_index, label_smoothing, reduction, compute_grad
        )
        ctx.save_for_backward(grad_input, grad_weight)
        return loss


class LigerFusedLinearCrossEntropyLoss(torch.nn.Module):
    def __init__(self, ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean"):
        super().__init__()
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.reduction = reduction

    def forward(self, lin_weight, _input, target, bias=None):
        return LigerFusedLinearCrossEntropyFunction.apply(
            _input, lin_weight, target, bias, self.ignore_index,
            self.label_smoothing, self.reduction, torch.is_grad_enabled(),
        )


def lce_forward(self, input_ids=None, attention_mask=None, labels=None,
                logits_to_keep: Union[int, torch.Tensor] = 0, skip_logits: Optional[bool] = None,
                **kwargs):
    outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    hidden_states = outputs[0]
    slice_indices = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
    kept_hidden_states = hidden_states[:, slice_indices, :]
    shift_labels = kwargs.pop("shift_labels", None)
    logits = None
    loss = None

    if skip_logits is None:
        skip_logits = torch.is_grad_enabled() and (labels is not None or shift_labels is not None)

    if skip_logits:
        shift_hidden = kept_hidden_states[..., :-1, :].reshape(-1, self.config.hidden_size)
        targets = labels[..., 1:].reshape(-1) if shift_labels is None else shift_labels.reshape(-1)
        loss = LigerFusedLinearCrossEntropyLoss()(self.lm_head.weight, shift_hidden, targets)
    else:
        logits = self.lm_head(kept_hidden_states)
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size)
    return loss, logits
