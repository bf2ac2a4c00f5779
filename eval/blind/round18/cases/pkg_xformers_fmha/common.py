# adapted from facebookresearch/xformers xformers/ops/fmha/__init__.py
from dataclasses import dataclass
from typing import Any, Optional, Union

import torch

from xformers.ops.fmha.attn_bias import AttentionBias


@dataclass
class Inputs:
    """
    Stores inputs to the `memory_efficient_attention` operators
    """

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    attn_bias: Optional[Union[torch.Tensor, AttentionBias]] = None
    p: float = 0.0
    scale: Optional[float] = None
    # grad mode at the time the inputs were packed by the public entry point
    grad_mode: bool = True

    def normalize_bmhk(self):
        if self.query.ndim not in [3, 4, 5]:
            raise ValueError(f"Invalid shape for query: {self.query.shape}.")
        output_shape = (self.query.shape[:-1]) + (self.value.shape[-1],)
        if self.query.ndim == 3:
            self.query = self.query.unsqueeze(2)
            self.key = self.key.unsqueeze(2)
            self.value = self.value.unsqueeze(2)
        return output_shape

    def validate_inputs(self) -> None:
        qkv = (self.query, self.key, self.value)
        if tuple(x.device for x in qkv) != (self.query.device,) * 3:
            raise ValueError("Query/Key/Value should all be on the same device")


def pack_inputs(query, key, value, attn_bias=None, p: float = 0.0, scale: Optional[float] = None) -> Inputs:
    return Inputs(
        query=query, key=key, value=value, p=p, attn_bias=attn_bias, scale=scale,
        grad_mode=torch.is_grad_enabled(),
    )
