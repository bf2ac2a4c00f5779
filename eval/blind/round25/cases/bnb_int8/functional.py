# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/functional.py
import torch
from torch import is_inference_mode_enabled as _inference_mode

from .state import MatmulLtState


def int8_double_quant(A: torch.Tensor, threshold: float, state: MatmulLtState):
    if _inference_mode():
        A = A.contiguous()
    outlier_cols = None
    if state.grad_at_init and threshold > 0.0:
        outliers = A.abs() >= threshold
        outlier_cols = torch.argwhere(outliers.any(dim=0)).view(-1)
        A = A.masked_fill(outliers, 0.0)
    row_stats = A.abs().amax(dim=1).float()
    CA = torch.round(A * (127.0 / row_stats.unsqueeze(1))).to(torch.int8)
    return CA, row_stats, outlier_cols
