import torch
import torch.distributed


def get_distributed_world_size(group=None) -> int:
    if not torch.distributed.is_initialized():
        return 1
    return torch.distributed.get_world_size(group=group)


def fwd_args_with_grad_mode(*args):
    return args + (torch.is_grad_enabled(),)
