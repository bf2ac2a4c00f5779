# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode
from nanotron.parallel.utils import MemoryBuffer


class _ColumnLinearAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, weight, bias, group, tp_mode, tp_recompute_allgather):
        ctx.use_bias = bias is not None
        ctx.tp_mode = tp_mode
        ctx.group = group
        ctx.tp_recompute_allgather = tp_recompute_allgather
        if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
            ctx.save_for_backward(tensor, weight)
            return F.linear(tensor, weight, bias)
        tensor = tensor.contiguous()
        sharded_batch_size, *intermediate_size, hidden_size = tensor.shape
        gathered_batch_size = sharded_batch_size * group.size()
        if tp_recompute_allgather:
            gathered_tensor = MemoryBuffer().get(
                "allgather", (gathered_batch_size, *intermediate_size, hidden_size), dtype=tensor.dtype
            )
        else:
            gathered_tensor = torch.empty(gathered_batch_size, *intermediate_size, hidden_size,
                                          device=tensor.device, dtype=tensor.dtype, requires_grad=False)
        handle = dist.all_gather_into_tensor(gathered_tensor, tensor, group=group, async_op=True)
        same_device_out = F.linear(tensor, weight, bias)
        handle.wait()
        if tp_recompute_allgather:
            ctx.save_for_backward(tensor, weight)
        else:
            ctx.save_for_backward(gathered_tensor, weight)
        out = F.linear(gathered_tensor, weight, bias)
        rank = dist.get_rank(group)
        out[sharded_batch_size * rank: sharded_batch_size * (rank + 1)] = same_device_out
        return out
