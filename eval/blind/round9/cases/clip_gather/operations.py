from functools import wraps

import torch
import torch.distributed as dist
import torch.distributed.nn


def _autograd_aware(function):
    @wraps(function)
    def wrapper(*args, **kwargs):
        kwargs.setdefault("differentiable", torch.is_grad_enabled())
        return function(*args, **kwargs)

    return wrapper


def verify_operation(function):
    @wraps(function)
    def wrapper(*args, **kwargs):
        if not dist.is_available() or not dist.is_initialized():
            return args[0]
        return function(*args, **kwargs)

    return wrapper


@verify_operation
@_autograd_aware
def gather_features(features: torch.Tensor, group=None, *, differentiable: bool = False) -> torch.Tensor:
    world_size = dist.get_world_size(group)
    if differentiable:
        return torch.cat(torch.distributed.nn.all_gather(features, group=group), dim=0)
    output = torch.empty(
        (world_size * features.shape[0],) + tuple(features.shape[1:]),
        dtype=features.dtype,
        device=features.device,
    )
    dist.all_gather_into_tensor(output, features.contiguous(), group=group)
    return output
