# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
import torch

from .impl import LinearImpl


def make_linear_impl(accumulation_in_fp16: bool) -> LinearImpl:
    return LinearImpl(
        use_16bit_in_wgrad_accum_fusion=accumulation_in_fp16,
        grad_enabled=torch.is_grad_enabled(),
    )
