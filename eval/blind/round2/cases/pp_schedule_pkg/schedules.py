# Modelled on Megatron-LM megatron/core/pipeline_parallel/schedules.py
import torch

from megatron.core.pipeline_parallel.schedules import backward_step, forward_step
from megatron.core.utils import get_model_config

from .p2p_communication import P2PCommunicator


def deallocate_output_tensor(out, deallocate_pipeline_outputs=False):
    """Pseudo-deallocate the output tensor's '.data' field once it has been sent downstream;
    from then on only its '.grad_fn' is needed (for backward)."""
    if (out is None) or (not deallocate_pipeline_outputs):
        return
    assert out._base is None, "counter-productive to free a view of another tensor."
    out.data = torch.empty((1,), device=out.device, dtype=out.dtype)


def forward_backward_pipelining_without_interleaving(*, forward_step_func, data_iterator, model, num_microbatches,
                                                    seq_length, micro_batch_size, pp_group,
                                                    forward_only: bool = False):
    config = get_model_config(model)
    # evaluation calls this under torch.no_grad() with forward_only=True
    grad_enabled = torch.is_grad_enabled()
    p2p = P2PCommunicator(pp_group=pp_group, config=config)
    tensor_shape = (seq_length, micro_batch_size, config.hidden_size)

    input_tensors, output_tensors, forward_data_store = [], [], []
    input_tensor = None
    fwd_wait_handles = None
    for k in range(num_microbatches):
        if fwd_wait_handles is not None:
            for req in fwd_wait_handles:
                req.wait()
            fwd_wait_handles = None
        output_tensor, _ = forward_step(forward_step_func, data_iterator, model, num_microbatches, input_tensor,
                                        forward_data_store, config)
        recv_prev = k < num_microbatches - 1
        if not forward_only:
            input_tensors.append(input_tensor)
            output_tensors.append(output_tensor)
        if config.overlap_p2p_comm:
            input_tensor_next, fwd_wait_handles = p2p.send_forward_recv_forward(
                output_tensor, recv_prev, tensor_shape, overlap_p2p_comm=True, grad_enabled=grad_enabled
            )
        else:
            input_tensor_next = p2p.send_forward_recv_forward(
                output_tensor, recv_prev, tensor_shape, grad_enabled=grad_enabled
            )
            if grad_enabled:
                # the send has completed; only output_tensor.grad_fn is needed from here on
                deallocate_output_tensor(output_tensor, config.deallocate_pipeline_outputs)
        input_tensor = input_tensor_next

    if not forward_only:
        for k in range(num_microbatches):
            input_tensor_grad = backward_step(input_tensors.pop(0), output_tensors.pop(0), None, None, config)
            p2p.send_backward(input_tensor_grad, tensor_shape)
    return forward_data_store
