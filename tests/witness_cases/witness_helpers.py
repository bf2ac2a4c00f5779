"""Small modules for the in-process witness tests (one rank, gloo)."""

import torch
import torch.distributed as dist
from torch import nn


def counted_kernel(x):
    """A function the tests count with a probe (as the TE harness counts UserBuffers calls)."""
    return x * 2


class FastPathUnderNoGrad(nn.Module):
    """Calls ``counted_kernel`` only when grad is off: a probe-only divergence."""

    def forward(self, x):
        if not torch.is_grad_enabled():
            x = counted_kernel(x)
        else:
            x = x * 2
        return x.sum(dim=0)


class EvalSwitchedByGradMode(nn.Module):
    """Megatron's CUDA-graph runner: the wrapped layer switched to eval() when grad is off."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x):
        self.inner.train(torch.is_grad_enabled())
        return self.inner(x)


class AsyncReduce(nn.Module):
    """An async all-reduce with the grad on, a sync one without."""

    def forward(self, x):
        y = x * 1
        work = dist.all_reduce(y, async_op=torch.is_grad_enabled())
        if work is not None:
            work.wait()
        return y


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        dist.all_reduce(y)
        return torch.nn.functional.gelu(y)


class ThreeCollectives(nn.Module):
    """A plain c10d all-gather and all-reduce, and a functional all-reduce."""

    def forward(self, x):
        import torch.distributed._functional_collectives as funcol

        out = x.new_empty((x.shape[0] * dist.get_world_size(), *x.shape[1:]))
        dist.all_gather_into_tensor(out, x)
        dist.all_reduce(out)
        return funcol.all_reduce(out, "sum", dist.group.WORLD) + 1
