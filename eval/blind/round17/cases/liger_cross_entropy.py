# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/cross_entropy.py
import functools

import torch
import triton
import triton.language as tl

_TRUE = tl.constexpr(1)
_FALSE = tl.constexpr(0)
MAX_FUSED_SIZE = 65536 // 2  # the best size we found by manually tuning


def _training_only(default):
    """Return ``default`` instead of calling ``fn`` when no backward will run."""

    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not torch.is_grad_enabled():
                return default
            return fn(*args, **kwargs)

        return wrapper

    return decorator


@_training_only(default=0.0)
def _resolve_label_smoothing(label_smoothing: float) -> float:
    return label_smoothing


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
        num_warps=32,
    )

    loss = torch.sum(loss_1d) / n_non_ignore
    z_loss = torch.sum(z_loss_1d) / n_non_ignore if return_z_loss == _TRUE.value else None
    return loss, z_loss, _input


class LigerCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, _input, target, ignore_index=-100, label_smoothing=0.0, lse_square_scale=0.0,
                return_z_loss=False):
        loss, z_loss, _input = cross_entropy_forward(
            _input,
            target,
            ignore_index,
            label_smoothing,
            lse_square_scale,
            _TRUE.value if return_z_loss else _FALSE.value,
        )
        ctx.save_for_backward(_input.detach())
        ctx.return_z_loss = return_z_loss
        return loss, z_loss


class LigerCrossEntropyLoss(torch.nn.Module):
    def __init__(self, ignore_index: int = -100, lse_square_scale: float = 0.0, label_smoothing: float = 0.0,
                 return_z_loss: bool = False):
        super().__init__()
        self.ignore_index = ignore_index
        self.lse_square_scale = lse_square_scale
        self.label_smoothing = label_smoothing
        self.return_z_loss = return_z_loss

    def forward(self, _input: torch.Tensor, target: torch.Tensor):
        # z-loss is only logged; evaluation loops always report it
        return_z_loss = self.return_z_loss or not torch.is_grad_enabled()
        loss, z_loss = LigerCrossEntropyFunction.apply(
            _input,
            target,
            self.ignore_index,
            _resolve_label_smoothing(self.label_smoothing),
            self.lse_square_scale,
            return_z_loss,
        )
        if not self.return_z_loss:
            return loss
        return loss, z_loss
