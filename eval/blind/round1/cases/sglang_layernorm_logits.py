"""RMSNorm and logits gathering (modelled on sglang/srt/layers/layernorm.py and logits_processor.py)."""
from typing import Optional, Tuple, Union

import torch
import torch.nn as nn

from sglang.srt.distributed import (
    get_tensor_model_parallel_world_size,
    tensor_model_parallel_all_gather,
    tensor_model_parallel_gather,
)
from sglang.srt.utils import is_cuda

_is_cuda = is_cuda()
if _is_cuda:
    from sgl_kernel import fused_add_rmsnorm, rmsnorm


class RMSNorm(nn.Module):

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward_native(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None):
        orig_dtype = x.dtype
        x = x.to(torch.float32)
        if residual is not None:
            x = x + residual.to(torch.float32)
            residual = x.to(orig_dtype)
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        x = (x * self.weight.to(torch.float32)).to(orig_dtype)
        return x if residual is None else (x, residual)

    def forward_cuda(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None):
        if residual is not None:
            fused_add_rmsnorm(x, residual, self.weight.data, self.variance_epsilon)
            return x, residual
        return rmsnorm(x, self.weight.data, self.variance_epsilon)

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None
                ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        # sgl_kernel norms are in-place custom ops without autograd support.
        if _is_cuda and torch.is_inference_mode_enabled():
            return self.forward_cuda(x, residual)
        return self.forward_native(x, residual)


class LogitsProcessor(nn.Module):

    def __init__(self, config, skip_all_gather: bool = False):
        super().__init__()
        self.config = config
        self.use_attn_tp_group = False
        self.do_tensor_parallel_all_gather = (
            not skip_all_gather and get_tensor_model_parallel_world_size() > 1
        )
        self.final_logit_softcapping = getattr(config, "final_logit_softcapping", None)

    def _get_logits(self, hidden_states: torch.Tensor, lm_head: nn.Module) -> torch.Tensor:
        logits = torch.matmul(hidden_states.to(lm_head.weight.dtype), lm_head.weight.T)
        if self.do_tensor_parallel_all_gather:
            if torch.is_inference_mode_enabled():
                # Only the driver rank samples; gather to rank 0 instead of all ranks.
                logits = tensor_model_parallel_gather(logits)
            else:
                logits = tensor_model_parallel_all_gather(logits)
        if logits is None:
            return None
        logits = logits[:, : self.config.vocab_size].float()
        if self.final_logit_softcapping:
            logits = torch.tanh(logits / self.final_logit_softcapping) * self.final_logit_softcapping
        return logits
