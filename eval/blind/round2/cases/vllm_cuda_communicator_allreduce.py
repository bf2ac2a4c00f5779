# Modelled on vLLM vllm/distributed/device_communicators/cuda_communicator.py (CudaCommunicator.all_reduce)
from typing import Optional

import torch
from torch.distributed import ProcessGroup

from vllm.distributed.device_communicators.base_device_communicator import DeviceCommunicatorBase
from vllm.logger import init_logger

logger = init_logger(__name__)


def _in_inference_mode() -> bool:
    try:
        return torch.is_inference_mode_enabled()
    except AttributeError:  # very old torch without inference mode
        return not torch.is_grad_enabled()


class CudaCommunicator(DeviceCommunicatorBase):
    def __init__(self, cpu_group: ProcessGroup, device: Optional[torch.device] = None,
                 device_group: Optional[ProcessGroup] = None, unique_name: str = ""):
        super().__init__(cpu_group, device, device_group, unique_name)
        from vllm.distributed.device_communicators.custom_all_reduce import CustomAllreduce
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator

        self.pynccl_comm: Optional[PyNcclCommunicator] = None
        if self.world_size > 1:
            self.pynccl_comm = PyNcclCommunicator(group=self.cpu_group, device=self.device)
        self.ca_comm: Optional[CustomAllreduce] = None
        if self.world_size > 1:
            self.ca_comm = CustomAllreduce(group=self.cpu_group, device=self.device)
        self.symm_mem_comm = None

    def all_reduce(self, input_):
        if not _in_inference_mode():
            logger.warning_once("all_reduce called outside inference_mode; autograd will not track it.")

        ca_comm = self.ca_comm
        if (ca_comm is not None and not ca_comm.disabled and _in_inference_mode()
                and ca_comm.should_custom_ar(input_)):
            out = ca_comm.custom_all_reduce(input_)
            assert out is not None
            return out
        symm_mem_comm = self.symm_mem_comm
        if symm_mem_comm is not None and symm_mem_comm.should_use_symm_mem(input_):
            return symm_mem_comm.all_reduce(input_)
        pynccl_comm = self.pynccl_comm
        assert pynccl_comm is not None
        out = pynccl_comm.all_reduce(input_)
        if out is None:
            # fall back to the default all-reduce using PyTorch.
            out = input_.clone()
            torch.distributed.all_reduce(out, group=self.device_group)
        return out
