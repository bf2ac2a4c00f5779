# Adapted from NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py
# (forward_step, backward_step, forward_backward_pipelining_without_interleaving steady-state loop).
import contextlib

import torch

from megatron.core.pipeline_parallel import p2p_communication
from megatron.core.pipeline_parallel.schedules import deallocate_output_tensor, forward_step_calc_loss


def forward_step(forward_step_func, data_iterator, model, num_microbatches, input_tensor, forward_data_store,
                 config, cp_group_size, collect_non_loss_data=False, is_last_stage=True):
    if not isinstance(input_tensor, list):
        input_tensor = [input_tensor]
    model.set_input_tensor(input_tensor)
    if config.enable_autocast and not torch.is_inference_mode_enabled():
        context_manager = torch.autocast("cuda", dtype=config.autocast_dtype)
    else:
        context_manager = contextlib.nullcontext()
    with context_manager:
        output_tensor, loss_func = forward_step_func(data_iterator, model)
    return forward_step_calc_loss(model, output_tensor, loss_func, config, None, collect_non_loss_data,
                                  num_microbatches, forward_data_store, cp_group_size, is_last_stage)


def backward_step(input_tensor, output_tensor, output_tensor_grad, config):
    for x in input_tensor:
        if x is not None:
            x.retain_grad()
    if output_tensor[0].requires_grad:
        torch.autograd.backward(output_tensor[0], grad_tensors=output_tensor_grad[0])
    return [x.grad if x is not None else None for x in input_tensor]


def steady_state(forward_step_func, data_iterator, model, num_microbatches_remaining, tensor_shape, config,
                 forward_only, forward_data_store, cp_group_size):
    input_tensors, output_tensors = [], []
    input_tensor = p2p_communication.recv_forward(tensor_shape, config)
    batch_p2p = config.batch_p2p_comm if torch.is_grad_enabled() else False
    for i in range(num_microbatches_remaining):
        output_tensor, num_tokens = forward_step(forward_step_func, data_iterator, model,
                                                 num_microbatches_remaining, input_tensor, forward_data_store,
                                                 config, cp_group_size)
        if forward_only:
            p2p_communication.send_forward(output_tensor, config)
            if i != num_microbatches_remaining - 1:
                input_tensor = p2p_communication.recv_forward(tensor_shape, config)
            continue
        output_tensor_grad = p2p_communication.send_forward_recv_backward(
            output_tensor, tensor_shape, config, batch_p2p_comm=batch_p2p
        )
        input_tensors.append(input_tensor)
        output_tensors.append(output_tensor)
        if config.deallocate_pipeline_outputs and torch.is_grad_enabled():
            deallocate_output_tensor(output_tensor[0], config.deallocate_pipeline_outputs)
        input_tensor = input_tensors.pop(0)
        output_tensor = output_tensors.pop(0)
        input_tensor_grad = backward_step([input_tensor], output_tensor, [output_tensor_grad], config)
        input_tensor = p2p_communication.send_backward_recv_forward(input_tensor_grad[0], tensor_shape, config)
    return forward_data_store
