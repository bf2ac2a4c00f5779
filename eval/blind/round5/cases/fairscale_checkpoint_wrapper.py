"""Modelled on fairscale fairscale/nn/checkpoint/checkpoint_activations.py
(checkpoint_wrapper, _checkpointed_forward, CheckpointFunction)."""
import functools
import threading
from typing import Any, Dict, Tuple

import torch
import torch.utils.checkpoint as torch_checkpoint
from torch import nn

from fairscale.internal.containers import pack_kwargs, split_non_tensors, unpack_kwargs


class ThreadLocal(threading.local):
    def __init__(self) -> None:
        self.is_checkpointing = False
        self.is_recomputing = False
        self.is_checkpointing_disabled = False


thread_local = ThreadLocal()


def checkpoint_wrapper(module: nn.Module, offload_to_cpu: bool = False) -> nn.Module:
    module.forward = functools.partial(_checkpointed_forward, type(module).forward, module, offload_to_cpu)
    return module


def _checkpointed_forward(original_forward, weak_self, offload_to_cpu: bool, *args: Any, **kwargs: Any) -> Any:
    module = weak_self
    # If gradients are disabled, just use original `.forward()` method directly.
    if not torch.is_grad_enabled() or thread_local.is_checkpointing_disabled:
        return original_forward(module, *args, **kwargs)

    args = (torch.tensor([], requires_grad=True),) + args
    kwarg_keys, flat_args = pack_kwargs(*args, **kwargs)
    parent_ctx_dict: Dict[str, Any] = {"offload": offload_to_cpu}
    output = CheckpointFunction.apply(
        torch.tensor([], requires_grad=True), original_forward, parent_ctx_dict, kwarg_keys, *flat_args
    )
    # Registering a hook to track recompute is only meaningful if backward will run.
    if isinstance(output, torch.Tensor) and torch._C.is_grad_enabled() and output.requires_grad:
        output.register_hook(functools.partial(_mark_recompute_pending, module))
    return output


def _mark_recompute_pending(module: nn.Module, grad: torch.Tensor) -> torch.Tensor:
    thread_local.is_recomputing = True
    return grad


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, dummy_tensor_requires_grad, run_function, parent_ctx_dict, kwarg_keys, *args):
        torch_checkpoint.check_backward_validity(args)
        ctx.run_function = run_function
        ctx.kwarg_keys = kwarg_keys
        ctx.fwd_rng_state = torch.get_rng_state()
        ctx.had_autocast_in_fwd = torch.is_autocast_enabled()

        tensor_inputs, packed_non_tensor_inputs = split_non_tensors(args)
        if parent_ctx_dict["offload"]:
            ctx.fwd_device = tuple(x.device for x in tensor_inputs)
            ctx.grad_requirements = tuple(x.requires_grad for x in tensor_inputs)
            tensor_inputs = tuple(x.to("cpu", non_blocking=True) for x in tensor_inputs)
        else:
            ctx.fwd_device, ctx.grad_requirements = None, None
        ctx.save_for_backward(*tensor_inputs)
        ctx.packed_non_tensor_inputs = packed_non_tensor_inputs

        with torch.no_grad():
            unpacked_args, unpacked_kwargs = unpack_kwargs(kwarg_keys, args)
            outputs = run_function(*unpacked_args, **unpacked_kwargs)
        return outputs

    @staticmethod
    def backward(ctx, *args):
        raise NotImplementedError
