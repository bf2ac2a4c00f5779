# Modelled on sglang/srt/distributed/parallel_state.py GroupCoordinator (sglang v0.4.x).
from typing import Optional

import torch
import torch.distributed
import torch.distributed._functional_collectives as funcol
from torch.distributed import ProcessGroup

from sglang.srt.distributed.device_communicators.custom_all_reduce import CustomAllreduce
from sglang.srt.distributed.device_communicators.pynccl import PyNcclCommunicator


class GroupCoordinator:
    rank: int
    world_size: int
    device_group: ProcessGroup
    ca_comm: Optional[CustomAllreduce]
    pynccl_comm: Optional[PyNcclCommunicator]

    def __init__(self, group_ranks, local_rank, torch_distributed_backend, use_pynccl, use_custom_allreduce,
                 group_name=None):
        self.unique_name = group_name
        self.rank = torch.distributed.get_rank()
        self.local_rank = local_rank
        self.device_group = None
        for ranks in group_ranks:
            device_group = torch.distributed.new_group(ranks, backend=torch_distributed_backend)
            if self.rank in ranks:
                self.ranks = ranks
                self.world_size = len(ranks)
                self.device_group = device_group
        self.device = torch.device(f"cuda:{local_rank}")
        self.use_pynccl = use_pynccl
        self.use_custom_allreduce = use_custom_allreduce
        self.pynccl_comm = PyNcclCommunicator(group=self.device_group, device=self.device) if use_pynccl else None
        self.ca_comm = CustomAllreduce(group=self.device_group, device=self.device) if use_custom_allreduce else None

    def all_reduce(self, input_: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return input_
        if input_.is_cpu:
            torch.distributed.all_reduce(input_, group=self.device_group)
            return input_

        if torch.is_grad_enabled() and input_.requires_grad:
            return funcol.all_reduce(input_, "sum", self.device_group)
        ca_comm = self.ca_comm
        if ca_comm is not None and not ca_comm.disabled and ca_comm.should_custom_ar(input_):
            return torch.ops.sglang.outplace_all_reduce(input_, group_name=self.unique_name)

        self._all_reduce_in_place(input_)
        return input_

    def _all_reduce_in_place(self, input_: torch.Tensor) -> None:
        pynccl_comm = self.pynccl_comm
        if pynccl_comm is not None and not pynccl_comm.disabled and torch.is_grad_enabled():
            pynccl_comm.all_reduce(input_)
        else:
            torch.distributed.all_reduce(input_, group=self.device_group)

    def all_gather(self, input_: torch.Tensor, dim: int = -1) -> torch.Tensor:
        world_size = self.world_size
        if world_size == 1:
            return input_
        if dim < 0:
            dim += input_.dim()
        input_size = input_.size()
        output_tensor = torch.empty((world_size,) + input_size, dtype=input_.dtype, device=input_.device)
        torch.distributed.all_gather_into_tensor(output_tensor, input_, group=self.device_group)
        output_tensor = output_tensor.movedim(0, dim)
        return output_tensor.reshape(input_size[:dim] + (world_size * input_size[dim],) + input_size[dim + 1:])
