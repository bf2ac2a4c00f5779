# Adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/mappings.py
# (_gather_along_first_dim, gather_from_sequence_parallel_region)
import torch
import torch.distributed as dist


def _all_gather_base(t, group, async_op):
    world = dist.get_world_size(group)
    out = torch.empty((t.shape[0] * world,) + t.shape[1:], dtype=t.dtype, device=t.device)
    handle = dist.all_gather_into_tensor(out, t.contiguous(), group=group, async_op=async_op)
    return out, handle


def _all_gather_list(t, group):
    world = dist.get_world_size(group)
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous(), group=group)
    return torch.cat(parts, 0), None


def make_sequence_gather(group):
    grad = torch.is_grad_enabled()

    def _gather(t):
        return _all_gather_base(t, group, async_op=True) if grad else _all_gather_list(t, group)

    return _gather


def gather_from_sequence_parallel_region(input_, group, tensor_parallel_output_grad=True):
    gather = make_sequence_gather(group)
    out, handle = gather(input_)
    if handle is not None:
        handle.wait()
    return out
