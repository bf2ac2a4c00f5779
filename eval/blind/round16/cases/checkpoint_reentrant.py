# adapted from pytorch/pytorch torch/utils/checkpoint.py
import contextlib
import functools
import warnings

import torch
from torch.utils.checkpoint import (
    _checkpoint_without_reentrant_generator,
    _get_autocast_kwargs,
    _infer_device_type,
    check_backward_validity,
    detach_variable,
    get_device_states,
    noop_context_fn,
    set_device_states,
)


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.device_type = _infer_device_type(*args)
        ctx.device_autocast_kwargs, ctx.cpu_autocast_kwargs = _get_autocast_kwargs(ctx.device_type)
        if preserve_rng_state:
            ctx.fwd_cpu_state = torch.get_rng_state()
            ctx.had_device_in_fwd = True
            ctx.fwd_devices, ctx.fwd_device_states = get_device_states(*args)

        ctx.inputs = []
        ctx.tensor_indices = []
        tensor_inputs = []
        for i, arg in enumerate(args):
            if torch.is_tensor(arg):
                tensor_inputs.append(arg)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(arg)
        ctx.save_for_backward(*tensor_inputs)

        with torch.no_grad():
            outputs = run_function(*args)
        return outputs

    @staticmethod
    def backward(ctx, *args):
        inputs = list(ctx.inputs)
        for i, idx in enumerate(ctx.tensor_indices):
            inputs[idx] = ctx.saved_tensors[i]
        rng_devices = ctx.fwd_devices if ctx.preserve_rng_state and ctx.had_device_in_fwd else []
        with torch.random.fork_rng(devices=rng_devices, enabled=ctx.preserve_rng_state, device_type=ctx.device_type):
            if ctx.preserve_rng_state:
                torch.set_rng_state(ctx.fwd_cpu_state)
                if ctx.had_device_in_fwd:
                    set_device_states(ctx.fwd_devices, ctx.fwd_device_states, device_type=ctx.device_type)
            detached_inputs = detach_variable(tuple(inputs))
            with torch.set_grad_enabled(True), torch.amp.autocast(ctx.device_type, **ctx.device_autocast_kwargs):
                outputs = ctx.run_function(*detached_inputs)
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        outputs_with_grad = [o for o in outputs if torch.is_tensor(o) and o.requires_grad]
        torch.autograd.backward(outputs_with_grad, args[: len(outputs_with_grad)])
        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else None for inp in detached_inputs)
        return (None, None) + grads


def _checkpoint_impl(
    function,
    args,
    kwargs,
    *,
    use_reentrant=None,
    preserve_rng_state=True,
    context_fn=noop_context_fn,
    determinism_check="default",
    debug=False,
    early_stop=True,
):
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.")
        use_reentrant = True

    # Nothing will be recomputed if no graph is recorded, so skip the wrapper
    # entirely; the forward computation is identical either way.
    if not torch.is_grad_enabled():
        return function(*args, **kwargs)

    # Only stash RNG state when a recompute can happen later.
    preserve = preserve_rng_state and torch.is_grad_enabled()

    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    else:
        gen = _checkpoint_without_reentrant_generator(
            function, preserve, context_fn, determinism_check, debug, early_stop, *args, **kwargs
        )
        next(gen)
        ret = function(*args, **kwargs)
        try:
            next(gen)
        except StopIteration:
            pass
        return ret
