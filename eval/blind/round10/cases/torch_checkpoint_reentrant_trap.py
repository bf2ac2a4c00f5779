# Adapted from pytorch/pytorch torch/utils/checkpoint.py (CheckpointFunction, checkpoint)
import torch


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.had_autocast = torch.is_autocast_enabled()  # look-alike: autocast state
        if preserve_rng_state:
            ctx.fwd_cpu_state = torch.get_rng_state()
        ctx.save_for_backward(*[a if torch.is_tensor(a) else None for a in args])
        with torch.no_grad():
            outputs = run_function(*args)
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        inputs = [t.detach().requires_grad_(t.requires_grad) for t in ctx.saved_tensors]
        with torch.enable_grad():
            outputs = ctx.run_function(*inputs)
        torch.autograd.backward(outputs, grads)
        return (None, None) + tuple(i.grad for i in inputs)


def checkpoint(function, *args, use_reentrant=True, preserve_rng_state=True):
    if not torch.is_grad_enabled():
        return function(*args)
    if use_reentrant:
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    return torch.utils.checkpoint.checkpoint(function, *args, use_reentrant=False)
