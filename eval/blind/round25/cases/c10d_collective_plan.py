# adapted from pytorch/pytorch torch/distributed/distributed_c10d.py
from typing import NamedTuple

import torch
from torch._C._distributed_c10d import AllreduceCoalescedOptions, ReduceOp


class _CollectivePlan(NamedTuple):
    async_op: bool
    coalesce: bool


def _supports_coalescing(group):
    return group is not None and group.name() == "nccl"


def _plan_for_grad_mode(group) -> _CollectivePlan:
    grad = torch.is_grad_enabled()
    return _CollectivePlan(async_op=grad, coalesce=grad and _supports_coalescing(group))


def all_reduce_buckets(tensors, op=ReduceOp.SUM, group=None):
    plan = _plan_for_grad_mode(group)
    if plan.coalesce:
        opts = AllreduceCoalescedOptions()
        opts.reduceOp = op
        return group.allreduce_coalesced(tensors, opts)
    works = [all_reduce(t, op=op, group=group, async_op=plan.async_op) for t in tensors]
    return works
