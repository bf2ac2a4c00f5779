import contextlib
from typing import Callable, Iterator, List, Optional, Union

import torch

from .p2p_communication import recv_forward, send_forward
from .utils import deallocate_output_tensor, get_tensor_shapes, listify_model


def forward_step(forward_step_func, data_iterator, model, num_microbatches, input_tensor,
                 forward_data_store, config, checkpoint_activations_microbatch=None):
    if config.timers is not None:
        config.timers("forward-compute", log_level=2).start()
    set_input_tensor = getattr(model, "set_input_tensor")
    set_input_tensor(input_tensor)
    context_manager = torch.autocast("cuda", dtype=config.autocast_dtype) if config.enable_autocast \
        else contextlib.nullcontext()
    with context_manager:
        if checkpoint_activations_microbatch is None:
            output_tensor, loss_func = forward_step_func(data_iterator, model)
        else:
            output_tensor, loss_func = forward_step_func(data_iterator, model, checkpoint_activations_microbatch)
    if config.is_last_stage:
        output_tensor = loss_func(output_tensor)
        forward_data_store.append(output_tensor)
    if config.timers is not None:
        config.timers("forward-compute").stop()
    return [output_tensor]


def forward_backward_pipelining_without_interleaving(
    *, forward_step_func, data_iterator, model, num_microbatches: int, seq_length: int,
    micro_batch_size: int, config, forward_only: bool = False,
):
    model = listify_model(model)[0]
    grad_enabled = torch.is_grad_enabled()
    tensor_shapes = get_tensor_shapes(seq_length, micro_batch_size, config.hidden_size,
                                      config.sequence_parallel, config.tensor_model_parallel_size)
    num_warmup_microbatches = min(config.pipeline_world_size - config.pipeline_rank - 1, num_microbatches)
    max_outstanding_backprops = None
    if config.num_microbatches_with_partial_activation_checkpoints is not None and grad_enabled:
        max_outstanding_backprops = num_warmup_microbatches + 1

    input_tensors, output_tensors, forward_data_store = [], [], []
    next_input, reqs = recv_forward(tensor_shapes, config, config.is_first_stage, overlap_p2p=grad_enabled)
    for i in range(num_microbatches):
        checkpoint_activations_microbatch = None
        if max_outstanding_backprops is not None:
            checkpoint_activations_microbatch = (
                i % max_outstanding_backprops >= config.num_microbatches_with_partial_activation_checkpoints
            )
        for req in reqs:
            req.wait()
        input_tensor = next_input
        if i + 1 < num_microbatches:
            next_input, reqs = recv_forward(tensor_shapes, config, config.is_first_stage, overlap_p2p=grad_enabled)
        output_tensor = forward_step(forward_step_func, data_iterator, model, num_microbatches,
                                     input_tensor[0], forward_data_store, config,
                                     checkpoint_activations_microbatch)
        send_forward(output_tensor, config, config.is_last_stage)
        if not forward_only:
            input_tensors.append(input_tensor)
            output_tensors.append(output_tensor)
            deallocate_output_tensor(output_tensor[0], config.deallocate_pipeline_outputs and grad_enabled)
    return forward_data_store
