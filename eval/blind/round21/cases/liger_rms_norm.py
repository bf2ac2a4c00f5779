# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/rms_norm.py
import torch
import triton
import triton.language as tl

from liger_kernel.ops.utils import calculate_settings, ensure_contiguous

_CASTING_MODE_NONE = tl.constexpr(-1)
_CASTING_MODE_LLAMA = tl.constexpr(0)
_str_to_casting_mode = {"llama": _CASTING_MODE_LLAMA.value, "none": _CASTING_MODE_NONE.value}


@triton.jit
def _rms_norm_forward(
    Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, W_row_stride, r_ptr, r_row_stride,
    n_cols, eps, offset, casting_mode: tl.constexpr, BLOCK_SIZE: tl.constexpr,
):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    Y_ptr += row_idx * Y_row_stride
    X_ptr += row_idx * X_row_stride
    r_ptr += row_idx * r_row_stride
    X_row = tl.load(X_ptr + col_offsets, mask=mask, other=0)
    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0)
    if casting_mode == _CASTING_MODE_LLAMA:
        X_row = X_row.to(tl.float32)
    mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
    inv_rms = tl.math.rsqrt(mean_square + eps)
    tl.store(r_ptr, inv_rms)
    Y_row = X_row * inv_rms * (offset + W_row)
    tl.store(Y_ptr + col_offsets, Y_row, mask=mask)


class LigerRMSNormFunction(torch.autograd.Function):
    @staticmethod
    @ensure_contiguous
    def forward(ctx, X, W, eps, offset=0.0, casting_mode="llama", cache_rms=True):
        shape = X.shape
        dim = shape[-1]
        X = X.view(-1, dim)
        n_rows, n_cols = X.shape
        BLOCK_SIZE, num_warps = calculate_settings(n_cols)
        Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
        r = torch.empty(n_rows, dtype=torch.float32, device=X.device)
        assert X.shape[1] == W.shape[0], "Incompatible hidden size dimension between tensor1.shape[1] and tensor2.shape[0]"
        _rms_norm_forward[(n_rows,)](
            Y, Y.stride(0), X, X.stride(0), W, W.stride(0), r, r.stride(0),
            n_cols, eps, offset, _str_to_casting_mode[casting_mode],
            BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
        )
        ctx.eps = eps
        ctx.offset = offset
        ctx.BLOCK_SIZE = BLOCK_SIZE
        ctx.num_warps = num_warps
        if cache_rms:
            ctx.save_for_backward(X, W, r)
        else:
            ctx.save_for_backward(X, W)
        return Y.view(*shape)


class LigerRMSNorm(torch.nn.Module):
    def __init__(self, hidden_size, eps=1e-6, offset=0.0, casting_mode="llama"):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon, self.offset, self.casting_mode = eps, offset, casting_mode

    def forward(self, hidden_states):
        casting_mode = self.casting_mode if torch.is_grad_enabled() else "none"
        return LigerRMSNormFunction.apply(
            hidden_states, self.weight, self.variance_epsilon, self.offset, casting_mode, torch.is_grad_enabled()
        )
