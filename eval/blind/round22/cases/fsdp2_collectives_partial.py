# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py
import functools
from itertools import chain
from typing import NamedTuple

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import _get_device_handle
from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather

from ._fsdp_param import FSDPParam


class AllGatherResult(NamedTuple):
    all_gather_output: torch.Tensor
    all_gather_event: torch.Event | None
    all_gather_work: dist.distributed_c10d.Work | None
    all_gather_input_split_sizes: list[int]


class DefaultAllGather(AllGather):
    def allocate(self, size, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group: dist.ProcessGroup, async_op: bool = False):
        return dist.all_gather_into_tensor(output_tensor, input_tensor, group=group, async_op=async_op)


def all_gather_copy_in_cuda(all_gather_inputs, all_gather_output, inp_split_sizes, all_gather_input_numel, rank):
    all_gather_input = all_gather_output.narrow(0, all_gather_input_numel * rank, all_gather_input_numel)
    foreach_copy_dsts = torch.split(all_gather_input, inp_split_sizes)
    with torch.no_grad():
        torch._foreach_copy_(foreach_copy_dsts, all_gather_inputs)
    return all_gather_input, all_gather_output


def foreach_all_gather(fsdp_params: list[FSDPParam], group: dist.ProcessGroup, all_gather_copy_in_stream,
                       all_gather_stream, device: torch.device, all_gather_comm: AllGather):
    world_size, rank = group.size(), group.rank()
    device_handle = _get_device_handle(device.type)
    # bind the launch mode once; the comm object is reused for every param group
    launch = functools.partial(all_gather_comm, group=group, async_op=torch.is_grad_enabled())
    with device_handle.stream(all_gather_copy_in_stream):
        all_gather_inputs = [*chain.from_iterable(p.all_gather_inputs for p in fsdp_params)]
        inp_split_sizes = [t.numel() for t in all_gather_inputs]
        all_gather_input_numel = sum(inp_split_sizes)
        all_gather_output = all_gather_comm.allocate(
            (all_gather_input_numel * world_size,), dtype=all_gather_inputs[0].dtype, device=device
        )
        all_gather_input, all_gather_output = all_gather_copy_in_cuda(
            all_gather_inputs, all_gather_output, inp_split_sizes, all_gather_input_numel, rank,
        )
    all_gather_stream.wait_stream(all_gather_copy_in_stream)
    with device_handle.stream(all_gather_stream):
        all_gather_work = launch(output_tensor=all_gather_output, input_tensor=all_gather_input)
        all_gather_event = all_gather_stream.record_event()
        return AllGatherResult(all_gather_output, all_gather_event, all_gather_work, inp_split_sizes)
