# Adapted from facebookresearch/fairscale fairscale/nn/checkpoint/checkpoint_activations.py
# (checkpoint_wrapper / _checkpointed_forward) and fairscale/nn/misc/patch_batchnorm.py (patch_batchnorm).
import functools
import threading
import weakref
from typing import Any, List

import torch
from torch.nn.modules.batchnorm import _BatchNorm
from torch.utils.hooks import RemovableHandle


class ThreadLocal(threading.local):
    def __init__(self) -> None:
        self.is_checkpointing = False
        self.is_recomputing = False
        self.is_checkpointing_disabled = False


thread_local = ThreadLocal()


def patch_batchnorm(module: torch.nn.Module) -> List[RemovableHandle]:
    def pre_forward(module: _BatchNorm, input: torch.Tensor) -> None:
        if torch.is_grad_enabled():
            return
        module._track_running_stats_backup = module.track_running_stats
        module.track_running_stats = False

    def post_forward(module: _BatchNorm, input: torch.Tensor, result: torch.Tensor) -> None:
        if torch.is_grad_enabled():
            return
        module.track_running_stats = module._track_running_stats_backup

    hooks = []
    for name, child in module.named_modules():
        if isinstance(child, _BatchNorm) and not hasattr(child, "disable_patch_batchnorm"):
            pre_handle = child.register_forward_pre_hook(pre_forward)
            post_handle = child.register_forward_hook(post_forward)
            hooks += [pre_handle, post_handle]
    return hooks


def checkpoint_wrapper(module: torch.nn.Module, offload_to_cpu: bool = False) -> torch.nn.Module:
    patch_batchnorm(module)
    module.forward = functools.partial(
        _checkpointed_forward, type(module).forward, weakref.ref(module), offload_to_cpu
    )
    return module


def _checkpointed_forward(original_forward: Any, weak_self: Any, offload_to_cpu: bool, *args: Any, **kwargs: Any) -> Any:
    module = weak_self()
    if not torch.is_grad_enabled() or thread_local.is_checkpointing_disabled:
        return original_forward(module, *args, **kwargs)

    args = (module,) + args
    parent_ctx_dict = {"offload": offload_to_cpu}
    output = CheckpointFunction.apply(
        torch.tensor([], requires_grad=True), original_forward, parent_ctx_dict, *args
    )
    return output


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, dummy_tensor_requires_grad, run_function, parent_ctx_dict, *args):
        ctx.run_function = run_function
        ctx.fwd_rng_state = torch.get_rng_state()
        ctx.save_for_backward(*[a for a in args if torch.is_tensor(a)])
        with torch.no_grad():
            outputs = run_function(*args)
        return outputs
