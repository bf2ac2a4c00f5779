# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_utils.py
from contextlib import contextmanager

import torch


class MoEForwardState:
    grad_enabled: bool = True
    layer_number: int = 0


@contextmanager
def moe_forward_scope(layer_number: int):
    prev = (MoEForwardState.grad_enabled, MoEForwardState.layer_number)
    MoEForwardState.grad_enabled = torch.is_grad_enabled()
    MoEForwardState.layer_number = layer_number
    try:
        yield MoEForwardState
    finally:
        MoEForwardState.grad_enabled, MoEForwardState.layer_number = prev
