import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

from .cp import choose_rotate_method, maybe_enable_context_parallel
from .loss import build_loss_fn


def make_step_context(job_config, model, cp_mesh, buffers, seq_dims):
    needs_backward = torch.is_grad_enabled()
    ac_mode = job_config.activation_checkpoint.mode
    rotate = choose_rotate_method(job_config.parallelism.context_parallel_rotate_method, needs_backward)
    loss_fn = build_loss_fn(job_config, needs_backward)

    def run(inputs, labels):
        forward = checkpoint_wrapper(model) if needs_backward and ac_mode == "full" else model
        with maybe_enable_context_parallel(cp_mesh, buffers, seq_dims, {labels}, rotate):
            pred = forward(inputs)
            loss = loss_fn(pred, labels)
        return loss

    return run
