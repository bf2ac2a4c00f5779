# Modelled on Megatron-LM megatron/core/distributed/fsdp/src/megatron_fsdp/utils.py
import torch


def backward_will_follow() -> bool:
    """True when autograd is recording, i.e. a backward pass may follow this forward."""
    return torch.is_grad_enabled()


def is_float8tensor(tensor) -> bool:
    return type(tensor).__name__ in ("Float8Tensor", "MXFP8Tensor")
