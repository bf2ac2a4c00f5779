# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/rms_norm.py
import torch

from liger_kernel.ops.utils import calculate_settings, ensure_contiguous
from liger_kernel.ops.rms_norm import _rms_norm_forward

_str_to_casting_mode = {"llama": 0, "gemma": 1, "none": -1}


class LigerRMSNormFunction(torch.autograd.Function):
    @staticmethod
    @ensure_contiguous
    def forward(ctx, X, W, eps, offset=0.0, casting_mode="llama", keep_rstd=True):
        shape = X.shape
        dim = shape[-1]
        X = X.view(-1, dim)
        n_rows, n_cols = X.shape
        BLOCK_SIZE, num_warps = calculate_settings(n_cols)
        Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
        r = torch.empty(n_rows, dtype=torch.float32, device=X.device)
        _rms_norm_forward[(n_rows,)](
            Y, Y.stride(0), X, X.stride(0), W, W.stride(0), r, r.stride(0),
            n_cols, eps, offset, _str_to_casting_mode[casting_mode],
            BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
        )
        ctx.eps = eps
        ctx.offset = offset
        ctx.BLOCK_SIZE = BLOCK_SIZE
        ctx.num_warps = num_warps
        if keep_rstd:
            ctx.save_for_backward(X, W, r)
        return Y.view(*shape)
