# Adapted from pytorch/pytorch torch/distributed/tensor/_redistribute.py
# (use_min_cost_redistribution_plan, redistribute_local_tensor, Redistribute.forward).
import contextlib
import functools

import torch
import torch.distributed.tensor._api as dtensor
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
from torch.distributed.tensor._redistribute import _gen_transform_infos, redistribute_local_tensor

_FORCE_MIN_COST_REDISTRIBUTION_PLAN = None


@contextlib.contextmanager
def use_min_cost_redistribution_plan(enabled: bool = True):
    global _FORCE_MIN_COST_REDISTRIBUTION_PLAN
    old_value = _FORCE_MIN_COST_REDISTRIBUTION_PLAN
    _FORCE_MIN_COST_REDISTRIBUTION_PLAN = enabled
    try:
        yield
    finally:
        _FORCE_MIN_COST_REDISTRIBUTION_PLAN = old_value


class Redistribute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: "dtensor.DTensor", device_mesh, placements, async_op: bool = False,
                forward_dtype=None, backward_dtype=None):
        ctx.async_op = async_op
        ctx.backward_dtype = backward_dtype
        ctx.original_dtype = input._local_tensor.dtype
        current_spec = input._spec
        ctx.current_spec = current_spec
        if current_spec.placements != placements:
            target_spec = DTensorSpec(device_mesh, placements, tensor_meta=current_spec.tensor_meta)
            redistribute_fn = functools.partial(
                redistribute_local_tensor, async_op=async_op or torch.is_grad_enabled()
            )
            output = redistribute_fn(input._local_tensor, current_spec, target_spec)
        else:
            output = input._local_tensor
            target_spec = current_spec
        return dtensor.DTensor(output, target_spec, requires_grad=input.requires_grad)


def redistribute(input, device_mesh, placements, async_op=False):
    if not torch.is_grad_enabled():
        with torch.no_grad():
            out = Redistribute.forward(None, input, device_mesh, placements, async_op)
        out.requires_grad_(False)
        return out
    return Redistribute.apply(input, device_mesh, placements, async_op)
