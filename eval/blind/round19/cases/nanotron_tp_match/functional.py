# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import math

import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.utils import MemoryBuffer


class _ColumnLinearAsyncCommunication(torch.autograd.Function):
    """Adapted from https://github.com/NVIDIA/Megatron-LM/blob/e6d7e09845590d0a36bc7f29eb28db974fb8da4e/megatron/core/tensor_parallel/layers.py#L215"""

    @staticmethod
    def forward(ctx, tensor, weight, bias, group, tp_mode, tp_recompute_allgather):
        ctx.use_bias = bias is not None
        ctx.tp_mode = tp_mode
        ctx.group = group
        ctx.tp_recompute_allgather = tp_recompute_allgather
        ctx.tensor_shape = tensor.size()

        group_size = group.size()
        current_rank = dist.get_rank(group)
        tensor = tensor.contiguous()
        sharded_batch_size, *intermediate_size, hidden_size = tensor.shape
        gathered_batch_size = sharded_batch_size * group.size()

        if tp_recompute_allgather:
            gathered_tensor = MemoryBuffer().get(
                "allgather", (gathered_batch_size, *intermediate_size, hidden_size), dtype=tensor.dtype
            )
        else:
            gathered_tensor = torch.empty(
                gathered_batch_size, *intermediate_size, hidden_size,
                device=tensor.device, dtype=tensor.dtype, requires_grad=False,
            )

        handle = dist.all_gather_into_tensor(gathered_tensor, tensor, group=group, async_op=True)

        output_size = weight.shape[0]
        gathered_output = torch.empty(
            gathered_batch_size, *intermediate_size, output_size,
            device=tensor.device, dtype=tensor.dtype, requires_grad=tensor.requires_grad,
        )
        before_shard, same_device_shard, after_shard = torch.split(
            gathered_output,
            split_size_or_sections=[
                sharded_batch_size * current_rank,
                sharded_batch_size,
                sharded_batch_size * (group_size - current_rank - 1),
            ],
            dim=0,
        )
        first_dims = math.prod([sharded_batch_size, *intermediate_size])
        torch.mm(
            input=tensor.view(first_dims, hidden_size),
            mat2=weight.t(),
            out=same_device_shard.view(first_dims, output_size),
        )
        handle.wait()
        if tp_recompute_allgather:
            ctx.save_for_backward(tensor, weight)
        else:
            ctx.save_for_backward(gathered_tensor, weight)
        if before_shard.numel() > 0:
            first_dims = math.prod(before_shard.shape[:-1])
            torch.mm(
                input=gathered_tensor[: sharded_batch_size * current_rank].view(first_dims, hidden_size),
                mat2=weight.t(),
                out=before_shard.view(first_dims, output_size),
            )
        if after_shard.numel() > 0:
            first_dims = math.prod(after_shard.shape[:-1])
            torch.mm(
                input=gathered_tensor[sharded_batch_size * (current_rank + 1) :].view(first_dims, hidden_size),
                mat2=weight.t(),
                out=after_shard.view(first_dims, output_size),
            )
        if bias is not None:
            gathered_output = gathered_output + bias
        return gathered_output
