# adapted from volcengine/verl verl/utils/ulysses.py
from typing import Callable, Optional

import torch
import torch.distributed as dist


def build_overlap_predicate(enabled: bool) -> Callable[[], bool]:
    return lambda: enabled and torch.is_grad_enabled()


def all_to_all_4d(local_tensor: torch.Tensor, scatter_dim: int, gather_dim: int,
                  group: Optional[dist.ProcessGroup] = None, async_op: bool = False):
    world = dist.get_world_size(group=group)
    inputs = [t.contiguous() for t in torch.tensor_split(local_tensor, world, dim=scatter_dim)]
    outputs = [torch.empty_like(inputs[0]) for _ in range(world)]
    work = dist.all_to_all(outputs, inputs, group=group, async_op=async_op)

    def finish():
        if work is not None:
            work.wait()
        return torch.cat(outputs, dim=gather_dim)

    return finish
