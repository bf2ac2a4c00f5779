from dataclasses import dataclass

import torch

from .coordinator import PartitionedParameterCoordinator


@dataclass
class FetchContext:
    forward: bool
    needs_backward: bool


class ZeROOrderedDict(dict):
    pass


class PreBackwardFunctionForModule(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module, outputs):
        ctx.module = module
        return outputs.detach()

    @staticmethod
    def backward(ctx, *args):
        ctx.module.pre_bwd_fn(ctx.module)
        return (None,) + args


def register_zero3_hooks(module: torch.nn.Module, coordinator: PartitionedParameterCoordinator):
    def _pre_forward_module_hook(mod, *args):
        ctx = FetchContext(forward=True, needs_backward=torch.is_grad_enabled())
        mod._zero_fetch_ctx = ctx
        coordinator.fetch_sub_module(mod, ctx)

    def _post_forward_module_hook(mod, inputs, output):
        ctx = mod._zero_fetch_ctx
        coordinator.release_sub_module(mod, ctx)
        if ctx.needs_backward and torch.is_tensor(output) and output.requires_grad:
            output = PreBackwardFunctionForModule.apply(mod, output)
        return output

    for m in module.modules():
        m.register_forward_pre_hook(_pre_forward_module_hook)
        m.register_forward_hook(_post_forward_module_hook)
