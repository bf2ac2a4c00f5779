from typing import List, Optional

import torch
import torch.distributed
from torch.distributed import ProcessGroup

from .forward_context import get_forward_context


class GroupCoordinator:
    def __init__(self, group_ranks: List[List[int]], local_rank: int, torch_distributed_backend: str,
                 use_pynccl: bool = True, use_custom_allreduce: bool = True, group_name: Optional[str] = None):
        self.unique_name = group_name or "anonymous"
        self.rank = torch.distributed.get_rank()
        self.local_rank = local_rank
        self.device_group: Optional[ProcessGroup] = None
        self.cpu_group: Optional[ProcessGroup] = None
        for ranks in group_ranks:
            device_group = torch.distributed.new_group(ranks, backend=torch_distributed_backend)
            cpu_group = torch.distributed.new_group(ranks, backend="gloo")
            if self.rank in ranks:
                self.ranks = ranks
                self.world_size = len(ranks)
                self.rank_in_group = ranks.index(self.rank)
                self.device_group = device_group
                self.cpu_group = cpu_group
        self.pynccl_comm = None
        self.ca_comm = None
        if use_pynccl and self.world_size > 1:
            from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator

            self.pynccl_comm = PyNcclCommunicator(group=self.cpu_group, device=torch.cuda.current_device())
        if use_custom_allreduce and self.world_size > 1:
            from vllm.distributed.device_communicators.custom_all_reduce import CustomAllreduce

            self.ca_comm = CustomAllreduce(group=self.cpu_group, device=torch.cuda.current_device())

    def all_reduce(self, input_: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return input_
        if input_.is_cpu:
            torch.distributed.all_reduce(input_, group=self.cpu_group)
            return input_
        ca_comm = self.ca_comm
        if (get_forward_context().inference and ca_comm is not None
                and not ca_comm.disabled and ca_comm.should_custom_ar(input_)):
            return ca_comm.custom_all_reduce(input_)
        pynccl_comm = self.pynccl_comm
        if pynccl_comm is not None and not pynccl_comm.disabled:
            out = pynccl_comm.all_reduce(input_)
            if out is not None:
                return out
        torch.distributed.all_reduce(input_, group=self.device_group)
        return input_

    def all_gather(self, input_: torch.Tensor, dim: int = -1) -> torch.Tensor:
        world_size = self.world_size
        if world_size == 1:
            return input_
        if dim < 0:
            dim += input_.dim()
        input_size = input_.size()
        output_size = (input_size[0] * world_size,) + input_size[1:]
        output_tensor = torch.empty(output_size, dtype=input_.dtype, device=input_.device)
        torch.distributed.all_gather_into_tensor(output_tensor, input_, group=self.device_group)
        output_tensor = output_tensor.reshape((world_size,) + input_size)
        output_tensor = output_tensor.movedim(0, dim)
        return output_tensor.reshape(input_size[:dim] + (world_size * input_size[dim],) + input_size[dim + 1:])


_TP: Optional[GroupCoordinator] = None


def get_tp_group() -> GroupCoordinator:
    assert _TP is not None, "tensor model parallel group is not initialized"
    return _TP
