# Modeled on ColossalAI colossalai/shardformer/layer/linear.py (Linear1D_Col.forward)
# and colossalai/shardformer/layer/_operation.py.
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def linear_with_async_comm(input_, weight, bias, process_group, async_grad_allreduce, fp8_communication=False):
    from colossalai.shardformer.layer._operation import LinearWithAsyncCommunication
    return LinearWithAsyncCommunication.apply(input_, weight, bias, process_group, async_grad_allreduce, fp8_communication)


def gather_forward_reducescatter_backward(input_, process_group, dim, fp8_communication=False):
    from colossalai.shardformer.layer._operation import _GatherForwardReduceScatterBackward
    return _GatherForwardReduceScatterBackward.apply(input_, process_group, dim, fp8_communication)


def linear_gather_forward_reducescatter_backward(input_, weight, bias, process_group, async_grad_reduce_scatter, dim, ring=False):
    from colossalai.shardformer.layer._operation import _LinearWithGatherForwardReduceScatterBackward
    return _LinearWithGatherForwardReduceScatterBackward.apply(
        input_, weight, bias, process_group, async_grad_reduce_scatter, dim, ring
    )


class Linear1D_Col(nn.Module):
    def __init__(self, in_features, out_features, bias=True, process_group=None, gather_output=False,
                 seq_parallel_mode=None, seq_parallel_dim=1, fp8_communication=False):
        super().__init__()
        self.process_group = process_group
        self.num_partitions = dist.get_world_size(process_group)
        self.weight = nn.Parameter(torch.empty(out_features // self.num_partitions, in_features))
        self.bias = nn.Parameter(torch.zeros(out_features // self.num_partitions)) if bias else None
        self.gather_output = gather_output
        self.seq_parallel_mode = seq_parallel_mode
        self.seq_parallel_dim = seq_parallel_dim
        self.fp8_communication = fp8_communication

    def forward(self, input_: torch.Tensor):
        input_parallel = input_
        bias = self.bias
        grad_on = torch.is_grad_enabled()
        fp8_comm = self.fp8_communication and grad_on
        if self.seq_parallel_mode == "split_gather":
            input_parallel = gather_forward_reducescatter_backward(
                input_parallel, self.process_group, self.seq_parallel_dim, fp8_communication=fp8_comm
            )
            output_parallel = linear_with_async_comm(
                input_parallel, self.weight, bias, self.process_group, False, fp8_communication=fp8_comm
            )
        elif self.seq_parallel_mode == "ring":
            output_parallel = linear_gather_forward_reducescatter_backward(
                input_parallel, self.weight, bias, self.process_group, True, self.seq_parallel_dim,
                ring=grad_on,
            )
        else:
            # async_grad_allreduce only overlaps the input-grad all-reduce in backward
            output_parallel = linear_with_async_comm(
                input_parallel, self.weight, bias, self.process_group, torch.is_grad_enabled(),
                fp8_communication=self.fp8_communication,
            )
        if self.gather_output:
            world = self.num_partitions
            chunks = [torch.empty_like(output_parallel) for _ in range(world)]
            dist.all_gather(chunks, output_parallel.contiguous(), group=self.process_group)
            return torch.cat(chunks, dim=-1)
        return output_parallel
