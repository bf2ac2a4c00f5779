# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
import torch

# Grad mode observed by the iteration's forward root; shared by every FSDP
# state in the tree so non-root states do not need to query it again.
_GRAD_AT_ROOT_FORWARD: bool = True


def record_grad_mode() -> None:
    global _GRAD_AT_ROOT_FORWARD
    _GRAD_AT_ROOT_FORWARD = torch.is_grad_enabled()


def forward_prefetch_enabled() -> bool:
    return _GRAD_AT_ROOT_FORWARD
