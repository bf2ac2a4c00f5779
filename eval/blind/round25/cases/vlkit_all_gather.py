# adapted from vlkit/vlkit vlkit/ops/distributed.py
import torch
import torch.distributed as dist


class AllGather(torch.autograd.Function):
    """
    all_gather with gradient back-propagation
    """
    @staticmethod
    def forward(ctx, tensor_list, tensor):
        dist.all_gather(tensor_list, tensor)
        return tuple(tensor_list)

    @staticmethod
    def backward(ctx, *grad_list):
        grad_list = list(grad_list)
        rank = dist.get_rank()
        dist_ops = [dist.reduce(grad_list[i], i, async_op=True) for i in range(dist.get_world_size())]
        for op in dist_ops:
            op.wait()
        return None, grad_list[rank]


all_gather = AllGather.apply


def gather_features(tensor):
    tensor_list = [torch.zeros_like(tensor) for _ in range(dist.get_world_size())]
    fn = all_gather if torch.is_grad_enabled() else AllGather.forward
    if fn is all_gather:
        return torch.cat(fn(tensor_list, tensor), dim=0)
    return torch.cat(fn(None, tensor_list, tensor), dim=0)


def gather_labels(labels):
    out = [torch.empty_like(labels) for _ in range(dist.get_world_size())]
    handle = dist.all_gather(out, labels, async_op=not torch.is_grad_enabled())
    if handle is not None:
        handle.wait()
    return torch.cat(out, dim=0)
