# SPDX-License-Identifier: Apache-2.0
"""GroupCoordinator, trimmed from vllm/distributed/parallel_state.py."""
from typing import List, Optional

import torch
import torch.distributed
import torch.distributed.nn.functional as dist_nn
from torch.distributed import ProcessGroup

from .custom_all_reduce import CustomAllreduce, PyNcclCommunicator

_TP: Optional["GroupCoordinator"] = None


def get_tp_group() -> "GroupCoordinator":
    assert _TP is not None, "tensor model parallel group is not initialized"
    return _TP


class GroupCoordinator:
    """PyTorch ProcessGroup wrapper for a group of processes."""

    rank: int
    ranks: List[int]
    world_size: int
    cpu_group: ProcessGroup
    device_group: ProcessGroup

    def __init__(self, group_ranks: List[List[int]], local_rank: int, torch_distributed_backend: str,
                 use_pynccl: bool, use_custom_allreduce: bool):
        self.rank = torch.distributed.get_rank()
        self.local_rank = local_rank
        for ranks in group_ranks:
            device_group = torch.distributed.new_group(ranks, backend=torch_distributed_backend)
            cpu_group = torch.distributed.new_group(ranks, backend="gloo")
            if self.rank in ranks:
                self.ranks = ranks
                self.world_size = len(ranks)
                self.rank_in_group = ranks.index(self.rank)
                self.device_group = device_group
                self.cpu_group = cpu_group
        self.device = torch.device(f"cuda:{local_rank}")
        self.pynccl_comm = PyNcclCommunicator(self.cpu_group, self.device) if use_pynccl else None
        self.ca_comm = CustomAllreduce(self.cpu_group, self.device) if use_custom_allreduce else None

    def all_reduce(self, input_: torch.Tensor, grad_enabled: bool = False) -> torch.Tensor:
        # Bypass the function if we are using only 1 GPU.
        if self.world_size == 1:
            return input_
        ca_comm = self.ca_comm
        if not grad_enabled and ca_comm is not None and not ca_comm.disabled and ca_comm.should_custom_ar(input_):
            out = ca_comm.custom_all_reduce(input_)
            assert out is not None
            return out
        torch.distributed.all_reduce(input_, group=self.device_group)
        return input_

    def all_reduce_differentiable(self, input_: torch.Tensor, grad_enabled: bool) -> torch.Tensor:
        if self.world_size == 1:
            return input_
        ca_comm = self.ca_comm
        if not grad_enabled and ca_comm is not None and ca_comm.should_custom_ar(input_):
            # The custom all-reduce kernel writes into IPC buffers and has no autograd formula.
            return ca_comm.custom_all_reduce(input_)
        return dist_nn.all_reduce(input_, group=self.device_group)

    def all_gather(self, input_: torch.Tensor, dim: int = -1, inference_mode: bool = False) -> torch.Tensor:
        world_size = self.world_size
        if world_size == 1:
            return input_
        if dim < 0:
            dim += input_.dim()
        input_size = input_.size()
        output_size = (input_size[0] * world_size,) + input_size[1:]
        output_tensor = torch.empty(output_size, dtype=input_.dtype, device=input_.device)
        pynccl_comm = self.pynccl_comm
        if inference_mode and pynccl_comm is not None and not pynccl_comm.disabled:
            pynccl_comm.all_gather(output_tensor, input_.contiguous(), stream=torch.cuda.current_stream())
        else:
            torch.distributed.all_gather_into_tensor(output_tensor, input_.contiguous(), group=self.device_group)
        output_tensor = output_tensor.reshape((world_size,) + input_size)
        output_tensor = output_tensor.movedim(0, dim)
        output_tensor = output_tensor.reshape(
            input_size[:dim] + (world_size * input_size[dim],) + input_size[dim + 1:]
        )
        return output_tensor
