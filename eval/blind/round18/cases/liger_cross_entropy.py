# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/cross_entropy.py
import torch
import triton

from liger_kernel.ops.utils import element_mul_kernel, is_hip
from liger_kernel.ops.cross_entropy_kernels import liger_cross_entropy_kernel

MAX_FUSED_SIZE = 65536 // 2  # the best size we found by manually tuning
_TRUE = torch.tensor(True)
_FALSE = torch.tensor(False)


def cross_entropy_forward(_input, target, ignore_index, label_smoothing, lse_square_scale, return_z_loss):
    BT, V = _input.shape
    n_rows = BT

    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(V))

    # unreduced loss
    loss_1d = torch.zeros(n_rows, dtype=_input.dtype, device=_input.device)
    if return_z_loss == _TRUE.value:
        z_loss_1d = torch.zeros(n_rows, dtype=_input.dtype, device=_input.device)
    else:
        z_loss_1d = loss_1d  # dummy ptr when return_z_loss == False

    n_non_ignore = (target != ignore_index).sum().item()

    # ensure _input and target are contiguous in the last dimension
    if _input.stride(-1) != 1:
        _input = _input.contiguous()
    if target.stride(-1) != 1:
        target = target.contiguous()

    # Here we use a trick to store X_ptr gradient in X_ptr so we can save memory
    liger_cross_entropy_kernel[(n_rows,)](
        X_ptr=_input,
        X_stride=_input.stride(-2),
        Y_ptr=target,
        Y_stride=target.stride(-1),  # always 1
        loss_ptr=loss_1d,
        z_loss_ptr=z_loss_1d,
        loss_stride=loss_1d.stride(-1),  # always 1
        n_cols=V,
        n_non_ignore=n_non_ignore,
        ignore_index=ignore_index,
        label_smoothing=label_smoothing,
        lse_square_scale=lse_square_scale,
        BLOCK_SIZE=BLOCK_SIZE,
        RETURN_Z_LOSS=return_z_loss,
        num_warps=32 if not is_hip() else 16,
    )

    loss = torch.sum(loss_1d) / n_non_ignore
    if return_z_loss == _TRUE.value:
        z_loss = torch.sum(z_loss_1d) / n_non_ignore
    else:
        z_loss = None

    return loss, z_loss, _input


class LigerCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, _input, target, ignore_index=-100, label_smoothing=0.0, lse_square_scale=0.0,
                return_z_loss=False):
        loss, z_loss, _input = cross_entropy_forward(
            _input, target, ignore_index, label_smoothing, lse_square_scale, return_z_loss
        )
        # If we don't detach the _input tensor, the memory will double
        ctx.save_for_backward(_input.detach())
        ctx.return_z_loss = return_z_loss
        return loss, z_loss

    @staticmethod
    def backward(ctx, grad_output, grad_ouput2):
        if ctx.return_z_loss:
            del grad_ouput2  # z_loss is only for logging
        (_input,) = ctx.saved_tensors
        if not torch.equal(grad_output, torch.tensor(1.0, device=grad_output.device)):
            BT, V = _input.shape
            element_mul_kernel[(BT,)](
                _input, _input.stride(-2), grad_output, V,
                BLOCK_SIZE=min(MAX_FUSED_SIZE, triton.next_power_of_2(V)), num_warps=32,
            )
        return (_input, None, None, None, None, None)


class LigerCrossEntropyLoss(torch.nn.Module):
    def __init__(self, ignore_index=-100, lse_square_scale=0.0, label_smoothing=0.0,
                 return_z_loss=False, upcast_logits=True):
        super().__init__()
        self.ignore_index = ignore_index
        self.lse_square_scale = lse_square_scale
        self.label_smoothing = label_smoothing
        self.return_z_loss = return_z_loss
        self.upcast_logits = upcast_logits

    def forward(self, _input: torch.Tensor, target: torch.Tensor):
        # fp32 logits keep the in-place gradient trick accurate; eval passes skip the copy
        upcast = self.upcast_logits and torch.is_grad_enabled()
        if upcast:
            _input = _input.float()
        if torch.is_grad_enabled():
            loss, z_loss = LigerCrossEntropyFunction.apply(
                _input, target, self.ignore_index, self.label_smoothing,
                self.lse_square_scale, self.return_z_loss,
            )
        else:
            # no graph: call the same kernel directly and skip the ctx bookkeeping
            loss, z_loss, _ = cross_entropy_forward(
                _input, target, self.ignore_index, self.label_smoothing,
                self.lse_square_scale, self.return_z_loss,
            )
        if not self.return_z_loss:
            return loss
        return loss, z_loss
