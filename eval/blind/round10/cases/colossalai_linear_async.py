# Adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/_operation.py
# (linear_with_async_comm, reduce_forward) and shardformer/layer/linear.py
import torch
import torch.distributed as dist


class _ReduceForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, process_group):
        dist.all_reduce(input_, group=process_group)
        return input_

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


def reduce_forward(input_, process_group):
    if torch.is_grad_enabled():
        return _ReduceForward.apply(input_, process_group)
    dist.all_reduce(input_, group=process_group)
    return input_


def linear_gather_forward(input_, weight, bias, process_group):
    world = dist.get_world_size(process_group)
    gathered = torch.empty((input_.shape[0] * world,) + input_.shape[1:], dtype=input_.dtype, device=input_.device)
    handle = dist.all_gather_into_tensor(gathered, input_, group=process_group, async_op=torch.is_grad_enabled())
    if handle is not None:
        handle.wait()
    out = torch.nn.functional.linear(gathered, weight, bias)
    return out


class Linear1D_Row(torch.nn.Module):
    def __init__(self, in_features, out_features, process_group=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.process_group = process_group

    def forward(self, x):
        out = torch.nn.functional.linear(x, self.weight)
        return reduce_forward(out, self.process_group)
