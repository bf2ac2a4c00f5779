import contextlib
from typing import Callable, Iterator, List, Optional, Union

import torch

from megatron.core import parallel_state
from megatron.core.pipeline_parallel import p2p_communication
from megatron.core.utils import get_model_config


def deallocate_output_tensor(out, deallocate_pipeline_outputs=False):
    if (out is None) or (not deallocate_pipeline_outputs):
        return
    out.data = torch.empty((1,), device=out.device, dtype=out.dtype)


def forward_step(forward_step_func, data_iterator, model, num_microbatches, input_tensor,
                 forward_data_store, config, collect_non_loss_data=False):
    model.set_input_tensor(input_tensor)
    output_tensor, loss_func = forward_step_func(data_iterator, model)
    if parallel_state.is_pipeline_last_stage():
        outputs = loss_func(output_tensor)
        loss, loss_reduced = outputs[0], outputs[1]
        output_tensor = loss / num_microbatches
        forward_data_store.append(loss_reduced)
    return output_tensor


def forward_backward_pipelining_without_interleaving(
    *, forward_step_func, data_iterator, model, num_microbatches: int, seq_length: int,
    micro_batch_size: int, decoder_seq_length: Optional[int] = None,
    forward_only: bool = False, collect_non_loss_data: bool = False,
):
    config = get_model_config(model)
    grad_active = torch.is_grad_enabled()
    tensor_shape = [seq_length, micro_batch_size, config.hidden_size]

    num_warmup_microbatches = (
        parallel_state.get_pipeline_model_parallel_world_size()
        - parallel_state.get_pipeline_model_parallel_rank() - 1
    )
    num_warmup_microbatches = min(num_warmup_microbatches, num_microbatches)
    num_microbatches_remaining = num_microbatches - num_warmup_microbatches

    keep_activations = not forward_only and grad_active
    input_tensors: List = []
    output_tensors: List = []
    forward_data_store: List = []

    overlap_p2p = config.overlap_p2p_comm if grad_active else False

    for i in range(num_warmup_microbatches):
        input_tensor = p2p_communication.recv_forward(tensor_shape, config, overlap_p2p_comm=overlap_p2p)
        output_tensor = forward_step(forward_step_func, data_iterator, model, num_microbatches,
                                     input_tensor, forward_data_store, config, collect_non_loss_data)
        p2p_communication.send_forward(output_tensor, config, overlap_p2p_comm=overlap_p2p)
        if keep_activations:
            input_tensors.append(input_tensor)
            output_tensors.append(output_tensor)
            deallocate_output_tensor(output_tensor[0] if isinstance(output_tensor, list) else output_tensor,
                                     config.deallocate_pipeline_outputs)

    if num_microbatches_remaining > 0:
        input_tensor = p2p_communication.recv_forward(tensor_shape, config, overlap_p2p_comm=overlap_p2p)

    for i in range(num_microbatches_remaining):
        last_iteration = i == (num_microbatches_remaining - 1)
        output_tensor = forward_step(forward_step_func, data_iterator, model, num_microbatches,
                                     input_tensor, forward_data_store, config, collect_non_loss_data)
        if not keep_activations:
            p2p_communication.send_forward(output_tensor, config, overlap_p2p_comm=overlap_p2p)
            if not last_iteration:
                input_tensor = p2p_communication.recv_forward(tensor_shape, config, overlap_p2p_comm=overlap_p2p)
        else:
            output_tensor_grad = p2p_communication.send_forward_recv_backward(output_tensor, tensor_shape, config)
            input_tensors.append(input_tensor)
            output_tensors.append(output_tensor)

    return forward_data_store
