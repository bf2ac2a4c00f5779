# Adapted from vllm-project/vllm vllm/distributed/parallel_state.py (GroupCoordinator.all_reduce)
# and vllm/distributed/communication_op.py
import torch
import torch.distributed as dist
from torch import is_grad_enabled


class GroupCoordinator:
    def __init__(self, device_group, ca_comm=None, world_size=1):
        self.device_group = device_group
        self.ca_comm = ca_comm
        self.world_size = world_size

    def _custom_all_reduce(self, input_):
        out = self.ca_comm.custom_all_reduce(input_)
        return out if out is not None else self._nccl_all_reduce(input_)

    def _nccl_all_reduce(self, input_):
        dist.all_reduce(input_, group=self.device_group)
        return input_

    def all_reduce(self, input_: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return input_
        if torch.is_inference_mode_enabled() and self.ca_comm is None:
            return self._nccl_all_reduce(input_)
        if is_grad_enabled():
            out = self._nccl_all_reduce(input_)
        else:
            out = self._custom_all_reduce(input_)
        return out


def tensor_model_parallel_all_reduce(group: GroupCoordinator, input_: torch.Tensor) -> torch.Tensor:
    out = group.all_reduce(input_)
    out.requires_grad_(is_grad_enabled() and input_.requires_grad)
    return out
