# Adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py (_pre_forward context)
from typing import NamedTuple
import torch


class ForwardContext(NamedTuple):
    grad_enabled: bool
    reshard_after_forward: bool
    post_forward_mesh: object = None


def build_context(state) -> ForwardContext:
    return ForwardContext(torch.is_grad_enabled(), state.reshard_after_forward, state.post_forward_mesh)
